// The sprite files a style keeps beside it (`sprite: "sprites/city"` → sprites/city[@2x].json|png), read once per
// revision of the style; for the sprite routes and the renderer alike.
import { readFile } from 'node:fs/promises'
import { NotFound } from '../errors.js'
import { spritePathOf } from './rewrite.js'

const SUFFIX = /^(@[23]x)?\.(json|png)$/
export const SPRITE_TYPES = { json: 'application/json; charset=utf-8', png: 'image/png' }

export class SpriteFiles {
  constructor (styles) {
    this.styles = styles
    this.files = new Map() // path → { revision, bytes }
  }

  /**
   * The bytes of a style's sprite file: `spriteId` undefined for the single `sprite`, `suffix` like '@2x.png'.
   * @returns {Promise<{ bytes: Buffer, type: string }>} NotFound when the style has no such sprite of its own.
   */
  async read (style, spriteId, suffix) {
    const m = SUFFIX.exec(suffix)
    if (m === null) throw new NotFound('no such sprite file (sprite[@2x].json or .png)')
    const path = spritePathOf(style, spriteId)
    const file = path === null ? null : this.styles.fileOf(style, `${path}${m[1] ?? ''}.${m[2]}`)
    if (file === null) throw new NotFound(`style '${style.id}' has no sprite${spriteId === undefined ? '' : ` '${spriteId}'`} of its own`)
    let known = this.files.get(file)
    if (known === undefined || known.revision !== style.revision) {
      const bytes = await readFile(file).catch(() => null)
      if (bytes === null) throw new NotFound(`style '${style.id}': sprite file missing`)
      if (this.files.size > 256) this.files.clear()
      known = { revision: style.revision, bytes }
      this.files.set(file, known)
    }
    return { bytes: known.bytes, type: SPRITE_TYPES[m[2]] }
  }
}

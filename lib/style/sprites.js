// The sprite files a style keeps beside it (`sprite: "sprites/city"` → sprites/city[@2x].json|png), read once per load
// of the styles folder (any change in it reloads, as does SIGHUP); for the sprite routes and the renderer alike.
import { readFile } from 'node:fs/promises'
import { NotFound } from '../errors.js'
import { spritePathOf } from './rewrite.js'

const SUFFIX = /^(@[23]x)?\.(json|png)$/
const RATIOS = ['@3x', '@2x', ''] // highest first
export const SPRITE_TYPES = { json: 'application/json; charset=utf-8', png: 'image/png' }

export class SpriteFiles {
  constructor (styles) {
    this.styles = styles
    this.files = new Map() // style id and path → { loads, bytes }
  }

  /**
   * The bytes of a style's sprite file: `spriteId` undefined for the single `sprite`, `suffix` like '@2x.png'.
   * @returns {Promise<{ bytes: Buffer, type: string }>} NotFound when the style has no such sprite of its own.
   */
  async read (style, spriteId, suffix) {
    const m = SUFFIX.exec(suffix)
    if (m === null) throw new NotFound('no such sprite file (sprite[@2x|@3x].json or .png)')
    const path = spritePathOf(style, spriteId)
    if (path === null) throw new NotFound(`style '${style.id}' has no sprite${spriteId === undefined ? '' : ` '${spriteId}'`} of its own`)
    // A ratio the style has no sprite for is answered with the highest one below it that it has, JSON and PNG both
    // (@3x with @2x, either with 1x; the JSON says its pixelRatio, so clients and the renderer scale the icons),
    // rather than drawing a high-DPI map without icons, or failing its render.
    const ratios = RATIOS.slice(RATIOS.indexOf(m[1] ?? ''))
    for (const ratio of ratios) {
      const bytes = await this.bytes(style, `${path}${ratio}.${m[2]}`)
      // A ratio only when its other half is there too: a client pairs the JSON with the PNG it gets next, and 1x
      // positions over a 2x image (or the reverse) garble every icon.
      if (bytes !== null && await this.bytes(style, `${path}${ratio}.${m[2] === 'json' ? 'png' : 'json'}`) !== null) {
        return { bytes, type: SPRITE_TYPES[m[2]] }
      }
    }
    throw new NotFound(`style '${style.id}': sprite file missing`)
  }

  /**
   * A file beside the style, read once per load of the styles (the folder changed, SIGHUP); null when it is missing
   * or outside the styles folder (its real path: a link leading out is not followed). A missing one is looked for
   * again at each call: a sprite put in place is used at once, even where the folder is not watched.
   */
  async bytes (style, relativePath) {
    const key = `${style.id}\0${relativePath}`
    let known = this.files.get(key)
    if (known === undefined || known.loads !== this.styles.loads) {
      const file = await this.styles.fileOf(style, relativePath)
      const bytes = file === null ? null : await readFile(file).catch(() => null)
      if (bytes === null) return null
      if (this.files.size > 256) this.files.clear()
      known = { loads: this.styles.loads, bytes }
      this.files.set(key, known)
    }
    return known.bytes
  }
}

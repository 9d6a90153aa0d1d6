// Marker icons of static images, as tileserver-gl takes them (`marker=lon,lat|pin.png|scale:2|offset:0,-4`): image
// files in the icons folder (config `icons`), or http(s) URLs where `render.allowRemoteMarkerIcons` allows them. The
// icons of one image are packed into a sprite sheet that the style of that render names as a second sprite
// (`tc://markers/<key>`, answered by the renderer from here), so the engine draws them like any icon of the style.
import { createHash } from 'node:crypto'
import { readFile, realpath, stat } from 'node:fs/promises'
import { resolve, sep } from 'node:path'
import { LRUCache } from 'lru-cache'
import sharp from 'sharp'
import { BadRequest } from '../errors.js'
import { outboundFetch } from '../outbound-proxy.js'

export const MARKER_SPRITE_ID = 'tc-markers'
const MAX_ICON_PX = 512 // a side of one icon
const MAX_ICONS = 32 // distinct icons in one image
const SHEET_WIDTH = 2048 // icons are packed in rows this wide
const MAX_REMOTE_BYTES = 1 << 20
const REMOTE_TTL_MS = 10 * 60_000
const KEPT_BYTES = 32 * 2 ** 20 // decoded icons, and sheets, each
const SHEET_FILE = /^([A-Za-z0-9_-]{1,64})(?:@[23]x)?\.(json|png)$/

export class MarkerIcons {
  /**
   * `dir`: the icons folder or null. `allowRemote`: false (default), true (any http(s) URL: the server fetches what
   * a request names, so only where nothing private is reachable from it), or the URL prefixes allowed.
   */
  constructor ({ dir, allowRemote = false }) {
    this.dir = dir
    this.allowRemote = allowRemote
    this.realDir = null
    const bytes = (v) => v.png.length + (v.json?.length ?? 0) + 64
    this.icons = new LRUCache({ maxSize: KEPT_BYTES, sizeCalculation: bytes }) // file or URL → { version, sha1, png, width, height }
    this.sheets = new LRUCache({ maxSize: KEPT_BYTES, sizeCalculation: bytes }) // key → { json, png }
  }

  /**
   * The sprite sheet of these icon names (files in the icons folder or URLs): { url, images } where `images` maps each
   * name to the image id a symbol layer names. BadRequest for an icon that is not there or not an image.
   */
  async sheet (names) {
    const distinct = [...new Set(names)]
    if (distinct.length > MAX_ICONS) throw new BadRequest(`at most ${MAX_ICONS} different marker icons in one image`)
    const found = await Promise.all(distinct.map((name) => this.icon(name)))
    const icons = [...new Set(found)] // `pin.png` and `./pin.png` are one icon
    const key = createHash('sha1').update(icons.map((i) => i.sha1).join('\n')).digest('base64url').slice(0, 20)
    if (!this.sheets.has(key)) {
      // Shelf packing: left to right, a new row when one is full.
      const frames = {}
      const composites = []
      let x = 0
      let y = 0
      let row = 0
      let width = 1
      icons.forEach((icon, i) => {
        if (x + icon.width > SHEET_WIDTH) { x = 0; y += row; row = 0 }
        frames[`i${i}`] = { x, y, width: icon.width, height: icon.height, pixelRatio: 1 }
        composites.push({ input: icon.png, left: x, top: y })
        x += icon.width
        row = Math.max(row, icon.height)
        width = Math.max(width, x)
      })
      const png = await sharp({ create: { width, height: y + row, channels: 4, background: { r: 0, g: 0, b: 0, alpha: 0 } } })
        .composite(composites).png().toBuffer()
      this.sheets.set(key, { json: Buffer.from(JSON.stringify(frames)), png })
    }
    return { url: `tc://markers/${key}`, images: new Map(distinct.map((name, i) => [name, `${MARKER_SPRITE_ID}:i${icons.indexOf(found[i])}`])) }
  }

  /** A sheet's file as the engine asks for it (`<key>[@2x].json|png`; one sheet for every pixel ratio), or null. */
  read (file) {
    const m = SHEET_FILE.exec(file)
    const sheet = m === null ? undefined : this.sheets.get(m[1])
    return sheet === undefined ? null : sheet[m[2]]
  }

  async icon (name) {
    if (/^https?:\/\//i.test(name)) {
      const allowed = this.allowRemote === true || (Array.isArray(this.allowRemote) && this.allowRemote.some((prefix) => name.startsWith(prefix)))
      if (!allowed) throw new BadRequest(`remote marker icons ${this.allowRemote === false ? 'are off' : 'from there are not allowed'} (render.allowRemoteMarkerIcons): put the icon in the icons folder`)
      const known = this.icons.get(name)
      if (known !== undefined) return known
      const icon = await decode(await download(name), name, 'remote')
      this.icons.set(name, icon, { ttl: REMOTE_TTL_MS })
      return icon
    }
    if (this.dir === null) throw new BadRequest(`marker icon '${name}': no icons folder is configured (--icons)`)
    this.realDir ??= await realpath(this.dir).catch(() => null)
    // Resolved with links followed, and refused unless inside the icons folder: a marker never opens another file.
    // A name whose own `..` leaves the folder is refused before the file system is asked anything about it.
    const inside = this.realDir !== null && resolve(`${this.realDir}${sep}${name}`).startsWith(this.realDir + sep)
    const file = inside ? await realpath(`${this.realDir}${sep}${name}`).catch(() => null) : null
    const info = file !== null && file.startsWith(this.realDir + sep) ? await stat(file).catch(() => null) : null
    if (info === null || !info.isFile()) throw new BadRequest(`no marker icon '${name}' in the icons folder`)
    const version = `${info.mtimeMs}:${info.size}`
    const known = this.icons.get(file)
    if (known !== undefined && known.version === version) return known
    const icon = await decode(await readFile(file), name, version)
    this.icons.set(file, icon)
    return icon
  }
}

async function decode (bytes, name, version) {
  let out
  try {
    // Refused before decoding when larger: a small file (an SVG of 16000x16000) cannot make the server draw a huge image.
    out = await sharp(bytes, { limitInputPixels: MAX_ICON_PX * MAX_ICON_PX }).ensureAlpha().png().toBuffer({ resolveWithObject: true })
  } catch {
    throw new BadRequest(`marker icon '${name}' is not an image of at most ${MAX_ICON_PX * MAX_ICON_PX} pixels`)
  }
  const { width, height } = out.info
  if (width > MAX_ICON_PX || height > MAX_ICON_PX) throw new BadRequest(`marker icon '${name}' is larger than ${MAX_ICON_PX} px`)
  return { version, sha1: createHash('sha1').update(out.data).digest('hex'), png: out.data, width, height }
}

/** A remote icon's bytes; one answer for every way it can fail (no redirects followed), so a caller learns nothing. */
async function download (url) {
  try {
    const res = await outboundFetch(url, { signal: AbortSignal.timeout(5000), redirect: 'error' })
    if (!res.ok || res.body === null) throw new Error(String(res.status))
    const chunks = []
    let size = 0
    for await (const chunk of res.body) {
      size += chunk.length
      if (size > MAX_REMOTE_BYTES) throw new Error('too large')
      chunks.push(chunk)
    }
    return Buffer.concat(chunks)
  } catch {
    throw new BadRequest(`marker icon '${url}' could not be fetched (an image of at most 1 MiB, answered 200 without a redirect)`)
  }
}

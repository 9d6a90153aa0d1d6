// The styles of a folder: `NAME/style.json` or `NAME.json`, each a MapLibre style with id NAME. Read whole on load
// (and on every reload); each has a revision, the hash of its bytes, so what was made from an older version (rendered
// tiles) is never taken for the new one.
import { createHash } from 'node:crypto'
import { existsSync } from 'node:fs'
import { readdir, readFile, realpath, stat } from 'node:fs/promises'
import { basename, dirname, join, relative, resolve, sep } from 'node:path'
import { validateStyleMin } from '@maplibre/maplibre-gl-style-spec'
import { LRUCache } from 'lru-cache'
import { NotFound } from '../errors.js'
import { dataPathOf, fileUrlsOf, spritePathOf } from './rewrite.js'
import { OUTSIDE, realFileIn } from '../real-path.js'

const MAX_STYLE_BYTES = 8 * 2 ** 20
const MAX_DATA_BYTES = 64 * 2 ** 20 // as a GeoJSON set (lib/sources/geojson.js): more belongs in tiles
const MAX_ID_LENGTH = 128

/**
 * Why a file or folder name cannot be a style's id, or null: any other name is one (`café`, `Ünï cødé`, `hash#1`), given
 * percent-encoded in links as set names are. Refused: a name with a control character (a line break, which no URL or
 * log line carries as it is), one whose bytes are not UTF-8 (read as U+FFFD, it would name no file), a long one.
 */
function refusedId (name) {
  if (name === '') return 'an empty name'
  if (/\p{Cc}/u.test(name)) return 'its name has a control character'
  if (name.includes('\uFFFD')) return 'its name is not UTF-8'
  if ([...name].length > MAX_ID_LENGTH) return `its name is longer than ${MAX_ID_LENGTH} characters`
  return null
}

/**
 * @typedef {object} Style
 * @property {string} id
 * @property {string} name      the style's own `name`, else its id
 * @property {object} json      the style as written (never changed: answers are rewritten copies)
 * @property {string} revision  hash of the file's bytes (and of the state of the GeoJSON and sprite files it names)
 * @property {string} spriteRevision  hash of the state of its sprite files (each ratio's .json and .png): the engine
 *   loads a sprite once per registration of the style, so a new one is registered anew
 * @property {string} dir       the folder its relative paths (sprites) are resolved against
 * @property {Map<string, {file: string|null, size: number, mtimeMs: number, revision: string}>} dataFiles  the files
 *   its sources name by a relative path (GeoJSON `"data": "points.geojson"`, an image's `"url": "overlay.png"`, a
 *   video's `urls`), by that path as dataPathOf gives it; `file`
 *   (its real path) null when it is missing or not inside the styles or data folders
 */

export class StyleCatalog {
  /**
   * `dataFolders()`: the served data folders and files (lib/catalog/discover.js), where a style's GeoJSON file may
   * also lie (in such a folder, or being such a file).
   */
  constructor ({ dir, log, dataFolders = () => [] }) {
    this.dir = dir
    this.log = log
    this.dataFolders = dataFolders
    /** @type {Map<string, Style>} */
    this.styles = new Map()
    /** @type {Map<string, string>} style id → why it is not served */
    this.broken = new Map()
    this.loads = 0
    this.onLoad = null // called after each load (lib/tile-dir checks rendered tiles against the styles)
    this.knownRoots = null // roots(), as of the latest load
    this.realDir = null // the styles folder's real path, as of the latest load (null: none, or unreadable)
    this.saidOutside = new Set() // the files leading out of the folders already logged, by style and path
    this.saidBroken = new Set() // the broken styles already logged, by id, the file's state and the reason (see load)
    this.saidRefused = new Set() // the names refused as ids already logged (candidates)
    // GeoJSON files' bytes by real path, size and time: a client's request (a 304 too, whose ETag is of the bytes) and
    // the renderer's read a file of up to 64 MiB once, not each time.
    this.dataBytes = new LRUCache({ maxSize: MAX_DATA_BYTES, sizeCalculation: (bytes) => Math.max(1, bytes.length) })
  }

  /** Reads every style again; a style that fails to read keeps no old version and is listed in `broken`. */
  async load () {
    const found = new Map()
    const broken = new Map()
    const saidBroken = new Set()
    this.knownRoots = null
    if (this.dir !== null) {
      this.realDir = await realpath(this.dir).catch(() => null)
      const roots = await this.roots()
      for (const { id, file } of await this.candidates()) {
        if (found.has(id) || broken.has(id)) continue // NAME/style.json wins over NAME.json
        try {
          // Read by its real path, and only inside the styles folder: a style.json that is a link leading out of it
          // is never opened (its JSON error would show the start of another file).
          const real = await realFileIn(file, this.realDir === null ? [] : [this.realDir])
          if (real === null) throw new Error('its style file went away')
          if (real === OUTSIDE) throw new Error('its style file is a link leading out of the styles folder')
          const style = await readStyle(id, file, real.file, roots, (dir, path) => this.fileOf({ id, dir }, path))
          for (const [path, data] of style.dataFiles) if (data.revision === 'outside') this.outside(style, path)
          found.set(id, style)
        } catch (err) {
          broken.set(id, err.message)
          // Once per revision of the broken file: any change in the folder reloads every style, and a style that did
          // not change is no news. Kept only while it is broken, so the same breakage coming back is said again.
          const state = await stat(file).then((i) => `${i.size}-${i.mtimeMs}-${i.ino}`, () => 'gone')
          const said = `${id}\0${state}\0${err.message}`
          saidBroken.add(said)
          if (!this.saidBroken.has(said)) this.log.warn({ style: id, reason: err.message }, 'style not served')
        }
      }
    }
    this.saidBroken = saidBroken
    this.styles = found
    this.broken = broken
    this.loads++ // files beside the styles (sprites) may have changed too: what was read of them is read again
    this.onLoad?.()
  }

  async candidates () {
    let entries
    try {
      entries = await readdir(this.dir, { withFileTypes: true })
    } catch (err) {
      this.log.warn({ err: err.code ?? err.message }, 'styles folder unreadable')
      return []
    }
    const out = []
    for (const e of entries.sort((a, b) => (a.name < b.name ? -1 : 1))) {
      if (e.name.startsWith('.')) continue
      // A folder is a style when it holds a style.json (a fonts or sprites folder beside the styles is not).
      let found = null
      if (e.isDirectory() && existsSync(join(this.dir, e.name, 'style.json'))) found = { id: e.name, file: join(this.dir, e.name, 'style.json') }
      else if (e.isFile() && e.name.endsWith('.json')) found = { id: e.name.slice(0, -5), file: join(this.dir, e.name) }
      if (found === null) continue
      const refused = refusedId(found.id)
      if (refused !== null) this.refused(e.name, refused)
      else if (e.isDirectory()) out.unshift(found)
      else out.push(found)
    }
    return out
  }

  /** Logs a style file or folder whose name cannot be an id, once per name and reason. */
  refused (name, reason) {
    const key = `${name}\0${reason}`
    if (this.saidRefused.has(key) || this.saidRefused.size >= 1000) return
    this.saidRefused.add(key)
    this.log.warn({ file: name, reason }, 'style not served')
  }

  get (id) { return this.styles.get(id) }

  /** The style `id` names, for a route: NotFound saying why when there is none (or it could not be read). */
  served (id) {
    const style = this.styles.get(id)
    if (style === undefined) throw new NotFound(this.broken.has(id) ? `style '${id}' cannot be served: ${this.broken.get(id)}` : `no style '${id}'`)
    return style
  }

  list () { return [...this.styles.values()] }

  /** The real paths a style's GeoJSON file may be at or in: the styles folder and the served data folders and files. */
  async roots () {
    if (this.knownRoots !== null) return this.knownRoots
    const folders = [this.dir, ...this.dataFolders()]
    this.knownRoots = (await Promise.all(folders.map((f) => realpath(f).catch(() => null)))).filter((f) => f !== null)
    return this.knownRoots
  }

  /**
   * The bytes of a file style `id` names by a relative path (`path` as dataPathOf gives it): its real path
   * checked at each call, so a link swapped since the styles were read cannot lead out of the folders, and its bytes
   * read again once its size or time changed. NotFound saying why.
   */
  async readData (id, path) {
    const style = this.served(id)
    const known = style.dataFiles.get(path)
    if (known === undefined) throw new NotFound(`style '${style.id}' names no ${kindOf(path)} '${path}'`)
    const file = await dataFileOf(style.dir, path, await this.roots())
    if (file?.outside) this.outside(style, path)
    if (file === null || file.outside) throw new NotFound(`style '${style.id}': its ${kindOf(path)} '${path}' cannot be read (missing, or outside the styles and data folders)`)
    if (file.size > MAX_DATA_BYTES) throw new NotFound(`style '${style.id}': its ${kindOf(path)} '${path}' is larger than ${MAX_DATA_BYTES / 2 ** 20} MiB`)
    const key = `${file.file}\0${file.size}\0${file.mtimeMs}`
    let bytes = this.dataBytes.get(key)
    if (bytes === undefined) {
      bytes = await readFile(file.file).catch(() => null)
      if (bytes === null) throw new NotFound(`style '${style.id}': its ${kindOf(path)} '${path}' cannot be read`)
      this.dataBytes.set(key, bytes)
    }
    return bytes
  }

  /**
   * A file a style names by a relative path (a sprite), resolved against its folder: its real path (links followed),
   * null when it is missing or would leave the styles folder (`../..`, or a link leading out, logged once), so nothing
   * outside it is ever opened.
   */
  async fileOf (style, path) {
    const full = resolve(style.dir, path)
    const rel = relative(this.dir, full)
    if (rel === '' || rel.startsWith('..') || rel.split(sep).includes('..')) return null
    const real = await realFileIn(full, this.realDir === null ? [] : [this.realDir])
    if (real === OUTSIDE) this.outside(style, relative(style.dir, full).split(sep).join('/'))
    return real === null || real === OUTSIDE ? null : real.file
  }

  /** Logs a file of a style that a link leads out of the folders, once per style and path (it answers 404). */
  outside (style, path) {
    const key = `${style.id}\0${path}`
    if (this.saidOutside.has(key) || this.saidOutside.size >= 1000) return
    this.saidOutside.add(key)
    this.log.warn({ style: style.id, file: path }, 'a file of the style is a link leading out of the styles (and data) folders: not served')
  }
}

/** What a file of a style is, for messages: 'GeoJSON file', else 'file' (an image's, a video's). */
const kindOf = (path) => (/\.(geo)?json$/i.test(path) ? 'GeoJSON file' : 'file')

/**
 * The file a style's relative GeoJSON path names (in the style's folder: dataPathOf never leaves it), when it is there
 * and its real path (links followed) is inside one of `roots`: { file, size, mtimeMs }; OUTSIDE when a link leads out
 * of them (never read); null when there is no such file.
 */
async function dataFileOf (dir, path, roots) {
  const real = await realFileIn(join(dir, ...path.split('/')), roots)
  if (real === null || real === OUTSIDE) return real
  const info = await stat(real.file).catch(() => null)
  return info !== null && info.isFile() ? { file: real.file, size: info.size, mtimeMs: info.mtimeMs } : null
}

/** The files a style's sources name by relative paths: GeoJSON, images, videos (see Style.dataFiles). */
async function dataFilesOf (json, dir, roots) {
  const files = new Map()
  for (const [, url, type] of Object.values(json.sources).flatMap(fileUrlsOf)) {
    const path = dataPathOf(url, type)
    if (path === null || files.has(path)) continue
    const found = await dataFileOf(dir, path, roots)
    // What its rendered tiles were made of: a file changed, added or removed is a new revision of the style. One a
    // link leads out of the folders is drawn as empty, as a path leaving them is (render/style.js).
    const revision = found === null ? 'missing' : found.outside ? 'outside' : `${found.size}-${Math.round(found.mtimeMs)}`
    files.set(path, found === null || found.outside ? { file: null, size: 0, mtimeMs: 0, revision } : { ...found, revision })
  }
  return files
}

const SPRITE_FILES = ['', '@2x', '@3x'].flatMap((ratio) => [`${ratio}.json`, `${ratio}.png`])

/**
 * The state of the sprite files a style keeps beside it (each ratio's .json and .png, of the one `sprite` and of each
 * relative one of a list), in one string: what its rendered icons are drawn from. `fileOf(dir, path)` → the file's
 * real path, or null (StyleCatalog.fileOf: never outside the styles folder).
 */
async function spriteStateOf (json, dir, fileOf) {
  const ids = Array.isArray(json.sprite) ? json.sprite.map((s) => s?.id) : [undefined]
  const paths = new Set(ids.map((spriteId) => spritePathOf({ json }, spriteId)).filter((p) => p !== null))
  const states = []
  for (const path of paths) {
    for (const suffix of SPRITE_FILES) {
      const file = await fileOf(dir, `${path}${suffix}`)
      const info = file === null ? null : await stat(file).catch(() => null)
      states.push(`${path}${suffix}\0${info === null ? 'missing' : `${info.size}-${Math.round(info.mtimeMs)}`}`)
    }
  }
  return states.join('\0')
}

/**
 * Style `id` from `file` (its path in the styles folder), read from `real` (its real path, checked by the caller);
 * `fileOf(dir, path)`: a file beside it (its sprites), as StyleCatalog.fileOf finds it.
 */
async function readStyle (id, file, real, roots, fileOf) {
  const info = await stat(real).catch(() => null)
  if (info === null) throw new Error('its style file went away')
  if (info.size > MAX_STYLE_BYTES) throw new Error(`larger than ${MAX_STYLE_BYTES / 2 ** 20} MiB`)
  const bytes = await readFile(real)
  let json
  try {
    json = JSON.parse(bytes.toString('utf8').replace(/^\uFEFF/, '')) // a byte order mark, as Windows editors write: RFC 8259 lets parsers ignore it
  } catch (err) {
    throw new Error(`not valid JSON: ${err.message.replaceAll(file, basename(file))}`)
  }
  if (json === null || typeof json !== 'object' || Array.isArray(json)) throw new Error('not a style object')
  if (json.version !== 8) throw new Error(`style version ${JSON.stringify(json.version)}: only version 8 is a MapLibre style`)
  if (!Array.isArray(json.layers)) throw new Error('no layers list')
  if (json.sources === null || typeof json.sources !== 'object') throw new Error('no sources object')
  // Checked against the style spec as MapLibre checks it before drawing: the engine aborts its whole process on some
  // invalid styles (a raster layer over a vector source), which would take down renders of every style, again and
  // again. tileserver-gl refuses such a style too.
  const problems = validateStyleMin(json)
  if (problems.length > 0) {
    const listed = problems.slice(0, 3).map((p) => p.message).join('; ')
    throw new Error(`not a valid MapLibre style: ${listed}${problems.length > 3 ? ` (and ${problems.length - 3} more)` : ''}`)
  }
  const dir = dirname(file)
  const dataFiles = await dataFilesOf(json, dir, roots)
  const revision = createHash('sha1').update(bytes)
  for (const [path, data] of dataFiles) revision.update(`\0${path}\0${data.revision}`)
  // A sprite replaced is a new revision too: its rendered tiles are drawn anew, with the icons clients now get.
  const spriteRevision = createHash('sha1').update(await spriteStateOf(json, dir, fileOf)).digest('base64url').slice(0, 12)
  revision.update(`\0${spriteRevision}`)
  return {
    id,
    name: typeof json.name === 'string' && json.name !== '' ? json.name : id,
    json,
    revision: revision.digest('base64url').slice(0, 12),
    spriteRevision,
    dir,
    dataFiles,
  }
}

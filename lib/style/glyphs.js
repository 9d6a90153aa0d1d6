// Glyph ranges (MapLibre's SDF glyph PBFs): a fonts folder of `Font Name/0-255.pbf`, and font stacks merged glyph by
// glyph. The format (glyphs → fontstack {name, range, glyphs}) is three fields deep, so merging needs only each glyph's
// id and its bytes as they are: pbf (already the project's protobuf library) reads and writes them. The package made
// for this (@mapbox/glyph-pbf-composite) has had no release since 2016 and brings a second protobuf compiler.
import { createHash } from 'node:crypto'
import { readdir, readFile, realpath, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { LRUCache } from 'lru-cache'
import { PbfReader, PbfWriter } from 'pbf'
import { OUTSIDE, realFileIn } from '../real-path.js'

const RANGE = /^(\d{1,5})-(\d{1,5})$/
const RANGE_FILE = /^\d{1,5}-\d{1,5}\.pbf$/
// Unknown font names logged one by one (a style naming a font the folder lacks), then one line for the rest: any
// client can ask for names of its choosing, and each was a warning (1,000 a process).
const UNKNOWN_FONTS_LOGGED = 10

/** A glyph range name ('0-255') if it is one MapLibre asks for: a multiple of 256 and the 255 after it. */
export function parseRange (range) {
  const m = RANGE.exec(range)
  if (m === null) return null
  const start = Number(m[1])
  const end = Number(m[2])
  return start % 256 === 0 && end === start + 255 && end <= 65535 && range === `${start}-${end}` ? range : null // `00-255`: no file has that name
}

/** The glyphs of a glyph PBF: Map id → the glyph message's bytes (the first fontstack's, as every file has one). */
function glyphsOf (buf) {
  const glyphs = new Map()
  const pbf = new PbfReader(buf)
  pbf.readFields((tag, _, p) => {
    if (tag !== 1) return
    const end = p.readVarint() + p.pos
    while (p.pos < end) {
      const key = p.readVarint()
      if (key >> 3 === 3 && (key & 7) === 2) {
        const len = p.readVarint()
        const bytes = buf.subarray(p.pos, p.pos + len)
        p.pos += len
        const id = glyphId(bytes)
        if (id !== null) glyphs.set(id, bytes)
      } else {
        p.skip(key & 7)
      }
    }
  }, null)
  return glyphs
}

function glyphId (bytes) {
  let id = null
  new PbfReader(bytes).readFields((tag, _, p) => { if (tag === 1) id = p.readVarint() }, null)
  return id
}

/**
 * One glyph PBF from several (the fonts of a stack, in order): each glyph from the first font that has it, named after
 * the whole stack. A missing or unreadable part counts as a font without glyphs in this range.
 */
export function mergeGlyphs (parts, stackName, range) {
  const merged = new Map()
  for (const buf of parts) {
    if (buf === null) continue
    let glyphs
    try {
      glyphs = glyphsOf(buf)
    } catch {
      continue // not a glyph PBF: the next font fills in
    }
    for (const [id, bytes] of glyphs) if (!merged.has(id)) merged.set(id, bytes)
  }
  const out = new PbfWriter()
  out.writeMessage(1, (_, w) => {
    w.writeStringField(1, stackName)
    w.writeStringField(2, range)
    for (const id of [...merged.keys()].sort((a, b) => a - b)) w.writeBytesField(3, merged.get(id))
  }, null)
  return Buffer.from(out.finish())
}

/**
 * The fonts of a folder (its subfolders holding a glyph range file): `fonts()` lists them, `glyphs(stack, range)` answers
 * a range of a comma-separated stack, merged (fonts unknown here are replaced by `defaultFont`, or the first font
 * listed, once, after the stack's fonts that are here; and it fills in, last, any glyph the stack's fonts lack). Files are read on
 * demand and the merged answers kept (an LRU of `maxBytes`).
 */
export class FontCatalog {
  constructor ({ dir, defaultFont, log, maxBytes = 32 * 2 ** 20 }) {
    this.dir = dir
    this.defaultFont = defaultFont ?? null
    this.log = log
    this.names = []
    this.cache = new LRUCache({ maxSize: maxBytes, sizeCalculation: (b) => Math.max(1, b.length) })
    this.warned = new Set()
    this.unknownLogged = new Set() // unknown font names logged, UNKNOWN_FONTS_LOGGED at most
    this.moreUnknownLogged = false
    this.realDir = null // the fonts folder's real path, as of the latest load
    // The state of every range file (its name, size and time), hashed, as of the latest load: what labels are drawn
    // from. The renderer names its glyphs URL with it, so a font changed is drawn anew, not from the engine's glyphs.
    this.revision = 'none'
  }

  async load () {
    let names = []
    let realDir = null
    const state = createHash('sha1')
    if (this.dir !== null) {
      try {
        realDir = await realpath(this.dir)
        const entries = await readdir(this.dir, { withFileTypes: true })
        const folders = entries.filter((e) => e.isDirectory() && !e.name.startsWith('.')).map((e) => e.name)
        // A folder without a single range file is no font (an empty one was listed, and served no glyph, not even
        // ASCII): not listed, a stack naming it gets the fallback's glyphs, as for a font not here.
        const fonts = await Promise.all(folders.map(async (name) => {
          const files = (await readdir(join(this.dir, name)).catch(() => [])).filter((f) => RANGE_FILE.test(f)).sort()
          const stamps = await Promise.all(files.map((f) => stat(join(this.dir, name, f)).then((i) => `${i.size}-${Math.round(i.mtimeMs)}`, () => 'gone')))
          return files.length > 0 ? { name, state: files.map((f, i) => `${f}\0${stamps[i]}`).join('\0') } : null
        }))
        const found = fonts.filter((font) => font !== null).sort((a, b) => (a.name < b.name ? -1 : 1))
        for (const font of found) state.update(`${font.name}\0${font.state}\0`)
        names = found.map((font) => font.name)
      } catch (err) {
        this.log.warn({ err: err.code ?? err.message }, 'fonts folder unreadable')
      }
    }
    // Swapped in at once: a request during the reload sees the old list or the new one, never none.
    this.names = names
    this.realDir = realDir
    this.revision = state.update(this.defaultFont ?? '').digest('base64url').slice(0, 12)
    this.cache.clear()
    if (this.dir === null) return
    if (this.defaultFont !== null && !this.names.includes(this.defaultFont)) {
      this.log.warn({ font: this.defaultFont }, 'the default font is not in the fonts folder')
    }
  }

  fonts () { return this.names }

  /** The font standing in for those not here: the default, else the first Regular, else the first (null: no font). */
  fallback () {
    return this.defaultFont !== null && this.names.includes(this.defaultFont)
      ? this.defaultFont
      : this.names.find((n) => /regular/i.test(n)) ?? this.names[0] ?? null
  }

  /** The font serving `name`: itself when present, else the fallback (null when there is no font at all). */
  resolve (name) {
    if (this.names.includes(name)) return name
    const fallback = this.fallback()
    if (this.unknownLogged.has(name)) return fallback
    if (this.unknownLogged.size < UNKNOWN_FONTS_LOGGED) {
      this.unknownLogged.add(name)
      const font = name.slice(0, 100)
      if (fallback === null) this.log.warn({ font }, 'unknown font, and no font to stand in for it (no fonts folder, or none in it): its glyph ranges are empty')
      else this.log.warn({ font, fallback }, 'unknown font; serving its fallback')
    } else if (!this.moreUnknownLogged) {
      this.moreUnknownLogged = true
      this.log.warn({ logged: UNKNOWN_FONTS_LOGGED }, 'more unknown fonts asked for: served as the first ones were, and not logged')
    }
    return fallback
  }

  /** The merged glyph PBF of `stack` ('A,B') for `range` ('0-255', checked by parseRange): never fails for a range. */
  async glyphs (stack, range) {
    const key = `${stack}\n${range}`
    const known = this.cache.get(key)
    if (known !== undefined) return known
    const wanted = stack.split(',').map((s) => s.trim()).filter(Boolean).slice(0, 16)
    // The fonts of the stack that are here, in its order; the fallback last, standing in for those that are not (first,
    // it would take every glyph from the fonts after it: `Missing Font,Roboto Medium` drew in the default font).
    const present = wanted.filter((name) => this.names.includes(name))
    const fallbacks = wanted.filter((name) => !this.names.includes(name)).map((name) => this.resolve(name))
    const fonts = [...new Set([...present, ...fallbacks].filter((f) => f !== null))]
    const parts = await Promise.all(fonts.map((font) => this.read(font, range)))
    // The fallback fills in last, glyph by glyph, what the stack's fonts lack: a range file a font here lacks (a folder
    // of some ranges only), and glyphs its range file lacks (a font subset to a few letters, a range it covers in
    // part): those labels drew nothing where an unknown font's drew in the fallback.
    const fallback = this.fallback()
    if (fallback !== null && !fonts.includes(fallback)) parts.push(await this.read(fallback, range))
    const merged = mergeGlyphs(parts, wanted.join(','), range)
    this.cache.set(key, merged)
    return merged
  }

  /**
   * A font's glyph range file; null when missing, or when its real path is outside the fonts folder (a link leading
   * out is never opened: logged once, and the range is as a missing one).
   */
  async read (font, range) {
    const found = await realFileIn(join(this.dir, font, `${range}.pbf`), this.realDir === null ? [] : [this.realDir])
    if (found === OUTSIDE) {
      const key = `${font}\0${range}` // font names never hold a NUL
      if (!this.warned.has(key) && this.warned.size < 1000) {
        this.warned.add(key)
        this.log.warn({ font, range }, 'a glyph file is a link leading out of the fonts folder: not served')
      }
    }
    return found === null || found === OUTSIDE ? null : readFile(found.file).catch(() => null)
  }
}

// Mosaics of many COGs served as one raster set: a MosaicJSON file (developmentseed's spec: a quadkey index of COG
// paths or URLs), a static STAC item or ItemCollection (its COG assets; `assets=` stacks several as bands), or a
// configured folder of COGs (`sets.<id>: { path: folder, mosaic: true }`). This side (the event loop) reads the
// document, picks the parts that touch a tile and validates options; the raster workers read the parts and combine
// them by `pixel_selection` (lib/raster/mosaic.js), so no pixel is decoded here.
import { createHash } from 'node:crypto'
import { open as openFile, readFile, readdir, realpath, stat } from 'node:fs/promises'
import { OUTSIDE, realFileIn } from '../real-path.js'
import { basename, dirname, extname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { BadRequest as OptionError, Unavailable, toldUnavailable } from '../errors.js'
import { resolveOptions, describeOptions } from '../raster/options.js'
import { buildTileJson } from './tilejson.js'
import { declaredGrid } from './stac-grid.js'
import { RENDERED_SET, asBuffer, emptyTiles, localKey, sayCrsNote, sidecarStamp } from '../raster/rendered-set.js'
import { DEFAULT_OVERZOOM, zoomRange } from '../raster/zooms.js'
import { MAX_ZOOM, WORLD_BOUNDS, mercatorX, mercatorY, tileExtent } from '../tilemath.js'

export const kind = 'mosaic'
export const title = 'MosaicJSON/STAC'
export const extensions = ['.json']
/** A folder configured with `mosaic: true` is one set of the COGs directly in it. */
export const opensFolders = true

/** How a mosaic combines its parts per pixel, titiler's names; `first` (the default) stops once the tile is covered. */
export const PIXEL_SELECTIONS = ['first', 'highest', 'lowest', 'mean', 'median', 'stdev', 'count']

const COG_EXTENSIONS = ['.tif', '.tiff']
const WORLD = 2 * mercatorX(180) // Mercator metres round the Earth
const MAX_DOCUMENT_BYTES = 256 * 2 ** 20 // a MosaicJSON of a continent is tens of MB
const SNIFF_BYTES = 2 ** 20 // a larger .json is told by its head
const DESCRIBE_TRIES = 8 // parts tried in turn for the description of a MosaicJSON's data
const MAX_OPENED_ITEMS = 32 // STAC items that declare no grid, opened when the set opens for their zoom range
const MAX_ASSETS = 16 // assets stacked at once (as many bands as band math reads)
const LOGGED_PARTS = 10 // left-out parts logged one by one; past that, a count
const DEFAULT_MAX_PARTS = 32 // parts one tile combines, but for `first` (raster.mosaicMaxParts)
const PART_RECHECK_MS = 1000 // a local part's file is checked for replacement at most this often
const NO_PARTS = []

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v)
const text = (v) => (typeof v === 'string' ? v : undefined)
const isRemote = (ref) => /^(https?|s3):\/\//i.test(ref)
const colourBands = (meta) => (meta.alpha ? meta.bands - 1 : meta.bands)

/** 'mosaicjson', 'stac' or null: what a parsed .json document is. */
function documentType (doc) {
  if (!isObject(doc)) return null
  if (typeof doc.mosaicjson === 'string' && isObject(doc.tiles)) return 'mosaicjson'
  const isItem = (f) => isObject(f) && f.type === 'Feature' && isObject(f.assets)
  if (isItem(doc) || (doc.type === 'FeatureCollection' && Array.isArray(doc.features) && doc.features.some(isItem))) return 'stac'
  return null
}

/**
 * Is this .json file a mosaic (MosaicJSON, or STAC with assets)? Other JSON in a data folder (styles, TileJSON) is not
 * a set. A file up to 1 MiB is parsed; a larger one is told by its head, where MosaicJSON and STAC writers put the
 * keys that say what they are (opening it parses it whole, and says why if it is not one after all).
 */
export async function claims (path) {
  let handle
  try {
    handle = await openFile(path, 'r')
    const { size } = await handle.stat()
    if (!(size > 0)) return false
    const head = Buffer.alloc(Math.min(size, SNIFF_BYTES))
    const { bytesRead } = await handle.read(head, 0, head.length, 0)
    const text = head.toString('utf8', 0, bytesRead).replace(/^\uFEFF/, '')
    if (bytesRead === size) {
      try { return documentType(JSON.parse(text)) !== null } catch { return false }
    }
    return /"mosaicjson"\s*:/.test(text) || (/"type"\s*:\s*"Feature(Collection)?"/.test(text) && /"assets"\s*:/.test(text))
  } catch {
    return false
  } finally {
    await handle?.close()
  }
}

/**
 * Opens a mosaic: `spec.path` is a .json document or (with `mosaic: true`) a folder. `context.rasterPool` runs the
 * parts' descriptions and every tile; `context.dataFolders()` (the catalog's) and a document's own folder are where
 * local parts may be, by their real path.
 */
export async function open (spec, context = {}) {
  const { rasterPool } = context
  if (!rasterPool) throw new Error('mosaic sets need the raster worker pool (context.rasterPool)')
  if (!spec.path) throw new Error('a mosaic is a local .json file or folder')
  let info
  try {
    info = await stat(spec.path)
  } catch {
    throw new Error(`${basename(spec.path)} not found`)
  }
  if (!info.isDirectory() && extname(spec.path).toLowerCase() !== '.json') throw new Error('a mosaic is a folder of COGs (mosaic: true) or a MosaicJSON or STAC .json file')
  const workers = rasterPool.acquire()
  const keys = partKeys(rasterPool)
  try {
    const log = leftOutLog(spec.id, context.log)
    // Per set (sets.<id>.overzoom), else the server's (raster.overzoom).
    const overzoom = spec.overzoom ?? context.raster?.overzoom ?? DEFAULT_OVERZOOM
    const built = info.isDirectory()
      ? await folderMosaic(spec, workers, keys, log, overzoom)
      : await documentMosaic(spec, context, workers, keys, log, overzoom)
    return mosaicSet(spec, context, workers, rasterPool, keys, built, log)
  } catch (err) {
    keys.letGo()
    await rasterPool.release()
    throw err
  }
}

/**
 * The workers' keys of a mosaic's parts, each held in the pool (pool.js hold) from when its source is made until the
 * mosaic closes or the part is given another key: a file the mosaic reads stays open in the workers when a COG set
 * reading it too (the same key) closes, and is closed by them once neither reads it.
 */
function partKeys (rasterPool) {
  const held = new Map() // key → the part's path or URL
  const hold = (key, where) => {
    if (held.has(key)) return
    held.set(key, where)
    rasterPool.hold(key)
  }
  return {
    /** A part's source (sourceOf), its key held. */
    source (where, openedAt) {
      const src = sourceOf(where, openedAt)
      hold(src.key, src.path ?? src.url)
      return src
    },
    /** Local part `path` read under `key` from now on (a deleted file's fresh key): its earlier keys let go. */
    rekey (path, key) {
      for (const [old, where] of held) {
        if (where === path && old !== key) {
          held.delete(old)
          rasterPool.unhold(old)
        }
      }
      hold(key, path)
    },
    /** Every key let go: the mosaic closed (or failed to open). */
    letGo () {
      for (const key of held.keys()) rasterPool.unhold(key)
      held.clear()
    },
  }
}

/**
 * Logs a part left out (once per part and open; past LOGGED_PARTS only counted), and counts them. `crs(note)`: what a
 * part's CRS read without its datum grid says, logged once per CRS as for a COG set.
 */
function leftOutLog (id, log) {
  const counter = (part, reason) => {
    counter.count++
    if (counter.count <= LOGGED_PARTS) log?.warn({ set: id, part, reason }, 'mosaic part left out')
    else if (counter.count === LOGGED_PARTS + 1) log?.warn({ set: id }, 'more mosaic parts left out: only counted from here')
  }
  counter.count = 0
  counter.id = id
  counter.logger = log
  counter.crs = (note) => sayCrsNote(note, log, id)
  return counter
}

/**
 * A part's source as the workers open it: a local file keyed by what it is (`where.file`: its stat; `where.sidecars`:
 * its .msk, .ovr and .aux.xml, which the workers read with it), shared with every other set reading it unchanged; a
 * remote one by the open, so a re-opened set reads it afresh.
 */
const sourceOf = (where, openedAt) => (where.url ? { key: `${where.url}#${openedAt}`, url: where.url } : { key: localKey(where.path, where.file, openedAt, where.sidecars), path: where.path })

/**
 * What the workers say of a part's file: { meta, warp, lonLatBounds, version }; null when it cannot be read, logged as
 * left out unless `leaveOut` is false. Its CRS's note (read without its datum grid) is logged, once per CRS.
 */
async function describePart (workers, src, name, log, leaveOut = true) {
  // A local file as it is before a worker opens it: replaced after that, it is noticed on use (revalidate), though no
  // tile has used it yet.
  const seen = src.path === undefined ? null : await fileId(src.path)
  try {
    const info = await workers.run({ op: 'describe', src })
    src.version = info.version // a remote part is read at this version (its ETag) from here on
    if (seen !== null) src.seen = seen
    log.crs(info.crsNote)
    if (info.statsNote !== null) log.logger?.warn({ set: log.id, part: name }, info.statsNote)
    return info
  } catch (err) {
    if (leaveOut) log(name, String(err.message).replaceAll(src.path ?? src.url, basename(src.path ?? src.url)))
    return null
  }
}

/**
 * What tells a local file's version: its time, size and inode, and its sidecars' (a .msk or .ovr added beside it changes
 * its tiles too); 'gone' when it is not there.
 */
const fileId = (path) => stat(path).then(async (info) => `${info.mtimeMs}/${info.size}/${info.ino}+${await sidecarStamp(path)}`, () => 'gone')

/** WGS84 bounds → Mercator boxes [minX, minY, maxX, maxY], one each side of the antimeridian where they cross it. */
function mercatorBoxes ([west, south, east, north]) {
  const y0 = mercatorY(south); const y1 = mercatorY(north)
  if (west > east) return [[mercatorX(west), y0, mercatorX(180), y1], [mercatorX(-180), y0, mercatorX(east), y1]] // STAC's crossing bbox
  const box = [mercatorX(west), y0, mercatorX(east), y1]
  // A described raster across the antimeridian has a longitude past ±180: its other side, one world over.
  if (west < -180) return [box, [box[0] + WORLD, y0, box[2] + WORLD, y1]]
  if (east > 180) return [box, [box[0] - WORLD, y0, box[2] - WORLD, y1]]
  return [box]
}

const touches = (boxes, [minX, minY, maxX, maxY]) => boxes.some((b) => maxX > b[0] && minX < b[2] && maxY > b[1] && minY < b[3])

/** Bounds of several WGS84 boxes, the whole width of the world when one crosses the antimeridian. */
function unionLonLat (list) {
  let [west, south, east, north] = [Infinity, Infinity, -Infinity, -Infinity]
  for (const [w, s, e, n] of list) {
    if (w > e || w < -180 || e > 180) { west = -180; east = 180 } else { west = Math.min(west, w); east = Math.max(east, e) }
    south = Math.min(south, s); north = Math.max(north, n)
  }
  return [Math.max(-180, west), Math.max(WORLD_BOUNDS[1], south), Math.min(180, east), Math.min(WORLD_BOUNDS[3], north)]
}

// ---- a folder of COGs -------------------------------------------------------------------------------------------

/** Every COG directly in the folder, in name order (the order `first` takes them in), each described at open. */
async function folderMosaic (spec, workers, keys, log, overzoom) {
  const folder = spec.path
  const names = (await readdir(folder)).filter((n) => !n.startsWith('.') && COG_EXTENSIONS.includes(extname(n).toLowerCase())).sort()
  const openedAt = Date.now()
  const found = await Promise.all(names.map(async (name) => {
    const path = join(folder, name)
    const file = await stat(path).catch(() => null)
    if (!file?.isFile()) return null
    const src = keys.source({ path, file, sidecars: await sidecarStamp(path) }, openedAt)
    const info = await describePart(workers, src, name, log)
    return info === null ? null : { name, src, info, file }
  }))
  const described = found.filter((p) => p !== null)
  if (described.length === 0) throw new Error(names.length === 0 ? 'no COG (.tif, .tiff) in the folder' : 'none of the folder\'s COGs can be read')
  const first = described[0].info
  const parts = []
  for (const { name, src, info } of described) {
    if (colourBands(info.meta) !== colourBands(first.meta)) {
      log(name, `${colourBands(info.meta)} bands, where ${described[0].name} has ${colourBands(first.meta)}`)
      continue
    }
    if (info.meta.dtype !== first.meta.dtype) { // stretched by the first part's statistics, another type is all black or white
      log(name, `data type ${info.meta.dtype}, where ${described[0].name} has ${first.meta.dtype}`)
      continue
    }
    if (info.meta.palette !== first.meta.palette) { // indices and values do not mix (gdalbuildvrt leaves such files out too)
      log(name, `${info.meta.palette ? 'a' : 'no'} colour table, where ${described[0].name} has ${first.meta.palette ? 'one' : 'none'}`)
      continue
    }
    const zooms = zoomRange(info.meta, info.warp, overzoom)
    parts.push({ name, srcs: [src], boxes: mercatorBoxes(info.lonLatBounds), lonLat: info.lonLatBounds, zooms })
  }
  const revision = createHash('sha1')
  for (const { name, file } of described) revision.update(`${name}:${file.size}:${Math.round(file.mtimeMs)}\n`)
  return {
    type: 'folder',
    meta: first.meta,
    partCount: parts.length,
    bounds: unionLonLat(parts.map((p) => p.lonLat)),
    minzoom: Math.min(...parts.map((p) => p.zooms.minzoom)),
    maxzoom: Math.max(...parts.map((p) => p.zooms.maxzoom)),
    served: { minzoom: Math.min(...parts.map((p) => p.zooms.served.minzoom)), maxzoom: Math.max(...parts.map((p) => p.zooms.served.maxzoom)) },
    revision: revision.digest('base64url').slice(0, 16),
    // A part is left out of tiles below its own served range: there it is a few pixels wide, or a tile would read
    // more of its coarsest level than any COG tile may (a file without overviews).
    partsFor (z, x, y) {
      const extent = tileExtent(z, x, y)
      const out = []
      for (const part of parts) if (z >= part.zooms.served.minzoom && touches(part.boxes, extent)) out.push(part.srcs)
      return out
    },
  }
}

// ---- documents: MosaicJSON and STAC -----------------------------------------------------------------------------

async function documentMosaic (spec, context, workers, keys, log, overzoom) {
  const { size } = await stat(spec.path)
  if (size > MAX_DOCUMENT_BYTES) throw new Error(`${basename(spec.path)} is larger than ${MAX_DOCUMENT_BYTES / 2 ** 20} MiB`)
  let doc
  try {
    doc = JSON.parse((await readFile(spec.path, 'utf8')).replace(/^\uFEFF/, ''))
  } catch (err) {
    throw new Error(`not valid JSON: ${err.message}`)
  }
  const type = documentType(doc)
  if (type === null) throw new Error('neither MosaicJSON (a "mosaicjson" version and "tiles") nor a STAC item or ItemCollection with assets')
  const roots = await dataRoots(spec, context)
  const base = dirname(spec.path)
  const read = type === 'mosaicjson' ? mosaicJson : stacMosaic
  return read(doc, spec, { workers, keys, log, roots, base, overzoom })
}

/**
 * Where a document's parts may be: `folders`, the real paths of the served folders and files (lib/catalog/discover.js
 * dataFolders) and of the document's own folder (a document served on its own reads the parts beside it), and
 * `remote(url)`, whether a URL part may be read: only when raster.remoteParts allows it (true, or URL prefixes). A
 * document dropped into a data folder must not make the server fetch whatever it names (internal addresses, buckets
 * its credentials reach).
 */
async function dataRoots (spec, context) {
  const folders = [...(context.dataFolders?.() ?? []), dirname(spec.path)]
  const real = await Promise.all(folders.map((f) => realpath(f).catch(() => null)))
  const allowed = context.raster?.remoteParts ?? false
  const remote = (url) => allowed === true || (Array.isArray(allowed) && allowed.some((prefix) => url.startsWith(prefix)))
  return { folders: real.filter((f) => f !== null), remote }
}

/**
 * Where a part reference (a MosaicJSON asset, a STAC href) points: { url } for http(s):// and s3://, { path } for a
 * local file inside the data folders (relative to the document, or absolute, or file://), else { reason }.
 */
async function locatePart (ref, base, roots) {
  if (typeof ref !== 'string' || ref === '') return { reason: 'not a path or URL' }
  if (isRemote(ref)) return roots.remote(ref) ? { url: ref } : { reason: 'a remote part, and raster.remoteParts does not allow it' }
  let path
  if (/^file:\/\//i.test(ref)) {
    try { path = fileURLToPath(ref) } catch { return { reason: 'not a usable file:// URL' } }
  } else if (/^[a-z][a-z0-9+.-]*:/i.test(ref) && !/^[a-z]:[\\/]/i.test(ref)) {
    return { reason: 'only local paths, http(s):// and s3:// URLs are read' }
  } else {
    path = resolve(base, ref)
  }
  // The real path, so a link cannot lead out of the data folders.
  const real = await realFileIn(path, roots.folders)
  if (real === null) return { reason: 'file not found' }
  if (real === OUTSIDE) return { reason: 'outside the served data folders' }
  // (its stat and its sidecars': the workers' key, sourceOf)
  return { path: real.file, file: await stat(real.file).catch(() => null), sidecars: await sidecarStamp(real.file) }
}

const intZoom = (v) => Number.isInteger(v) && v >= 0 && v <= MAX_ZOOM

/**
 * A MosaicJSON (spec 0.0.3; 0.0.2 reads the same): `tiles` maps quadkeys at `quadkey_zoom` (default `minzoom`) to
 * asset lists in priority order; `asset_prefix` goes before each asset. A tile at or past quadkey_zoom takes the
 * list of the quadkey it lies in; a coarser one the lists of the quadkeys in it, in quadkey order, each asset once.
 */
async function mosaicJson (doc, spec, { workers, keys, log, roots, base, overzoom }) {
  const { minzoom, maxzoom } = doc
  if (!intZoom(minzoom) || !intZoom(maxzoom) || minzoom > maxzoom) throw new Error('MosaicJSON needs integer minzoom and maxzoom (0-30), minzoom <= maxzoom')
  const qz = intZoom(doc.quadkey_zoom) ? doc.quadkey_zoom : minzoom // past maxzoom too (cogeo-mosaic writes such)
  const tms = doc.tilematrixset
  if (isObject(tms) && tms.id !== undefined && tms.id !== 'WebMercatorQuad') throw new Error(`MosaicJSON on the tile matrix set ${String(tms.id).slice(0, 40)}: only WebMercatorQuad is served`)
  const prefix = typeof doc.asset_prefix === 'string' ? doc.asset_prefix : ''

  // Quadkeys in order, each with its assets (as indices into `refs`, the distinct assets in order of first mention).
  const refs = []
  const refIndex = new Map()
  const keyed = []
  let badKeys = 0
  for (const quadkey of Object.keys(doc.tiles).sort()) {
    const list = doc.tiles[quadkey]
    if (quadkey.length !== qz || !/^[0-3]*$/.test(quadkey) || !Array.isArray(list)) { badKeys++; continue }
    const indices = []
    for (const asset of list) {
      if (typeof asset !== 'string') continue
      const ref = prefix + asset
      let i = refIndex.get(ref)
      if (i === undefined) { refIndex.set(ref, i = refs.length); refs.push(ref) }
      if (!indices.includes(i)) indices.push(i)
    }
    keyed.push([quadkeyTile(quadkey), indices])
  }
  if (badKeys > 0) log.logger?.warn({ set: spec.id, quadkeys: badKeys }, `MosaicJSON quadkeys not at quadkey_zoom ${qz} (or without a list) are ignored`)

  const openedAt = Date.now()
  const located = await Promise.all(refs.map((ref) => locatePart(ref, base, roots)))
  const parts = located.map((where, i) => {
    if (where.reason !== undefined) { log(refs[i], where.reason); return null }
    return { name: refs[i], srcs: [keys.source(where, openedAt)] }
  })
  // The data's description (bands, type, statistics): the first part that can be read. The others are opened by the
  // workers when a tile needs them, never here: a mosaic may have thousands.
  let meta = null
  for (let i = 0, tried = 0; i < parts.length && meta === null && tried < DESCRIBE_TRIES; i++) {
    if (parts[i] === null) continue
    tried++
    const info = await describePart(workers, parts[i].srcs[0], parts[i].name, log)
    if (info === null) parts[i] = null
    else meta = info.meta
  }
  if (meta === null) throw new Error(`none of the MosaicJSON's first ${DESCRIBE_TRIES} parts can be read`)

  // quadkey_zoom's lists, keyed y·2^qz + x; coarser zooms' made on first use.
  const levels = new Map()
  const finest = new Map()
  for (const [[x, y], indices] of keyed) {
    const srcs = indices.filter((i) => parts[i] !== null).map((i) => parts[i].srcs)
    if (srcs.length > 0) finest.set(y * 2 ** qz + x, srcs)
  }
  levels.set(qz, finest)
  const level = (z) => {
    let map = levels.get(z)
    if (map === undefined) {
      map = new Map()
      const seen = new Map() // parent → the parts in its list already
      const shift = 2 ** (qz - z)
      for (const [key, srcs] of finest) { // in quadkey order
        const x = key % 2 ** qz; const y = Math.floor(key / 2 ** qz)
        const parent = Math.floor(y / shift) * 2 ** z + Math.floor(x / shift)
        if (!map.has(parent)) { map.set(parent, []); seen.set(parent, new Set()) }
        const list = map.get(parent); const inList = seen.get(parent)
        for (const s of srcs) if (!inList.has(s)) { inList.add(s); list.push(s) }
      }
      levels.set(z, map)
    }
    return map
  }
  const bounds = Array.isArray(doc.bounds) && doc.bounds.length === 4 && doc.bounds.every(Number.isFinite) ? doc.bounds : [-180, -90, 180, 90]
  return {
    type: 'MosaicJSON',
    meta,
    partCount: parts.filter((p) => p !== null).length,
    quadkeyZoom: qz,
    bounds: unionLonLat([bounds]),
    minzoom,
    maxzoom,
    served: { minzoom, maxzoom: Math.min(MAX_ZOOM, maxzoom + overzoom) },
    center: Array.isArray(doc.center) && doc.center.length >= 2 && doc.center.slice(0, 3).every(Number.isFinite) ? doc.center : undefined,
    describedBy: { name: text(doc.name), description: text(doc.description), attribution: text(doc.attribution), version: text(doc.version) },
    partsFor (z, x, y) {
      if (z >= qz) {
        const d = 2 ** (z - qz)
        return finest.get(Math.floor(y / d) * 2 ** qz + Math.floor(x / d)) ?? NO_PARTS
      }
      return level(z).get(y * 2 ** z + x) ?? NO_PARTS
    },
  }
}

/** A quadkey's tile [x, y] at the zoom of its length. */
function quadkeyTile (quadkey) {
  let x = 0; let y = 0
  for (const c of quadkey) {
    const digit = c.charCodeAt(0) - 48
    x = x * 2 + (digit & 1)
    y = y * 2 + (digit >> 1)
  }
  return [x, y]
}

/** Is this STAC asset a COG: image/tiff with the cloud-optimized profile, or a GeoTIFF playing the data or visual role? */
function isCogAsset (asset) {
  if (!isObject(asset) || typeof asset.href !== 'string') return false
  const type = typeof asset.type === 'string' ? asset.type.toLowerCase() : null
  const tiff = type !== null && type.startsWith('image/tiff')
  if (tiff && /profile\s*=\s*cloud-optimized/.test(type)) return true
  const roles = Array.isArray(asset.roles) ? asset.roles : []
  const dataRole = roles.includes('data') || roles.includes('visual')
  return dataRole && (tiff || (type === null && COG_EXTENSIONS.includes(extname(asset.href.split(/[?#]/)[0]).toLowerCase())))
}

/** An item's WGS84 bounds: its bbox (2D or 3D), else its geometry's extent; null when it has neither. */
function itemBounds (item) {
  const b = item.bbox
  if (Array.isArray(b) && b.every(Number.isFinite)) {
    if (b.length === 4) return b
    if (b.length === 6) return [b[0], b[1], b[3], b[4]]
  }
  let bounds = null
  const visit = (c) => {
    if (!Array.isArray(c)) return
    if (typeof c[0] === 'number') {
      if (!Number.isFinite(c[0]) || !Number.isFinite(c[1])) return
      bounds ??= [Infinity, Infinity, -Infinity, -Infinity]
      bounds[0] = Math.min(bounds[0], c[0]); bounds[1] = Math.min(bounds[1], c[1])
      bounds[2] = Math.max(bounds[2], c[0]); bounds[3] = Math.max(bounds[3], c[1])
    } else for (const inner of c) visit(inner)
  }
  visit(item.geometry?.coordinates)
  return bounds
}

/**
 * A STAC item or ItemCollection: each item with COG assets is a part (in document order), its bbox where it is. The
 * default asset is `visual` where there is one, else the first COG asset; each asset is described from the first item
 * that has it, which gives its bands (stacked assets are bands in the order asked) and the set's zooms.
 */
async function stacMosaic (doc, spec, { workers, keys, log, roots, base, overzoom }) {
  const features = doc.type === 'FeatureCollection' ? doc.features : [doc]
  const openedAt = Date.now()
  const names = []
  const items = (await Promise.all(features.map(async (item, index) => {
    if (!isObject(item) || !isObject(item.assets)) return null
    const label = typeof item.id === 'string' ? item.id : `item ${index + 1}`
    const bounds = itemBounds(item)
    if (bounds === null) { log(label, 'no bbox and no geometry'); return null }
    const srcs = new Map()
    for (const [name, asset] of Object.entries(item.assets)) {
      if (!isCogAsset(asset)) continue
      const where = await locatePart(asset.href, base, roots)
      if (where.reason !== undefined) { log(`${label}/${name}`, where.reason); continue }
      srcs.set(name, keys.source(where, openedAt))
    }
    return srcs.size === 0 ? null : { label, srcs, boxes: mercatorBoxes(bounds), lonLat: bounds, feature: item }
  }))).filter((item) => item !== null)
  for (const item of items) for (const name of item.srcs.keys()) if (!names.includes(name)) names.push(name)
  if (names.length === 0) throw new Error('no readable COG asset in the STAC document')

  const infos = new Map() // asset name → its description
  await Promise.all(names.map(async (name) => {
    const item = items.find((i) => i.srcs.has(name))
    const info = await describePart(workers, item.srcs.get(name), `${item.label}/${name}`, log)
    if (info !== null) infos.set(name, info)
  }))
  const assets = names.filter((name) => infos.has(name))
  if (assets.length === 0) throw new Error('none of the STAC document\'s COG assets can be read')
  // The assets a request naming none gets: the set's configured `assets`, else visual, else the first COG asset.
  const unknown = spec.assets?.find((name) => !infos.has(name))
  if (unknown !== undefined) throw new Error(`the configured assets name '${unknown}', which is not a readable COG asset here (${assets.join(', ')})`)
  const defaultAssets = spec.assets ?? [assets.includes('visual') ? 'visual' : assets[0]]
  const { meta, warp } = infos.get(defaultAssets[0])
  const zooms = await itemZooms(items, defaultAssets[0], { meta, warp }, { workers, overzoom, log, id: spec.id })

  // Per choice of assets ("red,nir"): the description resolveOptions reads, and each asset's colour bands.
  const stacks = new Map()
  const stackOf = (chosen) => {
    const key = chosen.join(',')
    let stack = stacks.get(key)
    if (stack === undefined) {
      const metas = chosen.map((name) => infos.get(name).meta)
      const bands = metas.map(colourBands)
      stack = { bands, dtypes: metas.map((m) => m.dtype), meta: metas.length === 1 ? metas[0] : stackedMeta(metas, bands) }
      if (stacks.size >= 64) stacks.delete(stacks.keys().next().value)
      stacks.set(key, stack)
    }
    return stack
  }
  return {
    type: 'STAC',
    meta,
    partCount: items.length,
    assets,
    defaultAssets,
    bounds: unionLonLat(items.map((i) => i.lonLat)),
    minzoom: zooms.minzoom,
    maxzoom: zooms.maxzoom,
    served: zooms.served,
    stackOf,
    /** `assets=` (titiler's: comma-separated or repeated) → the asset names, in order; OptionError when wrong. */
    chooseAssets (value) {
      const chosen = value === undefined ? [] : (Array.isArray(value) ? value : [value]).flatMap((v) => String(v).split(',')).filter((s) => s !== '')
      if (chosen.length === 0) return defaultAssets
      if (chosen.length > MAX_ASSETS) throw new OptionError(`assets takes at most ${MAX_ASSETS} assets`)
      for (const [i, name] of chosen.entries()) {
        if (!infos.has(name)) throw new OptionError(`unknown asset '${name.slice(0, 64)}': this set's COG assets are ${assets.join(', ')}`)
        if (chosen.indexOf(name) !== i) throw new OptionError(`asset '${name}' is given twice`)
      }
      return chosen
    },
    // An item without one of the chosen assets is not a part of that rendering; nor is one below its own served zooms
    // (there it is a few pixels wide, or a tile would read too much of it), where they are known.
    partsFor (z, x, y, chosen) {
      const extent = tileExtent(z, x, y)
      const out = []
      for (const item of items) {
        if (z < (item.zooms?.served.minzoom ?? 0) || !touches(item.boxes, extent)) continue
        if (chosen.length === 1) {
          const src = item.srcs.get(chosen[0])
          if (src !== undefined) out.push([src])
        } else {
          const srcs = chosen.map((name) => item.srcs.get(name))
          if (!srcs.includes(undefined)) out.push(srcs)
        }
      }
      return out
    },
  }
}

/**
 * A STAC set's zoom range over all its items (min of their minzooms, max of their maxzooms), as a folder's and a
 * MosaicJSON's cover all their parts: each item's `zooms` from the grid it declares (stac-grid.js: proj:shape,
 * proj:transform and an EPSG code, as rio-tiler reads an item's; or gsd), else from its file, opened now for the first
 * MAX_OPENED_ITEMS such items (a collection of thousands is not read through before it serves). `shown`: the asset a
 * request naming none shows; `first`: its description (the first item that has it).
 */
async function itemZooms (items, shown, first, { workers, overzoom, log, id }) {
  const firstItem = items.find((i) => i.srcs.has(shown))
  let opened = 0
  let unknown = 0
  await Promise.all(items.map(async (item) => {
    const feature = item.feature
    delete item.feature // (the document need not stay in memory)
    if (!item.srcs.has(shown)) return
    if (item === firstItem) { item.zooms = zoomRange(first.meta, first.warp, overzoom); return }
    const grid = declaredGrid(feature, shown)
    if (grid !== null) {
      log.crs(grid.note) // said as the item's file would say it when a tile opens it
      item.zooms = zoomRange(grid.meta, grid.warp, overzoom)
      return
    }
    if (opened >= MAX_OPENED_ITEMS) { unknown++; return }
    opened++
    // One that cannot be read is not left out here: the tiles that need it say so (503, naming it), as before.
    const info = await describePart(workers, item.srcs.get(shown), item.label, log, false)
    if (info !== null) item.zooms = zoomRange(info.meta, info.warp, overzoom)
  }))
  if (unknown > 0) {
    log.logger?.warn({ set: id, items: unknown }, `STAC items past the first ${MAX_OPENED_ITEMS} that declare no usable grid (proj:shape, proj:transform and an EPSG code in proj:code or proj:epsg; or gsd) are not opened to find their zooms: the set's zoom range is the other items'`)
  }
  const ranges = items.filter((i) => i.zooms !== undefined).map((i) => i.zooms)
  return {
    minzoom: Math.min(...ranges.map((r) => r.minzoom)),
    maxzoom: Math.max(...ranges.map((r) => r.maxzoom)),
    served: { minzoom: Math.min(...ranges.map((r) => r.served.minzoom)), maxzoom: Math.max(...ranges.map((r) => r.served.maxzoom)) },
  }
}

/** Several assets' descriptions as one file's: their colour bands one after another (b1 = the first asset's first). */
function stackedMeta (metas, bands) {
  const haveStatistics = metas.some((m) => m.statistics !== null)
  const statistics = haveStatistics ? {} : null
  let b = 0
  metas.forEach((m, i) => {
    for (let j = 0; j < bands[i]; j++) {
      b++
      if (statistics !== null) statistics[`b${b}`] = m.statistics?.[`b${j + 1}`] ?? [0, 255] // 8-bit data: its range
    }
  })
  return { ...metas[0], bands: b, alpha: false, mask: false, palette: false, statistics }
}

// ---- the set ----------------------------------------------------------------------------------------------------

function mosaicSet (spec, context, workers, rasterPool, keys, built, log) {
  const { meta } = built
  const stac = built.type === 'STAC' ? built : null
  const oneStack = { bands: [colourBands(meta)], dtypes: [meta.dtype], meta }
  const stackFor = (assets) => (stac === null ? oneStack : stac.stackOf(assets))
  const maxParts = context.raster?.mosaicMaxParts ?? DEFAULT_MAX_PARTS

  /** titiler's options of a COG, and `pixel_selection` (and for STAC `assets`), validated: the tile's cache key. */
  function parseQuery (query, rendering) {
    const selection = query.pixel_selection === undefined || query.pixel_selection === '' ? 'first' : query.pixel_selection
    if (Array.isArray(selection)) throw new OptionError('pixel_selection is given more than once')
    if (!PIXEL_SELECTIONS.includes(selection)) throw new OptionError(`pixel_selection must be one of ${PIXEL_SELECTIONS.join(', ')}`)
    const assets = stac === null ? undefined : stac.chooseAssets(query.assets)
    const file = stackFor(assets).meta
    let options
    if (selection === 'count') {
      // One band, how many parts have data: shown as it is unless rescaled (no stretch by the data's statistics);
      // the parts' first band is read for its mask.
      const counting = query.bidx === undefined && query.expression === undefined ? { ...query, bidx: '1' } : query
      options = resolveOptions({ ...file, statistics: null, palette: false }, counting, rendering)
    } else {
      options = resolveOptions(file, query, rendering)
    }
    options.pixelSelection = selection
    if (assets !== undefined) options.assets = assets
    return options
  }

  const defaults = parseQuery({}) // validated once: a mosaic whose defaults cannot render fails here
  const described = stackFor(defaults.assets).meta // the data a request naming no assets shows
  const [west, south, east, north] = built.bounds
  const { minzoom, maxzoom } = built
  const center = built.center ?? [(west + east) / 2, (south + north) / 2,
    Math.min(maxzoom, Math.max(minzoom, Math.floor(Math.log2(360 / Math.max(east - west, 1e-9)))))]

  // A part changed: the catalog re-opens the set (once however often told). `localPart`: the file name of a local part
  // found replaced (the log says so, rather than that a remote object changed).
  const changed = (localPart) => {
    context.replaced?.(spec.id, set, localPart === undefined ? undefined : `its part ${localPart} was replaced`, localPart !== undefined)
    return toldUnavailable(`tileset '${spec.id}' changed at its source and is being re-opened`, 1)
  }
  // A local part replaced in place (a new COG renamed over the old) or deleted under a document: the workers keep the
  // file they opened (for the set's description or an item's zooms as the set opened, or for a tile) and read it
  // through their descriptor, and the watcher sees only the served folders. Noticed on use instead, as a remote part's
  // ETag is: at most once a second per part (from its first use), a stat the tile waits for. A replaced file re-opens
  // the set. A deleted one does not (re-opened, the set would leave the part out: its tiles a 404, or drawn without
  // it); its source gets a key of its own, as a re-opened set's files get one, so a worker opens the path afresh
  // rather than read the deleted file, and fails it as any missing file: a 503 naming the part. Back, it is a change.
  const marks = new Map() // part path → { at, id, check (the stat under way), key (the deleted file's fresh key) }
  const noticed = (mark, path, id) => {
    mark.check = null
    if (id === 'gone') {
      if (mark.id !== 'gone') {
        mark.key = `${path}#gone@${Date.now()}`
        if (!closed) keys.rekey(path, mark.key) // (every source of the path takes it before its next read)
      }
      mark.id = 'gone'
    } else if (mark.id === null) {
      mark.id = id
    } else if (id !== mark.id && !closed) {
      changed(basename(path))
    }
  }
  async function revalidate (parts) {
    const now = Date.now()
    const checks = []
    for (const srcs of parts) {
      for (const src of srcs) {
        if (src.path === undefined) continue
        let mark = marks.get(src.path)
        if (mark === undefined) marks.set(src.path, (mark = { at: 0, id: src.seen ?? null, check: null, key: null }))
        if (mark.check === null && now - mark.at >= PART_RECHECK_MS) {
          mark.at = now
          mark.check = fileId(src.path).then((id) => noticed(mark, src.path, id))
        }
        if (mark.check !== null) checks.push(mark.check)
        else if (mark.key !== null) src.key = mark.key
      }
    }
    if (checks.length === 0) return
    await Promise.all(checks)
    for (const srcs of parts) {
      for (const src of srcs) {
        const key = src.path === undefined ? null : marks.get(src.path).key
        if (key !== null) src.key = key
      }
    }
  }
  const emptyTile = emptyTiles(workers) // option emptyTiles
  // Parts a worker left out when a tile needed them (a document's parts are opened then: their data type), each logged
  // and counted once.
  const leftOutParts = new Set()
  const noteLeftOut = (found) => {
    for (const [part, reason] of found) {
      if (leftOutParts.has(part) || leftOutParts.size >= 10_000) continue
      leftOutParts.add(part)
      log(part, reason)
    }
  }

  let closed = false
  const set = {
    id: spec.id,
    kind,
    ...RENDERED_SET,
    metadata: {
      mosaic: {
        type: built.type,
        parts: built.partCount,
        get leftOut () { return log.count }, // (parts a tile found to differ are added as they are found)
        ...(built.quadkeyZoom !== undefined ? { quadkeyZoom: built.quadkeyZoom } : {}),
        ...(stac !== null ? { assets: stac.assets, defaultAssets: stac.defaultAssets } : {}),
      },
      // The data as the first part describes it (options are checked against it: every part has its bands).
      bands: described.bands,
      dtype: described.dtype,
      nodata: described.nodata,
      alpha: described.alpha,
      palette: described.palette,
      statistics: described.statistics,
      bounds: built.bounds,
      minzoom,
      maxzoom,
      servedZooms: built.served,
      defaults: { ...defaults, bidx: defaults.bidx.map((b) => b + 1) },
    },
    tilejson: buildTileJson({ ...built.describedBy, name: built.describedBy?.name ?? spec.id, minzoom, maxzoom, bounds: built.bounds, center, format: 'png' }),
    servedZooms: built.served,
    parseQuery,
    options: [
      ...describeOptions(described, defaults),
      { name: 'pixel_selection', type: 'choice', values: PIXEL_SELECTIONS, default: 'first' },
      ...(stac !== null ? [{ name: 'assets', type: 'choice', values: stac.assets, default: stac.defaultAssets.join(',') }] : []),
    ],
    async getTile (z, x, y, options = defaults, { scale = 1, format = 'png' } = {}) {
      if (closed) throw new Unavailable('tileset closed')
      // Only the parts that touch the tile go to a worker; none: nothing is read.
      const parts = built.partsFor(z, x, y, options.assets)
      await revalidate(parts)
      // Every part is read (and for median, kept) before anything is combined: bounded, or one low-zoom request
      // could hold a worker for seconds and a gigabyte. `first` stops once the tile is covered and keeps none.
      if (options.pixelSelection !== 'first' && parts.length > maxParts) {
        throw new OptionError(`pixel_selection=${options.pixelSelection} would combine ${parts.length} parts in this tile; at most ${maxParts} are (raster.mosaicMaxParts): zoom in, or use first`)
      }
      let bytes = null
      if (parts.length > 0) {
        const stack = stackFor(options.assets)
        bytes = await workers.run({ op: 'mosaic', parts, stack: stack.bands, dtypes: stack.dtypes, z, x, y, scale, format, options })
        // A part that cannot be read (its RasterError, a remote failure): 503 for this tile, with the reason.
        if (bytes?.failed !== undefined) throw bytes.replaced ? changed() : toldUnavailable(`tileset '${spec.id}' could not read this tile: ${bytes.failed}`)
        if (bytes?.leftOut !== undefined) {
          noteLeftOut(bytes.leftOut)
          for (const note of bytes.crsNotes) log.crs(note)
          bytes = bytes.tile
        }
      }
      if (bytes !== null) return asBuffer(bytes)
      return spec.emptyTiles ? emptyTile(scale, format) : null
    },
    async close () {
      if (closed) return
      closed = true
      keys.letGo()
      await rasterPool.release()
    },
  }
  if (built.revision !== undefined) set.revision = built.revision
  return set
}

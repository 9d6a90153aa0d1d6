// Cloud Optimized GeoTIFF source: raster tiles rendered on request, in any CRS the file declares. This side only
// validates options and checks that a tile touches the raster; reading, reprojecting and encoding run in the raster
// worker pool (lib/raster/), so the event loop never decodes a pixel.
import { BadRequest as OptionError, Unavailable, toldUnavailable } from '../errors.js'
import { RangeReader } from '../remote/reader.js'
import { buildTileJson } from './tilejson.js'
import { COLORMAPS as RAMPS } from '../raster/colormaps.js'
import { DEFAULT_OVERZOOM, zoomRange } from '../raster/zooms.js'
import { mercatorX, mercatorY, tileExtent } from '../tilemath.js'

export { OptionError } // a bad option: 400 with its message

export const kind = 'cog'
export const title = 'COG'
export const urlForm = 'https://…/x.tif or s3://bucket/x.tif'
export const extensions = ['.tif', '.tiff']
export const matchesUrl = (url) => /^(https?|s3):\/\//i.test(url) && /\.tiff?(\?|$)/i.test(url)

const FORMATS = ['png', 'webp', 'jpg']
const FORMAT_ALIASES = { jpeg: 'jpg' }
const RESAMPLING = ['nearest', 'bilinear', 'cubic']
const ENCODINGS = ['terrarium', 'mapbox']
const COLORMAPS = new Set(Object.keys(RAMPS).flatMap((n) => [n, n + '_r'])) // `_r`: reversed
const WORLD = 2 * mercatorX(180) // Mercator metres round the Earth

/** An option error: 400 with its message (lib/errors.js BadRequest). */

// A plain decimal number: Number() would also take '', ' ', '0x10' and 'Infinity', and JSON (the cache key) turns
// Infinity into null, the same key as no value at all.
const NUMBER = /^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i
const number = (s) => (NUMBER.test(s) && Number.isFinite(Number(s)) ? Number(s) : NaN)
const list = (value) => (value === undefined ? [] : (Array.isArray(value) ? value : [value]).flatMap((v) => String(v).split(',')))
const single = (query, name) => {
  const value = query[name]
  if (Array.isArray(value)) throw new OptionError(`${name} is given more than once`)
  return value === undefined || value === '' ? undefined : String(value)
}

/**
 * titiler-style query options → what the workers need, with the defaults filled in (also the cache key, so equal
 * requests share a tile however they were spelled). `file` is the file's description (/meta).
 */
export function resolveOptions (file, query, rendering) {
  const bidxList = list(query.bidx)
  let bidx
  if (bidxList.length > 0) {
    bidx = bidxList.map((s) => {
      const b = number(s)
      if (!Number.isInteger(b) || b < 1 || b > file.bands) throw new OptionError(`bidx ${s} is not a band of this file (1-${file.bands})`)
      return b - 1
    })
    if (bidx.length !== 1 && bidx.length !== 3) throw new OptionError('bidx takes 1 band (grey or colormap) or 3 (RGB)')
  } else {
    const colour = file.alpha ? file.bands - 1 : file.bands
    bidx = colour >= 3 ? [0, 1, 2] : [0]
  }

  const resampling = single(query, 'resampling') ?? 'nearest'
  if (!RESAMPLING.includes(resampling)) throw new OptionError(`resampling must be one of ${RESAMPLING.join(', ')}`)

  const encoding = single(query, 'encoding') ?? null
  if (encoding !== null && !ENCODINGS.includes(encoding)) throw new OptionError(`encoding must be ${ENCODINGS.join(' or ')}`)
  if (encoding !== null && bidx.length !== 1) throw new OptionError('encoding=' + encoding + ' needs a single band')
  if (encoding !== null && rendering?.format === 'jpg') throw new OptionError(`encoding=${encoding} needs a lossless format (.png or .webp): JPEG would corrupt the heights`)

  const colormap = single(query, 'colormap_name') ?? null
  if (colormap !== null) {
    if (!COLORMAPS.has(colormap)) throw new OptionError(`unknown colormap_name '${colormap}'`)
    if (bidx.length !== 1) throw new OptionError('colormap_name needs a single band')
    if (encoding !== null) throw new OptionError('colormap_name and encoding cannot be combined')
  }

  let nodata = null
  const nodataText = single(query, 'nodata')
  if (nodataText !== undefined) {
    nodata = nodataText.toLowerCase() === 'nan' ? 'nan' : number(nodataText) // a string: JSON (the cache key) has no NaN
    if (Number.isNaN(nodata)) throw new OptionError('nodata must be a finite number or nan')
  }

  let rescale = null
  const ranges = query.rescale === undefined ? [] : Array.isArray(query.rescale) ? query.rescale : [query.rescale]
  if (ranges.length > 0) {
    if (encoding !== null) throw new OptionError('rescale and encoding cannot be combined')
    rescale = ranges.map((r) => {
      const pair = String(r).split(',').map((s) => number(s.trim()))
      if (pair.length !== 2 || !pair.every(Number.isFinite) || pair[0] >= pair[1]) throw new OptionError(`rescale '${r}' is not min,max with min < max`)
      return pair
    })
    if (rescale.length === 1) rescale = bidx.map(() => rescale[0])
    if (rescale.length !== bidx.length) throw new OptionError(`rescale needs one min,max or one per band (${bidx.length})`)
  }
  const palette = file.palette && bidx.length === 1 && colormap === null && rescale === null && encoding === null
  if (rescale === null && encoding === null && !palette && file.statistics) rescale = bidx.map((b) => file.statistics[`b${b + 1}`])
  return { bidx, resampling, encoding, colormap, nodata, rescale, palette }
}

/** The options resolveOptions takes, for clients (the viewer's controls), with the defaults this file gets. */
function describeOptions (file, defaults) {
  const written = (v) => (v === null || v === undefined ? undefined : String(v))
  return [
    { name: 'bidx', type: 'bands', count: file.bands, default: defaults.bidx.map((b) => b + 1).join(',') },
    { name: 'rescale', type: 'range', default: written(defaults.rescale?.[0]) },
    { name: 'colormap_name', type: 'choice', values: [...COLORMAPS].sort(), default: written(defaults.colormap) },
    { name: 'encoding', type: 'choice', values: ENCODINGS, dem: true },
    { name: 'resampling', type: 'choice', values: RESAMPLING, default: defaults.resampling },
  ]
}

const asBuffer = (bytes) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)

/**
 * `context.rasterPool` is the app's raster worker pool (lib/raster/pool.js: app.rasterPool): every COG set of the app
 * shares it, holding it from open to close. A remote COG (https://, s3://) is read by the workers; `context.s3`,
 * `context.remote` (revalidateMs) and `context.replaced(id, source)` serve this side's watch over its version.
 */
export async function open (spec, context = {}) {
  const { rasterPool } = context
  if (!rasterPool) throw new Error('COG sets need the raster worker pool (context.rasterPool)')
  const src = spec.url ? { key: `${spec.url}#${Date.now()}`, url: spec.url } : { key: `${spec.path}#${Date.now()}`, path: spec.path }
  const workers = rasterPool.acquire()
  let info
  try {
    info = await workers.run({ op: 'describe', src })
  } catch (err) {
    await rasterPool.release()
    throw err
  }
  const { meta, warp } = info
  // Every worker opens the object at the version described here (its ETag): one found changed answers `replaced`.
  src.version = info.version
  // This side's view of a remote object: it asks whether the object is still that version (on use, at most every
  // revalidateMs, and for /ready), so a replaced file is noticed also while the workers read only cached blocks.
  const remote = spec.url ? new RangeReader(spec.url, { s3: context.s3, revalidateMs: context.remote?.revalidateMs, version: info.version }) : null
  const changed = () => {
    context.replaced?.(spec.id, set) // (the catalog re-opens a set once, however often told)
    return toldUnavailable(`tileset '${spec.id}' changed at its source and is being re-opened`, 1)
  }
  // Per set (sets.<id>.overzoom), else the server's (raster.overzoom, when the catalog passes config.raster).
  const overzoom = spec.overzoom ?? context.raster?.overzoom ?? DEFAULT_OVERZOOM
  const { minzoom, maxzoom, served } = zoomRange(meta, warp, overzoom)
  const [west, south, east, north] = info.lonLatBounds
  const crossesAntimeridian = west < -180 || east > 180
  const bounds = crossesAntimeridian ? [-180, south, 180, north] : info.lonLatBounds
  // The centre of the raster itself, also when its bounds had to widen to the whole world (antimeridian).
  const middle = (west + east) / 2
  const center = [middle > 180 ? middle - 360 : middle < -180 ? middle + 360 : middle, (south + north) / 2,
    Math.min(maxzoom, Math.max(minzoom, Math.floor(Math.log2(360 / Math.max(east - west, 1e-9)))))]
  const defaults = resolveOptions(meta, {}) // validated once: a file whose defaults cannot render fails here
  const mercator = [mercatorX(west), mercatorY(south), mercatorX(east), mercatorY(north)]
  const shifts = crossesAntimeridian ? [-WORLD, 0, WORLD] : [0]

  /** Does tile z/x/y touch the raster? (Cheap, on the event loop: tiles outside never reach a worker.) */
  function touches (z, x, y) {
    const [minX, minY, maxX, maxY] = tileExtent(z, x, y)
    if (maxY <= mercator[1] || minY >= mercator[3]) return false
    for (const shift of shifts) {
      if (maxX > mercator[0] + shift && minX < mercator[2] + shift) return true
    }
    return false
  }

  const empties = new Map() // transparent tiles, rendered once per scale and format (option emptyTiles)
  const emptyTile = (scale, format) => {
    const key = scale + format
    if (!empties.has(key)) {
      const pending = workers.run({ op: 'empty', scale, format }).then(asBuffer)
      pending.catch(() => empties.delete(key)) // a failure is not kept: the next request tries again
      empties.set(key, pending)
    }
    return empties.get(key)
  }

  let closed = false
  const set = {
    id: spec.id,
    kind,
    format: 'png',
    hints: { format: 'png' },
    formats: FORMATS,
    formatAliases: FORMAT_ALIASES,
    scales: [1, 2],
    takesQuery: true,
    // Bands numbered from 1 here as in `bidx` (the workers count from 0).
    metadata: { ...meta, bounds, minzoom, maxzoom, servedZooms: served, defaults: { ...defaults, bidx: defaults.bidx.map((b) => b + 1) } },
    tilejson: buildTileJson({ name: spec.id, minzoom, maxzoom, bounds, center, format: 'png' }),
    servedZooms: served, // the tile route answers this range; TileJSON advertises rio-tiler's
    parseQuery: (query, rendering) => resolveOptions(meta, query, rendering),
    options: describeOptions(meta, defaults),
    async getTile (z, x, y, options = defaults, { scale = 1, format = 'png' } = {}) {
      if (closed) throw new Unavailable('tileset closed')
      if (remote !== null) {
        remote.revalidate()
        if (remote.stale !== null) throw changed()
      }
      const bytes = touches(z, x, y) ? await workers.run({ op: 'tile', src, z, x, y, scale, format, options }) : null
      if (bytes?.failed !== undefined) throw bytes.replaced ? changed() : new Unavailable(bytes.failed) // the worker's RasterError or remote failure
      if (bytes !== null) return asBuffer(bytes)
      return spec.emptyTiles ? emptyTile(scale, format) : null
    },
    async close () {
      if (closed) return
      closed = true
      remote?.close()
      await rasterPool.release()
    },
  }
  if (remote !== null) {
    set.revision = info.version ?? undefined // the object's ETag: the same data on every replica
    set.check = () => remote.check()
    remote.onReplaced = () => context.replaced?.(spec.id, set)
  }
  return set
}

// Cloud Optimized GeoTIFF source: raster tiles rendered on request, in any CRS the file declares. This side only
// validates options and checks that a tile touches the raster; reading, reprojecting and encoding run in the raster
// worker pool (lib/raster/), so the event loop never decodes a pixel.
import { stat } from 'node:fs/promises'
import { extname } from 'node:path'
import { BadRequest as OptionError, Unavailable, toldUnavailable } from '../errors.js'
import { resolveOptions, describeOptions } from '../raster/options.js'
import { RangeReader, comparedBySize, validatorFlipped } from '../remote/reader.js'
import { buildTileJson } from './tilejson.js'
import { RENDERED_SET, SIDECAR_ENDINGS, asBuffer, emptyTiles, localKey, sayCrsNote, sidecarStamp, sidecarStampSync } from '../raster/rendered-set.js'
import { DEFAULT_OVERZOOM, zoomRange } from '../raster/zooms.js'
import { mercatorX, mercatorY, tileExtent } from '../tilemath.js'

export { OptionError } // a bad option: 400 with its message

export const kind = 'cog'
export const title = 'COG'
export const urlForm = 'https://…/x.tif or s3://bucket/x.tif'
export const extensions = ['.tif', '.tiff']
export const matchesUrl = (url) => /^(https?|s3):\/\//i.test(url) && /\.tiff?(\?|$)/i.test(url)

const WORLD = 2 * mercatorX(180) // Mercator metres round the Earth

/**
 * 'a.tif.msk' → 'a.tif' (also .ovr, .aux.xml): a sidecar the workers read with the file, so the watcher re-checks the
 * set when one is added, rewritten or deleted, as it does for the file itself.
 */
export const companionOf = (name) => {
  const ending = SIDECAR_ENDINGS.find((e) => name.endsWith(e))
  const file = ending === undefined ? '' : name.slice(0, -ending.length)
  return extensions.includes(extname(file).toLowerCase()) ? file : null
}

/** What the sidecars beside the file are now ('' for none): the watcher re-opens the set when this changes. */
export const companionStamp = sidecarStampSync

/**
 * `context.rasterPool` is the app's raster worker pool (lib/raster/pool.js: app.rasterPool): every COG set of the app
 * shares it, holding it from open to close. A remote COG (https://, s3://) is read by the workers; `context.s3`,
 * `context.remote` (revalidateMs) and `context.replaced(id, source)` serve this side's watch over its version.
 */
export async function open (spec, context = {}) {
  const { rasterPool } = context
  if (!rasterPool) throw new Error('COG sets need the raster worker pool (context.rasterPool)')
  // A remote COG is keyed by this open (its version is pinned by ETag as it is described); a local one by what it and
  // its sidecars are.
  const src = spec.url
    ? { key: `${spec.url}#${Date.now()}`, url: spec.url, comparedBySize: comparedBySize(spec.url) }
    : { key: localKey(spec.path, await stat(spec.path).catch(() => null), Date.now(), await sidecarStamp(spec.path)), path: spec.path }
  const workers = rasterPool.acquire(src.key) // released with it: the workers then close the file
  let info
  try {
    info = await workers.run({ op: 'describe', src })
  } catch (err) {
    await rasterPool.release(src.key)
    throw err
  }
  const { meta, warp } = info
  sayCrsNote(info.crsNote, context.log, spec.id)
  if (info.statsNote !== null) context.log?.warn({ set: spec.id }, info.statsNote)
  if (info.auxNote !== null) context.log?.warn({ set: spec.id }, info.auxNote)
  // Every worker opens the object at the version described here (its ETag): one found changed answers `replaced`,
  // with the .aux.xml read here (a request each, or a note each, otherwise) and the sidecars found here.
  src.version = info.version
  if (spec.url) {
    src.aux = info.aux
    src.sidecars = info.sidecars // (its .msk and .ovr: found at their versions, or not there)
  }
  if (info.version?.startsWith('~size:') && !src.comparedBySize) context.log?.warn({ set: spec.id }, 'the remote store gives this object another ETag or Last-Modified from answer to answer (several servers behind one name?): it is compared by size from now on')
  // This side's view of a remote object: it asks whether the object is still that version (on use, at most every
  // revalidateMs, and for /ready), so a replaced file is noticed also while the workers read only cached blocks. One
  // without validators is told by the hash of its first bytes (its header and IFDs, which a replacement moves) as the
  // worker that described it read them, asked again at revalidateMs as a remote archive's is.
  const remote = spec.url ? new RangeReader(spec.url, { s3: context.s3, revalidateMs: context.remote?.revalidateMs, version: info.version, identity: info.identity }) : null
  // `flipped`: a worker saw the object's validator change while its size did not (lib/remote/reader.js).
  const changed = (flipped = false) => {
    if (flipped) validatorFlipped(spec.url)
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

  const emptyTile = emptyTiles(workers) // option emptyTiles

  let closed = false
  const set = {
    id: spec.id,
    kind,
    ...RENDERED_SET,
    // Bands numbered from 1 here as in `bidx` (the workers count from 0).
    metadata: { ...meta, bounds, minzoom, maxzoom, servedZooms: served, defaults: { ...defaults, bidx: defaults.bidx.map((b) => b + 1) } },
    tilejson: buildTileJson({ name: spec.id, minzoom, maxzoom, bounds, center, format: 'png' }),
    servedZooms: served, // the tile route answers this range; TileJSON advertises rio-tiler's
    // Its own box, west above east, for an export given no --bbox (TileJSON's is the world's width).
    extent: crossesAntimeridian ? [west < -180 ? west + 360 : west, south, east > 180 ? east - 360 : east, north] : undefined,
    parseQuery: (query, rendering) => resolveOptions(meta, query, rendering),
    options: describeOptions(meta, defaults),
    async getTile (z, x, y, options = defaults, { scale = 1, format = 'png' } = {}) {
      if (closed) throw new Unavailable('tileset closed')
      if (remote !== null) {
        remote.revalidate()
        if (remote.stale !== null) throw changed()
      }
      const bytes = touches(z, x, y) ? await workers.run({ op: 'tile', src, z, x, y, scale, format, options }) : null
      if (bytes?.failed !== undefined) throw bytes.replaced ? changed(bytes.flipped) : new Unavailable(bytes.failed) // the worker's RasterError or remote failure
      if (bytes !== null) return asBuffer(bytes)
      return spec.emptyTiles ? emptyTile(scale, format) : null
    },
    async close () {
      if (closed) return
      closed = true
      remote?.close()
      await rasterPool.release(src.key)
    },
  }
  if (remote !== null) {
    set.revision = info.version ?? undefined // the object's ETag: the same data on every replica
    set.check = () => remote.check()
    remote.onReplaced = (why) => context.replaced?.(spec.id, set, why)
  }
  return set
}

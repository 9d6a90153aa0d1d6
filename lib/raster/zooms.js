// The zoom range of a raster set, worked out once when it opens (on the main thread, from what the worker measured):
// the range TileJSON advertises, by rio-tiler's rule, and the wider one the tile route serves, as titiler does.
import { MAX_ZOOM, mercatorX } from '../tilemath.js'

const Z0_PIXEL = (2 * mercatorX(180)) / 256 // metres per pixel of a 256 px tile at zoom 0
const pixelAt = (z) => Z0_PIXEL / 2 ** z
const MAX_TMS_ZOOM = 24 // morecantile's WebMercatorQuad ends here
// Levels served past maxzoom unless configured (raster.overzoom, sets.<id>.overzoom). At 4 a source pixel fills 16 × 16
// tile pixels: further levels show nothing new, and each one quadruples the tiles (and cache entries) made of the same
// pixels. titiler sets no limit; map clients upsample past TileJSON's maxzoom themselves, so this serves the clients
// that ask for a fixed zoom (GIS tools).
export const DEFAULT_OVERZOOM = 4
// A tile may read at most this many pixels of one pyramid level: 2048 × 2048, what a tile 8× coarser than the level
// reads. Below the zoom where a tile of the coarsest level would need more, tiles are not served (404).
const MAX_WINDOW_PIXELS = 2048 * 2048

/**
 * morecantile's zoom_for_res with zoom_level_strategy="auto" on WebMercatorQuad: the first zoom whose pixel is not
 * larger than `resolution`, or the one above it when that is nearer by ratio (ties go to the finer).
 */
export function zoomForResolution (resolution) {
  const close = (a, b) => Math.abs(a - b) / b <= 1e-8
  let z = 0
  while (z < MAX_TMS_ZOOM && !(resolution > pixelAt(z) || close(resolution, pixelAt(z)))) z++
  if (z > 0 && !close(resolution, pixelAt(z)) && pixelAt(z - 1) / resolution < resolution / pixelAt(z)) z--
  return z
}

/** rasterio's get_maximum_overview_level: halvings until the smaller side is at most `minsize`. */
export function maximumOverviewLevel (width, height, minsize = 256) {
  let level = 0
  while (Math.min(Math.floor(width / 2 ** level), Math.floor(height / 2 ** level)) > minsize) level++
  return level
}

/**
 * The zoom range: advertised by rio-tiler's rule (rio_tiler.io.base `_minzoom`/`_maxzoom`) on GDAL's suggested warp
 * output into Web Mercator: maxzoom nearest its resolution, minzoom nearest the resolution of the overview level at
 * which the smaller side of that output is 256 px at most (whether the file has such an overview or not). Served, as
 * titiler does, beyond it: below, down to where the raster spans about 4 pixels (tiles read the coarsest overview),
 * unless a tile there would read more than MAX_WINDOW_PIXELS of it (a large file without overviews); above, up to
 * `overzoom` levels past maxzoom (upsampled). The advertised minzoom is raised to the served one where that is higher.
 */
export function zoomRange (meta, warp, overzoom) {
  const maxzoom = zoomForResolution(warp.resolution)
  const minzoom = Math.min(maxzoom, zoomForResolution(warp.resolution * 2 ** maximumOverviewLevel(warp.width, warp.height)))
  const span = Math.max(warp.width, warp.height) * warp.resolution // metres
  let servedMin = Math.max(0, Math.min(minzoom, Math.ceil(Math.log2((4 * Z0_PIXEL) / span) - 1e-9)))
  const [levelWidth, levelHeight] = meta.overviews.at(-1) ?? [meta.width, meta.height]
  const levelPixel = warp.resolution * (meta.width / levelWidth) // metres per pixel of the coarsest level
  const windowPixels = (z) => {
    const side = (256 * pixelAt(z)) / levelPixel
    return Math.min(levelWidth, side) * Math.min(levelHeight, side)
  }
  while (servedMin < maxzoom && windowPixels(servedMin) > MAX_WINDOW_PIXELS) servedMin++
  // Never advertised below what is served: a file whose overviews TileJSON's rule counts on but which has none (inside
  // or in a .ovr beside it) would otherwise open a map at zooms that are all 404.
  return { minzoom: Math.max(minzoom, servedMin), maxzoom, served: { minzoom: servedMin, maxzoom: Math.min(MAX_ZOOM, maxzoom + overzoom) } }
}

// A Web Mercator tile of one dataset as resampled values: where the tile falls in the file (grid, level, window,
// blocks), then the bands the rendering reads, resampled to the tile's pixels. The worker turns the values into
// pixels (render.js); a mosaic combines several datasets' values first. Runs in the raster workers.
import { sourceGrid, chooseLevel, windowOf, resample, sampleScale, tileRatio } from './warp.js'
import { blockTable, maskRule, readWindow } from './blocks.js'
import { RasterError } from './errors.js'
import { applyExpression } from './expression.js'
import { gatherValues } from './direct.js'
import { tileExtent } from '../tilemath.js'

/**
 * Where tile z/x/y (n × n pixels) falls in `ds`: { grid, level, resampling, spread, win, table, rule }, the window's
 * decoded blocks read and which of their pixels the request's bands hide (maskRule: `bidx`, or the bands band math
 * reads, `bandMath` for a STAC asset's share of the stack); null where the tile reaches no pixel of the file.
 */
export async function locate (ds, z, x, y, n, options, scratch) {
  // A remote file found changed by an earlier read: no tile from its blocks decoded before (they may be all it needs).
  if (ds.reader?.stale) throw ds.reader.stale
  const extent = tileExtent(z, x, y)
  const grid = sourceGrid(ds, extent, n, scratch)
  const resampling = ds.palette && options.palette ? 'nearest' : options.resampling // indices do not interpolate
  // No tile may make a worker hold more than 16 Mpx of one level: where the level chosen would (a file whose only
  // overview is far coarser than the full image, read at a zoom between them), the next coarser level that fits
  // draws it; none fitting (odd projections near a pole) is refused.
  let level = chooseLevel(ds, (extent[2] - extent[0]) / n, tileRatio(grid))
  let spread, win
  for (let i = level.index; ; level = ds.levels[++i]) {
    spread = resampling === 'nearest' ? [1, 1] : sampleScale(level, grid)
    win = windowOf(level, grid, resampling, Math.max(...spread))
    if (win === null) return null
    if ((win[2] - win[0]) * (win[3] - win[1]) <= 16e6) break
    if (i + 1 >= ds.levels.length) throw new RasterError('this tile would need too large a part of the raster')
  }
  const table = await blockTable(ds, level, win)
  const rule = maskRule(ds, options.bidx, options.nodata, Boolean(options.expression) || options.bandMath === true)
  return { grid, level, resampling, spread, win, table, rule, n }
}

/**
 * The located tile's values: { values (n² × nb, interleaved, Float32), alpha (n², 0..1), nb }, the bands
 * `options.bidx` resampled, then through the band math of `options.expression` if any (nb is then its number of
 * outputs); null where every pixel is transparent. The arrays are the scratch's, valid until its next use.
 */
export function valuesAt (at, options, scratch) {
  const { level, table, win, grid, resampling, spread, rule, n } = at
  const nb = options.bidx.length
  const values = scratchValues(scratch, n * n * nb)
  const { alpha } = scratch
  if (resampling === 'nearest') { // straight from the blocks, no window copied out first
    if (!gatherValues(level, table, grid, options.bidx, options.nodata, rule, values, alpha)) return null
  } else {
    const window = readWindow(level, table, win, options.bidx, options.nodata, rule, scratch)
    if (window === null) return null
    resample(level, win, window.bands, window.opaque ? null : window.density, grid, resampling, values, alpha, spread, scratch)
  }
  return applyExpression({ values, alpha, nb }, options, scratch)
}

/** Tile z/x/y of `ds` as values (see valuesAt), or null. */
export async function tileValues (ds, z, x, y, n, options, scratch) {
  const at = await locate(ds, z, x, y, n, options, scratch)
  return at === null ? null : valuesAt(at, options, scratch)
}

/** The scratch's values array, grown to hold `length` values. */
function scratchValues (scratch, length) {
  if (scratch.values.length < length) scratch.values = new Float32Array(length)
  return scratch.values.subarray(0, length)
}

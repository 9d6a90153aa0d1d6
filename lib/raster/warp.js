// Web Mercator tile → source pixels → resampled values: the reprojection half of a raster tile, in plain arrays.
// gdalwarp is the reference (the tests compare with it), so overview choice and kernels follow its rules.
const GRID_STEP = 16 // pixels between exactly transformed points; between them, bilinear interpolation (GDAL's approximate transformer does the same)

/**
 * Where the n × n output pixel centres fall in the source: full-resolution pixel coordinates (column, row; continuous,
 * 0 at the raster's top-left corner), NaN where a point has no image in the source CRS. Read a row at a time with
 * gridRow, or all at once with fullGrid.
 * A Mercator file's map is affine and separable: its grid is one row of columns and one column of rows (`separable`).
 * Otherwise exact points every GRID_STEP pixels (`gx`, `gy`), bilinear between them, as GDAL's approximate
 * transformer does; a cell where that would stray by more than 1/8 pixel (GDAL's default error threshold) gets a
 * finer grid (near a pole, say), one at the edge of the projection's domain is computed point by point.
 */
export function sourceGrid (ds, extent, n, scratch) {
  const [ox, rx, oy, ry] = ds.transform
  const res = (extent[2] - extent[0]) / n
  if (ds.toSource === null) {
    const cols = scratch.colLine; const rows = scratch.rowLine
    for (let i = 0; i < n; i++) {
      cols[i] = (extent[0] + (i + 0.5) * res - ox) / rx
      rows[i] = (oy - (extent[3] - (i + 0.5) * res)) / ry
    }
    return { separable: true, cols, rows, n, scratch }
  }
  const step = Math.min(GRID_STEP, n)
  const g = n / step
  const gx = new Float64Array((g + 1) * (g + 1))
  const gy = new Float64Array((g + 1) * (g + 1))
  const nodes = projectedNodes(ds.toSource, extent, n, step, g)
  const out = [0, 0]
  const node = (px, py, cols, rows, at) => { // output pixel position (px, py) (corners at integers), exactly
    ds.toSource(extent[0] + px * res, extent[3] - py * res, out)
    cols[at] = (out[0] - ox) / rx
    rows[at] = (oy - out[1]) / ry
  }
  const exact = (i, j, cols, rows, at) => node(i + 0.5, j + 0.5, cols, rows, at) // the centre of pixel (i, j)
  let minC = Infinity; let maxC = -Infinity; let minR = Infinity; let maxR = -Infinity
  for (let at = 0; at < gx.length; at++) {
    const c = (nodes[2 * at] - ox) / rx; const r = (oy - nodes[2 * at + 1]) / ry
    gx[at] = c
    gy[at] = r
    minC = Math.min(minC, c); maxC = Math.max(maxC, c); minR = Math.min(minR, r); maxR = Math.max(maxR, r)
  }
  const grid = {
    separable: false,
    n,
    g,
    step,
    gx,
    gy,
    exact,
    node,
    pointwise: null,
    cut: false, // crossed by the cut of a geographic grid past ±180 (cutCells)
    subGrids: new Map(),
    // A bilinear cell never leaves its corners' range; finer or point-by-point cells may, so they need a scan.
    nodeBounds: Number.isFinite(minC + maxC + minR + maxR) ? [minC, maxC, minR, maxR] : null,
    scratch,
  }
  grid.pointwise = pointwiseCells(grid)
  if (ds.toSource.turn !== undefined) grid.pointwise = cutCells(grid, ds.toSource.turn / rx, grid.pointwise)
  return grid
}

/**
 * A geographic grid past ±180 is read within one turn of longitude (dataset.js sourceTransform): where a tile crosses
 * that cut, neighbouring nodes lie a turn of columns apart, and interpolating between them would sweep across the
 * whole raster. Such cells (a jump of more than half a turn along a row of nodes) are computed point by point (2).
 */
function cutCells (grid, turnColumns, cells) {
  const { gx, g } = grid
  const w = g + 1
  const half = turnColumns / 2
  for (let b = 0; b < g; b++) {
    for (let a = 0; a < g; a++) {
      const p = b * w + a
      if (Math.abs(gx[p + 1] - gx[p]) > half || Math.abs(gx[p + w + 1] - gx[p + w]) > half) {
        (cells ??= new Uint8Array(g * g))[b * g + a] = 2
        grid.cut = true
      }
    }
  }
  return cells
}

// The grid nodes of the last few tiles in source CRS coordinates, by CRS and tile: the parts of a mosaic (or a STAC
// item's assets) in one CRS share them instead of each projecting the same (g + 1)² points (about a tenth of a
// 5-part mosaic tile's worker time went to the grid of source coordinates: proj4, the curvature check and its
// garbage).
const NODE_TILES = 8
const nodeCache = new Map()

/** The source CRS coordinates (x, y interleaved) of a tile's (g + 1)² grid nodes, row by row. Read-only: shared. */
function projectedNodes (toSource, extent, n, step, g) {
  const key = toSource.key === undefined ? null : `${toSource.key}|${extent.join(',')}|${n}|${step}`
  const known = key === null ? undefined : nodeCache.get(key)
  if (known !== undefined) return known
  const res = (extent[2] - extent[0]) / n
  const nodes = new Float64Array(2 * (g + 1) * (g + 1))
  const out = [0, 0]
  for (let b = 0, at = 0; b <= g; b++) {
    for (let a = 0; a <= g; a++, at += 2) {
      toSource(extent[0] + a * step * res, extent[3] - b * step * res, out)
      nodes[at] = out[0]
      nodes[at + 1] = out[1]
    }
  }
  if (key !== null) {
    if (nodeCache.size >= NODE_TILES) nodeCache.delete(nodeCache.keys().next().value)
    nodeCache.set(key, nodes)
  }
  return nodes
}

/**
 * Cells (g × g) that bilinear interpolation cannot serve: 1 where it would stray from the exact transform by more
 * than 1/8 of a source pixel of the resolution the tile reads (those get a finer grid, SUB_STEP pixels apart, as GDAL
 * subdivides), 2 at the edge of the projection's domain (non-finite nodes: point by point). The error of a bilinear
 * cell is about an eighth of the second differences of its nodes along x and y (it reproduces the cross term
 * exactly). Null when no cell needs either.
 */
function pointwiseCells (grid) {
  const { gx, gy, g } = grid
  const w = g + 1
  // Full-resolution source pixels per output pixel: the threshold is 1/8 of a pixel at that scale.
  const [stepX, stepY] = pixelSteps(grid)
  const limit = 8 * 0.125 * Math.max(1, stepX, stepY) // error ≈ second difference / 8
  // Plain loops over the four corners and both arrays: this runs for every tile of a file not in Web Mercator (and
  // for every part of a mosaic), where arrays made per cell cost 4 % of a worker's time and as much again in GC.
  const clamp = (v) => (v < 1 ? 1 : v > g - 1 ? g - 1 : v)
  const second = (arr, a, b, da, db) => Math.abs(arr[(b - db) * w + a - da] - 2 * arr[b * w + a] + arr[(b + db) * w + a + da])
  const cornerWorst = (arr, a, b) => {
    let worst = 0
    for (let corner = 0; corner < 4; corner++) {
      const na = a + (corner & 1); const nb = b + (corner >> 1)
      worst = Math.max(worst, g > 1 ? second(arr, clamp(na), nb, 1, 0) + second(arr, na, clamp(nb), 0, 1) : 0) // NaN sticks
    }
    const at = b * w + a
    return Number.isFinite(arr[at] + arr[at + 1] + arr[at + w] + arr[at + w + 1]) ? worst : NaN
  }
  let cells = null
  for (let b = 0; b < g; b++) {
    for (let a = 0; a < g; a++) {
      const wx = cornerWorst(gx, a, b)
      const worst = Number.isNaN(wx) ? NaN : Math.max(wx, cornerWorst(gy, a, b))
      if (!(worst <= limit)) (cells ??= new Uint8Array(g * g))[b * g + a] = Number.isNaN(worst) ? 2 : 1
    }
  }
  return cells
}

/** Row j of a grid: the source coordinates of its n pixels into `cols` and `rows` (n each). */
export function gridRow (grid, j, cols, rows) {
  const { n } = grid
  if (grid.separable) {
    cols.set(grid.cols.subarray(0, n))
    rows.fill(grid.rows[j], 0, n)
    return
  }
  const { g, step, gx, gy, pointwise } = grid
  const b = Math.floor(j / step)
  for (let a = 0; a < g; a++) {
    const i0 = a * step
    const kind = pointwise === null ? 0 : pointwise[b * g + a]
    if (kind === 2) {
      for (let t = 0; t < step; t++) grid.exact(i0 + t, j, cols, rows, i0 + t)
    } else if (kind === 1) {
      const sub = subGrid(grid, a, b)
      const q = step / SUB_STEP
      const sb = Math.floor((j - b * step) / SUB_STEP)
      for (let sa = 0; sa < q; sa++) interpolate(sub.gx, sub.gy, q, sa, sb, j - b * step - sb * SUB_STEP, SUB_STEP, cols, rows, i0 + sa * SUB_STEP)
    } else {
      interpolate(gx, gy, g, a, b, j - b * step, step, cols, rows, i0)
    }
  }
}

const SUB_STEP = 4

/** One row (`dj` pixels down) across cell (a, b) of a node grid w + 1 nodes wide, cells `step` pixels apart. */
function interpolate (gx, gy, w, a, b, dj, step, cols, rows, at) {
  const p = b * (w + 1) + a
  const fy = (dj + 0.5) / step
  // Down the cell's left and right edges to this row, then across in equal steps.
  const cl = gx[p] + (gx[p + w + 1] - gx[p]) * fy; const cr = gx[p + 1] + (gx[p + w + 2] - gx[p + 1]) * fy
  const rl = gy[p] + (gy[p + w + 1] - gy[p]) * fy; const rr = gy[p + 1] + (gy[p + w + 2] - gy[p + 1]) * fy
  const dc = (cr - cl) / step; const dr = (rr - rl) / step
  for (let t = 0; t < step; t++) {
    cols[at + t] = cl + dc * (t + 0.5)
    rows[at + t] = rl + dr * (t + 0.5)
  }
}

/** The finer nodes (SUB_STEP pixels apart) of a curved cell, computed once per tile. */
function subGrid (grid, a, b) {
  const key = b * grid.g + a
  let sub = grid.subGrids.get(key)
  if (sub === undefined) {
    const q = grid.step / SUB_STEP
    sub = { gx: new Float64Array((q + 1) * (q + 1)), gy: new Float64Array((q + 1) * (q + 1)) }
    for (let v = 0; v <= q; v++) {
      for (let u = 0; u <= q; u++) grid.node(a * grid.step + u * SUB_STEP, b * grid.step + v * SUB_STEP, sub.gx, sub.gy, v * (q + 1) + u)
    }
    grid.subGrids.set(key, sub)
  }
  return sub
}

/** Every pixel's coordinates (n² each, in the grid's scratch), for the resamplers that want them per pixel. */
export function fullGrid (grid) {
  if (grid.full !== undefined) return grid.full
  const { n, scratch } = grid
  // Made on first use: only curved or pointwise grids need every pixel's coordinates (2 × 8 bytes a pixel).
  if (!(scratch.cols?.length >= n * n)) { scratch.cols = new Float64Array(n * n); scratch.rows = new Float64Array(n * n) }
  const { cols, rows } = scratch
  for (let j = 0; j < n; j++) gridRow(grid, j, cols.subarray(j * n, j * n + n), rows.subarray(j * n, j * n + n))
  grid.full = { separable: false, full: true, cols, rows, n }
  return grid.full
}

/** Where the grid's pixels reach: [minC, maxC, minR, maxR] (NaN skipped). */
function gridBounds (grid) {
  if (grid.separable) return [...range(grid.cols), ...range(grid.rows)]
  if (grid.nodeBounds !== null && grid.pointwise === null) return grid.nodeBounds
  const { cols, rows } = fullGrid(grid)
  return [...range(cols), ...range(rows)]
}

/**
 * The pyramid level to read for an output resolution (Mercator metres per pixel), as gdalwarp's -ovr AUTO picks it:
 * the coarsest overview still at least as fine as the output, with 10 % of slack.
 */
export function chooseLevel (ds, outputResolution, tileRatio) {
  // The reduction this tile needs: measured on its own source footprint when given (full-resolution pixels per
  // output pixel), else from the raster's mean resolution. An exact power of two picks that overview, as GDAL does.
  const target = (tileRatio ?? outputResolution / ds.resolution) * (1 + 1e-9)
  const { levels } = ds
  if (!(target > 1) || levels.length === 1) return levels[0]
  let i = 0
  for (; i < levels.length - 1; i++) {
    const ratio = levels[i].fx
    const next = levels[i + 1].fx
    if ((ratio < target && next > target) || Math.abs(ratio - target) < 0.1) break
  }
  return levels[i]
}

const KERNEL_RADIUS = { nearest: 0, bilinear: 1, cubic: 2 }

/** The window [x0, y0, x1, y1) of `level` the output pixels reach (with the kernel's margin), or null if none. */
export function windowOf (level, grid, resampling, spread = 1) {
  const [minC, maxC, minR, maxR] = gridBounds(grid)
  if (!(minC <= maxC) || !(minR <= maxR)) return null
  const { fx, fy } = level
  const m = Math.ceil(KERNEL_RADIUS[resampling] * spread) + 1
  const x0 = Math.max(0, Math.floor(minC / fx) - m)
  const y0 = Math.max(0, Math.floor(minR / fy) - m)
  const x1 = Math.min(level.width, Math.ceil(maxC / fx) + m)
  const y1 = Math.min(level.height, Math.ceil(maxR / fy) + m)
  return x0 < x1 && y0 < y1 ? [x0, y0, x1, y1] : null
}

/** Smallest and largest of the numbers (NaN skipped). */
function range (values) {
  let min = Infinity; let max = -Infinity
  for (let k = 0; k < values.length; k++) {
    const v = values[k]
    if (v < min) min = v
    if (v > max) max = v
  }
  return [min, max]
}

/** Source pixels per output pixel along each axis, measured across the tile (1 or more: kernels stretch, never shrink). */
export function sampleScale (level, grid) {
  const [px, py] = pixelSteps(grid)
  const sx = px / level.fx
  const sy = py / level.fy
  // At most 8. Below minzoom a tile reads the coarsest level at any reduction; gdalwarp then scales its kernel by the
  // part of the raster the tile covers, not by the tile, and a wider kernel only strays further from it (measured).
  const clamp = (s) => (Number.isFinite(s) ? Math.min(8, Math.max(1, s)) : 1)
  return [clamp(sx), clamp(sy)]
}

/**
 * Bilinear or cubic: samples the window for every output pixel (nearest is direct.js's gatherValues, straight from the
 * blocks). `bands` are Float32Arrays over the window, `density` the window's validity (0 transparent … 255 opaque,
 * from alpha, mask and nodata), or null when every pixel of it is opaque. Writes
 * `values` (n² × bands, interleaved) and `alpha` (n², 0..1). Transparent source pixels do not contribute: weights are
 * renormalised over the valid ones, and where the pixel under an output centre is transparent, so is the output
 * (gdalwarp skips it: data does not bleed into nodata areas). When reducing, the bilinear and cubic kernels widen by
 * the reduction (`scale`, as gdalwarp's do), so detail averages instead of aliasing. `grid`: separable (a Mercator
 * file), a node grid (sourceGrid) or a full one (fullGrid). `scratch`: an object whose arrays are reused from tile to
 * tile (grown as needed).
 * Keys' cubic convolution (a = -0.5, GDAL's "cubic") and the triangle (bilinear) are written out where the weights
 * are made: once per output column and once per output row for a separable grid (then a horizontal pass over the
 * source rows the tile reads and a vertical one, each a few taps per value), once per pixel and axis otherwise.
 */
export function resample (level, win, bands, density, grid, resampling, values, alpha, scale = [1, 1], scratch = {}) {
  const s = (scratch.warp ??= {})
  if (grid.separable) convolveSeparable(level, win, bands, density, grid, resampling === 'cubic', values, alpha, scale, s)
  else convolveRows(level, win, bands, density, grid, resampling === 'cubic', values, alpha, scale, s)
}

/** `s[name]`, a `Type` of at least `length` elements, grown when short: per-tile arrays without per-tile allocation. */
function grown (s, name, Type, length) {
  const a = s[name]
  return a !== undefined && a.length >= length ? a : (s[name] = new Type(length))
}

/**
 * The kernel taps of each output column (or row) of a separable grid, along one axis, into `t`: window pixels
 * start[i] … start[i] + count[i] - 1, their weights weight[i × most + …] normalised to sum 1, sum[i] the raw weights'
 * sum (the renormalisation thresholds are on raw sums), centre[i] the window pixel under the output centre (-1: none).
 * count[i] 0: that column gets nothing (outside the raster, or no weight). `coords`: full-resolution source
 * coordinates, `f` the level's reduction, `origin` and `size` the window along this axis, `limit` the level's size.
 */
function axisTaps (t, coords, n, f, origin, size, limit, radius, scale, cubic) {
  const most = Math.ceil(radius * scale) * 2 + 2
  const start = (t.start = t.start?.length >= n ? t.start : new Int32Array(n))
  const count = (t.count = t.count?.length >= n ? t.count : new Int32Array(n))
  const centre = (t.centre = t.centre?.length >= n ? t.centre : new Int32Array(n))
  const sum = (t.sum = t.sum?.length >= n ? t.sum : new Float64Array(n))
  const weight = (t.weight = t.weight?.length >= n * most ? t.weight : new Float64Array(n * most))
  const normals = (t.normal = t.normal?.length >= n ? t.normal : new Float64Array(n)) // the normalised weights' sum (1, rounded)
  t.most = most
  const reach = radius * scale
  for (let i = 0; i < n; i++) {
    count[i] = 0
    const c = coords[i] / f - origin
    // Outside the window's margin, or outside the raster proper (not just the window): nothing.
    if (!(c >= -1 && c <= size + 1)) continue
    if (c + origin < 0 || c + origin > limit) continue
    const nc = Math.floor(c)
    centre[i] = nc >= 0 && nc < size ? nc : -1
    const cc = c - 0.5 // pixel centres sit at .5
    const p0 = Math.max(0, Math.floor(cc - reach) + 1)
    const p1 = Math.min(size - 1, Math.ceil(cc + reach) - 1)
    let total = 0
    for (let p = p0, q = i * most; p <= p1; p++, q++) {
      const x = Math.abs((p - cc) / scale)
      const wt = cubic
        ? (x <= 1 ? (1.5 * x - 2.5) * x * x + 1 : x < 2 ? ((-0.5 * x + 2.5) * x - 4) * x + 2 : 0)
        : (x < 1 ? 1 - x : 0)
      weight[q] = wt
      total += wt
    }
    if (p1 < p0 || total === 0) continue
    let normal = 0
    for (let p = p0, q = i * most; p <= p1; p++, q++) normal += (weight[q] /= total)
    normals[i] = normal
    start[i] = p0
    count[i] = p1 - p0 + 1
    sum[i] = total
  }
  return t
}

/**
 * Bilinear or cubic on a separable grid, in two passes: each source row the tile reads is filtered along x once (into
 * a ring of as many rows as the vertical kernel has taps), then each output row sums the ring rows its taps name. With
 * a density, three sums travel together (values over the valid pixels, their weight, and the density), which keeps
 * the result that of the 2-D loop (convolveRows) up to float rounding; where every tap row is opaque, only the values
 * travel. Measured 3.5× (bilinear at 1:1) to 11× (cubic at 1.5:1, 49 taps a pixel in 2-D, 14 here) faster than the
 * former per-pixel loop on a 256 px tile.
 */
function convolveSeparable (level, win, bands, density, grid, cubic, values, alpha, [sx, sy], s) {
  const { n } = grid
  const [x0, y0, x1, y1] = win
  const w = x1 - x0
  const h = y1 - y0
  const nb = bands.length
  const radius = cubic ? 2 : 1
  const X = axisTaps((s.tapsX ??= {}), grid.cols, n, level.fx, x0, w, level.width, radius, sx, cubic)
  const Y = axisTaps((s.tapsY ??= {}), grid.rows, n, level.fy, y0, h, level.height, radius, sy, cubic)
  const { count: xc, sum: xsum, centre: xcentre } = X
  const lines = nb + (density === null ? 0 : 2) // per ring row: each band's sums, then the valid weight and density
  const span = lines * n
  const slots = Y.most
  const ring = grown(s, 'ring', Float64Array, slots * span)
  const ringRow = grown(s, 'ringRow', Int32Array, slots).fill(-1, 0, slots)
  const acc = grown(s, 'acc', Float64Array, span)
  const slotOpaque = grown(s, 'slotOpaque', Uint8Array, slots) // whether the window row in a slot is all opaque
  const transparentRows = density === null ? null : transparentRowsOf(density, w, h, s)
  let everyColumn = true // every output column has taps, their raw sums at least leastXsum
  let leastXsum = Infinity
  for (let i = 0; i < n; i++) {
    if (xc[i] === 0) everyColumn = false
    else if (xsum[i] < leastXsum) leastXsum = xsum[i]
  }
  for (let j = 0, k = 0; j < n; j++, k += n) {
    const cnt = Y.count[j]
    if (cnt === 0) { alpha.fill(0, k, k + n); continue }
    // Down the taps: the ring rows, weighted, summed into acc (each a plain pass over the row's sums). Where every
    // tap row is opaque (a tile with a nodata area elsewhere), only the values' sums, and no density on them.
    let opaque = true
    for (let t = 0, r = Y.start[j]; t < cnt; t++, r++) {
      const slot = r % slots
      if (ringRow[slot] !== r) {
        const rowOpaque = transparentRows === null || transparentRows[r + 1] === transparentRows[r]
        filterRow(bands, rowOpaque ? null : density, r * w, X, n, ring, slot * span)
        ringRow[slot] = r
        slotOpaque[slot] = rowOpaque ? 1 : 0
      }
      if (slotOpaque[slot] === 0) opaque = false
    }
    const used = opaque ? nb * n : span
    for (let t = 0, r = Y.start[j], wq = j * Y.most; t < cnt; t++, r++) {
      const base = (r % slots) * span
      const wy = Y.weight[wq + t]
      if (!opaque && slotOpaque[r % slots] === 1) { // an opaque row among others: its valid weight and density, as sums
        for (let e = 0; e < nb * n; e++) acc[e] = (t === 0 ? 0 : acc[e]) + wy * ring[base + e]
        for (let i = 0, e = nb * n; i < n; i++, e++) acc[e] = (t === 0 ? 0 : acc[e]) + wy * X.normal[i]
        for (let i = 0, e = (nb + 1) * n; i < n; i++, e++) acc[e] = (t === 0 ? 0 : acc[e]) + wy * 255 * X.normal[i]
        continue
      }
      if (t === 0) for (let e = 0; e < used; e++) acc[e] = wy * ring[base + e]
      else for (let e = 0; e < used; e++) acc[e] += wy * ring[base + e]
    }
    const ysum = Y.sum[j]
    if (opaque) {
      if (nb === 1 && everyColumn && ysum > 0 && leastXsum * ysum > 1e-5) { // the common case: no test per pixel
        alpha.fill(1, k, k + n)
        for (let i = 0; i < n; i++) values[k + i] = acc[i]
        continue
      }
      for (let i = 0; i < n; i++) {
        const q = k + i
        // The 2-D loop's thresholds, on raw weights: valid weight > 1e-5 (here all of it) and total weight > 0.
        if (xc[i] === 0 || !(xsum[i] * ysum > 1e-5)) { alpha[q] = 0; continue }
        alpha[q] = 1
        for (let b = 0; b < nb; b++) values[q * nb + b] = acc[b * n + i]
      }
      continue
    }
    const crow = Y.centre[j]
    const centreRow = crow >= 0 ? crow * w : -1
    const validAt = nb * n; const densAt = validAt + n
    for (let i = 0; i < n; i++) {
      const q = k + i
      alpha[q] = 0
      if (xc[i] === 0) continue
      const cc = xcentre[i]
      if (centreRow >= 0 && cc >= 0 && density[centreRow + cc] === 0) continue
      const wsum = xsum[i] * ysum
      const valid = acc[validAt + i]
      if (!(valid * wsum > 1e-5) || !(wsum > 0)) continue
      // Values average over the valid pixels by kernel weight alone (as GDAL does); alpha averages the density.
      const a = acc[densAt + i] / 255
      alpha[q] = a < 0 ? 0 : a > 1 ? 1 : a
      if (nb === 1) values[q] = acc[i] / valid
      else for (let b = 0; b < nb; b++) values[q * nb + b] = acc[b * n + i] / valid
    }
  }
}

/**
 * Window rows with a transparent pixel, counted from the top: opaque(r0, r1) = transparentRows[r1 + 1] ===
 * transparentRows[r0] when rows r0…r1 are all opaque (density 255). In the scratch.
 */
function transparentRowsOf (density, w, h, s) {
  const counts = grown(s, 'transparentRows', Int32Array, h + 1)
  counts[0] = 0
  for (let r = 0; r < h; r++) {
    let opaque = 1
    for (let p = r * w, end = p + w; p < end; p++) if (density[p] !== 255) { opaque = 0; break }
    counts[r + 1] = counts[r] + 1 - opaque
  }
  return counts
}

/**
 * One source row (window row offset `row`) filtered along x for every output column (taps X) into the ring at `base`:
 * per band the weighted sum of the valid pixels, then (with a density) the valid pixels' weight and the density's.
 * The taps of a column are written out for 1 to 4 of them (bilinear to 2:1, cubic at 1:1).
 */
function filterRow (bands, density, row, X, n, ring, base) {
  const { start: xs, count: xc, weight: xw, most: xm } = X
  const nb = bands.length
  if (density !== null) {
    for (let i = 0, wq = 0; i < n; i++, wq += xm) {
      const cnt = xc[i]
      let valid = 0; let dens = 0
      for (let t = 0, p = row + xs[i]; t < cnt; t++, p++) {
        const d = density[p]
        if (d === 0) continue
        const wt = xw[wq + t]
        valid += wt
        dens += wt * d
      }
      ring[base + nb * n + i] = valid
      ring[base + (nb + 1) * n + i] = dens
    }
  }
  for (let b = 0; b < nb; b++) {
    const band = bands[b]
    const out = base + b * n
    if (density !== null) {
      for (let i = 0, wq = 0; i < n; i++, wq += xm) {
        const cnt = xc[i]
        let a = 0
        for (let t = 0, p = row + xs[i]; t < cnt; t++, p++) if (density[p] !== 0) a += xw[wq + t] * band[p]
        ring[out + i] = a
      }
      continue
    }
    for (let i = 0, wq = 0; i < n; i++, wq += xm) {
      const p = row + xs[i]
      switch (xc[i]) {
        case 0: ring[out + i] = 0; break
        case 1: ring[out + i] = xw[wq] * band[p]; break
        case 2: ring[out + i] = xw[wq] * band[p] + xw[wq + 1] * band[p + 1]; break
        case 3: ring[out + i] = xw[wq] * band[p] + xw[wq + 1] * band[p + 1] + xw[wq + 2] * band[p + 2]; break
        case 4: ring[out + i] = xw[wq] * band[p] + xw[wq + 1] * band[p + 1] + xw[wq + 2] * band[p + 2] + xw[wq + 3] * band[p + 3]; break
        default: {
          let a = 0
          for (let t = 0, cnt = xc[i]; t < cnt; t++) a += xw[wq + t] * band[p + t]
          ring[out + i] = a
        }
      }
    }
  }
}

/** Whether the 4 × 4 window pixels from p (rows w apart) are all opaque. */
function opaque4x4 (density, p, w) {
  let all = 255
  for (let q = p, y = 0; y < 4; y++, q += w) all &= density[q] & density[q + 1] & density[q + 2] & density[q + 3]
  return all === 255
}

/** Keys' cubic convolution kernel at distance x ≥ 0 (a = -0.5, GDAL's "cubic"); small enough that V8 inlines it. */
const keys = (x) => (x <= 1 ? (1.5 * x - 2.5) * x * x + 1 : x < 2 ? ((-0.5 * x + 2.5) * x - 4) * x + 2 : 0)

/**
 * Bilinear or cubic on any other grid: each pixel's own taps, the kernel written out, the grid's coordinates a row at a
 * time; arrays reused, one band summed in locals, up to 4 taps a row unrolled, and at 1:1 (no reduction, the usual
 * case past maxzoom) the 2 or 4 taps each way written out. Measured 2.7× (cubic at 1.5:1) to 5.6× (cubic at 1:1)
 * faster than the former loop with a kernel function per weight, per-pixel grids and per-band accumulators.
 */
function convolveRows (level, win, bands, density, grid, cubic, values, alpha, [sx, sy], s) {
  const { n } = grid
  const [x0, y0, x1, y1] = win
  const w = x1 - x0
  const h = y1 - y0
  const nb = bands.length
  const band0 = bands[0]
  const { width, height } = level
  // Inverses, multiplied rather than divided by at every pixel and tap (divisions were a third of the time).
  const ifx = 1 / level.fx; const ify = 1 / level.fy; const isx = 1 / sx; const isy = 1 / sy
  const radius = cubic ? 2 : 1
  const rx = radius * sx; const ry = radius * sy
  const unit = sx === 1 && sy === 1 // no reduction: a fixed number of taps
  const taps = cubic ? 4 : 2; const first = cubic ? 1 : 0 // from the pixel left of (above) the centre, less first
  const wx = grown(s, 'wx', Float64Array, Math.ceil(rx) * 2 + 2)
  const wy = grown(s, 'wy', Float64Array, Math.ceil(ry) * 2 + 2)
  const acc = grown(s, 'bandAcc', Float64Array, nb)
  const lineCols = grown(s, 'lineCols', Float64Array, n)
  const lineRows = grown(s, 'lineRows', Float64Array, n)
  const full = grid.full === true ? grid : grid.full // every pixel's coordinates, when already made (fullGrid)
  // A pixel whose taps all lie in opaque window rows is summed as where everything is opaque.
  const transparentRows = density === null ? null : transparentRowsOf(density, w, h, s)
  for (let j = 0, k = 0; j < n; j++) {
    let cols = lineCols; let rows = lineRows; let o = 0
    if (full !== undefined) { cols = full.cols; rows = full.rows; o = j * n } else gridRow(grid, j, lineCols, lineRows)
    for (let i = 0; i < n; i++, k++) {
      alpha[k] = 0
      const c = cols[o + i] * ifx - x0
      const r = rows[o + i] * ify - y0
      if (!(c >= -1 && r >= -1 && c <= w + 1 && r <= h + 1)) continue
      // Outside the raster proper (not just the window), nothing.
      const sc = c + x0; const sr = r + y0
      if (sc < 0 || sr < 0 || sc > width || sr > height) continue
      const cc = c - 0.5; const rr = r - 0.5 // pixel centres sit at .5
      if (unit) {
        // At up to 1:1, inside the window, on opaque pixels (whole rows of them, or bilinear's four): the taps written
        // out (2 or 4 each way), weighed exactly as the loops below weigh them (a zero weight at an integer centre adds
        // nothing). 3× faster than the loops.
        const fc = Math.floor(cc) - first; const fr = Math.floor(rr) - first
        const p = fr * w + fc
        if (fc >= 0 && fr >= 0 && fc + taps <= w && fr + taps <= h && (density === null || transparentRows[fr + taps] === transparentRows[fr] ||
          (cubic ? opaque4x4(density, p, w) : (density[p] & density[p + 1] & density[p + w] & density[p + w + 1]) === 255))) {
          if (cubic) {
            const u0 = Math.abs(fc - cc); const u1 = Math.abs(fc + 1 - cc); const u2 = Math.abs(fc + 2 - cc); const u3 = Math.abs(fc + 3 - cc)
            const v0 = Math.abs(fr - rr); const v1 = Math.abs(fr + 1 - rr); const v2 = Math.abs(fr + 2 - rr); const v3 = Math.abs(fr + 3 - rr)
            const x0w = keys(u0); const x1w = keys(u1); const x2w = keys(u2); const x3w = keys(u3)
            const y0w = keys(v0); const y1w = keys(v1); const y2w = keys(v2); const y3w = keys(v3)
            const wsum = (x0w + x1w + x2w + x3w) * (y0w + y1w + y2w + y3w)
            if (!(wsum > 1e-5)) continue
            for (let b = 0; b < nb; b++) {
              const band = bands[b]
              let a = 0
              for (let q = p, y = 0; y < 4; y++, q += w) {
                const wv = y === 0 ? y0w : y === 1 ? y1w : y === 2 ? y2w : y3w
                a += wv * (x0w * band[q] + x1w * band[q + 1] + x2w * band[q + 2] + x3w * band[q + 3])
              }
              values[k * nb + b] = a / wsum
            }
          } else {
            const x0w = 1 - Math.abs(fc - cc); const x1w = 1 - Math.abs(fc + 1 - cc)
            const y0w = 1 - Math.abs(fr - rr); const y1w = 1 - Math.abs(fr + 1 - rr)
            const wsum = (x0w + x1w) * (y0w + y1w)
            for (let b = 0; b < nb; b++) {
              const band = bands[b]
              const a = y0w * (x0w * band[p] + x1w * band[p + 1]) + y1w * (x0w * band[p + w] + x1w * band[p + w + 1])
              values[k * nb + b] = a / wsum
            }
          }
          alpha[k] = 1
          continue
        }
      }
      const px0 = Math.max(0, Math.floor(cc - rx) + 1); const px1 = Math.min(w - 1, Math.ceil(cc + rx) - 1)
      const py0 = Math.max(0, Math.floor(rr - ry) + 1); const py1 = Math.min(h - 1, Math.ceil(rr + ry) - 1)
      const tx = px1 - px0 + 1; const ty = py1 - py0 + 1
      if (tx <= 0 || ty <= 0) continue
      const opaque = density === null || (transparentRows[py1 + 1] === transparentRows[py0] && Math.floor(r) >= py0 && Math.floor(r) <= py1)
      if (!opaque) {
        const nc = Math.floor(c); const nr = Math.floor(r)
        if (nc >= 0 && nr >= 0 && nc < w && nr < h && density[nr * w + nc] === 0) continue
      }
      let sumX = 0
      for (let t = 0; t < tx; t++) {
        const x = Math.abs((px0 + t - cc) * isx)
        const wt = cubic ? (x <= 1 ? (1.5 * x - 2.5) * x * x + 1 : x < 2 ? ((-0.5 * x + 2.5) * x - 4) * x + 2 : 0) : (x < 1 ? 1 - x : 0)
        wx[t] = wt
        sumX += wt
      }
      let sumY = 0
      for (let t = 0; t < ty; t++) {
        const x = Math.abs((py0 + t - rr) * isy)
        const wt = cubic ? (x <= 1 ? (1.5 * x - 2.5) * x * x + 1 : x < 2 ? ((-0.5 * x + 2.5) * x - 4) * x + 2 : 0) : (x < 1 ? 1 - x : 0)
        wy[t] = wt
        sumY += wt
      }
      const wsum = sumX * sumY
      if (opaque) {
        // Every pixel valid: the weighted mean. (The thresholds: valid weight > 1e-5, here all of it, and total > 0.)
        if (!(wsum > 1e-5)) continue
        const w0 = wx[0]; const w1 = wx[1]; const w2 = wx[2]; const w3 = wx[3]
        for (let b = 0; b < nb; b++) {
          const band = bands[b]
          let a = 0
          for (let u = 0, q = py0 * w + px0; u < ty; u++, q += w) {
            let line
            if (tx === 2) line = w0 * band[q] + w1 * band[q + 1]
            else if (tx === 3) line = w0 * band[q] + w1 * band[q + 1] + w2 * band[q + 2]
            else if (tx === 4) line = w0 * band[q] + w1 * band[q + 1] + w2 * band[q + 2] + w3 * band[q + 3]
            else { line = 0; for (let t = 0; t < tx; t++) line += wx[t] * band[q + t] }
            a += wy[u] * line
          }
          values[k * nb + b] = a / wsum
        }
        alpha[k] = 1
        continue
      }
      // Values average over the valid pixels by kernel weight alone (as GDAL does); alpha averages the density.
      let valid = 0; let dens = 0; let a0 = 0
      if (nb > 1) for (let b = 0; b < nb; b++) acc[b] = 0
      for (let u = 0, row = py0 * w + px0; u < ty; u++, row += w) {
        const wv = wy[u]
        if (wv === 0) continue
        for (let t = 0; t < tx; t++) {
          const p = row + t
          const d = density[p]
          if (d === 0) continue
          const weight = wx[t] * wv
          if (weight === 0) continue
          valid += weight
          dens += weight * d
          if (nb === 1) a0 += weight * band0[p]
          else for (let b = 0; b < nb; b++) acc[b] += weight * bands[b][p]
        }
      }
      if (!(valid > 1e-5) || !(wsum > 0)) continue
      const a = dens / 255 / wsum
      alpha[k] = a < 0 ? 0 : a > 1 ? 1 : a
      if (nb === 1) values[k] = a0 / valid
      else for (let b = 0; b < nb; b++) values[k * nb + b] = acc[b] / valid
    }
  }
}

/**
 * Full-resolution source pixels per output pixel across this tile, as gdalwarp -ovr AUTO measures it with -te and
 * -ts: the width of the source columns the tile's points reach, over the tile's width in pixels. Undefined if
 * unknown. (Along x only, as GDAL does: a polar tile reaches far more columns than its centre's scale suggests, and
 * GDAL reads a coarser overview for it.) Where that width is out of all proportion to the pixel steps inside the
 * tile, it spans a seam (the antimeridian of a geographic raster, whose two sides are far apart in columns): the
 * larger of the median steps stands in for it.
 */
export function tileRatio (grid) {
  let r
  if (grid.separable) r = Math.abs(grid.cols[1] - grid.cols[0])
  else {
    const [min, max] = range(grid.gx)
    r = (max - min) / grid.n
    const [sx, sy] = pixelSteps(grid)
    const local = Math.max(Number.isFinite(sx) ? sx : 0, Number.isFinite(sy) ? sy : 0)
    if (grid.cut === true || !(r <= 8 * local)) r = local
  }
  return r > 0 && Number.isFinite(r) ? r : undefined
}

/**
 * Full-resolution source pixels between neighbouring output pixels, along x and along y: for a projected file, from
 * the exact grid points (over a cell, divided by its width) at three places, the median taken, so one seam in the
 * tile (the antimeridian) cannot skew them.
 */
function pixelSteps (grid) {
  if (grid.separable) {
    const mid = grid.n >> 1
    return [Math.abs(grid.cols[mid + 1] - grid.cols[mid]), Math.abs(grid.rows[mid + 1] - grid.rows[mid])]
  }
  const { gx, gy, g, step } = grid
  const w = g + 1
  const at = (a, b) => b * w + a
  const span = (p, q) => Math.hypot(gx[q] - gx[p], gy[q] - gy[p]) / step
  const median = (a, b, c) => Math.max(Math.min(a, b), Math.min(Math.max(a, b), c))
  const q = g >> 2; const mid = g >> 1; const q3 = Math.max(mid, g - 1 - q) // cells, not past the last
  return [
    median(span(at(q, mid), at(q + 1, mid)), span(at(mid, mid), at(mid + 1, mid)), span(at(q3, mid), at(q3 + 1, mid))),
    median(span(at(mid, q), at(mid, q + 1)), span(at(mid, mid), at(mid, mid + 1)), span(at(mid, q3), at(mid, q3 + 1))),
  ]
}

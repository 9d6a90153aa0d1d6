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
  const out = [0, 0]
  const node = (px, py, cols, rows, at) => { // output pixel position (px, py) (corners at integers), exactly
    ds.toSource(extent[0] + px * res, extent[3] - py * res, out)
    cols[at] = (out[0] - ox) / rx
    rows[at] = (oy - out[1]) / ry
  }
  const exact = (i, j, cols, rows, at) => node(i + 0.5, j + 0.5, cols, rows, at) // the centre of pixel (i, j)
  let minC = Infinity; let maxC = -Infinity; let minR = Infinity; let maxR = -Infinity
  for (let b = 0; b <= g; b++) {
    for (let a = 0; a <= g; a++) {
      ds.toSource(extent[0] + a * step * res, extent[3] - b * step * res, out)
      const c = (out[0] - ox) / rx; const r = (oy - out[1]) / ry
      gx[b * (g + 1) + a] = c
      gy[b * (g + 1) + a] = r
      minC = Math.min(minC, c); maxC = Math.max(maxC, c); minR = Math.min(minR, r); maxR = Math.max(maxR, r)
    }
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
    subGrids: new Map(),
    // A bilinear cell never leaves its corners' range; finer or point-by-point cells may, so they need a scan.
    nodeBounds: Number.isFinite(minC + maxC + minR + maxR) ? [minC, maxC, minR, maxR] : null,
    scratch,
  }
  grid.pointwise = pointwiseCells(grid)
  return grid
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
  const at = (arr, a, b) => arr[b * w + a]
  // Full-resolution source pixels per output pixel: the threshold is 1/8 of a pixel at that scale.
  const ratio = Math.max(1, ...pixelSteps(grid))
  const limit = 8 * 0.125 * ratio // error ≈ second difference / 8
  let cells = null
  const second = (arr, a, b, da, db) => Math.abs(at(arr, a - da, b - db) - 2 * at(arr, a, b) + at(arr, a + da, b + db))
  for (let b = 0; b < g; b++) {
    for (let a = 0; a < g; a++) {
      let worst = 0
      for (const arr of [gx, gy]) {
        for (const [na, nb] of [[a, b], [a + 1, b], [a, b + 1], [a + 1, b + 1]]) {
          const ia = Math.min(Math.max(na, 1), g - 1); const ib = Math.min(Math.max(nb, 1), g - 1)
          worst = Math.max(worst, g > 1 ? second(arr, ia, nb, 1, 0) + second(arr, na, ib, 0, 1) : 0)
        }
        if (!Number.isFinite(at(arr, a, b) + at(arr, a + 1, b) + at(arr, a, b + 1) + at(arr, a + 1, b + 1))) worst = NaN
      }
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
  const { n } = grid
  const { cols, rows } = grid.scratch
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

// Keys' cubic convolution, a = -0.5 (GDAL's "cubic"), and the triangle (bilinear).
const cubic = (t) => {
  const x = Math.abs(t)
  if (x <= 1) return (1.5 * x - 2.5) * x * x + 1
  if (x < 2) return ((-0.5 * x + 2.5) * x - 4) * x + 2
  return 0
}
const triangle = (t) => Math.max(0, 1 - Math.abs(t))

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
 * Samples the window for every output pixel. `bands` are Float32Arrays over the window, `density` the window's
 * validity (0 transparent … 255 opaque, from alpha, mask and nodata). Writes `values` (n² × bands, interleaved) and
 * `alpha` (n², 0..1). Transparent source pixels do not contribute: weights are renormalised over the valid ones.
 * When reducing, the bilinear and cubic kernels widen by the reduction (as gdalwarp's do), so detail averages
 * instead of aliasing.
 */
export function resample (level, win, bands, density, grid, resampling, values, alpha, scale = [1, 1]) {
  if (grid.separable && resampling === 'nearest') return nearestSeparable(level, win, bands, density, grid, values, alpha)
  const { cols, rows } = grid
  const count = grid.n * grid.n
  const [x0, y0, x1, y1] = win
  const w = x1 - x0
  const h = y1 - y0
  const nb = bands.length
  const { fx, fy } = level
  const acc = new Float64Array(nb)
  const kernel = resampling === 'cubic' ? cubic : triangle
  const radius = resampling === 'cubic' ? 2 : 1
  const [sx, sy] = scale
  const wx = new Float64Array(Math.ceil(radius * sx) * 2 + 2)
  for (let k = 0; k < count; k++) {
    const c = cols[k] / fx - x0
    const r = rows[k] / fy - y0
    alpha[k] = 0
    if (!(c >= -1 && r >= -1 && c <= w + 1 && r <= h + 1)) continue
    if (resampling === 'nearest') {
      // A centre exactly on a pixel edge (every other pixel, at 2:1) takes the next pixel, as GDAL's floor(x + ε) does.
      const ic = Math.floor(c + 1e-6); const ir = Math.floor(r + 1e-6)
      if (ic < 0 || ir < 0 || ic >= w || ir >= h) continue
      const p = ir * w + ic
      const d = density[p]
      if (d === 0) continue
      alpha[k] = d / 255
      for (let b = 0; b < nb; b++) values[k * nb + b] = bands[b][p]
      continue
    }
    // Outside the raster proper (not just the window), nothing.
    const sc = c + x0; const sr = r + y0
    if (sc < 0 || sr < 0 || sc > level.width || sr > level.height) continue
    // Where the pixel under the centre is transparent, so is the output (gdalwarp skips it): data does not bleed
    // into nodata areas.
    const nc = Math.floor(c); const nr = Math.floor(r)
    if (nc >= 0 && nr >= 0 && nc < w && nr < h && density[nr * w + nc] === 0) continue
    const cc = c - 0.5; const rr = r - 0.5 // pixel centres sit at .5
    const px0 = Math.max(0, Math.floor(cc - radius * sx) + 1); const px1 = Math.min(w - 1, Math.ceil(cc + radius * sx) - 1)
    const py0 = Math.max(0, Math.floor(rr - radius * sy) + 1); const py1 = Math.min(h - 1, Math.ceil(rr + radius * sy) - 1)
    for (let px = px0; px <= px1; px++) wx[px - px0] = kernel((px - cc) / sx)
    let wsum = 0; let vsum = 0; let dsum = 0
    acc.fill(0)
    for (let py = py0; py <= py1; py++) {
      const wy = kernel((py - rr) / sy)
      if (wy === 0) continue
      for (let px = px0, p = py * w + px0; px <= px1; px++, p++) {
        const weight = wx[px - px0] * wy
        if (weight === 0) continue
        wsum += weight
        const d = density[p]
        if (d === 0) continue
        // Values average over the valid pixels by kernel weight alone (as GDAL does); alpha averages the density.
        vsum += weight
        dsum += weight * d / 255
        for (let b = 0; b < nb; b++) acc[b] += weight * bands[b][p]
      }
    }
    if (vsum <= 1e-5 || wsum <= 0) continue
    alpha[k] = Math.min(1, Math.max(0, dsum / wsum))
    for (let b = 0; b < nb; b++) values[k * nb + b] = acc[b] / vsum
  }
}

/**
 * Nearest neighbour when columns depend only on x and rows only on y (a Web Mercator file): the source index of each
 * output column and row is computed once, not per pixel. The hot path of web-optimized COGs, measured at about twice
 * the speed of the general loop.
 */
function nearestSeparable (level, win, bands, density, { cols, rows, n }, values, alpha) {
  const [x0, y0, x1, y1] = win
  const w = x1 - x0
  const h = y1 - y0
  const nb = bands.length
  const colIndex = new Int32Array(n)
  for (let i = 0; i < n; i++) {
    const c = Math.floor(cols[i] / level.fx - x0 + 1e-6)
    colIndex[i] = c >= 0 && c < w ? c : -1
  }
  const b0 = bands[0]; const b1 = bands[nb > 1 ? 1 : 0]; const b2 = bands[nb > 2 ? 2 : 0]
  for (let j = 0, k = 0; j < n; j++) {
    const r = Math.floor(rows[j] / level.fy - y0 + 1e-6)
    if (r < 0 || r >= h) {
      alpha.fill(0, k, k + n)
      k += n
      continue
    }
    const offset = r * w
    for (let i = 0; i < n; i++, k++) {
      const c = colIndex[i]
      const d = c < 0 ? 0 : density[offset + c]
      if (d === 0) { alpha[k] = 0; continue }
      const p = offset + c
      alpha[k] = d / 255
      if (nb === 1) values[k] = b0[p]
      else { const v = k * 3; values[v] = b0[p]; values[v + 1] = b1[p]; values[v + 2] = b2[p] }
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
    if (!(r <= 8 * local)) r = local
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

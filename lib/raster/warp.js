// Web Mercator tile → source pixels → resampled values: the reprojection half of a raster tile, in plain arrays.
// gdalwarp is the reference (the tests compare with it), so overview choice and kernels follow its rules.
const GRID_STEP = 16 // pixels between exactly transformed points; between them, bilinear interpolation (GDAL's approximate transformer does the same)

/**
 * Where each of the n × n output pixel centres falls in the source: full-resolution pixel coordinates (column, row;
 * continuous, 0 at the raster's top-left corner), NaN where the point has no image in the source CRS.
 * A Mercator file's map is affine and separable, so its grid is one row of columns and one column of rows
 * (`separable`, n values each); otherwise `cols` and `rows` hold all n² pixels. Arrays come from `scratch`.
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
    return { separable: true, cols, rows, n }
  }
  const bounds = sourcePixels(ds, extent, n, scratch.cols, scratch.rows, res)
  return { separable: false, cols: scratch.cols, rows: scratch.rows, n, bounds }
}

/** Every pixel's coordinates of a grid (the general resampler wants them per pixel). */
export function fullGrid (grid, cols, rows) {
  if (!grid.separable) return grid
  const { n } = grid
  for (let j = 0, k = 0; j < n; j++) {
    cols.set(grid.cols.subarray(0, n), k)
    rows.fill(grid.rows[j], k, k + n)
    k += n
  }
  return { separable: false, cols, rows, n }
}

/**
 * A projected file: exact points every GRID_STEP pixels, bilinear between them (as GDAL's approximate transformer).
 * Returns the bounds of all the pixels' coordinates [minC, maxC, minR, maxR] when every grid point is finite (a
 * bilinear cell never leaves its corners' range), else null.
 */
function sourcePixels (ds, extent, n, cols, rows, res) {
  const [ox, rx, oy, ry] = ds.transform
  const step = Math.min(GRID_STEP, n)
  const g = n / step
  const gx = new Float64Array((g + 1) * (g + 1))
  const gy = new Float64Array((g + 1) * (g + 1))
  const out = [0, 0]
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
  for (let j = 0; j < n; j++) {
    const b = Math.floor(j / step)
    const fy = (j - b * step + 0.5) / step
    for (let a = 0; a < g; a++) {
      const p = b * (g + 1) + a
      const c00 = gx[p]; const c10 = gx[p + 1]; const c01 = gx[p + g + 1]; const c11 = gx[p + g + 2]
      const r00 = gy[p]; const r10 = gy[p + 1]; const r01 = gy[p + g + 1]; const r11 = gy[p + g + 2]
      const k0 = j * n + a * step
      if (Number.isFinite(c00 + c10 + c01 + c11 + r00 + r10 + r01 + r11)) {
        // Down the cell's left and right edges to this row, then across in equal steps.
        const cl = c00 + (c01 - c00) * fy; const cr = c10 + (c11 - c10) * fy
        const rl = r00 + (r01 - r00) * fy; const rr = r10 + (r11 - r10) * fy
        const dc = (cr - cl) / step; const dr = (rr - rl) / step
        for (let t = 0; t < step; t++) {
          cols[k0 + t] = cl + dc * (t + 0.5)
          rows[k0 + t] = rl + dr * (t + 0.5)
        }
      } else { // a cell at the edge of the projection's domain: every pixel exactly
        for (let t = 0, i = a * step; t < step; t++, i++) {
          ds.toSource(extent[0] + (i + 0.5) * res, extent[3] - (j + 0.5) * res, out)
          cols[k0 + t] = (out[0] - ox) / rx
          rows[k0 + t] = (oy - out[1]) / ry
        }
      }
    }
  }
  return Number.isFinite(minC + maxC + minR + maxR) ? [minC, maxC, minR, maxR] : null
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
  const [minC, maxC, minR, maxR] = grid.bounds ?? [...range(grid.cols), ...range(grid.rows)]
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
  // At most 8: minzoom keeps tiles within 8× of some level, and a wider kernel would only cost time.
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
 * Full-resolution source pixels per output pixel across this tile, along the axis where the source is finest (the
 * larger ratio), or undefined. GDAL's suggested output resolution takes the finer axis too, so overviews match
 * gdalwarp's for 4326 rasters, whose pixels stretch unevenly in Mercator.
 */
export function tileRatio (grid) {
  const [sx, sy] = pixelSteps(grid)
  const r = Math.max(Number.isFinite(sx) ? sx : 0, Number.isFinite(sy) ? sy : 0)
  return r > 0 ? r : undefined
}

/**
 * Full-resolution source pixels between neighbouring output pixels, along x and along y: steps measured at three
 * places, the median taken, so one seam in the tile (the antimeridian) cannot skew them.
 */
function pixelSteps ({ separable, cols, rows, n }) {
  const mid = n >> 1
  if (separable) return [Math.abs(cols[mid + 1] - cols[mid]), Math.abs(rows[mid + 1] - rows[mid])]
  const step = (k, d) => Math.hypot(cols[k + d] - cols[k], rows[k + d] - rows[k])
  const median = (a, b, c) => Math.max(Math.min(a, b), Math.min(Math.max(a, b), c))
  const q = n >> 2
  return [
    median(step(mid * n + q, 1), step(mid * n + mid, 1), step(mid * n + 3 * q, 1)),
    median(step(q * n + mid, n), step(mid * n + mid, n), step(3 * q * n + mid, n)),
  ]
}

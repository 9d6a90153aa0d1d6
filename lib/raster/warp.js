// Web Mercator tile → source pixels → resampled values: the reprojection half of a raster tile, in plain arrays.
// gdalwarp is the reference (the tests compare with it), so overview choice and kernels follow its rules.
const GRID_STEP = 16 // pixels between exactly transformed points; between them, bilinear interpolation (GDAL's approximate transformer does the same)

/**
 * Full-resolution source pixel coordinates (column, row; continuous, 0 at the raster's top-left corner) of the
 * centre of each of the n × n output pixels. NaN where the point has no image in the source CRS.
 */
export function sourcePixels (ds, extent, n, cols, rows) {
  const [ox, rx, oy, ry] = ds.transform
  const res = (extent[2] - extent[0]) / n
  if (ds.toSource === null) { // Mercator file: an affine map, no projection at all
    for (let j = 0; j < n; j++) {
      const r = (oy - (extent[3] - (j + 0.5) * res)) / ry
      for (let i = 0, k = j * n; i < n; i++, k++) {
        cols[k] = (extent[0] + (i + 0.5) * res - ox) / rx
        rows[k] = r
      }
    }
    return
  }
  const step = Math.min(GRID_STEP, n)
  const g = n / step
  const gx = new Float64Array((g + 1) * (g + 1))
  const gy = new Float64Array((g + 1) * (g + 1))
  const out = [0, 0]
  for (let b = 0; b <= g; b++) {
    for (let a = 0; a <= g; a++) {
      ds.toSource(extent[0] + a * step * res, extent[3] - b * step * res, out)
      gx[b * (g + 1) + a] = (out[0] - ox) / rx
      gy[b * (g + 1) + a] = (oy - out[1]) / ry
    }
  }
  for (let j = 0; j < n; j++) {
    const v = (j + 0.5) / step
    const b = Math.min(Math.floor(v), g - 1)
    const fy = v - b
    for (let i = 0, k = j * n; i < n; i++, k++) {
      const u = (i + 0.5) / step
      const a = Math.min(Math.floor(u), g - 1)
      const fx = u - a
      const p = b * (g + 1) + a
      const c00 = gx[p]; const c10 = gx[p + 1]; const c01 = gx[p + g + 1]; const c11 = gx[p + g + 2]
      const r00 = gy[p]; const r10 = gy[p + 1]; const r01 = gy[p + g + 1]; const r11 = gy[p + g + 2]
      if (Number.isFinite(c00 + c10 + c01 + c11 + r00 + r10 + r01 + r11)) {
        cols[k] = (c00 * (1 - fx) + c10 * fx) * (1 - fy) + (c01 * (1 - fx) + c11 * fx) * fy
        rows[k] = (r00 * (1 - fx) + r10 * fx) * (1 - fy) + (r01 * (1 - fx) + r11 * fx) * fy
      } else { // a cell at the edge of the projection's domain: every pixel exactly
        ds.toSource(extent[0] + (i + 0.5) * res, extent[3] - (j + 0.5) * res, out)
        cols[k] = (out[0] - ox) / rx
        rows[k] = (oy - out[1]) / ry
      }
    }
  }
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
export function windowOf (level, cols, rows, count, resampling, spread = 1) {
  let minC = Infinity; let maxC = -Infinity; let minR = Infinity; let maxR = -Infinity
  const { fx, fy } = level
  for (let k = 0; k < count; k++) {
    const c = cols[k]; const r = rows[k]
    if (c < minC) minC = c
    if (c > maxC) maxC = c
    if (r < minR) minR = r
    if (r > maxR) maxR = r
  }
  if (!(minC <= maxC)) return null
  const m = Math.ceil(KERNEL_RADIUS[resampling] * spread) + 1
  const x0 = Math.max(0, Math.floor(minC / fx) - m)
  const y0 = Math.max(0, Math.floor(minR / fy) - m)
  const x1 = Math.min(level.width, Math.ceil(maxC / fx) + m)
  const y1 = Math.min(level.height, Math.ceil(maxR / fy) + m)
  return x0 < x1 && y0 < y1 ? [x0, y0, x1, y1] : null
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
export function sampleScale (level, cols, rows, n) {
  const [px, py] = pixelSteps(cols, rows, n)
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
export function resample (level, win, bands, density, cols, rows, count, resampling, values, alpha, scale = [1, 1], separable = false) {
  if (separable && resampling === 'nearest') return nearestSeparable(level, win, bands, density, cols, rows, count, values, alpha)
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
function nearestSeparable (level, win, bands, density, cols, rows, count, values, alpha) {
  const [x0, y0, x1, y1] = win
  const w = x1 - x0
  const h = y1 - y0
  const n = Math.round(Math.sqrt(count))
  const nb = bands.length
  const colIndex = new Int32Array(n)
  for (let i = 0; i < n; i++) {
    const c = Math.floor(cols[i] / level.fx - x0 + 1e-6)
    colIndex[i] = c >= 0 && c < w ? c : -1
  }
  const b0 = bands[0]; const b1 = bands[nb > 1 ? 1 : 0]; const b2 = bands[nb > 2 ? 2 : 0]
  for (let j = 0, k = 0; j < n; j++) {
    const r = Math.floor(rows[j * n] / level.fy - y0 + 1e-6)
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
export function tileRatio (cols, rows, n) {
  const [sx, sy] = pixelSteps(cols, rows, n)
  const r = Math.max(Number.isFinite(sx) ? sx : 0, Number.isFinite(sy) ? sy : 0)
  return r > 0 ? r : undefined
}

/**
 * Full-resolution source pixels between neighbouring output pixels, along x and along y: steps measured at three
 * places, the median taken, so one seam in the tile (the antimeridian) cannot skew them.
 */
function pixelSteps (cols, rows, n) {
  const step = (k, d) => Math.hypot(cols[k + d] - cols[k], rows[k + d] - rows[k])
  const median = (a, b, c) => Math.max(Math.min(a, b), Math.min(Math.max(a, b), c))
  const q = n >> 2; const mid = n >> 1
  return [
    median(step(mid * n + q, 1), step(mid * n + mid, 1), step(mid * n + 3 * q, 1)),
    median(step(q * n + mid, n), step(mid * n + mid, n), step(3 * q * n + mid, n)),
  ]
}

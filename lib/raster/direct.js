// Nearest-neighbour tiles straight from the decoded blocks to 8-bit pixels: the default rendering of most COGs, and the
// hot path. For 8 and 16-bit integers, every possible sample value is mapped to its output bytes once (a lookup table
// per rendering), so a pixel costs a block lookup and one table read per channel. Floats and 32-bit integers have too
// many values for tables: a converter (converterFor) applies the rendering's arithmetic (a linear rescale, which is a
// colormap's index too, terrain-RGB) to each sample as it is read, in one loop per kind of output. Either way no
// window is copied out of the blocks and no per-tile values array is made. The general path (render.js) gives the same bytes; the tables are
// built by it and the converters share its arithmetic (render.js: clampByte, stretchOf). Band math and mosaics need
// the values themselves: with nearest, gatherValues reads them from the blocks the same way (eachRun, the traversal
// both share); bilinear and cubic read a window and resample it (warp.js).
import { clampByte, colourChannels, roundUp, stretchOf, toPixels } from './render.js'
import { gridRow } from './warp.js'
import { densityFor } from './blocks.js'

const tables = new Map() // dataset + rendering → lookup tables; a few per set in practice
const MAX_TABLES = 32

/**
 * Lookup tables for a rendering of this dataset, or null where the direct path does not apply (floats, 32-bit
 * integers, terrain encodings, band math). `tables[c][value + offset]` is output channel c's byte.
 */
export function lookupFor (ds, o) {
  if (o.encoding || o.expression || (ds.sampleFormat !== 1 && ds.sampleFormat !== 2) || ds.bits > 16) return null
  const key = `${ds.key}|${JSON.stringify(o)}`
  let lut = tables.get(key)
  if (lut !== undefined) return lut
  const size = 2 ** ds.bits
  const offset = ds.sampleFormat === 2 ? size / 2 : 0
  const nb = o.bidx.length
  const rendering = { ...o, palette: o.palette ? ds.palette : null } // the file's own colour table, if it has one
  const channels = colourChannels(nb, rendering)
  // Every value through the general conversion, each band given the same value: channel c's table is read off it.
  const values = new Float32Array(size * nb)
  for (let i = 0; i < size; i++) values.fill(i - offset, i * nb, i * nb + nb)
  const colour = new Uint8Array(size * channels)
  toPixels(values, new Float32Array(size).fill(1), size, nb, rendering, colour, new Uint8Array(size))
  const luts = Array.from({ length: channels }, (_, c) => Uint8Array.from({ length: size }, (_, i) => colour[i * channels + c]))
  lut = {
    channels,
    offset,
    samples: o.bidx,
    tables: luts,
    // 8-bit values shown as they are (no rescale or palette; a colormap's indices): pixels are copied, not looked up.
    identity: size === 256 && offset === 0 && nb === channels && luts.every((t) => t.every((v, i) => v === i)),
  }
  if (tables.size >= MAX_TABLES) tables.delete(tables.keys().next().value)
  tables.set(key, lut)
  return lut
}

/**
 * The direct path for data lookup tables cannot hold (floats, 32-bit integers): { kind, channels, samples, stretch },
 * kind 'grey' (a colormap's indices too), 'rgb', 'terrarium' or 'mapbox'. Null where it does not apply: band math (it
 * needs the values), a palette, or data the lookup tables serve (lookupFor).
 */
export function converterFor (ds, o) {
  if (o.expression || o.palette || ((ds.sampleFormat === 1 || ds.sampleFormat === 2) && ds.bits <= 16)) return null
  const nb = o.bidx.length
  if (nb !== 1 && nb !== 3) return null
  return {
    kind: o.encoding ?? (nb === 3 ? 'rgb' : 'grey'), // a colormap's index is its grey byte (render.js: rampOf)
    channels: colourChannels(nb, o),
    samples: o.bidx,
    stretch: o.bidx.map((_, b) => stretchOf(o.rescale, b)),
  }
}

/**
 * Fills `colour` (n² × lut.channels) and `opacity` (n², 0..255) for the output pixels of `grid` (see sourceGrid) from
 * `level`'s blocks in `table` ({ bx0, by0, nbx, blocks }, covering every pixel the grid reaches). `lut`: lookup tables
 * (lookupFor) or a converter (converterFor). `nodata`: the request's nodata value or null; `rule`: which pixels the
 * shown samples hide (maskRule). Returns whether any pixel is visible.
 */
export function gatherNearest (level, table, grid, lut, nodata, rule, colour, opacity) {
  const { n } = grid
  const cc = lut.channels
  const [t0, t1 = t0, t2 = t0] = lut.tables ?? []
  const offset = lut.offset ?? 0
  const nd = typeof nodata === 'number' ? Math.fround(nodata) : null // 'nan' never matches an integer
  const [s0, s1 = s0, s2 = s0] = lut.samples
  // Per block: its density and the samples shown (the same one thrice for one band in colour), and whether a run of
  // it can be copied as it is: the shown samples lie in one array, consecutive and in order, all opaque.
  const views = table.blocks.map((block) => {
    const { samples } = block
    const density = densityFor(block, rule)
    const [a, b = a, c = a] = [samples[s0], samples[s1], samples[s2]]
    const packed = lut.identity === true && nd === null && density === null && a.stride === cc && a.start === 0 &&
      (cc === 1 || (b.data === a.data && c.data === a.data && b.start === 1 && c.start === 2))
    return { d: density, a0: a.data, m0: a.stride, s0: a.start, a1: b.data, m1: b.stride, s1: b.start, a2: c.data, m2: c.stride, s2: c.start, packed }
  })
  colour.fill(0, 0, n * n * cc)
  opacity.fill(0, 0, n * n)
  const convert = lut.tables === undefined
  // The converters compare with a number: NaN (never equal) rather than null, whose comparison with a float was a
  // slow generic one (a third of the run's time).
  const ndValue = nd === null ? NaN : nd
  // A run of pixels inside one block: through the tables or the converter.
  const draw = (v, k0, k1, offsets, o0, base) => convert
    ? convertRun(colour, opacity, lut, ndValue, v, k0, k1, offsets, o0, base)
    : copyRun(colour, opacity, cc, offset, nd, t0, t1, t2, v, k0, k1, offsets, o0, base)
  // The same, or copied as it is where it is one row of the block (its offsets rising one by one: separable grids only).
  const copy = (v, k0, k1, offsets, o0, base) => {
    if (convert) return draw(v, k0, k1, offsets, o0, base)
    const len = k1 - k0
    if (v.packed && offsets[o0 + len - 1] - offsets[o0] === len - 1) { // one row of the block, as it is
      const from = (base + offsets[o0]) * cc
      colour.set(v.a0.subarray(from, from + len * cc), k0 * cc)
      opacity.fill(255, k0, k1)
      return 255
    }
    return copyRun(colour, opacity, cc, offset, nd, t0, t1, t2, v, k0, k1, offsets, o0, base)
  }

  const repeat = (k) => { // an output row as the row above it (k: the row's first pixel)
    colour.copyWithin(k * cc, (k - n) * cc, k * cc)
    opacity.copyWithin(k, k - n, k)
  }
  return eachRun(level, table, grid, (view, k0, k1, offsets, o0, base) =>
    (grid.separable ? copy : draw)(views[view], k0, k1, offsets, o0, base), repeat)
}

/**
 * Nearest neighbour for the values path (band math, a mosaic's combinations), straight from the blocks: fills
 * `values` (n² × samples.length, interleaved, Float32) and `alpha` (n², 0..1) for the output pixels of `grid`: the
 * blocks' densities (`rule`: maskRule's), and the request's `nodata` where every sample read holds it, or any one
 * for band math (as readWindow applies it to the windows bilinear and cubic read), without copying a window out of the blocks first. Values of transparent pixels
 * are undefined (nothing reads them: band math and the mosaics' combinations go by alpha). Returns whether any pixel
 * is visible. NDVI over a UTM COG (bench/raster-analysis.js's bands4.tif, cache off, a worker's CPU per tile
 * in-process): 2.68 → 2.34 ms at z7, where the window read is larger than the tile; the same 1.93 ms at z9 (1:1.3);
 * byte-identical tiles.
 */
export function gatherValues (level, table, grid, samples, nodata, rule, values, alpha) {
  const { n } = grid
  const nb = samples.length
  const nd = typeof nodata === 'number' ? Math.fround(nodata) : NaN // 'nan': nothing to match (NaN is transparent already)
  const views = table.blocks.map((block) => ({ d: densityFor(block, rule), planes: samples.map((s) => block.samples[s]) }))
  const any = rule.any
  alpha.fill(0, 0, n * n)
  const repeat = (k) => {
    values.copyWithin(k * nb, (k - n) * nb, k * nb)
    alpha.copyWithin(k, k - n, k)
  }
  return eachRun(level, table, grid, (view, k0, k1, offsets, o0, base) => {
    const { d, planes } = views[view]
    // One and two samples (a band; a normalized difference's two) in loops of their own: the general one below, a pass
    // per sample, made an NDVI tile 2.2 ms of worker CPU against 1.94 for valuesRun2.
    if (nb === 1) return valuesRun1(values, alpha, nd, d, planes[0], k0, k1, offsets, o0, base)
    if (nb === 2) return valuesRun2(values, alpha, nd, any, d, planes[0], planes[1], k0, k1, offsets, o0, base)
    let seen = 0 // more samples: a pass per sample, then the opacities
    for (let b = 0; b < nb; b++) valuesPlane(values, nb, b, planes[b], k0, k1, offsets, o0, base)
    for (let k = k0, o = o0; k < k1; k++, o++) {
      const density = d === null ? 255 : d[base + offsets[o]]
      if (density === 0) continue
      // A nodata to match (NaN matches nothing): held by every sample, or by any one for band math.
      let held = 0
      for (let q = k * nb, end = q + nb; q < end; q++) if (values[q] === nd) held++
      if (any ? held > 0 : held === nb) continue
      alpha[k] = OPACITY[density]
      seen = 255
    }
    return seen
  }, repeat)
}

// 1/255 … 255/255 as Float32: a density's opacity by lookup rather than a division per pixel.
const OPACITY = Float32Array.from({ length: 256 }, (_, d) => d / 255)

/** gatherValues' run of one sample. Returns 255 when it wrote a visible pixel, else 0. */
function valuesRun1 (values, alpha, nd, d, { data, stride, start }, k0, k1, offsets, o0, base) {
  let seen = 0
  for (let k = k0, o = o0; k < k1; k++, o++) {
    const p = base + offsets[o]
    const density = d === null ? 255 : d[p]
    if (density === 0) continue
    const x = Math.fround(data[p * stride + start]) // as a Float32 window holds it
    if (x === nd) continue
    values[k] = x
    alpha[k] = OPACITY[density]
    seen = 255
  }
  return seen
}

/**
 * gatherValues' run of two samples (a normalized difference's, say), interleaved; the request's nodata hides a pixel
 * in both, or in either (`any`: band math). 255 when a pixel is visible.
 */
function valuesRun2 (values, alpha, nd, any, d, { data: a0, stride: m0, start: s0 }, { data: a1, stride: m1, start: s1 }, k0, k1, offsets, o0, base) {
  let seen = 0
  for (let k = k0, o = o0, q = 2 * k0; k < k1; k++, o++, q += 2) {
    const p = base + offsets[o]
    const density = d === null ? 255 : d[p]
    if (density === 0) continue
    const x = Math.fround(a0[p * m0 + s0]); const y = Math.fround(a1[p * m1 + s1])
    values[q] = x; values[q + 1] = y
    if (any ? x === nd || y === nd : x === nd && y === nd) continue
    alpha[k] = OPACITY[density]
    seen = 255
  }
  return seen
}

/** Sample b of a run into its place among nb interleaved values (opacities aside). */
function valuesPlane (values, nb, b, { data, stride, start }, k0, k1, offsets, o0, base) {
  for (let k = k0, o = o0, q = k0 * nb + b; k < k1; k++, o++, q += nb) values[q] = data[(base + offsets[o]) * stride + start]
}

/**
 * The traversal of the direct paths: the output pixels of `grid` (see sourceGrid) as runs of pixels whose source
 * pixels lie in one block of `level` (`table` covers every pixel the grid reaches). For each run
 * `run(view, k0, k1, offsets, o0, base)`: output pixels k0…k1 take the pixels `base + offsets[o0…]` of
 * `table.blocks[view]`; it returns the OR of the opacities it wrote. Where an output row takes the same source pixels
 * as the row above (upsampled, separable grids), `repeat(k)` copies that row to the one starting at pixel k. Pixels
 * outside the raster are left as they are. Returns whether any run wrote a visible pixel.
 */
function eachRun (level, table, grid, run, repeat) {
  const { n, cols, rows } = grid
  const { fx, fy, width, height, tileWidth: tw, tileHeight: th } = level
  const { bx0, by0, nbx } = table
  let seen = 0 // OR of every opacity written
  // A centre exactly on a pixel edge (every other pixel, at 2:1) takes the next pixel, as GDAL's floor(x + ε) does.
  if (grid.separable) {
    // Columns and rows once each; then each output row is a few runs of columns inside one block.
    const colView = new Int32Array(n)
    const colOff = new Int32Array(n)
    for (let i = 0; i < n; i++) {
      const c = Math.floor(cols[i] / fx + 1e-6)
      const bx = Math.floor(c / tw)
      colView[i] = c >= 0 && c < width ? bx - bx0 : -1
      colOff[i] = c - bx * tw
    }
    // The runs of columns inside one block column, the same on every row: found once.
    const runFrom = new Int32Array(n); const runTo = new Int32Array(n); const runView = new Int32Array(n)
    let runs = 0
    for (let i = 0; i < n;) {
      let end = i + 1
      while (end < n && colView[end] === colView[i]) end++
      if (colView[i] >= 0) { runFrom[runs] = i; runTo[runs] = end; runView[runs] = colView[i]; runs++ }
      i = end
    }
    let previous = -1 // the source row of the output row above, when drawn
    for (let j = 0, k = 0; j < n; j++, k += n) {
      const r = Math.floor(rows[j] / fy + 1e-6)
      if (!(r >= 0 && r < height)) { previous = -1; continue }
      if (r === previous) { // upsampled: the same source row as the row above, so the same pixels
        repeat(k)
        continue
      }
      previous = r
      const by = Math.floor(r / th)
      const base = (by - by0) * nbx
      const rowOff = (r - by * th) * tw
      for (let u = 0; u < runs; u++) {
        const i = runFrom[u]
        seen |= run(base + runView[u], k + i, k + runTo[u], colOff, i, rowOff)
      }
    }
    return seen !== 0
  }
  // Any other CRS: each pixel's own source pixel, a row at a time; consecutive pixels in one block are one run.
  const offsets = new Int32Array(n)
  const sx = 1 / fx; const sy = 1 / fy
  let runView = -1; let runStart = 0; let j = 0
  let left = 0; let top = 0; let right = -1; let bottom = -1 // the current block's pixels: [left, right) × [top, bottom)
  // Output pixel i of row j takes the source pixel at (cf, rf) (full-resolution coordinates × sx, sy, plus GDAL's ε).
  const pixel = (i, cf, rf) => {
    let view = -1
    if (cf >= 0 && cf < width && rf >= 0 && rf < height) { // NaN fails too
      const c = cf | 0; const r = rf | 0 // floor, for these non-negative values
      if (c >= left && c < right && r >= top && r < bottom) view = runView
      else {
        const bx = (c / tw) | 0; const by = (r / th) | 0
        left = bx * tw; top = by * th; right = left + tw; bottom = top + th
        view = (by - by0) * nbx + bx - bx0
      }
      offsets[i] = (r - top) * tw + c - left
    } else right = bottom = -1
    if (view !== runView) flush(i, view)
  }
  const flush = (i, view) => { // the run so far ends before pixel i; the next one is of `view`
    if (runView >= 0) seen |= run(runView, j * n + runStart, j * n + i, offsets, runStart, 0)
    runView = view
    runStart = i
  }
  if (grid.pointwise === null) {
    // Every cell of the node grid is bilinear (most tiles): a cell's row of `step` pixels is a straight line, so when
    // its two ends fall in one block, so does everything between (the rounding is monotonic too), and those pixels
    // skip the bounds and block tests. The coordinates are gridRow's (interpolate), worked out where they are used.
    // A worker's CPU per tile over a UTM COG (bench/raster-analysis.js's bands4.tif, in-process): NDVI 1.94 → 1.82 ms
    // at z9, one band grey 1.17 → 1.03 ms; byte-identical tiles.
    const { g, step, gx, gy } = grid
    for (; j < n; j++) {
      const b = Math.floor(j / step)
      const down = (j - b * step + 0.5) / step
      runView = -1; runStart = 0; right = bottom = -1
      for (let a = 0; a < g; a++) {
        const p = b * (g + 1) + a
        const cl = gx[p] + (gx[p + g + 1] - gx[p]) * down; const cr = gx[p + 1] + (gx[p + g + 2] - gx[p + 1]) * down
        const rl = gy[p] + (gy[p + g + 1] - gy[p]) * down; const rr = gy[p + 1] + (gy[p + g + 2] - gy[p + 1]) * down
        const dc = (cr - cl) / step; const dr = (rr - rl) / step
        const i0 = a * step
        const c0 = (cl + dc * 0.5) * sx + 1e-6; const c1 = (cl + dc * (step - 0.5)) * sx + 1e-6
        const r0 = (rl + dr * 0.5) * sy + 1e-6; const r1 = (rl + dr * (step - 0.5)) * sy + 1e-6
        if (c0 >= 0 && c0 < width && r0 >= 0 && r0 < height && c1 >= 0 && c1 < width && r1 >= 0 && r1 < height) {
          const bx = ((c0 | 0) / tw) | 0; const by = ((r0 | 0) / th) | 0
          if (bx === (((c1 | 0) / tw) | 0) && by === (((r1 | 0) / th) | 0)) {
            const view = (by - by0) * nbx + bx - bx0
            left = bx * tw; top = by * th; right = left + tw; bottom = top + th
            if (view !== runView) flush(i0, view)
            for (let t = 0; t < step; t++) {
              offsets[i0 + t] = ((((rl + dr * (t + 0.5)) * sy + 1e-6) | 0) - top) * tw + (((cl + dc * (t + 0.5)) * sx + 1e-6) | 0) - left
            }
            continue
          }
        }
        for (let t = 0; t < step; t++) pixel(i0 + t, (cl + dc * (t + 0.5)) * sx + 1e-6, (rl + dr * (t + 0.5)) * sy + 1e-6)
      }
      flush(n, -1)
    }
    return seen !== 0
  }
  const rowCols = new Float64Array(n); const rowRows = new Float64Array(n)
  for (; j < n; j++) {
    gridRow(grid, j, rowCols, rowRows)
    runView = -1; runStart = 0; right = bottom = -1
    for (let i = 0; i < n; i++) pixel(i, rowCols[i] * sx + 1e-6, rowRows[i] * sy + 1e-6)
    flush(n, -1)
  }
  return seen !== 0
}

/**
 * Output pixels k0…k1, one run inside one block (`v`), their source offsets `base + offsets[o0…]`, through the
 * lookup tables. Returns the OR of the opacities written (0: none visible).
 */
function copyRun (colour, opacity, cc, offset, nd, t0, t1, t2, v, k0, k1, offsets, o0, base) {
  const { d, a0, m0, s0, a1, m1, s1, a2, m2, s2 } = v
  let seen = 0
  for (let k = k0, o = o0; k < k1; k++, o++) {
    const p = base + offsets[o]
    const alpha = d === null ? 255 : d[p]
    if (alpha === 0) continue
    const x = a0[p * m0 + s0]
    if (cc === 1) {
      if (nd !== null && x === nd) continue
      colour[k] = t0[x + offset]
    } else {
      const y = a1[p * m1 + s1]; const z = a2[p * m2 + s2]
      if (nd !== null && x === nd && y === nd && z === nd) continue
      const q = k * 3
      colour[q] = t0[x + offset]; colour[q + 1] = t1[y + offset]; colour[q + 2] = t2[z + offset]
    }
    opacity[k] = alpha
    seen |= alpha
  }
  return seen
}

/**
 * Output pixels k0…k1 of one run inside one block (`v`), their source offsets `base + offsets[o0…]`, through a
 * converter (converterFor): samples as Float32 (what the general path's windows hold, so the bytes are the same),
 * then the rendering's arithmetic, one loop per kind. Returns the OR of the opacities written (0: none visible).
 */
function convertRun (colour, opacity, conv, nd, v, k0, k1, offsets, o0, base) {
  const { d, a0, m0, s0 } = v
  const [m, f] = conv.stretch[0]
  let seen = 0
  switch (conv.kind) {
    case 'grey': {
      // Upsampled, neighbours repeat a source pixel: its byte is reused rather than worked out again.
      let last = -1; let byte = 0
      for (let k = k0, o = o0; k < k1; k++, o++) {
        const p = base + offsets[o]
        const alpha = d === null ? 255 : d[p]
        if (alpha === 0) continue
        if (p !== last) {
          const x = Math.fround(a0[p * m0 + s0])
          if (x === nd) continue
          last = p
          byte = clampByte((x - m) * f)
        }
        colour[k] = byte
        opacity[k] = alpha
        seen |= alpha
      }
      return seen
    }
    case 'terrarium': { // as render.js: to 1/256 m, a visible pixel opaque
      let last = -1; let r = 0; let g = 0; let b = 0
      for (let k = k0, o = o0; k < k1; k++, o++) {
        const p = base + offsets[o]
        if (d !== null && d[p] === 0) continue
        if (p !== last) {
          const x = Math.fround(a0[p * m0 + s0])
          if (x === nd) continue
          last = p
          const h = Math.max(0, Math.min(65535.996, x + 32768))
          const whole = Math.floor(h)
          r = whole >> 8; g = whole & 255; b = Math.floor((h - whole) * 256)
        }
        const q = k * 3
        colour[q] = r; colour[q + 1] = g; colour[q + 2] = b
        opacity[k] = 255
        seen = 255
      }
      return seen
    }
    case 'mapbox': // as render.js: to 0.1 m
      for (let k = k0, o = o0; k < k1; k++, o++) {
        const p = base + offsets[o]
        if (d !== null && d[p] === 0) continue
        const x = Math.fround(a0[p * m0 + s0])
        if (x === nd) continue
        const h = Math.min(16777215, roundUp((x + 10000) * 10))
        const q = k * 3
        colour[q] = h >> 16; colour[q + 1] = (h >> 8) & 255; colour[q + 2] = h & 255
        opacity[k] = 255
        seen = 255
      }
      return seen
    default: { // rgb: three samples, each stretched
      const { a1, m1, s1, a2, m2, s2 } = v
      const [, [n1, f1], [n2, f2]] = conv.stretch
      for (let k = k0, o = o0; k < k1; k++, o++) {
        const p = base + offsets[o]
        const alpha = d === null ? 255 : d[p]
        if (alpha === 0) continue
        const x = Math.fround(a0[p * m0 + s0]); const y = Math.fround(a1[p * m1 + s1]); const z = Math.fround(a2[p * m2 + s2])
        if (x === nd && y === nd && z === nd) continue
        const q = k * 3
        colour[q] = clampByte((x - m) * f); colour[q + 1] = clampByte((y - n1) * f1); colour[q + 2] = clampByte((z - n2) * f2)
        opacity[k] = alpha
        seen |= alpha
      }
      return seen
    }
  }
}

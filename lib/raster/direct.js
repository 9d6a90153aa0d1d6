// Nearest-neighbour tiles straight from the decoded blocks to 8-bit pixels: the default rendering of most COGs, and the
// hot path. For 8 and 16-bit integers, every possible sample value is mapped to its output bytes once (a lookup table
// per rendering), so a pixel costs a block lookup and one table read per channel. Floats and 32-bit integers have too
// many values for tables: a converter (converterFor) applies the rendering's arithmetic (a linear rescale, a colormap,
// terrain-RGB) to each sample as it is read, in one loop per kind of output. Either way no window is copied out of
// the blocks and no per-tile values array is made. The general path (warp.js, render.js) gives the same bytes; the
// tables are built by it and the converters share its arithmetic (render.js: clampByte, stretchOf).
import { clampByte, colormap, colourChannels, roundUp, stretchOf, toPixels } from './render.js'
import { gridRow } from './warp.js'

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
  const channels = colourChannels(nb, o)
  // Every value through the general conversion, each band given the same value: channel c's table is read off it.
  const values = new Float32Array(size * nb)
  for (let i = 0; i < size; i++) values.fill(i - offset, i * nb, i * nb + nb)
  const colour = new Uint8Array(size * channels)
  toPixels(values, new Float32Array(size).fill(1), size, nb, { ...o, palette: o.palette ? ds.palette : null }, colour, new Uint8Array(size))
  const luts = Array.from({ length: channels }, (_, c) => Uint8Array.from({ length: size }, (_, i) => colour[i * channels + c]))
  lut = {
    channels,
    offset,
    samples: o.bidx,
    tables: luts,
    // 8-bit values shown as they are (no rescale, colormap or palette): pixels are copied, not looked up.
    identity: size === 256 && offset === 0 && nb === channels && luts.every((t) => t.every((v, i) => v === i)),
  }
  if (tables.size >= MAX_TABLES) tables.delete(tables.keys().next().value)
  tables.set(key, lut)
  return lut
}

/**
 * The direct path for data lookup tables cannot hold (floats, 32-bit integers): { kind, channels, samples, stretch,
 * ramp }, kind 'grey', 'ramp', 'rgb', 'terrarium' or 'mapbox'. Null where it does not apply: band math (it needs the
 * values), a palette, or data the lookup tables serve (lookupFor).
 */
export function converterFor (ds, o) {
  if (o.expression || o.palette || ((ds.sampleFormat === 1 || ds.sampleFormat === 2) && ds.bits <= 16)) return null
  const nb = o.bidx.length
  if (nb !== 1 && nb !== 3) return null
  const kind = o.encoding ?? (nb === 3 ? 'rgb' : o.colormap ? 'ramp' : 'grey')
  return {
    kind,
    channels: colourChannels(nb, o),
    samples: o.bidx,
    stretch: o.bidx.map((_, b) => stretchOf(o.rescale, b)),
    ramp: o.colormap ? colormap(o.colormap) : null,
  }
}

/**
 * Fills `colour` (n² × lut.channels) and `opacity` (n², 0..255) for the output pixels of `grid` (see sourceGrid) from
 * `level`'s blocks in `table` ({ bx0, by0, nbx, blocks }, covering every pixel the grid reaches). `lut`: lookup tables
 * (lookupFor) or a converter (converterFor). `nodata`: the request's nodata value or null. Returns whether any pixel
 * is visible.
 */
export function gatherNearest (level, table, grid, lut, nodata, colour, opacity) {
  const { n, cols, rows } = grid
  const { fx, fy, width, height, tileWidth: tw, tileHeight: th } = level
  const { bx0, by0, nbx } = table
  const cc = lut.channels
  const [t0, t1 = t0, t2 = t0] = lut.tables ?? []
  const offset = lut.offset ?? 0
  const nd = typeof nodata === 'number' ? Math.fround(nodata) : null // 'nan' never matches an integer
  const [s0, s1 = s0, s2 = s0] = lut.samples
  // Per block: its density and the samples shown (the same one thrice for one band in colour), and whether a run of
  // it can be copied as it is: the shown samples lie in one array, consecutive and in order, all opaque.
  const views = table.blocks.map(({ density, samples }) => {
    const [a, b = a, c = a] = [samples[s0], samples[s1], samples[s2]]
    const packed = lut.identity === true && nd === null && density === null && a.stride === cc && a.start === 0 &&
      (cc === 1 || (b.data === a.data && c.data === a.data && b.start === 1 && c.start === 2))
    return { d: density, a0: a.data, m0: a.stride, s0: a.start, a1: b.data, m1: b.stride, s1: b.start, a2: c.data, m2: c.stride, s2: c.start, packed }
  })
  colour.fill(0, 0, n * n * cc)
  opacity.fill(0, 0, n * n)
  let seen = 0 // OR of every opacity written
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
        colour.copyWithin(k * cc, (k - n) * cc, k * cc)
        opacity.copyWithin(k, k - n, k)
        continue
      }
      previous = r
      const by = Math.floor(r / th)
      const base = (by - by0) * nbx
      const rowOff = (r - by * th) * tw
      for (let u = 0; u < runs; u++) {
        const i = runFrom[u]
        seen |= copy(views[base + runView[u]], k + i, k + runTo[u], colOff, i, rowOff)
      }
    }
    return seen !== 0
  }
  // Any other CRS: each pixel's own source pixel, a row at a time; consecutive pixels in one block are one run.
  const offsets = new Int32Array(n)
  const rowCols = new Float64Array(n); const rowRows = new Float64Array(n)
  const sx = 1 / fx; const sy = 1 / fy
  for (let j = 0; j < n; j++) {
    gridRow(grid, j, rowCols, rowRows)
    let runView = -1
    let runStart = 0
    let left = 0; let top = 0; let right = -1; let bottom = -1 // the current block's pixels: [left, right) × [top, bottom)
    for (let i = 0; i <= n; i++) {
      let view = -2 // past the row's end: flushes the last run
      if (i < n) {
        const cf = rowCols[i] * sx + 1e-6
        const rf = rowRows[i] * sy + 1e-6
        view = -1
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
      }
      if (view !== runView) {
        if (runView >= 0) seen |= draw(views[runView], j * n + runStart, j * n + i, offsets, runStart, 0)
        runView = view
        runStart = i
      }
    }
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
    case 'ramp': {
      const { ramp } = conv
      for (let k = k0, o = o0; k < k1; k++, o++) {
        const p = base + offsets[o]
        const alpha = d === null ? 255 : d[p]
        if (alpha === 0) continue
        const x = Math.fround(a0[p * m0 + s0])
        if (x === nd) continue
        const g = clampByte((x - m) * f) * 3
        const q = k * 3
        colour[q] = ramp[g]; colour[q + 1] = ramp[g + 1]; colour[q + 2] = ramp[g + 2]
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

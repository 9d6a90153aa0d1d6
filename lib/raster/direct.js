// Nearest-neighbour tiles of integer rasters (8 and 16-bit), straight from the decoded blocks to 8-bit pixels: the
// default rendering of most COGs, and the hot path. Every possible sample value is mapped to its output bytes once
// (a lookup table per rendering), so a pixel costs a block lookup and one table read per channel, with no window
// copied out of the blocks and no floating point. The general path (warp.js, render.js) gives the same bytes; the
// tables are built by it.
import { colourChannels, toPixels } from './render.js'
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
 * Fills `colour` (n² × lut.channels) and `opacity` (n², 0..255) for the output pixels of `grid` (see sourceGrid) from
 * `level`'s blocks in `table` ({ bx0, by0, nbx, blocks }, covering every pixel the grid reaches). `nodata`: the
 * request's nodata value or null. Returns whether any pixel is visible.
 */
export function gatherNearest (level, table, grid, lut, nodata, colour, opacity) {
  const { n, cols, rows } = grid
  const { fx, fy, width, height, tileWidth: tw, tileHeight: th } = level
  const { bx0, by0, nbx } = table
  const cc = lut.channels
  const [t0, t1 = t0, t2 = t0] = lut.tables
  const { offset } = lut
  const nd = typeof nodata === 'number' ? Math.fround(nodata) : null // 'nan' never matches an integer
  const [s0, s1 = s0, s2 = s0] = lut.samples
  // Per block: its density and the samples shown (the same one thrice for one band in colour), and whether a run of
  // it can be copied as it is: the shown samples lie in one array, consecutive and in order, all opaque.
  const views = table.blocks.map(({ density, samples }) => {
    const [a, b = a, c = a] = [samples[s0], samples[s1], samples[s2]]
    const packed = lut.identity && nd === null && density === null && a.stride === cc && a.start === 0 &&
      (cc === 1 || (b.data === a.data && c.data === a.data && b.start === 1 && c.start === 2))
    return { d: density, a0: a.data, m0: a.stride, s0: a.start, a1: b.data, m1: b.stride, s1: b.start, a2: c.data, m2: c.stride, s2: c.start, packed }
  })
  colour.fill(0, 0, n * n * cc)
  opacity.fill(0, 0, n * n)
  let seen = 0 // OR of every opacity written
  const copy = (v, k0, k1, offsets, o0, base) => {
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
    for (let j = 0, k = 0; j < n; j++, k += n) {
      const r = Math.floor(rows[j] / fy + 1e-6)
      if (!(r >= 0 && r < height)) continue
      const by = Math.floor(r / th)
      const base = (by - by0) * nbx
      const rowOff = (r - by * th) * tw
      for (let i = 0; i < n;) {
        const cv = colView[i]
        let end = i + 1
        while (end < n && colView[end] === cv) end++
        if (cv >= 0) seen |= copy(views[base + cv], k + i, k + end, colOff, i, rowOff)
        i = end
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
        if (runView >= 0) seen |= copyRun(colour, opacity, cc, offset, nd, t0, t1, t2, views[runView], j * n + runStart, j * n + i, offsets, runStart, 0)
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

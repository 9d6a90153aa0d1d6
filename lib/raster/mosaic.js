// A mosaic's tile, in the raster workers: its parts (one COG each, or a STAC item's assets stacked as bands) read
// and combined per pixel by the pixel selection method, as titiler's mosaics combine them. `first` works on 8-bit
// pixels: each part is drawn as a COG tile is (the lookup-table path where it applies) and fills only the pixels
// still transparent; once none is left no further part is read. The other methods combine the parts' values
// (sample.js) in typed-array loops, then draw once.
import { basename } from 'node:path'
import { locate, valuesAt } from './sample.js'
import { applyExpression } from './expression.js'
import { RasterError } from './errors.js'
import { Unavailable } from '../errors.js'

// Parts read at once: enough to overlap remote reads, few enough that a tile holds a bounded number of scratches.
const BATCH = 4

/**
 * A part left out of the mosaic, as gdalbuildvrt leaves out files of other bands, data type or colour table: it is
 * drawn as no data and named to the main thread (task.leftOut), which logs it once. One odd part of a document must
 * not fail every tile it touches, nor can a tile draw it: it is left out, as a folder's odd file is. Stretched with the first part's statistics, a Byte
 * part after a UInt16 one came out black, a UInt16 part after a Byte one white.
 */
class LeftOut extends Error {
  constructor (src, reason) {
    super(reason)
    this.part = partName(src)
  }
}

/** A part's drawing or values, or `none` where the part is left out (noted in task.leftOut: part name → reason). */
const unlessLeftOut = (task, promise, none) => promise.catch((err) => {
  if (!(err instanceof LeftOut)) throw err
  ;(task.leftOut ??= new Map()).set(err.part, err.message)
  return none
})

/**
 * What the worker lends a mosaic: `dataset(src)` (its open datasets), `takeScratch(n)` and `giveScratch(s)` (per-tile
 * arrays, one per part read at once),
 * `pixelsAt(ds, at, options, scratch, colour, opacity)` (a located tile drawn as render() draws it) and
 * `drawValues(tile, n, options, palette, colour, opacity)` (values drawn as render() draws them); both return the
 * colour channels, or 0 when no pixel is visible.
 * @typedef {object} Engine
 */

/**
 * Draws tile z/x/y of a mosaic into `out.colour` and `out.opacity` (n² pixels). `task`: { parts (per part, its
 * sources: one, or a STAC item's assets in band order), stack (colour bands of each asset), dtypes (data type of each
 * asset), z, x, y, options }. Returns the colour channels, or 0 when no part has a visible pixel there. A part that
 * cannot be read fails the tile (RasterError, or the remote reader's Unavailable), its message naming the part by
 * file name; a part left out (its data type) is named in task.leftOut.
 */
export async function mosaicPixels (task, n, out, engine) {
  const method = task.options.pixelSelection ?? 'first'
  return method === 'first' ? first(task, n, out, engine) : combined(task, n, out, engine)
}

/** `first`: parts in order, each filling the pixels no earlier part covers; none read once every pixel is covered. */
async function first (task, n, out, engine) {
  const count = n * n
  const { parts } = task
  let channels = 0
  let covered = 0
  // The first part alone (it often covers the whole tile), then a batch at a time.
  for (let start = 0, size = 1; start < parts.length && covered < count; start += size, size = BATCH) {
    const group = parts.slice(start, start + size)
    const scratches = group.map(() => engine.takeScratch(n))
    try {
      const drawn = await settled(group.map((srcs, i) => unlessLeftOut(task, drawPart(task, srcs, n, scratches[i], engine), 0)))
      for (let i = 0; i < group.length && covered < count; i++) {
        const cc = drawn[i]
        if (cc === 0) continue
        const { colour, opacity } = scratches[i]
        if (channels !== 0 && cc !== channels) throw new RasterError(`the mosaic's parts draw ${channels} and ${cc} colour channels (a palette in some parts only?)`)
        if (channels === 0) {
          channels = cc
          out.colour.set(colour.subarray(0, count * cc))
          out.opacity.set(opacity.subarray(0, count))
          covered = start + i + 1 < parts.length ? countVisible(out.opacity, count) : 0 // counted only if a part is left
        } else {
          covered += fillTransparent(out.colour, out.opacity, colour, opacity, count, channels)
        }
      }
    } finally {
      for (const s of scratches) engine.giveScratch(s)
    }
  }
  return channels
}

/** Pixels of `colour`/`opacity` copied where `intoOpacity` is still 0: how many became visible. */
function fillTransparent (intoColour, intoOpacity, colour, opacity, count, cc) {
  let added = 0
  for (let k = 0; k < count; k++) {
    if (intoOpacity[k] !== 0 || opacity[k] === 0) continue
    intoOpacity[k] = opacity[k]
    for (let c = 0, q = k * cc; c < cc; c++, q++) intoColour[q] = colour[q]
    added++
  }
  return added
}

function countVisible (opacity, count) {
  let visible = 0
  for (let k = 0; k < count; k++) if (opacity[k] !== 0) visible++
  return visible
}

/** One part drawn into its scratch's colour and opacity: the channels, or 0 when it shows nothing here. */
async function drawPart (task, srcs, n, scratch, engine) {
  const { options } = task
  if (srcs.length === 1) { // one COG: drawn as the COG worker draws a tile
    const ds = await partDataset(task, 0, srcs[0], engine)
    const at = await guarded(srcs[0], () => locate(ds, task.z, task.x, task.y, n, options, scratch))
    return at === null ? 0 : engine.pixelsAt(ds, at, options, scratch, scratch.colour, scratch.opacity)
  }
  const tile = await partValues(task, srcs, n, scratch, engine)
  return tile === null ? 0 : engine.drawValues(tile, n, options, null, scratch.colour, scratch.opacity)
}

/**
 * Every other method: the parts' values (read a batch at a time), combined per pixel over the parts with data
 * there: highest/lowest (by the first band, the whole pixel taken), mean, median, stdev (population, numpy's
 * default), count (parts with data, one band). Then drawn once.
 */
async function combined (task, n, out, engine) {
  const count = n * n
  const method = task.options.pixelSelection
  const { parts } = task
  let acc = null
  let palette = null
  for (let start = 0; start < parts.length; start += BATCH) {
    const group = parts.slice(start, start + BATCH)
    const scratches = group.map(() => engine.takeScratch(n))
    try {
      const tiles = await settled(group.map((srcs, i) => unlessLeftOut(task, partValues(task, srcs, n, scratches[i], engine), null)))
      for (const tile of tiles) {
        if (tile === null) continue
        acc ??= accumulators(out, method, count, tile.nb, parts.length)
        palette ??= tile.palette ?? null
        add(acc, tile, method, count)
      }
    } finally {
      for (const s of scratches) engine.giveScratch(s)
    }
  }
  if (acc === null) return 0
  const result = finish(acc, method, count)
  return engine.drawValues(result, n, task.options, palette, out.colour, out.opacity)
}

/**
 * The arrays a method gathers in, on the output scratch (grown as needed, reused by the next tile): `values` (the
 * result, or the best pixel so far), `alpha`, `hits` (parts with data per pixel), `sum`/`sumSq` (mean, stdev), and
 * for the median every part's values (`stored`).
 */
function accumulators (out, method, count, nb, partCount) {
  const grow = (name, Type, length) => {
    if (!(out[name]?.length >= length)) out[name] = new Type(length)
    return out[name].subarray(0, length)
  }
  const acc = { nb, values: grow('values', Float32Array, count * nb), alpha: grow('alpha', Float32Array, count), hits: grow('hits', Uint16Array, count) }
  acc.alpha.fill(0)
  acc.hits.fill(0)
  if (method === 'mean' || method === 'stdev') {
    acc.sum = grow('sum', Float64Array, count * nb).fill(0)
    if (method === 'stdev') acc.sumSq = grow('sumSq', Float64Array, count * nb).fill(0)
  }
  if (method === 'median') {
    acc.stored = [] // per part with data: { values, alpha } copies
    acc.sorted = new Float64Array(partCount)
    acc.with = new Int32Array(partCount)
  }
  return acc
}

/** Adds one part's values (`tile`: values n² × nb, alpha) to the accumulators. */
function add (acc, tile, method, count) {
  const { nb, values, alpha, hits } = acc
  const v = tile.values
  const a = tile.alpha
  if (tile.nb !== nb) throw new RasterError(`the mosaic's parts give ${nb} and ${tile.nb} bands`)
  if (method === 'median') {
    acc.stored.push({ values: v.slice(0, count * nb), alpha: a.slice(0, count) })
    for (let k = 0; k < count; k++) if (a[k] > 0) { hits[k]++; if (a[k] > alpha[k]) alpha[k] = a[k] }
    return
  }
  if (method === 'highest' || method === 'lowest') {
    const higher = method === 'highest'
    for (let k = 0; k < count; k++) {
      if (a[k] === 0) continue
      const q = k * nb
      const key = v[q]
      if (hits[k] !== 0 && (higher ? !(key > values[q]) : !(key < values[q]))) { hits[k]++; continue }
      hits[k]++
      alpha[k] = a[k]
      for (let b = 0; b < nb; b++) values[q + b] = v[q + b]
    }
    return
  }
  const { sum, sumSq } = acc
  for (let k = 0; k < count; k++) {
    const ak = a[k]
    if (ak === 0) continue
    hits[k]++
    if (ak > alpha[k]) alpha[k] = ak
    if (sum === undefined) continue // count
    for (let b = 0, q = k * nb; b < nb; b++, q++) {
      const x = v[q]
      sum[q] += x
      if (sumSq !== undefined) sumSq[q] += x * x
    }
  }
}

/** The combined tile: { values, alpha, nb } (count: one band, the number of parts with data). */
function finish (acc, method, count) {
  const { nb, values, alpha, hits } = acc
  if (method === 'highest' || method === 'lowest') return { values, alpha, nb }
  if (method === 'count') {
    for (let k = 0; k < count; k++) {
      values[k] = hits[k]
      alpha[k] = hits[k] > 0 ? 1 : 0
    }
    return { values: values.subarray(0, count), alpha, nb: 1 }
  }
  if (method === 'median') {
    const { sorted, with: withData } = acc
    const stored = acc.stored.map((s) => s.values)
    const alphas = acc.stored.map((s) => s.alpha)
    for (let k = 0; k < count; k++) {
      const h = hits[k]
      if (h === 0) continue
      let m = 0 // the parts with data here, in withData
      for (let p = 0; p < stored.length; p++) if (alphas[p][k] !== 0) withData[m++] = p
      for (let b = 0, q = k * nb; b < nb; b++, q++) {
        if (m === 1) { values[q] = stored[withData[0]][q]; continue }
        // Insertion into the sorted run: a handful of parts per pixel, no allocation.
        for (let i = 0; i < m; i++) {
          const x = stored[withData[i]][q]
          let j = i
          while (j > 0 && sorted[j - 1] > x) { sorted[j] = sorted[j - 1]; j-- }
          sorted[j] = x
        }
        values[q] = m % 2 === 1 ? sorted[(m - 1) / 2] : (sorted[m / 2 - 1] + sorted[m / 2]) / 2
      }
    }
    return { values, alpha, nb }
  }
  const { sum, sumSq } = acc
  for (let k = 0; k < count; k++) {
    const h = hits[k]
    if (h === 0) continue
    for (let b = 0, q = k * nb; b < nb; b++, q++) {
      const mean = sum[q] / h
      values[q] = sumSq === undefined ? mean : Math.sqrt(Math.max(0, sumSq[q] / h - mean * mean))
    }
  }
  return { values, alpha, nb }
}

/**
 * One part's values: { values (n² × nb), alpha, nb, palette } in its scratch, through the band math; null where it
 * has no data. One COG is sampled as a COG tile is; a STAC item's assets are sampled each for the bands `bidx` takes
 * of it (an asset no band comes from is not read), stacked in bidx order, then the expression applies to the stack.
 */
async function partValues (task, srcs, n, scratch, engine) {
  const { options, z, x, y } = task
  if (srcs.length === 1) {
    const ds = await partDataset(task, 0, srcs[0], engine)
    const tile = await guarded(srcs[0], async () => {
      const at = await locate(ds, z, x, y, n, options, scratch)
      return at === null ? null : valuesAt(at, options, scratch)
    })
    return tile === null ? null : { ...tile, palette: options.palette ? ds.palette : null }
  }
  const plan = stackPlan(task)
  const count = n * n
  const nb = options.bidx.length
  if (!(scratch.stacked?.length >= count * nb)) scratch.stacked = new Float32Array(count * nb)
  if (!(scratch.stackedAlpha?.length >= count)) scratch.stackedAlpha = new Float32Array(count)
  const stacked = scratch.stacked.subarray(0, count * nb)
  const alpha = scratch.stackedAlpha.subarray(0, count)
  alpha.fill(1)
  for (const { asset, options: assetOptions, slots } of plan) {
    const src = srcs[asset]
    const ds = await partDataset(task, asset, src, engine)
    const tile = await guarded(src, async () => {
      const at = await locate(ds, z, x, y, n, assetOptions, scratch)
      return at === null ? null : valuesAt(at, assetOptions, scratch)
    })
    if (tile === null) return null // one asset without data there: the item has none
    const { values, nb: assetBands } = tile
    const assetAlpha = tile.alpha
    for (let k = 0; k < count; k++) if (assetAlpha[k] < alpha[k]) alpha[k] = assetAlpha[k]
    // A loop per band, its strides fixed: the former per-pixel loop over the slots was a tenth of a STAC NDVI tile.
    for (let i = 0; i < assetBands; i++) {
      for (let k = 0, q = slots[i], r = i; k < count; k++, q += nb, r += assetBands) stacked[q] = values[r]
    }
  }
  const tile = applyExpression({ values: stacked, alpha, nb }, options, scratch)
  return tile === null ? null : { ...tile, palette: null }
}

/**
 * How bidx (bands of the stacked assets, from 0) reads the assets: per asset used, its own bands to sample and where
 * each goes in the stack. Made once per task (the parts share it).
 */
function stackPlan (task) {
  if (task.plan !== undefined) return task.plan
  const { options, stack } = task
  const starts = []
  let total = 0
  for (const bands of stack) { starts.push(total); total += bands }
  const plan = []
  options.bidx.forEach((band, slot) => {
    const asset = starts.findLastIndex((s) => s <= band)
    let entry = plan.find((p) => p.asset === asset)
    if (entry === undefined) plan.push(entry = { asset, bands: [], slots: [] })
    entry.bands.push(band - starts[asset])
    entry.slots.push(slot)
  })
    // The expression applies to the stack, but each asset's bands hide a pixel as band math's do (any band read).
  for (const entry of plan) entry.options = { ...options, bidx: entry.bands, expression: null, bandMath: options.expression !== null }
  task.plan = plan
  return plan
}

/**
 * A part's dataset, checked against the first part's: one of other bands, another data type (`task.dtypes`, per
 * asset) or without its colour table is left out (LeftOut), as a folder's files are when it opens. Its CRS's note (read without its datum grid) is kept in
 * task.crsNotes, for the log.
 */
async function partDataset (task, asset, src, engine) {
  const ds = await guarded(src, () => engine.dataset(src))
  if (ds.crs.note) (task.crsNotes ??= new Set()).add(ds.crs.note)
  const colour = ds.alphaBand >= 0 ? ds.bands - 1 : ds.bands
  const expected = task.stack[asset]
  if (colour !== expected) throw new LeftOut(src, `${colour} bands, where the mosaic's first part has ${expected}`)
  const dtype = task.dtypes?.[asset]
  if (dtype !== undefined && ds.dtype !== dtype) throw new LeftOut(src, `data type ${ds.dtype}, where the mosaic's first part has ${dtype}`)
  // Drawn through its colour table, as the first part is: a part without one has no colours to draw.
  if (task.options.palette && ds.palette === null) throw new LeftOut(src, 'no colour table, where the mosaic\'s first part has one')
  return ds
}

/** Runs a read of one part, its failure told with the part's file name (never its folder or a URL's query). */
async function guarded (src, read) {
  try {
    return await read()
  } catch (err) {
    if (!(err instanceof RasterError) && !(err instanceof Unavailable)) throw err
    const failure = partError(src, clean(err.message, src))
    if (err instanceof Unavailable) throw Object.assign(new Unavailable(failure.message), { replaced: err.replaced === true })
    throw failure
  }
}

const partName = (src) => (src.path ? basename(src.path) : basename(new URL(src.url).pathname))
const partError = (src, message) => new RasterError(`${partName(src)}: ${message}`)
/** A reason with the part's path or URL replaced by its file name (fs errors name the whole path). */
const clean = (message, src) => (src.path ? message.replaceAll(src.path, partName(src)) : message.replaceAll(src.url, partName(src)))

/**
 * The values of promises once every one has settled, or the first rejection then: a part that fails must not leave
 * another still writing into a scratch that has gone back for the next tile.
 */
async function settled (promises) {
  const results = await Promise.allSettled(promises)
  const failed = results.find((r) => r.status === 'rejected')
  if (failed !== undefined) throw failed.reason
  return results.map((r) => r.value)
}


// Raster worker (piscina): every byte of COG decoding, reprojection, resampling and encoding happens here, never on
// the server's event loop. Each worker keeps its own open datasets and decoded-block cache.
import { move, workerData } from 'piscina'
import sharp from 'sharp'
import { getDecoder } from 'geotiff'
import { LRUCache } from 'lru-cache'
import { openDataset, describeDataset, RasterError } from './dataset.js'
import { sourcePixels, chooseLevel, windowOf, resample, sampleScale, tileRatio } from './warp.js'
import { tileExtent } from '../tile.js'
import { toRgba, encode } from './render.js'

sharp.concurrency(1) // one thread per worker: the pool already spreads tiles over the cores
sharp.cache(false)

const BLOCK_CACHE_BYTES = workerData?.blockCacheBytes ?? 64 * 2 ** 20
// Decoded blocks of every dataset this worker has open, bounded by bytes.
const blocks = new LRUCache({ maxSize: BLOCK_CACHE_BYTES, sizeCalculation: (b) => b.bytes })
// Open datasets; one idle for 10 minutes is closed (a deleted file's space is freed), as is the previous one of a
// path that was re-opened (a replaced file), half a minute later so that reads under way finish.
const latest = new Map() // path or URL → key of the newest dataset
const datasets = new LRUCache({
  max: 64,
  ttl: 10 * 60_000,
  updateAgeOnGet: true,
  ttlAutopurge: true,
  dispose: (pending) => { pending.then((ds) => ds.tiff.close?.(), () => {}) },
})

function dataset (src) {
  let pending = datasets.get(src.key)
  if (pending === undefined) {
    pending = openDataset(src)
    pending.catch(() => datasets.delete(src.key))
    datasets.set(src.key, pending)
    const where = src.path ?? src.url
    const previous = latest.get(where)
    if (previous !== undefined && previous !== src.key) setTimeout(() => datasets.delete(previous), 30_000).unref()
    latest.set(where, src.key)
  }
  return pending
}

export default async function run (task) {
  try {
    if (task.op === 'describe') return await describe(task.src)
    if (task.op === 'tile') return await tile(task)
    if (task.op === 'empty') return transferable(await encode(new Uint8Array(256 * task.scale * 256 * task.scale * 4), 256 * task.scale, task.format, false))
    throw new Error(`unknown raster task ${task.op}`)
  } catch (err) {
    // Only the message crosses back: a RasterError's is the set's reason; other errors say the tile failed.
    if (err instanceof RasterError) throw new Error(err.message)
    throw err
  }
}

/** What the main thread needs of a file: /meta's description, its WGS84 bounds and its resolution in Mercator metres. */
async function describe (src) {
  const ds = await dataset(src)
  return { meta: describeDataset(ds), lonLatBounds: ds.lonLatBounds, resolution: ds.resolution }
}

/** Bytes to hand back to the main thread: moved, not copied, when they own their buffer. */
function transferable (bytes) {
  const out = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  return out.byteOffset === 0 && out.byteLength === out.buffer.byteLength ? move(out) : out
}

// Per-tile arrays (several MB at 512 px) are reused rather than left to the GC; two tiles may be in flight per worker.
const spare = []
const scratchFor = (count) => {
  const s = spare.pop()
  if (s !== undefined && s.count === count) return s
  return { count, cols: new Float64Array(count), rows: new Float64Array(count), alpha: new Float32Array(count), values: new Float32Array(count * 3) }
}

/** One tile: encoded bytes, or null where the raster has no valid pixel. */
async function tile (task) {
  const n = 256 * task.scale
  const scratch = scratchFor(n * n)
  try {
    return await render(task, n, scratch)
  } finally {
    if (spare.length < 4) spare.push(scratch)
  }
}

async function render ({ src, z, x, y, format, options }, n, { cols, rows, alpha, values }) {
  const ds = await dataset(src)
  const count = n * n
  const extent = tileExtent(z, x, y)
  sourcePixels(ds, extent, n, cols, rows)
  const level = chooseLevel(ds, (extent[2] - extent[0]) / n, tileRatio(cols, rows, n))
  const resampling = ds.palette && options.palette ? 'nearest' : options.resampling // indices do not interpolate
  const spread = resampling === 'nearest' ? [1, 1] : sampleScale(level, cols, rows, n)
  const win = windowOf(level, cols, rows, count, resampling, Math.max(...spread))
  if (win === null) return null
  // A safety net for odd projections (near a pole, say): no tile may make a worker hold more than 16 Mpx of one level.
  if ((win[2] - win[0]) * (win[3] - win[1]) > 16e6) throw new Error('this tile would need too large a part of the raster')
  const window = await readWindow(ds, level, win, options.bidx, options.nodata)
  if (window === null) return null
  const nb = options.bidx.length
  resample(level, win, window.bands, window.density, cols, rows, count, resampling, values, alpha, spread, ds.toSource === null)
  if (!alpha.some((a) => a > 0)) return null
  const rgba = toRgba(values, alpha, count, nb, {
    rescale: options.rescale,
    colormap: options.colormap,
    palette: options.palette ? ds.palette : null,
    encoding: options.encoding,
  })
  return transferable(await encode(rgba, n, format, options.encoding !== null))
}

/**
 * The window of `level` as Float32 bands (the `samples` asked for) and a density (0..255) per pixel from the alpha
 * band, the internal mask and nodata. Null when every pixel of it is transparent (sparse files, nodata areas).
 * Blocks hold planes and density ready-made, so assembling a window is row copies.
 */
async function readWindow (ds, level, win, samples, nodataOption) {
  const [x0, y0, x1, y1] = win
  const w = x1 - x0
  const h = y1 - y0
  const { tileWidth: tw, tileHeight: th } = level
  const bands = samples.map(() => new Float32Array(w * h))
  const density = new Uint8Array(w * h)
  const jobs = []
  for (let by = Math.floor(y0 / th); by <= Math.floor((y1 - 1) / th); by++) {
    for (let bx = Math.floor(x0 / tw); bx <= Math.floor((x1 - 1) / tw); bx++) {
      jobs.push(block(ds, level, bx, by).then((b) => {
        const bx0 = bx * tw; const by0 = by * th
        const cx0 = Math.max(x0, bx0); const cx1 = Math.min(x1, bx0 + tw, level.width)
        const cy0 = Math.max(y0, by0); const cy1 = Math.min(y1, by0 + th, level.height)
        if (cx0 >= cx1) return
        for (let r = cy0; r < cy1; r++) {
          const from = (r - by0) * tw + (cx0 - bx0)
          const to = (r - y0) * w + (cx0 - x0)
          for (let s = 0; s < samples.length; s++) bands[s].set(b.planes[samples[s]].subarray(from, from + cx1 - cx0), to)
          if (b.density === null) density.fill(255, to, to + cx1 - cx0)
          else density.set(b.density.subarray(from, from + cx1 - cx0), to)
        }
      }))
    }
  }
  await Promise.all(jobs)
  if (nodataOption !== null && nodataOption !== undefined) applyNodata(bands, density, nodataOption === 'nan' ? NaN : nodataOption)
  return density.some((d) => d > 0) ? { bands, density } : null
}

/** A nodata value given in the request: pixels where every band holds it become transparent. */
function applyNodata (bands, density, nodata) {
  if (Number.isNaN(nodata)) return // NaN is transparent anyway
  const nd = Math.fround(nodata)
  for (let p = 0; p < density.length; p++) {
    let all = true
    for (let s = 0; s < bands.length && all; s++) if (bands[s][p] !== nd) all = false
    if (all) density[p] = 0
  }
}

const ARRAYS = { uint8: Uint8Array, uint16: Uint16Array, uint32: Uint32Array, int8: Int8Array, int16: Int16Array, int32: Int32Array, float32: Float32Array, float64: Float64Array }

/** geotiff.js's decoder for a level, made once (the library would make one per read). */
function decoderOf (image) {
  if (image.decoder === undefined) {
    const fd = image.fileDirectory
    image.decoder = (async () => {
      const compression = fd.getValue('Compression') ?? 1
      const parameters = {
        tileWidth: image.getTileWidth(),
        tileHeight: image.getTileHeight(),
        planarConfiguration: image.planarConfiguration,
        bitsPerSample: await fd.loadValue('BitsPerSample'),
        predictor: (await fd.loadValue('Predictor')) || 1,
        samplesPerPixel: image.getSamplesPerPixel(),
      }
      if (compression === 7) parameters.JPEGTables = await fd.loadValue('JPEGTables')
      return getDecoder(compression, parameters)
    })()
  }
  return image.decoder
}

/** Decoded bytes of one block as typed arrays, one per sample (de-interleaved), in this machine's byte order. */
async function planesOf (image, bx, by, samples, type) {
  const decoder = await decoderOf(image)
  const Array_ = ARRAYS[type]
  const size = Array_.BYTES_PER_ELEMENT
  const view = (data) => {
    if (!image.littleEndian && size > 1) swapBytes(new Uint8Array(data), size)
    return new Array_(data)
  }
  if (image.planarConfiguration === 2) {
    return Promise.all(Array.from({ length: samples }, (_, s) => image.getTileOrStrip(bx, by, s, decoder).then((t) => view(t.data))))
  }
  const all = view((await image.getTileOrStrip(bx, by, 0, decoder)).data)
  if (samples === 1) return [all]
  const n = all.length / samples
  const planes = Array.from({ length: samples }, () => new Array_(n))
  for (let p = 0, q = 0; p < n; p++) for (let s = 0; s < samples; s++, q++) planes[s][p] = all[q]
  return planes
}

function swapBytes (bytes, size) {
  for (let i = 0; i < bytes.length; i += size) {
    for (let a = i, b = i + size - 1; a < b; a++, b--) { const t = bytes[a]; bytes[a] = bytes[b]; bytes[b] = t }
  }
}

/**
 * A decoded block of a level: every sample's plane (tileWidth × tileHeight) and its density (0..255, null when all
 * opaque) from the alpha band, the internal mask, the file's nodata and NaN. Cached per worker, by bytes.
 */
function block (ds, level, bx, by) {
  const key = `${ds.key}|${level.index}/${bx}/${by}`
  const hit = blocks.get(key)
  if (hit !== undefined) return hit.promise ?? Promise.resolve(hit)
  const promise = (async () => {
    const [planes, mask] = await Promise.all([
      planesOf(level.image, bx, by, ds.bands, ds.dtype),
      level.mask ? planesOf(level.mask, bx, by, 1, 'uint8').then((m) => m[0]) : null,
    ])
    if (ds.photometric === 6) ycbcrToRgb(planes)
    const density = densityOf(ds, planes, mask)
    const bytes = planes.reduce((sum, p) => sum + p.byteLength, 0) + (density ? density.byteLength : 0)
    const decoded = { planes, density, bytes }
    blocks.set(key, decoded)
    return decoded
  })()
  blocks.set(key, { promise, bytes: 64 })
  promise.catch(() => blocks.delete(key))
  return promise
}

function densityOf (ds, planes, mask) {
  const n = planes[0].length
  const density = new Uint8Array(n).fill(255)
  let opaque = true
  const colour = planes.filter((_, s) => s !== ds.alphaBand)
  const float = ds.sampleFormat === 3
  const hasNodata = ds.nodata !== null && !Number.isNaN(ds.nodata)
  const nd = ds.nodata
  const ndf = Math.fround(ds.nodata)
  const alpha = ds.alphaBand >= 0 ? planes[ds.alphaBand] : null
  const alphaScale = 255 / (2 ** ds.bits - 1)
  for (let p = 0; p < n; p++) {
    let d = 255
    if (alpha !== null) d = Math.round(alpha[p] * alphaScale)
    if (mask !== null && mask[p] === 0) d = 0
    if (d !== 0 && (hasNodata || float)) {
      let all = hasNodata
      for (let s = 0; s < colour.length; s++) {
        const v = colour[s][p]
        if (v !== v) { all = true; break } // eslint-disable-line no-self-compare
        if (all && v !== nd && Math.fround(v) !== ndf) all = false
      }
      if (all) d = 0
    }
    if (d !== 255) { density[p] = d; opaque = false }
  }
  return opaque ? null : density
}

/** JPEG-in-TIFF stored as YCbCr: geotiff.js hands back the raw YCbCr planes; libjpeg (GDAL) would give RGB. */
function ycbcrToRgb ([y, cb, cr]) {
  const clamp = (v) => (v < 0 ? 0 : v > 255 ? 255 : Math.round(v))
  for (let i = 0; i < y.length; i++) {
    const l = y[i]; const b = cb[i] - 128; const r = cr[i] - 128
    y[i] = clamp(l + 1.402 * r)
    cb[i] = clamp(l - 0.344136 * b - 0.714136 * r)
    cr[i] = clamp(l + 1.772 * b)
  }
}

// Decoded blocks of a COG's levels, cached per raster worker by bytes, and windows assembled from them: the reading
// half of a raster tile (sample.js resamples windows for bilinear and cubic; direct.js reads the blocks straight to
// pixels or values for nearest). Runs in the raster workers.
import { workerData } from 'piscina'
import { getDecoder } from 'geotiff'
import { getFloat16 } from '@petamoriken/float16'
import { LRUCache } from 'lru-cache'
import { RasterError } from './errors.js'
import { blockBytes } from './dataset.js'

const BLOCK_CACHE_BYTES = workerData?.blockCacheBytes ?? 64 * 2 ** 20
// Decoded blocks of every dataset this worker has open, bounded by bytes.
const blocks = new LRUCache({ maxSize: BLOCK_CACHE_BYTES, sizeCalculation: (b) => b.bytes })

/** The decoded blocks of `level` under window [x0, y0, x1, y1), row by row: { bx0, by0, nbx, blocks }. */
export async function blockTable (ds, level, [x0, y0, x1, y1]) {
  const { tileWidth: tw, tileHeight: th } = level
  const bx0 = Math.floor(x0 / tw); const bx1 = Math.floor((x1 - 1) / tw)
  const by0 = Math.floor(y0 / th); const by1 = Math.floor((y1 - 1) / th)
  const pending = []
  for (let by = by0; by <= by1; by++) for (let bx = bx0; bx <= bx1; bx++) pending.push(block(ds, level, bx, by))
  return { bx0, by0, nbx: bx1 - bx0 + 1, blocks: await Promise.all(pending) }
}

/**
 * The window of `level` as Float32 bands (the `samples` asked for) and a density (0..255) per pixel from the alpha
 * band, the internal mask and nodata: { bands, density, opaque } (opaque: every density is 255, so resampling may skip
 * it). Null when every pixel of it is transparent (sparse files, nodata areas). Blocks hold samples and density
 * ready-made, so assembling a window is row copies (per pixel for interleaved samples). `rule`: maskRule's for these
 * samples. With `scratch`, the arrays are its own, reused from tile to tile (valid until its next use); without, new ones.
 */
export function readWindow (level, table, win, samples, nodataOption, rule, scratch) {
  const [x0, y0, x1, y1] = win
  const w = x1 - x0
  const h = y1 - y0
  const { tileWidth: tw, tileHeight: th } = level
  const size = w * h
  let bands, density
  if (scratch === undefined) {
    bands = samples.map(() => new Float32Array(size))
    density = new Uint8Array(size)
  } else {
    // Kept up to 1 Mpx (4 MiB a band: a 512 px tile read at 2:1); a window may be 16 Mpx, the odd tile's, not kept.
    const keep = size <= 2 ** 20
    const spare = (scratch.windowBands ??= [])
    bands = samples.map((_, s) => {
      if (spare[s]?.length >= size) return spare[s].subarray(0, size)
      const band = new Float32Array(size)
      if (keep) spare[s] = band
      return band
    })
    density = scratch.windowDensity?.length >= size ? scratch.windowDensity.subarray(0, size) : new Uint8Array(size)
    if (keep && density.buffer !== scratch.windowDensity?.buffer) scratch.windowDensity = density
  }
  let opaque = true
  const { blocks, bx0, by0, nbx } = table
  for (let i = 0; i < blocks.length; i++) {
    const b = blocks[i]
    const bx = bx0 + (i % nbx); const by = by0 + Math.floor(i / nbx)
    const left = bx * tw; const top = by * th
    const cx0 = Math.max(x0, left); const cx1 = Math.min(x1, left + tw, level.width)
    const cy0 = Math.max(y0, top); const cy1 = Math.min(y1, top + th, level.height)
    if (cx0 >= cx1) continue
    const bd = densityFor(b, rule)
    if (bd !== null) opaque = false
    const len = cx1 - cx0
    for (let r = cy0; r < cy1; r++) {
      const from = (r - top) * tw + (cx0 - left)
      const to = (r - y0) * w + (cx0 - x0)
      for (let s = 0; s < samples.length; s++) {
        const { data, stride, start } = b.samples[samples[s]]
        const band = bands[s]
        if (stride === 1) band.set(data.subarray(from, from + len), to)
        else for (let p = from * stride + start, q = to, end = to + len; q < end; p += stride, q++) band[q] = data[p]
      }
      if (bd === null) density.fill(255, to, to + len)
      else density.set(bd.subarray(from, from + len), to)
    }
  }
  if (nodataOption !== null && nodataOption !== undefined && applyNodata(bands, density, nodataOption === 'nan' ? NaN : nodataOption, rule.any)) opaque = false
  if (opaque) return { bands, density, opaque }
  for (let p = 0; p < size; p++) if (density[p] !== 0) return { bands, density, opaque }
  return null
}

/**
 * The window [x0, y0, x1, y1) of `level` as one Float32Array per band, every pixel whatever hides it: the values the
 * statistics of an NBITS file are read off (dataset.js). geotiff.js's readRasters misreads the samples it unpacks
 * itself: as file-order bytes (a big-endian file's swapped) at whole-byte offsets (the second of interleaved 12-bit
 * samples at byte 1.5, read at 1).
 */
export async function windowValues (ds, level, win) {
  const [x0, y0, x1, y1] = win
  const w = x1 - x0
  const { tileWidth: tw, tileHeight: th } = level
  const { blocks, bx0, by0, nbx } = await blockTable(ds, level, win)
  const bands = Array.from({ length: ds.bands }, () => new Float32Array(w * (y1 - y0)))
  blocks.forEach((b, i) => {
    const left = (bx0 + (i % nbx)) * tw; const top = (by0 + Math.floor(i / nbx)) * th
    const cx0 = Math.max(x0, left); const cx1 = Math.min(x1, left + tw, level.width)
    for (let r = Math.max(y0, top), end = Math.min(y1, top + th, level.height); r < end; r++) {
      bands.forEach((band, s) => {
        const { data, stride, start } = b.samples[s]
        for (let c = cx0; c < cx1; c++) band[(r - y0) * w + c - x0] = data[((r - top) * tw + c - left) * stride + start]
      })
    }
  })
  return bands
}

/**
 * A nodata value given in the request: pixels where every band holds it (or `any` band: band math, see maskRule) become
 * transparent. Returns whether any did.
 */
function applyNodata (bands, density, nodata, any) {
  if (Number.isNaN(nodata)) return false // NaN is transparent anyway
  const nd = Math.fround(nodata)
  let hit = false
  for (let p = 0; p < density.length; p++) {
    let held = 0
    for (let s = 0; s < bands.length; s++) if (bands[s][p] === nd) held++
    if (any ? held > 0 : held === bands.length) { density[p] = 0; hit = true }
  }
  return hit
}

const ARRAYS = { uint8: Uint8Array, uint16: Uint16Array, uint32: Uint32Array, int8: Int8Array, int16: Int16Array, int32: Int32Array, float32: Float32Array, float64: Float64Array }

/** geotiff.js's decoder for a level, made once (the library would make one per read), checked (see checked). */
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
      if (compression === 7) {
        parameters.JPEGTables = await fd.loadValue('JPEGTables')
        parameters.photometric = fd.getValue('PhotometricInterpretation') // YCbCr comes back as RGB (jpeg.js)
      }
      if (compression === 34887) parameters.lercParameters = await fd.loadValue('LercParameters')
      return checked(await getDecoder(compression, parameters), blockBytes(parameters))
    })()
  }
  return image.decoder
}

/**
 * A decoder whose failures are the file's: a decoder fed damaged bytes throws anything (zlib's "unknown compression
 * method", sharp's "unsupported image format", "marker was not found" from the JPEG decoder, a string from LERC, a
 * TypeError from deep inside one), which is a RasterError (503 for the set, logged once) rather than a bug (500, a
 * stack logged on every request); and a block must decode to its `bytes`: one that decodes short (an LZW block cut
 * off) would otherwise be read past its end.
 */
function checked (decoder, bytes) {
  return {
    async decode (buffer) {
      let decoded
      try {
        decoded = await decoder.decode(buffer)
      } catch (err) {
        if (err instanceof RasterError) throw err
        throw new RasterError(`corrupt data: a block does not decode (${reasonOf(err)})`)
      }
      if (!(decoded?.byteLength >= bytes)) throw new RasterError('corrupt data: a block decodes to fewer bytes than a block holds')
      return decoded
    },
  }
}

/** A decoder's error in a few printable words (LERC throws strings; some messages carry the bytes they met). */
const reasonOf = (err) => String(err?.message ?? err).split('\n')[0].replace(/[^\x20-\x7e]+/g, ' ').trim().slice(0, 100) || 'no reason given'

/**
 * Checks that block `index` of `image` lies within the file before it is read: geotiff.js reads bytes past the end as
 * zeros, which decode to zeros (LZW, ZSTD: wrong pixels, then cached) or fail in ways that do not say why.
 */
async function checkInFile (image, index) {
  const size = image.source.fileSize
  if (!(size > 0)) return // not known
  const fd = image.fileDirectory
  const offset = Number(await fd.loadValueIndexed('TileOffsets', index))
  const length = Number(await fd.loadValueIndexed('TileByteCounts', index))
  if (!Number.isFinite(offset) || !Number.isFinite(length)) throw new RasterError('corrupt file: a block is missing from its directory')
  if (length > 0 && offset + length > size) throw new RasterError('truncated file: a block lies past its end')
}

/**
 * Decoded samples of one block, in this machine's byte order: per sample { data, stride, start }, the value of pixel
 * p being data[p * stride + start]. Pixel-interleaved blocks stay as decoded (one array, stride = samples per
 * pixel): a tile of an 8-bit RGB file is then row copies of them (direct.js).
 */
async function samplesOf (image, bx, by, samples, type) {
  const decoder = await decoderOf(image)
  const half = type === 'float16'
  const Array_ = half ? Uint16Array : ARRAYS[type]
  const size = Array_.BYTES_PER_ELEMENT
  const across = Math.ceil(image.getWidth() / image.getTileWidth())
  const down = Math.ceil(image.getHeight() / image.getTileHeight())
  const planar = image.planarConfiguration === 2
  const length = image.getTileWidth() * image.getTileHeight() * (planar ? 1 : samples) // values (a decoder may give more bytes)
  const read = async (s) => {
    await checkInFile(image, (planar ? s * across * down : 0) + by * across + bx) // geotiff.js's block numbering
    const { data } = await image.getTileOrStrip(bx, by, s, decoder)
    if (half) return halfFloats(data, length, image.littleEndian)
    // (NBITS samples come unpacked by geotiff.js, in this machine's order already.)
    if (!image.littleEndian && size > 1 && image.getBitsPerSample() % 8 === 0) swapBytes(new Uint8Array(data, 0, length * size), size)
    return new Array_(data, 0, length)
  }
  if (planar) {
    const planes = await Promise.all(Array.from({ length: samples }, (_, s) => read(s)))
    return planes.map((data) => ({ data, stride: 1, start: 0 }))
  }
  const data = await read(0)
  return Array.from({ length: samples }, (_, s) => ({ data, stride: samples, start: s }))
}

/**
 * Block (bx, by) of a level's mask read off a finer mask (`level.maskFrom`: { image, fx, fy }) by nearest sample, the
 * pixel under each one's centre, as GDAL reads a band at a coarser scale. Pixels past the level's edge take its last.
 * The finer mask's blocks come through the block cache (maskBlock), only those a sampled pixel lies in: at a 16×
 * reduction a block samples 256 of them, which neighbouring blocks and the other levels sampling it read again.
 */
async function sampledMask (ds, level, bx, by) {
  const { image, fx, fy } = level.maskFrom
  const { tileWidth: tw, tileHeight: th } = level
  const mtw = image.getTileWidth(); const mth = image.getTileHeight()
  const under = (n, first, f, last) => Int32Array.from({ length: n }, (_, i) => Math.min(Math.floor((first + i + 0.5) * f), last))
  const cols = under(tw, bx * tw, fx, image.getWidth() - 1)
  const rows = under(th, by * th, fy, image.getHeight() - 1)
  // Per column of the block: which of the finer blocks read in a row (`across`, in order) it lies in, and where.
  const across = [...new Set(Array.from(cols, (c) => Math.floor(c / mtw)))]
  const blockOf = Int32Array.from(cols, (c) => across.indexOf(Math.floor(c / mtw)))
  const within = Int32Array.from(cols, (c) => c % mtw)
  const down = [...new Set(Array.from(rows, (r) => Math.floor(r / mth)))]
  const read = await Promise.all(down.map((mby) => Promise.all(across.map((mbx) => maskBlock(ds, image, mbx, mby)))))
  const out = new Uint8Array(tw * th)
  for (let j = 0, k = 0; j < th; j++) {
    if (Math.floor(rows[j] / mth) !== down[k]) k++
    const row = read[k]
    const at = (rows[j] % mth) * mtw
    for (let i = 0; i < tw; i++) {
      const m = row[blockOf[i]]
      const q = at + within[i]
      out[j * tw + i] = typeof m === 'number' ? m : ((m[q >> 3] >> (q & 7)) & 1) * 255
    }
  }
  return out
}

const fills = new Map() // `${length} ${value}` → a Buffer of that many bytes of that value, to compare blocks with
const filled = (length, value) => {
  const key = `${length} ${value}`
  let buffer = fills.get(key)
  if (buffer === undefined) fills.set(key, (buffer = Buffer.alloc(length, value)))
  return buffer
}

/** A mask block as a bit a pixel, set where it is not 0 (all a density reads of it): an eighth of its bytes kept. */
function packed (data) {
  const bits = new Uint8Array((data.length + 7) >> 3)
  for (let p = 0; p < data.length; p++) if (data[p] !== 0) bits[p >> 3] |= 1 << (p & 7)
  return bits
}

/**
 * Block (bx, by) of mask `image` (one a level samples: sampledMask), decoded once per worker and kept with the decoded
 * blocks: the one value all its pixels have (a block wholly inside or outside the mask, as most are), which costs next
 * to nothing to keep, or its pixels packed (a bit each).
 */
function maskBlock (ds, image, bx, by) {
  const key = `${ds.key}|mask ${image.getWidth()}×${image.getHeight()}/${bx}/${by}`
  const hit = blocks.get(key)
  if (hit !== undefined) return hit.promise ?? Promise.resolve(hit.mask)
  const promise = samplesOf(image, bx, by, 1, 'uint8').then(([{ data }]) => {
    // (memcmp against a block of one value)
    const mask = Buffer.from(data.buffer, data.byteOffset, data.byteLength).equals(filled(data.length, data[0])) ? data[0] : packed(data)
    blocks.set(key, { mask, bytes: typeof mask === 'number' ? 64 : mask.byteLength })
    return mask
  })
  blocks.set(key, { promise, bytes: 64 })
  promise.catch(() => blocks.delete(key))
  return promise
}

/**
 * Half floats (GDAL's Float16, or floats written with NBITS=16) as Float32, which every later step reads, as GDAL
 * widens them; in the file's byte order (a floating-point predictor has already put them in this machine's, which
 * only little-endian files are read with: dataset.js).
 */
function halfFloats (data, length, littleEndian) {
  const view = new DataView(data)
  const out = new Float32Array(length)
  for (let i = 0; i < length; i++) out[i] = getFloat16(view, 2 * i, littleEndian)
  return out
}

function swapBytes (bytes, size) {
  for (let i = 0; i < bytes.length; i += size) {
    for (let a = i, b = i + size - 1; a < b; a++, b--) { const t = bytes[a]; bytes[a] = bytes[b]; bytes[b] = t }
  }
}

/**
 * A decoded block of a level: every sample's plane (tileWidth × tileHeight) and its densities (0..255, null when all
 * opaque; see densityFor). Cached per worker, by bytes.
 */
function block (ds, level, bx, by) {
  const key = `${ds.key}|${level.index}/${bx}/${by}`
  const hit = blocks.get(key)
  if (hit !== undefined) return hit.promise ?? Promise.resolve(hit)
  const promise = (async () => {
    const [samples, mask] = await Promise.all([
      samplesOf(level.image, bx, by, ds.bands, ds.dtype),
      level.mask ? samplesOf(level.mask, bx, by, 1, 'uint8').then((m) => m[0].data) : level.maskFrom ? sampledMask(ds, level, bx, by) : null,
    ])
    const pixels = level.tileWidth * level.tileHeight
    const shared = densityOf(ds, samples, mask, pixels, NO_VALUES_TESTED)
    const arrays = new Set(samples.map((s) => s.data))
    const bytes = [...arrays].reduce((sum, a) => sum + a.byteLength, 0) + (shared ? shared.byteLength : 0)
    // Alpha and mask are the dataset's; nodata and NaN hide a pixel by the values of the bands a request reads, so
    // where the file has them (valuesHide) each band set asked for has a density of its own, made when first asked.
    const valuesHide = ds.sampleFormat === 3 || (ds.nodata !== null && !Number.isNaN(ds.nodata))
    const decoded = { samples, shared, valuesHide, bytes, densities: valuesHide ? new Map() : null }
    decoded.densityOf = (rule) => {
      let density = decoded.densities.get(rule.key)
      if (density !== undefined) return density
      density = densityOf(ds, samples, mask, pixels, rule)
      // A few band sets per block: past them the oldest goes (a client cycling through bidx cannot grow a block).
      if (decoded.densities.size >= MAX_DENSITIES) {
        const [oldest, dropped] = decoded.densities.entries().next().value
        decoded.densities.delete(oldest)
        if (dropped !== null) decoded.bytes -= dropped.byteLength
      }
      decoded.densities.set(rule.key, density)
      if (density !== null) {
        decoded.bytes += density.byteLength
        if (blocks.get(key) === decoded) blocks.set(key, decoded) // counted at its new size
      }
      return density
    }
    blocks.set(key, decoded)
    return decoded
  })()
  blocks.set(key, { promise, bytes: 64 })
  promise.catch(() => blocks.delete(key))
  return promise
}

const MAX_DENSITIES = 4
const NO_VALUES_TESTED = { bands: [], any: false, fileNodata: false }

/**
 * Which pixels a request's values hide, made once per tile: nodata (the file's, or none where the request gives a
 * `nodata` of its own, which stands instead of it, as in titiler, and which the samplers apply on top) and NaN, in the
 * bands it reads (`samples`), as rio-tiler masks them: shown bands (`bidx`) hide a pixel when all of them are nodata
 * (GDAL's per-dataset mask over those bands), band math (`anyBand`) when any band it reads is (numpy's masked
 * arithmetic); NaN in any band read hides it. Alpha band and internal mask apply whatever the bands.
 */
export function maskRule (ds, samples, nodataOption, anyBand) {
  const fileNodata = nodataOption === null || nodataOption === undefined
  const bands = [...new Set(samples)].filter((s) => s !== ds.alphaBand).sort((a, b) => a - b)
  // One band: all and any are the same.
  return { bands, any: anyBand && bands.length > 1, fileNodata, key: `${fileNodata ? 'f' : 'r'}${anyBand && bands.length > 1 ? 'any' : 'all'}:${bands}` }
}

/** A block's density for a request (`rule`: maskRule's), null when every pixel of it is opaque. */
export const densityFor = (b, rule) => (b.valuesHide ? b.densityOf(rule) : b.shared)

/**
 * The density of a block's pixels: alpha band and internal mask, then where `rule` (see maskRule) says so, the
 * nodata and NaN of its bands. Null when all are opaque.
 */
function densityOf (ds, samples, mask, n, rule) {
  const nodata = rule.fileNodata ? ds.nodata : null
  const hasNodata = nodata !== null && !Number.isNaN(nodata)
  const tested = hasNodata || ds.sampleFormat === 3 ? rule.bands.map((s) => samples[s]) : []
  if (ds.alphaBand < 0 && mask === null && tested.length === 0) return null // nothing can hide a pixel
  const density = new Uint8Array(n).fill(255)
  let opaque = true
  const nd = nodata
  const ndf = Math.fround(nodata)
  // Nodata bands that hide a pixel: any one (band math) or all of them; never when the file has no nodata.
  const needed = !hasNodata ? Infinity : rule.any ? 1 : tested.length
  const alpha = ds.alphaBand >= 0 ? samples[ds.alphaBand] : null
  const alphaScale = 255 / (2 ** ds.bits - 1)
  for (let p = 0; p < n; p++) {
    let d = 255
    if (alpha !== null) d = Math.round(alpha.data[p * alpha.stride + alpha.start] * alphaScale)
    if (mask !== null && mask[p] === 0) d = 0
    if (d !== 0 && tested.length > 0) {
      let hits = 0
      for (let s = 0; s < tested.length; s++) {
        const v = tested[s].data[p * tested[s].stride + tested[s].start]
        if (v !== v) { hits = Infinity; break } // eslint-disable-line no-self-compare
        if (hasNodata && (v === nd || Math.fround(v) === ndf)) hits++
      }
      if (hits >= needed) d = 0
    }
    if (d !== 255) { density[p] = d; opaque = false }
  }
  return opaque ? null : density
}

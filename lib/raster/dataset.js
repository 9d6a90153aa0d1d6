// A GeoTIFF opened for tiling: its pyramid (full image + overviews, with their internal masks), its CRS as a proj4
// transform from Web Mercator, and what TileJSON and /meta report. Runs inside the raster workers (see worker.js),
// which keep datasets open.
import { close, fstat, open, read } from 'node:fs'
import { lstat, readFile } from 'node:fs/promises'
import { basename } from 'node:path'
import { promisify } from 'node:util'
import { inflateSync } from 'node:zlib'
import { GeoTIFF, addDecoder, BaseDecoder } from 'geotiff'
import geokeys from 'geotiff-geokeys-to-proj4'
import proj4 from 'proj4'
import Lerc from 'lerc'
import sharp from 'sharp'
import { ZSTDDecoder } from 'zstddec'
import { windowValues } from './blocks.js'
import { footprint } from './footprint.js'
import './jpeg.js' // JPEG blocks by libjpeg, as GDAL decodes them
import { angularFactor, ballparkNote, eastingFirst, epsgProj, withoutGrid } from './epsg.js'
import { RasterError } from './errors.js'
import { Unavailable } from '../errors.js'
import { besideUrl, openRemote, readSmallRemote } from '../remote/reader.js'
import { latOf, lonOf } from '../tilemath.js'

export { RasterError }

const MERCATOR_CODES = new Set([3857, 900913, 3785, 102100, 102113])
const EARTH_RADIUS = 6378137
const COMPRESSIONS = { 1: 'none', 5: 'LZW', 7: 'JPEG', 8: 'DEFLATE', 32946: 'DEFLATE', 32773: 'PackBits', 34887: 'LERC', 50000: 'ZSTD', 50001: 'WEBP' }
const DTYPES = { 1: 'uint', 2: 'int', 3: 'float' }

/** The ArrayBuffer of exactly `view`'s bytes, as geotiff.js wants a block: its own when it has no more, else a copy. */
const ownBuffer = (view) => (view.byteOffset === 0 && view.byteLength === view.buffer.byteLength
  ? view.buffer
  : view.buffer.slice(view.byteOffset, view.byteOffset + view.byteLength))

/** The decoder parameters of our own decoders (tiled files only: strips are refused), with `extra` ones. */
const tiledParameters = (extra) => async (fd) => ({
  tileWidth: await fd.loadValue('TileWidth'),
  tileHeight: await fd.loadValue('TileLength'),
  planarConfiguration: await fd.loadValue('PlanarConfiguration'),
  bitsPerSample: await fd.loadValue('BitsPerSample'),
  predictor: (await fd.loadValue('Predictor')) || 1,
  ...(await extra(fd)),
})
/** The parameters of a decoder that needs the block's size (blockBytes). */
const sizedParameters = tiledParameters(async (fd) => ({ samplesPerPixel: await fd.loadValue('SamplesPerPixel') }))

// GDAL writes WebP tiles (compression 50001); geotiff.js decodes WebP only in a browser, so sharp (libwebp) does it.
class WebpDecoder extends BaseDecoder {
  async decodeBlock (buffer) {
    const channels = this.parameters.samplesPerPixel
    let image = sharp(Buffer.from(buffer))
    image = channels === 4 ? image.ensureAlpha() : image.removeAlpha()
    return ownBuffer(await image.raw().toBuffer())
  }
}
addDecoder(50001, async () => WebpDecoder, tiledParameters(async (fd) => ({ predictor: 1, samplesPerPixel: await fd.loadValue('SamplesPerPixel') })), false)

// DEFLATE tiles through Node's zlib rather than geotiff.js's pako: native inflate, about twice as fast on the blocks
// of the shared fixtures. (These decoders run in the raster workers, so a synchronous inflate blocks no requests.)
class ZlibDecoder extends BaseDecoder {
  decodeBlock (buffer) {
    return ownBuffer(inflateSync(new Uint8Array(buffer)))
  }
}
addDecoder([8, 32946], async () => ZlibDecoder)

// LERC (Esri's limited-error compression, common for elevation), by the `lerc` package as geotiff.js does it, but
// keeping LERC's mask of valid pixels, which geotiff.js drops: GDAL stores a float band's NaN (a NaN nodata) as that
// mask, so those pixels came back as 0 and were drawn as data. Here they are NaN again, as GDAL reads them. (GDAL
// writes integer nodata as values, not in the mask.)
const zstd = new ZSTDDecoder()
const LERC_EXTRA = { 0: null, 1: 'deflate', 2: 'zstd' } // LercParameters[1]: a compression over the LERC blob
class LercDecoder extends BaseDecoder {
  decodeBlock (buffer) {
    const extra = LERC_EXTRA[this.parameters.lercParameters?.[1] ?? 0]
    if (extra === undefined) throw new RasterError(`unsupported LERC additional compression ${this.parameters.lercParameters[1]}`)
    let bytes = new Uint8Array(buffer)
    if (extra === 'deflate') bytes = inflateSync(bytes)
    else if (extra === 'zstd') {
      // A capacity, not the size (a LERC blob's is not known before): without one, zstddec takes a corrupt frame's
      // error code for a size and hands back its own memory. LERC stores at worst the raw values, a mask and headers.
      bytes = zstd.decode(bytes, 2 * blockBytes(this.parameters) + 65536)
      if (bytes.byteLength === 0) throw new RasterError('corrupt data: a LERC block\'s ZSTD does not decode')
    }
    const interleaved = this.parameters.planarConfiguration === 1
    const { pixels, mask, dimCount: depth = 1, pixelType } = Lerc.decode(ownBuffer(bytes), { returnPixelInterleavedDims: interleaved })
    let data = pixels[0]
    if (pixels.length > 1) data = interleavedBands(pixels, depth) // several LERC bands in one blob (GDAL writes one)
    if (mask && (pixelType === 'F32' || pixelType === 'F64')) {
      const step = data.length / mask.length
      for (let p = 0; p < mask.length; p++) if (mask[p] === 0) data.fill(NaN, p * step, p * step + step)
    }
    return ownBuffer(data)
  }
}
addDecoder(34887, async () => {
  await zstd.init()
  return LercDecoder
}, tiledParameters(async (fd) => ({ lercParameters: await fd.loadValue('LercParameters'), samplesPerPixel: await fd.loadValue('SamplesPerPixel') })), false)

// ZSTD tiles by zstddec's one-shot decoder, given the block's decoded size. geotiff.js's own ZSTD decoder asks
// zstddec without a size, and for a frame that does not state its size (a corrupt or truncated block) zstddec then
// streams, which loops for ever on such data, growing memory until the process dies. With the size known, a corrupt
// block stops at that size: zstddec hands back fewer bytes (none on an error), a RasterError here.
class ZstdDecoder extends BaseDecoder {
  decodeBlock (buffer) {
    const expected = blockBytes(this.parameters)
    const out = zstd.decode(new Uint8Array(buffer), expected)
    if (out.byteLength !== expected) throw new RasterError('corrupt data: a ZSTD block does not decode')
    return ownBuffer(out)
  }
}
addDecoder(50000, async () => {
  await zstd.init()
  return ZstdDecoder
}, sizedParameters, false)

/**
 * The bytes one decoded block holds, before geotiff.js widens samples of under 8 bits (a 1-bit mask): rows of
 * tileWidth pixels (one plane's samples, or every sample), each row whole bytes.
 */
export function blockBytes ({ tileWidth, tileHeight, planarConfiguration, bitsPerSample, samplesPerPixel = 1 }) {
  const bits = typeof bitsPerSample === 'number' ? [bitsPerSample] : Array.from(bitsPerSample)
  const pixelBits = planarConfiguration === 2 ? bits[0] : bits.length >= samplesPerPixel ? bits.reduce((a, b) => a + b, 0) : bits[0] * samplesPerPixel
  return Math.ceil((tileWidth * pixelBits) / 8) * tileHeight
}

// LZW and PackBits by decoders of ours that write into a block of the size the tile holds. geotiff.js's decoders
// push every value onto a JavaScript array for as long as the data goes on: a damaged LZW block (a code past its
// table) never ends, and the array's growth takes the whole process down (V8 gives a worker with a heap limit 16 MB
// of leeway to stop, not enough for one array's next backing store); its LZW also prints "ran off the end of the
// buffer" to the console for a block that ends early. These stop when the tile is full, or at the data's end (a block
// that ends short is a RasterError, as libtiff fails it), and are ten times faster (typed arrays: bench/decoders.js).
/** A decoder of ours for `decode(data, out)` (→ the bytes written); `named` says which, in a damaged block's error. */
const blockFiller = (decode, named) => class extends BaseDecoder {
  decodeBlock (buffer) {
    const out = new Uint8Array(blockBytes(this.parameters))
    if (decode(new Uint8Array(buffer), out) < out.length) throw new RasterError(`corrupt data: ${named} block ends before its tile is full`)
    return out.buffer
  }
}
addDecoder(5, async () => blockFiller(decodeLzw, 'an LZW'), sizedParameters, false)
addDecoder(32773, async () => blockFiller(decodePackbits, 'a PackBits'), sizedParameters, false)

/**
 * TIFF's LZW (codes of 9 to 12 bits, most significant bit first, widening one code early, as libtiff reads it) into
 * `out`: the bytes written, at most out.length. Throws on a code that cannot be (a damaged block).
 */
export function decodeLzw (input, out) {
  const prefix = new Uint16Array(4096)
  const suffix = new Uint8Array(4096)
  const length = new Uint16Array(4096)
  for (let c = 0; c < 256; c++) {
    suffix[c] = c
    length[c] = 1
  }
  let next = 258 // the next free code
  let width = 9
  let previous = -1
  let o = 0
  let bits = 0 // unread bits in `buffer`, at most 12 + 7
  let buffer = 0
  let p = 0
  while (o < out.length) {
    while (bits < width) {
      if (p === input.length) return o // no end-of-information code: as far as the data goes
      buffer = ((buffer << 8) | input[p++]) & 0xfffff
      bits += 8
    }
    bits -= width
    const code = (buffer >>> bits) & ((1 << width) - 1)
    if (code === 257) break // end of information
    if (code === 256) { // clear
      next = 258
      width = 9
      previous = -1
      continue
    }
    if (previous === -1) {
      if (code > 255) throw new Error('an LZW code before any string')
      out[o++] = code
      previous = code
      continue
    }
    // The string of `code`, or for the one code not yet in the table, the previous string and its own first byte.
    const known = code < next
    if (!known && code !== next) throw new Error('an LZW code past its table')
    const string = known ? code : previous
    const n = length[string]
    let c = string
    for (let k = o + n - 1; k >= o; k--) {
      if (k < out.length) out[k] = suffix[c]
      c = prefix[c]
    }
    const first = out[o] ?? firstByte(prefix, suffix, string)
    o += n
    if (!known && o < out.length) out[o++] = first
    if (next < 4096) {
      prefix[next] = previous
      suffix[next] = first
      length[next] = length[previous] + 1
      next++
    }
    if (next + 1 >= 1 << width && width < 12) width++
    previous = code
  }
  return Math.min(o, out.length)
}

/** The first byte of code `c`'s string (when it did not fit in the output). */
function firstByte (prefix, suffix, c) {
  while (c > 257) c = prefix[c]
  return suffix[c]
}

/** PackBits into `out`, as libtiff reads it (-128 is no operation): the bytes written, at most out.length. */
export function decodePackbits (input, out) {
  let o = 0
  let p = 0
  while (p < input.length && o < out.length) {
    const n = (input[p++] << 24) >> 24
    if (n >= 0) {
      const run = input.subarray(p, Math.min(p + n + 1, input.length, p + out.length - o))
      out.set(run, o)
      o += run.length
      p += n + 1
    } else if (n !== -128) {
      if (p === input.length) break
      const end = Math.min(o + 1 - n, out.length)
      out.fill(input[p++], o, end)
      o = end
    }
  }
  return o
}

/** Bands decoded one after another (each pixel-interleaved over `depth`) as one pixel-interleaved array. */
function interleavedBands (bands, depth) {
  const pixels = bands[0].length / depth
  const width = bands.length * depth
  const out = new bands[0].constructor(pixels * width)
  bands.forEach((band, b) => {
    for (let p = 0; p < pixels; p++) for (let d = 0; d < depth; d++) out[p * width + b * depth + d] = band[p * depth + d]
  })
  return out
}

/**
 * The CRS of a GeoTIFF as { proj, mercator, geographic, factor }; throws RasterError when it cannot be used. `centre`:
 * the raster's centre in its own CRS.
 */
function crsOf (image, centre) {
  const keys = image.getGeoKeys()
  if (!keys || (!keys.ProjectedCSTypeGeoKey && !keys.GeographicTypeGeoKey)) throw new RasterError('the file declares no CRS (no GeoKeys)')
  const model = keys.GTModelTypeGeoKey
  if (model === 1 && MERCATOR_CODES.has(keys.ProjectedCSTypeGeoKey)) return { proj: null, mercator: true, geographic: false, factor: [1, 1] }
  let proj = null
  let factor = [1, 1]
  let code = null
  if (model === 1 || model === 2) {
    // A registered code: EPSG's own definition. Otherwise (user-defined parameters): rebuilt from the GeoKeys.
    code = model === 1 ? keys.ProjectedCSTypeGeoKey : keys.GeographicTypeGeoKey
    proj = epsgProj(code)
    // A PROJ string's longitudes and latitudes are degrees; a geographic file's coordinates are in its angular unit.
    if (proj !== null && model === 2) factor = angularFactor(code)
    if (proj === null) {
      let parsed
      try {
        parsed = geokeys.toProj4(keys)
      } catch (err) {
        throw new RasterError(`unsupported CRS: ${err.message}`)
      }
      if (model === 1 && parsed.isGCS) throw new RasterError('unsupported CRS: projected, but its projection is not one proj4 knows')
      proj = parsed.proj4
      const c = parsed.coordinatesConversionParameters
      factor = [c.x || 1, c.y || 1]
    }
  } else {
    proj = citedCrs(keys, centre) // a user-defined model type: GDAL writes the CRS as WKT into a citation key
  }
  proj = eastingFirst(proj) // GeoTIFF rasters are always x = easting/longitude, whatever axis order PROJ would swap
  let note = null
  ;({ proj, note } = withoutGrid(proj, model === 1 || model === 2 ? code : null, centre, factor))
  // A registered code with no datum shift at all (neither +towgs84 nor a grid): said, as a grid left out is.
  if (note === null && (model === 1 || model === 2) && epsgProj(code) !== null) note = ballparkNote(proj, code)
  let a
  try {
    a = new proj4.Proj(proj).a
    proj4('EPSG:3857', proj).forward([0, 0])
  } catch (err) {
    throw new RasterError(`unsupported CRS: ${err.message || 'proj4 cannot use it'}`)
  }
  if (!(Math.abs(a - EARTH_RADIUS) <= 50000)) throw new RasterError(`unsupported CRS: not the Earth (ellipsoid radius ${Math.round(a)} m)`)
  // Plain degrees from Greenwich are read as they are; a prime meridian, a datum shift or another angular unit go through proj4.
  const geographic = /\+proj=longlat/.test(proj) && !/\+pm=[1-9a-z]/.test(proj) && !/\+towgs84=(?!0,0,0(,0,0,0,0)?\b)/.test(proj) && factor[0] === 1 && factor[1] === 1
  return { proj, mercator: false, geographic, factor, note }
}

/**
 * The CRS of a "user-defined model type" file, which GDAL can only describe as WKT (in PCSCitationGeoKey, after
 * "ESRI PE String = "): the PROJ string GDAL put beside it (EXTENSION["PROJ4", …], what GDAL itself reads back), a
 * geostationary projection rebuilt from its parameters, or the WKT as it is where proj4's parser knows the
 * projection (the raster's centre must go to longitude/latitude and back). A PROJ string or WKT for proj4;
 * RasterError when none of those applies.
 */
function citedCrs (keys, centre) {
  const wkt = ['PCSCitationGeoKey', 'GTCitationGeoKey', 'GeogCitationGeoKey']
    .map((k) => (typeof keys[k] === 'string' ? keys[k].replace(/^ESRI PE String = /, '') : ''))
    .find((text) => /^(PROJCS|PROJCRS|GEOGCS|GEOGCRS)\[/.test(text))
  if (wkt === undefined) throw new RasterError('unsupported CRS: a user-defined model type with no WKT or PROJ string in its citations')
  const extension = /EXTENSION\["PROJ4","([^"]+)"\]/.exec(wkt)
  if (extension) return extension[1]
  const method = /PROJECTION\["([^"]+)"|METHOD\["([^"]+)"/.exec(wkt)
  const name = method ? method[1] ?? method[2] : 'none'
  const parameter = (...names) => {
    for (const n of names) {
      const m = new RegExp(`PARAMETER\\["${n}",([-\\d.eE+]+)`, 'i').exec(wkt)
      if (m) return Number(m[1])
    }
    return 0
  }
  if (/^geostationary/i.test(name)) {
    // ESRI's Geostationary_Satellite is PROJ's geos with the default sweep (y), as GDAL reads it.
    const [, semiMajor, inverseFlattening] = /(?:SPHEROID|ELLIPSOID)\["[^"]*",([\d.eE+]+),([\d.eE+]+)/.exec(wkt) ?? []
    if (!semiMajor) throw new RasterError('unsupported CRS: a geostationary WKT without its ellipsoid')
    const sweep = /sweep.?x/i.test(name) ? 'x' : 'y'
    return `+proj=geos +lon_0=${parameter('central_meridian', 'longitude_of_center', 'Longitude of natural origin')} ` +
      `+h=${parameter('satellite_height', 'height', 'Satellite Height')} +x_0=${parameter('false_easting', 'False easting')} ` +
      `+y_0=${parameter('false_northing', 'False northing')} +a=${semiMajor} +rf=${inverseFlattening} +sweep=${sweep} +units=m +no_defs`
  }
  try {
    const { forward, inverse } = proj4('EPSG:4326', wkt)
    const back = forward(inverse(centre))
    if (Math.hypot(back[0] - centre[0], back[1] - centre[1]) < 1e-3) return wkt
  } catch {}
  throw new RasterError(`unsupported CRS: a user-defined CRS that only WKT describes (projection "${name}"), which proj4 cannot use`)
}

/**
 * Affine of the full image: [originX, resX, originY, resY] (resY positive, rows go south). Read off the tags as GDAL
 * reads them (ModelPixelScale and a ModelTiepoint, else ModelTransformation), not by geotiff.js's getResolution,
 * which turns a ModelTransformation's pixel height into its opposite: a south-up file (positive pixel height) passed
 * for north-up, served mirrored in the wrong place, and a north-up one was refused as flipped.
 */
function geotransformOf (image) {
  const fd = image.fileDirectory
  const transform = fd.getValue('ModelTransformation')
  const scale = fd.getValue('ModelPixelScale')
  const tiepoints = fd.getValue('ModelTiepoint')
  let ox, rx, oy, pixelHeight // pixelHeight: GDAL's geotransform[5], negative for north-up
  if (scale?.length >= 2 && scale[0] !== 0 && scale[1] !== 0 && tiepoints?.length >= 6) { // GDAL's order
    // The tie point's pixel (i, j) is at model (x, y): the origin is moved back from it, as GDAL does.
    const [i, j, , x, y] = tiepoints
    ;[rx, pixelHeight] = [scale[0], -scale[1]]
    ;[ox, oy] = [x - i * rx, y - j * pixelHeight]
  } else if (transform?.length === 16) {
    if (transform[1] !== 0 || transform[4] !== 0) throw new RasterError('rotated or sheared rasters are not supported')
    ;[ox, rx, oy, pixelHeight] = [transform[3], transform[0], transform[7], transform[5]]
  } else if (tiepoints?.length >= 6) { // tie points without a pixel scale: GCPs, which GDAL warps
    throw new RasterError(`the file is georeferenced by ${Math.floor(tiepoints.length / 6)} ground control points (GCPs), not a geotransform, which is not supported: warp it onto a grid with \`gdalwarp\` (e.g. \`gdalwarp -of COG in.tif out.tif\`)`)
  } else {
    throw new RasterError('the file has no georeferencing (no tie point and pixel scale)')
  }
  if (pixelHeight > 0 && rx > 0) {
    throw new RasterError('unsupported georeferencing: the raster is south-up (positive pixel height, rows going north): rewrite it north-up with `gdalwarp` (e.g. `gdalwarp -of COG in.tif out.tif`)')
  }
  const ry = -pixelHeight
  if (!(rx > 0) || !(ry > 0)) throw new RasterError('unsupported georeferencing: flipped or zero pixel size')
  // PixelIsPoint: the tie point is a pixel centre. GDAL moves it to the corner; so do we.
  if (image.getGeoKeys()?.GTRasterTypeGeoKey === 2) {
    ox -= rx / 2
    oy += ry / 2
  }
  return [ox, rx, oy, ry]
}

/**
 * A remote GeoTIFF as geotiff.js reads it: every slice through the shared range reader (lib/remote/reader.js: its
 * block cache, retries and pinned ETag) instead of geotiff.js's own HTTP source.
 */
function remoteSource (reader) {
  const copy = (buf) => buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.length)
  return {
    fetch: (slices) => Promise.all(slices.map(({ offset, length }) => reader.readCached(offset, length).then(copy))),
    get fileSize () { return reader.size },
    close () { reader.close() },
  }
}

const openFile = promisify(open)
const closeFile = promisify(close)
const readAt = promisify(read)
const statFile = promisify(fstat)

/**
 * A local GeoTIFF as geotiff.js reads it: as its own file source does (bytes past the end read as zeros), but with
 * the file's size, against which blocks.js checks each block before decoding it (one past the end: a truncated file).
 */
async function fileSource (path) {
  const fd = await openFile(path, 'r')
  let size
  try {
    size = (await statFile(fd)).size
  } catch (err) {
    closeFile(fd).catch(() => {})
    throw err
  }
  let closed = false
  return {
    fileSize: size,
    fetch: (slices) => Promise.all(slices.map(async ({ offset, length }) => {
      const bytes = new Uint8Array(length)
      await readAt(fd, bytes, 0, length, offset)
      return bytes.buffer
    })),
    close () {
      if (closed) return
      closed = true
      return closeFile(fd).catch(() => {})
    },
  }
}

/**
 * Opens a GeoTIFF and reads what tiling it needs. `src` is { key, path } or { key, url, version, comparedBySize }
 * (version: the ETag the object must still have; comparedBySize: see lib/remote/reader.js); `remote.s3`: the object storage settings (config.s3). A remote failure is thrown as
 * the reader's Unavailable (its `replaced` flag set when the object changed).
 */
export async function openDataset (src, remote = {}) {
  let tiff
  let reader = null
  let local = null
  try {
    if (src.url) {
      reader = await openRemote(src.url, { s3: remote.s3, version: src.version ?? null, comparedBySize: src.comparedBySize === true })
      tiff = await GeoTIFF.fromSource(remoteSource(reader))
    } else {
      local = await fileSource(src.path)
      tiff = await GeoTIFF.fromSource(local)
    }
  } catch (err) {
    reader?.close()
    local?.close() // (not a TIFF: its file is let go)
    if (err instanceof Unavailable) throw err
    throw new RasterError(`not a readable TIFF: ${err.message}`)
  }
  let maskTiff = null
  let ovrTiff = null
  let maskOvrTiff = null
  const found = {} // a remote file's sidecars looked for: ending → version, or null for none
  try {
    maskTiff = await sidecarTiff(src, '.msk', 'mask', remote, found)
    // Opened only for a file without overviews of its own (describe asks): GDAL reads the internal ones alone then.
    const openOverviews = async () => (ovrTiff = await sidecarTiff(src, '.ovr', 'overviews', remote, found))
    // Likewise the .msk's overviews beside it, for a .msk without overviews of its own.
    const openMaskOverviews = async () => (maskOvrTiff = await sidecarTiff(src, '.msk.ovr', 'mask\'s overviews', remote, found))
    const ds = await describe(tiff, src, remote, maskTiff, openOverviews, openMaskOverviews)
    ds.reader = reader
    ds.sidecars = src.url ? { ...src.sidecars, ...found } : null
    return ds
  } catch (err) {
    tiff.close?.()
    maskTiff?.close?.()
    ovrTiff?.close?.()
    maskOvrTiff?.close?.()
    if (err instanceof RasterError || err instanceof Unavailable) throw err
    throw new RasterError(`not a usable GeoTIFF: ${err?.message ?? err}`)
  }
}

/**
 * Refuses NBITS samples tile-cannon cannot read as GDAL does: geotiff.js unpacks a sample from at most the four bytes it
 * starts in (27 to 31 bits reach a fifth), leaves 24-bit ones packed (read as if 32-bit), unpacks only unsigned ones,
 * and only where the codec gives it packed bits (JPEG, LERC and WebP blocks hold whole samples: GDAL writes none of
 * them with NBITS, other software may).
 */
function checkPacked (fd, nbits, compression) {
  const sizes = Array.from(fd.getValue('BitsPerSample'))
  const convert = `rewrite it with whole-byte samples (\`gdal_translate -of COG -ot ${nbits < 8 ? 'Byte' : nbits < 16 ? 'UInt16' : 'UInt32'} in.tif out.tif\`, without -co NBITS)`
  if (sizes.some((b) => b !== nbits)) throw new RasterError(`unsupported sample type: samples of different sizes (${sizes.join(', ')} bits): ${convert}`)
  if (nbits === 24 || nbits > 26) throw new RasterError(`unsupported sample type: ${nbits}-bit samples (NBITS=${nbits}), which geotiff.js does not unpack correctly: ${convert}`)
  if (COMPRESSIONS[compression] === 'JPEG' || COMPRESSIONS[compression] === 'LERC' || COMPRESSIONS[compression] === 'WEBP') {
    throw new RasterError(`unsupported sample type: ${nbits}-bit samples (NBITS=${nbits}) in ${COMPRESSIONS[compression]} blocks: ${convert}`)
  }
}

/** Closes what openDataset opened: the file, and the mask and overview sidecars beside it if there are any. */
export function closeDataset (ds) {
  ds.tiff.close?.()
  ds.maskTiff?.close?.()
  ds.ovrTiff?.close?.()
  ds.maskOvrTiff?.close?.()
}

/**
 * A sidecar GDAL keeps beside a local file, opened as a GeoTIFF; null when there is none. `<file>.msk`: its
 * per-dataset mask (what `gdal_translate -mask` or CreateMaskBand write with GDAL_TIFF_INTERNAL_MASK=NO), whose images
 * are masks as an internal mask's are. `<file>.ovr`: its overviews (what `gdaladdo -ro` writes, or gdaladdo where it
 * cannot write into the file), whose images are reduced-resolution images of the file's bands. `<file>.msk.ovr`: the
 * .msk's overviews (what gdaladdo writes beside a .msk it does not write into: `-ro`), masks of the overviews' sizes.
 * Read only when it is a file of its own, not a link (as the .aux.xml). A remote file's is read by ranges as the file
 * is (remoteSidecarTiff); `found` gets what was found of it.
 */
async function sidecarTiff (src, ending, what, remote, found) {
  if (src.url) return remoteSidecarTiff(src, ending, what, remote, found)
  const path = `${src.path}${ending}`
  try {
    if (!(await lstat(path)).isFile()) return null
  } catch {
    return null
  }
  let source = null
  try {
    source = await fileSource(path)
    return await GeoTIFF.fromSource(source)
  } catch (err) {
    source?.close()
    throw unreadableSidecar(src, ending, what, err)
  }
}

const TIFF_MAGIC = ['49492a00', '4d4d002a', '49492b00', '4d4d002b'] // II*\0, MM\0*, and BigTIFF's

/**
 * A sidecar beside a remote COG (see sidecarTiff), as GDAL looks for one beside a /vsicurl/ or /vsis3/ file: its own
 * reader, through the thread's block cache, pinned to its version as the file is; null where there is none. The worker
 * that describes the set looks for it, one request (none there: a 404, or a 403, as S3 answers for a key that is not
 * there to whoever may not list the bucket, any refusal but the store's not answering, or an answer that is not a
 * TIFF, a web server's page for any path, which GDAL passes over too), and `found[ending]` says what it found (its
 * version, or null); the main thread hands that to every worker (`src.sidecars`), which then neither looks again for
 * one that is not there nor reads another version of one that is (one changed or gone since: the set is re-opened, as
 * for the file).
 */
async function remoteSidecarTiff (src, ending, what, remote, found) {
  const known = src.sidecars?.[ending]
  if (known === null) return null
  const changed = () => Object.assign(new Unavailable('a file beside the remote object changed since it was opened'), { replaced: true })
  let reader
  try {
    // (Compared by size where the file is: the same store's servers, each with its own validators.)
    reader = await openRemote(besideUrl(src.url, ending), { s3: remote.s3, version: known ?? null, comparedBySize: src.comparedBySize === true })
  } catch (err) {
    if (known !== undefined) throw err.gone ? changed() : err
    if (err.transient) throw err // (the store did not answer: the set's reason, as for the file, tried again)
    found[ending] = null // (404; 403; an empty object; a long page for any path, sent whole)
    return null
  }
  let tiff
  try {
    if (!TIFF_MAGIC.includes((await reader.readCached(0, 4)).toString('hex'))) {
      if (known !== undefined) throw changed()
      reader.close()
      found[ending] = null
      return null
    }
    tiff = await GeoTIFF.fromSource(remoteSource(reader))
  } catch (err) {
    reader.close()
    if (err instanceof Unavailable) throw err
    throw unreadableSidecar(src, ending, what, err)
  }
  found[ending] = reader.version
  return tiff
}

/** A sidecar of `src` there but not a TIFF geotiff.js reads (`what` it is: 'mask', 'overviews', …). */
function unreadableSidecar (src, ending, what, err) {
  return new RasterError(`the ${what} beside the file (${sidecarName(src, ending)}) ${what === 'mask' ? 'is' : 'are'} not a readable TIFF: ${err.message}`)
}

/** The name of a sidecar of `src` for a message: the file's name (a URL's last path segment) and `ending`. */
function sidecarName (src, ending) {
  if (!src.url) return basename(src.path) + ending
  const segment = basename(new URL(src.url).pathname)
  try { return decodeURIComponent(segment) + ending } catch { return segment + ending }
}

async function describe (tiff, src, remote, maskTiff, openOverviews, openMaskOverviews) {
  const count = await tiff.getImageCount()
  const images = []
  const masks = []
  for (let i = 0; i < count; i++) {
    const image = await tiff.getImage(i)
    const type = image.fileDirectory.getValue('NewSubfileType') ?? 0
    if (type & 4) masks.push(image)
    else if (i === 0 || type & 1) images.push(image)
  }
  // The .msk's images (every one a mask, whatever its subfile type), for levels without an internal mask: GDAL reads
  // the internal one first. Each → the ending of the file it is in.
  const sidecarMasks = new Map()
  for (let i = 0, n = maskTiff === null ? 0 : await maskTiff.getImageCount(); i < n; i++) sidecarMasks.set(await maskTiff.getImage(i), '.msk')
  // A .msk without overviews inside: GDAL reads the mask's overview levels from the .msk.ovr beside it (gdaladdo's,
  // where it did not write into the .msk), rather than sample the full-resolution mask for every overview.
  let maskOvrTiff = null
  if (sidecarMasks.size === 1 && (maskOvrTiff = await openMaskOverviews()) !== null) {
    const [full] = sidecarMasks.keys()
    const [W, H] = [full.getWidth(), full.getHeight()]
    for (let i = 0, n = await maskOvrTiff.getImageCount(); i < n; i++) {
      const image = await maskOvrTiff.getImage(i)
      if (!(image.getWidth() < W && image.getHeight() < H)) continue // (not an overview of the .msk: GDAL would not use it either)
      sidecarMasks.set(image, '.msk.ovr')
    }
  }
  /** A sidecar's mask image as the mask of `image` (sidecarMask), or null: a .msk.ovr's in other blocks is sampled 1:1. */
  const sidecarLevelMask = (image) => {
    const mask = [...sidecarMasks.keys()].find((m) => sameSize(m, image))
    const ending = sidecarMasks.get(mask)
    return sidecarMask(mask, image, ending, { otherBlocksSampled: ending === '.msk.ovr' })
  }
  const base = images[0]
  const fd = base.fileDirectory
  if (!fd.hasTag('TileWidth')) throw new RasterError('not a Cloud Optimized GeoTIFF: the image is stored in strips, not tiles (convert it with `gdal_translate -of COG`)')
  const [ox, rx, oy, ry] = geotransformOf(base)
  const width = base.getWidth()
  const height = base.getHeight()
  const crs = crsOf(base, [ox + (width * rx) / 2, oy - (height * ry) / 2])
  const bands = base.getSamplesPerPixel()
  const sampleFormat = base.getSampleFormat()
  // GDAL's NBITS packs unsigned samples into 1 to 31 bits (a 1-bit mask, 4-bit classes, 12-bit sensor data); GDAL reads
  // them as its smallest type that holds them (Byte, UInt16, UInt32), and so are they here: geotiff.js unpacks each
  // block into that type's array as it decodes it (normalizeArray). `bits` is that type's, `nbits` the file's.
  const nbits = base.getBitsPerSample()
  const packed = sampleFormat === 1 && nbits !== 8 && nbits !== 16 && nbits < 32
  const bits = packed ? (nbits < 8 ? 8 : nbits < 16 ? 16 : 32) : nbits
  const compression = fd.getValue('Compression') ?? 1
  // Complex samples (SampleFormat 5 and 6: GDAL's CInt16 … CFloat64) are two values a pixel, which no rendering draws.
  if (sampleFormat === 5 || sampleFormat === 6) throw new RasterError(`unsupported sample type: complex data (${sampleFormat === 5 ? 'CInt' : 'CFloat'}${bits / 2}) is not supported`)
  // 64-bit integers: geotiff.js has no arrays for them (and JavaScript numbers cannot hold them all). Floats of 16 bits
  // (GDAL's Float16, or NBITS=16) are read as 32-bit ones (blocks.js).
  if (!DTYPES[sampleFormat] || ![8, 16, 32, 64].includes(bits) || (sampleFormat === 3 && bits < 16) || (sampleFormat !== 3 && bits === 64)) {
    throw new RasterError(`unsupported sample type: ${bits}-bit ${DTYPES[sampleFormat] ?? 'format ' + sampleFormat}`)
  }
  const sampleType = { bands, sampleFormat, nbits, packed, bits }
  checkStorage(base, sampleType)
  const photometric = fd.getValue('PhotometricInterpretation')
  const extra = Array.from(fd.getValue('ExtraSamples') ?? [])
  // The alpha band, when the last extra sample is one (1: associated, 2: unassociated alpha).
  const alphaBand = extra.length > 0 && (extra[extra.length - 1] === 1 || extra[extra.length - 1] === 2) ? bands - 1 : -1
  let aux = null
  let auxNote = null
  try {
    aux = await auxOf(src, bands, remote)
  } catch (err) { // (a remote one that cannot be read now: the file is served without it, and the log says so)
    auxNote = `the .aux.xml beside it could not be read (${err.message}): read without it, its nodata and statistics too`
  }
  const nodata = aux?.nodata ?? base.getGDALNoData() // the .aux.xml's first, as GDAL's PAM overrides the file's
  let palette = null
  if (photometric === 3) {
    const map = await fd.loadValue('ColorMap')
    if (map) palette = Uint16Array.from(map)
  }
  // A one-band 1-bit file without a colour table is a bitmap, which GDAL gives one: 0 black and 1 white (the other
  // way round for MinIsWhite), what titiler draws it with.
  if (palette === null && nbits === 1 && bands === 1) palette = Uint16Array.from(photometric === 0 ? [65535, 0, 65535, 0, 65535, 0] : [0, 65535, 0, 65535, 0, 65535])
  // Overviews GDAL keeps beside a file that has none inside (<file>.ovr), after its full image; where the file has some,
  // GDAL reads those alone, and so does this (the .ovr is not opened).
  let ovrTiff = null
  if (images.length === 1 && (ovrTiff = await openOverviews()) !== null) {
    const sidecar = await sidecarOverviews(ovrTiff, base, sampleType, sidecarName(src, '.ovr'))
    images.push(...sidecar.overviews)
    masks.push(...sidecar.masks)
    if (sidecar.overviews.length === 0) {
      ovrTiff.close() // (a .ovr of masks alone: nothing to read in it)
      ovrTiff = null
    }
  }
  const levels = images
    .map((image) => ({
      image,
      width: image.getWidth(),
      height: image.getHeight(),
      tileWidth: image.getTileWidth(),
      tileHeight: image.getTileHeight(),
      mask: masks.find((m) => sameSize(m, image)) ?? sidecarLevelMask(image),
    }))
    .filter((l) => l.image === base || l.image.fileDirectory.hasTag('TileWidth'))
    .sort((a, b) => b.width - a.width)
  levels.forEach((level, index) => {
    level.index = index // part of its blocks' cache keys
    level.fx = width / level.width
    level.fy = height / level.height
  })
  // A level without a mask of its own where the file has one at a finer level (a .msk holds the full image's only,
  // however many overviews the file has, unless a .msk.ovr is beside it; a .ovr's overviews have none beside an
  // internal mask) reads it by nearest sample, as GDAL reads a mask band at a coarser scale. The file's own masks
  // first, as GDAL reads them first.
  const finerMasks = [...masks.filter((m) => m.fileDirectory.hasTag('TileWidth')), ...sidecarMasks.keys()]
  if (finerMasks.length > 0) {
    for (const level of levels) {
      if (level.mask !== null) continue
      const finer = finerMasks.filter((m) => m.getWidth() >= level.width && m.getHeight() >= level.height)
        .sort((a, b) => a.getWidth() - b.getWidth())[0]
      if (finer !== undefined) level.maskFrom = { image: sidecarMasks.has(finer) ? sidecarMask(finer, finer, sidecarMasks.get(finer)) : finer, fx: finer.getWidth() / level.width, fy: finer.getHeight() / level.height }
    }
  }

  const ds = {
    key: src.key,
    tiff,
    maskTiff,
    ovrTiff,
    maskOvrTiff,
    levels,
    width,
    height,
    bands,
    bits,
    nbits,
    sampleFormat,
    dtype: `${DTYPES[sampleFormat]}${bits}`,
    nodata,
    alphaBand,
    palette,
    photometric,
    compression: COMPRESSIONS[compression],
    transform: [ox, rx, oy, ry],
    crs,
  }
  ds.aux = aux
  ds.auxNote = auxNote
  ds.toSource = sourceTransform(ds)
  const { lonLatBounds, warp } = footprint(ds)
  Object.assign(ds, { lonLatBounds, warp, resolution: warp.resolution })
  ds.stats = await statistics(ds, aux)
  return ds
}

const sameSize = (a, b) => a.getWidth() === b.getWidth() && a.getHeight() === b.getHeight()

/**
 * Refuses blocks tile-cannon cannot decode as GDAL does: the file's, and each overview's in a .ovr, which gdaladdo
 * stores its own way (COMPRESS_OVERVIEW, PHOTOMETRIC_OVERVIEW, INTERLEAVE_OVERVIEW). `type`: the file's sample type.
 */
function checkStorage (image, { nbits, packed, bits }) {
  const fd = image.fileDirectory
  const compression = fd.getValue('Compression') ?? 1
  if (packed) checkPacked(fd, nbits, compression)
  if (!COMPRESSIONS[compression]) throw new RasterError(`unsupported compression ${compression}`)
  const predictor = fd.getValue('Predictor') ?? 1
  // geotiff.js undoes the predictor on file-order bytes: wrong for big-endian samples wider than a byte.
  if (!image.littleEndian && predictor > 1 && bits > 8) throw new RasterError('unsupported: a big-endian file with a predictor (rewrite it little-endian with gdal_translate -of COG)')
  const photometric = fd.getValue('PhotometricInterpretation')
  if (photometric === 6 && compression !== 7) throw new RasterError('unsupported: YCbCr pixels outside JPEG compression')
  // (libjpeg turns YCbCr into RGB only in pixel-interleaved blocks: jpeg.js. GDAL writes no other.)
  if (photometric === 6 && image.planarConfiguration === 2) throw new RasterError('unsupported: YCbCr pixels in separate planes')
}

/**
 * The images of a .ovr (`ovrTiff`, named `name`) as overviews of `base`: { overviews, masks }. Its overviews must be
 * reduced-resolution images of the file's bands, in tiles, of its sample type and proportions, as gdaladdo writes
 * them; each is decoded as stored (gdaladdo compresses and interleaves overviews its own way). Its masks are read where
 * they lie in the blocks of an overview of their size. A .ovr that disagrees is the set's RasterError (503), as a .msk
 * that does is: GDAL would read another file's overviews, or a failed gdaladdo's, band by band and draw them.
 */
async function sidecarOverviews (ovrTiff, base, type, name) {
  const refuse = (why) => new RasterError(`the overviews beside the file (${name}) ${why}: delete it and build them again (\`gdaladdo -ro\`), or put them inside the file (\`gdal_translate -of COG\`)`)
  const typeName = (bits, format) => `${bits}-bit ${DTYPES[format] ?? 'format ' + format}`
  const [W, H] = [base.getWidth(), base.getHeight()]
  const overviews = []
  const masks = []
  for (let i = 0, n = await ovrTiff.getImageCount(); i < n; i++) {
    const image = await ovrTiff.getImage(i)
    const fd = image.fileDirectory
    if ((fd.getValue('NewSubfileType') ?? 0) & 4) {
      masks.push(image)
      continue
    }
    const [w, h] = [image.getWidth(), image.getHeight()]
    if (image.getSamplesPerPixel() !== type.bands) throw refuse(`hold ${image.getSamplesPerPixel()} bands where the file has ${type.bands}`)
    const sizes = Array.from(fd.getValue('BitsPerSample'))
    if (image.getSampleFormat() !== type.sampleFormat || sizes.some((b) => b !== type.nbits)) {
      throw refuse(`hold ${typeName(sizes.find((b) => b !== type.nbits) ?? sizes[0], image.getSampleFormat())} samples where the file has ${typeName(type.nbits, type.sampleFormat)}`)
    }
    // Smaller on both sides, in the file's proportions: gdaladdo rounds each side of a reduction up.
    if (!(w < W && h < H) || Math.abs(h - (H * w) / W) >= 1 + H / W || Math.abs(w - (W * h) / H) >= 1 + W / H) {
      throw refuse(`hold an image of ${w} × ${h} pixels, not an overview of the file's ${W} × ${H}`)
    }
    if (!fd.hasTag('TileWidth')) throw refuse(`hold an image stored in strips, not tiles (${w} × ${h})`)
    try {
      checkStorage(image, type)
    } catch (err) {
      throw refuse(`hold an image that cannot be read (${err.message})`)
    }
    overviews.push(image)
  }
  const inBlocksOf = (m) => overviews.some((o) => sameSize(m, o) && m.fileDirectory.hasTag('TileWidth') &&
    m.getTileWidth() === o.getTileWidth() && m.getTileHeight() === o.getTileHeight())
  return { overviews, masks: masks.filter(inBlocksOf) }
}

/**
 * A .msk image as the mask of `image` (null for none): one byte a pixel, in blocks the size of the image's, which
 * blocks.js reads beside the image's own (GDAL writes them so). One in other blocks is refused, or with
 * `otherBlocksSampled` is null: the level then samples it as a finer mask, 1:1.
 */
function sidecarMask (mask, image, ending = '.msk', { otherBlocksSampled = false } = {}) {
  if (mask === undefined) return null
  const fd = mask.fileDirectory
  const blocks = fd.hasTag('TileWidth') ? [mask.getTileWidth(), mask.getTileHeight()] : null
  if (blocks === null || blocks[0] !== image.getTileWidth() || blocks[1] !== image.getTileHeight()) {
    if (otherBlocksSampled) return null
    throw new RasterError(`the mask beside the file (${ending}) is not in blocks of the file's ${image.getTileWidth()} × ${image.getTileHeight()} pixels: rewrite the file with its mask inside (\`gdal_translate -of COG\`)`)
  }
  if (mask.getSamplesPerPixel() !== 1 || mask.getBitsPerSample() > 8) throw new RasterError(`the mask beside the file (${ending}) is not a mask (one band of at most 8 bits)`)
  return mask
}

/**
 * Web Mercator [x, y] → source CRS, in the file's own units; null for the identity. Written for a point array so the
 * caller reuses one buffer.
 */
function sourceTransform (ds) {
  const { crs } = ds
  if (crs.mercator) return null
  if (crs.geographic) {
    const west = ds.transform[0]
    const east = west + ds.width * ds.transform[1]
    if (west >= -180 && east <= 180) {
      return (x, y, out) => {
        out[0] = lonOf(x)
        out[1] = latOf(y)
      }
    }
    // A grid past ±180 (laid out 170..190, 0..360, -190..-170): each longitude is taken within one turn from `low`, half
    // a turn west of the raster's middle, so it lands on the raster wherever the raster has it (-170 is read at 190,
    // -10 at 350) and the cut falls outside it (mid-gap) or at its own edge (a whole world). Across the cut, source
    // columns jump by a turn: warp.js computes the cells there point by point (`turn`) rather than interpolate.
    const low = (west + east) / 2 - 180
    const toSource = (x, y, out) => {
      let lon = lonOf(x)
      if (lon < low) lon += 360 * Math.ceil((low - lon) / 360)
      else if (lon >= low + 360) lon -= 360 * Math.floor((lon - low) / 360)
      out[0] = lon
      out[1] = latOf(y)
    }
    toSource.turn = 360 // source units round the world
    return toSource
  }
  const forward = proj4('EPSG:3857', crs.proj).forward
  const [fx, fy] = crs.factor
  const point = [0, 0]
  const toSource = (x, y, out) => {
    point[0] = x
    point[1] = y
    let r
    try { r = forward(point) } catch { r = null }
    out[0] = r ? r[0] / fx : NaN
    out[1] = r ? r[1] / fy : NaN
  }
  toSource.key = `${crs.proj}|${fx}|${fy}` // the same map for every file in this CRS (warp.js shares its grid nodes)
  return toSource
}

/**
 * Per-band minimum and maximum, for the default rescale of data that is not 8-bit: GDAL's stored statistics where
 * they are (the .aux.xml's, else the file's GDAL_METADATA: what `gdalinfo -stats` and `gdal_translate -stats` write),
 * otherwise read off the smallest overview (a window of it at most 1024 px wide), nodata left out as densityOf leaves
 * it out. A damaged block there must not make the whole file unavailable: the next overview up is read instead (two
 * more at most), and ds.statsNote says so for the log.
 */
async function statistics (ds, aux) {
  if (ds.bits === 8 && ds.sampleFormat === 1) return null
  const stored = await storedStatistics(ds, aux)
  if (stored.every((range) => range !== null)) return stored
  let rasters
  const smallest = ds.levels.length - 1
  for (let index = smallest; ; index--) {
    const level = ds.levels[index]
    const w = Math.min(level.width, 1024)
    const h = Math.min(level.height, 1024)
    const x0 = Math.floor((level.width - w) / 2)
    const y0 = Math.floor((level.height - h) / 2)
    try {
      const window = [x0, y0, x0 + w, y0 + h]
      rasters = ds.nbits === ds.bits ? await level.image.readRasters({ window }) : await windowValues(ds, level, window)
    } catch (err) {
      // A remote read that failed is the set's unavailability, not damage: never read around.
      if (err instanceof Unavailable || index === 0 || index === smallest - 2) throw err
      ds.statsNote ??= `the default stretch is read off a larger overview: the smallest does not decode (${err instanceof RasterError ? err.message : `corrupt data: ${err.message}`})`
      continue
    }
    break
  }
  // Compared as blocks.js densityOf compares: a Float32 band holds a nodata float32 cannot (ArcGIS's -3.4e38) as its
  // nearest float32, never equal to the double.
  const nd = ds.nodata
  const ndf = Math.fround(nd)
  const hasNodata = nd !== null && !Number.isNaN(nd)
  return rasters.map((values, b) => {
    if (stored[b] !== null) return stored[b]
    let min = Infinity
    let max = -Infinity
    for (let i = 0; i < values.length; i++) {
      const v = values[i]
      if (!Number.isFinite(v) || (hasNodata && (v === nd || Math.fround(v) === ndf))) continue // NaN and ±Inf would make the stretch useless
      if (v < min) min = v
      if (v > max) max = v
    }
    return min <= max ? [min, max] : [0, 1]
  })
}

/** Per band, [min, max] from GDAL's STATISTICS_MINIMUM/MAXIMUM (the .aux.xml's, else GDAL_METADATA's), or null. */
async function storedStatistics (ds, aux) {
  const image = ds.levels[0].image
  const tagged = image.fileDirectory.hasTag('GDAL_METADATA')
  const out = []
  for (let b = 0; b < ds.bands; b++) {
    let range = aux?.statistics.get(b + 1) ?? null
    if (range === null && tagged) {
      const items = await image.getGDALMetadata(b)
      range = statisticsRange(items?.STATISTICS_MINIMUM, items?.STATISTICS_MAXIMUM)
    }
    out.push(range)
  }
  return out
}

const statisticsRange = (min, max) => {
  const lo = typeof min === 'string' ? Number(min) : NaN
  const hi = typeof max === 'string' ? Number(max) : NaN
  return Number.isFinite(lo) && Number.isFinite(hi) && lo <= hi ? [lo, hi] : null
}

const AUX_MAX_BYTES = 2 ** 20 // statistics and nodata take a few hundred bytes; histograms and tables may add some

/**
 * What GDAL keeps beside a file in `<file>.aux.xml` (its PAM): { nodata (band 1's, or undefined), statistics (band
 * number → [min, max]) }, or null. A local one is read only when it is a small file of its own, not a link: it stays
 * in the served folder, and cannot make the worker read something large or elsewhere. A remote file's is read once, by
 * the worker that opens it first (`src.aux` then hands it to the others): none there (404) is null; one that cannot be
 * read throws, for the caller to say. At most `bands` bands are read, as GDAL writes one element per band.
 */
async function auxOf (src, bands, remote = {}) {
  if (src.aux !== undefined) return src.aux
  let xml
  if (src.url) {
    const bytes = await readSmallRemote(besideUrl(src.url, '.aux.xml'), { s3: remote.s3, maxBytes: AUX_MAX_BYTES })
    if (bytes === null) return null
    xml = bytes.toString('utf8')
  } else {
    const path = `${src.path}.aux.xml`
    try {
      const info = await lstat(path)
      if (!info.isFile() || info.size > AUX_MAX_BYTES) return null
      xml = await readFile(path, 'utf8')
    } catch {
      return null
    }
  }
  const aux = { nodata: undefined, statistics: new Map() }
  for (const { attributes, body } of elements(xml, 'PAMRasterBand', bands)) {
    const band = Number(/\bband="(\d+)"/.exec(attributes)?.[1] ?? 1)
    const nodata = elements(body, 'NoDataValue', 1).next().value?.body.trim()
    if (band === 1 && nodata !== undefined) { // one nodata for the file, as GDAL_NODATA has it
      if (/^[+-]?nan$/i.test(nodata)) aux.nodata = NaN
      else if (nodata !== '' && Number.isFinite(Number(nodata))) aux.nodata = Number(nodata)
    }
    // The default metadata domain only (no domain="…"): where GDAL keeps the statistics.
    for (const { attributes: domain, body: items } of elements(body, 'Metadata')) {
      if (/\bdomain="[^"]/.test(domain)) continue
      const values = new Map()
      for (const mdi of elements(items, 'MDI')) {
        const key = /^\s+key="([^"]*)"\s*$/.exec(mdi.attributes)?.[1]
        if (key !== undefined && !values.has(key)) values.set(key, mdi.body.trim())
      }
      const range = statisticsRange(values.get('STATISTICS_MINIMUM'), values.get('STATISTICS_MAXIMUM'))
      if (range !== null) aux.statistics.set(band, range)
    }
  }
  return aux
}

/**
 * The elements `<name …>body</name>` of `xml`, in order, as { attributes, body } (strings), at most `limit`; none past
 * one that is not closed. Found with indexOf, so each stretch of the text is scanned about once: a regular
 * expression's lazy match looked for the closing tag of every opening one to the end of the text, and a sidecar of
 * 1 MiB repeating an unclosed <PAMRasterBand> took 9 s per open, in each worker.
 */
function * elements (xml, name, limit = Infinity) {
  const opening = `<${name}`
  const closing = `</${name}>`
  let at = 0
  for (let found = 0; found < limit;) {
    const start = xml.indexOf(opening, at)
    if (start === -1) return
    at = start + opening.length
    if (!/[\s/>]/.test(xml[at] ?? '')) continue // a longer name (<MDIx>)
    const tagEnd = xml.indexOf('>', at)
    if (tagEnd === -1) return
    const end = xml.indexOf(closing, tagEnd + 1)
    if (end === -1) return
    yield { attributes: xml.slice(at, tagEnd), body: xml.slice(tagEnd + 1, end) }
    at = end + closing.length
    found++
  }
}

/** What /meta tells about the file. */
export function describeDataset (ds) {
  return {
    width: ds.width,
    height: ds.height,
    bands: ds.bands,
    dtype: ds.dtype,
    ...(ds.nbits !== ds.bits && { nbits: ds.nbits }), // samples packed smaller than dtype (GDAL's NBITS)
    crs: ds.crs.mercator ? 'EPSG:3857' : ds.crs.proj.trim(),
    nodata: ds.nodata === null ? null : Number.isNaN(ds.nodata) ? 'nan' : ds.nodata,
    alpha: ds.alphaBand >= 0,
    mask: ds.levels[0].mask !== null,
    externalOverviews: ds.ovrTiff !== null, // its overviews are read from the .ovr beside it
    palette: ds.palette !== null,
    compression: ds.compression,
    blockSize: [ds.levels[0].tileWidth, ds.levels[0].tileHeight],
    overviews: ds.levels.slice(1).map((l) => [l.width, l.height]),
    resolution: [ds.transform[1], ds.transform[3]],
    // Keyed b1, b2… as titiler's statistics: band numbers as `bidx` counts them.
    statistics: ds.stats === null ? null : Object.fromEntries(ds.stats.map((range, b) => [`b${b + 1}`, range])),
  }
}

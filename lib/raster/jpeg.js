// JPEG-in-TIFF blocks (compression 7) by libjpeg-turbo through sharp, as GDAL (and so titiler) decodes them:
// geotiff.js's decoder upsamples subsampled chroma by nearest sample where libjpeg interpolates ("fancy upsampling"),
// so YCbCr COGs came out up to 100 levels off GDAL at colour edges. Blocks come back as RGB for YCbCr files (GDAL's
// JPEGCOLORMODE=RGB), by either decoder. Runs in the raster workers.
import { addDecoder, BaseDecoder } from 'geotiff'
import sharp from 'sharp'

// geotiff.js's own decoder, for what libjpeg through sharp does not take (logged once per worker).
const { default: GeotiffJpegDecoder } = await import(new URL('./compression/jpeg.js', import.meta.resolve('geotiff')))

const SOI = 0xffd8
const EOI = 0xffd9
const SOS = 0xda
const APP14 = 0xee

let fellBack = false

export class JpegDecoder extends BaseDecoder {
  constructor (parameters) {
    super(parameters)
    const tables = parameters.JPEGTables
    // The file's shared tables (DQT, DHT) without their EOI, to go before each block's own segments (without its SOI).
    this.tables = tables?.length >= 4 && readUint16(tables, 0) === SOI && readUint16(tables, tables.length - 2) === EOI
      ? Buffer.from(tables.buffer, tables.byteOffset, tables.length - 2)
      : null
    this.planar = parameters.planarConfiguration === 2
    this.channels = this.planar ? 1 : parameters.samplesPerPixel ?? 1
    this.ycbcr = parameters.photometric === 6
    this.fallback = null
  }

  async decodeBlock (buffer) {
    const block = new Uint8Array(buffer)
    const { tileWidth, tileHeight } = this.parameters
    const tried = this.libjpegTakes(block)
    if (tried) {
      let decoded = null
      try {
        const jpeg = this.tables !== null ? Buffer.concat([this.tables, block.subarray(2)]) : block
        let image = sharp(jpeg)
        if (this.channels === 1) image = image.toColourspace('b-w') // (libvips would widen grey to sRGB)
        const { data, info } = await image.raw().toBuffer({ resolveWithObject: true })
        if (info.width === tileWidth && info.height === tileHeight && info.channels === this.channels) decoded = data
      } catch {} // damaged data, or a JPEG libjpeg refuses: geotiff.js's decoder says which
      if (decoded !== null) return ownBuffer(decoded)
    }
    this.fallback ??= new GeotiffJpegDecoder(this.parameters)
    const raw = new Uint8Array(this.fallback.decodeBlock(buffer)) // throws on damaged data: the block's error
    if (tried && !fellBack && raw.length >= tileWidth * tileHeight * this.channels) {
      fellBack = true
      process.emitWarning('a JPEG block libjpeg (sharp) did not decode is decoded by geotiff.js instead (chroma by nearest sample, not as GDAL)', { code: 'TILE_CANNON_JPEG' })
    }
    if (this.ycbcr && !this.planar) ycbcrToRgb(raw, tileWidth * tileHeight, this.channels)
    return raw.buffer
  }

  /** Whether libjpeg will read `block` as the file means it (one it would take for another colour space goes to geotiff.js). */
  libjpegTakes (block) {
    if (block.length < 4 || readUint16(block, 0) !== SOI) return false
    if (this.channels !== 1 && this.channels !== 3) return false // four samples are CMYK to libjpeg
    if (this.ycbcr || this.channels === 1) return !(this.ycbcr && this.planar) // YCbCr planes: libjpeg sees grey ones
    return storedAsRgb(block)
  }
}

/**
 * Whether libjpeg reads a 3-sample block as RGB, as an RGB-stored file (PhotometricInterpretation 2) means it: by an
 * Adobe marker saying so, or without one by the components' ids 'R', 'G', 'B' (libjpeg's rules; libtiff writes them).
 * Otherwise it would take the samples for YCbCr, and the block goes to geotiff.js, which converts nothing.
 */
function storedAsRgb (block) {
  let ids = false
  for (let at = 2; at + 4 <= block.length && block[at] === 0xff;) {
    const marker = block[at + 1]
    if (marker === SOS) break
    if (marker === APP14 && String.fromCharCode(...block.subarray(at + 4, at + 9)) === 'Adobe') return block[at + 15] === 0
    if (marker >= 0xc0 && marker <= 0xc2) ids = block[at + 10] === 0x52 && block[at + 13] === 0x47 && block[at + 16] === 0x42
    at += 2 + readUint16(block, at + 2)
  }
  return ids
}

const readUint16 = (bytes, at) => (bytes[at] << 8) | bytes[at + 1]

const ownBuffer = (view) => (view.byteOffset === 0 && view.byteLength === view.buffer.byteLength
  ? view.buffer
  : view.buffer.slice(view.byteOffset, view.byteOffset + view.byteLength))

/** geotiff.js's raw YCbCr as RGB (its decoder does no colour conversion), in place, with libjpeg's coefficients. */
function ycbcrToRgb (data, n, stride) {
  const clamp = (v) => (v < 0 ? 0 : v > 255 ? 255 : Math.round(v))
  for (let p = 0, i = 0; p < n; p++, i += stride) {
    const l = data[i]; const b = data[i + 1] - 128; const r = data[i + 2] - 128
    data[i] = clamp(l + 1.402 * r)
    data[i + 1] = clamp(l - 0.344136 * b - 0.714136 * r)
    data[i + 2] = clamp(l + 1.772 * b)
  }
}

addDecoder(7, async () => JpegDecoder, async (fd) => ({
  tileWidth: await fd.loadValue('TileWidth'),
  tileHeight: await fd.loadValue('TileLength'),
  planarConfiguration: await fd.loadValue('PlanarConfiguration'),
  bitsPerSample: await fd.loadValue('BitsPerSample'),
  predictor: 1,
  samplesPerPixel: await fd.loadValue('SamplesPerPixel'),
  photometric: await fd.loadValue('PhotometricInterpretation'),
  JPEGTables: await fd.loadValue('JPEGTables'),
}), false)

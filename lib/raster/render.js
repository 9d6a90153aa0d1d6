// Resampled values → 8-bit pixels → PNG/WebP/JPEG: band choice, rescale, colormaps, palettes and terrain-RGB.
import sharp from 'sharp'
import { COLORMAPS } from './colormaps.js'
import { encodePng } from './png.js'

const ramps = new Map() // name → Uint8Array(768), decoded once per worker

export function colormap (name) {
  let ramp = ramps.get(name)
  if (ramp === undefined) {
    const reversed = name.endsWith('_r')
    const hex = COLORMAPS[reversed ? name.slice(0, -2) : name]
    if (hex === undefined) return undefined
    ramp = Uint8Array.from(Buffer.from(hex, 'hex'))
    if (reversed) {
      const copy = new Uint8Array(768)
      for (let i = 0; i < 256; i++) copy.set(ramp.subarray((255 - i) * 3, (255 - i) * 3 + 3), i * 3)
      ramp = copy
    }
    ramps.set(name, ramp)
  }
  return ramp
}


/**
 * A value as a byte: clamped to 0..255 and rounded half up, exactly as Math.round rounds. Math.round branches on the
 * fraction, which real data makes random (mispredicted half the time): adding ½ and truncating is branch-free and the
 * same for every value from ½ up (below ½, where a sum could round up, it is 0 anyway). Measured 2-3× faster over a
 * 256 px tile of real heights.
 */
export const clampByte = (v) => (v < 0.5 ? 0 : v >= 255 ? 255 : (v + 0.5) | 0) // NaN: 0, as Math.round's NaN stores

/** Math.round of v, for the terrain encodings' non-negative results: below ½, 0 (see clampByte). */
export const roundUp = (v) => (v < 0.5 ? 0 : Math.floor(v + 0.5))

/**
 * 8-bit colour channels of a tile: 1 for a single band shown as it is, rescaled or through a colormap, else 3 (RGB).
 * A colormapped band's byte is its index in the ramp, which the encoder applies (rampOf): a PNG keeps the index (an
 * indexed PNG: a byte a pixel to filter and deflate instead of three or four, and a file about half the size), WebP
 * and JPEG get the ramp's colours.
 */
export const colourChannels = (nb, o) => (nb === 1 && !o.palette && !o.encoding ? 1 : 3)

/** The ramp a tile's single channel indexes (its colormap's), or null where the channel is grey or there are three. */
export const rampOf = (channels, o) => (channels === 1 && o.colormap ? colormap(o.colormap) : null)

/**
 * A band's linear stretch to 0..255 as [offset, factor] (byte = (value - offset) × factor, clamped and rounded): the
 * rescale's min and 255 / (max - min), or [0, 1] without one. A range of no width (the statistics of a constant band)
 * shows its value mid-grey (128), values below it black and above it white, rather than everything black.
 * Shared with the direct path (direct.js), so both give the same bytes.
 */
export const stretchOf = (rescale, b) => {
  if (!rescale) return [0, 1]
  const [min, max] = rescale[b]
  return max > min ? [min, 255 / (max - min)] : [min - 0.5, 255]
}

/**
 * 8-bit pixels from the resampled `values` (count × nb, interleaved) and `alpha` (0..1): `colour` (count × channels,
 * see colourChannels) and `opacity` (count, 0..255). Transparent pixels are 0. Returns the number of channels.
 * `o`: { rescale: [[min, max], …] per band or null, colormap, palette, encoding ('terrarium' | 'mapbox' | null) }.
 * One loop per kind of output (grey or a colormap's index, palette, terrain, RGB), each over typed arrays with its
 * constants hoisted: the former single loop that chose per pixel cost 1.1 ms a 256 px grey tile, these 0.1-0.2 ms.
 */
export function toPixels (values, alpha, count, nb, o, colour, opacity) {
  const cc = colourChannels(nb, o)
  const { encoding, palette, rescale } = o
  if (encoding === 'terrarium') terrariumPixels(values, alpha, count, nb, colour, opacity)
  else if (encoding === 'mapbox') mapboxPixels(values, alpha, count, nb, colour, opacity)
  else if (palette && nb === 1) palettePixels(values, alpha, count, palette, colour, opacity)
  else if (nb === 1) greyPixels(values, alpha, count, ...stretchOf(rescale, 0), colour, opacity) // a colormap's index too
  else if (nb === 3) rgbPixels(values, alpha, count, [0, 1, 2].map((b) => stretchOf(rescale, b)), colour, opacity)
  else otherPixels(values, alpha, count, nb, rescale, colour, opacity)
  return cc
}

function greyPixels (values, alpha, count, m, f, colour, opacity) {
  for (let k = 0; k < count; k++) {
    const a = alpha[k]
    if (a === 0) { colour[k] = 0; opacity[k] = 0; continue }
    colour[k] = clampByte((values[k] - m) * f)
    opacity[k] = clampByte(a * 255)
  }
}

function rgbPixels (values, alpha, count, [[m0, f0], [m1, f1], [m2, f2]], colour, opacity) {
  for (let k = 0, v = 0; k < count; k++, v += 3) {
    const a = alpha[k]
    if (a === 0) { colour[v] = 0; colour[v + 1] = 0; colour[v + 2] = 0; opacity[k] = 0; continue }
    colour[v] = clampByte((values[v] - m0) * f0)
    colour[v + 1] = clampByte((values[v + 1] - m1) * f1)
    colour[v + 2] = clampByte((values[v + 2] - m2) * f2)
    opacity[k] = clampByte(a * 255)
  }
}

// Terrain-RGB: heights in metres, lossless (terrarium to 1/256 m, mapbox to 0.1 m); a visible pixel is opaque.
function terrariumPixels (values, alpha, count, nb, colour, opacity) {
  for (let k = 0, q = 0; k < count; k++, q += 3) {
    if (alpha[k] === 0) { colour[q] = 0; colour[q + 1] = 0; colour[q + 2] = 0; opacity[k] = 0; continue }
    const v = Math.max(0, Math.min(65535.996, values[k * nb] + 32768))
    const whole = Math.floor(v)
    colour[q] = whole >> 8; colour[q + 1] = whole & 255; colour[q + 2] = Math.floor((v - whole) * 256)
    opacity[k] = 255
  }
}

function mapboxPixels (values, alpha, count, nb, colour, opacity) {
  for (let k = 0, q = 0; k < count; k++, q += 3) {
    if (alpha[k] === 0) { colour[q] = 0; colour[q + 1] = 0; colour[q + 2] = 0; opacity[k] = 0; continue }
    const v = Math.min(16777215, roundUp((values[k * nb] + 10000) * 10))
    colour[q] = v >> 16; colour[q + 1] = (v >> 8) & 255; colour[q + 2] = v & 255
    opacity[k] = 255
  }
}

/** A paletted band: each value's colour table entry (16-bit components, as TIFF stores them). */
function palettePixels (values, alpha, count, palette, colour, opacity) {
  const entries = palette.length / 3
  for (let k = 0, q = 0; k < count; k++, q += 3) {
    const a = alpha[k]
    if (a === 0) { colour[q] = 0; colour[q + 1] = 0; colour[q + 2] = 0; opacity[k] = 0; continue }
    const i = Math.max(0, Math.min(entries - 1, Math.round(values[k])))
    colour[q] = palette[i] >> 8; colour[q + 1] = palette[entries + i] >> 8; colour[q + 2] = palette[2 * entries + i] >> 8
    opacity[k] = clampByte(a * 255)
  }
}

/** Any other number of bands (band math's outputs): the first three as RGB. */
function otherPixels (values, alpha, count, nb, rescale, colour, opacity) {
  const scale = [0, 1, 2].map((b) => stretchOf(rescale && rescale.length > b ? rescale : null, b))
  for (let k = 0, q = 0; k < count; k++, q += 3) {
    const a = alpha[k]
    colour[q] = 0; colour[q + 1] = 0; colour[q + 2] = 0; opacity[k] = 0
    if (a === 0) continue
    for (let b = 0; b < 3; b++) colour[q + b] = clampByte((values[k * nb + b] - scale[b][0]) * scale[b][1])
    opacity[k] = clampByte(a * 255)
  }
}

// Interleaving scratch (colour + opacity), grown as needed; encoding takes it synchronously.
let interleaved = new Int32Array(0) // Int32, not Uint32: stores of the (signed) words need no conversion, measured 1.4× faster
const LITTLE_ENDIAN = new Uint8Array(Uint16Array.of(1).buffer)[0] === 1

/**
 * Encodes a tile from `colour` (n² × channels) and `opacity` (n², 0..255). Opaque tiles drop the alpha channel
 * (smaller files), as JPEG always does. PNG goes through our own encoder (png.js says why), WebP and JPEG through
 * sharp. With a `ramp` (rampOf), the single channel holds indices into it: an indexed PNG where it can be one (see
 * indexedPng; its transparent pixels' indices are changed in `colour`, a scratch), the ramp's colours otherwise.
 */
export async function encode (colour, opacity, n, channels, format, lossless, ramp = null) {
  const count = n * n
  if (ramp !== null) {
    if (format === 'png') {
      const png = indexedPng(colour, opacity, n, ramp)
      if (png !== null) return png
    }
    colour = rampColours(colour, opacity, count, ramp)
    channels = 3
  }
  let pixels = colour.subarray(0, count * channels)
  let total = channels
  if (format !== 'jpg' && !allOpaque(opacity, count)) {
    total = channels + 1
    pixels = interleave(colour, opacity, count, channels)
  }
  if (format === 'png') return encodePng(pixels, n, n, total)
  // A copy: sharp reads its input on its own thread, while this worker may reuse the scratch for the next tile.
  let image = sharp(Uint8Array.from(pixels), { raw: { width: n, height: n, channels: total } })
  if (format === 'webp') image = image.webp(lossless ? { lossless: true, effort: 1 } : { quality: 85, effort: 1 })
  else image = image.jpeg({ quality: 85 })
  return image.toBuffer()
}

/**
 * An indexed PNG of a colormapped tile (`ramp`'s 256 colours, `indices` a byte a pixel), or null where one cannot say
 * it: a pixel partly transparent (a palette entry has one opacity), or transparent pixels in a tile that uses every
 * one of the ramp's colours (the transparent pixels take an index the tile does not use, its entry made transparent
 * by a tRNS chunk). Decoded, the same pixels as the RGB(A) PNG. NDVI over a UTM COG (bench/raster-analysis.js's
 * bands4.tif, viridis, cache off): server CPU per z9 tile 2.35-2.44 → 2.04-2.05 ms; in-process, z9 tiles 9.2 → 4.6 KiB
 * and z7 tiles 21.9 → 9.8 KiB on average.
 */
function indexedPng (indices, opacity, n, ramp) {
  const count = n * n
  const used = new Uint8Array(256) // the indices of visible pixels
  let transparent = false
  for (let k = 0; k < count; k++) {
    const a = opacity[k]
    if (a === 255) used[indices[k]] = 1
    else if (a === 0) transparent = true
    else return null
  }
  if (!transparent) return encodePng(indices.subarray(0, count), n, n, 1, { palette: ramp })
  const spare = used.indexOf(0)
  if (spare < 0) return null
  for (let k = 0; k < count; k++) if (opacity[k] === 0) indices[k] = spare
  const palette = Uint8Array.from(ramp)
  palette.fill(0, spare * 3, spare * 3 + 3) // transparent black, as the RGBA tile's transparent pixels are
  const alphas = new Uint8Array(spare + 1).fill(255)
  alphas[spare] = 0
  return encodePng(indices.subarray(0, count), n, n, 1, { palette, alphas })
}

// Ramp colours of indexed pixels, for the encoders that take RGB (WebP, JPEG, a PNG that cannot be indexed).
let rampScratch = new Uint8Array(0)

function rampColours (indices, opacity, count, ramp) {
  if (rampScratch.length < count * 3) rampScratch = new Uint8Array(count * 3)
  const colour = rampScratch
  for (let k = 0, q = 0; k < count; k++, q += 3) {
    if (opacity[k] === 0) { colour[q] = 0; colour[q + 1] = 0; colour[q + 2] = 0; continue } // transparent: black
    const r = indices[k] * 3
    colour[q] = ramp[r]; colour[q + 1] = ramp[r + 1]; colour[q + 2] = ramp[r + 2]
  }
  return colour
}

/** Whether every one of the `count` opacities is 255: four at a time where aligned. */
function allOpaque (opacity, count) {
  let k = 0
  if (opacity.byteOffset % 4 === 0) {
    const words = new Int32Array(opacity.buffer, opacity.byteOffset, count >> 2)
    for (; k < words.length; k++) if (words[k] !== -1) return false
    k <<= 2
  }
  for (; k < count; k++) if (opacity[k] !== 255) return false
  return true
}

/**
 * Colour and opacity as one array of pixels with alpha (grey + alpha or RGBA), in the module's scratch: a pixel a
 * 16 or 32-bit word where the machine is little-endian (a 256 px RGBA tile in 0.1 ms, a byte at a time 0.3 ms).
 */
function interleave (colour, opacity, count, channels) {
  const total = channels + 1
  const words = Math.ceil((count * total) / 4)
  if (interleaved.length < words) interleaved = new Int32Array(words)
  const quads = interleaved // a local: the loops below would reload the module's binding at every pixel
  const pixels = new Uint8Array(quads.buffer, 0, count * total)
  if (LITTLE_ENDIAN && channels === 3) {
    for (let k = 0, q = 0; k < count; k++, q += 3) quads[k] = colour[q] | (colour[q + 1] << 8) | (colour[q + 2] << 16) | (opacity[k] << 24)
  } else if (LITTLE_ENDIAN && channels === 1) {
    const pairs = new Uint16Array(quads.buffer, 0, count)
    for (let k = 0; k < count; k++) pairs[k] = colour[k] | (opacity[k] << 8)
  } else {
    for (let k = 0, q = 0, c = 0; k < count; k++) {
      for (let s = 0; s < channels; s++) pixels[q++] = colour[c++]
      pixels[q++] = opacity[k]
    }
  }
  return pixels
}

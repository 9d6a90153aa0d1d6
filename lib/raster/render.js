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


const clampByte = (v) => (v <= 0 ? 0 : v >= 255 ? 255 : Math.round(v))

/** 8-bit colour channels of a tile: 1 (grey) for a single band shown as it is or rescaled, else 3 (RGB). */
export const colourChannels = (nb, o) => (nb === 1 && !o.colormap && !o.palette && !o.encoding ? 1 : 3)

/**
 * 8-bit pixels from the resampled `values` (count × nb, interleaved) and `alpha` (0..1): `colour` (count × channels,
 * see colourChannels) and `opacity` (count, 0..255). Transparent pixels stay 0.
 * `o`: { rescale: [[min, max], …] per band or null, colormap, palette, encoding ('terrarium' | 'mapbox' | null) }.
 */
export function toPixels (values, alpha, count, nb, o, colour, opacity) {
  const ramp = o.colormap ? colormap(o.colormap) : null
  const { palette, rescale, encoding } = o
  const scale = rescale ? rescale.map(([min, max]) => [min, max > min ? 255 / (max - min) : 0]) : null
  const entries = palette ? palette.length / 3 : 0
  const cc = colourChannels(nb, o)
  colour.fill(0, 0, count * cc)
  opacity.fill(0, 0, count)
  if (nb === 3 && !encoding) { // the common RGB case, kept branch-free
    const [m0, f0] = scale ? scale[0] : [0, 1]; const [m1, f1] = scale ? scale[1] : [0, 1]; const [m2, f2] = scale ? scale[2] : [0, 1]
    for (let k = 0, v = 0; k < count; k++, v += 3) {
      const a = alpha[k]
      if (a === 0) continue
      colour[v] = clampByte((values[v] - m0) * f0)
      colour[v + 1] = clampByte((values[v + 1] - m1) * f1)
      colour[v + 2] = clampByte((values[v + 2] - m2) * f2)
      opacity[k] = clampByte(a * 255)
    }
    return cc
  }
  for (let k = 0; k < count; k++) {
    const q = k * cc
    const a = alpha[k]
    if (a === 0) continue // already 0
    const v0 = values[k * nb]
    if (encoding === 'mapbox') {
      const v = Math.max(0, Math.min(16777215, Math.round((v0 + 10000) * 10)))
      colour[q] = v >> 16; colour[q + 1] = (v >> 8) & 255; colour[q + 2] = v & 255
    } else if (encoding === 'terrarium') {
      const v = Math.max(0, Math.min(65535.996, v0 + 32768))
      const whole = Math.floor(v)
      colour[q] = whole >> 8; colour[q + 1] = whole & 255; colour[q + 2] = Math.floor((v - whole) * 256)
    } else if (palette && nb === 1) {
      const i = Math.max(0, Math.min(entries - 1, Math.round(v0)))
      colour[q] = palette[i] >> 8; colour[q + 1] = palette[entries + i] >> 8; colour[q + 2] = palette[2 * entries + i] >> 8
    } else if (nb === 1) {
      const g = scale ? clampByte((v0 - scale[0][0]) * scale[0][1]) : clampByte(v0)
      if (ramp) {
        colour[q] = ramp[g * 3]; colour[q + 1] = ramp[g * 3 + 1]; colour[q + 2] = ramp[g * 3 + 2]
      } else {
        colour[q] = g
      }
    } else {
      for (let b = 0; b < 3; b++) {
        const v = values[k * nb + b]
        colour[q + b] = scale ? clampByte((v - scale[b][0]) * scale[b][1]) : clampByte(v)
      }
    }
    opacity[k] = encoding ? 255 : clampByte(a * 255)
  }
  return cc
}

// Interleaving scratch (colour + opacity), grown as needed; encoding takes it synchronously.
let interleaved = new Uint8Array(0)

/**
 * Encodes a tile from `colour` (n² × channels) and `opacity` (n², 0..255). Opaque tiles drop the alpha channel
 * (smaller files), as JPEG always does. PNG goes through our own encoder (png.js says why), WebP and JPEG through
 * sharp.
 */
export async function encode (colour, opacity, n, channels, format, lossless) {
  const count = n * n
  let opaque = true
  for (let k = 0; k < count; k++) if (opacity[k] !== 255) { opaque = false; break }
  let pixels = colour.subarray(0, count * channels)
  let total = channels
  if (!opaque && format !== 'jpg') {
    total = channels + 1
    if (interleaved.length < count * total) interleaved = new Uint8Array(count * total)
    pixels = interleaved.subarray(0, count * total)
    for (let k = 0, q = 0, c = 0; k < count; k++) {
      for (let s = 0; s < channels; s++) pixels[q++] = colour[c++]
      pixels[q++] = opacity[k]
    }
  }
  if (format === 'png') return encodePng(pixels, n, n, total)
  // A copy: sharp reads its input on its own thread, while this worker may reuse the scratch for the next tile.
  let image = sharp(Uint8Array.from(pixels), { raw: { width: n, height: n, channels: total } })
  if (format === 'webp') image = image.webp(lossless ? { lossless: true, effort: 1 } : { quality: 85, effort: 1 })
  else image = image.jpeg({ quality: 85 })
  return image.toBuffer()
}

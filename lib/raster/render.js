// Resampled values → 8-bit pixels → PNG/WebP/JPEG: band choice, rescale, colormaps, palettes and terrain-RGB.
import sharp from 'sharp'
import { COLORMAPS } from './colormaps.js'

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

/**
 * RGBA pixels from the resampled `values` (count × nb, interleaved) and `alpha` (0..1).
 * `o`: { rescale: [[min, max], …] per band or null, colormap, palette, encoding ('terrarium' | 'mapbox' | null) }.
 */
export function toRgba (values, alpha, count, nb, o) {
  const rgba = new Uint8Array(count * 4)
  const ramp = o.colormap ? colormap(o.colormap) : null
  const { palette, rescale, encoding } = o
  const scale = rescale ? rescale.map(([min, max]) => [min, max > min ? 255 / (max - min) : 0]) : null
  const entries = palette ? palette.length / 3 : 0
  if (nb === 3 && !encoding) { // the common RGB case, kept branch-free
    const [m0, f0] = scale ? scale[0] : [0, 1]; const [m1, f1] = scale ? scale[1] : [0, 1]; const [m2, f2] = scale ? scale[2] : [0, 1]
    for (let k = 0, v = 0, q = 0; k < count; k++, v += 3, q += 4) {
      const a = alpha[k]
      if (a === 0) continue
      rgba[q] = clampByte((values[v] - m0) * f0)
      rgba[q + 1] = clampByte((values[v + 1] - m1) * f1)
      rgba[q + 2] = clampByte((values[v + 2] - m2) * f2)
      rgba[q + 3] = clampByte(a * 255)
    }
    return rgba
  }
  for (let k = 0; k < count; k++) {
    const q = k * 4
    const a = alpha[k]
    if (a === 0) continue // already 0, 0, 0, 0
    const v0 = values[k * nb]
    if (encoding === 'mapbox') {
      const v = Math.max(0, Math.min(16777215, Math.round((v0 + 10000) * 10)))
      rgba[q] = v >> 16; rgba[q + 1] = (v >> 8) & 255; rgba[q + 2] = v & 255
    } else if (encoding === 'terrarium') {
      const v = Math.max(0, Math.min(65535.996, v0 + 32768))
      const whole = Math.floor(v)
      rgba[q] = whole >> 8; rgba[q + 1] = whole & 255; rgba[q + 2] = Math.floor((v - whole) * 256)
    } else if (palette && nb === 1) {
      const i = Math.max(0, Math.min(entries - 1, Math.round(v0)))
      rgba[q] = palette[i] >> 8; rgba[q + 1] = palette[entries + i] >> 8; rgba[q + 2] = palette[2 * entries + i] >> 8
    } else if (nb === 1) {
      const g = scale ? clampByte((v0 - scale[0][0]) * scale[0][1]) : clampByte(v0)
      if (ramp) {
        rgba[q] = ramp[g * 3]; rgba[q + 1] = ramp[g * 3 + 1]; rgba[q + 2] = ramp[g * 3 + 2]
      } else {
        rgba[q] = rgba[q + 1] = rgba[q + 2] = g
      }
    } else {
      for (let b = 0; b < 3; b++) {
        const v = values[k * nb + b]
        rgba[q + b] = scale ? clampByte((v - scale[b][0]) * scale[b][1]) : clampByte(v)
      }
    }
    rgba[q + 3] = encoding ? (a > 0 ? 255 : 0) : clampByte(a * 255)
  }
  return rgba
}

/** Encodes RGBA pixels; opaque tiles drop the alpha channel (smaller files), JPEG always does. */
export async function encode (rgba, n, format, lossless) {
  let opaque = true
  for (let i = 3; i < rgba.length; i += 4) if (rgba[i] !== 255) { opaque = false; break }
  let image = sharp(rgba, { raw: { width: n, height: n, channels: 4 } })
  if (opaque || format === 'jpg') image = image.removeAlpha()
  if (format === 'webp') image = image.webp(lossless ? { lossless: true, effort: 1 } : { quality: 85, effort: 1 })
  else if (format === 'jpg') image = image.jpeg({ quality: 85 })
  else image = image.png({ compressionLevel: 6, adaptiveFiltering: false })
  return image.toBuffer()
}

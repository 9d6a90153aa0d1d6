// Tile bytes → { format, contentType, encoding }. Decided from magic numbers, never from the URL; the archive's
// declared compression and format are hints only for what bytes cannot say (brotli has no magic, MLT has none).
import { gunzipSync, inflateSync, constants as zc } from 'node:zlib'

export const CONTENT_TYPES = {
  pbf: 'application/x-protobuf',
  mlt: 'application/vnd.maplibre-vector-tile',
  png: 'image/png',
  jpg: 'image/jpeg',
  webp: 'image/webp',
  gif: 'image/gif',
  avif: 'image/avif',
  json: 'application/json',
  bin: 'application/octet-stream',
}

/** Formats whose name is also the extension of their tiles' URLs (TileJSON links, the tile directory's files). */
export const TILE_EXTENSIONS = ['pbf', 'mlt', 'png', 'jpg', 'webp', 'gif', 'avif', 'json']

// Formats a client may want compressed; images are never compressed again.
const COMPRESSIBLE = new Set(['pbf', 'mlt', 'json', 'bin'])
export const isCompressible = (format) => COMPRESSIBLE.has(format)
export const isVector = (format) => format === 'pbf' || format === 'mlt'
const IMAGES = new Set(['png', 'jpg', 'webp', 'gif', 'avif'])
export const isImage = (format) => IMAGES.has(format)
/** Tiles a map (MapLibre GL JS, the viewer) can draw: vector tiles and images. */
export const isDrawable = (format) => isVector(format) || IMAGES.has(format)

// Peeking inside a compressed tile: its first PEEK_BYTES inflated (flushed as far as they go), at most 256 KiB
// out. A dynamic-Huffman block's code tables come first and may take a hundred bytes or more, so 64 bytes gave
// nothing for a quarter to half of real gzip MVT tiles (trails, koh-samui fixtures); 256 gave something for each. The
// cost is the zlib stream's allocation, about the same for 64 bytes as for 1 KiB, and is paid once per set (memo).
const PEEK_BYTES = 1024
const PARTIAL = { finishFlush: zc.Z_SYNC_FLUSH, maxOutputLength: 256 * 1024 }

/** Format of uncompressed bytes. `hint` is the archive's declared format, used only when bytes are ambiguous. */
export function sniffFormat (buf, hint) {
  const n = buf.length
  if (n >= 8 && buf[0] === 0x89 && buf[1] === 0x50 && buf[2] === 0x4e && buf[3] === 0x47) return 'png'
  // JPEG: SOI + marker; the end (FFD9) is not required, some encoders leave it out.
  if (n >= 3 && buf[0] === 0xff && buf[1] === 0xd8 && buf[2] === 0xff) return 'jpg'
  if (n >= 12 && buf.readUInt32BE(0) === 0x52494646 && buf.readUInt32BE(8) === 0x57454250) return 'webp' // RIFF....WEBP
  if (n >= 6 && buf[0] === 0x47 && buf[1] === 0x49 && buf[2] === 0x46 && buf[3] === 0x38) return 'gif'
  if (n >= 12 && buf.readUInt32BE(4) === 0x66747970) { // ....ftyp
    const brand = buf.toString('latin1', 8, 12)
    if (brand === 'avif' || brand === 'avis') return 'avif'
  }
  // MLT has no magic number: the archive's word wins over the JSON guess below (an MLT tile whose first layer is 91
  // or 123 bytes long starts with '[' or '{').
  if (hint === 'mlt') return 'mlt'
  let i = 0
  while (i < n && (buf[i] === 0x20 || buf[i] === 0x0a || buf[i] === 0x0d || buf[i] === 0x09)) i++
  if (i < n && (buf[i] === 0x7b || buf[i] === 0x5b)) return 'json' // { or [
  // An MVT tile holds only field 3 (layers, length-delimited): its first byte is 0x1a.
  if (n > 0 && buf[0] === 0x1a) return 'pbf'
  if (hint === 'pbf') return 'pbf'
  return 'bin'
}

/** Content-Encoding of stored bytes. */
export function sniffEncoding (buf, declared, format) {
  if (buf.length >= 3 && buf[0] === 0x1f && buf[1] === 0x8b && buf[2] === 0x08) return 'gzip'
  if (buf.length >= 4 && buf.readUInt32LE(0) === 0xfd2fb528) return 'zstd'
  // zlib: CMF says deflate with a window ≤ 32K and the header checksum holds. 0x78 is the usual first byte (32K
  // window); no image or MVT starts with it. Two bytes are a weak sign, though: an uncompressed MLT tile whose first
  // layer is 120 bytes long starts `78 01` too. So not where the archive says its tiles are uncompressed, nor for MLT
  // (stored uncompressed or gzipped).
  if (buf.length >= 2 && buf[0] === 0x78 && ((buf[0] << 8) | buf[1]) % 31 === 0 && declared !== 'identity' && format !== 'mlt') return 'deflate'
  if (declared === 'br') return 'br'
  return 'identity'
}

/** Inflates the first bytes of a compressed tile, enough to sniff what is inside without decoding all of it. */
function peekInside (buf, encoding) {
  if (encoding !== 'gzip' && encoding !== 'deflate') return null
  try {
    const head = buf.subarray(0, Math.min(buf.length, PEEK_BYTES))
    return encoding === 'gzip' ? gunzipSync(head, PARTIAL) : inflateSync(head, PARTIAL)
  } catch {
    return null // damaged, or inflating past 256 KiB (no tile is that regular)
  }
}

/**
 * Describes a stored tile.
 * @param {Buffer} buf stored bytes
 * @param {{format?: string, compression?: string}} hints what the archive declares
 * @param {object} [memo] per-set memo: what the first compressed tile of each coding held. Peeking inside allocates
 *   a zlib stream (~6 µs a tile, a tenth of a cold request); tiles of one set are alike, so it is done once per set.
 *   Only a peek that inflated something is kept: a damaged first tile does not decide for the set.
 */
export function describeTile (buf, hints = {}, memo) {
  const encoding = sniffEncoding(buf, hints.compression, hints.format)
  let format
  if (encoding === 'identity') {
    format = sniffFormat(buf, hints.format)
  } else if (memo !== undefined && memo[encoding] !== undefined) {
    format = memo[encoding]
  } else {
    const inside = peekInside(buf, encoding)
    if (inside !== null && inside.length > 0) {
      format = sniffFormat(inside, hints.format)
      if (memo !== undefined) memo[encoding] = format
    } else {
      // Bytes that say nothing (damaged): the archive's word, for this tile only; the next one may say.
      format = hints.format || 'pbf'
    }
  }
  return { format, contentType: CONTENT_TYPES[format], encoding }
}

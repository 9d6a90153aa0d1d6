// Accept-Encoding negotiation for a stored tile: pass the stored bytes through, decode them, or compress them.
import { promisify } from 'node:util'
import zlib from 'node:zlib'
import { decompress as fzstdDecompress } from 'fzstd'

export const GZIP = 1
export const BR = 2
export const DEFLATE = 4
export const ZSTD = 8
const BIT = { gzip: GZIP, br: BR, deflate: DEFLATE, zstd: ZSTD, identity: 0 }

// Set in a mask when the header's q-values rank the codings it accepts (see rankedMask): each coding's rank, from 0,
// then takes RANK_BITS bits from RANK_SHIFT on, in RANKED_CODINGS' order.
const RANKED = 16
const RANK_SHIFT = 5
const RANK_BITS = 3
const RANKED_CODINGS = ['gzip', 'br', 'deflate', 'zstd', 'identity']
const rankOf = (mask, coding) => (mask >>> (RANK_SHIFT + RANK_BITS * RANKED_CODINGS.indexOf(coding))) & 7

// Parsed Accept-Encoding headers. Clients send few distinct values, so a small memo keeps parsing off the hot path.
const maskMemo = new Map()

/**
 * Accept-Encoding header → bitmask of acceptable content codings (q=0 refuses; `*` accepts all), and, for a header
 * whose q-values prefer some of them to others, their ranks (chooseEncoding picks the highest).
 */
export function acceptMask (header) {
  if (!header) return 0
  let mask = maskMemo.get(header)
  if (mask !== undefined) return mask
  // Browsers send no q-values: only a header with some pays for ranking its codings.
  mask = header.indexOf('q=') === -1 && header.indexOf('Q=') === -1 ? plainMask(header) : rankedMask(header)
  if (maskMemo.size > 500) maskMemo.clear()
  maskMemo.set(header, mask)
  return mask
}

/** The codings each part of the header names, with their q-values (1 without one). */
function parseParts (header) {
  return header.split(',').map((part) => {
    const [rawName, ...params] = part.trim().toLowerCase().split(';')
    const name = rawName.trim() === 'x-gzip' ? 'gzip' : rawName.trim()
    const q = params.map((p) => p.trim()).find((p) => p.startsWith('q='))
    return { name, q: q === undefined ? 1 : Number(q.slice(2)) }
  })
}

function plainMask (header) {
  let mask = 0
  let listed = 0 // codings named explicitly, accepted or refused: `*` speaks only for the others
  let star = false
  for (const { name, q } of parseParts(header)) {
    const accepted = q > 0
    if (name === '*') star = accepted
    else {
      listed |= BIT[name] ?? 0
      if (accepted) mask |= BIT[name] ?? 0
    }
  }
  if (star) mask |= (GZIP | BR | DEFLATE | ZSTD) & ~listed
  return mask
}

/**
 * The mask of a header with q-values (RFC 9110 12.5.3: the client's preference), ranked when the codings it accepts
 * do not all have the same: a coding's rank is its q's place among the header's distinct q-values (1 for the lowest);
 * `*` gives its q to the codings not named; identity not named, and not covered by `*`, ranks 0, below any named.
 */
function rankedMask (header) {
  const parts = parseParts(header)
  const mask = plainMask(header)
  const qOf = {}
  let starQ
  for (const { name, q } of parts) {
    const value = Number.isNaN(q) ? 0 : Math.min(q, 1)
    if (name === '*') starQ = value
    else if (RANKED_CODINGS.includes(name)) qOf[name] = Math.max(qOf[name] ?? 0, value)
  }
  for (const name of RANKED_CODINGS) if (qOf[name] === undefined && starQ !== undefined) qOf[name] = starQ
  const accepted = RANKED_CODINGS.filter((name) => qOf[name] > 0)
  const levels = [...new Set(accepted.map((name) => qOf[name]))].sort((a, b) => a - b)
  if (levels.length < 2) return mask // one preference for all: as without q-values
  let ranked = mask | RANKED
  accepted.forEach((name) => {
    ranked |= Math.min(levels.indexOf(qOf[name]) + 1, 7) << (RANK_SHIFT + RANK_BITS * RANKED_CODINGS.indexOf(name))
  })
  return ranked
}

/**
 * Which coding to answer with. Stored compressed bytes pass through untouched when the client takes them;
 * compressible content is brotli'd when the client takes it, else gzipped; images as they are. Brotli first: on
 * vector tiles, an answer kept in the cache comes out smaller (quality 5 against gzip's level 6), and one made for a
 * single request costs half the CPU (quality 1 against gzip's level 1; see FAST below). A client whose q-values rank
 * the codings gets the highest-ranked of those that can be made, in that order on a tie.
 */
export function chooseEncoding (stored, compressible, mask) {
  if (mask & RANKED) return chooseRanked(stored, compressible, mask)
  if (stored !== 'identity' && (mask & BIT[stored])) return stored
  if (!compressible) return 'identity'
  if (mask & BR) return 'br'
  if (mask & GZIP) return 'gzip'
  return 'identity'
}

function chooseRanked (stored, compressible, mask) {
  // In the server's order, each taken only when ranked above those before it, so a tie goes to the earlier one;
  // identity (decoding, or raw) only when ranked above them all.
  let best = 'identity'
  let bestRank = -1
  const consider = (coding) => {
    const rank = rankOf(mask, coding)
    if ((mask & BIT[coding]) && rank > bestRank) {
      best = coding
      bestRank = rank
    }
  }
  if (stored !== 'identity' && BIT[stored]) consider(stored)
  if (compressible) {
    consider('br')
    consider('gzip')
  }
  return rankOf(mask, 'identity') > bestRank ? 'identity' : best
}

const gunzip = promisify(zlib.gunzip)
const inflate = promisify(zlib.inflate)
const brotliDecompress = promisify(zlib.brotliDecompress)
// Node has zstd from 22.15 (23.8) on; before, fzstd (pure JavaScript, decode only, synchronous) decodes it. zstddec,
// the COG reader's, is not used here: on a frame that does not state its size (the zstd CLI writing a pipe, streaming
// encoders) it hands back megabytes of its own memory instead of the tile.
const zstdDecompressSync = zlib.zstdDecompressSync ?? ((buf) => {
  const raw = fzstdDecompress(buf)
  return Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength)
})
const zstdDecompress = zlib.zstdDecompress
  ? promisify(zlib.zstdDecompress)
  : (buf) => new Promise((resolve) => resolve(zstdDecompressSync(buf))) // a corrupt frame's throw: a rejection
const { BROTLI_PARAM_QUALITY: QUALITY, BROTLI_PARAM_SIZE_HINT: SIZE_HINT } = zlib.constants

// Each coding's one-shot compression, and its options: for an answer that is kept (the tile cache, a tile directory,
// an export) compressed well once; for one made for a single request (no cache, a set whose tiles are not kept),
// whose compression every request pays, the fastest. Brotli 5 is close to gzip 6's speed with a smaller result (11,
// its default, is far too slow per tile). On 3.3 KB PostGIS MVT tiles (one core, Node 20): gzip level 6 92 µs (55 %
// of the raw size), level 1 64 µs (56 %); brotli quality 5 127 µs (49 %), quality 1 34 µs (59 %).
const BROTLI_KEPT = { params: { [QUALITY]: 5 } }
const ZLIB_FAST = { level: 1 }
const zlibOptions = (buf, fast) => (fast ? ZLIB_FAST : undefined)
const COMPRESSORS = {
  gzip: { sync: zlib.gzipSync, async: promisify(zlib.gzip), options: zlibOptions },
  deflate: { sync: zlib.deflateSync, async: promisify(zlib.deflate), options: zlibOptions },
  br: {
    sync: zlib.brotliCompressSync,
    async: promisify(zlib.brotliCompress),
    options: (buf, fast) => (fast ? { params: { [QUALITY]: 1, [SIZE_HINT]: buf.length } } : BROTLI_KEPT),
  },
}

export class UnsupportedEncodingError extends Error {}

/** Decodes stored bytes (on libuv's thread pool, not the event loop; zstd on the event loop where Node has no zstd). */
export function decode (buf, encoding) {
  switch (encoding) {
    case 'identity': return Promise.resolve(buf)
    case 'gzip': return gunzip(buf)
    case 'deflate': return inflate(buf)
    case 'br': return brotliDecompress(buf)
    case 'zstd': return zstdDecompress(buf)
    default: return Promise.reject(new UnsupportedEncodingError(`unknown content encoding ${encoding}`))
  }
}

/** Compresses raw bytes for a client (`fast`: for an answer not kept, see COMPRESSORS), on libuv's thread pool. */
export function encode (buf, encoding, fast = false) {
  if (encoding === 'identity') return Promise.resolve(buf)
  const compressor = COMPRESSORS[encoding]
  if (compressor === undefined) return Promise.reject(new UnsupportedEncodingError(`cannot encode ${encoding}`))
  return compressor.async(buf, compressor.options(buf, fast))
}

// Tiles up to this size are transcoded inline, synchronously. Measured on 2 cores (Node 20, a 2 KB MVT tile): one-shot
// zlib.gzip through the thread pool costs 155-210 µs of CPU a tile (stream set-up, a 16 KB output buffer, thread
// hand-offs), gzipSync 30-40 µs on the event loop. 8 KiB compresses in ~120 µs; bigger tiles go to the pool.
export const INLINE_BYTES = 8192

const SYNC_DECODE = { gzip: zlib.gunzipSync, deflate: zlib.inflateSync, br: zlib.brotliDecompressSync, zstd: zstdDecompressSync }
const same = (buf) => buf

/**
 * Bytes of a stored tile in the wanted coding: a Buffer when transcoded inline (small tiles; throws what decoding
 * throws), else a promise of one. `fast`: the answer is made for this request only (see COMPRESSORS).
 */
export function transcode (stored, from, to, fast = false) {
  if (from === to) return stored
  if (stored.length <= INLINE_BYTES) {
    const decoder = from === 'identity' ? same : SYNC_DECODE[from]
    const compressor = COMPRESSORS[to]
    const encoder = to === 'identity' ? same : compressor && ((buf) => compressor.sync(buf, compressor.options(buf, fast)))
    if (decoder !== undefined && encoder !== undefined) {
      const raw = decoder(stored)
      // A decoded tile may be far larger than its compressed form: past the limit, its encoding goes to the pool.
      return raw.length <= INLINE_BYTES * 8 || to === 'identity' ? encoder(raw) : encode(raw, to, fast)
    }
  }
  return decode(stored, from).then((raw) => encode(raw, to, fast))
}

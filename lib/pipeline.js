// The tile pipeline between a route and a source: cache → source.getTile → tiletype → encoding → headers.
// Kept out of the route so every kind of source goes through the same steps.
import xxhash from 'xxhash-wasm'
import { describeTile, isCompressible } from './tiletype.js'
import { UnsupportedEncodingError, chooseEncoding, transcode } from './encoding.js'
import { Unavailable, readFailure, toldUnavailable } from './errors.js'
import { Latencies } from './metrics/stats.js'
import { VARIANTS } from './variants/transcode.js'

/** A tile the set does not have (cached too, so repeated misses cost nothing). */
export const ABSENT = Object.freeze({ absent: true, size: 64 })
const RECORD_OVERHEAD = 512 // bytes of bookkeeping per cached record, roughly
const SHORT_LIVED = Symbol('short-lived')

/**
 * Marks made bytes as drawn without part of what they show (a rendered tile whose remote source could not be read):
 * the tile cache keeps them at most `ttlMs`, and clients are told that lifetime; they are never shared with other
 * replicas nor written to a tile directory, where they would outlive what failed. Returns `bytes`.
 */
export function shortLived (bytes, ttlMs) {
  bytes[SHORT_LIVED] = ttlMs
  return bytes
}

/** The lifetime `shortLived` gave `bytes`, or undefined. */
export const shortLifeOf = (bytes) => bytes?.[SHORT_LIVED]

export class TilePipeline {
  /**
   * `log` tells of a set's read failures, each distinct one once (lib/errors.js readFailure); `cors` (lib/cors.js
   * corsPolicy) what CORS adds to every answer, so it is part of each answer's precomputed headers.
   */
  constructor ({ catalog, cache, log, cors }) {
    this.catalog = catalog
    this.cache = cache
    this.log = log
    this.cors = cors
    // Vary of an answer whose coding depends on Accept-Encoding, and of one that does not (CORS may add Origin).
    this.varies = cors.varies ? ['Origin', 'Origin, Accept-Encoding'] : ['', 'Accept-Encoding']
    this.shared = null // the second-level cache replicas share, when configured (lib/shared-cache.js sets it)
    this.reads = new Map() // source kind → Latencies of its reads (lib/metrics)
    this.lastLookup = 'miss' // what the latest record() found in the cache: 'hit', 'joined' or 'miss' (access log)
    this.tileDir = null // the tile directory tiles read are written to, when configured (lib/tile-dir sets it)
    this.variants = null // the maker of variants (MLT, GeoJSON) of vector tiles (lib/variants sets it)
  }

  /**
   * The stored tile and what it is, from the cache or the source (a record, or ABSENT; a promise only when not cached).
   * `query` (only for sets that take one, such as PostGIS functions and rendered rasters) is part of the cache key, in
   * a canonical order; so is `rendering` ({ scale, format }, for sets that render tiles to order), and `variant`
   * ('mlt' | 'geojson': the stored vector tile made into that, see variantRead). The arguments are lib/resolve.js
   * resolveTile's. A source that fails rejects with Unavailable naming the set when its backend failed, and with the
   * error itself when that is a bug (lib/errors.js readFailure).
   */
  record (entry, z, x, y, query, rendering, variant) {
    const tail = keyTail(z, x, y, query, rendering, variant)
    const key = entry.key + tail
    const hit = this.cache.get(key)
    if (hit !== undefined) {
      this.lastLookup = 'hit'
      return hit
    }
    const pending = this.cache.pending(key)
    if (pending !== undefined) {
      this.lastLookup = 'joined'
      return pending
    }
    if (variant !== undefined) {
      const making = this.variantRead(entry, key, z, x, y, query, variant)
      this.lastLookup = 'miss' // (the stored tile's lookup, made meanwhile, said otherwise)
      return this.cache.dedupe(key, making)
    }
    this.lastLookup = 'miss'
    // Made tiles of a kind the shared cache keeps (lib/shared-cache.js): from there, else made and put there.
    if (this.shared !== null && this.shared.keeps(entry)) {
      return this.cache.dedupe(key, this.sharedRead(entry, key, tail, z, x, y, query, rendering))
    }
    const started = performance.now()
    let stored
    try {
      stored = this.catalog.readTile(entry, z, x, y, query, rendering)
    } catch (err) {
      this.timeRead(entry, started)
      return Promise.reject(readFailure(entry, err, this.log))
    }
    // A source that reads synchronously (SQLite) is answered in this tick: no promise, no de-duplication needed (no
    // other request can run meanwhile). Cold MBTiles tiles cost ~9 % less CPU than through the promise chain.
    if (!(stored instanceof Promise)) {
      this.timeRead(entry, started)
      return this.store(entry, key, stored, z, x, y, query, rendering)
    }
    return this.cache.dedupe(key, stored.then(
      (bytes) => {
        this.timeRead(entry, started)
        return this.store(entry, key, bytes, z, x, y, query, rendering)
      },
      (err) => {
        this.timeRead(entry, started)
        throw readFailure(entry, err, this.log)
      }))
  }

  /** A made tile from the shared cache, or made here and shared (a failure of the shared cache only costs time). */
  async sharedRead (entry, key, tail, z, x, y, query, rendering) {
    const shared = this.shared
    const found = await shared.get(entry, tail)
    if (found !== null) return this.store(entry, key, found.length === 0 ? null : found, z, x, y, query, rendering)
    const started = performance.now()
    const madeFrom = Date.now() // the data it is made of is at least this recent (not when the read ended)
    let bytes
    try {
      bytes = await this.catalog.readTile(entry, z, x, y, query, rendering)
    } catch (err) {
      throw readFailure(entry, err, this.log)
    } finally {
      this.timeRead(entry, started)
    }
    if (shortLifeOf(bytes) === undefined) shared.set(entry, tail, bytes, madeFrom)
    return this.store(entry, key, bytes, z, x, y, query, rendering)
  }

  /**
   * A variant of a stored vector tile: the stored tile's record (from the cache, or read as any request reads it), made
   * into `variant` by lib/variants, and kept as a record of its own (ABSENT where the set has no tile), no longer than
   * the stored tile it was made from is.
   */
  async variantRead (entry, key, z, x, y, query, variant) {
    const storedKey = entry.key + keyTail(z, x, y, query)
    const stored = await this.record(entry, z, x, y, query)
    let bytes = null
    if (stored !== ABSENT) {
      const format = stored.info.format
      if (this.variants === null) throw new Unavailable(`tileset '${entry.id}': .${variant} tiles are not made now`)
      try {
        if (format !== 'pbf' && format !== 'mlt') throw new Error(`the tile is ${format}, not a vector tile`)
        bytes = await this.variants.make(variant, format, stored.stored, stored.info.encoding, z, x, y)
      } catch (err) {
        throw readFailure(entry, toldUnavailable(`tileset '${entry.id}': a tile could not be made into .${variant} (${err.message})`), this.log)
      }
    }
    let ttlMs = entry.ttlMs
    if (ttlMs > 0) {
      // What is left of the stored tile's lifetime (lru-cache's own count), so a variant never outlives it.
      const left = this.cache.lru?.getRemainingTTL(storedKey) ?? 0
      if (left > 0 && left < ttlMs) ttlMs = Math.ceil(left)
    }
    return this.store(entry, key, bytes, z, x, y, query, undefined, variant, ttlMs)
  }

  /** Source read times by kind, for /metrics (PostGIS query time, COG and render time). */
  timeRead (entry, started) {
    let latencies = this.reads.get(entry.kind)
    if (latencies === undefined) this.reads.set(entry.kind, latencies = new Latencies())
    latencies.observe((performance.now() - started) / 1000)
  }

  /**
   * The record of bytes read (ABSENT for none), kept for the set's lifetime of made tiles (`ttlMs`), and written to the
   * tile directory when there is one (z, x, y, query, rendering, variant: the tile's address, as record() got it).
   */
  store (entry, key, stored, z, x, y, query, rendering, variant, ttlMs = entry.ttlMs) {
    let record = ABSENT
    let cacheControl = entry.cacheControl
    const short = shortLifeOf(stored)
    if (short !== undefined && ttlMs !== 0) {
      ttlMs = Math.min(ttlMs ?? Infinity, short)
      cacheControl = `public, max-age=${Math.floor(ttlMs / 1000)}`
    }
    // A variant made of a stored tile is one, even of no bytes (an MLT of a tile without layers): only a stored tile of
    // none is absent.
    if (stored !== null && stored !== undefined && (stored.length > 0 || variant !== undefined)) {
      // A variant is what it was made as; stored bytes are what they look like.
      const info = variant === undefined ? describeTile(stored, entry.source.hints, entry.sniffed) : VARIANTS[variant]
      const compressible = variant !== undefined || isCompressible(info.format)
      record = {
        key,
        stored,
        info,
        // Strong validator from the stored bytes; each coding gets its own suffix, so ETags differ per encoding.
        tag: contentHash(stored),
        vary: compressible || info.encoding !== 'identity',
        compressible,
        cacheControl,
        encodings: {}, // coding → its answer (see encoded)
        size: stored.length + RECORD_OVERHEAD,
      }
    }
    // Made tiles live `ttlMs` (0: never stored; concurrent requests still share one read); stored tiles have no lifetime.
    if (!entry.retired && ttlMs !== 0) this.cache.set(key, record, ttlMs)
    if (this.tileDir !== null && short === undefined) this.tileDir.keep(entry, z, x, y, query, rendering, record, key, variant)
    return record
  }

  /**
   * The record encoded for a client whose Accept-Encoding gave `mask`: { body, head, notModified, etag } (a promise only
   * when it must be transcoded first). `entry`, the record's set, is named when its stored bytes cannot be decoded.
   * `kept`: the answer will be sent again (from the tile cache, a tile directory, an export), so it is compressed
   * well; otherwise fast (lib/encoding.js FAST). By default, whether the tile cache keeps the set's tiles.
   */
  encoded (record, mask, entry, kept = this.cache.maxBytes > 0 && entry?.ttlMs !== 0) {
    const encoding = chooseEncoding(record.info.encoding, record.compressible, mask)
    // Compressed fast, the bytes differ from those compressed well: an answer (and strong ETag) of its own.
    const name = kept || encoding === 'identity' || encoding === record.info.encoding ? encoding : encoding + '.fast'
    const known = record.encodings[name]
    if (known !== undefined) return known
    // Passing the stored bytes through needs no await: the common cold-path case stays synchronous.
    if (encoding === record.info.encoding) return this.addEncoding(record, encoding, record.stored)
    // Stored bytes that do not decode, or in a coding this Node cannot decode: the set cannot serve this tile.
    const failure = (err) => readFailure(entry, err instanceof UnsupportedEncodingError ? new Unavailable(err.message, { cause: err }) : err, this.log)
    let body
    try {
      body = transcode(record.stored, record.info.encoding, encoding, !kept) // small tiles inline (lib/encoding.js)
    } catch (err) {
      return Promise.reject(failure(err))
    }
    if (body instanceof Promise) return body.then((bytes) => this.addTranscoded(record, encoding, bytes, name), (err) => { throw failure(err) })
    return this.addTranscoded(record, encoding, body, name)
  }

  /** Adds a transcoded body; compressing a tiny raw tile can make it larger (gzip's 18 bytes of framing): then the raw bytes are the answer. */
  addTranscoded (record, encoding, body, name) {
    if (record.info.encoding === 'identity' && body.length >= record.stored.length) {
      const raw = record.encodings.identity ?? this.addEncoding(record, 'identity', record.stored)
      record.encodings[name] = raw
      return raw
    }
    return this.addEncoding(record, encoding, body, name)
  }

  /**
   * An encoded answer: its body and its complete header blocks, made once and written as they are (routes/tile-answer.js):
   * `head` for a 200, `notModified` for a 304 to a matching If-None-Match on `etag`. `name`: the coding, and how it
   * was made (`br.fast`), which the ETag tells apart.
   */
  addEncoding (record, encoding, body, name = encoding) {
    const etag = `"${record.tag}-${name}"`
    const head = { 'content-type': record.info.contentType, 'content-length': String(body.length), etag, 'cache-control': record.cacheControl }
    if (encoding !== 'identity') head['content-encoding'] = encoding
    Object.assign(head, this.cors.fixed)
    const vary = this.varies[record.vary ? 1 : 0]
    if (vary !== '') head.vary = vary
    // The 304's header block is made when a request first needs it (notModifiedHead): most answers never do.
    const encoded = { body, head, notModified: null, etag }
    record.encodings[name] = encoded
    if (body !== record.stored) {
      record.size += body.length
      if (this.cache.peek(record.key) === record) this.cache.set(record.key, record) // re-weigh: it grew
    }
    return encoded
  }
}

// Every uncached tile pays for its ETag's hash. XXH64 (xxhash-wasm) costs 0.33 µs for a 2.5 KB vector tile against
// 1.55 µs for SHA-1, even with the CPU's SHA instructions (koh-samui z12-14, 200k calls): the largest single part of
// a cold tile's CPU after the read. A validator needs no cryptographic strength, only to differ between the versions
// of one URL (martin hashes its tiles with XXH3 for the same reason); 64 bits make a collision between two of them
// about one in 10^19.
const { h64Raw, create64 } = await xxhash()
// h64Raw copies its input into the WASM memory, which grows to fit and never shrinks (a 60 MB tile kept 60 MB for the
// process's life). A larger input goes through the streaming hasher a chunk at a time, which keeps that memory at two
// pages (128 KiB); XXH64's streamed digest is the one-shot digest, so ETags are the same either way. The small-tile
// path is the one-shot call as before, behind one comparison.
const HASH_CHUNK = 64 * 1024
function contentHash (bytes) {
  if (bytes.length <= HASH_CHUNK) return h64Raw(bytes).toString(36)
  const state = create64()
  for (let at = 0; at < bytes.length; at += HASH_CHUNK) state.update(bytes.subarray(at, at + HASH_CHUNK))
  return state.digest().toString(36)
}

/**
 * The header block of a 304 standing for an encoded answer (pipeline.encoded): the validators and freshness of the 200,
 * not its Content-Type, -Encoding or -Length.
 */
export function notModifiedHead (answer) {
  const { head } = answer
  if (answer.notModified !== null) return answer.notModified
  const block = {}
  for (const name in head) {
    if (name !== 'content-type' && name !== 'content-encoding' && name !== 'content-length') block[name] = head[name]
  }
  answer.notModified = block
  return block
}

/**
 * What follows a set's prefix in a tile's cache key (and its shared-cache key): z/x/y, then what makes one answer for
 * the tile another (scale and format, a variant, the options in a canonical order).
 */
function keyTail (z, x, y, query, rendering, variant) {
  let tail = z + '/' + x + '/' + y
  if (rendering !== undefined) tail += '@' + rendering.scale + '.' + rendering.format
  if (variant !== undefined) tail += '.' + variant
  if (query !== undefined) tail += '?' + canonicalQuery(query)
  return tail
}

export const canonicalQuery = (query) => JSON.stringify(Object.keys(query).sort().map((k) => [k, query[k]]))

/** If-None-Match against a strong ETag: exact, a list, or `*`. */
export function etagMatches (header, etag) {
  if (header === etag || header === '*') return true
  if (header.indexOf(',') === -1) return header === 'W/' + etag
  return header.split(',').some((t) => {
    const tag = t.trim()
    return tag === etag || tag === 'W/' + etag || tag === '*'
  })
}

/** If-Match against a strong ETag (RFC 9110 13.1.1: strong comparison, so a weak tag never matches): exact, a list, or `*`. */
export function strongEtagMatches (header, etag) {
  if (header === etag || header === '*') return true
  if (header.indexOf(',') === -1) return header.trim() === etag
  return header.split(',').some((t) => {
    const tag = t.trim()
    return tag === etag || tag === '*'
  })
}

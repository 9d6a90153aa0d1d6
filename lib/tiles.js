// The tile pipeline between a route and a source: cache → source.getTile → tiletype → encoding → headers.
// Kept out of the route so every kind of source goes through the same steps.
import { createHash } from 'node:crypto'
import { describeTile, isCompressible } from './tiletype.js'
import { chooseEncoding, transcode } from './encoding.js'

/** A tile the set does not have (cached too, so repeated misses cost nothing). */
export const ABSENT = Object.freeze({ absent: true, size: 64 })
const RECORD_OVERHEAD = 512 // bytes of bookkeeping per cached record, roughly

export class TileService {
  constructor ({ catalog, cache }) {
    this.catalog = catalog
    this.cache = cache
  }

  /**
   * The stored tile and what it is, from the cache or the source. `query` (only for sets that take one, such as
   * PostGIS functions and rendered rasters) is part of the cache key, in a canonical order; so is `variant`
   * ({ scale, format }, for sets that render tiles to order).
   */
  record (entry, z, x, y, query, variant) {
    let key = entry.key + z + '/' + x + '/' + y
    if (variant !== undefined) key += '@' + variant.scale + '.' + variant.format
    if (query !== undefined) key += '?' + canonicalQuery(query)
    const hit = this.cache.get(key)
    if (hit !== undefined) return hit
    return this.cache.dedupe(key, () => this.load(entry, z, x, y, key, query, variant))
  }

  async load (entry, z, x, y, key, query, variant) {
    const stored = await this.catalog.readTile(entry, z, x, y, query, variant)
    let record = ABSENT
    if (stored !== null && stored.length > 0) {
      const info = describeTile(stored, entry.source.hints, entry.sniffed)
      const compressible = isCompressible(info.format)
      record = {
        key,
        stored,
        info,
        // Strong validator from the stored bytes; each coding gets its own suffix, so ETags differ per encoding.
        tag: createHash('sha1').update(stored).digest('base64url').slice(0, 20),
        vary: compressible || info.encoding !== 'identity',
        compressible,
        cacheControl: entry.cacheControl,
        variants: {},
        size: stored.length + RECORD_OVERHEAD,
      }
    }
    // Made tiles live `ttlMs` (0: never stored; concurrent requests still share one read); stored tiles have no lifetime.
    if (!entry.retired && entry.ttlMs !== 0) this.cache.set(key, record, entry.ttlMs)
    return record
  }

  /** The bytes and headers to answer with, for a client whose Accept-Encoding gave `mask`. */
  variant (record, mask) {
    const encoding = chooseEncoding(record.info.encoding, record.compressible, mask)
    const known = record.variants[encoding]
    if (known !== undefined) return known
    // Passing the stored bytes through needs no await: the common cold-path case stays synchronous.
    if (encoding === record.info.encoding) return this.addVariant(record, encoding, record.stored)
    return transcode(record.stored, record.info.encoding, encoding).then((body) => {
      // Compressing a tiny raw tile can make it larger (gzip's 18 bytes of framing): then the raw bytes are the answer.
      if (record.info.encoding === 'identity' && body.length >= record.stored.length) {
        const raw = record.variants.identity ?? this.addVariant(record, 'identity', record.stored)
        record.variants[encoding] = raw
        return raw
      }
      return this.addVariant(record, encoding, body)
    })
  }

  addVariant (record, encoding, body) {
    const headers = {
      'content-type': record.info.contentType,
      etag: `"${record.tag}-${encoding}"`,
      'cache-control': record.cacheControl,
    }
    if (encoding !== 'identity') headers['content-encoding'] = encoding
    // Vary is not in `headers`: the route adds Accept-Encoding to whatever Vary is already set (CORS sets Origin).
    const variant = { body, headers, etag: headers.etag, vary: record.vary }
    record.variants[encoding] = variant
    if (body !== record.stored) {
      record.size += body.length
      if (this.cache.peek(record.key) === record) this.cache.set(record.key, record) // re-weigh: it grew
    }
    return variant
  }
}

const canonicalQuery = (query) => JSON.stringify(Object.keys(query).sort().map((k) => [k, query[k]]))

/** If-None-Match against a strong ETag: exact, a list, or `*`. */
export function etagMatches (header, etag) {
  if (header === etag || header === '*') return true
  if (header.indexOf(',') === -1) return header === 'W/' + etag
  return header.split(',').some((t) => {
    const tag = t.trim()
    return tag === etag || tag === 'W/' + etag || tag === '*'
  })
}

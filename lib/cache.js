// A byte-bounded LRU of tiles plus in-flight de-duplication, so a burst of requests for one cold tile reads it once.
import { LRUCache } from 'lru-cache'

export class TileCache {
  /** @param {number} maxBytes 0 turns storage off (de-duplication still applies) */
  constructor (maxBytes) {
    this.maxBytes = maxBytes
    this.lru = maxBytes > 0
      ? new LRUCache({ maxSize: maxBytes, sizeCalculation: (record) => record.size })
      : null
    this.inflight = new Map()
    this.hits = 0 // lookups answered, and not (for /metrics)
    this.misses = 0
    this.joins = 0 // lookups that joined a read already under way
  }

  get (key) {
    const record = this.lru === null ? undefined : this.lru.get(key)
    if (record === undefined) this.misses++
    else this.hits++
    return record
  }

  /** The record under `key` without touching its recency. */
  peek (key) {
    return this.lru === null ? undefined : this.lru.peek(key)
  }

  /**
   * Stores (or re-stores, after the record grew) a record that has a `size` in bytes. `ttlMs` > 0: it expires after
   * that long (lru-cache checks on `get`, costing files nothing: their records carry no lifetime).
   */
  set (key, record, ttlMs) {
    if (this.lru === null) return
    // lru-cache weighs a value only when it is new to the key: drop the old weighing of a grown record first. It keeps
    // what was left of its lifetime: a gzip variant added later must not make a database tile live longer.
    if (this.lru.peek(key) === record) {
      const left = this.lru.getRemainingTTL(key)
      if (ttlMs === undefined && left !== Infinity) ttlMs = Math.max(1, left)
      this.lru.delete(key)
    }
    if (record.size <= this.maxBytes) this.lru.set(key, record, ttlMs > 0 ? { ttl: ttlMs } : undefined)
  }

  /** The promise of a read of `key` under way, if there is one. */
  pending (key) {
    if (this.inflight.size === 0) return undefined
    const shared = this.inflight.get(key)
    if (shared !== undefined) this.joins++
    return shared
  }

  /** Shares `reading`, the promise of `key`'s record, with every caller until it settles (see pending). */
  dedupe (key, reading) {
    const shared = reading.finally(() => this.inflight.delete(key))
    this.inflight.set(key, shared)
    return shared
  }

  /** Drops every record whose key starts with `prefix` (a set that was reloaded or removed). */
  purge (prefix) {
    if (this.lru === null) return
    for (const key of this.lru.keys()) if (key.startsWith(prefix)) this.lru.delete(key)
  }

  get stats () {
    return this.lru === null
      ? { maxBytes: 0, bytes: 0, entries: 0, hits: this.hits, misses: this.misses }
      : { maxBytes: this.maxBytes, bytes: this.lru.calculatedSize, entries: this.lru.size, hits: this.hits, misses: this.misses }
  }
}

// A second-level tile cache in Redis (ioredis), shared by replicas, for tiles that cost something to make (PostGIS,
// COG, rendered: config `cache.kinds`); stored tiles are cheaper read from the local file. The pipeline
// (lib/pipeline.js sharedRead) asks here after its own cache misses, and stores what it made.
//
// Redis never fails a request: a lookup slower than `timeoutMs`, an error, or Redis being down is a miss, and the
// tile is made here; while Redis is not connected it is not asked at all (ioredis reconnects in the background), nor
// for REST_MS after TRIP lookups in a row failed (connected, but hung or overloaded: each would cost `timeoutMs`).
//
// Keys: prefix + set id + the data's revision (the same on every replica: lib/catalog/registry.js dataRevision) +
// z/x/y, scale, format and options (the pipeline's key tail). Values: a 9-byte header (a version byte, when the read
// that made it began) and the stored bytes (empty: no tile there). A set whose data a replica was told changed
// (PostGIS NOTIFY, SIGHUP) ignores values whose read began before that moment, so it never brings an old tile back
// from Redis. (Replicas' clocks are taken to agree to well within a tile's lifetime, as NTP keeps them.)
import fp from 'fastify-plugin'
import Redis from 'ioredis'
import { dataRevision } from './catalog/registry.js'

const VERSION = 1
const HEADER = 9
const TRIP = 5 // lookups or stores failing in a row that rest the shared cache
const REST_MS = 5000 // how long it then is not asked

/**
 * Why Redis cannot be used, in a few words: a refusal at connect names what to check in cache.redis (it is tried again
 * all the same: the server's password or ACL may be mended), a network failure its code.
 */
function reasonOf (err) {
  const refusal = /^(WRONGPASS|NOAUTH)\b/.exec(err.message)
  if (refusal !== null) return `Redis refused us (${refusal[1]}): check the user and password in cache.redis`
  // ioredis's parser on an answer that is not RESP (an HTTP server, say): "Unknown RESP type 72 "H". Please report this."
  if (/^Unknown RESP type|^Protocol error/.test(err.message)) return 'the server there does not speak the Redis protocol: check the host and port in cache.redis'
  return err.code ?? err.message
}

async function sharedCache (app, config) {
  const options = config.cache ?? {}
  if (!options.redis) return
  const kinds = new Set(options.kinds ?? ['postgis', 'cog', 'mosaic', 'render'])
  const maxTtlMs = (options.ttlS ?? 86_400) * 1000
  const maxBytes = (options.maxEntryKB ?? 512) * 1024
  const prefix = options.prefix ?? 'tc:'
  const log = app.log
  const counts = { hits: 0, misses: 0, errors: 0, stores: 0 }
  let lastError = null
  let failing = 0 // lookups and stores failed in a row
  let restUntil = 0 // not asked before this time (Date.now()); 0: not resting
  let unusable = null // why Redis cannot be used as configured (a db it has not): never asked

  const client = new Redis(options.redis, {
    enableOfflineQueue: false, // not connected: fail at once (a miss), never queue behind a reconnect
    maxRetriesPerRequest: 0,
    commandTimeout: options.timeoutMs ?? 50,
    connectTimeout: 2000,
    retryStrategy: (times) => Math.min(200 * times, 5000), // keep trying, a little less often each time
    enableAutoPipelining: true, // concurrent lookups share round trips
    lazyConnect: true,
  })
  client.on('error', (err) => {
    // Said once: after the disconnect, ioredis fails its pending commands too ("Stream isn't writeable…").
    if (unusable !== null) return
    // A db the server has not (redis://…/99): ioredis would carry on in db 0, beside another application's keys.
    if (/DB index is out of range/.test(err.message)) {
      unusable = `${err.message}: check the database number in cache.redis`
      log.error({ reason: unusable }, 'redis: shared cache not used')
      client.disconnect()
      return
    }
    const reason = reasonOf(err)
    if (reason !== lastError) log.warn({ reason }, 'redis: shared cache unavailable; making tiles here')
    lastError = reason
  })
  client.on('ready', () => {
    if (lastError !== null) log.info('redis: shared cache back')
    lastError = null
  })
  const failed = () => {
    counts.errors++
    if (++failing < TRIP || Date.now() < restUntil) return
    if (restUntil === 0) log.warn({ failedInARow: failing, timeoutMs: options.timeoutMs ?? 50 }, `redis: shared cache not answering in time; making tiles here, asking again every ${REST_MS / 1000} s`)
    restUntil = Date.now() + REST_MS
  }
  const answered = () => {
    failing = 0
    if (restUntil === 0) return
    restUntil = 0
    log.info('redis: shared cache answering again')
  }
  const usable = () => unusable === null && client.status === 'ready' && (restUntil === 0 || Date.now() >= restUntil)
  client.connect().catch(() => {}) // the error event has told it; retries go on

  const keyOf = (entry, tail) => {
    entry.sharedPrefix ??= `${prefix}${entry.id}:${dataRevision(entry)}:`
    return entry.sharedPrefix + tail
  }

  const cache = {
    /** Does the shared cache take this set's tiles now? */
    keeps: (entry) => kinds.has(entry.kind) && entry.ttlMs !== 0 && usable(),

    /** The stored bytes (an empty Buffer: no tile there), or null: not there, too old, or Redis failed. */
    async get (entry, tail) {
      let value
      try {
        value = await client.getBuffer(keyOf(entry, tail))
      } catch {
        failed()
        return null
      }
      answered()
      if (value === null || value.length < HEADER || value[0] !== VERSION || value.readDoubleBE(1) < entry.expiredAt) {
        counts.misses++
        return null
      }
      counts.hits++
      return value.subarray(HEADER)
    },

    /**
     * Shares a tile made here (bytes null: none there) from data read at `madeFrom` or later (a read that began
     * before a change notice is older than it, whenever it ends); never awaited, never fails the request.
     */
    set (entry, tail, bytes, madeFrom) {
      const size = bytes?.length ?? 0
      if (size > maxBytes) return
      const value = Buffer.allocUnsafe(HEADER + size)
      value[0] = VERSION
      value.writeDoubleBE(madeFrom, 1)
      if (size > 0) value.set(bytes, HEADER)
      const ttlMs = entry.ttlMs === undefined ? maxTtlMs : Math.min(maxTtlMs, entry.ttlMs)
      counts.stores++
      client.set(keyOf(entry, tail), value, 'PX', Math.max(1, Math.round(ttlMs))).then(answered, failed)
    },

    get state () {
      if (unusable !== null) return { state: 'down', reason: unusable }
      if (client.status !== 'ready') return { state: 'down', reason: lastError ?? client.status }
      // (Past its rest it is asked again: up, as /metrics says, until lookups fail again.)
      return usable() ? { state: 'up' } : { state: 'down', reason: `not answering in time (${failing} lookups in a row)` }
    },

    /** For lib/metrics. */
    metrics: [
      { name: 'tilecannon_shared_cache_up', help: 'Is the shared cache (Redis) connected?', type: 'gauge', values: () => [{ labels: {}, value: usable() ? 1 : 0 }] },
      ...['hits', 'misses', 'errors', 'stores'].map((what) => ({
        name: `tilecannon_shared_cache_${what}_total`,
        help: `Shared cache (Redis) ${what === 'errors' ? 'lookups and stores that failed or timed out' : what}.`,
        type: 'counter',
        values: () => [{ labels: {}, value: counts[what] }],
      })),
    ],
  }
  app.decorate('sharedCache', cache)
  app.pipeline.shared = cache
  app.addHook('onClose', async () => {
    app.pipeline.shared = null
    client.disconnect()
  })
}

export default fp(sharedCache, { name: 'tile-cannon-shared-cache', fastify: '5.x' })

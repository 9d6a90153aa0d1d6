// The share of a database's pool that feature requests may hold. The pool is discovery's and /ready's too (tiles have
// connections of their own, lib/sources/postgis/lanes.js): a page streamed to a slow client keeps its connection, so
// without a bound such requests would leave re-discovery and readiness checks waiting, then failing. Past the share,
// a feature request is answered 503 at once. Features may hold all of it but one connection.
import { toldUnavailable } from '../errors.js'

const shares = new WeakMap() // pool → { inUse, max }
const guarded = new WeakSet() // connections with a listener for their 'error' (once each: pg-pool reuses them)
const noop = () => {}

/** `pool` as the feature routes use it: connect() and query(), counted against all its connections but one. */
export function featurePool (pool) {
  let share = shares.get(pool)
  if (share === undefined) shares.set(pool, share = { inUse: 0, max: Math.max(1, (pool.options?.max ?? 5) - 1) })
  const connect = () => {
    if (share.inUse >= share.max) return Promise.reject(toldUnavailable(`the database is busy with ${share.inUse} feature requests (their share of its connections): try again shortly`, 1))
    share.inUse++
    return pool.connect().then((client) => {
      // A connection lost while checked out emits 'error'; the query under way says it, and unheard it would crash.
      if (!guarded.has(client)) {
        client.on('error', noop)
        guarded.add(client)
      }
      const release = client.release // pg-pool gives each checkout its own release
      let released = false
      client.release = (...args) => {
        if (!released) {
          released = true
          share.inUse--
        }
        return release.apply(client, args)
      }
      return client
    }, (err) => {
      share.inUse--
      throw err
    })
  }
  return {
    connect,
    async query (config) {
      const client = await connect()
      try {
        return await client.query(config)
      } finally {
        client.release()
      }
    },
  }
}

// The share of a database's pool that feature requests may hold. The pool is discovery's and /ready's too (tiles have
// connections of their own, lib/sources/postgis/lanes.js): a page streamed to a slow client keeps its connection, so
// without a bound such requests would leave re-discovery and readiness checks waiting, then failing. Past the share,
// a feature request waits for a connection up to WAIT_MS, in order (a map loading its view asks for several pages at
// once, and OpenLayers does not retry a 503), then is answered 503. Features may hold all of it but one connection.
import { toldUnavailable } from '../errors.js'

const WAIT_MS = 2000
const MAX_WAITING = 64 // past this many waiting, a request is answered 503 at once

const shares = new WeakMap() // pool → { inUse, max, waiting: [{ resolve, timer }] }
const guarded = new WeakSet() // connections with a listener for their 'error' (once each: pg-pool reuses them)
const noop = () => {}

/** `pool` as the feature routes use it: connect() and query(), counted against all its connections but one. */
export function featurePool (pool) {
  let share = shares.get(pool)
  if (share === undefined) shares.set(pool, share = { inUse: 0, max: Math.max(1, (pool.options?.max ?? 5) - 1), waiting: [] })
  const busy = () => toldUnavailable(`the database is busy with ${share.inUse} feature requests (their share of its connections): try again shortly`, 1)
  // A place in the share: at once, or the one a request that ends hands over (free), or 503 after WAIT_MS.
  const slot = () => {
    if (share.inUse < share.max) {
      share.inUse++
      return Promise.resolve()
    }
    if (share.waiting.length >= MAX_WAITING) return Promise.reject(busy())
    return new Promise((resolve, reject) => {
      const waiter = { resolve, timer: null }
      waiter.timer = setTimeout(() => {
        share.waiting.splice(share.waiting.indexOf(waiter), 1)
        reject(busy())
      }, WAIT_MS)
      share.waiting.push(waiter)
    })
  }
  const free = () => {
    const next = share.waiting.shift()
    if (next === undefined) {
      share.inUse--
      return
    }
    clearTimeout(next.timer)
    next.resolve() // the place goes to it as it is
  }
  const connect = () => slot().then(() => pool.connect().then((client) => {
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
        free()
      }
      return release.apply(client, args)
    }
    return client
  }, (err) => {
    free()
    throw err
  }))
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

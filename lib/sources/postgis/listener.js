// LISTEN/NOTIFY for one database: how the catalog hears that tiles changed.
import pg from 'pg'
import { quoteIdent } from './sql.js'

const DEFAULT_CHANNEL = 'tile_cannon'

/**
 * LISTENs on the configured channel (config `notifyChannel`, default 'tile_cannon'; false or '' turns it off) on a
 * connection of its own: a pool connection would go back to the pool and stop listening. `start(onNotify)` calls
 * `onNotify(payload)` for each NOTIFY. A lost connection is re-opened every `retryMs` until the database answers;
 * since what was sent meanwhile is lost, `onNotify('')` (everything may have changed) follows each reconnection.
 */
export function createListener (url, options, log) {
  const channel = options.notifyChannel === true || options.notifyChannel === undefined ? DEFAULT_CHANNEL : options.notifyChannel || null
  let client = null
  let timer = null
  let closed = false
  let lost = false // a connection was lost: what happened meanwhile is unknown
  let failures = 0
  let onNotify = null

  function retry () {
    if (closed || timer !== null) return
    timer = setTimeout(connect, options.retryMs ?? 5000)
    timer.unref()
  }

  async function connect () {
    timer = null
    const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: options.connectTimeoutMs ?? 3000, keepAlive: true, application_name: 'tile-cannon listener' })
    c.on('error', (err) => { if (failures++ === 0) log?.warn({ err: err.message }, 'postgres NOTIFY listener lost its connection; reconnecting') })
    c.on('end', () => {
      if (client !== c) return
      client = null
      lost = true
      retry()
    })
    c.on('notification', (msg) => { if (msg.channel === channel) notify(msg.payload ?? '') })
    try {
      await c.connect()
      await c.query(`LISTEN ${quoteIdent(channel)}`)
    } catch (err) {
      if (failures++ === 0) log?.warn({ err: err.message }, 'postgres NOTIFY listener cannot connect; retrying')
      lost = true
      c.end().catch(() => {})
      return retry()
    }
    if (closed) return c.end().catch(() => {})
    client = c
    failures = 0
    if (lost) {
      lost = false
      log?.info('postgres NOTIFY listener connected after an outage: cached tiles of the database purged')
      notify('')
    }
  }

  // Runs from socket events and timers: a throw here would crash the process.
  function notify (payload) {
    try {
      onNotify(payload)
    } catch (err) {
      log?.error({ err: err.message }, 'handling a NOTIFY failed')
    }
  }

  return {
    start (callback) {
      if (channel === null || onNotify !== null) return
      onNotify = callback
      connect()
    },
    get connected () { return client !== null },
    async close () {
      closed = true
      clearTimeout(timer)
      const c = client
      client = null
      await c?.end().catch(() => {})
    },
  }
}

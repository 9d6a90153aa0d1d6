// One database: its connections (the tiles' own and a pool), the discovery of its sets (again on each reload), the
// warm-up of the tile connections, and its NOTIFY listener.
import pg from 'pg'
import { queryDomain, tableBounds } from './bounds.js'
import { describeTable, functionId, idAllocator, readFunctions, readTables, tableSpecs } from './introspect.js'
import { createLanes } from './lanes.js'
import { createListener } from './listener.js'
import { functionSource, tableSource, unservedCommentLayers } from './sources.js'

// Database tiles can change at any time without the server knowing: a minute bounds how stale a tile (here and, by
// its max-age, in browsers and CDNs) can be without NOTIFY, while a busy map still reads each hot tile once a minute.
const DEFAULT_TTL_S = 60

/** A database error as a reason for /health and 503 bodies: no connection string, no server file path. */
const publicReason = (message) => String(message).split('\n')[0]
  .replace(/[a-z][a-z0-9+.-]*:\/\/\S+/gi, '<url>')
  .replace(/(^|[\s"'(=])\/[^\s"')]+/g, '$1<path>')

/**
 * A provider for one database: `discover()` lists its sets (and can be called again to re-discover); `close()` ends
 * the pool. Options (config `postgres`): schemas, functions, tables, poolSize, statementTimeoutMs, extent, buffer.
 * `features` (config.features): with `enabled: false`, no collection extent is read (bounds.js readFeatureExtent).
 */
export function createProvider (url, options = {}, { log, features } = {}) {
  const statementTimeoutMs = options.statementTimeoutMs ?? 5000
  const connection = {
    connectionString: url,
    connectionTimeoutMillis: options.connectTimeoutMs ?? 3000,
    statement_timeout: statementTimeoutMs,
    // A network cut is not a slow query: give up on the client side shortly after the server would have.
    query_timeout: statementTimeoutMs + 2000,
    application_name: 'tile-cannon',
    // PostgreSQL's JIT compiles a query whose estimated cost passes jit_above_cost, and a tile or features query's
    // estimates are high (ST_AsMVT over a table): 30-130 ms of compiling for a tile that takes 15-45 ms without it
    // (zurich points and lines, z6-z14, median of 3, Debian's PostgreSQL 15 with JIT), on every request, since compiled
    // code is not kept. Map renderers turn it off for that reason (openstreetmap-carto's INSTALL, OSM's tile servers).
    // Off for these sessions only; `options` in the URL replace this (pg takes the URL's over the config's), and
    // PGOPTIONS comes after it, so either can turn it on again.
    options: `-c jit=off${process.env.PGOPTIONS ? ' ' + process.env.PGOPTIONS : ''}`,
  }
  // Tiles run on `poolSize` pipelined connections of their own (lanes.js, named 'tile-cannon tiles' in
  // pg_stat_activity); feature pages, discovery and /ready on a pool of half as many more, opened when asked and
  // closed after a minute idle.
  const poolSize = options.poolSize ?? 10
  const pool = new pg.Pool({ ...connection, max: Math.max(2, Math.ceil(poolSize / 2)), idleTimeoutMillis: 60_000 })
  let lost = 0
  const warnLost = (err) => {
    // A connection lost (the database restarted): a new one is opened on demand. Said once until one connects.
    if (lost++ === 0) log?.warn({ err: err.message }, 'postgres connection lost; reconnecting on demand')
  }
  const connected = () => { lost = 0 }
  pool.on('error', warnLost)
  pool.on('connect', connected)
  const tiles = createLanes({ ...connection, application_name: 'tile-cannon tiles' }, poolSize, { onLost: warnLost, onConnect: connected })
  // How long a cached tile of this database lives (the catalog reads it; `sets.<id>.cacheTtlS` overrides it).
  const served = { pool, tiles, cacheTtlS: options.cacheTtlS ?? DEFAULT_TTL_S }

  // One discovery at a time (start-up retry, SIGHUP and the interval may overlap).
  let discovering = Promise.resolve()
  let warmed = false
  const warnedOnce = new Set() // what was logged of a set (its mixed SRIDs, properties not served): once, not at each discovery
  function discover () {
    const run = discovering.then(discoverNow, discoverNow)
    discovering = run.catch(() => {})
    return run
  }

  /**
   * Every set in the database now: [{ id, source }], and [{ id, source: null, reason }] for what cannot be served (no
   * SRID, a geometry type MVT cannot hold, a relation that fails); throws when the database cannot be reached.
   */
  async function discoverNow () {
    const { rows, columnsOf, geomCount } = await readTables(pool, options.schemas)
    const ids = idAllocator()
    const out = []
    for (const { id: wanted, row, opts } of tableSpecs(rows, options)) {
      const id = ids.take(wanted)
      try {
        const made = row === null ? 'the configured table was not found, or has no geometry column we may read' : await openTable(id, row, opts)
        out.push(typeof made === 'string' ? { id, source: null, reason: made } : { id, source: made })
      } catch (err) {
        // One broken relation (a view that fails, a table locked by a migration) never hides the others. The catalog
        // logs the reason; the full message is for debugging.
        log?.debug({ set: id, err: err.message }, 'postgres table skipped')
        out.push({ id, source: null, reason: `the table could not be read: ${publicReason(err.message)}` })
      }
    }
    if (options.functions !== false) {
      const { functions, all } = await readFunctions(pool, options.schemas)
      for (const f of functions) {
        const id = functionId(f, all, ids)
        out.push({ id, source: functionSource(id, f, served) })
      }
    }
    if (!warmed) {
      warmed = true
      await prewarm(out.map((s) => s.source).filter((s) => s !== null && !s.takesQuery && s.metadata.table))
    }
    return out

    /** The source of a table, or the reason (a string) it cannot be served. */
    async function openTable (id, row, opts) {
      const t = await describeTable(pool, row, columnsOf.get(row.oid) ?? [], opts, options, geomCount.get(row.oid) > 1)
      if (typeof t === 'string') return t
      if (t.otherSrid !== null && !warnedOnce.has(id)) {
        warnedOnce.add(id)
        log?.warn({ set: id, srid: t.rowSrid, other: t.otherSrid }, `postgres table holds geometries of several SRIDs: only its rows in SRID ${t.rowSrid} are served`)
      }
      const unserved = `${id}\0${t.unserved.join('\0')}`
      if (t.unserved.length > 0 && !warnedOnce.has(unserved)) {
        warnedOnce.add(unserved)
        log?.warn({ set: id, properties: t.unserved }, 'postgres.tables names properties the table does not serve (no such column, or of a type left out): they are not in its tiles or features')
      }
      const described = unservedCommentLayers(t)
      const misnamed = `${id}\0layers\0${described.layers.join('\0')}\0fields\0${described.fields.join('\0')}`
      if ((described.layers.length > 0 || described.fields.length > 0) && !warnedOnce.has(misnamed)) {
        warnedOnce.add(misnamed)
        log?.warn({ set: id, layer: t.layer, otherLayers: described.layers, otherFields: described.fields }, 'postgres table comment\'s vector_layers name layers or fields its tiles do not hold: left out of its TileJSON (a comment\'s layer is the one whose id is the tiles\' layer)')
      }
      const timeoutMs = options.boundsTimeoutMs ?? 2000
      const bounds = await tableBounds(pool, t, timeoutMs, { featureExtent: features?.enabled !== false })
      return tableSource(id, t, bounds, served, await queryDomain(pool, t, bounds, timeoutMs))
    }
  }

  /**
   * Opens the tile connections and prepares every table query on each (run once on a tile far from any data, which
   * the index answers at once), so the first real requests pay neither connection nor planning.
   */
  async function prewarm (sources) {
    try {
      await tiles.prepare(sources.map((s) => ({ name: s.statement, text: s.sql, values: [30, 0, 0] })))
    } catch (err) {
      log?.warn({ err: err.message }, 'postgres connection warm-up incomplete')
    }
  }

  const listener = createListener(url, options, log)
  return {
    url,
    discover,
    // The ids of the tables the config names: known before the database answers (lib/catalog/groups.js).
    configured: () => Object.keys(options.tables ?? {}),
    pool,
    // /ready: a pool busy to its last connection proves the database answers (a probe would queue behind feature
    // pages and time out, draining the busiest replicas); a dead database takes its connections with it, and is probed.
    check: () => (pool.idleCount === 0 && pool.totalCount >= pool.options.max
      ? Promise.resolve()
      : pool.query('SELECT 1').then(() => {}, (err) => { throw new Error(`cannot query${err.code ? ` (${err.code})` : ''}`) })),
    listen: listener.start,
    get listening () { return listener.connected },
    close: () => Promise.all([listener.close(), tiles.close(), pool.end()]),
  }
}

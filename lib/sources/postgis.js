// PostGIS source: one pg pool per database, many sets: every table and view with a geometry column, and every
// function `fn(z integer, x integer, y integer[, query json]) returns bytea`. Each set's tile query is built once at
// discovery; identifiers come quoted from the catalog, request values are bound parameters, never spliced into SQL.
import { createHash } from 'node:crypto'
import pg from 'pg'
import { buildTileJson, describedBy } from './tilejson.js'

export const kind = 'postgis'
export const matchesUrl = (url) => /^postgres(ql)?:\/\//i.test(url)

const quoteIdent = (s) => `"${String(s).replaceAll('"', '""')}"`
const quoteLiteral = (s) => `'${String(s).replaceAll("'", "''")}'`

const NUMBER_TYPES = new Set(['int2', 'int4', 'int8', 'float4', 'float8', 'oid'])
const STRING_TYPES = new Set(['text', 'varchar', 'bpchar', 'char', 'name', 'uuid', 'citext', 'date', 'timestamp', 'timestamptz', 'time'])
// Types ST_AsMVT encodes as they are; others are passed as text so a column of any type never breaks a tile.
const NATIVE_TYPES = new Set([...NUMBER_TYPES, 'bool', 'text', 'varchar', 'bpchar', 'char', 'name', 'json', 'jsonb'])
const SKIPPED_TYPES = new Set(['geometry', 'geography', 'raster', 'bytea', 'tsvector'])
// Geometry types ST_AsMVTGeom rejects ("'Triangle' geometry type not supported"): such a column is never served.
const UNDRAWABLE = new Set(['TIN', 'TRIANGLE', 'POLYHEDRALSURFACE'])
// Database tiles can change at any time without the server knowing: a minute bounds how stale a tile (here and, by
// its max-age, in browsers and CDNs) can be without NOTIFY, while a busy map still reads each hot tile once a minute.
const DEFAULT_TTL_S = 60
const DEFAULT_CHANNEL = 'tile_cannon'

/** A database error as a reason for /health and 503 bodies: no connection string, no server file path. */
const publicReason = (message) => String(message).split('\n')[0]
  .replace(/[a-z][a-z0-9+.-]*:\/\/\S+/gi, '<url>')
  .replace(/(^|[\s"'(=])\/[^\s"')]+/g, '$1<path>')

const fieldType = (t) => (NUMBER_TYPES.has(t) ? 'Number' : t === 'bool' ? 'Boolean' : 'String')
// ST_AsMVT spreads a json(b) column into one property per key, so it names no field of its own.
const listedField = (c) => c.type !== 'json' && c.type !== 'jsonb'
const GEOM_ALIAS = 'tc_mvt_geom'
const WORLD_BOX = 'ST_MakeEnvelope(-20037508.342789244, -20037508.342789244, 20037508.342789244, 20037508.342789244, 3857)::box2d'
/** Statement names from the SQL itself: re-discovery reuses what each connection already prepared. */
const statementName = (sql) => 'tc_' + createHash('sha1').update(sql).digest('hex').slice(0, 24)

const TABLES_SQL = `
SELECT c.oid::int AS oid, n.nspname AS schema, c.relname AS table, c.relkind::text AS relkind,
       gc.geom, gc.srid, gc.geom_type, gc.geography, obj_description(c.oid, 'pg_class') AS comment
FROM (SELECT f_table_schema, f_table_name, f_geometry_column AS geom, srid, type AS geom_type, false AS geography FROM geometry_columns
      UNION ALL
      SELECT f_table_schema, f_table_name, f_geography_column, srid, type, true FROM geography_columns) AS gc
JOIN pg_namespace n ON n.nspname = gc.f_table_schema
JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = gc.f_table_name
WHERE has_table_privilege(c.oid, 'SELECT') AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'topology', 'tiger')
ORDER BY n.nspname, c.relname, gc.geom`

const COLUMNS_SQL = `
SELECT a.attrelid::int AS oid, a.attname AS name, t.typname AS type,
       coalesce((SELECT true FROM pg_index i WHERE i.indrelid = a.attrelid AND i.indisprimary
                 AND i.indnkeyatts = 1 AND i.indkey[0] = a.attnum), false) AS pk
FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
WHERE a.attrelid = ANY($1::oid[]) AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attrelid, a.attnum`

const FUNCTIONS_SQL = `
SELECT n.nspname AS schema, p.proname AS name, p.pronargs AS nargs,
       array_to_string(p.proargtypes::regtype[], ',') AS args, obj_description(p.oid, 'pg_proc') AS comment
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE p.prorettype = 'bytea'::regtype AND p.prokind = 'f' AND NOT p.proretset
  AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'topology', 'tiger')
  AND has_function_privilege(p.oid, 'EXECUTE')
  AND array_to_string(p.proargtypes::regtype[], ',') IN ('integer,integer,integer', 'integer,integer,integer,json', 'integer,integer,integer,jsonb')
ORDER BY n.nspname, p.proname`

/** TileJSON fields a table or function comment may carry as JSON (martin's convention). */
function commentJson (comment) {
  if (typeof comment !== 'string' || !comment.trim().startsWith('{')) return {}
  try {
    const parsed = JSON.parse(comment)
    return parsed && typeof parsed === 'object' ? parsed : {}
  } catch {
    return {}
  }
}

// Column types that may hold curves, which ST_AsMVTGeom cannot encode: those go through ST_CurveToLine first.
const MAYBE_CURVED = new Set(['GEOMETRY', 'GEOMETRYCOLLECTION', 'CIRCULARSTRING', 'COMPOUNDCURVE', 'CURVEPOLYGON', 'MULTICURVE', 'MULTISURFACE'])

/**
 * The SQL of a table set's tile. The filter envelope (the tile plus its buffer) is transformed once to the table's
 * SRID, so the GiST index answers `&&`; for other SRIDs it is first clipped to the Mercator world (a margin past
 * ±180° would wrap to the other side) and densified (a projected CRS bends the tile's edges).
 * `storedSrid` 0: the column holds SRID-0 geometries that the config declares to be in `srid`.
 */
function tableTileSql ({ schema, table, geom, geomType, geography, srid, storedSrid, columns, extent, buffer, limit, idColumn, layer }) {
  const g = `g.${quoteIdent(geom)}`
  // A geography column is drawn as its geometry (lon/lat) and filtered by its own index with a geography envelope.
  const asGeometry = geography ? `${g}::geometry` : g
  const declared = storedSrid === 0 ? `ST_SetSRID(${asGeometry}, ${srid})` : asGeometry
  const linear = MAYBE_CURVED.has(String(geomType).toUpperCase()) ? `ST_CurveToLine(${declared})` : declared
  const inTileSrid = srid === 3857 ? linear : `ST_Transform(${linear}, 3857)`
  const margin = buffer / extent
  const tile = 'ST_TileEnvelope($1::integer, $2::integer, $3::integer)'
  const area = `ST_TileEnvelope($1::integer, $2::integer, $3::integer, margin => ${margin})`
  let envelope = srid === 3857
    ? area
    : `ST_Transform(ST_Segmentize(ST_ClipByBox2D(${area}, ${WORLD_BOX}), 2504688.542848655 / (1 << $1::integer)), ${srid})`
  if (storedSrid === 0) envelope = `ST_SetSRID(${envelope}, 0)`
  if (geography) envelope = `${envelope}::geography`
  const props = columns.map((c) => (NATIVE_TYPES.has(c.type) ? `g.${quoteIdent(c.name)}` : `g.${quoteIdent(c.name)}::text AS ${quoteIdent(c.name)}`))
  return `SELECT ST_AsMVT(t.*, ${quoteLiteral(layer)}, ${extent}, ${quoteLiteral(GEOM_ALIAS)}${idColumn ? `, ${quoteLiteral(idColumn)}` : ''}) FROM (
  SELECT ST_AsMVTGeom(${inTileSrid}, ${tile}, ${extent}, ${buffer}, true) AS ${GEOM_ALIAS}${props.length ? ', ' + props.join(', ') : ''}
  FROM ${quoteIdent(schema)}.${quoteIdent(table)} AS g
  WHERE ${g} && ${envelope}${limit ? `\n  LIMIT ${limit}` : ''}
) AS t WHERE t.${GEOM_ALIAS} IS NOT NULL`
}

/** Bounds in WGS84 from the planner's estimate, or the real extent within a time limit; undefined if neither. */
async function tableBounds (pool, { schema, table, geom, srid }, timeoutMs) {
  const client = await pool.connect()
  const lost = () => {} // a connection dropped while checked out must not crash the process
  client.on('error', lost)
  try {
    await client.query('BEGIN')
    await client.query(`SET LOCAL statement_timeout = ${Math.max(1, Math.floor(timeoutMs))}`)
    const box = (expr) => `SELECT ST_XMin(b) AS w, ST_YMin(b) AS s, ST_XMax(b) AS e, ST_YMax(b) AS n
      FROM (SELECT ST_Transform(ST_SetSRID((${expr})::geometry, ${srid}), 4326) AS b) AS x`
    let row
    try {
      row = (await client.query(box(`ST_EstimatedExtent(${quoteLiteral(schema)}, ${quoteLiteral(table)}, ${quoteLiteral(geom)})`))).rows[0]
    } catch {
      row = undefined // no statistics yet
    }
    if (!row || row.w === null) {
      await client.query('ROLLBACK')
      await client.query('BEGIN')
      await client.query(`SET LOCAL statement_timeout = ${Math.max(1, Math.floor(timeoutMs))}`)
      row = (await client.query(box(`SELECT ST_Extent(${quoteIdent(geom)}::geometry) FROM ${quoteIdent(schema)}.${quoteIdent(table)}`))).rows[0]
    }
    await client.query('COMMIT')
    if (!row || row.w === null) return undefined
    const clampLat = (v) => Math.max(-85.0511287798, Math.min(85.0511287798, v))
    const b = [Math.max(-180, row.w), clampLat(row.s), Math.min(180, row.e), clampLat(row.n)]
    return b.every(Number.isFinite) && b[0] <= b[2] && b[1] <= b[3] ? b : undefined
  } catch {
    await client.query('ROLLBACK').catch(() => {})
    return undefined // a slow or failing extent never stops the set; TileJSON falls back to the world
  } finally {
    client.off('error', lost)
    client.release()
  }
}

/**
 * A provider for one database: `discover()` lists its sets (and can be called again to re-discover); `close()` ends
 * the pool. Options (config `postgres`): schemas, functions, tables, poolSize, statementTimeoutMs, extent, buffer.
 */
export function createProvider (url, options = {}, { log } = {}) {
  const statementTimeoutMs = options.statementTimeoutMs ?? 5000
  const pool = new pg.Pool({
    connectionString: url,
    max: options.poolSize ?? 10,
    connectionTimeoutMillis: options.connectTimeoutMs ?? 3000,
    idleTimeoutMillis: 60_000,
    statement_timeout: statementTimeoutMs,
    // A network cut is not a slow query: give up on the client side shortly after the server would have.
    query_timeout: statementTimeoutMs + 2000,
    application_name: 'tile-cannon',
  })
  let poolErrors = 0
  pool.on('error', (err) => {
    // An idle client lost its connection (database restarted): the pool replaces it on demand.
    if (poolErrors++ === 0) log?.warn({ err: err.message }, 'postgres connection lost; reconnecting on demand')
  })
  pool.on('connect', () => { poolErrors = 0 })
  // How long a cached tile of this database lives (the catalog reads it; `sets.<id>.cacheTtlS` overrides it).
  const cacheTtlS = options.cacheTtlS ?? DEFAULT_TTL_S

  function makeTableSource (id, t, bounds) {
    const sql = tableTileSql(t)
    const name = statementName(sql)
    const tj = commentJson(t.comment)
    // The key column becomes the feature id, which ST_AsMVT leaves out of the properties: not a field of the layer.
    const fields = Object.fromEntries(t.columns.filter((c) => listedField(c) && c.name !== t.idColumn).map((c) => [c.name, fieldType(c.type)]))
    return {
      id,
      kind,
      format: 'pbf',
      hints: { format: 'pbf' },
      composable: true,
      cacheTtlS,
      metadata: { schema: t.schema, table: t.table, geometryColumn: t.geom, srid: t.srid, geometryType: t.geomType, extent: t.extent, buffer: t.buffer, idColumn: t.idColumn, properties: t.columns.map((c) => ({ name: c.name, type: c.type })) },
      tilejson: buildTileJson({
        ...describedBy(tj, id),
        minzoom: t.minzoom ?? tj.minzoom ?? 0,
        maxzoom: t.maxzoom ?? tj.maxzoom ?? 22,
        bounds,
        vectorLayers: [{ id: t.layer, fields, minzoom: t.minzoom ?? 0, maxzoom: t.maxzoom ?? 22, ...(tj.description ? { description: tj.description } : {}) }],
        format: 'pbf',
      }),
      sql,
      statement: name,
      async getTile (z, x, y) {
        const res = await pool.query({ name, text: sql, values: [z, x, y] })
        return res.rows[0]?.st_asmvt ?? null
      },
      close () {},
    }
  }

  function makeFunctionSource (id, f) {
    const takesQuery = f.nargs === 4
    const sql = `SELECT ${quoteIdent(f.schema)}.${quoteIdent(f.name)}($1::integer, $2::integer, $3::integer${takesQuery ? `, $4::${f.args.endsWith('jsonb') ? 'jsonb' : 'json'}` : ''}) AS tile`
    const name = statementName(sql)
    const tj = commentJson(f.comment)
    const format = tj.format === 'mlt' ? 'mlt' : 'pbf'
    return {
      id,
      kind,
      format,
      hints: { format },
      composable: format === 'pbf',
      takesQuery,
      cacheTtlS,
      metadata: { schema: f.schema, function: f.name, arguments: f.args },
      tilejson: buildTileJson({
        ...describedBy(tj, id),
        minzoom: tj.minzoom ?? 0,
        maxzoom: tj.maxzoom ?? 22,
        bounds: Array.isArray(tj.bounds) && tj.bounds.length === 4 ? tj.bounds : undefined,
        center: Array.isArray(tj.center) && tj.center.length === 3 ? tj.center : undefined,
        vectorLayers: Array.isArray(tj.vector_layers) ? tj.vector_layers : undefined,
        format: 'pbf',
      }),
      sql,
      statement: name,
      async getTile (z, x, y, query) {
        const values = takesQuery ? [z, x, y, JSON.stringify(query ?? {})] : [z, x, y]
        const res = await pool.query({ name, text: sql, values })
        return res.rows[0]?.tile ?? null
      },
      close () {},
    }
  }

  // One discovery at a time (start-up retry, SIGHUP and the interval may overlap).
  let discovering = Promise.resolve()
  let warmed = false
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
    const schemas = options.schemas ?? null
    const inSchemas = (s) => schemas === null || schemas.includes(s)
    const { rows: geomRows } = await pool.query(TABLES_SQL)
    const rows = geomRows.filter((r) => inSchemas(r.schema))
    const { rows: columnRows } = rows.length ? await pool.query(COLUMNS_SQL, [[...new Set(rows.map((r) => r.oid))]]) : { rows: [] }
    const columnsOf = new Map()
    for (const c of columnRows) {
      if (!columnsOf.has(c.oid)) columnsOf.set(c.oid, [])
      columnsOf.get(c.oid).push(c)
    }
    const geomCount = new Map()
    const nameCount = new Map()
    for (const r of rows) {
      geomCount.set(r.oid, (geomCount.get(r.oid) ?? 0) + 1)
      nameCount.set(r.table, (nameCount.get(r.table) ?? 0) + (geomCount.get(r.oid) === 1 ? 1 : 0))
    }
    const configured = options.tables ?? {}
    const published = options.autoPublish === false ? [] : rows
    const specs = []
    for (const r of published) {
      const base = nameCount.get(r.table) > 1 ? `${r.schema}.${r.table}` : r.table
      const id = geomCount.get(r.oid) > 1 ? `${base}.${r.geom}` : base
      specs.push({ id, row: r, opts: {} })
    }
    for (const [id, t] of Object.entries(configured)) {
      const row = rows.find((r) => r.table === t.table && (t.schema === undefined || r.schema === t.schema) && (t.geometryColumn === undefined || r.geom === t.geometryColumn))
      const existing = specs.findIndex((s) => s.row === row)
      if (!row) {
        specs.push({ id, row: null, opts: t })
        continue
      }
      if (existing !== -1) specs.splice(existing, 1)
      specs.push({ id, row, opts: t })
    }

    const out = []
    const taken = new Set()
    const unique = (id) => {
      let candidate = id
      for (let n = 2; taken.has(candidate); n++) candidate = `${id}-${n}`
      taken.add(candidate)
      return candidate
    }
    // Configured ids first: they are what the user asked for by name.
    specs.sort((a, b) => Number(Object.keys(b.opts).length > 0) - Number(Object.keys(a.opts).length > 0))
    for (const { id: wanted, row, opts } of specs) {
      const id = unique(wanted)
      try {
        const made = row === null ? 'the configured table was not found, or has no geometry column we may read' : await tableSource(id, row, opts)
        out.push(typeof made === 'string' ? { id, source: null, reason: made } : { id, source: made })
      } catch (err) {
        // One broken relation (a view that fails, a table locked by a migration) never hides the others. The catalog
        // logs the reason; the full message is for debugging.
        log?.debug({ set: id, err: err.message }, 'postgres table skipped')
        out.push({ id, source: null, reason: `the table could not be read: ${publicReason(err.message)}` })
      }
    }
    if (options.functions !== false) {
      const { rows: fns } = await pool.query(FUNCTIONS_SQL)
      for (const f of fns.filter((f) => inSchemas(f.schema))) {
        const id = unique(taken.has(f.name) || fns.filter((g) => g.name === f.name).length > 1 ? `${f.schema}.${f.name}` : f.name)
        out.push({ id, source: makeFunctionSource(id, f) })
      }
    }
    if (!warmed) {
      warmed = true
      await prewarm(out.map((s) => s.source).filter((s) => s !== null && !s.takesQuery && s.metadata.table))
    }
    return out

    /** The source of a table, or the reason (a string) it cannot be served. */
    async function tableSource (id, row, opts) {
      const type = String(row.geom_type).toUpperCase().replace(/Z?M?$/, '')
      if (UNDRAWABLE.has(type)) return `${row.geom_type} geometries cannot be drawn in vector tiles`
      // A column without a typmod (SRID 0 in geometry_columns): what its rows hold, or what the config says.
      let storedSrid = row.geography ? row.srid || 4326 : row.srid
      if (!storedSrid) {
        const q = `SELECT ST_SRID(${quoteIdent(row.geom)}) AS srid FROM ${quoteIdent(row.schema)}.${quoteIdent(row.table)} WHERE ${quoteIdent(row.geom)} IS NOT NULL LIMIT 1`
        storedSrid = (await pool.query(q)).rows[0]?.srid ?? 0
      }
      const srid = opts.srid || storedSrid || options.defaultSrid || 0
      if (!srid) {
        return 'the geometry column has no SRID: set `srid` for this table in postgres.tables, or postgres.defaultSrid'
      }
      const all = (columnsOf.get(row.oid) ?? []).filter((c) => !SKIPPED_TYPES.has(c.type) && !c.type.startsWith('_') && c.name !== GEOM_ALIAS)
      const wanted = Array.isArray(opts.properties) ? all.filter((c) => opts.properties.includes(c.name)) : all
      const pk = (columnsOf.get(row.oid) ?? []).find((c) => c.pk && ['int2', 'int4', 'int8'].includes(c.type))
      const t = {
        schema: row.schema,
        table: row.table,
        geom: row.geom,
        geomType: row.geom_type,
        geography: row.geography,
        srid,
        storedSrid: storedSrid === srid ? srid : storedSrid,
        comment: row.comment,
        columns: wanted,
        idColumn: pk && wanted.includes(pk) ? pk.name : null,
        extent: opts.extent ?? options.extent ?? 4096,
        buffer: opts.buffer ?? options.buffer ?? 64,
        limit: opts.limit ?? options.featureLimit ?? null,
        minzoom: opts.minzoom,
        maxzoom: opts.maxzoom,
        layer: opts.layer ?? (geomCount.get(row.oid) > 1 ? `${row.table}.${row.geom}` : row.table),
      }
      const bounds = await tableBounds(pool, t, options.boundsTimeoutMs ?? 2000)
      return makeTableSource(id, t, bounds)
    }
  }

  /**
   * Opens `poolSize` connections and prepares every table query on each (run once on a tile far from any data, which
   * the index answers at once), so the first real requests pay neither connection nor planning.
   */
  async function prewarm (sources) {
    const clients = []
    const lost = () => {} // a connection dropped while checked out must not crash the process
    try {
      for (let i = 0; i < (options.poolSize ?? 10); i++) {
        const client = await pool.connect()
        client.on('error', lost)
        clients.push(client)
      }
      await Promise.all(clients.map(async (client) => {
        for (const s of sources) await client.query({ name: s.statement, text: s.sql, values: [30, 0, 0] }).catch(() => {})
      }))
    } catch (err) {
      log?.warn({ err: err.message }, 'postgres pool warm-up incomplete')
    } finally {
      for (const c of clients) {
        c.off('error', lost)
        c.release()
      }
    }
  }

  const listener = createListener(url, options, log)
  return {
    url,
    discover,
    pool,
    listen: listener.start,
    get listening () { return listener.connected },
    close: () => Promise.all([listener.close(), pool.end()]),
  }
}

/**
 * LISTENs on the configured channel (config `notifyChannel`, default 'tile_cannon'; false or '' turns it off) on a
 * connection of its own: a pool connection would go back to the pool and stop listening. `start(onNotify)` calls
 * `onNotify(payload)` for each NOTIFY. A lost connection is re-opened every `retryMs` until the database answers;
 * since what was sent meanwhile is lost, `onNotify('')` (everything may have changed) follows each reconnection.
 */
function createListener (url, options, log) {
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

// The sets of a database: a table (or view) set and a function set, each with its tile query built once, here, and
// run per request on the provider's tile connections (lanes.js) as a named prepared statement.
import { BadRequest, Unavailable, isDataException } from '../../errors.js'
import { buildTileJson, describedBy, numberList } from '../tilejson.js'
import { functionTileSql, layerFields, mayBeCurved, mercatorBox, statementName, tableTileSql, takesQuery } from './sql.js'

export const kind = 'postgis'

/** TileJSON fields a table or function comment may carry as JSON (martin's convention). */
export function commentJson (comment) {
  if (typeof comment !== 'string' || !comment.trim().startsWith('{')) return {}
  try {
    const parsed = JSON.parse(comment)
    return parsed && typeof parsed === 'object' ? parsed : {}
  } catch {
    return {}
  }
}

// A comment's keys that tile-cannon reads into its own TileJSON fields (checked and repaired by buildTileJson), and
// those it never takes from a comment: the TileJSON version, the tile URLs and their scheme and format are the
// server's (a comment's `tiles` would send clients elsewhere, `scheme: tms` flip every tile), as are `id` and
// `encoding` (routes/meta.js). A table's `vector_layers` describe the layer its tiles hold (tableLayer).
const READ_KEYS = new Set(['name', 'description', 'attribution', 'version', 'minzoom', 'maxzoom', 'bounds', 'center', 'vector_layers'])
const SERVER_KEYS = new Set(['tilejson', 'tiles', 'scheme', 'format', 'encoding', 'id'])
// TileJSON 3.0.0 fields of a given shape: a comment's value of another is left out, so the TileJSON stays valid.
const isString = (v) => typeof v === 'string'
const isStrings = (v) => Array.isArray(v) && v.every(isString)
const SHAPES = { legend: isString, template: isString, grids: isStrings, data: isStrings, fillzoom: (v) => Number.isInteger(v) && v >= 0 && v <= 30 }

/**
 * The other keys of a comment's JSON, carried into the TileJSON as martin merges the whole comment into it (a key
 * with a null value is none, as in a JSON Merge Patch).
 */
function commentExtra (tj) {
  const extra = {}
  for (const [key, value] of Object.entries(tj)) {
    if (READ_KEYS.has(key) || SERVER_KEYS.has(key) || value === null || (SHAPES[key] !== undefined && !SHAPES[key](value))) continue
    extra[key] = value
  }
  return extra
}

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v)

/** The entry of a comment's `vector_layers` with this id, if any. */
const commentLayer = (tj, id) => (Array.isArray(tj.vector_layers) ? tj.vector_layers.find((l) => isObject(l) && l.id === id) : undefined)

/**
 * A table's one layer as its tiles hold it (its id, each column's type as a field), described by the comment's
 * `vector_layers` entry of the same id, as martin takes a comment's vector_layers: that entry's description, zooms
 * and other keys, and its text of each field the tiles hold (a field's description, TileJSON's meaning of the value).
 * Only what the tiles hold is listed: a comment's layer of another id and a field no column of the tiles has are left
 * out (the provider warns of them, unservedCommentLayers), as a map styled by them would draw nothing.
 */
function tableLayer (t, fields, tj) {
  const layer = { id: t.layer, fields, minzoom: t.minzoom ?? 0, maxzoom: t.maxzoom ?? 22, ...(tj.description ? { description: tj.description } : {}) }
  const described = commentLayer(tj, t.layer)
  if (described === undefined) return layer
  const texts = isObject(described.fields) ? described.fields : {}
  const merged = { ...layer }
  // (null is no key, as in a JSON Merge Patch: the generated one stays)
  for (const [key, value] of Object.entries(described)) if (value !== null && key !== 'id' && key !== 'fields') merged[key] = value
  merged.fields = Object.fromEntries(Object.entries(fields).map(([name, type]) => [name, typeof texts[name] === 'string' ? texts[name] : type]))
  return merged
}

/**
 * What a table's comment `vector_layers` name that its tiles do not hold, for a warning: layers of another id than
 * the table's layer, and fields of its layer no column of the tiles has. Empty when there is nothing to say.
 */
export function unservedCommentLayers (t) {
  const tj = commentJson(t.comment)
  if (!Array.isArray(tj.vector_layers)) return { layers: [], fields: [] }
  const layers = tj.vector_layers.filter((l) => !isObject(l) || l.id !== t.layer).map((l) => (isObject(l) ? String(l.id) : JSON.stringify(l)))
  const held = layerFields(t.columns)
  const described = commentLayer(tj, t.layer)
  const fields = isObject(described?.fields) ? Object.keys(described.fields).filter((name) => !Object.hasOwn(held, name)) : []
  return { layers, fields }
}

/**
 * The set of a table described by introspect.js's describeTable; `bounds` (undefined: the world) and `domain` (null:
 * anywhere) from bounds.js. A tile's envelope is clipped to the domain: a low-zoom tile of a table in a regional CRS
 * (British National Grid, UTM, LAEA) would otherwise make PROJ fail (503) or fold into a polygon holding wrong rows.
 */
export function tableSource (id, t, bounds, { pool, tiles, cacheTtlS }, domain = null) {
  const sql = tableTileSql(t, domain === null ? undefined : mercatorBox(domain))
  const name = statementName(sql)
  const tj = commentJson(t.comment)
  const fields = layerFields(t.columns)
  return {
    id,
    kind,
    format: 'pbf',
    hints: { format: 'pbf' },
    composable: true,
    cacheTtlS,
    metadata: { schema: t.schema, table: t.table, geometryColumn: t.geom, srid: t.srid, geometryType: t.geomType, extent: t.extent, buffer: t.buffer, featureLimit: t.limit, idColumn: t.idColumn, properties: t.columns.map((c) => (c.domain ? { name: c.name, type: c.type, domain: c.domain } : { name: c.name, type: c.type })) },
    tilejson: buildTileJson({
      ...describedBy(tj, id),
      minzoom: t.minzoom ?? tj.minzoom ?? 0,
      maxzoom: t.maxzoom ?? tj.maxzoom ?? 22,
      // The comment's bounds (as a function's): the author's say where the data is; the table's own still make its
      // query domain (bounds.js).
      bounds: numberList(tj.bounds, 4) ?? bounds,
      center: numberList(tj.center, 3),
      vectorLayers: [tableLayer(t, fields, tj)],
      format: 'pbf',
      extra: commentExtra(tj),
    }),
    sql,
    // unchanged SQL and TileJSON: re-discovery keeps the set and its cached tiles (a new non-integer key: features ids)
    signature: t.keyColumn && t.keyColumn.name !== t.idColumn ? `${sql}\n-- key ${t.keyColumn.name}` : sql,
    statement: name,
    features: featuresOf(t, pool, domain),
    async getTile (z, x, y) {
      const res = await tiles.query({ name, text: sql, values: [z, x, y] })
      return res.rows[0]?.st_asmvt ?? null
    },
    close () {},
  }
}

/**
 * What OGC API – Features (lib/features) needs to query a table itself, read-only, on the set's pool: the sets that
 * have it are its collections. Identifiers as the catalog names them; quoting is the reader's.
 */
function featuresOf (t, pool, domain) {
  const column = ({ name, type, equal_as: equalAs }) => Object.freeze({ name, type, equalAs: equalAs ?? null })
  return Object.freeze({
    pool,
    schema: t.schema,
    table: t.table,
    geom: t.geom,
    geomType: t.geomType,
    geography: t.geography,
    srid: t.srid,
    storedSrid: t.storedSrid, // 0: SRID-0 geometries declared to be in `srid`
    rowSrid: t.rowSrid ?? null, // a column without a typmod: only its rows of this SRID are served
    curved: mayBeCurved(t.geomType),
    columns: Object.freeze(t.columns.map(column)),
    key: t.keyColumn ? column(t.keyColumn) : null, // single-column primary key, or none (a view)
    domain: domain === null ? null : Object.freeze([...domain]), // lon/lat: boxes in other CRSs are clipped to it
  })
}

/**
 * A tile function's data exception (SQLSTATE class 22: `(query->>'n')::int` of `?n=abc`, a value out of range, or the
 * function's own `RAISE ... USING ERRCODE = 'invalid_parameter_value'`) as the 400 it is: the request's query is all
 * the function was given beyond z/x/y, which the server checked. The database's message is the answer (it echoes the
 * request, or is the function author's); null for any other error.
 */
function refusedQuery (id, err) {
  if (!isDataException(err)) return null
  const reason = String(err.message).replace(/\s+/g, ' ').slice(0, 200)
  return new BadRequest(`tileset '${id}' refused the query: ${reason}`)
}

/**
 * Any other error PostgreSQL raises running a tile function as its set's 503 (lib/errors.js readFailure logs the
 * message once, never answers it): its SQL is the function author's, so a syntax error, a table it may not read or a
 * `feature_not_supported` of its own is the function failing, not our statement (which only calls it). A failure
 * that is no database error (the connection lost) and the prepared statement's state (class 26, ours) stay as they are.
 */
function functionFailure (err) {
  if (typeof err?.severity !== 'string' || typeof err.code !== 'string' || err.code.startsWith('26')) return err
  return new Unavailable(String(err.message), { cause: err })
}

/** Whether a query value is JSON text (what PostgreSQL's json takes as it is). */
function isJson (value) {
  try {
    JSON.parse(value)
    return true
  } catch {
    return false
  }
}

/**
 * The request's query as the JSON a tile function takes, by martin's rule for `(z, x, y, query json)` functions (its
 * query_to_json): a value that is JSON is that value (`n=42` a number, `b=true` a boolean, `o={"a":1}` an object,
 * `ids=[1,3]` an array), any other its string (`color=red`); a key given more than once, its last value (martin reads
 * the query into a map). A JSON value is written as it came, not as JavaScript reads it back: 9007199254740993 keeps
 * its digits. Made on a cache miss only: the cache keys on the query as it came.
 */
export function queryJson (query) {
  let json = ''
  for (const key of Object.keys(query ?? {})) {
    let value = query[key]
    if (Array.isArray(value)) value = value[value.length - 1]
    json += `${json === '' ? '' : ','}${JSON.stringify(key)}:${isJson(value) ? value : JSON.stringify(String(value))}`
  }
  return `{${json}}`
}

/** The set of a tile function (a FUNCTIONS_SQL row); its comment may name the format ('mlt') and TileJSON fields. */
export function functionSource (id, f, { tiles, cacheTtlS }) {
  const withQuery = takesQuery(f)
  const sql = functionTileSql(f)
  const name = statementName(sql)
  const tj = commentJson(f.comment)
  const format = tj.format === 'mlt' ? 'mlt' : 'pbf'
  return {
    id,
    kind,
    format,
    hints: { format },
    composable: format === 'pbf',
    takesQuery: withQuery,
    cacheTtlS,
    metadata: { schema: f.schema, function: f.name, arguments: f.args },
    tilejson: buildTileJson({
      ...describedBy(tj, id),
      minzoom: tj.minzoom ?? 0,
      maxzoom: tj.maxzoom ?? 22,
      bounds: numberList(tj.bounds, 4),
      center: numberList(tj.center, 3),
      vectorLayers: Array.isArray(tj.vector_layers) ? tj.vector_layers : undefined,
      format: 'pbf',
      extra: commentExtra(tj),
    }),
    sql,
    signature: sql, // unchanged SQL and TileJSON: re-discovery keeps the set and its cached tiles
    statement: name,
    async getTile (z, x, y, query) {
      try {
        const res = withQuery
          ? await tiles.query({ name, text: sql, values: [z, x, y, queryJson(query)] })
          : await tiles.query({ name, text: sql, values: [z, x, y] })
        return res.rows[0]?.tile ?? null
      } catch (err) {
        throw (withQuery ? refusedQuery(id, err) : null) ?? functionFailure(err)
      }
    },
    close () {},
  }
}

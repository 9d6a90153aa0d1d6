// What a database offers: its geometry tables and views, their columns, and its tile functions, read from the
// catalog; the ids they are served under; and each table's description (SRID, properties, key, options) from which
// sql.js builds its tile query. Only readTables, readFunctions and describeTable talk to the database, through the
// pool they are given.
import { GEOM_ALIAS, ID_ALIAS, quoteIdent, undrawable } from './sql.js'

// Columns that are no property, nor are arrays of them: geometries (another geometry column of the table is a set of
// its own) and rasters; and bytea: a blob (a photo, a document) may be megabytes a row and means nothing on a map,
// neither MVT nor GeoJSON has a binary type, and as text (hex) it would double its size in every tile and page. Every
// other type is served: as ST_AsMVT writes it in tiles (arrays and tsvector as their text), as JSON in features.
const SKIPPED_TYPES = new Set(['geometry', 'geography', 'raster', 'bytea'])
/** Whether a column type (a pg_type name: `_int4` is int4[]) is left out of tiles and features. */
const skippedType = (type) => SKIPPED_TYPES.has(type.startsWith('_') ? type.slice(1) : type)

// PostGIS's geometry_columns and geography_columns list only relations the role has SELECT on as a whole
// (has_table_privilege): one readable through column grants (GRANT SELECT (id, geom) ON t) is read from pg_attribute
// as the views do, its SRID and type from the column's typmod (not from PostGIS 1's CHECK constraints), and served
// with the columns the role may read (COLUMNS_SQL).
const TABLES_SQL = `
SELECT c.oid::int AS oid, n.nspname AS schema, c.relname AS table, c.relkind::text AS relkind, c.relispartition AS partition,
       gc.geom, gc.srid, gc.geom_type, gc.geography, obj_description(c.oid, 'pg_class') AS comment
FROM (SELECT f_table_schema, f_table_name, f_geometry_column AS geom, srid, type AS geom_type, false AS geography FROM geometry_columns
      UNION ALL
      SELECT f_table_schema, f_table_name, f_geography_column, srid, type, true FROM geography_columns
      UNION ALL
      SELECT pn.nspname, pc.relname, a.attname, postgis_typmod_srid(a.atttypmod),
             CASE WHEN t.typname = 'geography' THEN postgis_typmod_type(a.atttypmod)
                  ELSE replace(replace(upper(postgis_typmod_type(a.atttypmod)), 'ZM', ''), 'Z', '') END,
             t.typname = 'geography'
      FROM pg_class pc JOIN pg_namespace pn ON pn.oid = pc.relnamespace
      JOIN pg_attribute a ON a.attrelid = pc.oid AND a.attnum > 0 AND NOT a.attisdropped
      JOIN pg_type t ON t.oid = a.atttypid AND t.typname IN ('geometry', 'geography')
      WHERE pc.relkind IN ('r', 'v', 'm', 'f', 'p') AND NOT pg_is_other_temp_schema(pc.relnamespace)
        AND NOT has_table_privilege(pc.oid, 'SELECT') AND has_column_privilege(pc.oid, a.attnum, 'SELECT')) AS gc
JOIN pg_namespace n ON n.nspname = gc.f_table_schema
JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = gc.f_table_name
WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'topology', 'tiger')
ORDER BY n.nspname, c.relname, gc.geom`

// A type's base type (itself unless a domain; a domain over a domain is followed down), as a scalar subquery.
const baseTypeOf = (oid) => `(WITH RECURSIVE d(oid) AS (SELECT ${oid} UNION ALL SELECT p.typbasetype FROM d JOIN pg_type p ON p.oid = d.oid WHERE p.typtype = 'd')
    SELECT d.oid FROM d JOIN pg_type p ON p.oid = d.oid WHERE p.typtype <> 'd')`

// type: the pg_type name of the column's base type, an array of a domain as one of its base (`_int4`): ST_AsMVT writes
// a domain's value as its base type's (`CREATE DOMAIN posint AS integer`: a number; one over jsonb spread into keys),
// and so does to_json, so tiles, fields, the feature id and features' queryables all go by it; `domain` says the
// domain's own name (/:set/meta). equal_as: the type a value compared with the column is cast to (the base type: a
// value outside the domain then matches nothing rather than raising a check violation), where PostgreSQL has an `=`
// for it; else null. Named by schema and pg_type name: `character` or `bit` (format_type) would cut a value to one
// character.
const COLUMNS_SQL = `
SELECT a.attrelid::int AS oid, a.attname AS name, CASE WHEN e.oid IS NULL THEN b.typname ELSE '_' || e.typname END AS type,
       CASE WHEN t.oid <> b.oid OR e.oid <> b.typelem THEN format_type(a.atttypid, NULL) END AS domain,
       (SELECT format('%I.%I', bn.nspname, b.typname) FROM pg_namespace bn
        WHERE bn.oid = b.typnamespace
          AND EXISTS (SELECT 1 FROM pg_operator o WHERE o.oprname = '=' AND o.oprleft = o.oprright
            AND o.oprleft IN (b.oid, CASE b.typtype WHEN 'e' THEN 'anyenum'::regtype WHEN 'r' THEN 'anyrange'::regtype END))) AS equal_as,
       coalesce((SELECT true FROM pg_index i WHERE i.indrelid = a.attrelid AND i.indisprimary
                 AND i.indnkeyatts = 1 AND i.indkey[0] = a.attnum), false) AS pk
FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
JOIN pg_type b ON b.oid = ${baseTypeOf('t.oid')}
LEFT JOIN pg_type e ON b.typcategory = 'A' AND b.typelem <> 0 AND e.oid = ${baseTypeOf('b.typelem')}
WHERE a.attrelid = ANY($1::oid[]) AND a.attnum > 0 AND NOT a.attisdropped AND has_column_privilege(a.attrelid, a.attnum, 'SELECT')
ORDER BY a.attrelid, a.attnum`

// Rows of a column without a declared SRID read at discovery for another SRID than the first row's (a warning).
const SRID_SCAN_ROWS = 100_000

const FUNCTIONS_SQL = `
SELECT n.nspname AS schema, p.proname AS name, p.pronargs AS nargs,
       array_to_string(p.proargtypes::regtype[], ',') AS args, obj_description(p.oid, 'pg_proc') AS comment
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE p.prorettype = 'bytea'::regtype AND p.prokind = 'f' AND NOT p.proretset
  AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'topology', 'tiger')
  AND has_function_privilege(p.oid, 'EXECUTE')
  AND array_to_string(p.proargtypes::regtype[], ',') IN ('integer,integer,integer', 'integer,integer,integer,json', 'integer,integer,integer,jsonb')
  -- fn(z, x, y) beside an fn(z, x, y, query DEFAULT …) cannot be called by its name: PostgreSQL finds both ("not unique")
  AND NOT (p.pronargs = 3 AND EXISTS (SELECT 1 FROM pg_proc o WHERE o.pronamespace = p.pronamespace AND o.proname = p.proname
    AND o.oid <> p.oid AND o.pronargs > 3 AND o.pronargs - o.pronargdefaults <= 3))
ORDER BY n.nspname, p.proname`

// Features in a table's tile when neither the set (`limit`) nor the database (`featureLimit`) says: pg_tileserv's
// MaxFeaturesPerTile. Without one, the z0 tile of a table of 2 M points was 39 MB, as slow to make as to draw, and
// read again at each expiry; a map shows no more at that zoom. `false` says: no limit.
export const DEFAULT_FEATURE_LIMIT = 10_000

/** The LIMIT of a table's tile query (null: none) from the set's `limit` and the database's `featureLimit`. */
const featureLimit = (own, database) => {
  const limit = own ?? database ?? DEFAULT_FEATURE_LIMIT
  return limit === false ? null : limit
}

/** `schemas` from the config: null (or absent) means every schema. */
const inSchemas = (schemas) => (s) => schemas == null || schemas.includes(s)

/**
 * The geometry columns of the tables and views in `schemas` (one row per column), the columns of each relation by
 * oid, and how many geometry columns each relation has.
 */
export async function readTables (pool, schemas) {
  const { rows: geomRows } = await pool.query(TABLES_SQL)
  const rows = geomRows.filter((r) => inSchemas(schemas)(r.schema))
  const { rows: columnRows } = rows.length ? await pool.query(COLUMNS_SQL, [[...new Set(rows.map((r) => r.oid))]]) : { rows: [] }
  const columnsOf = new Map()
  for (const c of columnRows) {
    if (!columnsOf.has(c.oid)) columnsOf.set(c.oid, [])
    columnsOf.get(c.oid).push(c)
  }
  return { rows, columnsOf, geomCount: geometryCounts(rows) }
}

/** The tile functions in `schemas`, and every one of them (a name shared with another schema qualifies the id). */
export async function readFunctions (pool, schemas) {
  const { rows: all } = await pool.query(FUNCTIONS_SQL)
  return { functions: all.filter((f) => inSchemas(schemas)(f.schema)), all }
}

/** oid → how many geometry columns the relation has (a table with two is served once per column). */
export function geometryCounts (rows) {
  const geomCount = new Map()
  for (const r of rows) geomCount.set(r.oid, (geomCount.get(r.oid) ?? 0) + 1)
  return geomCount
}

/**
 * Which sets the tables make, as [{ id, row, opts }] (ids still to be made unique): every geometry column (unless
 * `options.autoPublish` is false) under its table's name, qualified by schema when two schemas share it and by column
 * when a table has several; then each of `options.tables`, replacing the automatic set of its column (`row` null: the
 * configured table is missing). Configured ids come first: they are what the user asked for by name. A partition is
 * served only when configured: its rows are its partitioned table's, which is served (as pg_tileserv and martin do).
 */
export function tableSpecs (rows, options = {}) {
  const published = options.autoPublish === false ? [] : rows.filter((r) => r.partition !== true)
  const geomCount = geometryCounts(rows)
  const nameCount = new Map()
  const seen = new Map()
  for (const r of published) {
    seen.set(r.oid, (seen.get(r.oid) ?? 0) + 1)
    nameCount.set(r.table, (nameCount.get(r.table) ?? 0) + (seen.get(r.oid) === 1 ? 1 : 0))
  }
  const specs = []
  for (const r of published) {
    const base = nameCount.get(r.table) > 1 ? `${r.schema}.${r.table}` : r.table
    const id = geomCount.get(r.oid) > 1 ? `${base}.${r.geom}` : base
    specs.push({ id, row: r, opts: {} })
  }
  for (const [id, t] of Object.entries(options.tables ?? {})) {
    const row = rows.find((r) => r.table === t.table && (t.schema === undefined || r.schema === t.schema) && (t.geometryColumn === undefined || r.geom === t.geometryColumn))
    const existing = specs.findIndex((s) => s.row === row)
    if (!row) {
      specs.push({ id, row: null, opts: t })
      continue
    }
    if (existing !== -1) specs.splice(existing, 1)
    specs.push({ id, row, opts: t })
  }
  return specs.sort((a, b) => Number(Object.keys(b.opts).length > 0) - Number(Object.keys(a.opts).length > 0))
}

/** Hands out ids once each: a taken id gets `-2`, `-3` … */
export function idAllocator () {
  const taken = new Set()
  return {
    has: (id) => taken.has(id),
    take (id) {
      let candidate = id
      for (let n = 2; taken.has(candidate); n++) candidate = `${id}-${n}`
      taken.add(candidate)
      return candidate
    },
  }
}

/** A function's id: its name, or schema.name when a set or another function (an overload, another schema) has it. */
export const functionId = (f, all, ids) =>
  ids.take(ids.has(f.name) || all.filter((g) => g.name === f.name).length > 1 ? `${f.schema}.${f.name}` : f.name)

/**
 * The description of a table set that sql.js turns into its tile query, or the reason (a string) it cannot be served.
 * `options` is the database's config (`postgres`), `opts` the set's own (`postgres.tables.<id>`), `multiGeom` whether
 * the table has several geometry columns (its layer is then named after the column too).
 */
export async function describeTable (pool, row, columns, opts, options, multiGeom) {
  if (undrawable(row.geom_type)) return `${row.geom_type} geometries cannot be drawn in vector tiles`
  // A column without a typmod (SRID 0 in geometry_columns): what its rows hold, or what the config says.
  let storedSrid = row.geography ? row.srid || 4326 : row.srid
  // Such a column may hold several SRIDs: only the rows in the first one found are served (rowSrid), in tiles and
  // features alike. One `&&` on the spatial index cannot select rows of several CRSs, and the others, tested against a
  // box in the first one's, were missing from tiles and made each bbox raise "Operation on mixed SRID geometries"
  // (503); a row of another SRID is a mistake to fix in the data (UPDATE … SET g = ST_Transform(g, …)), and
  // otherSrid says it was met.
  let rowSrid = null
  let otherSrid = null
  if (!storedSrid) {
    const [g, from] = [quoteIdent(row.geom), `${quoteIdent(row.schema)}.${quoteIdent(row.table)}`]
    storedSrid = (await pool.query(`SELECT ST_SRID(${g}) AS srid FROM ${from} WHERE ${g} IS NOT NULL LIMIT 1`)).rows[0]?.srid ?? 0
    // Among the first rows at most, as a view of a join over a large table would be read whole on every re-discovery
    // otherwise. The filter (a cost per row) only where another SRID was met: a column of one SRID, or a table empty
    // now whose rows come later (in the config's `srid`), is served as it was.
    otherSrid = (await pool.query(`SELECT ST_SRID(g) AS srid FROM (SELECT ${g} AS g FROM ${from} WHERE ${g} IS NOT NULL LIMIT ${SRID_SCAN_ROWS}) s WHERE ST_SRID(g) <> $1 LIMIT 1`, [storedSrid])).rows[0]?.srid ?? null
    if (otherSrid !== null) rowSrid = storedSrid
  }
  const srid = opts.srid || storedSrid || options.defaultSrid || 0
  if (!srid) {
    return 'the geometry column has no SRID: set `srid` for this table in postgres.tables, or postgres.defaultSrid'
  }
  const all = columns.filter((c) => !skippedType(c.type) && c.name !== GEOM_ALIAS && c.name !== ID_ALIAS)
  const wanted = Array.isArray(opts.properties) ? all.filter((c) => opts.properties.includes(c.name)) : all
  // Named in the config but not served: no such column (a typo, one dropped or renamed), or of a type left out (bytea).
  const unserved = Array.isArray(opts.properties) ? opts.properties.filter((name) => !wanted.some((c) => c.name === name)) : []
  const pk = columns.find((c) => c.pk && ['int2', 'int4', 'int8'].includes(c.type))
  return {
    schema: row.schema,
    table: row.table,
    geom: row.geom,
    geomType: row.geom_type,
    geography: row.geography,
    srid,
    storedSrid: storedSrid === srid ? srid : storedSrid,
    rowSrid,
    otherSrid,
    unserved,
    comment: row.comment,
    columns: wanted,
    idColumn: pk && wanted.includes(pk) ? pk.name : null,
    // The single-column primary key of any type: OGC API – Features item ids (lib/features).
    keyColumn: columns.find((c) => c.pk) ?? null,
    extent: opts.extent ?? options.extent ?? 4096,
    buffer: opts.buffer ?? options.buffer ?? 64,
    limit: featureLimit(opts.limit, options.featureLimit),
    minzoom: opts.minzoom,
    maxzoom: opts.maxzoom,
    layer: opts.layer ?? (multiGeom ? `${row.table}.${row.geom}` : row.table),
  }
}

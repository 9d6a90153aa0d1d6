// A table's bounds for its TileJSON and the domain its queries keep to, read once at discovery.
import { drawableSql, quoteIdent, quoteLiteral } from './sql.js'

const MAX_LAT = 85.0511287798 // Web Mercator's edge

/** Runs `use(client)` on a connection of `pool`, released after. */
async function withClient (pool, use) {
  const client = await pool.connect()
  const lost = () => {} // a connection dropped while checked out must not crash the process
  client.on('error', lost)
  try {
    return await use(client)
  } finally {
    client.off('error', lost)
    client.release()
  }
}

/**
 * Bounds in WGS84 from the planner's estimate, or the real extent within a time limit; undefined if neither. Not the
 * estimate of a geography column: its statistics are geocentric (a box around the unit sphere's centre, ±1).
 */
export async function tableBounds (pool, { schema, table, geom, geomType, srid, geography, rowSrid = null }, timeoutMs) {
  // A scan that ran out of time (a large geography table) keeps the bounds an earlier discovery found: otherwise the
  // TileJSON would change between discoveries, and the set be replaced (its cached tiles dropped) each time.
  const key = `${schema}\0${table}\0${geom}`
  let known = boundsFound.get(pool)
  if (known === undefined) boundsFound.set(pool, known = new Map())
  const found = await readBounds(pool, { schema, table, geom, geomType, srid, geography, rowSrid }, timeoutMs)
  if (found !== undefined) known.set(key, found)
  return found ?? known.get(key)
}

const boundsFound = new WeakMap() // pool → table → the bounds last found

function readBounds (pool, { schema, table, geom, geomType, srid, geography, rowSrid }, timeoutMs) {
  return withClient(pool, async (client) => {
    try {
      await client.query('BEGIN')
      await client.query(`SET LOCAL statement_timeout = ${Math.max(1, Math.floor(timeoutMs))}`)
      const box = (expr) => `SELECT ST_XMin(b) AS w, ST_YMin(b) AS s, ST_XMax(b) AS e, ST_YMax(b) AS n
        FROM (SELECT ST_Transform(ST_SetSRID((${expr})::geometry, ${srid}), 4326) AS b) AS x`
      let row
      try {
        // Not the estimate of a column holding several SRIDs either (rowSrid: only its rows in one are served): it
        // is the box of every row's numbers, degrees and metres together, drawn out to the world or past it.
        if (!geography && rowSrid === null) row = (await client.query(box(`ST_EstimatedExtent(${quoteLiteral(schema)}, ${quoteLiteral(table)}, ${quoteLiteral(geom)})`))).rows[0]
      } catch {
        row = undefined // no statistics yet
      }
      if (!row || row.w === null) {
        // The estimate may have failed, which aborts the transaction: the exact extent runs in a fresh one.
        await client.query('ROLLBACK')
        await client.query('BEGIN')
        await client.query(`SET LOCAL statement_timeout = ${Math.max(1, Math.floor(timeoutMs))}`)
        // Of the rows tiles draw: one NaN or Infinity made the extent wrong (south of the data's, or the world).
        // Of the rows served, where a column holds several SRIDs.
        const column = `${quoteIdent(geom)}::geometry`
        const served = rowSrid === null ? '' : `ST_SRID(${column}) = ${rowSrid} AND `
        row = (await client.query(box(`SELECT ST_Extent(${column}) FROM ${quoteIdent(schema)}.${quoteIdent(table)} WHERE ${served}${drawableSql(column, geomType)}`))).rows[0]
      }
      await client.query('COMMIT')
      if (!row || row.w === null) return undefined
      const clampLat = (v) => Math.max(-MAX_LAT, Math.min(MAX_LAT, v))
      const b = [Math.max(-180, row.w), clampLat(row.s), Math.min(180, row.e), clampLat(row.n)]
      return b.every(Number.isFinite) && b[0] <= b[2] && b[1] <= b[3] ? b : undefined
    } catch {
      await client.query('ROLLBACK').catch(() => {})
      return undefined // a slow or failing extent never stops the set; TileJSON falls back to the world
    }
  })
}

const WORLD = [-180, -90, 180, 90]
const MERCATOR_WORLD = [-180, -MAX_LAT, 180, MAX_LAT]
const MARGINS_DEG = [30, 10, 2, 0] // tried in turn around the data's bounds, the largest that works wins

/**
 * `box` grown by `deg` on every side, out to whole degrees, within the world. Whole degrees: the domain is part of
 * the tile SQL, hence of the set's signature, and the planner's estimated extent moves a little after each ANALYZE;
 * an unrounded domain would make every re-discovery after one replace the set and drop its cached tiles.
 */
const grown = ([w, s, e, n], deg) => [
  Math.max(-180, Math.floor(w - deg)), Math.max(-90, Math.floor(s - deg)),
  Math.min(180, Math.ceil(e + deg)), Math.min(90, Math.ceil(n + deg)),
]

// Whether a lon/lat box still means the same place once in the table's CRS, made as the queries make it (edges
// segmentized to 1/64 of the box, transformed): a valid polygon that covers a 16x16 grid of points of the box, each
// transformed too. A projection with a limited domain either throws (PROJ: "Point outside of projection domain") or
// folds the ring, silently: a whole-world box in EPSG:3035 becomes a polygon that holds the wrong places.
const DOMAIN_TEST = `WITH box AS (SELECT ST_Segmentize(ST_MakeEnvelope($1, $2, $3, $4, 4326), greatest($3 - $1, $4 - $2) / 64) AS b),
  shape AS (SELECT ST_Transform(b, $5::integer) AS p FROM box),
  grid AS (SELECT ST_Transform(ST_SetSRID(ST_MakePoint($1 + ($3 - $1) * (i + 0.5) / 16, $2 + ($4 - $2) * (j + 0.5) / 16), 4326), $5::integer) AS q
    FROM generate_series(0, 15) AS i, generate_series(0, 15) AS j)
SELECT ST_IsValid(p) AND bool_and(ST_Covers(p, q)) AS ok FROM shape, grid GROUP BY p`

/**
 * The lon/lat box a table's queries keep to (null: anywhere), read once at discovery. A table stored in a CRS made
 * for one region (British National Grid, UTM zones, LAEA Europe) cannot take a box of the whole world: tile envelopes
 * and feature bboxes are clipped to this domain first. It is the data's bounds grown by the largest of MARGINS_DEG
 * that transforms well (rows added later that far outside the data show after the next re-discovery).
 */
export async function queryDomain (pool, { srid }, bounds, timeoutMs) {
  if (srid === 4326 || srid === 3857) return null
  return withClient(pool, async (client) => {
    await client.query(`SET statement_timeout = ${Math.max(1, Math.floor(timeoutMs))}`)
    try {
      const works = (box) => client.query(DOMAIN_TEST, [...box, srid]).then((res) => res.rows[0]?.ok === true, () => false)
      if (await works(WORLD)) return null
      const candidates = [MERCATOR_WORLD, ...(Array.isArray(bounds) ? MARGINS_DEG.map((deg) => grown(bounds, deg)) : [])]
      for (const box of candidates) if (await works(box)) return box
      return Array.isArray(bounds) ? bounds : null // nothing transforms well: the data's own bounds are the best guess
    } finally {
      await client.query('RESET statement_timeout').catch(() => {})
    }
  })
}

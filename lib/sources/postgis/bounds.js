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
export async function tableBounds (pool, { schema, table, geom, geomType, srid, geography, rowSrid = null }, timeoutMs, { featureExtent = true } = {}) {
  // A scan that ran out of time (a large geography table) keeps the bounds an earlier discovery found: otherwise the
  // TileJSON would change between discoveries, and the set be replaced (its cached tiles dropped) each time.
  const key = `${schema}\0${table}\0${geom}`
  let known = boundsFound.get(pool)
  if (known === undefined) boundsFound.set(pool, known = new Map())
  const found = await readBounds(pool, { schema, table, geom, geomType, srid, geography, rowSrid }, timeoutMs)
  if (found !== undefined) known.set(key, found)
  // Read at each discovery with the tiles' bounds, for OGC API – Features (see featureExtentOf); not when that is
  // off: it reads rows (a scan without an index, a wait on a table a migration holds), which nothing would show.
  if (featureExtent) await readFeatureExtent(pool, key, { schema, table, geom, geomType, srid, geography, rowSrid }, timeoutMs)
  return found ?? known.get(key)
}

const extentsFound = new WeakMap() // pool → table → the features' extent last found
let extentsVersion = 0 // changed whenever an extent is: documents that show one are made again

/**
 * The extent of a table's features in CRS84, as its last discovery found it (undefined: never found): complete, as
 * OGC API – Features asks (17-069r4 /req/core/fc-md-extent: it SHALL include every geometry; QGIS and GDAL take it as
 * the layer's extent), and to ±90°: not the tiles' bounds, which are the planner's estimate (stale until the next
 * ANALYZE, drawn from a sample) clipped to Web Mercator's world.
 */
export const featureExtentOf = (pool, { schema, table, geom }) => extentsFound.get(pool)?.get(`${schema}\0${table}\0${geom}`)
/** A number that changes whenever an extent found does. */
export const featureExtentsVersion = () => extentsVersion

const FAR = 1e30 // past any coordinate (boxes in the GiST index are float4: at most 3.4e38)

/**
 * The features' extent: the planner's estimate, made complete by the rows that stick out of it, found through the
 * spatial index (an `&&` on each side's outer half-plane: four index probes, which read only what sticks out; without
 * an index, one scan); without an estimate (no statistics yet, a geography column, several SRIDs), the exact
 * ST_Extent. Within the time limit; past it, the extent found before, or the world.
 */
async function readFeatureExtent (pool, key, { schema, table, geom, geomType, srid, geography, rowSrid }, timeoutMs) {
  let known = extentsFound.get(pool)
  if (known === undefined) extentsFound.set(pool, known = new Map())
  const extent = await withClient(pool, async (client) => {
    try {
      await client.query('BEGIN')
      await client.query(`SET LOCAL statement_timeout = ${Math.max(1, Math.floor(timeoutMs))}`)
      const column = `${quoteIdent(geom)}::geometry`
      const served = `${rowSrid === null ? '' : `ST_SRID(${column}) = ${rowSrid} AND `}${drawableSql(column, geomType)}`
      const from = `FROM ${quoteIdent(schema)}.${quoteIdent(table)}`
      let estimate = null
      if (!geography && rowSrid === null) {
        await client.query('SAVEPOINT estimate')
        try {
          const res = await client.query(`SELECT ST_XMin(b) AS w, ST_YMin(b) AS s, ST_XMax(b) AS e, ST_YMax(b) AS n
            FROM (SELECT ST_EstimatedExtent(${quoteLiteral(schema)}, ${quoteLiteral(table)}, ${quoteLiteral(geom)}) AS b) AS x`)
          const b = res.rows[0]
          if (b && [b.w, b.s, b.e, b.n].every(Number.isFinite)) estimate = b
        } catch {
          await client.query('ROLLBACK TO SAVEPOINT estimate') // no statistics yet
        }
      }
      // (An aggregate in FROM, not a scalar subquery: that one ran without parallel workers, 4x slower unindexed.)
      let box
      if (estimate === null) {
        box = `SELECT ST_Extent(${column}) AS b ${from} WHERE ${served}`
      } else {
        const { w, s, e, n } = estimate
        const out = [[-FAR, -FAR, w, FAR], [e, -FAR, FAR, FAR], [-FAR, -FAR, FAR, s], [-FAR, n, FAR, FAR]]
          .map((b) => `${quoteIdent(geom)} && ST_MakeEnvelope(${b.join(', ')}, ${srid})`).join(' OR ')
        box = `SELECT ST_CombineBBox(ST_MakeEnvelope(${w}, ${s}, ${e}, ${n})::box2d, o.b::geometry) AS b
          FROM (SELECT ST_Extent(${column}) AS b ${from} WHERE (${out}) AND ${served}) AS o`
      }
      // In lon/lat: a box in a projected CRS has its edges segmentized first, which bend once transformed.
      const lonLat = srid === 4326 || srid === 3857 ? `ST_Transform(ST_SetSRID(b::geometry, ${srid}), 4326)`
        : `ST_Transform(ST_Segmentize(ST_SetSRID(b::geometry, ${srid}), greatest(ST_XMax(b) - ST_XMin(b), ST_YMax(b) - ST_YMin(b), 1e-9) / 64), 4326)`
      const res = await client.query(`SELECT ST_XMin(t) AS w, ST_YMin(t) AS s, ST_XMax(t) AS e, ST_YMax(t) AS n
        FROM (SELECT ${lonLat} AS t FROM (${box}) AS b) AS x`)
      await client.query('COMMIT')
      const r = res.rows[0]
      if (!r || r.w === null) return undefined
      const b = [Math.max(-180, r.w), Math.max(-90, r.s), Math.min(180, r.e), Math.min(90, r.n)]
      return b.every(Number.isFinite) && b[0] <= b[2] && b[1] <= b[3] ? b : undefined
    } catch {
      await client.query('ROLLBACK').catch(() => {})
      return undefined
    }
  })
  if (extent !== undefined && String(extent) !== String(known.get(key))) {
    known.set(key, extent)
    extentsVersion++
  }
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

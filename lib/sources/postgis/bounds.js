// A table's bounds for its TileJSON, read once at discovery.
import { quoteIdent, quoteLiteral } from './sql.js'

const MAX_LAT = 85.0511287798 // Web Mercator's edge

/** Bounds in WGS84 from the planner's estimate, or the real extent within a time limit; undefined if neither. */
export async function tableBounds (pool, { schema, table, geom, srid }, timeoutMs) {
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
      // The estimate may have failed, which aborts the transaction: the exact extent runs in a fresh one.
      await client.query('ROLLBACK')
      await client.query('BEGIN')
      await client.query(`SET LOCAL statement_timeout = ${Math.max(1, Math.floor(timeoutMs))}`)
      row = (await client.query(box(`SELECT ST_Extent(${quoteIdent(geom)}::geometry) FROM ${quoteIdent(schema)}.${quoteIdent(table)}`))).rows[0]
    }
    await client.query('COMMIT')
    if (!row || row.w === null) return undefined
    const clampLat = (v) => Math.max(-MAX_LAT, Math.min(MAX_LAT, v))
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

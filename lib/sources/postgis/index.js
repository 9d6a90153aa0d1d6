// PostGIS source: one pg pool per database, many sets: every table and view with a geometry column, and every
// function `fn(z integer, x integer, y integer[, query json]) returns bytea`. Each set's tile query is built once at
// discovery; identifiers come quoted from the catalog, request values are bound parameters, never spliced into SQL.
//
//   provider.js    the connections, discovery, warm-up and close of one database
//   lanes.js       the pipelined connections tile queries run on
//   introspect.js  the catalog queries, the ids of sets, each table's description
//   sql.js         the tile SQL (pure: testable without a database), field types, geometry-type rules
//   sources.js     the set objects (TileJSON, metadata, getTile)
//   bounds.js      a table's bounds for its TileJSON
//   listener.js    LISTEN/NOTIFY on a connection of its own
export { kind } from './sources.js'
import { createProvider } from './provider.js'

export { createProvider }

export const matchesUrl = (url) => /^postgres(ql)?:\/\//i.test(url)

// The source contract for a kind that finds many sets in one place (lib/sources/contract.js).
export const title = 'PostGIS'
export const urlForm = 'postgres://user@host/db'
export const configSection = 'postgres'
export const configuredUrls = (config) => (config.postgres?.url ? [config.postgres.url] : [])

/** The sets of one database, as a group the catalog discovers, re-discovers and purges on NOTIFY. */
export function openGroup (url, options, context) {
  const provider = createProvider(url, options, context)
  provider.names = namesSet
  return provider
}

/** Does a NOTIFY payload name this set? Besides its id: its table as `table` or `schema.table`, or its function. */
function namesSet ({ source }, payload) {
  const { schema, table, function: fn } = source.metadata
  const name = table ?? fn
  return payload === name || payload === `${schema}.${name}`
}

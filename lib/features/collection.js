// A catalog entry seen as an OGC API – Features collection: which entries are collections (those whose source has a
// `features` descriptor: PostGIS tables and views), the columns clients may read, filter and sort by, and the
// collection's JSON documents (without links: the routes add those, per request).
import { NotFound, Unavailable } from '../errors.js'
import { CRS84, offeredCrs, storageCrs } from './crs.js'
import { featureExtentOf } from '../sources/postgis/bounds.js'

// Column types whose values JSON Schema describes (anything else is a string: PostgreSQL's text form).
const INTEGER = new Set(['int2', 'int4', 'int8', 'oid'])
const NUMBER = new Set(['float4', 'float8', 'numeric'])
const FORMATS = { date: 'date', timestamp: 'date-time', timestamptz: 'date-time', time: 'time', uuid: 'uuid' }
// Values that are JSON themselves: output, but neither compared with `=` nor ordered.
const NOT_QUERYABLE = new Set(['json', 'jsonb', 'hstore', 'xml', 'point', 'box', 'polygon', 'line', 'lseg', 'path', 'circle'])
// Column types a feature's time is in: the first such column of a table (in column order) is what `datetime` selects by.
const TEMPORAL = new Set(['timestamptz', 'timestamp', 'date'])
const GEOMETRY_FORMAT = { POINT: 'point', MULTIPOINT: 'multipoint', LINESTRING: 'linestring', MULTILINESTRING: 'multilinestring', POLYGON: 'polygon', MULTIPOLYGON: 'multipolygon' }

/**
 * The collection an entry is, made once per source (the descriptor is frozen: a re-discovery that changes the table
 * makes a new source, and so a new collection). null: not a collection.
 */
const made = new WeakMap()
export function collectionOf (entry) {
  const d = entry?.source?.features
  if (d === undefined || d === null) return null
  let c = made.get(d)
  if (c === undefined) {
    c = describe(d)
    made.set(d, c)
  }
  return c
}

/** The collection named `id`, or 404 (unknown, unavailable, or a set that is not a table: a function, a file). */
export function findCollection (catalog, id) {
  const entry = catalog.get(id)
  // A table whose database is down is a collection that cannot answer now, as its tiles cannot: 503, not 404.
  if (entry !== undefined && entry.source === null && entry.kind === 'postgis') throw new Unavailable(`collection '${entry.id}' is unavailable: ${entry.reason}`)
  const c = entry === undefined || entry.retired ? null : collectionOf(entry)
  if (c === null) {
    throw new NotFound(entry === undefined ? `no collection '${id}'` : `'${entry.id}' is not a collection: only PostGIS tables and views are`)
  }
  return { entry, collection: c }
}

function describe (d) {
  const key = d.key
  // Properties are the columns but the key, which is each feature's `id`.
  const properties = d.columns.filter((c) => c.name !== key?.name)
  const queryables = new Map()
  if (key !== null) queryables.set(key.name, key)
  for (const c of d.columns) if (!NOT_QUERYABLE.has(c.type) && !c.type.startsWith('_')) queryables.set(c.name, c)
  return {
    d,
    key,
    properties,
    propertyNames: new Map(properties.map((c) => [c.name, c])),
    queryables,
    temporal: d.columns.find((c) => TEMPORAL.has(c.type)) ?? null, // the time `datetime` compares, if any
    crs: offeredCrs(d.srid),
  }
}

/** The collection's document (OGC API – Features /collections/{id}) but its links. */
export function collectionDoc (entry, c) {
  const tj = entry.source.tilejson
  const doc = { id: entry.id, title: tj.name ?? entry.id }
  if (tj.description) doc.description = tj.description
  doc.itemType = 'feature'
  // Every feature's geometry (featureExtentOf), not the tiles' bounds: an estimate, clipped to Web Mercator's world.
  doc.extent = { spatial: { bbox: [featureExtentOf(c.d.pool, c.d) ?? [-180, -90, 180, 90]], crs: CRS84 } }
  // A table with a time: `datetime` selects by it (its bounds are not read: null, open, as the spec allows).
  if (c.temporal !== null) doc.extent.temporal = { interval: [[null, null]], trs: 'http://www.opengis.net/def/uom/ISO-8601/0/Gregorian' }
  doc.crs = c.crs.map((x) => x.uri)
  doc.storageCrs = storageCrs(c.d.srid)
  return doc
}

/** The JSON Schema of a queryable column's values (its queryable, its filter parameter in /api). */
export const schemaOf = (column) => {
  if (INTEGER.has(column.type)) return { type: 'integer' }
  if (NUMBER.has(column.type)) return { type: 'number' }
  if (column.type === 'bool') return { type: 'boolean' }
  return FORMATS[column.type] ? { type: 'string', format: FORMATS[column.type] } : { type: 'string' }
}

/** The queryables (OGC API – Features Part 3): a JSON Schema of what `?column=value` and `sortby` take. */
export function queryablesDoc (entry, c, selfUrl) {
  const geometryType = String(c.d.geomType).toUpperCase().replace(/Z?M?$/, '')
  const properties = {
    geometry: { title: c.d.geom, format: `geometry-${GEOMETRY_FORMAT[geometryType] ?? 'any'}`, 'x-ogc-role': 'primary-geometry' },
  }
  for (const column of c.queryables.values()) {
    properties[column.name] = { title: column.name, ...schemaOf(column), ...(column.name === c.key?.name ? { 'x-ogc-role': 'id' } : {}) }
  }
  return {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    $id: selfUrl,
    type: 'object',
    title: entry.source.tilejson.name ?? entry.id,
    properties,
    additionalProperties: false,
  }
}

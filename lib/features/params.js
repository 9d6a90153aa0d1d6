// The query parameters of /items and /items/{featureId}, read and checked against the collection: every mistake is
// a 400 saying what is wrong. Unknown parameters are refused (the spec allows ignoring them; a typo such as `limt`
// silently ignored would return a wrong page). Nothing read here is ever spliced into SQL: columns come back as the
// catalog's own column objects, values as strings to bind.
import { BadRequest } from '../errors.js'
import { mercatorX, mercatorY } from '../tilemath.js'
import { chooseCrs } from './crs.js'

const ITEMS = ['limit', 'offset', 'bbox', 'bbox-crs', 'crs', 'properties', 'sortby', 'count', 'f', 'datetime']
const ITEM = ['crs', 'properties', 'f']
const ITEMS_SET = new Set(ITEMS)
/** The standard parameters of /items: a queryable of the same name is not a filter. */
export const ITEMS_PARAMETERS = ITEMS_SET
const ITEM_SET = new Set(ITEM)
const MERCATOR_LAT = 85.0511287798 // EPSG:3857 ends here: a CRS84 box past it is clipped for a Mercator table
const MERCATOR_MAX = 20037508.342789244 // and at ±this many metres, east-west and north-south
const NUMBER = /^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/
const INTEGER_TYPES = new Set(['int2', 'int4', 'int8', 'oid'])
const NUMBER_TYPES = new Set(['float4', 'float8', 'numeric'])

const shown = (s) => JSON.stringify(String(s).slice(0, 100))

/** A parameter given once, or undefined; twice is a 400 (which one would win is anyone's guess). */
function one (query, name) {
  const v = query[name]
  if (Array.isArray(v)) throw new BadRequest(`${name} is given more than once`)
  return v
}

function integer (query, name, fallback, min) {
  const v = one(query, name)
  if (v === undefined) return fallback
  if (!/^\d{1,20}$/.test(v) || Number(v) < min) throw new BadRequest(`${name} must be an integer of at least ${min}, not ${shown(v)}`)
  if (Number(v) > Number.MAX_SAFE_INTEGER && name === 'offset') throw new BadRequest(`offset is at most ${Number.MAX_SAFE_INTEGER}`)
  return Number(v)
}

function flag (query, name) {
  const v = one(query, name)
  if (v === undefined || v === 'false') return false
  if (v === 'true') return true
  throw new BadRequest(`${name} is true or false, not ${shown(v)}`)
}

function unknown (name, c, allowed) {
  const queryables = allowed === ITEMS ? `, and the queryables: ${[...c.queryables.keys()].join(', ') || 'none'}` : ''
  return new BadRequest(`unknown parameter ${shown(name)}: this resource takes ${allowed.join(', ')}${queryables}`)
}

/** `crs`: the output CRS, CRS84 when not given. */
const outputCrs = (query, c) => {
  const v = one(query, 'crs')
  return v === undefined ? c.crs[0] : chooseCrs(v, c.crs, 'crs')
}

/** `properties`: the property columns asked for, in table order (one statement whatever the order asked); null: all. */
function readProperties (query, c) {
  const v = one(query, 'properties')
  if (v === undefined) return null
  const names = new Set(v.split(',').map((s) => s.trim()).filter(Boolean))
  for (const name of names) {
    if (!c.propertyNames.has(name)) throw new BadRequest(`properties: no property ${shown(name)}; the properties are ${[...c.propertyNames.keys()].join(', ') || 'none'}`)
  }
  return c.properties.filter((p) => names.has(p.name))
}

/** `sortby`: `col`, `+col` (a `+` arrives as a space) or `-col`, comma-separated, queryable columns only. */
function readSortby (query, c) {
  const v = one(query, 'sortby')
  if (v === undefined) return []
  const seen = new Set()
  return v.split(',').map((part) => {
    const m = /^\s*([+-]?)\s*(.*?)\s*$/.exec(part)
    const column = c.queryables.get(m[2])
    if (column === undefined) throw new BadRequest(`sortby: ${shown(m[2])} is not a queryable property: ${[...c.queryables.keys()].join(', ') || 'none'}`)
    if (seen.has(column.name)) throw new BadRequest(`sortby names ${shown(column.name)} twice`)
    seen.add(column.name)
    return { column, desc: m[1] === '-' }
  })
}

/**
 * `bbox` (4 numbers, or 6 with heights, which are ignored) in `bbox-crs` (CRS84 by default), as lon/lat order for
 * geographic boxes. A CRS84 box whose west edge is east of its east edge crosses the antimeridian: two boxes.
 * → { srid, values: [x1, y1, x2, y2(, x1', y1', x2', y2')] } or null.
 */
function readBbox (query, c) {
  const v = one(query, 'bbox')
  const crsName = one(query, 'bbox-crs')
  if (v === undefined) {
    if (crsName !== undefined) throw new BadRequest('bbox-crs is given without bbox')
    return null
  }
  const crs = crsName === undefined ? c.crs[0] : chooseCrs(crsName, c.crs, 'bbox-crs')
  const parts = v.split(',').map((s) => s.trim())
  if ((parts.length !== 4 && parts.length !== 6) || !parts.every((p) => NUMBER.test(p))) {
    throw new BadRequest(`bbox is 4 numbers (or 6, with heights) separated by commas, not ${shown(v)}`)
  }
  const n = parts.map(Number)
  let [x1, y1, x2, y2] = n.length === 4 ? n : [n[0], n[1], n[3], n[4]]
  if (crs.latLon) [x1, y1, x2, y2] = [y1, x1, y2, x2] // EPSG:4326 is minLat,minLon,maxLat,maxLon
  if (![x1, y1, x2, y2].every(Number.isFinite)) throw new BadRequest('bbox numbers must be finite')
  const geographic = crs.srid === 4326
  if (geographic && ![x1, x2].every((x) => x >= -180 && x <= 180)) throw new BadRequest('bbox longitudes are between -180 and 180')
  if (geographic && ![y1, y2].every((y) => y >= -90 && y <= 90)) throw new BadRequest('bbox latitudes are between -90 and 90')
  if (y1 > y2) throw new BadRequest('bbox: the lower corner is above the upper one')
  if (x1 > x2 && !geographic) throw new BadRequest('bbox: the lower corner is east of the upper one')
  if (geographic && c.d.srid === 3857) [y1, y2] = [y1, y2].map((y) => Math.max(-MERCATOR_LAT, Math.min(MERCATOR_LAT, y)))
  // A Mercator box past the world's edge (a map at zoom 0-1 asks one): PROJ wraps such an x around (30,000 km is
  // 90.5° E), and the box flipped to the middle of the world. Cut to the world, it holds what the client sees.
  if (crs.srid === 3857) [x1, y1, x2, y2] = [x1, y1, x2, y2].map((v) => Math.max(-MERCATOR_MAX, Math.min(MERCATOR_MAX, v)))
  let values = x1 > x2 ? [x1, y1, 180, y2, -180, y1, x2, y2] : [x1, y1, x2, y2]
  if (c.d.domain && crs.srid !== c.d.srid) values = withinDomain(values, crs.srid, c.d.domain)
  if (geographic && c.d.geography) values = narrowed(values, 90) // see sql.js geographyBox
  return { srid: crs.srid, values: values.map(String) } // no values: the box holds nothing the table can
}

/** Boxes (runs of x1, y1, x2, y2) cut into boxes at most `most` wide, side by side. */
function narrowed (values, most) {
  const out = []
  for (let i = 0; i < values.length; i += 4) {
    const [x1, y1, x2, y2] = values.slice(i, i + 4)
    const pieces = Math.max(1, Math.ceil((x2 - x1) / most))
    for (let k = 0; k < pieces; k++) out.push(x1 + ((x2 - x1) * k) / pieces, y1, k === pieces - 1 ? x2 : x1 + ((x2 - x1) * (k + 1)) / pieces, y2)
  }
  return out
}

/**
 * Boxes (runs of x1, y1, x2, y2 in EPSG:4326 or 3857) cut to a table's query domain (lon/lat, see
 * lib/sources/postgis/bounds.js queryDomain); those outside it are left out. A table in a regional CRS cannot take a
 * box of the whole world: PROJ fails (503) or folds it into a polygon that holds the wrong rows.
 */
function withinDomain (values, srid, domain) {
  const [w, s, e, n] = srid === 3857 ? [mercatorX(domain[0]), mercatorY(domain[1]), mercatorX(domain[2]), mercatorY(domain[3])] : domain
  const out = []
  for (let i = 0; i < values.length; i += 4) {
    const box = [Math.max(values[i], w), Math.max(values[i + 1], s), Math.min(values[i + 2], e), Math.min(values[i + 3], n)]
    if (box[0] <= box[2] && box[1] <= box[3]) out.push(...box)
  }
  return out
}

/**
 * A filter value as its column takes it: integers and numbers checked here (a 400 naming the column), booleans
 * normalised; other types are cast by PostgreSQL, which refuses a value that does not fit (a 400 too, see items.js).
 */
function filterValue (column, v) {
  if (INTEGER_TYPES.has(column.type) && !/^[-+]?\d{1,19}$/.test(v)) throw new BadRequest(`${shown(column.name)} is an integer property: ${shown(v)} is not an integer`)
  if (NUMBER_TYPES.has(column.type) && !NUMBER.test(v)) throw new BadRequest(`${shown(column.name)} is a number property: ${shown(v)} is not a number`)
  if (column.type === 'bool') {
    if (!/^(true|false)$/i.test(v)) throw new BadRequest(`${shown(column.name)} is a boolean property: true or false, not ${shown(v)}`)
    return v.toLowerCase()
  }
  return v
}

/**
 * /items parameters → { limit, offset, crs, bbox, properties, sortby, filters, count }. `limit` past `maxLimit` is
 * clamped to it (as the spec allows), not refused. Filters are in column-name order: one statement whatever the URL's.
 */
export function readItemsQuery (query, c, { defaultLimit, maxLimit }) {
  const filters = []
  for (const name of Object.keys(query)) {
    if (ITEMS_SET.has(name)) continue
    const column = c.queryables.get(name)
    if (column === undefined) throw unknown(name, c, ITEMS)
    filters.push({ column, value: filterValue(column, one(query, name)) })
  }
  filters.sort((a, b) => (a.column.name < b.column.name ? -1 : 1))
  return {
    limit: Math.min(integer(query, 'limit', Math.min(defaultLimit, maxLimit), 1), maxLimit),
    offset: integer(query, 'offset', 0, 0),
    crs: outputCrs(query, c),
    bbox: readBbox(query, c),
    properties: readProperties(query, c),
    sortby: readSortby(query, c),
    filters,
    datetime: readDatetime(query, c),
    count: flag(query, 'count'),
  }
}

// RFC 3339 dates and date-times, as OGC API – Features Part 1 (7.15.4) writes `datetime`'s instants and interval ends.
const DATE = /^(\d{4})-(\d{2})-(\d{2})$/
const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$/ // (to the nanosecond: PostgreSQL keeps microseconds)

/**
 * One end of a datetime: { value, date, ms, sub }, null for an open end (`..` or ''). `value` is what is bound: a date
 * as it is (`2024-05-01`: a whole day, in UTC), a date-time as written, checked here and read by PostgreSQL as a
 * timestamptz (sql.js timeBound), so that every column type reads the same instant (a `timestamp` or `date` cast would
 * drop an offset) with every digit of its fraction: made a JS Date, it was cut to milliseconds, and a feature's own
 * time in microseconds (`…00.123456Z`) selected nothing. `ms`: when it starts; `sub`: its fraction past the millisecond.
 */
function timeEnd (text, whole) {
  if (text === '..' || text === '') return null
  const m = DATE.exec(text) ?? DATE_TIME.exec(text)
  const ms = m === null ? NaN : Date.parse(text.length === 10 ? `${text}T00:00:00Z` : text.toUpperCase())
  // Date.parse rolls 2021-02-30 over to March: the parts must be the ones read back. Year 0 is none PostgreSQL has.
  const real = m !== null && !Number.isNaN(ms) && m[1] !== '0000' && new Date(Date.parse(`${m[1]}-${m[2]}-${m[3]}T00:00:00Z`)).toISOString().startsWith(`${m[1]}-${m[2]}-${m[3]}`)
  if (!real || (m[4] !== undefined && (Number(m[4]) > 23 || Number(m[5]) > 59 || Number(m[6]) > 60))) {
    throw new BadRequest(`datetime: ${shown(whole)} is no RFC 3339 date or date-time (2018-02-12, 2018-02-12T23:20:50Z; an offset's + written %2B), nor an interval of them (a/b, ../b, a/..)`)
  }
  const date = text.length === 10
  // A date-time is bound in UTC with its fraction as written: PostgreSQL refuses offsets past ±15:59, which RFC 3339
  // allows (to ±23:59), and an offset is whole minutes, so the fraction is the same in UTC.
  const second = ms - (((ms % 1000) + 1000) % 1000)
  const value = date ? text : `${new Date(second).toISOString().slice(0, 19)}${m[7] ?? ''}Z`
  return { value, date, ms, sub: date || m[7] === undefined ? 0 : Number(`0.${m[7].slice(4)}`) }
}

const DAY_MS = 86_400_000

/** Whether the interval from/to ends before it starts (a date as its end: the whole day). */
function endsBefore (from, to) {
  const toMs = to.ms + (to.date ? DAY_MS - 1 : 0)
  return from.ms > toMs || (from.ms === toMs && !to.date && from.sub > to.sub)
}

/**
 * `datetime`: an instant or an interval (either end open) → { from, to } (timeEnd's, each null when open; an instant
 * is both), or null when not given. Checked whether or not the collection has a time; one without (c.temporal null)
 * selects every feature. A date as an end takes its whole day (sql.js whereOf says how for each column type).
 */
function readDatetime (query, c) {
  const text = one(query, 'datetime')
  if (text === undefined) return null
  const parts = text.split('/')
  if (parts.length > 2) throw new BadRequest(`datetime: ${shown(text)} is not an instant nor an interval a/b`)
  const from = timeEnd(parts[0], text)
  const to = parts.length === 1 ? from : timeEnd(parts[1], text)
  if (parts.length === 1 && from === null) throw new BadRequest('datetime: an instant is a date or date-time, not ..')
  if (from === null && to === null) throw new BadRequest('datetime: an interval has at least one end (../.. is every time: leave datetime out)')
  if (from !== null && to !== null && endsBefore(from, to)) throw new BadRequest(`datetime: ${shown(text)} ends before it starts`)
  return c.temporal === null ? null : { from, to }
}

/** /items/{featureId} parameters → { crs, properties }. */
export function readItemQuery (query, c) {
  for (const name of Object.keys(query)) if (!ITEM_SET.has(name)) throw unknown(name, c, ITEM)
  return { crs: outputCrs(query, c), properties: readProperties(query, c) }
}

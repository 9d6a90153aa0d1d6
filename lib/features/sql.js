// The SQL of features: each row one GeoJSON Feature as text, made by PostgreSQL (ST_AsGeoJSON and to_json, joined
// by string concatenation: about a third faster than json_build_object, whose text has spaces, and no JSON parse of
// the geometry), so Node never parses a feature. Identifiers and literals come from the catalog, quoted here; request
// values are always bound parameters, in the order `valuesOf` gives them. One statement text per collection and
// parameter shape, kept (and prepared under a name on each connection) for the first SHAPES shapes of a collection.
import { UNDRAWABLE_ST, baseType, drawableSql, quoteIdent as q, quoteLiteral, shortWaySql, statementName } from '../sources/postgis/sql.js'

// Past this many shapes a collection's statements run unnamed: a client inventing shapes (every subset of
// properties) must not fill each connection with prepared statements.
const SHAPES = 200
// Types a bound value is cast to for `=`, so that the column's own index and operator serve. Others are cast to the
// type discovery found their `=` on (column.equalAs: inet, interval, an enum, a domain's base type), or, without one,
// compare as text.
const CASTS = new Set(['int2', 'int4', 'int8', 'float4', 'float8', 'numeric', 'bool', 'text', 'varchar', 'bpchar', 'name',
  'date', 'time', 'timestamp', 'timestamptz', 'uuid'])
// Types whose cast without a length cuts the value ("char" keeps the first byte, bit the first bit: `?c=ab` matched
// 'a'), or refuses a longer one (bit(1)): compared as text, which is exact for them.
const CUT_BY_CAST = new Set(['pg_catalog."char"', 'pg_catalog."bit"']) // (as format's %I quotes them)
const MERCATOR_FRIENDS = new Set([4326, 3857]) // boxes stay boxes between these two: no densifying
const POINTS = /^(MULTI)?POINT/i // geometry types without edges
// Types that hold no polygon (nor surface): their rows need no ring oriented.
const NO_RINGS = /^(MULTI)?(POINT|LINESTRING|CIRCULARSTRING|COMPOUNDCURVE|CURVE)[ZM]*$/i // (anchored: CURVEPOLYGON holds rings)
// Types that hold nothing but polygons, once linearised.
const POLYGONAL = /^((MULTI)?POLYGON|CURVEPOLYGON|MULTISURFACE)/i

/**
 * `g` with its polygons' rings by RFC 7946's right-hand rule (3.1.6: exterior counterclockwise, holes clockwise; as
 * GDAL writes with RFC7946=YES): rows are stored either way (an ST_Buffer's exterior is clockwise). PostGIS's
 * ST_ForcePolygonCCW is ST_Reverse(ST_ForcePolygonCW(g)), which reverses lines too: in a column of any type a row that
 * is no polygon stays as it is, and a collection is oriented member by member. Columns that hold no polygon pay nothing.
 */
function ringsOriented (g, geomType) {
  if (NO_RINGS.test(geomType)) return g
  if (POLYGONAL.test(geomType)) return `ST_ForcePolygonCCW(${g})`
  const member = 'CASE WHEN ST_Dimension(m) = 2 THEN ST_ForcePolygonCCW(m) ELSE m END'
  const collection = `(SELECT ST_ForceCollection(ST_Collect(${member} ORDER BY i)) FROM generate_series(1, ST_NumGeometries(o)) AS i, ST_GeometryN(o, i) AS m)`
  return `(SELECT CASE WHEN ST_Dimension(o) < 2 THEN o WHEN ST_GeometryType(o) <> 'ST_GeometryCollection' THEN ST_ForcePolygonCCW(o) ELSE ${collection} END FROM (SELECT ${g} AS o) AS o)`
}

const col = (name) => `g.${q(name)}`
// Every value through to_json (strings escaped, json as it is), integers and booleans too: printed as text on the
// type found at discovery, a column altered since (integer to text) put its raw text into the JSON, where a value
// could add keys of its own (`0,"admin":true`). Arrays become JSON arrays (as pg_featureserv gives them). to_json
// writes an oid as a string: cast, it is the integer its queryable (and the tiles' field) says.
const JSON_CASTS = new Map([['oid', '::int8'], ['_oid', '::int8[]']])
const jsonOf = (c) => `to_json(${col(c.name)}${JSON_CASTS.get(c.type) ?? ''})::text`
// As text, `?ip=10.0.0.1` found no inet 10.0.0.1 (its text is 10.0.0.1/32), `?p=05` no 5 in a domain over integer,
// and a label no enum has matched nothing instead of being refused (400: PostgreSQL's invalid input is class 22).
function compared (column, i) {
  if (CASTS.has(column.type)) return `${col(column.name)} = $${i}::${column.type}`
  if (column.equalAs && !CUT_BY_CAST.has(column.equalAs)) return `${col(column.name)} = $${i}::text::${column.equalAs}`
  return `${col(column.name)}::text = $${i}::text`
}

// What a GeoJSON GeometryCollection holds: points, lines and polygons, single or multi. ST_AsGeoJSON raised "GeoJson:
// geometry not supported" on a collection holding a collection, a TIN, a polyhedral surface, or a multicurve or
// multisurface (which ST_CurveToLine leaves so inside one): that page was a 503, and so was the page before it, which
// reads one row past its end. The stored members' types, as each is written once linearised.
const IN_COLLECTION = ['ST_Point', 'ST_LineString', 'ST_Polygon', 'ST_MultiPoint', 'ST_MultiLineString', 'ST_MultiPolygon',
  'ST_Triangle', 'ST_CircularString', 'ST_CompoundCurve', 'ST_CurvePolygon'].map(quoteLiteral).join(', ')
const membersWritable = (g) =>
  `NOT EXISTS (SELECT FROM generate_series(1, ST_NumGeometries(${g})) AS i WHERE ST_GeometryType(ST_GeometryN(${g}, i)) NOT IN (${IN_COLLECTION}))`

/**
 * The condition that a row's stored geometry `g` is output (else null), where its column may hold one that is not:
 * a TIN, triangle or polyhedral surface tiles leave out (in a column of any type), a collection GeoJSON cannot hold
 * (in one of any type or of collections). Only a collection's members are looked at, in its own rows: the CASE
 * that tells the types apart costs the others nothing more. Null where no row can be one.
 */
function writableSql (g, geomType) {
  const type = baseType(geomType)
  if (type === 'GEOMETRYCOLLECTION') return membersWritable(g)
  if (type !== 'GEOMETRY') return null
  return `CASE ST_GeometryType(${g}) WHEN 'ST_GeometryCollection' THEN ${membersWritable(g)}${UNDRAWABLE_ST.map((st) => ` WHEN '${st}' THEN false`).join('')} ELSE true END`
}

// A geography's edges are great circles, each the shorter way round. Cast to geometry, a line from 170° to -170°
// came out as [170, -170], which every GeoJSON client draws 340° round through 0°. RFC 7946 3.1.9 asks such a
// geometry cut at the antimeridian so that no part crosses it, as the tiles draw it (lib/sources/postgis/sql.js
// shortWaySql, shared): a row whose lon/lat is wider than 180° and narrower once in 0..360 (ST_ShiftLongitude) is cut
// at 180° (ST_WrapX), a LineString into a MultiLineString, a Polygon into a MultiPolygon, the cut where its edge meets
// 180° as a client draws it (straight in lon/lat). A row wider than 180° either way (round the world) is as it is.
// Other rows pay a look at the box of their cast, made once a row (geojsonOf): +12 % of the database's CPU time for
// the features of 10-vertex lines (+20 % casting at each look); points and `geometry` columns nothing. Not
// segmentized as the tiles are: the features are the rows' own vertices.
const mayCross = (d) => d.geography && !POINTS.test(d.geomType)

/**
 * The geometry as output (`stored`: the column as geometry): declared, linearised, cut at 180° (a geography),
 * transformed, its rings oriented, axes flipped for a lat,lon CRS.
 */
function geometryOut (d, crs, stored) {
  let g = stored
  if (d.storedSrid === 0) g = `ST_SetSRID(${g}, ${d.srid})`
  if (d.curved) g = `ST_CurveToLine(${g})`
  const cut = mayCross(d) ? shortWaySql(g) : g
  // A row with a NaN or Infinity coordinate makes ST_Transform raise (the whole page a 503): it is null instead.
  // (Told on the row uncut: the same answer, without cutting it twice.)
  g = crs.srid !== d.srid ? `CASE WHEN ${drawableSql(g, d.geomType)} THEN ST_Transform(${cut}, ${crs.srid}) END` : cut
  // Oriented in the output CRS's x/y, before a lat,lon flip: the ring runs the same way over the ground.
  g = ringsOriented(g, d.geomType)
  // So is a row tiles leave out for its type (a TIN in a `geometry` column): ST_AsGeoJSON cannot write a polyhedral
  // surface (the whole page a 503). Told by the stored type: linearised, a TIN is a collection of polygons. And so is
  // a collection GeoJSON cannot hold (writableSql).
  const writable = writableSql(stored, d.geomType)
  if (writable !== null) g = `CASE WHEN ${writable} THEN ${g} END`
  return crs.latLon ? `ST_FlipCoordinates(${g})` : g
}

/**
 * The geometry's GeoJSON (options 0: no `crs` member), made once a row by a lateral subquery (OFFSET 0: else
 * PostgreSQL copies ST_AsGeoJSON into each use of it in featureText, and makes it two or three times). A geography
 * that may be cut is cast once, the same way, for shortWaySql's looks.
 */
function geojsonOf (c, crs, precision) {
  const stored = c.d.geography ? `${col(c.d.geom)}::geometry` : col(c.d.geom)
  const [geometry, cast] = mayCross(c.d) ? ['tc_cast.geometry', ` FROM (SELECT ${stored} AS geometry OFFSET 0) AS tc_cast`] : [stored, '']
  return `CROSS JOIN LATERAL (SELECT ST_AsGeoJSON(${geometryOut(c.d, crs, geometry)}, ${precision}, 0) AS geojson${cast} OFFSET 0) AS tc_geojson`
}
// ST_AsGeoJSON writes a coordinate that is no number (POINT(NaN NaN), PostGIS's empty point in WKB, or an Infinity
// from a transform) as NaN or Infinity (older number printers: nan, inf): invalid JSON, and the whole page with it.
// An empty geometry (POINT EMPTY) it writes with `"coordinates":[]`, which GeoJSON schemas refuse for a Point (RFC
// 7946 lets a reader take it as null). No type or member name of a geometry's GeoJSON holds `nan` or `inf` in any
// case, nor does anything else hold `[]`, so one look finds them all; such a geometry is null.
const GEOMETRY = `CASE WHEN tc_geojson.geojson ~* '(nan|inf|\\[\\])' THEN 'null' ELSE coalesce(tc_geojson.geojson, 'null') END`

/** The Feature text of a row (FROM … `geojsonOf`): type, id (the key), geometry, properties. */
function featureText (c, properties) {
  const parts = [`'{"type":"Feature"'`]
  if (c.key !== null) parts.push(`',"id":' || coalesce(${jsonOf(c.key)}, 'null')`)
  parts.push(`',"geometry":' || ${GEOMETRY}`)
  parts.push(`',"properties":{'`)
  properties.forEach((p, i) => parts.push(`${quoteLiteral(`${i > 0 ? ',' : ''}${JSON.stringify(p.name)}:`)} || coalesce(${jsonOf(p)}, 'null')`))
  parts.push(`'}}'`)
  return parts.join(' || ')
}

/**
 * A box in the table's SRID. In that SRID already, it stays a plain expression: the planner sees its values (custom
 * plans) and estimates how many rows it holds, to choose between the spatial index and the key's. A box to transform
 * (densified first where its edges would bend) is made once per query instead (an InitPlan): ST_Intersects would
 * otherwise transform it again for every row.
 */
function boxOf (d, srid, i) {
  const [x1, y1, x2, y2] = [i, i + 1, i + 2, i + 3].map((k) => `$${k}::float8`)
  let box = `ST_MakeEnvelope(${x1}, ${y1}, ${x2}, ${y2}, ${srid})`
  const plain = srid === d.srid && !d.geography
  if (srid !== d.srid) {
    if (!(MERCATOR_FRIENDS.has(srid) && MERCATOR_FRIENDS.has(d.srid))) box = `ST_Segmentize(${box}, greatest(${x2} - ${x1}, ${y2} - ${y1}, 1e-9) / 64)`
    box = `ST_Transform(${box}, ${d.srid})`
  }
  if (d.geography) return geographyBox(d, box, srid, i)
  return plain ? box : `(SELECT ${box})`
}

/**
 * A bbox over a geography column: a box in lon/lat, its edges along parallels and meridians as for every other table
 * (cast to geography as it is, its edges became great circles, and a box 20° wide found points north of it and missed
 * some inside). The spatial index takes a geography box a little larger than the box (1 % a side, finely
 * segmentized: no point of the box is outside its great-circle edges). The exact test is PostGIS's geography one, as
 * the index's: a line's edges are great circles, and one from 170° to -170° runs over the antimeridian, not through
 * 0° as its cast to geometry does (each box over where it runs missed it). The box it meets is the lon/lat box with
 * vertices 1/256 of its size apart, whose great-circle edges stray from its parallels by centimetres (a 10° box) to
 * some 15 m (a 90° one). Points have no edges: their test stays the plain one on the lon/lat box, both exact and cheaper.
 * params.js cuts geographic boxes wider than 90° (a geography polygon is ambiguous past 180°).
 */
function geographyBox (d, box, srid, i) {
  // `box` is in the column's lon/lat already; a box asked in it widens by its own size, one transformed by 0.01°.
  const [x1, y1, x2, y2] = srid === d.srid ? [i, i + 1, i + 2, i + 3].map((k) => `$${k}::float8`) : ['ST_XMin(b)', 'ST_YMin(b)', 'ST_XMax(b)', 'ST_YMax(b)']
  const m = srid === d.srid ? `(0.01 * greatest(${x2} - ${x1}, ${y2} - ${y1}) + 1e-9)` : '0.01'
  const wider = `ST_MakeEnvelope(greatest(${x1} - ${m}, -180), greatest(${y1} - ${m}, -90), least(${x2} + ${m}, 180), least(${y2} + ${m}, 90), ${d.srid})`
  const index = `ST_Segmentize(${wider}, 0.25)::geography`
  const along = 'ST_Segmentize(b, greatest(ST_XMax(b) - ST_XMin(b), ST_YMax(b) - ST_YMin(b), 1e-9) / 256)::geography'
  return {
    index: srid === d.srid ? `(SELECT ${index})` : `(SELECT ${index} FROM (SELECT ${box} AS b) AS b)`,
    exact: POINTS.test(d.geomType) ? `ST_Intersects(${col(d.geom)}::geometry, (SELECT ${box}))` : `ST_Intersects(${col(d.geom)}, (SELECT ${along} FROM (SELECT ${box} AS b) AS b))`,
  }
}

// ST_Intersects brings its own `&&` on the GiST index (PostGIS >= 3.0 adds it to the plan as the index condition);
// writing `&&` beside it again would square the planner's estimate of the rows in the box, and with it its choices.
// A row whose geometry is output null for its type (geometryOut) is in no box; GEOS raised on a polyhedral surface
// (the whole page a 503), as on a collection holding one: the exact test is skipped for it, behind the index's own `&&`.
// So is a row of another SRID than the one served (rowSrid), on which ST_Intersects raised "mixed SRID geometries".
// A column whose SRID the config declares (storedSrid 0) holds SRID-0 rows, and may hold rows in a real SRID that came
// after discovery: the box stays in the declared SRID and meets each row declared so (ST_SetSRID), behind a `&&` on the
// raw column for the index (`&&` compares boxes, whatever their SRIDs). A box made SRID 0 raised "mixed SRID
// geometries" on the first row in a real one (a 503 for every bbox until the next discovery); tiles declare rows alike.
function intersects (d, box) {
  if (typeof box !== 'string') return `(${col(d.geom)} && ${box.index} AND ${box.exact})`
  const served = [writableSql(col(d.geom), d.geomType), rowSridSql(d)].filter((c) => c !== null)
  if (served.length === 0 && d.storedSrid !== 0) return `ST_Intersects(${col(d.geom)}, ${box})`
  const exact = `ST_Intersects(${d.storedSrid === 0 ? `ST_SetSRID(${col(d.geom)}, ${d.srid})` : col(d.geom)}, ${box})`
  return `(${col(d.geom)} && ${box} AND ${served.length === 0 ? exact : `CASE WHEN ${served.join(' AND ')} THEN ${exact} END`})`
}

/** In a column without a typmod, the condition that a row is of the SRID served (introspect.js describeTable); else null. */
const rowSridSql = (d) => (d.rowSrid == null ? null : `ST_SRID(${col(d.geom)}) = ${d.rowSrid}`)

const from = (d) => `FROM ${q(d.schema)}.${q(d.table)} AS g`

/**
 * One bound of `datetime` (params.js readDatetime) on the time column `t`, parameter $n: a date-time is bound as
 * written and read as a timestamptz, to the microsecond, then in UTC for a `timestamp` or `date` column (their own
 * cast would drop its offset); a date is
 * its whole day in UTC (an end: before the next day; the day added here, where year 9999 has one).
 */
function timeBound (t, op, wholeDay, n) {
  const c = col(t.name)
  if (wholeDay) {
    const day = op === '>=' ? `$${n}::date` : `($${n}::date + 1)`
    const start = t.type === 'timestamptz' ? `(${day}::timestamp AT TIME ZONE 'UTC')` : t.type === 'timestamp' ? `${day}::timestamp` : day
    return op === '>=' ? `${c} >= ${start}` : `${c} < ${start}`
  }
  const instant = t.type === 'timestamptz' ? `$${n}::timestamptz` : t.type === 'timestamp' ? `($${n}::timestamptz AT TIME ZONE 'UTC')` : `($${n}::timestamptz AT TIME ZONE 'UTC')::date`
  return `${c} ${op} ${instant}`
}

/** The WHERE of a request's shape, with its parameters from $1 on → { where, next (the next free number) }. */
function whereOf (c, shape) {
  const conds = [rowSridSql(c.d)].filter((cond) => cond !== null)
  let i = 1
  if (shape.bbox !== null) {
    const boxes = []
    for (let b = 0; b < shape.bbox.values.length / 4; b++, i += 4) boxes.push(boxOf(c.d, shape.bbox.srid, i))
    // no box: the one asked for lies outside what the table's CRS can hold (params.js withinDomain)
    if (boxes.length === 0) conds.push('false')
    else conds.push(boxes.length === 1 ? intersects(c.d, boxes[0]) : `(${boxes.map((b) => intersects(c.d, b)).join(' OR ')})`)
  }
  for (const f of shape.filters) conds.push(compared(f.column, i++))
  const time = shape.datetime
  if (time != null) {
    if (time.from !== null) conds.push(timeBound(c.temporal, '>=', time.from.date, i++))
    if (time.to !== null) conds.push(timeBound(c.temporal, '<=', time.to.date, i++))
  }
  return { where: conds.length ? `\nWHERE ${conds.join(' AND ')}` : '', next: i }
}

/**
 * The ORDER BY: the sort asked for, then the key, so that pages never overlap nor miss a row. Without sortby and
 * with `byKey` false, none: rows come as PostgreSQL finds them (for a box, as the spatial index yields them), which
 * spares reading and sorting every row in the box (up to 3x less database time on a dense box) but no longer
 * promises that consecutive pages are disjoint.
 */
function orderOf (c, sortby, byKey) {
  const terms = sortby.map((s) => `${col(s.column.name)} ${s.desc ? 'DESC' : 'ASC'}`)
  if (c.key !== null && (byKey || terms.length > 0) && !sortby.some((s) => s.column.name === c.key.name)) terms.push(`${col(c.key.name)} ASC`)
  return terms.length ? `\nORDER BY ${terms.join(', ')}` : ''
}

/** The columns a page's features are made of, read by the inner query. */
function columnsOf (c, properties) {
  const names = new Set([...(c.key !== null ? [c.key.name] : []), c.d.geom, ...properties.map((p) => p.name)])
  return [...names].map(col).join(', ')
}

const statements = new WeakMap() // collection → shape key → statement

function cached (c, key, build) {
  let byShape = statements.get(c)
  if (byShape === undefined) statements.set(c, (byShape = new Map()))
  const known = byShape.get(key)
  if (known !== undefined) return known
  const made = build()
  if (byShape.size >= SHAPES) return { ...made, name: '', countName: '' } // unnamed: parsed each time, kept nowhere
  byShape.set(key, made)
  return made
}

const named = (text, countText) => ({ text, name: statementName(text), countText, countName: countText && statementName(countText) })

/**
 * The statement of an /items request (see params.js readItemsQuery): `text` (LIMIT and OFFSET the last two
 * parameters), `countText` (numberMatched), their names ('' for unnamed). The page is chosen by an inner query and
 * only its rows are made into Features: rows skipped by OFFSET are never formatted. `byKey`: see orderOf.
 */
export function itemsStatement (c, request, precision, byKey = true) {
  const properties = request.properties ?? c.properties
  const key = JSON.stringify([request.crs.uri, precision, byKey, request.properties?.map((p) => p.name), request.bbox && [request.bbox.srid, request.bbox.values.length],
    request.filters.map((f) => f.column.name), request.sortby.map((s) => [s.column.name, s.desc]),
    request.datetime && [request.datetime.from?.date, request.datetime.to?.date]])
  return cached(c, key, () => {
    const { where, next } = whereOf(c, request)
    const page = `SELECT ${columnsOf(c, properties)} ${from(c.d)}${where}${orderOf(c, request.sortby, byKey)}\n  LIMIT $${next} OFFSET $${next + 1}`
    const text = `SELECT ${featureText(c, properties)}\nFROM (${page}) AS g ${geojsonOf(c, request.crs, precision)}`
    return named(text, `SELECT count(*)::text ${from(c.d)}${where}`)
  })
}

/** The bound values of an /items request, in the statement's order: boxes, filters, datetime's bounds, then LIMIT
 * (one more, to know if there is a next page) and OFFSET. */
export function itemsValues (request) {
  const time = request.datetime ? [request.datetime.from, request.datetime.to].filter((end) => end !== null).map((end) => end.value) : []
  return [...(request.bbox?.values ?? []), ...request.filters.map((f) => f.value), ...time, String(request.limit + 1), String(request.offset)]
}

/** The statement of /items/{featureId}: the row whose key is $1. */
export function itemStatement (c, request, precision) {
  const key = JSON.stringify(['item', request.crs.uri, precision, request.properties?.map((p) => p.name)])
  return cached(c, key, () => named(`SELECT ${featureText(c, request.properties ?? c.properties)}\n${from(c.d)} ${geojsonOf(c, request.crs, precision)}\nWHERE ${[compared(c.key, 1), rowSridSql(c.d)].filter((cond) => cond !== null).join(' AND ')}`, null))
}

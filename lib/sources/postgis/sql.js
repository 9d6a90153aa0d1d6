// The SQL of PostGIS tiles, as pure functions of a table or function description: no database, no pg. Identifiers and
// literals from the catalog are quoted here; request values are never spliced in: z, x, y (and a function's query)
// are always the bound parameters $1..$4.
import { createHash } from 'node:crypto'
import { mercatorX, mercatorY } from '../../tilemath.js'

export const quoteIdent = (s) => `"${String(s).replaceAll('"', '""')}"`
export const quoteLiteral = (s) => `'${String(s).replaceAll("'", "''")}'`

const NUMBER_TYPES = new Set(['int2', 'int4', 'int8', 'float4', 'float8', 'oid'])
// Types ST_AsMVT encodes as they are (numbers and booleans as such, jsonb spread into keys, the rest as their text);
// others are passed as text so a column of any type never breaks a tile. An oid is no number to ST_AsMVT (it wrote
// its text): cast to int8, it is the Number its field says.
const NATIVE_TYPES = new Set(['int2', 'int4', 'int8', 'float4', 'float8', 'bool', 'text', 'varchar', 'bpchar', 'char', 'name', 'json', 'jsonb'])
const CAST_TYPES = new Map([['oid', 'int8']])
// Geometry types ST_AsMVT rejects ("'Triangle' geometry type not supported"): such a column is never served; such a
// row of a column of any type (`geometry`, no typmod) is left out (drawableSql), and is a null geometry in features
// (features/sql.js writableSql).
const UNDRAWABLE = new Set(['TIN', 'TRIANGLE', 'POLYHEDRALSURFACE'])
export const UNDRAWABLE_ST = ['ST_Tin', 'ST_Triangle', 'ST_PolyhedralSurface']
// Column types that may hold curves, which ST_AsMVTGeom cannot encode: those go through ST_CurveToLine first.
/** A geometry type without its dimensions: 'CircularStringM' → 'CIRCULARSTRING', 'POLYGONZM' → 'POLYGON'. */
export const baseType = (geomType) => String(geomType).toUpperCase().replace(/Z?M?$/, '')
const MAYBE_CURVED = new Set(['GEOMETRY', 'GEOMETRYCOLLECTION', 'CIRCULARSTRING', 'COMPOUNDCURVE', 'CURVEPOLYGON', 'MULTICURVE', 'MULTISURFACE'])

/** Whether a column of this geometry type may hold curves (ST_CurveToLine first: MVT and GeoJSON have none). */
export const mayBeCurved = (geomType) => MAYBE_CURVED.has(baseType(geomType))

/** The column name of the drawn geometry in the tile query; a table column of that name is left out of the tile. */
export const GEOM_ALIAS = 'tc_mvt_geom'
/** The column name of the feature id in the tile query (the key's value); a table column of that name is left out too. */
export const ID_ALIAS = 'tc_mvt_id'
const WORLD_BOX = 'ST_MakeEnvelope(-20037508.342789244, -20037508.342789244, 20037508.342789244, 20037508.342789244, 3857)::box2d'

// Geometry types by the test that shows their coordinates finite (drawableSql).
const LINEAR = new Set(['LINESTRING', 'MULTILINESTRING', 'CIRCULARSTRING', 'COMPOUNDCURVE', 'MULTICURVE'])
const AREAL = new Set(['POLYGON', 'MULTIPOLYGON', 'CURVEPOLYGON', 'MULTISURFACE'])
const ST_TYPES = { POINT: 'ST_Point', LINESTRING: 'ST_LineString', MULTILINESTRING: 'ST_MultiLineString', CIRCULARSTRING: 'ST_CircularString', COMPOUNDCURVE: 'ST_CompoundCurve', MULTICURVE: 'ST_MultiCurve', POLYGON: 'ST_Polygon', MULTIPOLYGON: 'ST_MultiPolygon', CURVEPOLYGON: 'ST_CurvePolygon', MULTISURFACE: 'ST_MultiSurface' }

/**
 * A condition that holds when a row of a column of `geomType` can be drawn: every x and y of geometry `g` (SQL) is
 * finite, and (in a column of any type) it is no TIN, triangle or polyhedral surface. A row holding NaN or ±Infinity
 * (ST_MakePoint of a division by zero) made ST_Transform raise for the whole tile (503: the other rows lost too), or
 * ST_AsMVT write it at INT_MIN (x86's answer to a C cast of NaN, which C leaves undefined): such a row is left out.
 * PostGIS's boxes skip NaN (POLYGON((0 0,NaN 0,1 1,0 0)) has the box of its other points), so the coordinates are
 * summed into lengths, through which NaN and Infinity carry: one pass over the points, no measurable cost on a tile.
 * Multipoints and collections are made a line of all their points first (ST_Points); dumping them point by point in
 * a subquery had doubled a multipoint tile's time. The types are told apart by the CASE that already chooses each
 * row's test: one TIN made every tile holding it a 503 ("'Triangle' geometry type not supported"), at no cost. So
 * is a collection holding a polyhedral surface, at any depth, on which ST_AsMVTGeom raised ("lwgeom_get_basic_type:
 * Invalid type (13)"): its members' types are looked at in collections' rows only (holdsSurface; a collection of
 * collections ST_AsMVTGeom flattens and draws).
 */
/**
 * Whether collection `g` holds a polyhedral surface, at any depth. One pass over its members, as when only one level
 * down was looked at: a polyhedral surface among them says so, and a collection among them (rare) has its WKT searched
 * for one (written once, to 0 decimals). ST_Dump cannot tell: it dumps a polyhedral surface into its polygons, as it
 * does a multipolygon. A recursive query over the members could, but PostgreSQL costed it at thousands of times a
 * row's test (a guess of 1,000 members at each level), which put even an empty tile's query past jit_above_cost:
 * JIT-compiled, discovery's warm-up of the test database took 19 s instead of 1.3. This one is costed as the
 * one-level test was, and takes as long on collections of points and lines (200,000 rows). Rows of other types pay
 * nothing: the CASE of drawableSql never gets here.
 */
const holdsSurface = (g) => `EXISTS (SELECT FROM generate_series(1, ST_NumGeometries(${g})) AS i WHERE CASE ST_GeometryType(ST_GeometryN(${g}, i))` +
  ` WHEN 'ST_PolyhedralSurface' THEN true WHEN 'ST_GeometryCollection' THEN strpos(ST_AsText(ST_GeometryN(${g}, i), 0), 'POLYHEDRALSURFACE') > 0 ELSE false END)`

export function drawableSql (g, geomType) {
  const test = (type) => {
    if (type === 'POINT') return `abs(ST_X(${g})) + abs(ST_Y(${g})) < 'Infinity'`
    if (LINEAR.has(type)) return `ST_Length(${g}) < 'Infinity'`
    if (AREAL.has(type)) return `ST_Perimeter(${g}) < 'Infinity'`
    if (type === 'MULTIPOINT') return `ST_Length(ST_LineFromMultiPoint(${g})) < 'Infinity'`
    const points = `ST_Length(ST_LineFromMultiPoint(ST_Points(${g}))) < 'Infinity'`
    if (type !== 'GEOMETRYCOLLECTION') return points
    return `${points} AND NOT ${holdsSurface(g)}`
  }
  const type = baseType(geomType)
  if (type !== 'GEOMETRY') return test(type)
  // A column of any type: the test of each row's own.
  const tests = [...Object.entries(ST_TYPES).map(([t, st]) => ` WHEN '${st}' THEN ${test(t)}`), ...UNDRAWABLE_ST.map((st) => ` WHEN '${st}' THEN false`),
    ` WHEN 'ST_GeometryCollection' THEN ${test('GEOMETRYCOLLECTION')}`]
  return `CASE ST_GeometryType(${g})${tests.join('')} ELSE ${test('ANY')} END`
}

/** Whether ST_AsMVTGeom can draw a column of this geometry_columns type ('TINZ', 'POINTM' …: the Z/M suffix aside). */
export const undrawable = (geomType) => UNDRAWABLE.has(baseType(geomType))

/** Statement names from the SQL itself: re-discovery reuses what each connection already prepared. */
export const statementName = (sql) => 'tc_' + createHash('sha1').update(sql).digest('hex').slice(0, 24)

const fieldType = (t) => (NUMBER_TYPES.has(t) ? 'Number' : t === 'bool' ? 'Boolean' : 'String')
// ST_AsMVT spreads a jsonb column into one property per key, so it names no field of its own; a json column is its
// text, a String.
const listedField = (c) => c.type !== 'jsonb'

/**
 * The TileJSON `fields` of a table's layer: what its features may carry. The key column is a field too: it is the
 * feature id, and a property where it is negative (tableTileSql).
 */
export const layerFields = (columns) =>
  Object.fromEntries(columns.filter(listedField).map((c) => [c.name, fieldType(c.type)]))

// A geography's edges are great circles, each the shorter way round; drawn as its geometry, an edge is planar in
// lon/lat, and one over the antimeridian (170° to -170°) ran the long way, 340° through 0°, while the tiles at 180°
// had nothing of it. Like martin and pg_tileserv, which draw the cast as it is, a geography column is drawn as
// lon/lat geometry, but as PostGIS means it:
// - Along its great circles: an edge longer than GEOGRAPHY_REACH_M / 2^(z/2) metres (1,000 km at z0, 31 km at z10,
//   2 km at z18) is segmentized first, as a geography. A chord of length d strays from its arc by about d² tan(lat) / 8R:
//   under a quarter of a 256 px pixel up to 70°, at every zoom. Tied to the zoom, long edges (a flight route) get
//   vertices where they show, not a thousand on a z0 tile; a fixed bound was too coarse for z14 or too dense for z2.
// - The short way over the antimeridian: a row whose lon/lat is wider than 180° and narrower once in 0..360
//   (ST_ShiftLongitude) is drawn so, cut at 180° (ST_WrapX): a line on both sides of it, a polygon as two. A row
//   wider than 180° either way (round the world, over both 0° and 180°) is drawn as it is. Told by the row's own
//   box: a great-circle arc spans no other longitudes than its ends' (unless over a pole).
// Rows smaller than the bound (the box of their own cast, which holds every edge) skip ST_Segmentize, and rows
// narrower than 180° the rest: they pay a few looks at the box of their cast, which is cheap to make again (a tile of
// 100,000 short lines took as long; always segmentized, twice as long). One expression, made where the row is read:
// a lateral subquery making each value once kept the drawing out of parallel workers. Points have no edges: drawn as
// they are. Geometry columns pay nothing: none of this is there.
const GEOGRAPHY_REACH_M = 1_000_000
const POINTS = new Set(['POINT', 'MULTIPOINT'])

/** Geography `g` as the geometry drawn: along its great circles, and the short way over 180°. */
function geographyDrawnSql (g) {
  const cast = `${g}::geometry`
  const reach = `(${GEOGRAPHY_REACH_M} / sqrt(2 ^ $1::integer::float8))`
  const along = `CASE WHEN (ST_XMax(${cast}) - ST_XMin(${cast}) + ST_YMax(${cast}) - ST_YMin(${cast})) * 111320 <= ${reach} THEN ${cast} ELSE ST_Segmentize(${g}, ${reach})::geometry END`
  return shortWaySql(cast, along)
}

/**
 * `drawn` (a geography's geometry as drawn) the short way over the antimeridian, told by the box of `cast` (the row's
 * plain cast): cut at 180° when its lon/lat is wider than 180° and narrower once in 0..360, else as it is. The tiles
 * draw it (above), and OGC API – Features write it so (lib/features/sql.js, RFC 7946 3.1.9).
 */
export function shortWaySql (cast, drawn = cast) {
  const shifted = `ST_ShiftLongitude(${cast})`
  return `CASE WHEN ST_XMax(${cast}) - ST_XMin(${cast}) <= 180 THEN ${drawn} WHEN ST_XMax(${shifted}) - ST_XMin(${shifted}) <= 180 THEN ST_WrapX(ST_ShiftLongitude(${drawn}), 180, -360) ELSE ${drawn} END`
}

/**
 * The SQL of a table set's tile. Rows clipped away (ST_AsMVTGeom NULL) are left out by ST_AsMVT itself: a filter on
 * the drawn column would make PostgreSQL draw each row twice (+35 % database time, measured on a z12 tile). The filter envelope (the tile plus its buffer) is transformed once to the table's
 * SRID, so the GiST index answers `&&`; for other SRIDs it is first clipped to the Mercator world (a margin past
 * ±180° would wrap to the other side) and densified (a projected CRS bends the tile's edges).
 * Rows with a coordinate that is not finite, or of a type ST_AsMVT cannot write, are left out (drawableSql), before anything is drawn or transformed.
 * `storedSrid` 0: the column holds SRID-0 geometries that the config declares to be in `srid`. `rowSrid` (a column
 * without a typmod): only rows of that SRID are drawn (introspect.js describeTable).
 */
export function tableTileSql ({ schema, table, geom, geomType, geography, srid, storedSrid, rowSrid = null, columns, extent, buffer, limit, idColumn, layer }, clip = WORLD_BOX) {
  const g = `g.${quoteIdent(geom)}`
  // A geography column is drawn as its geometry (lon/lat: geographyDrawnSql) and filtered by its own index with a
  // geography envelope.
  const asGeometry = geography ? `${g}::geometry` : g
  const drawn = geography && !POINTS.has(baseType(geomType)) ? geographyDrawnSql(g) : asGeometry
  const declared = storedSrid === 0 ? `ST_SetSRID(${drawn}, ${srid})` : drawn
  const linear = mayBeCurved(geomType) ? `ST_CurveToLine(${declared})` : declared
  const inTileSrid = srid === 3857 ? linear : `ST_Transform(${linear}, 3857)`
  const margin = buffer / extent
  const tile = 'ST_TileEnvelope($1::integer, $2::integer, $3::integer)'
  const area = `ST_TileEnvelope($1::integer, $2::integer, $3::integer, margin => ${margin})`
  let envelope = srid === 3857
    ? area
    : `ST_Transform(ST_Segmentize(ST_ClipByBox2D(${area}, ${clip}), 2504688.542848655 / (1 << $1::integer)), ${srid})`
  if (storedSrid === 0) envelope = `ST_SetSRID(${envelope}, 0)`
  if (geography) envelope = `${envelope}::geography`
  const props = columns.map((c) => {
    const value = `g.${quoteIdent(c.name)}`
    // MVT feature ids are unsigned (spec 2.1 §4.2): ST_AsMVT writes no id for a negative key, and the key is no property
    // of the row either, which is left with nothing to tell it by. Such a row keeps its key as a property; others pay
    // a comparison, their NULL written nowhere (ST_AsMVT leaves NULL values out).
    if (c.name === idColumn) return `${value} AS ${ID_ALIAS}, CASE WHEN ${value} < 0 THEN ${value} END AS ${quoteIdent(c.name)}`
    return NATIVE_TYPES.has(c.type) ? value : `${value}::${CAST_TYPES.get(c.type) ?? 'text'} AS ${quoteIdent(c.name)}`
  })
  return `SELECT ST_AsMVT(t.*, ${quoteLiteral(layer)}, ${extent}, ${quoteLiteral(GEOM_ALIAS)}${idColumn ? `, ${quoteLiteral(ID_ALIAS)}` : ''}) FROM (
  SELECT ST_AsMVTGeom(${inTileSrid}, ${tile}, ${extent}, ${buffer}, true) AS ${GEOM_ALIAS}${props.length ? ', ' + props.join(', ') : ''}
  FROM ${quoteIdent(schema)}.${quoteIdent(table)} AS g
  WHERE ${g} && ${envelope}${rowSrid === null ? '' : `\n    AND ST_SRID(${g}) = ${rowSrid}`}
    AND ${drawableSql(asGeometry, geomType)}${limit ? `\n  LIMIT ${limit}` : ''}
) AS t`
}

/**
 * A lon/lat box as a literal box2d in EPSG:3857, widened by 1 % of its size on each side: what a table's tile envelope
 * is clipped to when the world does not transform into the table's CRS (its query domain, see bounds.js).
 */
export function mercatorBox ([west, south, east, north]) {
  const [x1, y1, x2, y2] = [mercatorX(Math.max(-180, west)), mercatorY(south), mercatorX(Math.min(180, east)), mercatorY(north)]
  const dx = (x2 - x1) * 0.01 + 1
  const dy = (y2 - y1) * 0.01 + 1
  const inWorld = (v) => Math.max(-mercatorX(180), Math.min(mercatorX(180), v))
  return `ST_MakeEnvelope(${inWorld(x1 - dx)}, ${inWorld(y1 - dy)}, ${inWorld(x2 + dx)}, ${inWorld(y2 + dy)}, 3857)::box2d`
}

/** Whether a tile function takes the request's query string: `fn(z, x, y, query json|jsonb)`. */
export const takesQuery = (f) => f.nargs === 4

/** The SQL of a function set's tile: `fn(z, x, y[, query])` as bound parameters, the query as json or jsonb. */
export function functionTileSql (f) {
  const query = takesQuery(f) ? `, $4::${f.args.endsWith('jsonb') ? 'jsonb' : 'json'}` : ''
  return `SELECT ${quoteIdent(f.schema)}.${quoteIdent(f.name)}($1::integer, $2::integer, $3::integer${query}) AS tile`
}

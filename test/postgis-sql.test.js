// The SQL of PostGIS sets, without a database: what the tile query of a table or function says, the names it is
// prepared under, the fields it advertises, and that requests reach it only as bound parameters. test/postgis.test.js
// runs the same queries against a real PostGIS.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { GEOM_ALIAS, ID_ALIAS, functionTileSql, layerFields, quoteIdent, quoteLiteral, statementName, tableTileSql, undrawable } from '../lib/sources/postgis/sql.js'
import { describeTable, functionId, idAllocator, tableSpecs } from '../lib/sources/postgis/introspect.js'
import { functionSource, queryJson, tableSource } from '../lib/sources/postgis/sources.js'

/** A point table in Web Mercator with a key and a name, as introspect.js describes it; `over` changes some of it. */
const table = (over = {}) => ({
  schema: 'public',
  table: 'roads',
  geom: 'geom',
  geomType: 'LINESTRING',
  geography: false,
  srid: 3857,
  storedSrid: 3857,
  columns: [{ name: 'id', type: 'int4' }, { name: 'name', type: 'text' }],
  extent: 4096,
  buffer: 64,
  limit: null,
  idColumn: 'id',
  layer: 'roads',
  ...over,
})

/** The `&&` filter of a table's tile query: the column it tests (only a raw column matches) and the envelope. */
function filterOf (sql) {
  const m = /^\s*WHERE (g\."(?:[^"]|"")*") && (.+)$/m.exec(sql)
  assert.ok(m, `a && filter in\n${sql}`)
  return { column: m[1], envelope: m[2] }
}

/** The first argument of ST_AsMVTGeom: the geometry as drawn. */
const drawnOf = (sql) => /ST_AsMVTGeom\((.+), ST_TileEnvelope\(\$1::integer, \$2::integer, \$3::integer\), /.exec(sql)?.[1]

/** The SQL with every quoted identifier and string literal taken out: what is left is code, not names. */
const unquoted = (sql) => sql.replace(/"(?:[^"]|"")*"|'(?:[^']|'')*'/g, '…')

const count = (s, part) => s.split(part).length - 1
const TILE = 'ST_TileEnvelope($1::integer, $2::integer, $3::integer)'

test('a Web Mercator table: drawn and filtered as it is, the filter envelope being the tile plus its buffer', () => {
  const sql = tableTileSql(table())
  assert.ok(!sql.includes('ST_Transform'), 'nothing to transform')
  assert.equal(drawnOf(sql), 'g."geom"')
  assert.ok(sql.includes(`ST_AsMVTGeom(g."geom", ${TILE}, 4096, 64, true) AS ${GEOM_ALIAS}`), 'clipped to the tile, with the buffer')
  assert.deepEqual(filterOf(sql), { column: 'g."geom"', envelope: 'ST_TileEnvelope($1::integer, $2::integer, $3::integer, margin => 0.015625)' })
  assert.ok(sql.includes('FROM "public"."roads" AS g'))
  // ST_AsMVT leaves out rows whose drawn geometry is NULL (clipped away); a filter on it made PostgreSQL draw every
  // row twice (+35 % database time a z12 tile of 1,100 points).
  assert.equal(count(sql, 'ST_AsMVTGeom('), 1, 'each row drawn once')
  assert.ok(sql.endsWith(') AS t'), 'no filter on the drawn geometry')
})

test('another SRID: the raw column meets an envelope transformed once, after clipping to the world and densifying', () => {
  const sql = tableTileSql(table({ srid: 2056, storedSrid: 2056 }))
  const { column, envelope } = filterOf(sql)
  assert.equal(column, 'g."geom"', 'the column as stored, so its GiST index answers &&')
  assert.match(envelope, /^ST_Transform\(ST_Segmentize\(ST_ClipByBox2D\(ST_TileEnvelope\(\$1::integer, \$2::integer, \$3::integer, margin => 0\.015625\), ST_MakeEnvelope\([^)]+, 3857\)::box2d\), [\d.]+ \/ \(1 << \$1::integer\)\), 2056\)$/)
  assert.equal(count(envelope, 'ST_Transform'), 1, 'one transform of the envelope, none per row in the filter')
  assert.equal(drawnOf(sql), 'ST_Transform(g."geom", 3857)', 'each drawn geometry goes to the tile\'s CRS')
  assert.equal(count(sql, 'ST_Transform'), 2)
  // The densifying step shrinks with the zoom: about 1/16 of a tile's width at any zoom.
  assert.match(envelope, /2504688\.542848655 \/ \(1 << \$1::integer\)/)
})

test('a geography column: drawn as its geometry, along its great circles and the short way over 180° (points as they are), filtered by its own index with a geography envelope', () => {
  const sql = tableTileSql(table({ geom: 'geog', geography: true, srid: 4326, storedSrid: 4326 }))
  const drawn = drawnOf(sql)
  assert.match(drawn, /^ST_Transform\(CASE WHEN ST_XMax\(g\."geog"::geometry\) - ST_XMin\(g\."geog"::geometry\) <= 180 THEN /)
  assert.ok(drawn.includes('ST_Segmentize(g."geog", (1000000 / sqrt(2 ^ $1::integer::float8)))::geometry'), 'segmentized as a geography, by the zoom')
  assert.ok(drawn.includes('ST_WrapX(ST_ShiftLongitude(CASE '), 'cut at 180°')
  const { column, envelope } = filterOf(sql)
  assert.equal(column, 'g."geog"', 'the raw geography column')
  assert.ok(envelope.startsWith('ST_Transform(') && envelope.endsWith(', 4326)::geography'), envelope)
  const points = tableTileSql(table({ geom: 'geog', geography: true, srid: 4326, storedSrid: 4326, geomType: 'MULTIPOINT' }))
  assert.equal(drawnOf(points), 'ST_Transform(g."geog"::geometry, 3857)', 'points have no edges')
  assert.ok(!/ST_Segmentize\(g|ST_WrapX/.test(points))
  for (const geomType of ['LINESTRING', 'GEOMETRY']) assert.ok(!/ST_Segmentize\(g|ST_WrapX|ST_ShiftLongitude/.test(tableTileSql(table({ geomType, srid: 4326, storedSrid: 4326 }))), `a geometry ${geomType} column pays nothing`)
})

test('SRID-0 rows with a configured SRID: declared for drawing, and the envelope made SRID 0 to meet the raw column', () => {
  const sql = tableTileSql(table({ srid: 4326, storedSrid: 0 }))
  assert.equal(drawnOf(sql), 'ST_Transform(ST_SetSRID(g."geom", 4326), 3857)')
  const { column, envelope } = filterOf(sql)
  assert.equal(column, 'g."geom"')
  assert.match(envelope, /^ST_SetSRID\(ST_Transform\(.+, 4326\), 0\)$/)

  const mercator = tableTileSql(table({ srid: 3857, storedSrid: 0 }))
  assert.equal(drawnOf(mercator), 'ST_SetSRID(g."geom", 3857)', 'declared Web Mercator: nothing to transform')
  assert.equal(filterOf(mercator).envelope, 'ST_SetSRID(ST_TileEnvelope($1::integer, $2::integer, $3::integer, margin => 0.015625), 0)')
})

test('column types that may hold curves go through ST_CurveToLine before the transform; the filter keeps the raw column', () => {
  for (const geomType of ['GEOMETRY', 'GeometryCollection', 'CIRCULARSTRING', 'COMPOUNDCURVE', 'CURVEPOLYGON', 'MULTICURVE', 'multisurface', 'CIRCULARSTRINGM', 'GEOMETRYZM', 'MultiSurfaceZ']) {
    const sql = tableTileSql(table({ geomType, srid: 4326, storedSrid: 4326 }))
    assert.equal(drawnOf(sql), 'ST_Transform(ST_CurveToLine(g."geom"), 3857)', geomType)
    assert.equal(filterOf(sql).column, 'g."geom"', geomType)
  }
  for (const geomType of ['POINT', 'LINESTRING', 'MULTIPOLYGON', 'POLYGON']) {
    assert.ok(!tableTileSql(table({ geomType })).includes('ST_CurveToLine'), `${geomType}: no curves to straighten`)
  }
})

test('rows whose coordinates are not all finite are left out before anything is drawn: one test for the column\'s type', () => {
  /** The condition after the && filter. */
  const finiteOf = (sql) => /^ {4}AND (.+)$/m.exec(sql)?.[1]
  assert.equal(finiteOf(tableTileSql(table({ geomType: 'POINT' }))), 'abs(ST_X(g."geom")) + abs(ST_Y(g."geom")) < \'Infinity\'')
  assert.equal(finiteOf(tableTileSql(table({ geomType: 'MULTILINESTRINGZ' }))), 'ST_Length(g."geom") < \'Infinity\'')
  assert.equal(finiteOf(tableTileSql(table({ geomType: 'POLYGON', geography: true }))), 'ST_Perimeter(g."geom"::geometry) < \'Infinity\'', 'a geography as geometry: a plane sum')
  assert.equal(finiteOf(tableTileSql(table({ geomType: 'MULTIPOINT' }))), 'ST_Length(ST_LineFromMultiPoint(g."geom")) < \'Infinity\'', 'a line through every point')
  const collection = finiteOf(tableTileSql(table({ geomType: 'GEOMETRYCOLLECTION' })))
  assert.ok(collection.startsWith('ST_Length(ST_LineFromMultiPoint(ST_Points(g."geom"))) < \'Infinity\' AND NOT EXISTS ('), `a line through every point of every member, and no polyhedral surface among them: ${collection}`)
  const any = finiteOf(tableTileSql(table({ geomType: 'GEOMETRY' })))
  assert.match(any, /^CASE ST_GeometryType\(g\."geom"\) WHEN 'ST_Point' THEN abs\(ST_X/, 'a column of any type: by each row\'s')
  assert.ok(any.includes('WHEN \'ST_MultiPolygon\' THEN ST_Perimeter(g."geom") < \'Infinity\'') && any.includes('ELSE ST_Length(ST_LineFromMultiPoint(ST_Points(g."geom"))) < \'Infinity\' END'))
  assert.equal(count(any, 'ST_PolyhedralSurface'), 2, 'members are looked at in a collection\'s row only')
  assert.ok(/WHEN 'ST_GeometryCollection' THEN .*'POLYHEDRALSURFACE'/.test(any) && count(any, 'POLYHEDRALSURFACE') === 1, 'and in a collection among them, at any depth')
  assert.equal(count(tableTileSql(table()), 'ST_AsMVTGeom('), 1, 'still drawn once')
})

test('names from the catalog are quoted: mixed case, spaces and quotes stay names, never code', () => {
  assert.equal(quoteIdent('Mixed Case'), '"Mixed Case"')
  assert.equal(quoteIdent('a"b'), '"a""b"')
  assert.equal(quoteLiteral("O'Brien"), "'O''Brien'")
  const evil = 'x"; DROP TABLE roads; --'
  const sql = tableTileSql(table({
    schema: 'My "Schema"',
    table: evil,
    geom: 'The Geom',
    columns: [{ name: 'Road ID', type: 'int4' }, { name: "it's \"odd\"", type: 'text' }, { name: evil, type: 'numeric' }],
    idColumn: 'Road ID',
    layer: "O'Brien'); DROP TABLE roads; --",
  }))
  assert.ok(sql.includes('FROM "My ""Schema"""."x""; DROP TABLE roads; --" AS g'))
  assert.equal(filterOf(sql).column, 'g."The Geom"')
  assert.ok(sql.includes('g."it\'s ""odd"""'))
  assert.ok(sql.includes(`ST_AsMVT(t.*, 'O''Brien''); DROP TABLE roads; --', 4096, '${GEOM_ALIAS}', '${ID_ALIAS}')`))
  assert.ok(sql.includes(`g."Road ID" AS ${ID_ALIAS}, CASE WHEN g."Road ID" < 0 THEN g."Road ID" END AS "Road ID"`))
  const code = unquoted(sql)
  assert.ok(!code.includes('DROP') && !code.includes('--') && !code.includes(';'), `only names carry the attempt:\n${code}`)
})

test('properties: types ST_AsMVT encodes pass as they are, any other as text under its own name', () => {
  const sql = tableTileSql(table({
    columns: [
      { name: 'id', type: 'int8' }, { name: 'ok', type: 'bool' }, { name: 'h', type: 'float8' }, { name: 'tags', type: 'jsonb' },
      { name: 'price', type: 'numeric' }, { name: 'at', type: 'timestamptz' }, { name: 'kv', type: 'hstore' },
      { name: 'doc', type: 'json' }, { name: 'o', type: 'oid' },
    ],
  }))
  for (const name of ['ok', 'h', 'tags', 'doc']) assert.ok(sql.includes(`, g."${name}"`) && !sql.includes(`g."${name}"::text`), name)
  for (const name of ['price', 'at', 'kv']) assert.ok(sql.includes(`g."${name}"::text AS "${name}"`), name)
  assert.ok(sql.includes('g."o"::int8 AS "o"'), 'an oid as the number its field says (ST_AsMVT writes its text)')
  assert.ok(tableTileSql(table({ columns: [], idColumn: null })).includes(`AS ${GEOM_ALIAS}\n  FROM`), 'no columns, no dangling comma')
})

test('limit, id column, extent and buffer reach the query where they belong', () => {
  const limited = tableTileSql(table({ limit: 500 }))
  assert.match(limited, /WHERE g\."geom" && [^\n]+\n {4}AND [^\n]+\n {2}LIMIT 500\n\) AS t/, 'the limit bounds the features of one tile, inside the subquery')
  assert.ok(!tableTileSql(table()).includes('LIMIT'), 'no limit unless configured')

  assert.ok(tableTileSql(table()).startsWith(`SELECT ST_AsMVT(t.*, 'roads', 4096, '${GEOM_ALIAS}', '${ID_ALIAS}') FROM (`), 'the key is the feature id')
  assert.ok(tableTileSql(table()).includes(`g."id" AS ${ID_ALIAS}, CASE WHEN g."id" < 0 THEN g."id" END AS "id"`), 'and a property where negative (MVT ids are unsigned)')
  assert.ok(tableTileSql(table({ idColumn: null })).startsWith(`SELECT ST_AsMVT(t.*, 'roads', 4096, '${GEOM_ALIAS}') FROM (`))

  const small = tableTileSql(table({ extent: 512, buffer: 8 }))
  assert.ok(small.startsWith(`SELECT ST_AsMVT(t.*, 'roads', 512, `))
  assert.ok(small.includes(`ST_AsMVTGeom(g."geom", ${TILE}, 512, 8, true)`))
  assert.ok(filterOf(small).envelope.includes('margin => 0.015625'), 'the margin is buffer / extent, in tile widths')
  assert.ok(filterOf(tableTileSql(table({ buffer: 256 }))).envelope.includes('margin => 0.0625'))
  assert.ok(filterOf(tableTileSql(table({ buffer: 0 }))).envelope.includes('margin => 0)'))
})

test('function SQL: z, x, y and, when the function takes it, the query as json or jsonb', () => {
  const plain = { schema: 'public', name: 'tiles', nargs: 3, args: 'integer,integer,integer' }
  assert.equal(functionTileSql(plain), 'SELECT "public"."tiles"($1::integer, $2::integer, $3::integer) AS tile')
  assert.ok(functionTileSql({ ...plain, nargs: 4, args: 'integer,integer,integer,json' }).includes('$3::integer, $4::json) AS tile'))
  assert.ok(functionTileSql({ ...plain, nargs: 4, args: 'integer,integer,integer,jsonb' }).includes('$3::integer, $4::jsonb) AS tile'))
  const odd = functionTileSql({ schema: 'Tile "Fns"', name: "it's; DROP", nargs: 3, args: 'integer,integer,integer' })
  assert.ok(odd.startsWith('SELECT "Tile ""Fns"""."it\'s; DROP"('))
  assert.ok(!unquoted(odd).includes('DROP'))
})

test('statement names: stable for the same SQL, distinct for different SQL, within PostgreSQL\'s 63-byte names', () => {
  const sql = tableTileSql(table())
  assert.equal(statementName(sql), statementName(tableTileSql(table())), 're-discovery reuses prepared statements')
  assert.match(statementName(sql), /^tc_[0-9a-f]{24}$/)
  const variants = [
    sql,
    tableTileSql(table({ table: 'rivers' })),
    tableTileSql(table({ limit: 10 })),
    tableTileSql(table({ srid: 4326, storedSrid: 4326 })),
    tableTileSql(table({ columns: [] })),
    functionTileSql({ schema: 'public', name: 'roads', nargs: 3, args: 'integer,integer,integer' }),
    functionTileSql({ schema: 'public', name: 'roads', nargs: 4, args: 'integer,integer,integer,json' }),
  ]
  assert.equal(new Set(variants.map(statementName)).size, variants.length)
})

test('layer fields: their TileJSON types, the key column\'s too (a property where negative); jsonb columns (spread into keys) are no field', () => {
  const columns = [
    { name: 'id', type: 'int4' }, { name: 'n', type: 'int8' }, { name: 'f', type: 'float4' }, { name: 'o', type: 'oid' },
    { name: 'ok', type: 'bool' }, { name: 'name', type: 'text' }, { name: 'at', type: 'timestamptz' }, { name: 'price', type: 'numeric' },
    { name: 'j', type: 'json' }, { name: 'jb', type: 'jsonb' },
  ]
  assert.deepEqual(layerFields(columns), { id: 'Number', n: 'Number', f: 'Number', o: 'Number', ok: 'Boolean', name: 'String', at: 'String', price: 'String', j: 'String' })
})

test('geometry types MVT cannot hold are undrawable, whatever their Z/M suffix or case', () => {
  for (const t of ['TIN', 'TINZ', 'TRIANGLE', 'TRIANGLEM', 'POLYHEDRALSURFACE', 'POLYHEDRALSURFACEZM', 'tin']) assert.equal(undrawable(t), true, t)
  for (const t of ['POINT', 'POINTM', 'MULTIPOLYGONZ', 'GEOMETRY', 'CURVEPOLYGON', 'LINESTRING']) assert.equal(undrawable(t), false, t)
})

test('request values reach the database only as bound parameters, never in the SQL prepared at discovery', async () => {
  const calls = []
  const pool = { query: async (q) => { calls.push(q); return { rows: [{ st_asmvt: Buffer.from('mvt'), tile: Buffer.from('fn') }] } } }
  const attack = { x: "'); DROP TABLE roads; --", '"; DROP': '1' }

  const roads = tableSource('roads', table(), undefined, { pool, tiles: pool, cacheTtlS: 60 })
  for (const sql of [roads.sql, tableTileSql(table({ srid: 2056, storedSrid: 0, limit: 5 }))]) {
    assert.deepEqual([...new Set(sql.match(/\$\d+/g))].sort(), ['$1', '$2', '$3'], 'z, x, y and nothing else')
  }
  assert.deepEqual(await roads.getTile(14, 8580, 5738, attack), Buffer.from('mvt'))
  assert.deepEqual(calls.at(-1), { name: roads.statement, text: roads.sql, values: [14, 8580, 5738] }, 'the query string is not for tables')

  const fn = functionSource('echo', { schema: 'public', name: 'echo', nargs: 4, args: 'integer,integer,integer,json' }, { pool, tiles: pool, cacheTtlS: 60 })
  assert.equal(fn.takesQuery, true)
  assert.deepEqual([...new Set(fn.sql.match(/\$\d+/g))].sort(), ['$1', '$2', '$3', '$4'])
  await fn.getTile(3, 4, 5, attack)
  assert.deepEqual(calls.at(-1), { name: fn.statement, text: fn.sql, values: [3, 4, 5, JSON.stringify({ ...attack, '"; DROP': 1 })] })
  // A value is written as it came only when it is one JSON value: nothing else can add keys or close the object.
  for (const value of ['1,"admin":true', '{"a":1},"b":2', '1}', '"a"]', '[1] [2]']) {
    assert.deepEqual(JSON.parse(queryJson({ n: value })), { n: value }, value)
  }
  assert.equal(queryJson({ n: ['1', ' [1, 2] '], s: 'x' }), '{"n": [1, 2] ,"s":"x"}', 'the last of a repeated key; JSON as written')
  await fn.getTile(0, 0, 0)
  assert.deepEqual(calls.at(-1).values, [0, 0, 0, '{}'], 'no query: an empty object')

  const plain = functionSource('plain', { schema: 'public', name: 'plain', nargs: 3, args: 'integer,integer,integer' }, { pool, tiles: pool, cacheTtlS: 60 })
  assert.equal(plain.takesQuery, false)
  assert.deepEqual(await plain.getTile(1, 0, 1, attack), Buffer.from('fn'))
  assert.deepEqual(calls.at(-1).values, [1, 0, 1])
})

test('a table source advertises its layer, fields and metadata; a function its comment\'s TileJSON', () => {
  const pool = { query: async () => ({ rows: [] }) }
  const t = table({ comment: '{"description": "all the roads", "maxzoom": 16}', columns: [{ name: 'id', type: 'int4' }, { name: 'name', type: 'text' }, { name: 'j', type: 'jsonb' }] })
  const roads = tableSource('roads', t, [5, 45, 10, 48], { pool, tiles: pool, cacheTtlS: 60 })
  assert.equal(roads.kind, 'postgis')
  assert.equal(roads.cacheTtlS, 60)
  const [layer] = roads.tilejson.vector_layers
  assert.deepEqual([layer.id, layer.fields, layer.description], ['roads', { id: 'Number', name: 'String' }, 'all the roads'])
  assert.equal(roads.tilejson.maxzoom, 16)
  assert.deepEqual(roads.tilejson.bounds, [5, 45, 10, 48])
  assert.deepEqual(roads.metadata.properties.map((p) => p.name), ['id', 'name', 'j'], 'meta lists every column')

  const mlt = functionSource('f', { schema: 'public', name: 'f', nargs: 3, args: 'integer,integer,integer', comment: '{"format": "mlt"}' }, { pool, tiles: pool, cacheTtlS: 0 })
  assert.deepEqual([mlt.format, mlt.composable], ['mlt', false], 'MLT tiles cannot be concatenated with MVT')
})

test('set ids: table names, qualified by schema or column when shared; configured sets first and in place of their table', () => {
  const rows = [
    { oid: 1, schema: 'other', table: 'points', geom: 'geom' },
    { oid: 2, schema: 'public', table: 'points', geom: 'geom' },
    { oid: 3, schema: 'public', table: 'multi', geom: 'a' },
    { oid: 3, schema: 'public', table: 'multi', geom: 'b' },
    { oid: 4, schema: 'public', table: 'roads', geom: 'geom' },
  ]
  const ids = (options) => tableSpecs(rows, options).map((s) => s.id)
  assert.deepEqual(ids({}), ['other.points', 'public.points', 'multi.a', 'multi.b', 'roads'])
  const configured = tableSpecs(rows, { tables: { main: { table: 'roads' }, ghost: { table: 'nope' } } })
  assert.deepEqual(configured.map((s) => s.id), ['main', 'ghost', 'other.points', 'public.points', 'multi.a', 'multi.b'])
  assert.equal(configured[1].row, null, 'a configured table that is not there')
  assert.deepEqual(ids({ autoPublish: false, tables: { b: { table: 'multi', geometryColumn: 'b' } } }), ['b'])
  const parted = [...rows, { oid: 5, schema: 'other', table: 'roads_2024', geom: 'geom', partition: true }]
  assert.deepEqual(tableSpecs(parted, {}).map((s) => s.id), ['other.points', 'public.points', 'multi.a', 'multi.b', 'roads'], 'a partition is its table\'s')
  assert.deepEqual(tableSpecs(parted, { tables: { y2024: { table: 'roads_2024' } } }).map((s) => s.id)[0], 'y2024', 'unless configured')

  const taken = idAllocator()
  assert.deepEqual(['roads', 'roads', 'roads'].map((id) => taken.take(id)), ['roads', 'roads-2', 'roads-3'])
  const fns = [{ schema: 'public', name: 'roads' }, { schema: 'a', name: 'ov' }, { schema: 'b', name: 'ov' }, { schema: 'public', name: 'solo' }]
  assert.deepEqual(fns.map((f) => functionId(f, fns, taken)), ['public.roads', 'a.ov', 'b.ov', 'solo'], 'a name a table or another function has is qualified')
})

test('a table description: its SRID (read from the rows when the column has none), served columns and key', async () => {
  const row = { oid: 1, schema: 'public', table: 'places', geom: 'geom', geom_type: 'POINT', srid: 4326, geography: false, comment: null }
  const columns = [
    { name: 'id', type: 'int4', pk: true }, { name: 'geom', type: 'geometry' }, { name: 'name', type: 'text' },
    { name: 'codes', type: '_int4' }, { name: 'doc', type: 'tsvector' }, { name: GEOM_ALIAS, type: 'text' },
    { name: 'photo', type: 'bytea' }, { name: 'photos', type: '_bytea' }, { name: 'shapes', type: '_geometry' },
  ]
  const noPool = { query: () => assert.fail('no query needed') }
  const t = await describeTable(noPool, row, columns, {}, {}, false)
  assert.deepEqual(t.columns.map((c) => c.name), ['id', 'name', 'codes', 'doc'], 'arrays and tsvector; no geometry, bytea (or arrays of them) or alias-named column')
  assert.deepEqual([t.idColumn, t.srid, t.storedSrid, t.layer, t.extent, t.buffer, t.limit], ['id', 4326, 4326, 'places', 4096, 64, 10000])
  const limitOf = async (opts, options) => (await describeTable(noPool, row, columns, opts, options, false)).limit
  assert.equal(await limitOf({}, { featureLimit: 500 }), 500)
  assert.equal(await limitOf({}, { featureLimit: false }), null, 'false: no limit')
  assert.equal(await limitOf({ limit: 20 }, { featureLimit: false }), 20, 'the set\'s own limit first')
  assert.equal(await limitOf({ limit: false }, {}), null)
  assert.equal((await describeTable(noPool, row, columns, { properties: ['name'] }, {}, false)).idColumn, null, 'a key left out of the properties is no id')
  assert.equal((await describeTable(noPool, row, columns, {}, {}, true)).layer, 'places.geom', 'one layer per geometry column')
  assert.match(await describeTable(noPool, { ...row, geom_type: 'TINZ' }, columns, {}, {}, false), /TINZ geometries cannot be drawn/)
  assert.equal((await describeTable(noPool, { ...row, geography: true, srid: 0 }, columns, {}, {}, false)).srid, 4326, 'geography defaults to WGS84')

  const queries = []
  const sridZero = { query: async (q) => { queries.push(q); return { rows: [{ srid: 0 }] } } }
  assert.match(await describeTable(sridZero, { ...row, srid: 0 }, columns, {}, {}, false), /no SRID/)
  assert.match(queries[0], /^SELECT ST_SRID\("geom"\) AS srid FROM "public"\."places" WHERE "geom" IS NOT NULL LIMIT 1$/)
  const declared = await describeTable(sridZero, { ...row, srid: 0 }, columns, { srid: 2056 }, {}, false)
  assert.deepEqual([declared.srid, declared.storedSrid], [2056, 0], 'SRID-0 rows in the configured SRID')
  assert.equal((await describeTable(sridZero, { ...row, srid: 0 }, columns, {}, { defaultSrid: 3857 }, false)).srid, 3857)
})

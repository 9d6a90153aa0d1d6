// PostGIS sets where martin (the reference PostGIS tile server) and ST_AsMVT set the expectation: domain-typed
// columns, negative keys, table comments, and the query of tile functions. Against a real PostgreSQL + PostGIS.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { VectorTile } from '@mapbox/vector-tile'
import { PbfReader } from 'pbf'
import { makeApp, needs } from './helpers/app.js'
import { POSTGIS_MISSING, runSql, startPostgis } from './helpers/postgres.js'
import { HAVE_SCHEMA, assertValidTileJson } from './helpers/tilejson.js'

let db = null

before(async () => {
  db = await startPostgis()
  if (db === null) return
  await runSql(db.url, `
    CREATE DOMAIN posint AS integer CHECK (VALUE > 0);
    CREATE DOMAIN height AS posint;
    CREATE DOMAIN flag AS boolean;
    CREATE DOMAIN objid AS bigint;
    CREATE DOMAIN tags AS jsonb;
    CREATE TABLE domains (id objid PRIMARY KEY, t tags, h height, ok flag, geom geometry(Point, 4326));
    INSERT INTO domains VALUES (7, '{"k": "v"}', 12, true, 'SRID=4326;POINT(8.54 47.37)');
    CREATE TABLE signed_keys (id int8 PRIMARY KEY, name text, tc_mvt_id text, geom geometry(Point, 4326));
    INSERT INTO signed_keys VALUES (-2147483649, 'most negative', 'x', 'SRID=4326;POINT(8.54 47.37)'), (-1, 'negative', 'x', 'SRID=4326;POINT(8.55 47.37)'),
      (0, 'zero', 'x', 'SRID=4326;POINT(8.56 47.37)'), (5, 'positive', 'x', 'SRID=4326;POINT(8.57 47.37)');
    CREATE TABLE commented (name text, geom geometry(Point, 4326));
    INSERT INTO commented VALUES ('a', 'SRID=4326;POINT(8.54 47.37)'), ('b', 'SRID=4326;POINT(8.541 47.371)');
    CREATE FUNCTION commented_fn(z integer, x integer, y integer) RETURNS bytea AS $$ SELECT NULL::bytea $$ LANGUAGE sql IMMUTABLE;
    CREATE TABLE qpts (id int PRIMARY KEY, t text, i2 int2, b boolean, geom geometry(Point, 4326));
    INSERT INTO qpts VALUES (1, 'hello', -5, true, 'SRID=4326;POINT(8.54 47.37)'), (3, 'other', 7, false, 'SRID=4326;POINT(8.56 47.36)');
    -- martin's documented example (sources-pg-functions.md), and one reading a boolean and an array of the query
    CREATE FUNCTION fn_martin_doc(z integer, x integer, y integer, query_params json) RETURNS bytea AS $$
      SELECT ST_AsMVT(tile, 'doc', 4096, 'geom') FROM (
        SELECT ST_AsMVTGeom(ST_Transform(geom, 3857), ST_TileEnvelope(z, x, y), 4096, 64, true) AS geom, t AS name FROM qpts
        WHERE i2 = (query_params->'objectParam'->>'answer')::int AND b = (query_params->>'booleanParam')::boolean) tile
    $$ LANGUAGE sql STABLE;
    CREATE FUNCTION fn_bool(z integer, x integer, y integer, query jsonb) RETURNS bytea AS $$
      SELECT ST_AsMVT(tile, 'bool', 4096, 'geom') FROM (
        SELECT ST_AsMVTGeom(ST_Transform(geom, 3857), ST_TileEnvelope(z, x, y), 4096, 64, true) AS geom, t AS name FROM qpts
        WHERE (NOT coalesce((query->'onlyTrue')::boolean, false) OR b)
          AND (query->'ids' IS NULL OR id IN (SELECT jsonb_array_elements_text(query->'ids')::int))) tile
    $$ LANGUAGE sql STABLE;
    CREATE FUNCTION fn_echo(z integer, x integer, y integer, query json) RETURNS bytea AS $$
      SELECT ST_AsMVT(t, 'echo', 4096, 'geom') FROM (
        SELECT ST_AsMVTGeom(ST_Point(0, 0, 3857), ST_TileEnvelope(z, x, y)) AS geom, query::text AS q, query->>'n' AS n) AS t
    $$ LANGUAGE sql IMMUTABLE;
    -- martin's fixture's form (tests/fixtures/tables/MixPoints.sql): the layer described, a field described, a
    -- field no column has, and a layer of another name.
    CREATE TABLE described (gid int PRIMARY KEY, name text, kind text, geom geometry(Point, 4326));
    INSERT INTO described VALUES (1, 'a', 'shop', 'SRID=4326;POINT(8.54 47.37)');
    COMMENT ON TABLE described IS '{"description": "the table", "vector_layers": [
      {"id": "described", "description": "points of interest", "minzoom": 3, "fields": {"name": "the place name", "kind": null, "gone": "a dropped column"}, "x-source": "survey"},
      {"id": "elsewhere", "fields": {"a": "String"}}]}';
    CREATE TABLE plain (name text, geom geometry(Point, 4326));
    INSERT INTO plain VALUES ('a', 'SRID=4326;POINT(8.54 47.37)'), ('b', 'SRID=4326;POINT(8.6 47.4)');
  `)
})

after(async () => { await db?.stop() })

const decode = (buf) => new VectorTile(new PbfReader(buf))
const features = (res, layer) => {
  const l = decode(res.rawPayload).layers[layer]
  return Array.from({ length: l.length }, (_, i) => l.feature(i))
}

test('a column whose type is a domain is served as its base type: numbers, booleans, a jsonb spread into keys, an integer key the feature id', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const app = await makeApp(t, { paths: [db.url] })
  const [feature] = features(await app.inject({ url: '/domains/0/0/0' }), 'domains')
  assert.equal(feature.id, 7)
  assert.deepEqual({ ...feature.properties }, { k: 'v', h: 12, ok: true }, 'as ST_AsMVT (and martin) write them')
  const tj = (await app.inject({ url: '/domains.json' })).json()
  assert.deepEqual(tj.vector_layers[0].fields, { id: 'Number', h: 'Number', ok: 'Boolean' })
  const meta = (await app.inject({ url: '/domains/meta' })).json()
  assert.equal(meta.idColumn, 'id')
  assert.deepEqual(meta.properties.find((p) => p.name === 'h'), { name: 'h', type: 'int4', domain: 'height' }, 'a domain over a domain: its base type')
  // OGC API – Features reads the same description.
  const queryables = (await app.inject({ url: '/ogc/collections/domains/queryables' })).json().properties
  assert.deepEqual([queryables.h.type, queryables.ok.type, queryables.id.type], ['integer', 'boolean', 'integer'])
  const page = (await app.inject({ url: '/ogc/collections/domains/items?h=12&ok=true' })).json()
  assert.deepEqual(page.features.map((f) => [f.id, f.properties]), [[7, { t: { k: 'v' }, h: 12, ok: true }]])
  assert.equal((await app.inject({ url: '/ogc/collections/domains/items?h=-3' })).json().numberReturned, 0, 'a value outside the domain matches nothing')
  assert.equal((await app.inject({ url: '/ogc/collections/domains/items?h=abc' })).statusCode, 400)
})

test('a row whose integer key is negative keeps it: as a property, where MVT\'s unsigned feature id cannot hold it; other keys are the feature id alone', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const app = await makeApp(t, { paths: [db.url] })
  const tile = features(await app.inject({ url: '/signed_keys/0/0/0' }), 'signed_keys')
  const byName = Object.fromEntries(tile.map((f) => [f.properties.name, [f.id, { ...f.properties }]]))
  assert.deepEqual(byName, {
    'most negative': [undefined, { id: -2147483649, name: 'most negative' }],
    negative: [undefined, { id: -1, name: 'negative' }],
    zero: [0, { name: 'zero' }],
    positive: [5, { name: 'positive' }],
  })
  const tj = (await app.inject({ url: '/signed_keys.json' })).json()
  assert.deepEqual(tj.vector_layers[0].fields, { id: 'Number', name: 'String' }, 'the key may be a property; a column named as the id\'s alias is left out')
  assert.equal((await app.inject({ url: '/signed_keys/meta' })).json().idColumn, 'id')
})

// A comment as martin's documentation writes them, with keys tile-cannon keeps its own, and keys of a wrong shape.
const COMMENT = {
  description: 'the points', attribution: '(c) me', minzoom: 5, maxzoom: 14, bounds: [8, 47, 9, 48], center: [8.5, 47.5, 10],
  custom: { a: 1, list: [1, 2] }, fillzoom: 12, legend: 5, grids: 'no list', foo: null,
  tilejson: '9.9.9', tiles: ['http://elsewhere/{z}/{x}/{y}'], scheme: 'tms', format: 'png', id: 'other', encoding: 'mlt',
}

test('a table\'s comment JSON: its bounds and center are the TileJSON\'s, as a function\'s, and its other keys are carried through but the server\'s own', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const comment = JSON.stringify(COMMENT).replaceAll("'", "''")
  await runSql(db.url, `COMMENT ON TABLE commented IS '${comment}'; COMMENT ON FUNCTION commented_fn IS '${comment}'`)
  const app = await makeApp(t, { paths: [db.url] })
  for (const id of ['commented', 'commented_fn']) {
    const tj = (await app.inject({ url: `/${id}.json`, headers: { host: 'h' } })).json()
    assert.deepEqual([tj.bounds, tj.center, tj.minzoom, tj.maxzoom, tj.description, tj.attribution], [[8, 47, 9, 48], [8.5, 47.5, 10], 5, 14, 'the points', '(c) me'], id)
    assert.deepEqual([tj.custom, tj.fillzoom], [{ a: 1, list: [1, 2] }, 12], `${id}: other keys as they are`)
    assert.deepEqual([tj.tilejson, tj.tiles, tj.scheme, tj.format, tj.id, tj.encoding], ['3.0.0', [`http://h/${id}/{z}/{x}/{y}.pbf`], 'xyz', 'pbf', id, undefined], `${id}: the server's keys`)
    assert.ok(!('legend' in tj) && !('grids' in tj) && !('foo' in tj), `${id}: a key of the wrong shape, or null, is left out`)
    if (HAVE_SCHEMA) assertValidTileJson(tj, { label: id })
  }
  const plain = (await app.inject({ url: '/plain.json' })).json()
  assert.ok(plain.bounds[0] > 8.5 && plain.bounds[2] < 8.7, `without a comment, the table's own bounds: ${plain.bounds}`)
  assert.equal((await app.inject({ url: '/commented/5/16/11' })).statusCode, 200, 'its tiles as ever')
})

test('a table\'s comment vector_layers describe its layer, as martin takes them: description, zooms, field descriptions; the layer and fields are the tiles\' own', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const logs = []
  const app = await makeApp(t, { paths: [db.url] }, { logs })
  const tj = (await app.inject({ url: '/described.json', headers: { host: 'h' } })).json()
  assert.deepEqual(tj.vector_layers, [{
    id: 'described',
    description: 'points of interest',
    minzoom: 3,
    maxzoom: 22,
    fields: { gid: 'Number', name: 'the place name', kind: 'String' },
    'x-source': 'survey',
  }], 'the layer the tiles hold, as the comment describes it; a null field text is the type; no field or layer the tiles lack')
  assert.equal(tj.description, 'the table')
  if (HAVE_SCHEMA) assertValidTileJson(tj, { label: 'described' })
  const tile = decode((await app.inject({ url: '/described/0/0/0' })).rawPayload)
  assert.deepEqual(Object.keys(tile.layers), tj.vector_layers.map((l) => l.id), 'the TileJSON names the tile\'s layer')
  const warned = logs.filter((l) => l.set === 'described' && /vector_layers/.test(l.msg))
  assert.deepEqual(warned.map((l) => [l.otherLayers, l.otherFields]), [[['elsewhere'], ['gone']]], 'said once, naming what was left out')
  await app.catalog.reload()
  assert.equal(logs.filter((l) => l.set === 'described' && /vector_layers/.test(l.msg)).length, 1, 'not again at each discovery')
})

test('a tile function\'s query by martin\'s convention: each value that is JSON is that value, any other a string; a repeated key its last value', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const app = await makeApp(t, { paths: [db.url] })
  const names = async (url) => {
    const res = await app.inject({ url })
    assert.ok(res.statusCode === 200 || res.statusCode === 204, `${url}: ${res.statusCode} ${res.payload}`)
    return res.statusCode === 204 ? [] : features(res, Object.keys(decode(res.rawPayload).layers)[0]).map((f) => f.properties.name).sort()
  }
  const q = (params) => new URLSearchParams(params).toString()
  assert.deepEqual(await names(`/fn_martin_doc/0/0/0?${q({ objectParam: '{"answer": -5}', booleanParam: 'true' })}`), ['hello'], 'martin\'s documented function')
  assert.deepEqual(await names('/fn_bool/0/0/0?onlyTrue=true'), ['hello'], '(query->\'onlyTrue\')::boolean')
  assert.deepEqual(await names(`/fn_bool/0/0/0?${q({ ids: '[1,3]' })}`), ['hello', 'other'], 'jsonb_array_elements_text(query->\'ids\')')
  assert.deepEqual(await names(`/fn_bool/0/0/0?${q({ ids: '[3]' })}`), ['other'], 'another query, another tile')
  assert.deepEqual(await names('/fn_bool/0/0/0?onlyTrue=false&onlyTrue=true'), ['hello'], 'a repeated key: its last value')

  const echo = async (search) => {
    const { q: text, n } = features(await app.inject({ url: `/fn_echo/0/0/0?${search}` }), 'echo')[0].properties
    return [JSON.parse(text), n]
  }
  assert.deepEqual(await echo('color=red&n=1'), [{ color: 'red', n: 1 }, '1'], 'a word stays a string; ->> of a number is its text')
  assert.deepEqual(await echo(q({ n: '"1"' })), [{ n: '1' }, '1'], 'a JSON string is that string')
  assert.deepEqual(await echo(q({ n: '9007199254740993', s: '{"a', e: '' })), [{ n: 9007199254740992, s: '{"a', e: '' }, '9007199254740993'], 'a number keeps its digits; what is not JSON is a string')
  assert.deepEqual(await echo('n=1&n=2'), [{ n: 2 }, '2'])
  assert.deepEqual(await echo(''), [{}, undefined])
  assert.equal((await app.inject({ url: `/fn_bool/0/0/0?${q({ ids: '["x"]' })}` })).statusCode, 400, 'a value the function cannot cast: 400, as before')
})

// PostGIS sets against a real PostgreSQL + PostGIS (a throwaway cluster, or DATABASE_URL).
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { gunzipSync } from 'node:zlib'
import { VectorTile } from '@mapbox/vector-tile'
import { PbfReader } from 'pbf'
import pg from 'pg'
import { FIXTURES, HAVE_FIXTURES, makeApp, needs } from './helpers/app.js'
import { loadConfig } from '../lib/config.js'
import { HAVE_SCHEMA, assertValidTileJson } from './helpers/tilejson.js'
import { POSTGIS_MISSING, loadGeoJson, loadZurichPoints, restoreDump, queryRows, runSql, runSqlFile, startPostgis } from './helpers/postgres.js'
import { tempDir, vectorTiles, writeMbtiles } from './helpers/data.js'
import { lonLatToTile } from '../lib/tilemath.js'

let db = null
const MARTIN = join(FIXTURES, 'postgis', 'martin_tables')
const loaded = { martin: [], geojson: [], dump: false }

before(async () => {
  db = await startPostgis()
  if (db === null) return
  await loadZurichPoints(db.url)
  await runSql(db.url, `
    CREATE TABLE empty_lines (id serial PRIMARY KEY, name text, geom geometry(LineString, 4326));
    CREATE TABLE "Mixed Case Roads" ("Road ID" integer PRIMARY KEY, "Kind" text, geom geometry(LineString, 3857));
    INSERT INTO "Mixed Case Roads" VALUES (1, 'main', ST_Transform(ST_SetSRID(ST_MakeLine(ST_MakePoint(8.50, 47.36), ST_MakePoint(8.58, 47.38)), 4326), 3857));
    CREATE VIEW zurich_expensive AS SELECT id, name, value, geom FROM zurich_points WHERE value > 900;
    CREATE FUNCTION query_echo(z integer, x integer, y integer, query json) RETURNS bytea AS $$
      SELECT ST_AsMVT(t, 'echo', 4096, 'geom') FROM (
        SELECT ST_AsMVTGeom(ST_Transform(ST_SetSRID(ST_MakePoint(1, 1), 4326), 3857), ST_TileEnvelope(z, x, y)) AS geom,
               query::text AS q, z AS zoom) AS t WHERE z = 0
    $$ LANGUAGE sql IMMUTABLE;
    CREATE FUNCTION session_jit(z integer, x integer, y integer) RETURNS bytea AS $$
      SELECT ST_AsMVT(t, 'session', 4096, 'geom') FROM (
        SELECT ST_AsMVTGeom(ST_Transform(ST_SetSRID(ST_MakePoint(1, 1), 4326), 3857), ST_TileEnvelope(z, x, y)) AS geom,
               current_setting('jit') AS jit) AS t
    $$ LANGUAGE sql;
    CREATE FUNCTION slow_tile(z integer, x integer, y integer) RETURNS bytea AS $$
      SELECT pg_sleep(3)::text::bytea
    $$ LANGUAGE sql;
    CREATE SCHEMA other;
    CREATE TABLE other.zurich_points (id integer PRIMARY KEY, geom geometry(Point, 4326));
  `)
  if (HAVE_FIXTURES) {
    for (const file of readdirSync(MARTIN).filter((f) => f.endsWith('.sql')).sort()) {
      try {
        runSqlFile(db.bin, db.url, join(MARTIN, file))
        loaded.martin.push(file)
      } catch (err) {
        loaded.martin.push(`${file} FAILED: ${String(err.stderr ?? err.message).trim()}`)
      }
    }
    const gj = join(FIXTURES, 'postgis', 'geojson')
    for (const dir of readdirSync(gj)) {
      const file = existsSync(join(gj, dir, 'in.json')) ? join(gj, dir, 'in.json') : join(gj, dir, 'in.json.gz')
      const raw = readFileSync(file)
      await loadGeoJson(db.url, dir, JSON.parse(file.endsWith('.gz') ? gunzipSync(raw) : raw))
      loaded.geojson.push(dir)
    }
    restoreDump(db.bin, db.url, join(FIXTURES, 'postgis', 'tegola.dump'))
    loaded.dump = true
  }
})

after(async () => { await db?.stop() })

const decode = (buf) => new VectorTile(new PbfReader(buf))
const query = (sql, values) => queryRows(db.url, sql, values)

test('tables, views and functions in any schema become sets, with TileJSON vector_layers and bounds', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const app = await makeApp(t, { paths: [db.url] })
  const list = (await app.inject({ url: '/list' })).json()
  for (const id of ['public.zurich_points', 'other.zurich_points', 'empty_lines', 'Mixed Case Roads', 'zurich_expensive', 'query_echo', 'slow_tile']) {
    assert.ok(list.includes(id), `${id} in ${list.join(', ')}`)
  }
  const tj = (await app.inject({ url: '/public.zurich_points.json', headers: { host: 'h' } })).json()
  assert.deepEqual(tj.tiles, ['http://h/public.zurich_points/{z}/{x}/{y}.pbf'])
  assert.deepEqual(tj.vector_layers[0].id, 'zurich_points')
  // The primary key is each feature's id, a property only where it is negative (MVT ids are unsigned): the layer's
  // fields say what features may carry.
  assert.deepEqual(tj.vector_layers[0].fields, { id: 'Number', name: 'String', value: 'Number' })
  const [w, s, e, n] = tj.bounds
  assert.ok(w > 8.2 && w < 8.3 && e > 8.8 && e < 8.9 && s > 47.1 && s < 47.2 && n > 47.5 && n < 47.6, `bounds ${tj.bounds}`)
  const meta = (await app.inject({ url: '/public.zurich_points/meta' })).json()
  assert.equal(meta.srid, 4326)
  assert.equal(meta.geometryColumn, 'geom')
  assert.equal(meta.idColumn, 'id')
  assert.deepEqual(meta.properties.map((p) => p.name), ['id', 'name', 'value'], 'meta still lists every column')
  const [x, y] = lonLatToTile(8.54, 47.37, 14)
  const feature = decode((await app.inject({ url: `/public.zurich_points/14/${x}/${y}` })).rawPayload).layers.zurich_points.feature(0)
  assert.equal(typeof feature.id, 'number')
  assert.deepEqual(Object.keys(feature.properties).sort(), Object.keys(tj.vector_layers[0].fields).filter((k) => k !== 'id').sort(), 'fields are what features hold (a positive key the id alone)')
})

/** The JavaScript type a TileJSON field type stands for, as @mapbox/vector-tile decodes it. */
const JS_TYPE = { Number: 'number', String: 'string', Boolean: 'boolean' }

test('every column is a field of its layer, of the type its tiles and features carry: an oid a Number, a json a String', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  await runSql(db.url, `
    CREATE TABLE typed_columns (id integer PRIMARY KEY, small int2, big int8, single float4, double float8, o oid, ok boolean,
      name text, code varchar(5), fixed char(3), price numeric, day date, at timestamptz, u uuid, kv hstore, doc json, tags jsonb,
      geom geometry(Point, 4326));
    INSERT INTO typed_columns VALUES (1, 2, 3, 4.5, 5.5, 42, true, 'n', 'c', 'abc', 1.25, '2024-01-02', '2024-01-02T03:04:05Z',
      'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'a=>1', '{"x": [1, 2]}', '{"k": "v"}', 'SRID=4326;POINT(8.5 47.4)');`)
  t.after(() => runSql(db.url, 'DROP TABLE IF EXISTS typed_columns'))
  const app = await makeApp(t, { paths: [db.url] })
  const fields = (await app.inject({ url: '/typed_columns.json' })).json().vector_layers[0].fields
  assert.equal(fields.o, 'Number')
  assert.equal(fields.doc, 'String', 'a json column is a field: ST_AsMVT writes its text')
  assert.equal(fields.tags, undefined, 'a jsonb column is spread into its keys: no field of its own')
  const tile = await app.inject({ url: '/typed_columns/0/0/0' })
  assert.equal(tile.statusCode, 200)
  const { properties } = decode(tile.rawPayload).layers.typed_columns.feature(0)
  for (const [name, type] of Object.entries(fields)) {
    if (name === 'id') continue // the key: the feature id, a property only where negative
    assert.ok(name in properties, `${name} is in the tile`)
    assert.equal(typeof properties[name], JS_TYPE[type], `${name}: declared ${type}, the tile holds ${JSON.stringify(properties[name])}`)
  }
  assert.deepEqual(Object.keys(properties).filter((k) => !(k in fields)), ['k'], 'only the jsonb\'s keys are no field')
  assert.equal(properties.o, 42)
  assert.deepEqual(JSON.parse(properties.doc), { x: [1, 2] })

  // Features say the same: the oid an integer (as its queryable), the json its value.
  const queryables = (await app.inject({ url: '/ogc/collections/typed_columns/queryables' })).json().properties
  assert.equal(queryables.o.type, 'integer')
  const feature = (await app.inject({ url: '/ogc/collections/typed_columns/items/1' })).json()
  assert.equal(feature.properties.o, 42)
  assert.deepEqual(feature.properties.doc, { x: [1, 2] })
  assert.equal((await app.inject({ url: '/ogc/collections/typed_columns/items?o=42' })).json().numberReturned, 1)
})

test('arrays and tsvector are properties: their text in tiles (String fields, as ST_AsMVT writes them), JSON arrays in features; bytea is left out of both', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  await runSql(db.url, `
    CREATE TABLE array_columns (id integer PRIMARY KEY, ints int4[], words text[], grid float8[][], doc tsvector, photo bytea, photos bytea[],
      geom geometry(Point, 4326));
    INSERT INTO array_columns VALUES (1, '{1,2,3}', '{a,"b c",NULL}', '{{1.5,2},{3,4}}', 'a fat cat', '\\x0102ff', '{"\\\\x01"}',
      'SRID=4326;POINT(8.5 47.4)');`)
  t.after(() => runSql(db.url, 'DROP TABLE IF EXISTS array_columns'))
  const app = await makeApp(t, { paths: [db.url] })
  const fields = (await app.inject({ url: '/array_columns.json' })).json().vector_layers[0].fields
  assert.deepEqual(fields, { id: 'Number', ints: 'String', words: 'String', grid: 'String', doc: 'String' }, 'no bytea field')
  const { properties } = decode((await app.inject({ url: '/array_columns/0/0/0' })).rawPayload).layers.array_columns.feature(0)
  assert.deepEqual({ ...properties }, { ints: '{1,2,3}', words: '{a,"b c",NULL}', grid: '{{1.5,2},{3,4}}', doc: "'a' 'cat' 'fat'" })
  assert.deepEqual((await app.inject({ url: '/array_columns/meta' })).json().properties.map((p) => p.name), ['id', 'ints', 'words', 'grid', 'doc'])

  const feature = (await app.inject({ url: '/ogc/collections/array_columns/items/1' })).json()
  assert.deepEqual(feature.properties, { ints: [1, 2, 3], words: ['a', 'b c', null], grid: [[1.5, 2], [3, 4]], doc: "'a' 'cat' 'fat'" })
  const page = await app.inject({ url: '/ogc/collections/array_columns/items?properties=words' })
  assert.deepEqual(page.json().features[0].properties, { words: ['a', 'b c', null] })
  assert.equal((await app.inject({ url: '/ogc/collections/array_columns/items?properties=photo' })).statusCode, 400, 'bytea is no property')
  const queryables = Object.keys((await app.inject({ url: '/ogc/collections/array_columns/queryables' })).json().properties)
  assert.ok(!queryables.includes('ints') && !queryables.includes('photo'), 'arrays are output, not compared')
})

test('a tile holds at most featureLimit features: 10000 unless configured (pg_tileserv\'s), false for no limit, per set too', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  assert.equal(loadConfig({}).config.postgres.featureLimit, 10000, 'the default is in the config')
  assert.equal(loadConfig({ overrides: { postgres: { url: db.url } } }).config.postgres.featureLimit, 10000, 'also beside a postgres section of its own')
  assert.throws(() => loadConfig({ overrides: { postgres: { featureLimit: true } } }), /featureLimit is a number of features per tile \(1 or more\), or false for no limit, not true$/)
  assert.throws(() => loadConfig({ overrides: { postgres: { featureLimit: 0 } } }), /invalid configuration: postgres.featureLimit is a number of features per tile \(1 or more\), or false for no limit, not 0$/)
  assert.throws(() => loadConfig({ overrides: { postgres: { tables: { a: { table: 'a', limit: 2.5 } } } } }), /postgres.tables.a.limit is a number of features per tile \(1 or more\), or false for no limit, not 2.5$/)
  await runSql(db.url, `CREATE TABLE many_points (id integer PRIMARY KEY, geom geometry(Point, 4326));
    INSERT INTO many_points SELECT i, ST_SetSRID(ST_MakePoint(i * 0.01, 0), 4326) FROM generate_series(1, 50) AS i;
    CREATE TABLE many_points_too AS SELECT * FROM many_points;`)
  t.after(() => runSql(db.url, 'DROP TABLE IF EXISTS many_points, many_points_too'))
  const featuresAt0 = async (app, id) => decode((await app.inject({ url: `/${id}/0/0/0` })).rawPayload).layers[id].length
  const metaLimit = async (app, id) => (await app.inject({ url: `/${id}/meta` })).json().featureLimit

  const byDefault = await makeApp(t, { paths: [db.url] })
  assert.equal(await metaLimit(byDefault, 'many_points'), 10000)
  assert.equal(await featuresAt0(byDefault, 'many_points'), 50)

  const limited = await makeApp(t, { paths: [db.url], postgres: { featureLimit: 20, tables: { many_points_too: { table: 'many_points_too', limit: false } } } })
  assert.equal(await metaLimit(limited, 'many_points'), 20)
  assert.equal(await featuresAt0(limited, 'many_points'), 20)
  assert.equal(await metaLimit(limited, 'many_points_too'), null, 'a set\'s limit: false lifts the database\'s')
  assert.equal(await featuresAt0(limited, 'many_points_too'), 50)

  const unlimited = await makeApp(t, { paths: [db.url], postgres: { featureLimit: false } })
  assert.equal(await metaLimit(unlimited, 'many_points'), null)
  assert.equal(await featuresAt0(unlimited, 'many_points'), 50)
})

test('the right features land in the right tile with the right properties', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  // Every row of a tile, compared with the database's: no feature limit (a z10 tile holds more than the default's).
  const app = await makeApp(t, { paths: [db.url], postgres: { featureLimit: false } })
  for (const z of [10, 12, 14]) {
    const [x, y] = lonLatToTile(8.54, 47.37, z)
    const res = await app.inject({ url: `/public.zurich_points/${z}/${x}/${y}.pbf`, headers: { 'accept-encoding': 'gzip' } })
    assert.equal(res.statusCode, 200)
    assert.equal(res.headers['content-type'], 'application/x-protobuf')
    assert.equal(res.headers['content-encoding'], 'gzip', 'raw MVT from PostGIS is gzipped for gzip clients')
    const layer = decode(gunzipSync(res.rawPayload)).layers.zurich_points
    const got = new Map()
    for (let i = 0; i < layer.length; i++) {
      const f = layer.feature(i)
      assert.ok(f.loadGeometry().flat().length > 0, `z${z}: feature ${f.id} has a geometry (clipped-away rows are left out)`)
      got.set(f.id, f.properties)
    }
    const inside = await query('SELECT id, name, value FROM zurich_points WHERE ST_Intersects(geom, ST_Transform(ST_TileEnvelope($1, $2, $3), 4326))', [z, x, y])
    const nearby = await query('SELECT id FROM zurich_points WHERE geom && ST_Transform(ST_TileEnvelope($1, $2, $3, margin => 64.0 / 4096), 4326)', [z, x, y])
    assert.ok(inside.length > 0)
    for (const row of inside) {
      assert.ok(got.has(row.id), `z${z}: point ${row.id} is in the tile`)
      assert.equal(got.get(row.id).name, row.name)
      assert.equal(got.get(row.id).value, row.value)
    }
    const allowed = new Set(nearby.map((r) => r.id))
    for (const id of got.keys()) assert.ok(allowed.has(id), `z${z}: point ${id} belongs to this tile or its buffer`)
  }
  // A tile far from any data is absent: 204 for a vector set.
  assert.equal((await app.inject({ url: '/public.zurich_points/10/0/0' })).statusCode, 204)
  assert.equal((await app.inject({ url: '/empty_lines/0/0/0' })).statusCode, 204, 'an empty table')
  const view = decode((await app.inject({ url: '/zurich_expensive/0/0/0' })).rawPayload).layers.zurich_expensive
  assert.ok(view.length > 0 && view.length < 50000 * 0.2, 'a view filters like its SQL')
  const mixed = decode((await app.inject({ url: `/${encodeURIComponent('Mixed Case Roads')}/10/${lonLatToTile(8.54, 47.37, 10).join('/')}` })).rawPayload)
  assert.equal(mixed.layers['Mixed Case Roads'].feature(0).properties.Kind, 'main', 'quoted, mixed-case identifiers and SRID 3857')
})

test('function sources receive the query string as json (martin\'s: a value that is JSON as that value); the cache keys on it', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const app = await makeApp(t, { paths: [db.url] })
  const a = decode((await app.inject({ url: '/query_echo/0/0/0?color=red&n=1' })).rawPayload).layers.echo.feature(0).properties
  assert.deepEqual(JSON.parse(a.q), { color: 'red', n: 1 })
  assert.equal(a.zoom, 0)
  const b = decode((await app.inject({ url: '/query_echo/0/0/0?n=1&color=blue' })).rawPayload).layers.echo.feature(0).properties
  assert.deepEqual(JSON.parse(b.q), { color: 'blue', n: 1 }, 'another query, another tile (not the cached one)')
  const none = decode((await app.inject({ url: '/query_echo/0/0/0' })).rawPayload).layers.echo.feature(0).properties
  assert.deepEqual(JSON.parse(none.q), {})
  assert.equal((await app.inject({ url: '/query_echo/1/0/0' })).statusCode, 204, 'the function returned no rows')
})

test('tile and features queries run with PostgreSQL\'s JIT off (its compiling cost more than a tile), unless the URL\'s options turn it on', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const app = await makeApp(t, { paths: [db.url] })
  const jitOf = async (server) => decode((await server.inject({ url: '/session_jit/0/0/0' })).rawPayload).layers.session.feature(0).properties.jit
  assert.equal(await jitOf(app), 'off')
  const url = new URL(db.url)
  url.searchParams.set('options', '-c jit=on')
  const asked = await makeApp(t, { paths: [url.href] })
  assert.equal(await jitOf(asked), 'on', 'the URL\'s options are the user\'s')
})

test('a composite URL returns the layers of several sets in one tile', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const app = await makeApp(t, { paths: [db.url], postgres: { featureLimit: false } }) // every point at z0
  const res = await app.inject({ url: '/public.zurich_points,Mixed Case Roads,query_echo/0/0/0?k=v' })
  assert.equal(res.statusCode, 200)
  const tile = decode(res.rawPayload)
  assert.deepEqual(Object.keys(tile.layers).sort(), ['Mixed Case Roads', 'echo', 'zurich_points'])
  assert.equal(tile.layers.zurich_points.length, 50000)
  const tj = (await app.inject({ url: '/public.zurich_points,Mixed Case Roads.json' })).json()
  assert.deepEqual(tj.vector_layers.map((l) => l.id), ['zurich_points', 'Mixed Case Roads'])
  assert.equal((await app.inject({ url: '/public.zurich_points,nope/0/0/0' })).statusCode, 404)
})

test('SQL injection attempts in a set name, path or query string change nothing', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const app = await makeApp(t, { paths: [db.url] })
  const attempts = [
    '/public.zurich_points;DROP TABLE zurich_points/0/0/0',
    "/public.zurich_points'--/0/0/0",
    '/zurich_points%22%3B%20DROP%20TABLE%20zurich_points%3B--/0/0/0',
    '/public.zurich_points/0/0/0%3BDROP%20TABLE%20zurich_points',
    "/query_echo/0/0/0?x=');DROP TABLE zurich_points;--",
    '/query_echo/0/0/0?%22%3A1%7D%27%3B%20DROP%20TABLE%20zurich_points%3B--=1',
    "/public.zurich_points,query_echo'); DROP TABLE zurich_points;--/0/0/0",
  ]
  for (const url of attempts) {
    const res = await app.inject({ url })
    assert.ok([200, 204, 400, 404].includes(res.statusCode), `${url} → ${res.statusCode}`)
  }
  const echoed = decode((await app.inject({ url: attempts[4] })).rawPayload).layers.echo.feature(0).properties
  assert.deepEqual(JSON.parse(echoed.q), { x: "');DROP TABLE zurich_points;--" }, 'the function received it as a json value')
  assert.equal(Number((await query('SELECT count(*) AS n FROM zurich_points'))[0].n), 50000)
})

test('a slow query is a 503 for that tile after the statement timeout, never a hung socket', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const app = await makeApp(t, { paths: [db.url], postgres: { statementTimeoutMs: 300 } })
  const started = Date.now()
  const res = await app.inject({ url: '/slow_tile/0/0/0' })
  assert.equal(res.statusCode, 503)
  assert.ok(Date.now() - started < 2500, `answered in ${Date.now() - started} ms`)
  assert.match(res.json().message, /slow_tile/)
  assert.doesNotMatch(res.payload, /statement timeout|postgres:\/\//, 'no database detail leaks')
  assert.equal((await app.inject({ url: `/${encodeURIComponent('Mixed Case Roads')}/0/0/0` })).statusCode, 200, 'other sets keep serving')
})

test('a tile function that raises is a 503 naming its set (its backend failed), not a 500', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  await runSql(db.url, `CREATE FUNCTION raising_tile(z integer, x integer, y integer) RETURNS bytea AS $$
    BEGIN RAISE EXCEPTION 'no tiles at zoom %', z; END $$ LANGUAGE plpgsql`)
  t.after(() => runSql(db.url, 'DROP FUNCTION raising_tile'))
  const app = await makeApp(t, { paths: [db.url] })
  const res = await app.inject({ url: '/raising_tile/3/1/1' })
  assert.equal(res.statusCode, 503, res.payload)
  assert.equal(res.json().message, "tileset 'raising_tile' could not read this tile")
  assert.doesNotMatch(res.payload, /no tiles at zoom/, 'the database\'s words stay in the log')
  assert.equal((await app.inject({ url: `/${encodeURIComponent('Mixed Case Roads')}/0/0/0` })).statusCode, 200, 'other sets keep serving')
})

test('a tile function that refuses its query (a bad cast of a parameter, its own invalid_parameter_value) is a 400 saying why', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  await runSql(db.url, `CREATE FUNCTION picky_tile(z integer, x integer, y integer, query json) RETURNS bytea AS $$
    DECLARE n integer := coalesce((query->>'n')::integer, 1);
    BEGIN
      IF n < 0 THEN RAISE EXCEPTION 'n must be 0 or more, not %', n USING ERRCODE = 'invalid_parameter_value'; END IF;
      RETURN (SELECT ST_AsMVT(q, 'picky') FROM (SELECT n AS n, ST_AsMVTGeom(ST_Point(0, 0, 3857), ST_TileEnvelope(z, x, y)) AS geom) q);
    END $$ LANGUAGE plpgsql`)
  t.after(() => runSql(db.url, 'DROP FUNCTION picky_tile'))
  const app = await makeApp(t, { paths: [db.url] })
  assert.equal((await app.inject({ url: '/picky_tile/0/0/0?n=5' })).statusCode, 200)
  const cast = await app.inject({ url: '/picky_tile/0/0/0?n=abc' })
  assert.equal(cast.statusCode, 400, cast.payload)
  assert.equal(cast.json().message, 'tileset \'picky_tile\' refused the query: invalid input syntax for type integer: "abc"')
  const own = await app.inject({ url: '/picky_tile/0/0/0?n=-2' })
  assert.equal(own.statusCode, 400, own.payload)
  assert.equal(own.json().message, 'tileset \'picky_tile\' refused the query: n must be 0 or more, not -2')
  assert.equal(own.headers['retry-after'], undefined)
  assert.equal((await app.inject({ url: '/picky_tile/0/0/0?n=5' })).statusCode, 200, 'the set keeps serving')
})

test('fn(z, x, y) beside fn(z, x, y, query DEFAULT …): only the one PostgreSQL can call by name is served', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const body = (label) => `SELECT ST_AsMVT(q, '${label}') FROM (SELECT 1 AS n, ST_AsMVTGeom(ST_Point(0, 0, 3857), ST_TileEnvelope(z, x, y)) AS geom) q`
  await runSql(db.url, `CREATE FUNCTION twin_tile(z integer, x integer, y integer) RETURNS bytea AS $$ ${body('three')} $$ LANGUAGE sql;
    CREATE FUNCTION twin_tile(z integer, x integer, y integer, query json DEFAULT '{}') RETURNS bytea AS $$ ${body('four')} $$ LANGUAGE sql;`)
  t.after(() => runSql(db.url, 'DROP FUNCTION twin_tile(integer, integer, integer); DROP FUNCTION twin_tile(integer, integer, integer, json)'))
  const app = await makeApp(t, { paths: [db.url] })
  const twins = [...app.catalog.registry.entries.values()].filter((e) => e.id.includes('twin_tile')).map((e) => e.id)
  assert.deepEqual(twins, ['twin_tile'])
  const res = await app.inject({ url: '/twin_tile/0/0/0' })
  assert.equal(res.statusCode, 200, res.payload)
  assert.deepEqual(Object.keys(decode(res.rawPayload).layers), ['four'])
})

test('a view whose data cannot be read (a cast that does not fit) is a 503 naming it, for tiles and features; a filter value that does not fit is a 400', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  await runSql(db.url, `CREATE TABLE raw_rows (id integer PRIMARY KEY, v text, geom geometry(Point, 4326));
    INSERT INTO raw_rows VALUES (1, '5', 'SRID=4326;POINT(1 1)'), (2, 'x', 'SRID=4326;POINT(2 2)');
    CREATE VIEW cast_view AS SELECT id, v::integer AS n, day, geom FROM (SELECT id, v, date '2024-01-01' AS day, geom FROM raw_rows) AS r;`)
  t.after(() => runSql(db.url, 'DROP VIEW cast_view; DROP TABLE raw_rows'))
  const app = await makeApp(t, { paths: [db.url] })
  const tile = await app.inject({ url: '/cast_view/0/0/0' })
  assert.equal(tile.statusCode, 503, tile.payload)
  assert.equal(tile.json().message, "tileset 'cast_view' could not read this tile")
  const items = await app.inject({ url: '/ogc/collections/cast_view/items' })
  assert.equal(items.statusCode, 503, items.payload)
  assert.equal(items.json().message, "tileset 'cast_view' could not read these features")
  const filtered = await app.inject({ url: '/ogc/collections/raw_rows/items?v=5' })
  assert.equal(filtered.statusCode, 200)
  const badDay = await app.inject({ url: '/ogc/collections/cast_view/items?day=notadate' })
  assert.equal(badDay.statusCode, 400, badDay.payload)
  assert.match(badDay.json().message, /^a value does not fit its property: /)
})

test('curved geometries with M (CIRCULARSTRINGM, a GEOMETRYM holding a curve) are drawn and listed as features', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  await runSql(db.url, `CREATE TABLE arcs_m (id integer PRIMARY KEY, geom geometry(CircularStringM, 4326));
    INSERT INTO arcs_m VALUES (1, 'SRID=4326;CIRCULARSTRINGM(0 0 1, 1 1 2, 2 0 3)');
    CREATE TABLE mixed_m (id integer PRIMARY KEY, geom geometry(GeometryM, 4326));
    INSERT INTO mixed_m VALUES (1, 'SRID=4326;POINTM(0.5 0.5 1)'), (2, 'SRID=4326;CIRCULARSTRINGM(0 0 1, 1 1 2, 2 0 3)');`)
  t.after(() => runSql(db.url, 'DROP TABLE arcs_m, mixed_m'))
  const app = await makeApp(t, { paths: [db.url] })
  for (const [id, count] of [['arcs_m', 1], ['mixed_m', 2]]) {
    const res = await app.inject({ url: `/${id}/0/0/0` })
    assert.equal(res.statusCode, 200, `${id}: ${res.payload}`)
    assert.equal(decode(res.rawPayload).layers[id].length, count, id)
    const items = await app.inject({ url: `/ogc/collections/${id}/items` })
    assert.equal(items.statusCode, 200, `${id}: ${items.payload}`)
    assert.equal(items.json().features.length, count)
    assert.ok(items.json().features.every((f) => f.geometry.type === 'Point' || f.geometry.type === 'LineString'), 'arcs as lines')
  }
})

test('re-discovery (SIGHUP) finds new tables and drops removed ones', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const app = await makeApp(t, { paths: [db.url] })
  await runSql(db.url, 'CREATE TABLE late_table (id integer PRIMARY KEY, geom geometry(Point, 4326)); INSERT INTO late_table VALUES (1, ST_SetSRID(ST_MakePoint(0, 0), 4326))')
  assert.equal((await app.inject({ url: '/late_table/0/0/0' })).statusCode, 404)
  await app.catalog.reload()
  assert.equal((await app.inject({ url: '/late_table/0/0/0' })).statusCode, 200)
  await runSql(db.url, 'DROP TABLE late_table')
  await app.catalog.reload()
  assert.equal((await app.inject({ url: '/late_table/0/0/0' })).statusCode, 404)
})

test('a table whose name is reserved keeps the id it was served under across re-discoveries', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  await runSql(db.url, 'CREATE TABLE list (id integer PRIMARY KEY, geom geometry(Point, 4326)); INSERT INTO list VALUES (1, ST_SetSRID(ST_MakePoint(0, 0), 4326))')
  t.after(() => runSql(db.url, 'DROP TABLE list'))
  const app = await makeApp(t, { paths: [db.url] })
  const idOfList = () => [...app.catalog.registry.entries.values()].filter((e) => e.kind === 'postgis' && /(^|\.)list(-\d+)?$/.test(e.id)).map((e) => e.id)
  const [id] = idOfList()
  assert.ok(id !== undefined && id !== 'list', `served under another id than /list: ${idOfList()}`)
  for (let round = 1; round <= 3; round++) {
    await app.catalog.reload()
    assert.deepEqual(idOfList(), [id], `after re-discovery ${round}`)
    assert.equal((await app.inject({ url: `/${id}/0/0/0` })).statusCode, 200)
  }
})

test('every shared PostGIS fixture loads and serves: martin tables, GeoJSON layers, the tegola dump', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  if (!needs(t, HAVE_FIXTURES, '../shared/fixtures is not present')) return
  assert.deepEqual(loaded.martin.filter((f) => f.includes('FAILED')), [], 'every martin SQL file loads')
  const app = await makeApp(t, { paths: [db.url] })
  const catalog = (await app.inject({ url: '/catalog' })).json().filter((c) => c.kind === 'postgis')
  for (const id of ['MixPoints', 'points3857', 'table_source_multiple_geom.geom1', 'table_source_multiple_geom.geom2', 'mat_view',
    'ne_110m_admin_0_countries', 'ne_110m_populated_places', 'tl_2018_51685_roads', 'ne_10m_land_scale_rank', 'osm_buildings_test', 'three_d_test', 'hstore_test']) {
    assert.ok(catalog.some((c) => c.id === id), `${id} is served (have: ${catalog.map((c) => c.id).join(', ')})`)
  }
  const quoted = catalog.find((c) => c.id.includes('Points'))
  assert.ok(quoted, 'the table named with quotes, backslashes and spaces is served')
  let tiles = 0
  for (const set of catalog) {
    const res = await app.inject({ url: `/${encodeURIComponent(set.id)}/0/0/0` })
    assert.ok(res.statusCode === 200 || res.statusCode === 204, `${set.id} → ${res.statusCode} ${res.payload.slice(0, 200)}`)
    if (res.statusCode === 200) {
      decode(res.rawPayload) // a valid MVT
      tiles++
    }
  }
  assert.ok(tiles >= 12)
  // NAD83 (EPSG:4269) roads of Manassas Park, VA, where they are.
  const [x, y] = lonLatToTile(-77.44, 38.77, 12)
  const roads = decode((await app.inject({ url: `/tl_2018_51685_roads/12/${x}/${y}` })).rawPayload).layers.tl_2018_51685_roads
  assert.ok(roads.length > 10)
  assert.ok(typeof roads.feature(0).properties.FULLNAME === 'string')
  // Lines whose box meets the tile's but which are clipped away entirely are left out, not sent without geometry.
  for (let i = 0; i < roads.length; i++) assert.ok(roads.feature(i).loadGeometry().flat().length > 0, `road ${i} has a geometry`)
  const comment = (await app.inject({ url: '/mat_view.json' })).json()
  assert.equal(comment.description, 'materialized view comment', 'TileJSON from the table comment')
})

test('the database going away: 503 for PostGIS sets, files keep serving, tiles flow again when it is back', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  if (db.pause === null) return t.skip('DATABASE_URL given: this test needs the throwaway cluster to stop and start it')
  const dir = tempDir(t)
  writeMbtiles(join(dir, 'file.mbtiles'), { tiles: vectorTiles([[0, 0, 0]]) })
  const app = await makeApp(t, { paths: [db.url, dir], cacheMB: 0, postgres: { connectTimeoutMs: 1000, statementTimeoutMs: 1000 } })
  const [x, y] = lonLatToTile(8.54, 47.37, 12)
  const url = `/public.zurich_points/12/${x}/${y}`
  assert.equal((await app.inject({ url })).statusCode, 200)
  await db.pause()
  try {
    const started = Date.now()
    const down = await app.inject({ url })
    assert.equal(down.statusCode, 503)
    assert.ok(Date.now() - started < 5000, `503 in ${Date.now() - started} ms`)
    assert.equal((await app.inject({ url: '/file/0/0/0' })).statusCode, 200, 'file sets keep serving')
    assert.equal((await app.inject({ url: '/health' })).statusCode, 200)
  } finally {
    await db.start()
  }
  let status = 0
  for (let i = 0; i < 40 && status !== 200; i++) {
    status = (await app.inject({ url })).statusCode
    if (status !== 200) await new Promise((resolve) => setTimeout(resolve, 250))
  }
  assert.equal(status, 200, 'recovered without a restart')
})

test('a database unreachable at start-up never stops the server', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const dir = tempDir(t)
  writeMbtiles(join(dir, 'file.mbtiles'), { tiles: vectorTiles([[0, 0, 0]]) })
  const { freePort } = await import('../bench/servers.js')
  const app = await makeApp(t, { paths: [`postgres://nobody:secret@127.0.0.1:${await freePort()}/none`, dir], postgres: { connectTimeoutMs: 500, retryMs: 60_000 } })
  assert.deepEqual((await app.inject({ url: '/list' })).json(), ['file'])
  assert.equal((await app.inject({ url: '/file/0/0/0' })).statusCode, 200)
})

test('a table the config names answers 503 with Retry-After while its database is down at start-up, for tiles, TileJSON and features; then 200 once it answers', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  if (db.pause === null) return t.skip('DATABASE_URL given: this test needs the throwaway cluster to stop and start it')
  await db.pause()
  let app
  try {
    app = await makeApp(t, { paths: [db.url], cacheMB: 0, postgres: { connectTimeoutMs: 500, retryMs: 300, tables: { held_points: { schema: 'public', table: 'zurich_points' } } } })
    for (const url of ['/held_points/0/0/0', '/held_points.json', '/ogc/collections/held_points/items']) {
      const res = await app.inject({ url })
      assert.equal(res.statusCode, 503, `${url}: ${res.body}`)
      assert.equal(res.headers['retry-after'], '10', url)
      assert.match(res.json().message, /held_points/)
      assert.doesNotMatch(res.body, /postgres:\/\//, 'no connection string')
    }
    assert.deepEqual((await app.inject({ url: '/health' })).json().unavailable.map((u) => u.id), ['held_points'])
  } finally {
    await db.start()
  }
  const res = await eventually(() => app.inject({ url: '/held_points/0/0/0' }), (r) => r.statusCode === 200, 10000)
  assert.equal(res.statusCode, 200, 'served once the database answers, without a restart')
  assert.equal((await app.inject({ url: '/ogc/collections/held_points/items?limit=1' })).statusCode, 200)
  assert.ok(!(await app.inject({ url: '/health' })).json().unavailable.some((u) => u.id === 'held_points'))
})

test('tiles at the world edges and projected CRSs get their features; odd column names; SRID-0 data with a configured SRID', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  await runSql(db.url, `
    CREATE TABLE edge_points (id integer PRIMARY KEY, t text, geom geometry(Point, 4326));
    INSERT INTO edge_points VALUES (1, 'west', ST_SetSRID(ST_MakePoint(-179.5, 10), 4326)), (2, 'east', ST_SetSRID(ST_MakePoint(179.5, 10), 4326));
    CREATE TABLE swiss (id integer PRIMARY KEY, mvt_geom text, geom geometry(Point, 2056));
    INSERT INTO swiss VALUES (1, 'zurich', ST_Transform(ST_SetSRID(ST_MakePoint(8.54, 47.37), 4326), 2056));
    CREATE TABLE bng (id integer PRIMARY KEY, name text, geom geometry(Point, 27700));
    INSERT INTO bng VALUES (1, 'derby', ST_Transform(ST_SetSRID(ST_MakePoint(-1.47, 52.92), 4326), 27700));
    CREATE TABLE geog_points (id integer PRIMARY KEY, label text, geog geography(Point, 4326));
    INSERT INTO geog_points VALUES (1, 'zurich', 'SRID=4326;POINT(8.54 47.37)'), (2, 'sydney', 'SRID=4326;POINT(151.2 -33.87)');
    CREATE INDEX ON geog_points USING gist (geog);
    CREATE TABLE no_srid (id integer PRIMARY KEY, geom geometry);
    INSERT INTO no_srid VALUES (1, ST_MakePoint(8.54, 47.37));
    CREATE FUNCTION ov(z integer, x integer, y integer) RETURNS bytea AS $$ SELECT ''::bytea $$ LANGUAGE sql;
    CREATE FUNCTION ov(z integer, x integer, y integer, query json) RETURNS bytea AS $$ SELECT ''::bytea $$ LANGUAGE sql;`)
  t.after(() => runSql(db.url, 'DROP TABLE edge_points, swiss, bng, no_srid, geog_points; DROP FUNCTION ov(integer, integer, integer); DROP FUNCTION ov(integer, integer, integer, json)'))
  const app = await makeApp(t, { paths: [db.url], postgres: { tables: { declared: { table: 'no_srid', srid: 4326 } } } })
  const names = (buf) => { const l = decode(buf).layers.edge_points; return Array.from({ length: l?.length ?? 0 }, (_, i) => l.feature(i).properties.t).sort() }
  assert.deepEqual(names((await app.inject({ url: '/edge_points/0/0/0' })).rawPayload), ['east', 'west'])
  assert.deepEqual(names((await app.inject({ url: '/edge_points/1/0/0' })).rawPayload), ['west'], 'x = 0 at z1')
  assert.deepEqual(names((await app.inject({ url: '/edge_points/1/1/0' })).rawPayload), ['east'], 'x = 2^z - 1 at z1')
  const [ex, ey] = lonLatToTile(179.5, 10, 8)
  assert.deepEqual(names((await app.inject({ url: `/edge_points/8/${ex}/${ey}` })).rawPayload), ['east'])
  for (const z of [0, 3, 12]) {
    const [x, y] = lonLatToTile(8.54, 47.37, z)
    const swiss = decode((await app.inject({ url: `/swiss/${z}/${x}/${y}` })).rawPayload).layers.swiss
    assert.equal(swiss?.feature(0).properties.mvt_geom, 'zurich', `EPSG:2056 at z${z}, with a column named like the geometry alias`)
  }
  // British National Grid: PROJ refuses the corners of low-zoom tiles far outside its domain; those tiles are made
  // with their envelope clipped to the data, so they still show the feature, and tiles elsewhere are empty.
  for (const z of [0, 1, 2, 3, 6, 12]) {
    const [bx, by] = lonLatToTile(-1.47, 52.92, z)
    const res = await app.inject({ url: `/bng/${z}/${bx}/${by}` })
    assert.equal(res.statusCode, 200, `EPSG:27700 at z${z}: ${res.body}`)
    assert.equal(decode(res.rawPayload).layers.bng?.feature(0).properties.name, 'derby', `EPSG:27700 at z${z}`)
  }
  for (const far of ['2/3/2', '1/1/1', '3/7/5']) assert.equal((await app.inject({ url: `/bng/${far}` })).statusCode, 204, far)
  const [x, y] = lonLatToTile(8.54, 47.37, 10)
  assert.equal((await app.inject({ url: `/declared/10/${x}/${y}` })).statusCode, 200, 'SRID-0 rows served in the configured SRID')
  const geog = decode((await app.inject({ url: `/geog_points/10/${x}/${y}` })).rawPayload).layers.geog_points
  assert.equal(geog.length, 1, 'a geography column: only Zurich in the Zurich tile')
  assert.equal(geog.feature(0).properties.label, 'zurich')
  const list = (await app.inject({ url: '/list' })).json()
  assert.ok(list.includes('public.ov') && list.includes('public.ov-2'), 'overloads both served: ' + list.filter((i) => i.includes('ov')))
})

test('tiles under load are pipelined on poolSize connections of their own, each request gets its own tile, and a slow tile holds up no other', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const app = await makeApp(t, { paths: [db.url], postgres: { poolSize: 2, cacheTtlS: 0 } })
  const [x0, y0] = lonLatToTile(8.54, 47.37, 14)
  const urls = []
  for (let dx = -4; dx < 4; dx++) for (let dy = -4; dy < 4; dy++) urls.push(`/public.zurich_points/14/${x0 + dx}/${y0 + dy}`)
  // A tile's features by id (their order follows the plan PostgreSQL chooses, which may change after a few runs)
  const features = (buf) => { const l = decode(buf).layers.zurich_points; return Array.from({ length: l.length }, (_, i) => l.feature(i).id).sort((a, b) => a - b).join() }
  const alone = []
  for (const url of urls) alone.push(features((await app.inject({ url })).rawPayload)) // one at a time: nothing to pipeline
  assert.ok(new Set(alone).size > 40, 'the tiles differ from each other')
  const slow = app.inject({ url: '/slow_tile/0/0/0' }) // 3 s on one of the two connections
  await sleep(200)
  const started = Date.now()
  const together = await Promise.all(urls.map((url) => app.inject({ url })))
  const took = Date.now() - started
  together.forEach((res, i) => assert.equal(features(res.rawPayload), alone[i], `${urls[i]}: its own tile, not its neighbour's`))
  assert.ok(took < 2500, `the tiles went on the other connection, not behind the slow tile (${took} ms)`)
  const client = new pg.Client({ connectionString: db.url })
  await client.connect()
  const { rows } = await client.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'tile-cannon tiles' AND datname = current_database()")
  await client.end()
  assert.equal(rows[0].n, 2, 'poolSize connections for tiles')
  assert.equal((await slow).statusCode, 204, 'the slow tile answered too (empty)')
})

test('composites: each part within its zoom range, no duplicate layers, and re-discovery keeps unchanged caches', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const app = await makeApp(t, { paths: [db.url], postgres: { tables: { low: { table: 'zurich_points', maxzoom: 3 } } } })
  const [x, y] = lonLatToTile(8.54, 47.37, 10)
  const tile = decode((await app.inject({ url: `/low,Mixed Case Roads/10/${x}/${y}` })).rawPayload)
  assert.deepEqual(Object.keys(tile.layers), ['Mixed Case Roads'], 'the maxzoom 3 part stays out at z10')
  // `low` is the table zurich_points too: its layer is zurich_points.
  for (const url of ['/low,public.zurich_points/0/0/0', '/low,public.zurich_points.json']) {
    const twice = await app.inject({ url })
    assert.equal(twice.statusCode, 400, `${url}: two layers named zurich_points`)
    assert.equal(twice.json().message, "composite 'low,public.zurich_points' cannot be served: the sets 'low' and 'public.zurich_points' both have a layer 'zurich_points', and a tile holds a layer name once: compose sets whose layers are named apart")
  }
  const entry = app.catalog.get('Mixed Case Roads')
  await app.catalog.reload()
  assert.equal(app.catalog.get('Mixed Case Roads'), entry, 'unchanged set kept as is')
})

test('composites of tile functions that name their layer alike: 400 saying which, never a tile holding two layers of one name', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  // Two functions that declare no vector_layers, each putting a point in a layer called `shared` (dup_b only at z0).
  const fn = (name, where) => `CREATE FUNCTION ${name}(z integer, x integer, y integer) RETURNS bytea AS $$
      SELECT ST_AsMVT(t, 'shared', 4096, 'geom') FROM (
        SELECT ST_AsMVTGeom(ST_Transform(ST_SetSRID(ST_MakePoint(1, 1), 4326), 3857), ST_TileEnvelope(z, x, y)) AS geom, '${name}' AS part
      ) AS t WHERE ${where}
    $$ LANGUAGE sql IMMUTABLE;`
  await runSql(db.url, fn('dup_a', 'true') + fn('dup_b', 'z = 0'))
  t.after(() => runSql(db.url, 'DROP FUNCTION dup_a; DROP FUNCTION dup_b;'))
  const app = await makeApp(t, { paths: [db.url] })
  const parts = async (url) => {
    const layers = decode((await app.inject({ url })).rawPayload).layers
    return Object.fromEntries(Object.entries(layers).map(([name, l]) => [name, Array.from({ length: l.length }, (_, i) => l.feature(i).properties.part ?? null)]))
  }
  assert.deepEqual(await parts('/dup_a/0/0/0'), { shared: ['dup_a'] })
  assert.deepEqual(await parts('/dup_b/0/0/0'), { shared: ['dup_b'] })

  for (const [url, composite] of [['/dup_a,dup_b/0/0/0', 'dup_a,dup_b'], ['/dup_b,dup_a/0/0/0.pbf', 'dup_b,dup_a'], ['/dup_a,dup_b/0/0/0.geojson', 'dup_a,dup_b']]) {
    const res = await app.inject({ url })
    assert.equal(res.statusCode, 400, `${url}: ${res.body}`)
    const [first, second] = composite.split(',')
    assert.equal(res.json().message, `composite '${composite}' cannot be served: the sets '${first}' and '${second}' both have a layer 'shared', and a tile holds a layer name once: compose sets whose layers are named apart`)
  }
  // Where only one of them has the layer, the tile is whole; with a function whose layer is its own, every tile is.
  assert.deepEqual(await parts('/dup_a,dup_b/1/1/0'), { shared: ['dup_a'] })
  assert.deepEqual(await parts('/dup_a,query_echo/0/0/0'), { shared: ['dup_a'], echo: [null] })
})

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
/** Polls `read` until `done(value)` or `ms` have passed; returns the last value (NOTIFY arrives asynchronously). */
async function eventually (read, done, ms = 3000) {
  const until = Date.now() + ms
  let value = await read()
  while (!done(value) && Date.now() < until) {
    await sleep(50)
    value = await read()
  }
  return value
}
const ZURICH = 'ST_SetSRID(ST_MakePoint(8.54, 47.37), 4326)'
/** The `label` of the first feature of a layer in a tile, or null for a 204. */
async function label (app, set, [z, x, y], layer = set) {
  const res = await app.inject({ url: `/${encodeURIComponent(set)}/${z}/${x}/${y}` })
  if (res.statusCode === 204) return null
  assert.equal(res.statusCode, 200, `${set}: ${res.payload}`)
  return decode(res.rawPayload).layers[layer]?.feature(0).properties.label ?? null
}

test('a composite whose part\'s table is altered or dropped: 503, then its database is discovered again at once and the composite answers as the catalog now is', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  await runSql(db.url, `CREATE TABLE comp_a (id integer PRIMARY KEY, geom geometry(Point, 4326));
    CREATE TABLE comp_b (id integer PRIMARY KEY, kind text, geom geometry(Point, 4326));
    INSERT INTO comp_a VALUES (1, ${ZURICH}); INSERT INTO comp_b VALUES (1, 'park', ${ZURICH});`)
  t.after(() => runSql(db.url, 'DROP TABLE IF EXISTS comp_a, comp_b'))
  const app = await makeApp(t, { paths: [db.url], cacheMB: 0 }) // discoverIntervalS: 300, the default
  const statuses = new Set()
  const read = async () => {
    const res = await app.inject({ url: '/comp_a,comp_b/0/0/0' })
    statuses.add(res.statusCode)
    return res
  }
  const layers = (res) => Object.fromEntries(Object.entries(decode(res.rawPayload).layers).map(([name, l]) => [name, { ...l.feature(0).properties }]))
  assert.deepEqual(layers(await read()), { comp_a: {}, comp_b: { kind: 'park' } })

  await runSql(db.url, 'ALTER TABLE comp_b DROP COLUMN kind')
  const altered = await eventually(read, (res) => res.statusCode === 200, 10000)
  assert.equal(altered.statusCode, 200, `a part's dropped column: ${altered.body}`)
  assert.deepEqual(layers(altered), { comp_a: {}, comp_b: {} }, 'the part as it now is')

  await runSql(db.url, 'DROP TABLE comp_b')
  const dropped = await eventually(read, (res) => res.statusCode === 404, 10000) // a second discovery: at most every 5 s
  assert.equal(dropped.statusCode, 404, `a part's dropped table: ${dropped.body}`)
  assert.equal(dropped.json().message, "no tileset 'comp_a,comp_b'", 'as the catalog now is: no comp_b')
  assert.deepEqual([...statuses].sort(), [200, 404, 503], 'never a 500')
  assert.equal((await app.inject({ url: '/comp_a/0/0/0' })).statusCode, 200, 'the other part serves on')
})

test('a composite part failing (permission denied on its table) is logged without its entry: no database password in the log', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  await runSql(db.url, `CREATE TABLE priv_a (id integer PRIMARY KEY, geom geometry(Point, 4326));
    CREATE TABLE priv_b (id integer PRIMARY KEY, geom geometry(Point, 4326));
    INSERT INTO priv_a VALUES (1, ${ZURICH}); INSERT INTO priv_b VALUES (1, ${ZURICH});
    CREATE ROLE tc_reader LOGIN PASSWORD 'sekrit-pass'; GRANT SELECT ON priv_a, priv_b TO tc_reader;`)
  t.after(() => runSql(db.url, 'DROP TABLE IF EXISTS priv_a, priv_b; DROP ROLE IF EXISTS tc_reader'))
  const url = new URL(db.url)
  url.username = 'tc_reader'
  url.password = 'sekrit-pass'
  const logs = []
  const app = await makeApp(t, { paths: [url.href], cacheMB: 0 }, { logs })
  assert.equal((await app.inject({ url: '/priv_a,priv_b/0/0/0' })).statusCode, 200)
  await runSql(db.url, 'REVOKE SELECT ON priv_b FROM tc_reader')
  const res = await app.inject({ url: '/priv_a,priv_b/0/0/0' })
  assert.ok(res.statusCode >= 500, `${res.statusCode} ${res.body}`)
  assert.ok(!res.body.includes('sekrit'))
  const logged = JSON.stringify(logs)
  assert.ok(logs.some((l) => l.level >= 50), 'the failure is logged')
  assert.ok(!logged.includes('sekrit-pass'), logged.slice(0, 300))
})

test('a grant revoked, or a function raising feature_not_supported: 503 naming the set for tiles, features and the functions reading it, each logged once and no stack, as for any error a function raises; the grant back, all serve again', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  await runSql(db.url, `CREATE TABLE granted (id integer PRIMARY KEY, geom geometry(Point, 4326));
    INSERT INTO granted VALUES (1, ${ZURICH});
    CREATE FUNCTION granted_tile(z integer, x integer, y integer) RETURNS bytea AS $$
      SELECT ST_AsMVT(q, 'granted_tile') FROM (SELECT ST_AsMVTGeom(ST_Transform(geom, 3857), ST_TileEnvelope(z, x, y)) AS geom, id FROM granted) q
    $$ LANGUAGE sql STABLE;
    CREATE FUNCTION unsupported_tile(z integer, x integer, y integer) RETURNS bytea AS $$
      BEGIN RAISE EXCEPTION 'not at zoom %', z USING ERRCODE = 'feature_not_supported'; END $$ LANGUAGE plpgsql;
    CREATE FUNCTION misspelt_tile(z integer, x integer, y integer) RETURNS bytea AS $$
      BEGIN EXECUTE 'SELEC 1'; RETURN NULL; END $$ LANGUAGE plpgsql;
    CREATE ROLE tc_grants LOGIN PASSWORD 'grants-pass'; GRANT SELECT ON granted TO tc_grants;`)
  t.after(() => runSql(db.url, 'DROP FUNCTION IF EXISTS granted_tile, unsupported_tile, misspelt_tile; DROP TABLE IF EXISTS granted; DROP ROLE IF EXISTS tc_grants'))
  const url = new URL(db.url)
  url.username = 'tc_grants'
  url.password = 'grants-pass'
  const logs = []
  const app = await makeApp(t, { paths: [url.href], cacheMB: 0 }, { logs })
  const urls = ['/granted/0/0/0', '/granted_tile/0/0/0', '/ogc/collections/granted/items?limit=1', '/granted,granted_tile/0/0/0']
  for (const u of urls) assert.equal((await app.inject({ url: u })).statusCode, 200, u)

  await runSql(db.url, 'REVOKE SELECT ON granted FROM tc_grants')
  const from = logs.length
  for (let i = 0; i < 3; i++) {
    for (const u of [...urls, '/unsupported_tile/0/0/0', '/misspelt_tile/0/0/0']) {
      const res = await app.inject({ url: u })
      assert.equal(res.statusCode, 503, `${u}: ${res.body}`)
      assert.equal(res.headers['retry-after'], '10')
      assert.match(res.json().message, /^tileset '[a-z_,]+' could not read (this tile|these features)$/)
      assert.doesNotMatch(res.body, /permission|not at zoom|node_modules|\bat\b/, 'no database message, stack or path')
    }
  }
  const failed = logs.slice(from).filter((l) => l.level >= 50)
  assert.ok(!failed.some((l) => l.msg === 'request failed' || l.err?.stack), JSON.stringify(failed).slice(0, 500))
  // Each set's failure once, however many requests: the table (its tiles and features alike), the function that
  // reads it, the composite, and the functions that raise (a syntax error in a function's own SQL is its failure too).
  assert.deepEqual(failed.map((l) => l.set).sort(), ['granted', 'granted,granted_tile', 'granted_tile', 'misspelt_tile', 'unsupported_tile'])
  assert.match(failed.find((l) => l.set === 'granted_tile').reason, /permission denied for table granted/)
  assert.match(failed.find((l) => l.set === 'unsupported_tile').reason, /not at zoom 0/)

  await runSql(db.url, 'GRANT SELECT ON granted TO tc_grants')
  for (const u of urls) assert.equal((await app.inject({ url: u })).statusCode, 200, `${u}, the grant back, no reload`)
})

test('a table readable only through column grants is served with the columns the role may read, in tiles, TileJSON and features; one whose geometry it may not read is not', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  await runSql(db.url, `CREATE TABLE col_granted (id integer PRIMARY KEY, label text, secret text, geom geometry(Point, 4326));
    INSERT INTO col_granted VALUES (1, 'shown', 'hidden', ${ZURICH});
    CREATE TABLE col_blind (id integer PRIMARY KEY, label text, geom geometry(Point, 4326));
    CREATE ROLE tc_columns LOGIN PASSWORD 'columns-pass';
    GRANT SELECT (id, label, geom) ON col_granted TO tc_columns; GRANT SELECT (id, label) ON col_blind TO tc_columns;`)
  t.after(() => runSql(db.url, 'DROP TABLE IF EXISTS col_granted, col_blind; DROP ROLE IF EXISTS tc_columns'))
  const url = new URL(db.url)
  url.username = 'tc_columns'
  url.password = 'columns-pass'
  const app = await makeApp(t, { paths: [url.href] })
  const list = (await app.inject({ url: '/list' })).json()
  assert.ok(list.includes('col_granted'), JSON.stringify(list))
  assert.ok(!list.includes('col_blind'), 'its geometry cannot be read')
  assert.deepEqual((await app.inject({ url: '/col_granted.json' })).json().vector_layers[0].fields, { id: 'Number', label: 'String' })
  const [x, y] = lonLatToTile(8.54, 47.37, 12)
  const tile = await app.inject({ url: `/col_granted/12/${x}/${y}` })
  assert.equal(tile.statusCode, 200, tile.body)
  const feature = decode(tile.rawPayload).layers.col_granted.feature(0)
  assert.deepEqual({ id: feature.id, ...feature.properties }, { id: 1, label: 'shown' })
  const items = await app.inject({ url: '/ogc/collections/col_granted/items' })
  assert.equal(items.statusCode, 200, items.body)
  assert.deepEqual(items.json().features.map((f) => [f.id, f.properties]), [[1, { label: 'shown' }]])
  assert.equal((await app.inject({ url: '/ogc/collections/col_granted/items/1' })).statusCode, 200)
})

test('a partitioned table is one set and collection holding every partition\'s rows; a partition is served only when the config names it', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  await runSql(db.url, `CREATE TABLE parted (id integer, kind text, geom geometry(Point, 4326)) PARTITION BY LIST (kind);
    CREATE TABLE parted_a PARTITION OF parted FOR VALUES IN ('a');
    CREATE TABLE parted_b PARTITION OF parted FOR VALUES IN ('b');
    INSERT INTO parted VALUES (1, 'a', ${ZURICH}), (2, 'b', ${ZURICH});`)
  t.after(() => runSql(db.url, 'DROP TABLE IF EXISTS parted'))
  const app = await makeApp(t, { paths: [db.url], postgres: { tables: { only_b: { table: 'parted_b' } } } })
  const list = (await app.inject({ url: '/list' })).json()
  assert.deepEqual(list.filter((id) => /parted|only_b/.test(id)).sort(), ['only_b', 'parted'])
  const collections = (await app.inject({ url: '/ogc/collections' })).json().collections.map((c) => c.id)
  assert.deepEqual(collections.filter((id) => /parted|only_b/.test(id)).sort(), ['only_b', 'parted'])
  const kinds = async (set) => {
    const res = await app.inject({ url: `/ogc/collections/${set}/items` })
    assert.equal(res.statusCode, 200, res.body)
    return res.json().features.map((f) => f.properties.kind).sort()
  }
  assert.deepEqual(await kinds('parted'), ['a', 'b'])
  assert.deepEqual(await kinds('only_b'), ['b'])
  const [x, y] = lonLatToTile(8.54, 47.37, 12)
  assert.equal(decode((await app.inject({ url: `/parted/12/${x}/${y}` })).rawPayload).layers.parted.length, 2)
})

test('rows holding NaN or Infinity coordinates are left out of tiles and bounds; the other rows are served', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  // In lon/lat (transformed: PROJ raised on a non-finite point, a 503 for every tile the row's box touched), in Web
  // Mercator (drawn as is: ST_AsMVT wrote the row at INT_MIN) and in a regional CRS (PROJ raised on NaN too).
  const bad = (p) => [
    "ST_MakePoint('NaN', 'NaN')", `ST_MakePoint(${p[0]}, 'NaN')`, `ST_MakePoint('Infinity', ${p[1]})`,
    `ST_MakeLine(ST_MakePoint(${p[0]}, ${p[1]}), ST_MakePoint('-Infinity', ${p[1]}))`, // a box from -Infinity to here
    `ST_MakePolygon(ST_MakeLine(ARRAY[ST_MakePoint(${p[0]}, ${p[1]}), ST_MakePoint('NaN', ${p[1]}), ST_MakePoint(${p[0]} + 1, ${p[1]} + 1), ST_MakePoint(${p[0]}, ${p[1]})]))`, // a box without the NaN
    `ST_Collect(ST_MakePoint(${p[0]}, ${p[1]}), ST_MakePoint('NaN', 'NaN'))`, // a multipoint
    `ST_Collect(ST_MakeLine(ST_MakePoint(${p[0]}, ${p[1]}), ST_MakePoint(${p[0]} + 1, ${p[1]})), ST_MakePoint(${p[0]}, 'Infinity'))`, // a collection
  ]
  const sets = { nan_swiss: [2056, [2683186.29, 1247156.74]], nan_lonlat: [4326, [8.54, 47.37]], nan_mercator: [3857, [950668.45, 6002678.0]] }
  const sql = Object.entries(sets).map(([name, [srid, p]]) => `CREATE TABLE ${name} (id integer PRIMARY KEY, label text, geom geometry(Geometry, ${srid}));
    INSERT INTO ${name} VALUES (1, 'good', ST_SetSRID(ST_MakePoint(${p[0]}, ${p[1]}), ${srid}));
    INSERT INTO ${name} SELECT 1 + n, 'bad ' || n, ST_SetSRID(g, ${srid}) FROM unnest(ARRAY[${bad(p).join(', ')}]) WITH ORDINALITY AS b(g, n);`).join('\n')
  await runSql(db.url, sql)
  t.after(() => runSql(db.url, `DROP TABLE ${Object.keys(sets).join(', ')}`))
  const app = await makeApp(t, { paths: [db.url], cacheMB: 0 })
  const extent = 4096
  for (const name of Object.keys(sets)) {
    for (const z of [0, 5, 10, 14]) {
      const [x, y] = lonLatToTile(8.54, 47.37, z)
      const res = await app.inject({ url: `/${name}/${z}/${x}/${y}` })
      assert.equal(res.statusCode, 200, `${name} z${z}: ${res.body}`)
      const layer = decode(res.rawPayload).layers[name]
      const features = Array.from({ length: layer.length }, (_, i) => layer.feature(i))
      assert.deepEqual(features.map((f) => f.properties.label), ['good'], `${name} z${z}: the good row only`)
      for (const { x: px, y: py } of features[0].loadGeometry().flat()) assert.ok(px >= 0 && px <= extent && py >= 0 && py <= extent, `${name} z${z}: at ${px},${py}`)
    }
    const [w, s, e, n] = (await app.inject({ url: `/${name}.json` })).json().bounds
    assert.ok(Math.abs(w - 8.54) < 1e-3 && Math.abs(e - 8.54) < 1e-3 && Math.abs(s - 47.37) < 1e-3 && Math.abs(n - 47.37) < 1e-3, `${name}: bounds of the good row, not [${[w, s, e, n]}]`)
  }
})

test('a geography over the antimeridian is drawn the short way, on both sides of 180° and nowhere near 0°; long edges along their great circle', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  // Cast to geometry and drawn planar, the 20° line from 170° to -170° ran 340° through 0° (half the world in each
  // z1 tile), and the tiles at 180° had nothing of it; the 90° line along 60° N was drawn along the parallel.
  await runSql(db.url, `CREATE TABLE geog_routes (id integer PRIMARY KEY, label text, geog geography(Geometry, 4326));
    INSERT INTO geog_routes VALUES (1, 'over 180', 'SRID=4326;LINESTRING(170 10, -170 10)'),
      (2, 'area over 180', 'SRID=4326;POLYGON((170 -10, -170 -10, -170 -20, 170 -20, 170 -10))'),
      (3, 'great circle', 'SRID=4326;LINESTRING(0 60, 90 60)'), (4, 'point', 'SRID=4326;POINT(1 1)');
    CREATE INDEX ON geog_routes USING gist (geog);`)
  t.after(() => runSql(db.url, 'DROP TABLE geog_routes'))
  const app = await makeApp(t, { paths: [db.url], cacheMB: 0 })
  /** label → the tile coordinates of its feature's vertices, as fractions of the tile */
  const drawn = async (url) => {
    const res = await app.inject({ url })
    assert.ok(res.statusCode === 200 || res.statusCode === 204, `${url}: ${res.statusCode} ${res.body}`)
    const layer = res.statusCode === 200 ? decode(res.rawPayload).layers.geog_routes : undefined
    const parts = (f) => f.loadGeometry().map((part) => part.map((p) => [p.x / layer.extent, p.y / layer.extent]))
    return Object.fromEntries(Array.from({ length: layer?.length ?? 0 }, (_, i) => layer.feature(i)).map((f) => [f.properties.label, parts(f).flat()]))
  }
  const world = decode((await app.inject({ url: '/geog_routes/0/0/0' })).rawPayload).layers.geog_routes
  for (const f of Array.from({ length: world.length }, (_, i) => world.feature(i)).filter((f) => /180/.test(f.properties.label))) {
    const parts = f.loadGeometry()
    // in two parts, one by each edge, none of whose edges spans the world
    assert.ok(parts.some((part) => part.every((p) => p.x < world.extent * 0.1)) && parts.some((part) => part.every((p) => p.x > world.extent * 0.9)), `${f.properties.label} at z0: ${JSON.stringify(parts)}`)
    for (const part of parts) for (let i = 1; i < part.length; i++) assert.ok(Math.abs(part[i].x - part[i - 1].x) < world.extent * 0.1, `${f.properties.label} at z0: an edge across the world`)
  }
  for (const [url, side] of [['/geog_routes/1/0/0', 'west'], ['/geog_routes/1/1/0', 'east'], ['/geog_routes/1/0/1', 'west'], ['/geog_routes/1/1/1', 'east']]) {
    const tile = await drawn(url)
    const label = url.endsWith('/0') ? 'over 180' : 'area over 180'
    assert.ok(tile[label], `${url}: ${label} is drawn`)
    assert.ok(tile[label].every(([x]) => (side === 'west' ? x < 10 / 180 + 0.02 : x > 1 - 10 / 180 - 0.02)), `${url}: ${label} by the antimeridian only, ${JSON.stringify(tile[label])}`)
  }
  for (const lon of [175, -175]) {
    const [x, y] = lonLatToTile(lon, 10, 5)
    assert.ok((await drawn(`/geog_routes/5/${x}/${y}`))['over 180'], `the tile at ${lon}° has the line`)
  }
  for (const [x, y] of [[15, 15], [16, 15]]) assert.equal((await drawn(`/geog_routes/5/${x}/${y}`))['over 180'], undefined, `5/${x}/${y}, at 0°: no line`)
  // Its great circle reaches 67.8° N halfway, where its tile is (the parallel at 60° is a tile further south).
  assert.ok((await drawn('/geog_routes/4/10/3'))['great circle'], 'drawn along its great circle')
  assert.deepEqual((await drawn('/geog_routes/0/0/0')).point?.length, 1)
})

test('a TIN, triangle or polyhedral surface in a `geometry` column is left out of its tiles; the other rows are served', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  // A column of any type, which discovery cannot refuse as it does a TIN column: ST_AsMVT raised ("'Triangle'
  // geometry type not supported"), and every tile holding such a row, and every composite with the set, was a 503.
  await runSql(db.url, `CREATE TABLE surface_rows (id integer PRIMARY KEY, label text, geom geometry);
    INSERT INTO surface_rows VALUES (1, 'point', 'SRID=4326;POINT(1 1)'), (2, 'tin', 'SRID=4326;TIN(((0 0,0 1,1 1,0 0)))'),
      (3, 'surface', 'SRID=4326;POLYHEDRALSURFACE(((0 0,0 1,1 1,0 0)))'), (4, 'triangle', 'SRID=4326;TRIANGLE((0 0,0 1,1 1,0 0))');
    CREATE TABLE surface_other (id integer PRIMARY KEY, label text, geom geometry(Point, 4326));
    INSERT INTO surface_other VALUES (1, 'other', 'SRID=4326;POINT(1 1)');`)
  t.after(() => runSql(db.url, 'DROP TABLE surface_rows, surface_other'))
  const app = await makeApp(t, { paths: [db.url], cacheMB: 0 })
  const labels = (res, layer) => {
    const l = decode(res.rawPayload).layers[layer]
    return Array.from({ length: l.length }, (_, i) => l.feature(i).properties.label)
  }
  for (const z of [0, 6]) {
    const [x, y] = lonLatToTile(0.5, 0.5, z)
    const res = await app.inject({ url: `/surface_rows/${z}/${x}/${y}` })
    assert.equal(res.statusCode, 200, `z${z}: ${res.body}`)
    assert.deepEqual(labels(res, 'surface_rows'), ['point'], `z${z}`)
    const both = await app.inject({ url: `/surface_rows,surface_other/${z}/${x}/${y}` })
    assert.equal(both.statusCode, 200, `composite z${z}: ${both.body}`)
    assert.deepEqual(labels(both, 'surface_other'), ['other'])
  }
})

test('a `geometry` column holding several SRIDs serves its rows in the first one found, in tiles and features alike, and says so once', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  // Served as SRID 4326 (its first row's), the rows in 2056 and 3857 were tested against a box in 4326: missing from
  // tiles, output as lon/lat in features, and each bbox raised "Operation on mixed SRID geometries" (503, for good).
  await runSql(db.url, `CREATE TABLE mixed_srids (id integer PRIMARY KEY, label text, geom geometry);
    INSERT INTO mixed_srids VALUES (1, 'lonlat', 'SRID=4326;POINT(8.5 47.4)');
    INSERT INTO mixed_srids VALUES (2, 'swiss', ST_Transform('SRID=4326;POINT(8.6 47.4)'::geometry, 2056)),
      (3, 'mercator', ST_Transform('SRID=4326;POINT(8.7 47.4)'::geometry, 3857));`)
  t.after(() => runSql(db.url, 'DROP TABLE mixed_srids'))
  const logs = []
  const app = await makeApp(t, { paths: [db.url], cacheMB: 0 }, { logs })
  for (const z of [0, 8]) {
    const [x, y] = lonLatToTile(8.5, 47.4, z)
    const res = await app.inject({ url: `/mixed_srids/${z}/${x}/${y}` })
    assert.equal(res.statusCode, 200, `z${z}: ${res.body}`)
    const layer = decode(res.rawPayload).layers.mixed_srids
    assert.deepEqual(Array.from({ length: layer.length }, (_, i) => layer.feature(i).properties.label), ['lonlat'], `z${z}`)
  }
  for (const query of ['', '?bbox=8,47,9,48', '?bbox=8,47,9,48&crs=EPSG:3857']) {
    const res = await app.inject({ url: `/ogc/collections/mixed_srids/items${query}` })
    assert.equal(res.statusCode, 200, `${query}: ${res.body}`)
    assert.deepEqual(res.json().features.map((f) => f.id), [1], query)
  }
  const [lon, lat] = (await app.inject({ url: '/ogc/collections/mixed_srids/items/1' })).json().geometry.coordinates
  assert.ok(Math.abs(lon - 8.5) < 1e-6 && Math.abs(lat - 47.4) < 1e-6)
  assert.equal((await app.inject({ url: '/ogc/collections/mixed_srids/items/2' })).statusCode, 404, 'a row of another SRID is not served')
  // The bounds of the rows served: over every row, metres were read as degrees (the world's, or past it).
  const [w, s, e, n] = (await app.inject({ url: '/mixed_srids.json' })).json().bounds
  assert.ok(Math.abs(w - 8.5) < 1e-6 && Math.abs(e - 8.5) < 1e-6 && Math.abs(s - 47.4) < 1e-6 && Math.abs(n - 47.4) < 1e-6, `bounds [${[w, s, e, n]}]`)
  const extent = (await app.inject({ url: '/ogc/collections/mixed_srids' })).json().extent.spatial.bbox[0]
  assert.ok(Math.abs(extent[0] - 8.5) < 1e-6 && Math.abs(extent[2] - 8.5) < 1e-6, `collection extent [${extent}]`)
  const warned = logs.filter((l) => /several SRIDs/.test(l.msg))
  assert.equal(warned.length, 1, JSON.stringify(warned))
  assert.equal(warned[0].set, 'mixed_srids')
  assert.equal(warned[0].srid, 4326)
})

test('properties named in postgres.tables that the table does not serve (a typo, a bytea column) are logged once, the others served', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  await runSql(db.url, `CREATE TABLE named_props (id integer PRIMARY KEY, label text, blob bytea, geom geometry(Point, 4326));
    INSERT INTO named_props VALUES (1, 'one', '\\x00', 'SRID=4326;POINT(8.5 47.4)')`)
  t.after(() => runSql(db.url, 'DROP TABLE named_props'))
  const logs = []
  const app = await makeApp(t, { paths: [db.url], cacheMB: 0, postgres: { tables: { named_props: { table: 'named_props', properties: ['label', 'lable', 'blob'] } } } }, { logs })
  await app.catalog.reload() // a re-discovery says nothing new
  const said = logs.filter((l) => l.set === 'named_props' && /does not serve/.test(l.msg))
  assert.deepEqual(said.map((l) => l.properties), [['lable', 'blob']])
  const [x, y] = lonLatToTile(8.5, 47.4, 8)
  const layer = decode((await app.inject({ url: `/named_props/8/${x}/${y}` })).rawPayload).layers.named_props
  assert.deepEqual({ ...layer.feature(0).properties }, { label: 'one' })
})

test('a `geometry` column without a declared SRID, empty at discovery (its SRID in the config), serves the rows inserted later, in their SRID or 0, bbox too', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  await runSql(db.url, 'CREATE TABLE later_rows (id integer PRIMARY KEY, label text, geom geometry)')
  t.after(() => runSql(db.url, 'DROP TABLE later_rows'))
  const app = await makeApp(t, { paths: [db.url], cacheMB: 0, postgres: { tables: { later_rows: { table: 'later_rows', srid: 4326 } } } })
  // One row in the real SRID, one in SRID 0 (which the config declares 4326).
  await runSql(db.url, "INSERT INTO later_rows VALUES (1, 'first', 'SRID=4326;POINT(8.5 47.4)'), (2, 'zero', 'POINT(8.51 47.41)')")
  const [x, y] = lonLatToTile(8.5, 47.4, 8)
  const res = await app.inject({ url: `/later_rows/8/${x}/${y}` })
  assert.equal(res.statusCode, 200, res.body)
  assert.equal(decode(res.rawPayload).layers.later_rows?.length, 2, 'the rows inserted after discovery are drawn')
  const items = await app.inject({ url: '/ogc/collections/later_rows/items' })
  assert.equal(items.statusCode, 200, items.body)
  assert.deepEqual(items.json().features.map((f) => f.id), [1, 2])
  // Discovered as SRID 0, a box was made SRID 0 too: ST_Intersects raised on the row in 4326 ("mixed SRID"), a 503.
  for (const [bbox, expected] of [['8,47,9,48', [1, 2]], ['8.505,47,9,48', [2]], ['0,0,1,1', []], ['940000,6000000,950000,6010000&bbox-crs=EPSG:3857', [1, 2]]]) {
    const boxed = await app.inject({ url: `/ogc/collections/later_rows/items?bbox=${bbox}` })
    assert.equal(boxed.statusCode, 200, `bbox=${bbox}: ${boxed.body}`)
    assert.deepEqual(boxed.json().features.map((f) => f.id).sort(), expected, `bbox=${bbox}`)
  }
})

test('made tiles expire: an UPDATE shows after the TTL, a 204 turns 200, TTL 0 reads every time; Cache-Control follows the TTL', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  await runSql(db.url, `
    CREATE TABLE ttl_points (id integer PRIMARY KEY, label text, geom geometry(Point, 4326));
    INSERT INTO ttl_points VALUES (1, 'old', ${ZURICH});
    CREATE TABLE ttl_empty (id integer PRIMARY KEY, label text, geom geometry(Point, 4326));
    CREATE SEQUENCE ttl_hits;
    CREATE FUNCTION ttl_counter(z integer, x integer, y integer) RETURNS bytea AS $$
      SELECT ST_AsMVT(t, 'counter', 4096, 'geom') FROM (
        SELECT ST_AsMVTGeom(ST_Transform(${ZURICH}, 3857), ST_TileEnvelope(z, x, y)) AS geom, nextval('ttl_hits') AS n) AS t
    $$ LANGUAGE sql VOLATILE;`)
  t.after(() => runSql(db.url, 'DROP TABLE ttl_points, ttl_empty; DROP FUNCTION ttl_counter; DROP SEQUENCE ttl_hits'))
  const dir = tempDir(t)
  writeMbtiles(join(dir, 'file.mbtiles'), { tiles: vectorTiles([[0, 0, 0]]) })
  // No NOTIFY listener: this test is about the lifetime alone.
  const app = await makeApp(t, {
    paths: [db.url, dir],
    postgres: { notifyChannel: false },
    sets: { ttl_points: { cacheTtlS: 1 }, ttl_empty: { cacheTtlS: 1 }, ttl_counter: { cacheTtlS: 0 } },
  })
  const zurich = [12, ...lonLatToTile(8.54, 47.37, 12)]
  assert.equal(await label(app, 'ttl_points', zurich), 'old')
  assert.equal(await label(app, 'ttl_empty', zurich), null, '204 before any row exists')
  await runSql(db.url, `UPDATE ttl_points SET label = 'new'; INSERT INTO ttl_empty VALUES (1, 'late', ${ZURICH})`)
  assert.equal(await label(app, 'ttl_points', zurich), 'old', 'cached within its lifetime')
  assert.equal(await label(app, 'ttl_empty', zurich), null, 'the cached 204 too')
  await sleep(1100)
  assert.equal(await label(app, 'ttl_points', zurich), 'new', 'read again once the TTL is over')
  assert.equal(await label(app, 'ttl_empty', zurich), 'late', 'the 204 expired the same way')

  const counter = async () => decode((await app.inject({ url: '/ttl_counter/0/0/0' })).rawPayload).layers.counter.feature(0).properties.n
  const first = await counter()
  assert.equal(await counter(), first + 1, 'TTL 0: every request goes to the database')

  const cacheControl = async (url) => {
    const res = await app.inject({ url })
    return `${res.statusCode} ${res.headers['cache-control']}`
  }
  assert.equal(await cacheControl(`/ttl_points/${zurich.join('/')}`), '200 public, max-age=1')
  assert.equal(await cacheControl('/ttl_points/12/0/0'), '204 public, max-age=1', 'a 204 has the same lifetime')
  assert.equal(await cacheControl('/ttl_counter/0/0/0'), '200 no-cache')
  assert.equal(await cacheControl(`/Mixed Case Roads/${zurich.join('/')}`), '200 public, max-age=60', 'the PostGIS default')
  assert.equal(await cacheControl('/Mixed Case Roads/12/0/0'), '204 public, max-age=60')
  assert.equal(await cacheControl('/file/0/0/0'), '200 public, max-age=3600', 'files keep theirs')
  assert.equal(await cacheControl(`/ttl_points,Mixed Case Roads/${zurich.join('/')}`), '200 public, max-age=1', 'a composite: its shortest part')

  const other = await makeApp(t, { paths: [db.url, dir], postgres: { cacheTtlS: 300, notifyChannel: false }, sets: { 'Mixed Case Roads': { cacheControl: 'no-store' }, file: { cacheTtlS: 30 } } })
  assert.equal((await other.inject({ url: `/public.zurich_points/${zurich.join('/')}` })).headers['cache-control'], 'public, max-age=300', 'postgres.cacheTtlS')
  assert.equal((await other.inject({ url: `/Mixed Case Roads/${zurich.join('/')}` })).headers['cache-control'], 'no-store', 'a configured cacheControl wins')
  assert.equal((await other.inject({ url: '/file/0/0/0' })).headers['cache-control'], 'public, max-age=30', 'any set may be given a lifetime')
})

test('NOTIFY purges the sets it names and only those; an empty payload the whole database; SIGHUP purges unchanged tables', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  await runSql(db.url, `
    CREATE TABLE notify_a (id integer PRIMARY KEY, label text, geom geometry(Point, 4326));
    CREATE TABLE notify_b (id integer PRIMARY KEY, label text, geom geometry(Point, 4326));
    INSERT INTO notify_a VALUES (1, 'a1', ${ZURICH});
    INSERT INTO notify_b VALUES (1, 'b1', ${ZURICH});`)
  t.after(() => runSql(db.url, 'DROP TABLE notify_a, notify_b; DROP FUNCTION IF EXISTS notify_tile_cannon'))
  const app = await makeApp(t, { paths: [db.url] }) // the default lifetime (60 s) outlasts the test
  const provider = [...app.catalog.providers.values()][0]
  await eventually(() => provider.listening, Boolean)
  const tile = [12, ...lonLatToTile(8.54, 47.37, 12)]
  const a = () => label(app, 'notify_a', tile)
  const b = () => label(app, 'notify_b', tile)
  const both = async () => decode((await app.inject({ url: `/notify_a,notify_b/${tile.join('/')}` })).rawPayload).layers.notify_a.feature(0).properties.label
  assert.deepEqual([await a(), await b(), await both()], ['a1', 'b1', 'a1'])

  await runSql(db.url, "UPDATE notify_a SET label = 'a2'; UPDATE notify_b SET label = 'b2'")
  assert.deepEqual([await a(), await b()], ['a1', 'b1'], 'cached')
  await runSql(db.url, "NOTIFY tile_cannon, 'notify_a'")
  assert.equal(await eventually(a, (v) => v === 'a2'), 'a2', 'the named set is read again')
  assert.equal(await both(), 'a2', 'and composites built on it')
  assert.equal(await b(), 'b1', 'the other set keeps its cache')
  await runSql(db.url, "NOTIFY tile_cannon, 'public.notify_b'")
  assert.equal(await eventually(b, (v) => v === 'b2'), 'b2', 'schema.table names a set too')

  await runSql(db.url, "UPDATE notify_a SET label = 'a3'; UPDATE notify_b SET label = 'b3'; NOTIFY tile_cannon, 'no_such_set'")
  await sleep(200)
  assert.deepEqual([await a(), await b()], ['a2', 'b2'], 'an unknown name purges nothing')
  await runSql(db.url, "NOTIFY tile_cannon, ''")
  assert.deepEqual([await eventually(a, (v) => v === 'a3'), await eventually(b, (v) => v === 'b3')], ['a3', 'b3'], 'an empty payload: every set')

  // A 204 cached before the row existed.
  const far = [12, ...lonLatToTile(-70, -30, 12)]
  assert.equal(await label(app, 'notify_a', far), null)
  // The README's trigger: NOTIFY with the table's name after each statement that changes it.
  await runSql(db.url, `
    CREATE FUNCTION notify_tile_cannon() RETURNS trigger AS $$
    BEGIN PERFORM pg_notify('tile_cannon', TG_TABLE_SCHEMA || '.' || TG_TABLE_NAME); RETURN NULL; END $$ LANGUAGE plpgsql;
    CREATE TRIGGER tile_cannon AFTER INSERT OR UPDATE OR DELETE ON notify_a FOR EACH STATEMENT EXECUTE FUNCTION notify_tile_cannon();
    INSERT INTO notify_a VALUES (2, 'far', ST_SetSRID(ST_MakePoint(-70, -30), 4326));`)
  assert.equal(await eventually(() => label(app, 'notify_a', far), (v) => v === 'far'), 'far', 'the 204 turned 200')

  // SIGHUP: the tables' shape did not change, their rows did.
  await runSql(db.url, "UPDATE notify_b SET label = 'b4'")
  const entry = app.catalog.get('notify_b')
  await app.catalog.reload()
  assert.equal(app.catalog.get('notify_b'), entry, 'the set is kept')
  assert.equal(await b(), 'b4', 'its tiles are not')
})

test('the NOTIFY listener comes back with the database, and never stops the server meanwhile', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  if (db.pause === null) return t.skip('DATABASE_URL given: this test needs the throwaway cluster to stop and start it')
  await runSql(db.url, `CREATE TABLE notify_c (id integer PRIMARY KEY, label text, geom geometry(Point, 4326)); INSERT INTO notify_c VALUES (1, 'c1', ${ZURICH})`)
  t.after(() => runSql(db.url, 'DROP TABLE notify_c'))
  const app = await makeApp(t, { paths: [db.url], postgres: { retryMs: 100, connectTimeoutMs: 1000, statementTimeoutMs: 1000 } })
  const provider = [...app.catalog.providers.values()][0]
  assert.equal(await eventually(() => provider.listening, Boolean), true)
  const tile = [12, ...lonLatToTile(8.54, 47.37, 12)]
  const c = () => label(app, 'notify_c', tile)
  assert.equal(await c(), 'c1')
  await db.pause()
  try {
    assert.equal(await eventually(() => provider.listening, (v) => !v), false, 'the listener saw the database go')
    await sleep(300) // a few failed reconnections
    assert.equal(await c(), 'c1', 'cached tiles keep serving')
  } finally {
    await db.start()
  }
  assert.equal(await eventually(() => provider.listening, Boolean, 10_000), true, 'listening again')
  await runSql(db.url, "UPDATE notify_c SET label = 'c2'")
  assert.equal(await eventually(c, (v) => v === 'c2'), 'c2', 'purged on reconnection: notifications sent meanwhile were lost')
  await runSql(db.url, "UPDATE notify_c SET label = 'c3'")
  assert.equal(await c(), 'c2')
  await runSql(db.url, "NOTIFY tile_cannon, 'notify_c'")
  assert.equal(await eventually(c, (v) => v === 'c3'), 'c3', 'NOTIFY works on the new connection')
})

test('tables that cannot be served are unavailable with their reason, and re-discovery updates them', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  await runSql(db.url, `
    CREATE TABLE skip_no_srid (id integer PRIMARY KEY, geom geometry);
    CREATE TABLE skip_tin (id integer PRIMARY KEY, geom geometry(TINZ, 4326));`)
  t.after(() => runSql(db.url, 'DROP TABLE IF EXISTS skip_no_srid, skip_tin'))
  const app = await makeApp(t, { paths: [db.url], postgres: { tables: { ghost: { table: 'no_such_table' } } } })
  const unavailable = async () => Object.fromEntries((await app.inject({ url: '/health' })).json().unavailable.map((u) => [u.id, u.reason]))
  const reasons = await unavailable()
  assert.match(reasons.skip_no_srid ?? '', /no SRID/)
  assert.match(reasons.skip_tin ?? '', /TIN/)
  assert.match(reasons.ghost ?? '', /not found/)
  assert.doesNotMatch(JSON.stringify(reasons), /postgres:\/\/|127\.0\.0\.1|\/tmp\//, 'no connection string or path in a reason')
  const tile = await app.inject({ url: '/skip_no_srid/0/0/0' })
  assert.equal(tile.statusCode, 503)
  assert.match(tile.json().message, /skip_no_srid.*no SRID/)
  assert.equal((await app.inject({ url: '/skip_tin.json' })).statusCode, 503)
  assert.ok(!(await app.inject({ url: '/list' })).json().includes('skip_tin'))

  await runSql(db.url, 'ALTER TABLE skip_no_srid ALTER COLUMN geom TYPE geometry(Point, 4326) USING ST_SetSRID(geom, 4326); DROP TABLE skip_tin')
  await app.catalog.reload()
  const now = await unavailable()
  assert.equal(now.skip_no_srid, undefined, 'served once it has an SRID')
  assert.equal(now.skip_tin, undefined, 'a dropped table leaves the list')
  assert.equal((await app.inject({ url: '/skip_no_srid/0/0/0' })).statusCode, 204)
})

test('every PostGIS TileJSON (tables, views, functions, composites) is valid against the TileJSON 3.0.0 schema', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  if (!needs(t, HAVE_SCHEMA, '../shared/schemas/tilejson-3.0.0.schema.json is not present')) return
  const app = await makeApp(t, { paths: [db.url] })
  const ids = (await app.inject({ url: '/catalog' })).json().filter((c) => c.kind === 'postgis').map((c) => c.id)
  assert.ok(ids.length >= 7)
  for (const id of [...ids, 'public.zurich_points,Mixed Case Roads']) {
    const res = await app.inject({ url: `/${encodeURIComponent(id)}.json` })
    assert.equal(res.statusCode, 200, id)
    assertValidTileJson(res.json(), { label: id })
  }
})

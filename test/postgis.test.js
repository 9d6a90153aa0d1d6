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
import { POSTGIS_MISSING, loadGeoJson, loadZurichPoints, restoreDump, runSql, runSqlFile, startPostgis } from './helpers/postgres.js'
import { tempDir, vectorTiles, writeMbtiles } from './helpers/data.js'
import { lonLatToTile } from '../lib/tile.js'

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
async function query (sql, values) {
  const c = new pg.Client({ connectionString: db.url })
  await c.connect()
  try { return (await c.query(sql, values)).rows } finally { await c.end() }
}

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
  assert.deepEqual(tj.vector_layers[0].fields, { id: 'Number', name: 'String', value: 'Number' })
  const [w, s, e, n] = tj.bounds
  assert.ok(w > 8.2 && w < 8.3 && e > 8.8 && e < 8.9 && s > 47.1 && s < 47.2 && n > 47.5 && n < 47.6, `bounds ${tj.bounds}`)
  const meta = (await app.inject({ url: '/public.zurich_points/meta' })).json()
  assert.equal(meta.srid, 4326)
  assert.equal(meta.geometryColumn, 'geom')
})

test('the right features land in the right tile with the right properties', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const app = await makeApp(t, { paths: [db.url] })
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

test('function sources receive the query string as json; the cache keys on it', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const app = await makeApp(t, { paths: [db.url] })
  const a = decode((await app.inject({ url: '/query_echo/0/0/0?color=red&n=1' })).rawPayload).layers.echo.feature(0).properties
  assert.deepEqual(JSON.parse(a.q), { color: 'red', n: '1' })
  assert.equal(a.zoom, 0)
  const b = decode((await app.inject({ url: '/query_echo/0/0/0?n=1&color=blue' })).rawPayload).layers.echo.feature(0).properties
  assert.deepEqual(JSON.parse(b.q), { color: 'blue', n: '1' }, 'another query, another tile (not the cached one)')
  const none = decode((await app.inject({ url: '/query_echo/0/0/0' })).rawPayload).layers.echo.feature(0).properties
  assert.deepEqual(JSON.parse(none.q), {})
  assert.equal((await app.inject({ url: '/query_echo/1/0/0' })).statusCode, 204, 'the function returned no rows')
})

test('a composite URL returns the layers of several sets in one tile', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const app = await makeApp(t, { paths: [db.url] })
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

test('tiles at the world edges and projected CRSs get their features; odd column names; SRID-0 data with a configured SRID', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  await runSql(db.url, `
    CREATE TABLE edge_points (id integer PRIMARY KEY, t text, geom geometry(Point, 4326));
    INSERT INTO edge_points VALUES (1, 'west', ST_SetSRID(ST_MakePoint(-179.5, 10), 4326)), (2, 'east', ST_SetSRID(ST_MakePoint(179.5, 10), 4326));
    CREATE TABLE swiss (id integer PRIMARY KEY, mvt_geom text, geom geometry(Point, 2056));
    INSERT INTO swiss VALUES (1, 'zurich', ST_Transform(ST_SetSRID(ST_MakePoint(8.54, 47.37), 4326), 2056));
    CREATE TABLE geog_points (id integer PRIMARY KEY, label text, geog geography(Point, 4326));
    INSERT INTO geog_points VALUES (1, 'zurich', 'SRID=4326;POINT(8.54 47.37)'), (2, 'sydney', 'SRID=4326;POINT(151.2 -33.87)');
    CREATE INDEX ON geog_points USING gist (geog);
    CREATE TABLE no_srid (id integer PRIMARY KEY, geom geometry);
    INSERT INTO no_srid VALUES (1, ST_MakePoint(8.54, 47.37));
    CREATE FUNCTION ov(z integer, x integer, y integer) RETURNS bytea AS $$ SELECT ''::bytea $$ LANGUAGE sql;
    CREATE FUNCTION ov(z integer, x integer, y integer, query json) RETURNS bytea AS $$ SELECT ''::bytea $$ LANGUAGE sql;`)
  t.after(() => runSql(db.url, 'DROP TABLE edge_points, swiss, no_srid, geog_points; DROP FUNCTION ov(integer, integer, integer); DROP FUNCTION ov(integer, integer, integer, json)'))
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
  const [x, y] = lonLatToTile(8.54, 47.37, 10)
  assert.equal((await app.inject({ url: `/declared/10/${x}/${y}` })).statusCode, 200, 'SRID-0 rows served in the configured SRID')
  const geog = decode((await app.inject({ url: `/geog_points/10/${x}/${y}` })).rawPayload).layers.geog_points
  assert.equal(geog.length, 1, 'a geography column: only Zurich in the Zurich tile')
  assert.equal(geog.feature(0).properties.label, 'zurich')
  const list = (await app.inject({ url: '/list' })).json()
  assert.ok(list.includes('public.ov') && list.includes('public.ov-2'), 'overloads both served: ' + list.filter((i) => i.includes('ov')))
})

test('composites: each part within its zoom range, no duplicate layers, and re-discovery keeps unchanged caches', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const app = await makeApp(t, { paths: [db.url], postgres: { tables: { low: { table: 'zurich_points', maxzoom: 3 } } } })
  const [x, y] = lonLatToTile(8.54, 47.37, 10)
  const tile = decode((await app.inject({ url: `/low,Mixed Case Roads/10/${x}/${y}` })).rawPayload)
  assert.deepEqual(Object.keys(tile.layers), ['Mixed Case Roads'], 'the maxzoom 3 part stays out at z10')
  assert.equal((await app.inject({ url: '/public.zurich_points,other.zurich_points/0/0/0' })).statusCode, 404, 'two layers named zurich_points')
  const entry = app.catalog.get('Mixed Case Roads')
  await app.catalog.reload()
  assert.equal(app.catalog.get('Mixed Case Roads'), entry, 'unchanged set kept as is')
})

// OGC API – Features against what its standards ask (17-069r4 Part 1, 18-058 Part 2, RFC 7946), on a real PostGIS:
// datetime instants to the microsecond, a collection's extent that holds every feature (read only while features are
// on), the API definition as HTML, polygon rings by the right-hand rule, and the headers a browser script of another
// origin may read.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { join } from 'node:path'
import pg from 'pg'
import { makeApp, needs } from './helpers/app.js'
import { tempDir, vectorTiles, pyramid, writeMbtiles } from './helpers/data.js'
import { POSTGIS_MISSING, queryRows, runSql, startPostgis } from './helpers/postgres.js'

let db = null
before(async () => {
  db = await startPostgis()
  if (db === null) return
  await runSql(db.url, `
    -- A feature's time as the server writes it: to the microsecond.
    CREATE TABLE micro (id integer PRIMARY KEY, ts timestamptz, geom geometry(Point, 4326));
    INSERT INTO micro VALUES (1, '2024-05-01T12:00:00.123456Z', 'SRID=4326;POINT(1 1)'), (2, '2024-05-01T12:00:00.1234Z', 'SRID=4326;POINT(1 1)'),
      (3, '2024-05-01T12:00:00.1239Z', 'SRID=4326;POINT(1 1)'), (4, '2024-05-01T12:00:00.123457Z', 'SRID=4326;POINT(1 1)');
    CREATE TABLE microts (id integer PRIMARY KEY, t timestamp, geom geometry(Point, 4326));
    INSERT INTO microts VALUES (1, '2024-05-01T12:00:00.123456', 'SRID=4326;POINT(1 1)'), (2, '2024-05-01T12:00:00.123', 'SRID=4326;POINT(1 1)');
    -- Statistics taken, then a row far away (no index: the estimate is the statistics').
    CREATE TABLE grow (id serial PRIMARY KEY, geom geometry(Point, 4326)) WITH (autovacuum_enabled = false);
    INSERT INTO grow (geom) SELECT ST_SetSRID(ST_MakePoint(8 + i % 100 / 100.0, 47 + i / 2000.0), 4326) FROM generate_series(1, 2000) AS i;
    ANALYZE grow;
    INSERT INTO grow (geom) VALUES ('SRID=4326;POINT(-70 -30)');
    -- SRID-0 rows, declared EPSG:4326 in the config; statistics taken, then a row far away.
    CREATE TABLE nosrid (id integer PRIMARY KEY, geom geometry);
    INSERT INTO nosrid SELECT i, ST_MakePoint(8 + i / 1000.0, 47) FROM generate_series(1, 500) AS i;
    CREATE INDEX ON nosrid USING gist (geom);
    ANALYZE nosrid;
    INSERT INTO nosrid VALUES (999, ST_MakePoint(-60, -20));
    CREATE TABLE polar (id integer PRIMARY KEY, geom geometry(Point, 4326));
    INSERT INTO polar VALUES (1, 'SRID=4326;POINT(0 89.9)'), (2, 'SRID=4326;POINT(10 10)');
    -- Rings stored clockwise (ST_Buffer's exterior), and a polygon whose hole runs counterclockwise.
    CREATE TABLE rings (id integer PRIMARY KEY, "<b>label</b>" text, geom geometry(Polygon, 2056));
    INSERT INTO rings VALUES (1, 'bern', ST_Buffer(ST_SetSRID(ST_MakePoint(2600000, 1200000), 2056), 1000)),
      (2, 'holed', ST_SetSRID(ST_MakePolygon(ST_ExteriorRing(ST_Buffer(ST_MakePoint(2683000, 1248000), 800)),
        ARRAY[ST_Reverse(ST_ExteriorRing(ST_Buffer(ST_MakePoint(2683000, 1248000), 300)))]), 2056));
    CREATE TABLE multirings (id integer PRIMARY KEY, geom geometry);
    INSERT INTO multirings VALUES (1, ST_Collect(ST_Buffer('SRID=4326;POINT(8 47)'::geometry, 0.1), ST_Buffer('SRID=4326;POINT(9 47)'::geometry, 0.1))),
      (2, 'SRID=4326;LINESTRING(0 0, 1 1, 2 0)'),
      (3, ST_Collect(ARRAY[ST_Buffer('SRID=4326;POINT(8 47)'::geometry, 0.1), 'SRID=4326;LINESTRING(0 0, 1 1)', 'SRID=4326;MULTIPOINT(0 0, 1 1)'])),
      (4, 'SRID=4326;GEOMETRYCOLLECTION(POINT(0 0), POINT(1 1))');
    -- A curved polygon, linearised for GeoJSON: its exterior (a full circle) stored clockwise.
    CREATE TABLE curved (id integer PRIMARY KEY, geom geometry(CurvePolygon, 4326));
    INSERT INTO curved VALUES (1, 'SRID=4326;CURVEPOLYGON(CIRCULARSTRING(0 0, 1 1, 2 0, 1 -1, 0 0))');
    CREATE TABLE paths (id integer PRIMARY KEY, geom geometry(LineString, 4326));
    INSERT INTO paths VALUES (1, 'SRID=4326;LINESTRING(0 0, 1 1)');
    -- Statistics taken: its tiles' bounds are the planner's estimate, read without touching a row.
    CREATE TABLE migrating (id integer PRIMARY KEY, geom geometry(Point, 4326));
    INSERT INTO migrating SELECT i, ST_SetSRID(ST_MakePoint(8 + i / 1000.0, 47), 4326) FROM generate_series(1, 500) AS i;
    ANALYZE migrating;
  `)
})
after(async () => { await db?.stop() })

const query = (sql, values) => queryRows(db.url, sql, values)
const appOf = (t, overrides = {}) => makeApp(t, { paths: [db.url], ...overrides })
const get = (app, url, headers = {}) => app.inject({ url, headers: { host: 'h', ...headers } })
const ids = (res) => res.json().features.map((f) => f.id).sort((a, b) => a - b)

test('datetime instants keep every digit of their fraction: a feature\'s own microsecond time finds it; =, ../t and t/.. select what PostgreSQL\'s comparison does, on timestamptz and timestamp', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const app = await appOf(t)
  const cases = [
    ['micro', 'ts', 'timestamptz', ['2024-05-01T12:00:00.123456Z', '2024-05-01T14:00:00.123456+02:00', '2024-05-01t12:00:00.1234z', '2024-05-01T12:00:00.1235Z', '2024-05-01T12:00:00.123Z']],
    ['microts', 't', 'timestamp', ['2024-05-01T12:00:00.123456Z', '2024-05-01T12:00:00.1234Z', '2024-05-01T12:00:00.123Z']],
  ]
  for (const [table, column, type, instants] of cases) {
    const inUtc = type === 'timestamptz' ? '$1::timestamptz' : "($1::timestamptz AT TIME ZONE 'UTC')"
    for (const instant of instants) {
      for (const [datetime, op] of [[instant, '='], [`../${instant}`, '<='], [`${instant}/..`, '>=']]) {
        const expected = (await query(`SELECT id FROM ${table} WHERE ${column} ${op} ${inUtc} ORDER BY id`, [instant.toUpperCase()])).map((r) => r.id)
        const res = await get(app, `/ogc/collections/${table}/items?datetime=${encodeURIComponent(datetime)}`)
        assert.equal(res.statusCode, 200, res.body)
        assert.deepEqual(ids(res), expected, `${table} datetime=${datetime}`)
      }
    }
  }
  // The rows the probe saw wrong: a feature's own time, and an interval starting between two rows of one millisecond.
  assert.deepEqual(ids(await get(app, '/ogc/collections/micro/items?datetime=2024-05-01T12:00:00.123456Z')), [1])
  assert.deepEqual(ids(await get(app, '/ogc/collections/micro/items?datetime=2024-05-01T12:00:00.1235Z/..')), [3])
  assert.deepEqual(ids(await get(app, '/ogc/collections/micro/items?datetime=2024-05-01T12:00:00.123456Z/2024-05-01T12:00:00.123457Z')), [1, 4])
  // Offsets RFC 3339 allows and PostgreSQL does not (past ±15:59), and fractions to the nanosecond: the same instants.
  assert.deepEqual(ids(await get(app, `/ogc/collections/micro/items?datetime=${encodeURIComponent('2024-05-02T06:00:00.123456+18:00')}`)), [1])
  assert.deepEqual(ids(await get(app, `/ogc/collections/micro/items?datetime=${encodeURIComponent('2024-04-30T16:00:00.123456000-20:00')}`)), [1])
  assert.equal((await get(app, '/ogc/collections/micro/items?datetime=2024-05-01T12:00:00.1234567891Z')).statusCode, 400, 'past the nanosecond')
  // An interval that ends before it starts within one millisecond is a 400 as any other.
  const backwards = await get(app, '/ogc/collections/micro/items?datetime=2024-05-01T12:00:00.1239Z/2024-05-01T12:00:00.1234Z')
  assert.equal(backwards.statusCode, 400)
  assert.match(backwards.json().message, /ends before it starts/)
})

test('a collection\'s extent holds every feature: rows added since ANALYZE, latitudes past Web Mercator\'s; found again on reload; the tiles keep their bounds', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const app = await appOf(t)
  const extentOf = async (id) => (await get(app, `/ogc/collections/${id}`)).json().extent.spatial.bbox[0]
  const exact = async (table) => {
    const [r] = await query(`SELECT ST_XMin(b) AS w, ST_YMin(b) AS s, ST_XMax(b) AS e, ST_YMax(b) AS n FROM (SELECT ST_Transform(ST_SetSRID(ST_Extent(geom), ST_SRID(min(geom))), 4326) AS b FROM ${table}) AS x`)
    return [r.w, r.s, r.e, r.n]
  }
  const holds = (outer, inner, what) => assert.ok(outer[0] <= inner[0] && outer[1] <= inner[1] && outer[2] >= inner[2] && outer[3] >= inner[3], `${what}: ${outer} holds ${inner}`)
  const close = (a, b, what, within = 1e-4) => a.forEach((v, i) => assert.ok(Math.abs(v - b[i]) < within, `${what}: ${a} is ${b}`))

  const grow = await extentOf('grow')
  holds(grow, await exact('grow'), 'the row added after ANALYZE')
  close(grow, await exact('grow'), 'and little more than the rows (the estimate\'s edges are its histogram\'s)', 0.01)
  const polar = await extentOf('polar')
  close(polar, await exact('polar'), 'to 89.9°, not clipped at 85.05°')
  holds(await extentOf('rings'), await exact('rings'), 'a table in EPSG:2056')
  // The tiles' bounds are as before: Web Mercator's world, the estimate.
  assert.ok((await get(app, '/polar.json')).json().bounds[3] <= 85.0511287798)

  // Re-discovered (SIGHUP: catalog.reload): a row added since is in the extent, and the collection's ETag changes.
  const before = await get(app, '/ogc/collections/grow')
  await runSql(db.url, "INSERT INTO grow (geom) VALUES ('SRID=4326;POINT(120 60)')")
  await app.catalog.reload()
  const after = await get(app, '/ogc/collections/grow')
  holds(after.json().extent.spatial.bbox[0], [-70, -30, 120, 60], 'the row added before the reload')
  assert.notEqual(after.headers.etag, before.headers.etag)
  holds((await get(app, '/ogc/collections')).json().collections.find((c) => c.id === 'grow').extent.spatial.bbox[0], [-70, -30, 120, 60], 'in /collections too')

  // SRID-0 rows whose SRID the config declares: the rows' extent too (&& compares boxes whatever their SRIDs).
  const declared = await appOf(t, { postgres: { defaultSrid: 4326 } })
  const nosrid = (await get(declared, '/ogc/collections/nosrid')).json().extent.spatial.bbox[0]
  holds(nosrid, [-60, -20, 8.5, 47], 'SRID-0 rows, the one added after ANALYZE too')
  assert.ok(nosrid[0] > -61 && nosrid[1] > -21 && nosrid[2] < 9 && nosrid[3] < 48, `not the world: ${nosrid}`)
})

test('the API definition is also a page (f=html, a browser\'s Accept): its paths, operations and parameters, escaped, with an ETag and 304', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const app = await appOf(t)
  const json = await get(app, '/ogc/api')
  assert.equal(json.statusCode, 200)
  assert.match(json.headers['content-type'], /^application\/vnd\.oai\.openapi\+json/, 'JSON stays the default')
  const api = json.json()
  assert.ok(api.paths['/api'].get.responses[200].content['text/html'], 'the definition says it has HTML')

  for (const [url, headers] of [['/ogc/api?f=html', {}], ['/ogc/api', { accept: 'text/html,application/xhtml+xml,*/*;q=0.8' }]]) {
    const res = await get(app, url, headers)
    assert.equal(res.statusCode, 200, url)
    assert.equal(res.headers['content-type'], 'text/html; charset=utf-8')
    assert.ok(res.headers.etag, 'an ETag')
    for (const path of Object.keys(api.paths)) assert.ok(res.body.includes(`GET ${path}`), `${path} listed`)
    for (const name of ['bbox', 'datetime', 'bbox-crs', 'collectionId']) assert.match(res.body, new RegExp(`<td>${name}</td>`), `${name} listed`)
    assert.ok(res.body.includes('&#60;b&#62;label&#60;/b&#62;'), 'a column\'s name escaped')
    assert.ok(!res.body.includes('<b>label'), 'never as markup')
    assert.ok(!/<script/i.test(res.body), 'no script')
    assert.ok(res.body.includes('href="http://h/ogc/api?f=json"'))
    const again = await get(app, url, { ...headers, 'if-none-match': res.headers.etag })
    assert.equal(again.statusCode, 304)
  }
  const landing = (await get(app, '/ogc')).json()
  assert.equal(landing.links.find((l) => l.rel === 'service-doc').href, 'http://h/ogc/api?f=html')
  assert.equal((await get(app, '/ogc/api?f=xml')).statusCode, 400)
})

test('with features off, no collection extent is read: discovery is not held up by a table a migration has locked, whose rows the extent would read', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const app = await appOf(t, { features: { enabled: false }, postgres: { boundsTimeoutMs: 4000 } })
  assert.equal((await get(app, '/ogc/collections')).statusCode, 404, 'no OGC API')
  // An ALTER TABLE running: it holds ACCESS EXCLUSIVE until it commits, so a query reading the table's rows waits.
  const migration = new pg.Client({ connectionString: db.url })
  await migration.connect()
  t.after(() => migration.end())
  await migration.query('BEGIN; LOCK TABLE migrating IN ACCESS EXCLUSIVE MODE')
  const started = performance.now()
  await app.catalog.reload()
  const tookMs = performance.now() - started
  await migration.query('ROLLBACK')
  assert.ok(tookMs < 2000, `re-discovered in ${Math.round(tookMs)} ms, not after the extent query's ${4000} ms timeout`)
  assert.deepEqual((await get(app, '/migrating.json')).json().bounds.map(Math.round), [8, 47, 9, 47], 'the tiles\' bounds, from the estimate, as before')
})

test('polygon rings follow RFC 7946\'s right-hand rule in every output CRS: exteriors counterclockwise, holes clockwise; lines carry no orientation', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const app = await appOf(t)
  const area = (ring) => ring.slice(1).reduce((sum, [x2, y2], i) => sum + ring[i][0] * y2 - x2 * ring[i][1], 0) / 2
  const orientation = (polygon, latLon) => polygon.map((ring) => ((latLon ? -1 : 1) * area(ring) > 0 ? 'ccw' : 'cw'))
  const stored = await query('SELECT bool_and(ST_IsPolygonCW(geom)) AS cw FROM rings UNION ALL SELECT ST_IsPolygonCW(geom) FROM multirings WHERE id = 1')
  assert.ok(stored.every((r) => r.cw), 'stored against the rule (the test means something)')
  for (const crs of [null, 'EPSG:2056', 'EPSG:3857', 'EPSG:4326']) {
    const res = await get(app, `/ogc/collections/rings/items${crs ? `?crs=${crs}` : ''}`)
    assert.equal(res.statusCode, 200, res.body)
    const byId = new Map(res.json().features.map((f) => [f.id, f.geometry.coordinates]))
    const latLon = crs === 'EPSG:4326' // lat,lon: the same ring over the ground, its axes swapped
    assert.deepEqual(orientation(byId.get(1), latLon), ['ccw'], `${crs}: a buffer`)
    assert.deepEqual(orientation(byId.get(2), latLon), ['ccw', 'cw'], `${crs}: exterior and hole`)
    const one = (await get(app, `/ogc/collections/rings/items/2${crs ? `?crs=${crs}` : ''}`)).json()
    assert.deepEqual(orientation(one.geometry.coordinates, latLon), ['ccw', 'cw'], `${crs}: a feature by id`)
  }
  const multi = (await get(app, '/ogc/collections/multirings/items/1')).json().geometry
  assert.equal(multi.type, 'MultiPolygon')
  for (const polygon of multi.coordinates) assert.deepEqual(orientation(polygon), ['ccw'], 'each polygon of a multipolygon in a `geometry` column')
  assert.ok((await query('SELECT ST_IsPolygonCW(ST_CurveToLine(geom)) AS cw FROM curved'))[0].cw, 'the curved one stored clockwise')
  const curved = (await get(app, '/ogc/collections/curved/items/1')).json().geometry
  assert.equal(curved.type, 'Polygon')
  assert.deepEqual(orientation(curved.coordinates), ['ccw'], 'a curved polygon, linearised')
  assert.deepEqual((await get(app, '/ogc/collections/paths/items/1')).json().geometry.coordinates, [[0, 0], [1, 1]], 'a line as stored')
  // In a column of any type (PostGIS's ST_ForcePolygonCCW reverses lines too): lines as stored, a collection's
  // polygons oriented and its other members as they are, of the same types.
  assert.deepEqual((await get(app, '/ogc/collections/multirings/items/2')).json().geometry.coordinates, [[0, 0], [1, 1], [2, 0]], 'a line in a `geometry` column as stored')
  const collection = (await get(app, '/ogc/collections/multirings/items/3')).json().geometry
  assert.deepEqual(collection.geometries.map((g) => g.type), ['Polygon', 'LineString', 'MultiPoint'])
  assert.deepEqual(orientation(collection.geometries[0].coordinates), ['ccw'])
  assert.deepEqual(collection.geometries.slice(1).map((g) => g.coordinates), [[[0, 0], [1, 1]], [[0, 0], [1, 1]]])
  assert.deepEqual((await get(app, '/ogc/collections/multirings/items/4')).json().geometry, { type: 'GeometryCollection', geometries: [{ type: 'Point', coordinates: [0, 0] }, { type: 'Point', coordinates: [1, 1] }] })
})

test('CORS: a script of another origin may read Content-Crs, ETag and Retry-After of features, documents and tiles', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const dir = tempDir(t)
  writeMbtiles(join(dir, 'basemap.mbtiles'), { tiles: vectorTiles(pyramid(0, 1)), metadata: { format: 'pbf' } })
  const exposed = (res) => (res.headers['access-control-expose-headers'] ?? '').toLowerCase().split(/\s*,\s*/)
  for (const cors of ['*', ['https://maps.example']]) {
    const app = await appOf(t, { paths: [db.url, dir], cors })
    const origin = { origin: 'https://maps.example' }
    for (const url of ['/ogc/collections/rings/items?crs=EPSG:3857', '/ogc/collections/rings/items/1', '/ogc/collections/rings', '/basemap/0/0/0', '/rings/0/0/0', '/basemap/9/0/0', '/rings.json']) {
      const res = await get(app, url, origin)
      assert.ok(res.headers['access-control-allow-origin'], `${cors} ${url}: CORS`)
      for (const name of ['content-crs', 'etag', 'retry-after']) assert.ok(exposed(res).includes(name), `${cors} ${url}: ${name} exposed (${res.headers['access-control-expose-headers']})`)
    }
    const items = await get(app, '/ogc/collections/rings/items?crs=EPSG:3857', origin)
    assert.equal(items.headers['content-crs'], '<http://www.opengis.net/def/crs/EPSG/0/3857>')
    if (cors !== '*') assert.equal((await get(app, '/ogc/collections/rings', { origin: 'https://other.example' })).headers['access-control-allow-origin'], undefined)
  }
})

// OGC API – Features over PostGIS (lib/features, routes/features.js) against a real PostgreSQL + PostGIS: the
// documents checked against the OGC schemas (test/helpers/ogc-features.js), every parameter's answer compared with
// the same question asked of the database directly, errors, injection, compression, validators, the database going
// away, and a million features streamed with flat memory.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { request as httpRequest } from 'node:http'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join, posix } from 'node:path'
import { brotliDecompressSync, gunzipSync } from 'node:zlib'
import { VectorTile } from '@mapbox/vector-tile'
import { PbfReader } from 'pbf'
import { makeApp, needs } from './helpers/app.js'
import { startTileCannon } from '../bench/servers.js'
import { tempDir, vectorTiles, pyramid, writeMbtiles } from './helpers/data.js'
import { assertOgc, assertOpenApi30 } from './helpers/ogc-features.js'
import { POSTGIS_MISSING, queryRows, runSql, startPostgis } from './helpers/postgres.js'
import { collectionOf } from '../lib/features/collection.js'
import { readItemsQuery } from '../lib/features/params.js'
import { itemsStatement, itemsValues } from '../lib/features/sql.js'

const CRS84 = 'http://www.opengis.net/def/crs/OGC/1.3/CRS84'
const EPSG = (code) => `http://www.opengis.net/def/crs/EPSG/0/${code}`
const PLACES = 2345

let db = null
before(async () => {
  db = await startPostgis()
  if (db === null) return
  await runSql(db.url, `
    SELECT setseed(0.42);
    CREATE TABLE places (id serial PRIMARY KEY, name text, kind text, rank integer, open boolean, day date, tags jsonb, geom geometry(Point, 4326));
    INSERT INTO places (name, kind, rank, open, day, tags, geom)
      SELECT 'place ' || i, (ARRAY['cafe', 'shop', 'park'])[1 + i % 3], i % 50, i % 2 = 0, date '2024-01-01' + i % 365,
             jsonb_build_object('n', i), ST_SetSRID(ST_MakePoint(8 + random(), 47 + random()), 4326)
      FROM generate_series(1, ${PLACES}) AS i;
    CREATE INDEX ON places USING gist (geom);
    CREATE VIEW places_view AS SELECT id, name, geom FROM places WHERE rank < 10;
    CREATE TABLE swiss_lines (gid integer PRIMARY KEY, name text, geom geometry(LineString, 2056));
    INSERT INTO swiss_lines SELECT i, 'line ' || i, ST_Transform(ST_SetSRID(ST_MakeLine(ST_MakePoint(8 + random(), 47 + random()),
      ST_MakePoint(8 + random(), 47 + random())), 4326), 2056) FROM generate_series(1, 300) AS i;
    CREATE INDEX ON swiss_lines USING gist (geom);
    CREATE TABLE dateline (id integer PRIMARY KEY, geom geometry(Point, 4326));
    INSERT INTO dateline VALUES (1, 'SRID=4326;POINT(179.5 0)'), (2, 'SRID=4326;POINT(-179.5 1)'), (3, 'SRID=4326;POINT(0 0)'), (4, 'SRID=4326;POINT(179.9 10)');
    CREATE TABLE geo_places (id integer PRIMARY KEY, name text, geog geography(Point, 4326));
    INSERT INTO geo_places SELECT i, 'g' || i, ST_SetSRID(ST_MakePoint(8 + random(), 47 + random()), 4326)::geography FROM generate_series(1, 60) AS i;
    -- Just inside and just outside a 20° box's parallels, where its edges as great circles would bulge north.
    INSERT INTO geo_places VALUES (61, 'in', 'SRID=4326;POINT(10 50.2)'), (62, 'out', 'SRID=4326;POINT(10 60.2)'), (63, 'in', 'SRID=4326;POINT(10 59.8)');
    CREATE INDEX ON geo_places USING gist (geog);
    CREATE TABLE coded (code text PRIMARY KEY, label text, geom geometry(Point, 3857));
    INSERT INTO coded VALUES ('a-1', 'A', ST_Transform('SRID=4326;POINT(8.5 47.4)'::geometry, 3857)),
      ('b/2', 'B', ST_Transform('SRID=4326;POINT(8.6 47.3)'::geometry, 3857)), ('O''Brien', 'C', ST_Transform('SRID=4326;POINT(8.4 47.5)'::geometry, 3857));
    CREATE TABLE british (id integer PRIMARY KEY, name text, geom geometry(Point, 27700));
    INSERT INTO british VALUES (1, 'derby', ST_Transform('SRID=4326;POINT(-1.47 52.92)'::geometry, 27700)),
      (2, 'lerwick', ST_Transform('SRID=4326;POINT(-1.14 60.15)'::geometry, 27700));
    CREATE INDEX ON british USING gist (geom);
    CREATE TABLE european (id integer PRIMARY KEY, name text, geom geometry(Point, 3035));
    INSERT INTO european VALUES (1, 'paris', ST_Transform('SRID=4326;POINT(2.35 48.85)'::geometry, 3035)),
      (2, 'athens', ST_Transform('SRID=4326;POINT(23.7 37.98)'::geometry, 3035));
    CREATE FUNCTION tile_fn(z integer, x integer, y integer) RETURNS bytea AS $$ SELECT NULL::bytea $$ LANGUAGE sql IMMUTABLE;
    ANALYZE;
  `)
})
after(async () => { await db?.stop() })

const query = (sql, values) => queryRows(db.url, sql, values)
const appOf = (t, overrides = {}) => makeApp(t, { paths: [db.url], ...overrides })
const get = (app, url, headers = {}) => app.inject({ url, headers: { host: 'h', ...headers } })
const decode = (buf) => new VectorTile(new PbfReader(buf))
const ids = (fc) => fc.features.map((f) => f.id)
const linkOf = (doc, rel, type) => doc.links.find((l) => l.rel === rel && (type === undefined || l.type === type))
const local = (href) => href.replace('http://h', '')
const sortedNumbers = (list) => [...list].sort((a, b) => a - b)

test('landing page, conformance, collections, a collection and queryables are valid OGC API – Features documents; /api is OpenAPI 3.0', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const dir = tempDir(t)
  writeMbtiles(join(dir, 'basemap.mbtiles'), { tiles: vectorTiles(pyramid(0, 1)), metadata: { format: 'pbf' } })
  const app = await appOf(t, { paths: [db.url, dir] })

  const landing = await get(app, '/ogc')
  assert.equal(landing.statusCode, 200)
  assert.equal(landing.headers['content-type'], 'application/json')
  assertOgc('landingPage', landing.json())
  assert.equal(linkOf(landing.json(), 'service-desc').href, 'http://h/ogc/api')
  assert.equal(linkOf(landing.json(), 'conformance').href, 'http://h/ogc/conformance')
  assert.equal(linkOf(landing.json(), 'data').href, 'http://h/ogc/collections')
  assert.ok(linkOf(landing.json(), 'self'))
  assert.equal((await get(app, '/ogc/')).statusCode, 200, 'with a trailing slash too')

  const conformance = (await get(app, '/ogc/conformance')).json()
  assertOgc('confClasses', conformance)
  for (const c of ['ogcapi-features-1/1.0/conf/core', 'ogcapi-features-1/1.0/conf/geojson', 'ogcapi-features-1/1.0/conf/oas30', 'ogcapi-features-1/1.0/conf/html', 'ogcapi-features-2/1.0/conf/crs']) {
    assert.ok(conformance.conformsTo.includes(`http://www.opengis.net/spec/${c}`), c)
  }

  const collections = (await get(app, '/ogc/collections')).json()
  assertOgc('collections', collections)
  const byId = new Map(collections.collections.map((c) => [c.id, c]))
  assert.deepEqual([...byId.keys()].sort(), ['british', 'coded', 'dateline', 'european', 'geo_places', 'places', 'places_view', 'swiss_lines'], 'tables and views; not the function, not the MBTiles')
  for (const c of byId.values()) {
    assert.equal(c.itemType, 'feature')
    assert.equal(c.extent.spatial.crs, CRS84)
    assert.equal(c.crs[0], CRS84)
    assert.ok(c.crs.includes(EPSG(4326)) && c.crs.includes(EPSG(3857)))
    assert.equal(linkOf(c, 'items', 'application/geo+json').href, `http://h/ogc/collections/${encodeURIComponent(c.id)}/items`)
    assert.equal(linkOf(c, 'http://www.opengis.net/def/rel/ogc/1.0/queryables').href, `http://h/ogc/collections/${encodeURIComponent(c.id)}/queryables`)
    assert.ok(linkOf(c, 'self'))
  }
  assert.equal(byId.get('places').storageCrs, CRS84)
  assert.equal(byId.get('swiss_lines').storageCrs, EPSG(2056))
  assert.ok(byId.get('swiss_lines').crs.includes(EPSG(2056)))
  const [w, s, e, n] = byId.get('places').extent.spatial.bbox[0]
  assert.ok(w >= 7.99 && s >= 46.99 && e <= 9.01 && n <= 48.01 && w < e && s < n, `places bbox ${[w, s, e, n]}`)
  // A geography column's extent in degrees (its planner statistics are geocentric: they gave ±1 around 0,0).
  const [gw, gs, ge, gn] = byId.get('geo_places').extent.spatial.bbox[0]
  assert.ok(gw >= 7.99 && gw <= 8.5 && gs >= 46.99 && gs <= 47.5 && Math.abs(ge - 10) < 0.01 && Math.abs(gn - 60.2) < 0.01, `geo_places bbox ${[gw, gs, ge, gn]}`)

  const one = await get(app, '/ogc/collections/swiss_lines')
  assertOgc('collection', one.json())
  assert.deepEqual(one.json(), byId.get('swiss_lines'), 'the same document as in the list')

  const queryables = await get(app, '/ogc/collections/places/queryables')
  assert.equal(queryables.headers['content-type'], 'application/schema+json')
  assertOgc('queryables', queryables.json())
  const props = queryables.json().properties
  assert.deepEqual(props.id, { title: 'id', type: 'integer', 'x-ogc-role': 'id' })
  assert.equal(props.name.type, 'string')
  assert.equal(props.rank.type, 'integer')
  assert.equal(props.open.type, 'boolean')
  assert.deepEqual(props.day, { title: 'day', type: 'string', format: 'date' })
  assert.equal(props.geometry.format, 'geometry-point')
  assert.equal(props.tags, undefined, 'jsonb is output, but neither filtered nor sorted by')

  const api = await get(app, '/ogc/api')
  assert.equal(api.headers['content-type'], 'application/vnd.oai.openapi+json;version=3.0')
  const doc = api.json()
  assertOpenApi30(doc, ['/', '/conformance', '/api', '/collections', '/collections/{collectionId}', '/collections/{collectionId}/queryables',
    '/collections/{collectionId}/items', '/collections/{collectionId}/items/{featureId}'])
  assert.equal(doc.servers[0].url, 'http://h/ogc')
  assert.deepEqual(doc.components.parameters.collectionId.schema.enum.sort(), [...byId.keys()].sort())
  const itemParams = doc.paths['/collections/{collectionId}/items'].get.parameters.map((p) => doc.components.parameters[p.$ref.split('/').pop()].name)
  for (const p of ['limit', 'offset', 'bbox', 'bbox-crs', 'crs', 'properties', 'sortby', 'count', 'f']) assert.ok(itemParams.includes(p), p)
  assert.deepEqual(doc.components.parameters.limit.schema, { type: 'integer', minimum: 1, maximum: 10_000, default: 10 }, 'the limit as the spec\'s own OpenAPI fragment has it')
  // Each collection's own items path names its property filters, with their types (GDAL's OAPIF driver reads them
  // there to filter on the server); every filter it names is one the server takes.
  const own = doc.paths['/collections/places/items']?.get.parameters
  assert.ok(own, 'places has an items path of its own')
  const filters = Object.fromEntries(own.filter((p) => p.$ref === undefined).map((p) => [p.name, p.schema]))
  assert.deepEqual(filters, { id: { type: 'integer' }, name: { type: 'string' }, kind: { type: 'string' }, rank: { type: 'integer' }, open: { type: 'boolean' }, day: { type: 'string', format: 'date' } })
  assert.deepEqual(Object.keys(filters).sort(), Object.keys(props).filter((p) => p !== 'geometry').sort(), 'the queryables, as filters')
  for (const p of own.filter((p) => p.$ref !== undefined)) assert.ok(itemParams.includes(doc.components.parameters[p.$ref.split('/').pop()].name))
  const sample = { id: '3', name: 'place 3', kind: 'cafe', rank: '3', open: 'true', day: '2024-01-04' }
  for (const name of Object.keys(filters)) {
    const res = await get(app, `/ogc/collections/places/items?${name}=${encodeURIComponent(sample[name])}&limit=1`)
    assert.equal(res.json().numberReturned, 1, `${name}: ${res.body.slice(0, 200)}`)
  }
  assert.ok(doc.paths['/collections/swiss_lines/items'], 'every collection has one')

  for (const url of ['/ogc/collections/tile_fn', '/ogc/collections/tile_fn/items', '/ogc/collections/basemap/items', '/ogc/collections/basemap']) {
    const res = await get(app, url)
    assert.equal(res.statusCode, 404, url)
    assert.match(res.json().message, /is not a collection/, url)
  }
})

test('next links page through every row exactly once; prev links go back; numberMatched on the last page or when counted', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const app = await appOf(t)
  let url = '/ogc/collections/places/items?limit=100'
  const seen = []
  const pages = []
  while (url !== null) {
    const res = await get(app, url)
    assert.equal(res.statusCode, 200, url)
    const fc = res.json()
    assertOgc('featureCollectionGeoJSON', fc, url)
    assert.equal(fc.numberReturned, fc.features.length)
    seen.push(...ids(fc))
    pages.push(fc)
    url = linkOf(fc, 'next') ? local(linkOf(fc, 'next').href) : null
  }
  assert.equal(pages.length, Math.ceil(PLACES / 100))
  assert.equal(new Set(seen).size, PLACES, 'no duplicates')
  assert.deepEqual(seen, Array.from({ length: PLACES }, (_, i) => i + 1), 'every row, in key order')
  const [first, last] = [pages[0], pages.at(-1)]
  assert.equal(first.numberMatched, undefined, 'not counted unless asked (or free)')
  assert.equal(linkOf(first, 'prev'), undefined)
  assert.equal(last.numberReturned, PLACES % 100)
  assert.equal(last.numberMatched, PLACES, 'the last page knows the total for free')
  assert.equal(local(linkOf(last, 'prev').href), '/ogc/collections/places/items?limit=100&offset=2200')
  assert.equal(linkOf(last, 'collection').href, 'http://h/ogc/collections/places')
  const prev = (await get(app, local(linkOf(pages[3], 'prev').href))).json()
  assert.deepEqual(ids(prev), ids(pages[2]))

  const counted = (await get(app, '/ogc/collections/places/items?limit=5&count=true&kind=cafe')).json()
  const [{ count }] = await query("SELECT count(*)::int FROM places WHERE kind = 'cafe'")
  assert.equal(counted.numberMatched, count)
  assert.equal(counted.numberReturned, 5)
  const beyond = (await get(app, '/ogc/collections/places/items?offset=99999')).json()
  assert.equal(beyond.numberReturned, 0)
  assert.equal(beyond.numberMatched, undefined, 'past the end the total is not known for free')

  // A view without a primary key pages in its physical order: every row once all the same on a quiet table.
  const viewIds = []
  for (let u = '/ogc/collections/places_view/items?limit=50'; u !== null;) {
    const fc = (await get(app, u)).json()
    viewIds.push(...fc.features.map((f) => f.properties.id))
    assert.ok(fc.features.every((f) => f.id === undefined), 'no id without a primary key')
    u = linkOf(fc, 'next') ? local(linkOf(fc, 'next').href) : null
  }
  const viewRows = await query('SELECT id FROM places_view')
  assert.deepEqual(sortedNumbers(viewIds), sortedNumbers(viewRows.map((r) => r.id)))
})

test('bbox finds exactly what ST_Intersects finds, in CRS84, EPSG:4326 (lat,lon), EPSG:3857 and the table\'s own CRS, across the antimeridian and on geography', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const app = await appOf(t)
  const cases = [
    ['places', 'bbox=8.2,47.2,8.5,47.6', 'ST_Intersects(geom, ST_MakeEnvelope(8.2, 47.2, 8.5, 47.6, 4326))'],
    ['places', `bbox=47.2,8.2,47.6,8.5&bbox-crs=${encodeURIComponent(EPSG(4326))}`, 'ST_Intersects(geom, ST_MakeEnvelope(8.2, 47.2, 8.5, 47.6, 4326))'],
    ['places', 'bbox=912000,5977000,950000,6030000&bbox-crs=EPSG:3857', 'ST_Intersects(geom, ST_Transform(ST_MakeEnvelope(912000, 5977000, 950000, 6030000, 3857), 4326))'],
    ['places', 'bbox=8.2,47.2,0,8.5,47.6,100', 'ST_Intersects(geom, ST_MakeEnvelope(8.2, 47.2, 8.5, 47.6, 4326))'],
    ['swiss_lines', 'bbox=8.3,47.3,8.6,47.6', 'ST_Intersects(geom, ST_Transform(ST_Segmentize(ST_MakeEnvelope(8.3, 47.3, 8.6, 47.6, 4326), 0.3 / 64), 2056))'],
    ['swiss_lines', 'bbox=2650000,1200000,2700000,1250000&bbox-crs=EPSG:2056', 'ST_Intersects(geom, ST_MakeEnvelope(2650000, 1200000, 2700000, 1250000, 2056))'],
    ['dateline', 'bbox=179,-5,-179,5', 'ST_Intersects(geom, ST_MakeEnvelope(179, -5, 180, 5, 4326)) OR ST_Intersects(geom, ST_MakeEnvelope(-180, -5, -179, 5, 4326))'],
    // A bbox is a box in lon/lat, its edges along parallels, on geography too.
    ['geo_places', 'bbox=8.2,47.2,8.6,47.7', 'ST_Intersects(geog::geometry, ST_MakeEnvelope(8.2, 47.2, 8.6, 47.7, 4326))'],
    ['geo_places', 'bbox=0,50,20,60', 'ST_Intersects(geog::geometry, ST_MakeEnvelope(0, 50, 20, 60, 4326))'],
    ['geo_places', 'bbox=-170,-80,170,80', 'ST_Intersects(geog::geometry, ST_MakeEnvelope(-170, -80, 170, 80, 4326))'],
    ['geo_places', `bbox=556597,6446276,2226390,8399738&bbox-crs=EPSG:3857`, 'ST_Intersects(geog::geometry, ST_Transform(ST_MakeEnvelope(556597, 6446276, 2226390, 8399738, 3857), 4326))'],
    ['coded', 'bbox=8.45,47.35,8.55,47.45', "ST_Intersects(geom, ST_Transform(ST_MakeEnvelope(8.45, 47.35, 8.55, 47.45, 4326), 3857))"],
    // Mercator boxes past the world's edge, as maps at zoom 0-1 ask: every row (PROJ wrapped their x around).
    ['places', 'bbox=-30000000,-20000000,30000000,20000000&bbox-crs=EPSG:3857', 'true'],
    ['dateline', 'bbox=-20100000,-20000000,20100000,20000000&bbox-crs=EPSG:3857', 'true'],
  ]
  for (const [table, params, where] of cases) {
    const key = table === 'swiss_lines' ? 'gid' : table === 'coded' ? 'code' : 'id'
    const expected = (await query(`SELECT ${key} AS id FROM ${table} WHERE ${where}`)).map((r) => r.id)
    const res = await get(app, `/ogc/collections/${table}/items?limit=10000&${params}`)
    assert.equal(res.statusCode, 200, `${table} ${params}: ${res.body.slice(0, 200)}`)
    assert.ok(expected.length > 0 || table === 'coded', `${table} ${params}: the case finds something`)
    assert.deepEqual([...ids(res.json())].sort(), [...expected].sort(), `${table} ${params}`)
    assert.equal(res.json().numberMatched, expected.length)
  }
})

test('a geography line over the antimeridian is in each bbox over where it runs, as PostGIS\'s geography ST_Intersects says', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  // Its edge a great circle from 170° to -170° over 180°: the exact test on its cast to geometry put it through 0°,
  // and every box the geography index found it in then missed it.
  await runSql(db.url, `CREATE TABLE geo_lines (id integer PRIMARY KEY, geog geography(LineString, 4326));
    INSERT INTO geo_lines VALUES (1, 'SRID=4326;LINESTRING(170 10, -170 10)'), (2, 'SRID=4326;LINESTRING(0 0, 1 1)'),
      (3, 'SRID=4326;LINESTRING(0 60, 90 60)'); -- its great circle reaches 67.8° north, halfway
    CREATE INDEX ON geo_lines USING gist (geog);`)
  t.after(() => runSql(db.url, 'DROP TABLE geo_lines'))
  const app = await appOf(t)
  const cases = [
    ['175,5,180,15', [1]], ['-180,5,-175,15', [1]], ['175,5,-175,15', [1]], ['179,9,-179,11', [1]], ['160,0,-160,20', [1]],
    ['-80,-10,80,20', [2]], ['40,66,50,68', [3]], ['40,60.5,50,61', []], ['-180,-90,180,90', [1, 2, 3]],
  ]
  for (const [bbox, expected] of cases) {
    const res = await get(app, `/ogc/collections/geo_lines/items?bbox=${bbox}`)
    assert.equal(res.statusCode, 200, `${bbox}: ${res.body}`)
    assert.deepEqual(sortedNumbers(ids(res.json())), expected, bbox)
  }
  const [w, s, e, n] = [175, 5, 180, 15]
  assert.deepEqual((await query(`SELECT id FROM geo_lines WHERE ST_Intersects(geog, ST_MakeEnvelope(${w}, ${s}, ${e}, ${n}, 4326)::geography)`)).map((r) => r.id), [1], 'as PostGIS says')
})

test('a geography line or polygon over the antimeridian is cut there (RFC 7946 3.1.9): a Multi* whose parts each keep to one side, in CRS84, EPSG:4326 and EPSG:3857; the rest as stored', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  // Cast to geometry, the 20° line from 170° to -170° came out as [[170,10],[-170,10]], which MapLibre, Leaflet and
  // QGIS draw 340° round through 0°. The same line in a `geometry` column does run through 0°: it stays so.
  await runSql(db.url, `CREATE TABLE geo_crossing (id integer PRIMARY KEY, geog geography(Geometry, 4326));
    INSERT INTO geo_crossing VALUES (1, 'SRID=4326;LINESTRING(170 10, -170 10)'),
      (2, 'SRID=4326;POLYGON((170 -10, -170 -10, -170 -20, 170 -20, 170 -10))'),
      (3, 'SRID=4326;LINESTRING(10 10, 20 20, 170 20)'), (4, 'SRID=4326;POLYGON((0 0, 10 0, 10 10, 0 10, 0 0))'),
      (5, 'SRID=4326;POINT(179.5 0)'), (6, 'SRID=4326;GEOMETRYCOLLECTION(POINT(175 0), LINESTRING(170 10, -170 10))');
    CREATE INDEX ON geo_crossing USING gist (geog);
    CREATE TABLE planar_crossing (id integer PRIMARY KEY, geom geometry(LineString, 4326));
    INSERT INTO planar_crossing VALUES (1, 'SRID=4326;LINESTRING(170 10, -170 10)');`)
  t.after(() => runSql(db.url, 'DROP TABLE geo_crossing, planar_crossing'))
  const app = await appOf(t)
  const items = async (url) => {
    const res = await get(app, url)
    assert.equal(res.statusCode, 200, `${url}: ${res.body.slice(0, 300)}`)
    return Object.fromEntries(res.json().features.map((f) => [f.id, f.geometry]))
  }
  const positionsOf = (part) => (typeof part[0] === 'number' ? [part] : part.flatMap(positionsOf))
  /** Checks that `geometry` is the Multi* `type` in two parts, one by each side of 180° (`edge`, ±180 in its units) */
  const cut = (geometry, type, edge, message) => {
    assert.equal(geometry.type, type, message)
    const sides = geometry.coordinates.map((part) => {
      const xs = positionsOf(part).map(([x]) => x)
      assert.ok(xs.every((x) => Math.abs(x) <= edge), `${message}: in [-180°, 180°], ${JSON.stringify(xs)}`)
      assert.ok(xs.every((x) => x >= 0) || xs.every((x) => x <= 0), `${message}: a part on one side, ${JSON.stringify(xs)}`)
      assert.ok(xs.some((x) => Math.abs(x) > edge * 0.999), `${message}: a part up to 180°, ${JSON.stringify(xs)}`)
      return Math.sign(xs.reduce((a, b) => a + b))
    })
    assert.deepEqual(sides.sort(), [-1, 1], `${message}: a part on each side`)
  }
  const asStored = {
    3: { type: 'LineString', coordinates: [[10, 10], [20, 20], [170, 20]] },
    4: { type: 'Polygon', coordinates: [[[0, 0], [10, 0], [10, 10], [0, 10], [0, 0]]] },
    5: { type: 'Point', coordinates: [179.5, 0] },
  }
  for (const url of ['/ogc/collections/geo_crossing/items', `/ogc/collections/geo_crossing/items?crs=${encodeURIComponent(CRS84)}`]) {
    const geometries = await items(url)
    cut(geometries[1], 'MultiLineString', 180, `${url}: the line`)
    cut(geometries[2], 'MultiPolygon', 180, `${url}: the polygon`)
    assert.deepEqual(positionsOf(geometries[1].coordinates).sort(([a], [b]) => a - b), [[-180, 10], [-170, 10], [170, 10], [180, 10]], `${url}: cut where it meets 180°`)
    for (const id of [3, 4, 5]) assert.deepEqual(geometries[id], asStored[id], `${url}: ${id} as stored`)
    assert.deepEqual(geometries[6].geometries[0], { type: 'Point', coordinates: [175, 0] }, `${url}: a collection's point`)
    cut(geometries[6].geometries[1], 'MultiLineString', 180, `${url}: a collection's line`)
  }
  const one = (await get(app, '/ogc/collections/geo_crossing/items/2')).json().geometry
  cut(one, 'MultiPolygon', 180, 'the polygon by its id')
  // lat,lon: the longitudes second
  const latLon = await items(`/ogc/collections/geo_crossing/items?crs=${encodeURIComponent(EPSG(4326))}`)
  const flip = (geometry) => ({ ...geometry, coordinates: JSON.parse(JSON.stringify(geometry.coordinates), (k, v) => (Array.isArray(v) && typeof v[0] === 'number' ? [v[1], v[0]] : v)) })
  cut(flip(latLon[1]), 'MultiLineString', 180, 'EPSG:4326: the line')
  cut(flip(latLon[2]), 'MultiPolygon', 180, 'EPSG:4326: the polygon')
  // Web Mercator, as the tiles draw it: the parts up to the world's edges, ±20037508 m
  const mercator = await items('/ogc/collections/geo_crossing/items?crs=EPSG:3857')
  cut(mercator[1], 'MultiLineString', 20037508.35, 'EPSG:3857: the line')
  cut(mercator[2], 'MultiPolygon', 20037508.35, 'EPSG:3857: the polygon')
  assert.equal(mercator[3].type, 'LineString')
  // bbox finds each by where it runs, and gives it cut
  for (const [bbox, expected] of [['175,5,180,15', [1, 6]], ['-180,5,-175,15', [1, 6]], ['-180,-25,-175,-5', [2]], ['179,-30,-179,30', [1, 2, 5, 6]], ['0,0,30,30', [3, 4]]]) {
    const geometries = await items(`/ogc/collections/geo_crossing/items?bbox=${bbox}`)
    assert.deepEqual(sortedNumbers(Object.keys(geometries).map(Number)), expected, bbox)
    if (geometries[1]) cut(geometries[1], 'MultiLineString', 180, `bbox ${bbox}: the line`)
    if (geometries[2]) cut(geometries[2], 'MultiPolygon', 180, `bbox ${bbox}: the polygon`)
  }
  assert.deepEqual((await items('/ogc/collections/planar_crossing/items'))[1], { type: 'LineString', coordinates: [[170, 10], [-170, 10]] }, 'a geometry column as stored')
})

test('tables in a regional CRS (British National Grid, LAEA Europe): a whole-world bbox finds every row, a box far away none (200, not 503)', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const app = await appOf(t)
  // Transformed whole, the world folds into a wrong polygon in these CRSs (0 rows) or PROJ refuses it (503).
  const cases = [
    ['british', 'bbox=-180,-90,180,90', [1, 2]],
    ['british', 'bbox=-180,-85,180,85', [1, 2]],
    ['british', 'bbox=-180,0,0,90', [1, 2]],
    ['british', 'bbox=0,0,180,90', []],
    ['british', 'bbox=110,-45,155,-10', []],
    ['british', 'bbox=-2,52,-1,53', [1]],
    ['british', 'bbox=-20037508,-20037508,20037508,20037508&bbox-crs=EPSG:3857', [1, 2]],
    ['british', 'bbox=-90,-180,90,180&bbox-crs=EPSG:4326', [1, 2]],
    ['british', 'bbox=400000,1100000,500000,1200000&bbox-crs=EPSG:27700', [2]],
    ['european', 'bbox=-180,-90,180,90', [1, 2]],
    ['european', 'bbox=-170,-80,-100,-20', []],
    ['european', 'bbox=0,0,180,90', [1, 2]],
    ['european', 'bbox=20,35,25,40', [2]],
    ['european', 'bbox=170,-10,-170,10', []],
  ]
  for (const [table, params, expected] of cases) {
    const res = await get(app, `/ogc/collections/${table}/items?${params}`)
    assert.equal(res.statusCode, 200, `${table} ${params}: ${res.body.slice(0, 200)}`)
    assert.deepEqual(ids(res.json()).sort(), expected, `${table} ${params}`)
  }
  // The same tables' tiles: the low-zoom ones hold their rows too, and the far ones none.
  const names = async (set, url) => { const res = await get(app, `/${set}/${url}`); return res.statusCode === 204 ? 0 : decode(res.rawPayload).layers[set].length }
  assert.equal(await names('european', '0/0/0'), 2)
  assert.equal(await names('european', '1/0/1'), 0)
  assert.equal(await names('british', '0/0/0'), 2)
  assert.equal(await names('british', '2/3/2'), 0)
})

test('one statement per collection and parameter shape; a box goes through the spatial index; orderByKey false drops the ORDER BY', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const app = await appOf(t)
  const c = collectionOf(app.catalog.get('places'))
  const read = (query) => readItemsQuery(query, c, app.features.options)
  const a = itemsStatement(c, read({ bbox: '8.2,47.2,8.3,47.3', kind: 'cafe' }), 7)
  const b = itemsStatement(c, read({ bbox: '8.5,47.5,8.6,47.6', kind: 'park', limit: '5', offset: '10' }), 7)
  const other = itemsStatement(c, read({ bbox: '8.5,47.5,8.6,47.6', rank: '3' }), 7)
  assert.equal(a, b, 'other values, the same statement')
  assert.notEqual(a.name, other.name)
  assert.match(a.name, /^tc_[0-9a-f]{24}$/)
  assert.doesNotMatch(a.text, /cafe|8\.2/, 'values are bound, never in the text')
  const values = itemsValues(read({ bbox: '8.2,47.2,8.3,47.3', kind: 'cafe' }))
  const plan = (await query(`EXPLAIN ${a.text}`, values)).map((r) => r['QUERY PLAN']).join('\n')
  assert.match(plan, /Index Cond: \(geom && /, plan)
  assert.match(a.text, /ORDER BY g\."id" ASC/)
  assert.doesNotMatch(itemsStatement(c, read({ bbox: '8.2,47.2,8.3,47.3' }), 7, false).text, /ORDER BY/)

  const unordered = await appOf(t, { features: { orderByKey: false } })
  const box = 'bbox=8.2,47.2,8.5,47.6'
  const expected = (await query('SELECT id FROM places WHERE ST_Intersects(geom, ST_MakeEnvelope(8.2, 47.2, 8.5, 47.6, 4326))')).map((r) => r.id)
  assert.deepEqual(sortedNumbers(ids((await get(unordered, `/ogc/collections/places/items?limit=10000&${box}`)).json())), sortedNumbers(expected))
  assert.equal((await get(unordered, '/ogc/collections/places/items?limit=3&sortby=-id')).json().features[0].id, PLACES, 'sortby still sorts')
})

test('properties, filters on queryables, sortby, crs (with Content-Crs) and features by id answer what the database holds', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const app = await appOf(t)
  const items = async (q) => {
    const res = await get(app, `/ogc/collections/places/items?${q.includes('limit=') ? '' : 'limit=10000&'}${q}`)
    assert.equal(res.statusCode, 200, `${q}: ${res.body.slice(0, 300)}`)
    return res.json()
  }

  const chosen = await items('limit=3&properties=rank,name')
  assert.ok(chosen.features.every((f) => JSON.stringify(Object.keys(f.properties)) === '["name","rank"]'), 'the properties asked for, in table order')
  assert.ok((await items('limit=3&properties=')).features.every((f) => Object.keys(f.properties).length === 0))
  const full = (await items('limit=1')).features[0]
  const [row] = await query('SELECT id, name, kind, rank, open, day::text, tags FROM places WHERE id = 1')
  assert.deepEqual(full.properties, { name: row.name, kind: row.kind, rank: row.rank, open: row.open, day: row.day, tags: row.tags })

  const filtered = [
    ['kind=cafe&open=true', "kind = 'cafe' AND open"],
    ['rank=7', 'rank = 7'],
    ['day=2024-03-01', "day = '2024-03-01'"],
    ['name=place%2042', "name = 'place 42'"],
    ['id=17', 'id = 17'],
    ['open=FALSE&rank=3&kind=shop', "NOT open AND rank = 3 AND kind = 'shop'"],
  ]
  for (const [q, where] of filtered) {
    const expected = (await query(`SELECT id FROM places WHERE ${where} ORDER BY id`)).map((r) => r.id)
    assert.ok(expected.length > 0, where)
    assert.deepEqual(ids(await items(q)), expected, q)
  }

  const sorts = [['sortby=-rank,name', 'rank DESC, name ASC, id'], ['sortby=%2Bkind,-day', 'kind ASC, day DESC, id'], ['sortby=+kind,-id', 'kind ASC, id DESC'], ['sortby=name', 'name, id']]
  for (const [q, order] of sorts) {
    const expected = (await query(`SELECT id FROM places ORDER BY ${order} LIMIT 300`)).map((r) => r.id)
    assert.deepEqual(ids(await items(`${q}&limit=300`)), expected, q)
  }

  const mercator = await get(app, '/ogc/collections/places/items?limit=20&crs=EPSG:3857')
  assert.equal(mercator.headers['content-crs'], `<${EPSG(3857)}>`)
  const transformed = await query('SELECT id, ST_X(ST_Transform(geom, 3857)) AS x, ST_Y(ST_Transform(geom, 3857)) AS y FROM places WHERE id <= 20 ORDER BY id')
  mercator.json().features.forEach((f, i) => {
    assert.equal(f.id, transformed[i].id)
    assert.ok(Math.abs(f.geometry.coordinates[0] - transformed[i].x) <= 0.005 && Math.abs(f.geometry.coordinates[1] - transformed[i].y) <= 0.005, `feature ${f.id}: metres to 2 decimals`)
  })
  const lonLat = (await get(app, '/ogc/collections/places/items?limit=5')).json()
  assert.equal((await get(app, '/ogc/collections/places/items?limit=5')).headers['content-crs'], `<${CRS84}>`)
  const latLon = await get(app, `/ogc/collections/places/items?limit=5&crs=${encodeURIComponent(EPSG(4326))}`)
  assert.equal(latLon.headers['content-crs'], `<${EPSG(4326)}>`)
  latLon.json().features.forEach((f, i) => assert.deepEqual(f.geometry.coordinates, [...lonLat.features[i].geometry.coordinates].reverse(), 'EPSG:4326 is lat,lon'))
  const exact = await query('SELECT ST_X(geom) AS x, ST_Y(geom) AS y FROM places WHERE id = 1')
  assert.deepEqual(lonLat.features[0].geometry.coordinates, [Number(exact[0].x.toFixed(7)), Number(exact[0].y.toFixed(7))], 'degrees to 7 decimals')

  const swiss = await get(app, '/ogc/collections/swiss_lines/items?limit=3&crs=EPSG:2056')
  assert.equal(swiss.headers['content-crs'], `<${EPSG(2056)}>`)
  const swissRows = await query('SELECT gid, ST_AsGeoJSON(geom, 2, 0) AS own, ST_AsGeoJSON(ST_Transform(geom, 4326), 7, 0) AS wgs FROM swiss_lines ORDER BY gid LIMIT 3')
  swiss.json().features.forEach((f, i) => assert.deepEqual(f.geometry, JSON.parse(swissRows[i].own), `line ${f.id} in its own CRS, metres`))
  const swissWgs = (await get(app, '/ogc/collections/swiss_lines/items?limit=3')).json()
  swissWgs.features.forEach((f, i) => assert.deepEqual(f.geometry, JSON.parse(swissRows[i].wgs), `line ${f.id} in CRS84`))

  const feature = await get(app, '/ogc/collections/places/items/17')
  assert.equal(feature.statusCode, 200)
  assert.equal(feature.headers['content-type'], 'application/geo+json')
  assertOgc('featureGeoJSON', feature.json())
  assert.equal(feature.json().id, 17)
  assert.equal(feature.json().properties.name, 'place 17')
  assert.equal(linkOf(feature.json(), 'collection').href, 'http://h/ogc/collections/places')
  assert.equal(linkOf(feature.json(), 'self').href, 'http://h/ogc/collections/places/items/17?f=geojson')
  const inMercator = await get(app, '/ogc/collections/places/items/17?crs=EPSG:3857&properties=kind&f=json')
  assert.equal(inMercator.headers['content-type'], 'application/json')
  assert.deepEqual(Object.keys(inMercator.json().properties), ['kind'])
  assert.ok(inMercator.json().geometry.coordinates[0] > 800000)

  for (const code of ['a-1', 'b/2', "O'Brien"]) {
    const res = await get(app, `/ogc/collections/coded/items/${encodeURIComponent(code)}`)
    assert.equal(res.statusCode, 200, code)
    assert.equal(res.json().id, code)
  }
  const geog = (await get(app, '/ogc/collections/geo_places/items/3')).json()
  const [g3] = await query('SELECT ST_X(geog::geometry) AS x FROM geo_places WHERE id = 3')
  assert.equal(geog.geometry.coordinates[0], Number(g3.x.toFixed(7)))
})

test('unknown collections and features are 404; bad parameters are 400 saying what is wrong; a limit past the maximum is clamped', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const app = await appOf(t, { features: { maxLimit: 50 } })
  const notFound = [
    ['/ogc/collections/nope', /no collection 'nope'/],
    ['/ogc/collections/nope/items', /no collection/],
    ['/ogc/collections/nope/queryables', /no collection/],
    ['/ogc/collections/places/items/999999', /no feature '999999'/],
    ['/ogc/collections/places/items/abc', /no feature 'abc'/],
    ['/ogc/collections/places/items/99999999999999999999', /no feature/],
    ['/ogc/collections/coded/items/zzz', /no feature 'zzz'/],
    ['/ogc/collections/places_view/items/1', /has no primary key/],
  ]
  for (const [url, message] of notFound) {
    const res = await get(app, url)
    assert.equal(res.statusCode, 404, url)
    assert.match(res.headers['content-type'], /^application\/json/)
    assert.match(res.json().message, message, url)
  }
  const bad = [
    ['limit=0', /limit must be an integer of at least 1/],
    ['limit=abc', /limit must be an integer/],
    ['limit=1.5', /limit must be an integer/],
    ['offset=-1', /offset must be an integer/],
    ['bbox=1,2,3', /bbox is 4 numbers/],
    ['bbox=a,b,c,d', /bbox is 4 numbers/],
    ['bbox=8,47,9,95', /latitudes are between -90 and 90/],
    ['bbox=8,48,9,47', /lower corner is above/],
    ['bbox=8,47,9,48&bbox-crs=EPSG:9999', /bbox-crs 'EPSG:9999' is not offered/],
    ['bbox-crs=EPSG:3857', /bbox-crs is given without bbox/],
    ['crs=EPSG:2056', /crs 'EPSG:2056' is not offered/],
    ['properties=name,nope', /no property "nope"/],
    ['sortby=nope', /sortby: "nope" is not a queryable/],
    ['sortby=tags', /sortby: "tags" is not a queryable/],
    ['sortby=name,-name', /names "name" twice/],
    ['rank=abc', /"rank" is an integer property/],
    ['open=maybe', /"open" is a boolean property/],
    ['day=notadate', /a value does not fit its property: invalid input syntax for type date/],
    ['rank=99999999999', /a value does not fit its property/],
    ['tags=1', /unknown parameter "tags"/],
    ['colour=red', /unknown parameter "colour": this resource takes limit, offset, bbox, bbox-crs, crs, properties, sortby, count, f, datetime, and the queryables: id, name, kind, rank, open, day/],
    ['datetime=yesterday', /datetime: "yesterday" is no RFC 3339 date or date-time/],
    ['datetime=2024-13-01', /no RFC 3339/],
    ['datetime=2021-02-30', /no RFC 3339/],
    ['datetime=0000-01-01', /no RFC 3339/], // no year 0 in PostgreSQL
    ['datetime=2024-01-01T25:00:00Z', /no RFC 3339/],
    ['datetime=2024-01-01T10:00:00', /no RFC 3339/], // a date-time has its offset
    ['datetime=../..', /at least one end/],
    ['datetime=..', /an instant is a date or date-time/],
    ['datetime=2024-02-01/2024-01-01', /ends before it starts/],
    ['datetime=2024-02-01T00:00:01Z/2024-01-31', /ends before it starts/],
    ['datetime=2024-01-01/2024-02-01/2024-03-01', /not an instant nor an interval/],
    ['limit=1&limit=2', /limit is given more than once/],
    ['f=xml', /f is one of geojson, json, html/],
    ['count=yes', /count is true or false/],
  ]
  for (const [q, message] of bad) {
    const res = await get(app, `/ogc/collections/places/items?${q}`)
    assert.equal(res.statusCode, 400, `${q}: ${res.body}`)
    assert.deepEqual(Object.keys(res.json()).sort(), ['error', 'message', 'statusCode'])
    assert.match(res.json().message, message, q)
  }
  for (const url of ['/ogc/collections/places/items/1?limit=3', '/ogc/collections?limit=3', '/ogc/api?f=yaml', '/ogc/conformance?f=yaml']) {
    assert.equal((await get(app, url)).statusCode, 400, url)
  }

  const clamped = (await get(app, '/ogc/collections/places/items?limit=1000')).json()
  assert.equal(clamped.numberReturned, 50, 'clamped to features.maxLimit')
  assert.equal(local(linkOf(clamped, 'next').href), '/ogc/collections/places/items?limit=50&offset=50')
  assert.equal((await get(app, '/ogc/collections/places/items')).json().numberReturned, 10, 'the default limit')
})

test('datetime selects by the table\'s first date or timestamp column: instants, whole days in UTC, intervals open at either end; a table without one selects every feature', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  await runSql(db.url, `CREATE TABLE events (id integer PRIMARY KEY, name text, at timestamptz, later timestamptz, geom geometry(Point, 4326));
    INSERT INTO events VALUES (1, 'before', '2024-04-30T23:59:59Z', '2030-01-01Z', 'SRID=4326;POINT(8 47)'),
      (2, 'first', '2024-05-01T00:00:00Z', NULL, 'SRID=4326;POINT(8 47)'), (3, 'noon', '2024-05-01T12:00:00Z', NULL, 'SRID=4326;POINT(8 47)'),
      (4, 'last', '2024-05-01T23:59:59.5Z', NULL, 'SRID=4326;POINT(8 47)'), (5, 'after', '2024-05-02T00:00:00Z', NULL, 'SRID=4326;POINT(8 47)'),
      (6, 'no time', NULL, NULL, 'SRID=4326;POINT(8 47)');`)
  t.after(() => runSql(db.url, 'DROP TABLE events'))
  const app = await appOf(t)
  const matched = async (collection, datetime) => {
    const res = await get(app, `/ogc/collections/${collection}/items?limit=10000&count=true${datetime === undefined ? '' : `&datetime=${encodeURIComponent(datetime)}`}`)
    assert.equal(res.statusCode, 200, `${collection} ${datetime}: ${res.body}`)
    return res.json()
  }
  const names = async (datetime) => (await matched('events', datetime)).features.map((f) => f.properties.name)
  assert.deepEqual(await names('2024-05-01T12:00:00Z'), ['noon'], 'an instant: that time')
  assert.deepEqual(await names('2024-05-01T14:00:00+02:00'), ['noon'], 'an offset is that instant')
  assert.deepEqual(await names('2024-05-01'), ['first', 'noon', 'last'], 'a date: the whole day, in UTC')
  assert.deepEqual(await names('2024-05-01T06:00:00Z/2024-05-02'), ['noon', 'last', 'after'], 'a date ending an interval: all of its day')
  assert.deepEqual(await names('../2024-05-01T00:00:00Z'), ['before', 'first'], 'open start')
  assert.deepEqual(await names('2024-05-01T12:00:00Z/..'), ['noon', 'last', 'after'], 'open end; the first time column only (not `later`)')
  assert.deepEqual(await names('/2024-04-30'), ['before'], 'an empty end is open too')
  assert.deepEqual(await names('2024-05-01T12:00:00Z/2024-05-01'), ['noon', 'last'], 'an end date on the start\'s day: the rest of that day')
  assert.deepEqual(await names('2024-01-01/9999-12-31'), ['before', 'first', 'noon', 'last', 'after'], 'to the last day there is')
  // A timestamp without a time zone: its values read as UTC, as a date-time's offset is.
  await runSql(db.url, `CREATE TABLE local_events (id integer PRIMARY KEY, at timestamp, geom geometry(Point, 4326));
    INSERT INTO local_events VALUES (1, '2024-05-01 12:00:00', 'SRID=4326;POINT(8 47)'), (2, '2024-05-02 00:00:00', 'SRID=4326;POINT(8 47)');`)
  t.after(() => runSql(db.url, 'DROP TABLE local_events'))
  const local = await appOf(t) // (a new app: it discovers the new table)
  const localIds = async (datetime) => (await get(local, `/ogc/collections/local_events/items?datetime=${encodeURIComponent(datetime)}`)).json().features.map((f) => f.id)
  assert.deepEqual(await localIds('2024-05-01T14:00:00+02:00'), [1], 'the offset is kept: 14:00+02:00 is 12:00')
  assert.deepEqual(await localIds('2024-05-01'), [1])
  assert.deepEqual(await localIds('../2024-05-01T23:59:59Z'), [1])
  const doc = (await get(app, '/ogc/collections/events')).json()
  assert.deepEqual(doc.extent.temporal.interval, [[null, null]], 'a collection with a time says so')
  assert.equal((await get(app, '/ogc/collections/swiss_lines')).json().extent.temporal, undefined)

  // A date column: each day compared whole; the same as SQL.
  const [{ n }] = await query("SELECT count(*)::int AS n FROM places WHERE day BETWEEN '2024-03-01' AND '2024-03-10'")
  assert.equal((await matched('places', '2024-03-01/2024-03-10')).numberMatched, n)
  const [{ m }] = await query("SELECT count(*)::int AS m FROM places WHERE day = '2024-03-01'")
  assert.equal((await matched('places', '2024-03-01T18:00:00Z')).numberMatched, m, 'a date-time on a date column: its day')
  // No time column: datetime is checked, and every feature is selected.
  assert.equal((await matched('swiss_lines', '2024-03-01')).numberMatched, (await matched('swiss_lines')).numberMatched)
  // The next link keeps it.
  const page = (await get(app, '/ogc/collections/places/items?limit=5&datetime=2024-03-01/2024-03-10')).json()
  assert.match(linkOf(page, 'next').href, /datetime=2024-03-01%2F2024-03-10/)
})

test('injection through every parameter is refused or harmless: the tables keep every row', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const app = await appOf(t)
  const attacks = ["'; DROP TABLE places; --", '1) OR 1=1 --', '" OR ""="', 'name"; DROP TABLE places; --', '1; SELECT pg_sleep(20)',
    "') UNION SELECT current_user --", 'geom', '$1', '\\x00', '🙂', 'a\u0000b', '%00', '../../etc/passwd', 'places']
  const enc = encodeURIComponent
  for (const a of attacks) {
    const urls = [
      `/ogc/collections/${enc(a)}`, `/ogc/collections/${enc(a)}/items`, `/ogc/collections/${enc(a)}/queryables`,
      `/ogc/collections/places/items/${enc(a)}`, `/ogc/collections/coded/items/${enc(a)}`,
      ...['properties', 'sortby', 'bbox', 'crs', 'limit', 'offset', 'f', 'count', 'name', 'kind', 'rank', 'day', 'open', 'id'].map((p) => `/ogc/collections/places/items?${p}=${enc(a)}`),
      `/ogc/collections/places/items?bbox=8,47,9,48&bbox-crs=${enc(a)}`,
      `/ogc/collections/places/items?${enc(a)}=1`,
      `/ogc/collections/places/items?sortby=-${enc(a)}`,
      `/ogc/collections/coded/items?code=${enc(a)}&label=${enc(a)}`,
      `/ogc/collections/places/items/1?crs=${enc(a)}&properties=${enc(a)}`,
    ]
    for (const url of urls) {
      const started = Date.now()
      const res = await get(app, url)
      assert.ok([200, 400, 404].includes(res.statusCode), `${url}: ${res.statusCode} ${res.body.slice(0, 200)}`)
      assert.ok(Date.now() - started < 10_000, `${url}: no pg_sleep ran`) // an injected pg_sleep(20) would take 20 s
      if (res.statusCode === 200 && /[?&](name|kind|code)=/.test(url)) assert.equal(res.json().numberReturned, 0, `${url}: a value is a value`)
      if (res.statusCode !== 200) assert.equal(typeof res.json().message, 'string')
    }
  }
  assert.equal((await query('SELECT count(*)::int AS n FROM places'))[0].n, PLACES)
  assert.equal((await query('SELECT count(*)::int AS n FROM coded'))[0].n, 3)
  assert.equal((await get(app, '/ogc/collections/places/items?limit=1')).statusCode, 200, 'still serving')
})

test('gzip and brotli answers decode to the same JSON; collections have an ETag and answer 304; HTML for browsers', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const app = await appOf(t)
  const url = '/ogc/collections/places/items?limit=500&bbox=8,47,8.7,47.8'
  const plain = await get(app, url)
  const gz = await get(app, url, { 'accept-encoding': 'gzip' })
  const br = await get(app, url, { 'accept-encoding': 'br' })
  assert.equal(plain.headers['content-encoding'], undefined)
  assert.equal(gz.headers['content-encoding'], 'gzip')
  assert.equal(br.headers['content-encoding'], 'br')
  for (const res of [plain, gz, br]) assert.match(res.headers.vary, /Accept-Encoding/)
  const strip = (text) => { const doc = JSON.parse(text); delete doc.timeStamp; return doc }
  assert.deepEqual(strip(gunzipSync(gz.rawPayload)), strip(plain.body))
  assert.deepEqual(strip(brotliDecompressSync(br.rawPayload)), strip(plain.body))
  assert.ok(gz.rawPayload.length < plain.rawPayload.length / 3, 'compressed')
  assert.equal(plain.headers['cache-control'], 'public, max-age=60', 'the set\'s tile lifetime (PostGIS TTL)')

  const collections = await get(app, '/ogc/collections')
  const etag = collections.headers.etag
  assert.match(etag, /^"[\w-]+"$/)
  assert.equal(collections.headers['cache-control'], 'public, max-age=60')
  const again = await get(app, '/ogc/collections', { 'if-none-match': etag })
  assert.equal(again.statusCode, 304)
  assert.equal(again.body, '')
  assert.equal(again.headers['content-type'], undefined)
  assert.equal(again.headers.etag, etag)
  const gzCollections = await get(app, '/ogc/collections', { 'accept-encoding': 'gzip, br' })
  assert.equal(gzCollections.headers['content-encoding'], 'gzip')
  assert.notEqual(gzCollections.headers.etag, etag, 'a strong ETag per encoding')
  assert.deepEqual(JSON.parse(gunzipSync(gzCollections.rawPayload)), collections.json())
  const gz304 = await get(app, '/ogc/collections', { 'accept-encoding': 'gzip', 'if-none-match': gzCollections.headers.etag })
  assert.equal(gz304.statusCode, 304)
  assert.equal(gz304.headers['content-encoding'], undefined)
  const brApi = await get(app, '/ogc/api', { 'accept-encoding': 'br' })
  assert.deepEqual(JSON.parse(brotliDecompressSync(brApi.rawPayload)), (await get(app, '/ogc/api')).json())

  const browser = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8'
  const page = await get(app, '/ogc/collections', { accept: browser })
  assert.match(page.headers['content-type'], /^text\/html/)
  assert.match(page.body, /<a href="http:\/\/h\/ogc\/collections\/places\?f=html">places<\/a>/)
  assert.equal((await get(app, '/ogc/collections', { accept: '*/*' })).headers['content-type'], 'application/json')
  const map = await get(app, '/ogc/collections/places/items?limit=5&crs=EPSG:3857', { accept: browser })
  assert.match(map.headers['content-type'], /^text\/html/)
  assert.match(map.body, /"json":"http:\/\/h\/ogc\/collections\/places\/items\?limit=5&f=geojson"/)
  // The page carries its features (in CRS84, whatever crs asked: the map's), and their lifetime.
  const inline = JSON.parse(/<script type="application\/json" id="features">(.*?)<\/script>/s.exec(map.body)[1])
  assert.deepEqual(inline.features, (await get(app, '/ogc/collections/places/items?limit=5')).json().features)
  assert.equal(map.headers['cache-control'], (await get(app, '/ogc/collections/places/items?limit=5')).headers['cache-control'])
  const gzMap = await get(app, '/ogc/collections/places/items?limit=500', { accept: browser, 'accept-encoding': 'gzip' })
  assert.equal(gzMap.headers['content-encoding'], 'gzip', 'a page of features is compressed as its GeoJSON would be')
  assert.match(gzMap.headers.vary, /Accept-Encoding/)
  assert.match(gunzipSync(gzMap.rawPayload).toString(), /<script type="application\/json" id="features">\{"type":"FeatureCollection"/)
  assert.equal((await get(app, '/ogc/collections/places/items?f=html&rank=x')).statusCode, 400, 'a bad filter is a 400 for browsers too')
  assert.match(map.body, /"assets":"http:\/\/h\/viewer\/assets"/)
  assert.equal((await get(app, '/viewer/assets/maplibre-gl.mjs')).statusCode, 200, 'the page\'s MapLibre is the viewer\'s')
  assert.equal((await get(app, '/ogc/collections/places/items?f=json&limit=1')).headers['content-type'], 'application/json')
  assert.equal((await get(app, '/ogc/collections/places/items?limit=1', { accept: 'application/json' })).headers['content-type'], 'application/json')
  assert.equal((await get(app, '/ogc/collections/places/items/3?f=html')).statusCode, 200)
  assert.equal((await get(app, '/ogc/collections/places/items/999999?f=html')).statusCode, 404, 'a missing feature is a 404 for browsers too')
  const head = await app.inject({ method: 'HEAD', url: '/ogc/collections/places/items?limit=5', headers: { host: 'h' } })
  assert.equal(head.statusCode, 200)
  assert.equal(head.body, '')

  const bare = await appOf(t, { viewer: false })
  assert.match((await get(bare, '/ogc/collections/places/items?f=html')).body, /"assets":null/, 'without the viewer: a table only')
})

test('q-values choose the coding of features and their documents: the highest q wins, q=0 refuses; gzip first on a tie', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const app = await appOf(t)
  const cases = [
    ['gzip, br', 'gzip'],
    ['gzip;q=0.5, br', 'br'],
    ['br;q=1, gzip;q=0.9', 'br'],
    ['gzip;q=0, br', 'br'],
    ['br;q=0.1, gzip', 'gzip'],
    ['gzip;q=0.5, br;q=0.5, identity', undefined],
  ]
  for (const url of ['/ogc/collections/places/items?limit=500', '/ogc/collections']) {
    for (const [accept, coding] of cases) {
      const res = await get(app, url, { 'accept-encoding': accept })
      assert.equal(res.statusCode, 200, `${url} ${accept}`)
      assert.equal(res.headers['content-encoding'], coding, `${url} ${accept}`)
    }
  }
})

test('links carry the API key a client was let in with', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const app = await appOf(t, { apiKeys: ['s3cret'] })
  assert.equal((await get(app, '/ogc/collections/places/items')).statusCode, 401)
  const fc = (await get(app, '/ogc/collections/places/items?limit=2&key=s3cret')).json()
  assert.equal(local(linkOf(fc, 'next').href), '/ogc/collections/places/items?limit=2&offset=2&key=s3cret')
  const doc = (await get(app, '/ogc/collections', { 'x-api-key': 's3cret' })).json()
  assert.equal(linkOf(doc.collections[0], 'items', 'application/geo+json').href.endsWith('/items?key=s3cret'), true)
})

test('a feature id that is a dot segment (`..`, `.`) or holds a slash is percent-encoded in its links: GET of its self link, as curl or GDAL resolve it, returns that feature', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const odd = ['..', '.', 'a/b', '../x', '...', '%2E%2E']
  await runSql(db.url, `CREATE TABLE odd_ids (code text PRIMARY KEY, geom geometry(Point, 4326));
    INSERT INTO odd_ids SELECT code, 'SRID=4326;POINT(1 1)' FROM unnest(ARRAY[${odd.map((s) => `'${s}'`).join(', ')}]) AS code;`)
  t.after(() => runSql(db.url, 'DROP TABLE odd_ids'))
  const app = await appOf(t)
  await app.listen({ port: 0, host: '127.0.0.1' })
  // Over a socket, the path as it is: inject() (like fetch) parses it by the WHATWG URL standard, which takes %2E for a dot.
  const raw = (path) => new Promise((resolve, reject) => {
    httpRequest({ host: '127.0.0.1', port: app.server.address().port, path, headers: { host: 'h' } }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (chunk) => { body += chunk })
      res.on('end', () => resolve({ status: res.statusCode, body }))
    }).on('error', reject).end()
  })
  // RFC 3986 resolution (curl, GDAL, Python): segments `.` and `..` are removed, percent-encoded ones are not.
  const resolved = (href) => {
    const [, path, search = ''] = /^https?:\/\/[^/]+([^?#]*)(\?[^#]*)?/.exec(href)
    return posix.normalize(path) + search
  }
  for (const id of odd) {
    const first = await raw(`/ogc/collections/odd_ids/items/${encodeURIComponent(id).replaceAll('.', '%2E')}`)
    assert.equal(first.status, 200, `${id}: ${first.body}`)
    const self = JSON.parse(first.body).links.find((l) => l.rel === 'self').href
    const again = await raw(resolved(self))
    assert.equal(again.status, 200, `${id}: ${self}`)
    assert.equal(JSON.parse(again.body).id, id, `${id}: GET ${self} is that feature`)
  }
})

test('the database going away: 503 with Retry-After for features, logged once per collection as a features read, answers again when it is back', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  if (db.pause === null) return t.skip('DATABASE_URL given: this test needs the throwaway cluster to stop and start it')
  const logs = []
  const app = await makeApp(t, { paths: [db.url], postgres: { connectTimeoutMs: 1000, retryMs: 200 } }, { logs })
  assert.equal((await get(app, '/ogc/collections/places/items?limit=1')).statusCode, 200)
  await db.pause()
  try {
    for (const url of ['/ogc/collections/places/items?limit=5', '/ogc/collections/places/items/3', '/ogc/collections/swiss_lines/items?crs=EPSG:2056&count=true', '/ogc/collections/places/items?f=html']) {
      const res = await get(app, url)
      assert.equal(res.statusCode, 503, `${url}: ${res.body}`)
      assert.ok(Number(res.headers['retry-after']) > 0)
      assert.match(res.json().message, /could not read/)
    }
    assert.equal((await get(app, '/ogc/collections')).statusCode, 200, 'the catalog still knows its collections')
    const failed = logs.filter((l) => l.level >= 50)
    assert.deepEqual([...new Set(failed.map((l) => `${l.msg}: ${l.set}`))].sort(), ['features read failed: places', 'features read failed: swiss_lines'],
      'said to be features, not tiles')
  } finally {
    await db.start()
  }
  let res
  for (let i = 0; i < 50; i++) {
    res = await get(app, '/ogc/collections/places/items?limit=5')
    if (res.statusCode === 200) break
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  assert.equal(res.statusCode, 200)
})

/** GETs `url` from a listening server, counting the body's bytes without keeping them; `onBytes(n)` may abort. */
function download (url, onBytes = () => {}) {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, (res) => {
      let bytes = 0
      let head = ''
      let tail = ''
      res.on('data', (chunk) => {
        bytes += chunk.length
        if (head.length < 200) head += chunk.toString('latin1', 0, 200)
        tail = (tail + chunk.toString('latin1', Math.max(0, chunk.length - 2000))).slice(-2000)
        if (onBytes(bytes) === false) {
          req.destroy()
          resolve({ status: res.statusCode, bytes, aborted: true })
        }
      })
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, bytes, head, tail }))
      res.on('error', reject)
    })
    req.on('error', (err) => (err.code === 'ECONNRESET' ? resolve({ aborted: true }) : reject(err)))
    req.end()
  })
}

test('a table altered or dropped while served: its database is discovered again at once, so it answers as it now is (not 503 until the next discovery)', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  await runSql(db.url, `CREATE TABLE shifting (id integer PRIMARY KEY, a integer, b text, geom geometry(Point, 4326));
    INSERT INTO shifting VALUES (1, 10, 'x', 'SRID=4326;POINT(8 47)');`)
  t.after(() => runSql(db.url, 'DROP TABLE IF EXISTS shifting'))
  const app = await appOf(t) // discoverIntervalS: 300, the default
  const items = () => get(app, '/ogc/collections/shifting/items')
  assert.deepEqual((await items()).json().features[0].properties, { a: 10, b: 'x' })
  // Polls until `ok` holds of the answer (each failing read may start the discovery; it runs in the background).
  const eventually = async (request, ok, what) => {
    let res
    for (let i = 0; i < 80; i++) {
      res = await request()
      if (ok(res)) return res
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    assert.fail(`${what}: still ${res.statusCode} ${res.body.slice(0, 200)}`)
  }
  await runSql(db.url, 'ALTER TABLE shifting DROP COLUMN b')
  const altered = await eventually(items, (res) => res.statusCode === 200, 'a dropped column')
  assert.deepEqual(altered.json().features[0].properties, { a: 10 })
  assert.equal((await get(app, '/shifting/0/0/0')).statusCode, 200, 'its tiles too')
  await runSql(db.url, 'DROP TABLE shifting')
  await eventually(items, (res) => res.statusCode === 404, 'a dropped table') // (a second discovery: at most every 5 s)
  assert.equal((await get(app, '/shifting/0/0/0')).statusCode, 404)
})

test('feature requests past their share of the connections wait for one (a map asks for several pages at once), rather than 503 at once', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  await runSql(db.url, 'CREATE VIEW slow_places AS SELECT p.id, p.geom FROM places AS p, pg_sleep(0.3) WHERE p.id <= 3')
  t.after(() => runSql(db.url, 'DROP VIEW slow_places'))
  const app = await appOf(t)
  const started = Date.now()
  const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => get(app, `/ogc/collections/slow_places/items?limit=${i + 1}`)))
  assert.deepEqual(answers.map((a) => a.statusCode), Array(12).fill(200), answers.find((a) => a.statusCode !== 200)?.body)
  assert.ok(Date.now() - started >= 600, 'they ran a few at a time (the share), not all at once')
})

test('a table in a geographic CRS other than 4326 (NAD83) answers its own CRS latitude first, and reads its bbox so', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  await runSql(db.url, `CREATE TABLE nad83 (id integer PRIMARY KEY, geom geometry(Point, 4269));
    INSERT INTO nad83 VALUES (1, 'SRID=4269;POINT(-100 40)'), (2, 'SRID=4269;POINT(-80 30)');`)
  t.after(() => runSql(db.url, 'DROP TABLE nad83'))
  const app = await appOf(t)
  const own = encodeURIComponent(EPSG(4269))
  const res = await get(app, `/ogc/collections/nad83/items?crs=${own}`)
  assert.equal(res.headers['content-crs'], `<${EPSG(4269)}>`)
  assert.deepEqual(res.json().features.map((f) => f.geometry.coordinates), [[40, -100], [30, -80]], 'EPSG:4269 is lat,lon')
  const boxed = await get(app, `/ogc/collections/nad83/items?bbox=35,-110,45,-90&bbox-crs=${own}`)
  assert.deepEqual(ids(boxed.json()), [1], 'a bbox in EPSG:4269 is minLat,minLon,maxLat,maxLon')
  assert.deepEqual((await get(app, '/ogc/collections/nad83/items')).json().features[0].geometry.coordinates, [-100, 40], 'CRS84 stays lon,lat')
})

test('a column altered since discovery (integer to text) still gives valid JSON: a value cannot add keys', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  await runSql(db.url, `CREATE TABLE altered (id integer PRIMARY KEY, b integer, geom geometry(Point, 4326));
    INSERT INTO altered VALUES (1, 7, 'SRID=4326;POINT(1 1)');`)
  t.after(() => runSql(db.url, 'DROP TABLE altered'))
  const app = await appOf(t)
  assert.equal((await get(app, '/ogc/collections/altered/items')).json().features[0].properties.b, 7)
  await runSql(db.url, `ALTER TABLE altered ALTER b TYPE text; UPDATE altered SET b = '0,"injected":true'`)
  const res = await get(app, '/ogc/collections/altered/items')
  assert.equal(res.statusCode, 200, res.body)
  assert.deepEqual(JSON.parse(res.body).features[0].properties, { b: '0,"injected":true' })
})

test('a geometry with coordinates that are no numbers (POINT(NaN NaN), NaN or Infinity in a vertex), or empty, is null: the page stays valid JSON', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  await runSql(db.url, `CREATE TABLE not_numbers (id integer PRIMARY KEY, name text, geom geometry(Geometry, 4326));
    INSERT INTO not_numbers VALUES (1, 'NaN NaN', 'SRID=4326;POINT(NaN NaN)'), (2, 'half', ST_SetSRID(ST_MakePoint(1, 'NaN'), 4326)),
      (3, 'Infinity', ST_SetSRID(ST_MakePoint('Infinity', 1), 4326)), (4, 'fine', 'SRID=4326;POINT(8.5 47.4)'), (5, 'none', NULL),
      (6, 'vertex', ST_SetSRID(ST_MakeLine(ST_MakePoint(8, 47), ST_MakePoint('NaN', 47)), 4326)), (7, 'empty', 'SRID=4326;POINT EMPTY'),
      (8, '-Infinity', ST_SetSRID(ST_MakePoint('-Infinity', 1), 4326)), (9, 'to -Infinity', ST_SetSRID(ST_MakeLine(ST_MakePoint(8, 47), ST_MakePoint('-Infinity', 47)), 4326));`)
  t.after(() => runSql(db.url, 'DROP TABLE not_numbers'))
  const app = await appOf(t)
  for (const crs of ['', `&crs=${encodeURIComponent(EPSG(4326))}`, '&crs=EPSG:3857']) {
    const res = await get(app, `/ogc/collections/not_numbers/items?limit=100${crs}`)
    assert.equal(res.statusCode, 200, `${crs}: ${res.body}`)
    const fc = JSON.parse(res.body) // `"coordinates":[NaN,NaN]` was not JSON
    assert.deepEqual(ids(fc), [1, 2, 3, 4, 5, 6, 7, 8, 9])
    const geometries = Object.fromEntries(fc.features.map((f) => [f.properties.name, f.geometry]))
    for (const name of ['NaN NaN', 'half', 'Infinity', 'none', 'vertex', 'empty', '-Infinity', 'to -Infinity']) assert.equal(geometries[name], null, `${name}${crs}`)
    assert.equal(geometries.fine.type, 'Point')
  }
  const one = await get(app, '/ogc/collections/not_numbers/items/1')
  assert.equal(one.statusCode, 200)
  assert.equal(JSON.parse(one.body).geometry, null)
})

test('a TIN, triangle or polyhedral surface in a `geometry` column is a null geometry, in no bbox; the other rows are served', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  // A column of any type, which discovery cannot refuse as it does a TIN column: ST_AsGeoJSON raised on the
  // polyhedral surface ("'PolyhedralSurface' geometry type not supported"), GEOS too, and each page holding it was a 503.
  await runSql(db.url, `CREATE TABLE surfaces (id integer PRIMARY KEY, name text, geom geometry);
    INSERT INTO surfaces VALUES (1, 'point', 'SRID=4326;POINT(1 1)'), (2, 'tin', 'SRID=4326;TIN(((0 0,0 1,1 1,0 0)))'),
      (3, 'surface', 'SRID=4326;POLYHEDRALSURFACE(((0 0,0 1,1 1,0 0)))'), (4, 'triangle', 'SRID=4326;TRIANGLE((0 0,0 1,1 1,0 0))'),
      (5, 'line', 'SRID=4326;LINESTRING(0 0,2 2)');`)
  t.after(() => runSql(db.url, 'DROP TABLE surfaces'))
  const app = await appOf(t)
  for (const crs of ['', '&crs=EPSG:3857']) {
    const res = await get(app, `/ogc/collections/surfaces/items?limit=100${crs}`)
    assert.equal(res.statusCode, 200, `${crs}: ${res.body}`)
    const geometries = Object.fromEntries(res.json().features.map((f) => [f.properties.name, f.geometry]))
    assert.deepEqual(Object.keys(geometries).sort(), ['line', 'point', 'surface', 'tin', 'triangle'], crs)
    for (const name of ['tin', 'surface', 'triangle']) assert.equal(geometries[name], null, `${name}${crs}`)
    assert.equal(geometries.point.type, 'Point')
    assert.equal(geometries.line.type, 'LineString')
    const boxed = await get(app, `/ogc/collections/surfaces/items?bbox=0,0,2,2${crs}`)
    assert.equal(boxed.statusCode, 200, `bbox${crs}: ${boxed.body}`)
    assert.deepEqual(sortedNumbers(ids(boxed.json())), [1, 5], `bbox${crs}`)
    assert.equal(boxed.json().numberMatched, 2)
  }
  const one = await get(app, '/ogc/collections/surfaces/items/3')
  assert.equal(one.statusCode, 200, one.body)
  assert.equal(one.json().geometry, null)
})

test('a collection GeoJSON cannot hold (a collection, a polyhedral surface or a multisurface in it) is a null geometry, in no bbox; the pages around it are served, and its tiles', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  // ST_AsGeoJSON raised "GeoJson: geometry not supported": its page was a 503, and so was the page before it (each
  // page reads one row past its end).
  await runSql(db.url, `CREATE TABLE mixed (id integer PRIMARY KEY, name text, geom geometry);
    INSERT INTO mixed VALUES (1, 'point', 'SRID=4326;POINT(1 1)'), (2, 'flat', 'SRID=4326;GEOMETRYCOLLECTION(POINT(2 2),LINESTRING(0 0,1 1))'),
      (3, 'nested', 'SRID=4326;GEOMETRYCOLLECTION(GEOMETRYCOLLECTION(POINT(3 3)),POINT(4 4))'),
      (4, 'surface', 'SRID=4326;GEOMETRYCOLLECTION(POLYHEDRALSURFACE(((0 0,0 1,1 1,0 0))),POINT(4 4))'),
      (5, 'multisurface', 'SRID=4326;GEOMETRYCOLLECTION(MULTISURFACE(((0 0,0 1,1 1,0 0))))'), (6, 'line', 'SRID=4326;LINESTRING(0 0,2 2)'),
      (7, 'deep surface', 'SRID=4326;GEOMETRYCOLLECTION(POINT(4 4),GEOMETRYCOLLECTION(GEOMETRYCOLLECTION(POLYHEDRALSURFACE(((0 0,0 1,1 1,0 0))))))');
    CREATE TABLE only_collections (id integer PRIMARY KEY, geom geometry(GeometryCollection, 4326));
    INSERT INTO only_collections VALUES (1, 'SRID=4326;GEOMETRYCOLLECTION(POINT(1 1))'), (2, 'SRID=4326;GEOMETRYCOLLECTION(GEOMETRYCOLLECTION(POINT(3 3)),POINT(4 4))'),
      (3, 'SRID=4326;GEOMETRYCOLLECTION(POINT(2 2))'), (4, 'SRID=4326;GEOMETRYCOLLECTION(GEOMETRYCOLLECTION(POLYHEDRALSURFACE(((0 0,0 1,1 1,0 0)))))');`)
  t.after(() => runSql(db.url, 'DROP TABLE mixed; DROP TABLE only_collections'))
  const app = await appOf(t)
  for (const crs of ['', '&crs=EPSG:3857']) {
    const res = await get(app, `/ogc/collections/mixed/items?limit=100${crs}`)
    assert.equal(res.statusCode, 200, `${crs}: ${res.body}`)
    const geometries = Object.fromEntries(res.json().features.map((f) => [f.properties.name, f.geometry]))
    assert.deepEqual(Object.keys(geometries).sort(), ['deep surface', 'flat', 'line', 'multisurface', 'nested', 'point', 'surface'], crs)
    for (const name of ['nested', 'surface', 'multisurface', 'deep surface']) assert.equal(geometries[name], null, `${name}${crs}`)
    assert.equal(geometries.flat.type, 'GeometryCollection')
    assert.equal(geometries.line.type, 'LineString')
    const boxed = await get(app, `/ogc/collections/mixed/items?bbox=0,0,5,5${crs}`)
    assert.equal(boxed.statusCode, 200, `bbox${crs}: ${boxed.body}`)
    assert.deepEqual(sortedNumbers(ids(boxed.json())), [1, 2, 6], `bbox${crs}`)
  }
  // The page just before the row, which reads it to know there is a next page; the row itself; a column of collections.
  const before = await get(app, '/ogc/collections/mixed/items?limit=1&offset=1')
  assert.equal(before.statusCode, 200, before.body)
  assert.deepEqual(ids(before.json()), [2])
  const one = await get(app, '/ogc/collections/mixed/items/3')
  assert.equal(one.statusCode, 200, one.body)
  assert.equal(one.json().geometry, null)
  const only = await get(app, '/ogc/collections/only_collections/items')
  assert.equal(only.statusCode, 200, only.body)
  assert.deepEqual(only.json().features.map((f) => f.geometry?.type ?? null), ['GeometryCollection', null, 'GeometryCollection', null])
  // Tiles draw them (ST_AsMVTGeom flattens a collection): only those holding a polyhedral surface, at any depth, are
  // left out. Two collections down, it was looked for one level down only: ST_AsMVTGeom raised ("lwgeom_get_basic_type:
  // Invalid type (13)"), and every tile holding it was a 503.
  for (const [set, expected] of [['mixed', [1, 2, 3, 5, 6]], ['only_collections', [1, 2, 3]]]) {
    for (const zxy of ['0/0/0', '6/32/31']) {
      const tile = await get(app, `/${set}/${zxy}`)
      assert.equal(tile.statusCode, 200, `${set} ${zxy}: ${tile.body}`)
      const drawn = decode(tile.rawPayload).layers[set]
      assert.deepEqual(sortedNumbers(Array.from({ length: drawn.length }, (_, i) => drawn.feature(i).id)), expected, `${set} ${zxy}`)
    }
  }
})

test('filters and feature ids on inet, enum, domain and interval columns compare as their types: what the server lists is found, a value that does not fit is 400', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  // Compared as text, `?ip=10.0.0.1` found nothing (inet's text is 10.0.0.1/32), `?p=05` no 5, `?iv=24:00:00` no
  // '1 day', a label no enum has was an empty page, and /items/10.0.0.1 of an inet key was a 404.
  await runSql(db.url, `CREATE TYPE temper AS ENUM ('sad', 'ok', 'happy'); CREATE DOMAIN positive AS integer CHECK (VALUE > 0);
    CREATE TABLE typed_values (id integer PRIMARY KEY, ip inet, m temper, p positive, iv interval, c char(5), one "char", bits bit(3), geom geometry(Point, 4326));
    INSERT INTO typed_values VALUES (1, '10.0.0.1', 'happy', 5, '1 day', 'ab', 'a', B'101', 'SRID=4326;POINT(1 1)'),
      (2, '192.168.0.0/16', 'sad', 7, '2 hours', 'abcde', 'b', B'011', 'SRID=4326;POINT(2 2)');
    CREATE TABLE inet_keys (ip inet PRIMARY KEY, geom geometry(Point, 4326));
    INSERT INTO inet_keys VALUES ('10.0.0.1', 'SRID=4326;POINT(1 1)'), ('::1', 'SRID=4326;POINT(2 2)'), ('192.168.0.0/16', 'SRID=4326;POINT(3 3)');`)
  t.after(() => runSql(db.url, 'DROP TABLE typed_values, inet_keys; DROP TYPE temper; DROP DOMAIN positive'))
  const app = await appOf(t)
  const listed = (await get(app, '/ogc/collections/typed_values/items?ip=10.0.0.1')).json()
  assert.deepEqual(ids(listed), [1])
  assert.equal(listed.features[0].properties.ip, '10.0.0.1', 'the value the server outputs finds its row')
  const cases = [['ip=10.0.0.1%2F32', [1]], ['ip=192.168.0.0%2F16', [2]], ['m=happy', [1]], ['p=05', [1]], ['p=-1', []], ['iv=24%3A00%3A00', [1]],
    ['iv=2%20hours', [2]], ['c=ab', [1]], ['c=abcde', [2]], ['m=sad&p=7', [2]],
    // "char" and bit: cast without a length, 'ab' was cut to 'a' and matched row 1, '101' refused by bit(1).
    ['one=a', [1]], ['one=ab', []], ['bits=101', [1]], ['bits=011', [2]], ['bits=1', []]]
  for (const [filter, expected] of cases) {
    const res = await get(app, `/ogc/collections/typed_values/items?${filter}`)
    assert.equal(res.statusCode, 200, `${filter}: ${res.body}`)
    assert.deepEqual(sortedNumbers(ids(res.json())), expected, filter)
  }
  for (const filter of ['m=angry', 'p=abc', 'ip=nowhere', 'iv=soon']) {
    const res = await get(app, `/ogc/collections/typed_values/items?${filter}`)
    assert.equal(res.statusCode, 400, `${filter}: ${res.body}`)
  }
  const keys = ids((await get(app, '/ogc/collections/inet_keys/items')).json())
  assert.deepEqual([...keys].sort(), ['10.0.0.1', '192.168.0.0/16', '::1'])
  for (const id of keys) {
    const res = await get(app, `/ogc/collections/inet_keys/items/${encodeURIComponent(id)}`)
    assert.equal(res.statusCode, 200, `${id}: ${res.body}`)
    assert.equal(res.json().id, id)
  }
  assert.equal((await get(app, '/ogc/collections/inet_keys/items/10.0.0.2')).statusCode, 404)
  assert.equal((await get(app, '/ogc/collections/inet_keys/items/nowhere')).statusCode, 404, 'no value of the key\'s type: no such feature')
})

test('a page larger than the part answered in one piece is valid JSON, however its rows fall across the chunks', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  // One polygon of 120,000 vertices (about 3 MB of GeoJSON): its row alone fills the buffered part and a chunk.
  await runSql(db.url, `CREATE TABLE big_polygon (id integer PRIMARY KEY, name text, geom geometry(Polygon, 4326));
    INSERT INTO big_polygon VALUES (1, 'big', ST_Buffer(ST_SetSRID(ST_MakePoint(8, 47), 4326), 1, 30000)), (2, 'small', ST_MakeEnvelope(0, 0, 1, 1, 4326));`)
  t.after(() => runSql(db.url, 'DROP TABLE big_polygon'))
  const app = await appOf(t)
  for (const limit of [1, 2]) {
    const res = await get(app, `/ogc/collections/big_polygon/items?limit=${limit}`)
    assert.equal(res.statusCode, 200)
    assert.ok(res.body.length > 2e6, `${res.body.length} bytes`)
    const fc = JSON.parse(res.body) // `…}},]` was not JSON
    assert.deepEqual(ids(fc), limit === 1 ? [1] : [1, 2])
  }
})

test('a million features stream with flat memory; a client that goes away ends its query', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  await runSql(db.url, `
    CREATE TABLE million (id integer PRIMARY KEY, name text, v integer, geom geometry(Point, 4326));
    INSERT INTO million SELECT i, 'point ' || i, i % 1000, ST_SetSRID(ST_MakePoint(-180 + (i % 3600) / 10.0, -80 + (i / 3600) * 0.5), 4326)
      FROM generate_series(1, 1000000) AS i;
    ANALYZE million;`)
  // The server as users run it, in a process of its own: its memory is the server's alone.
  const config = join(tempDir(t), 'config.json')
  writeFileSync(config, JSON.stringify({ features: { maxLimit: 1_000_000 }, postgres: { statementTimeoutMs: 60_000, schemas: ['public'] } }))
  const server = await startTileCannon([db.url], { flags: ['--config', config, '--no-viewer', '--no-metrics'] })
  t.after(() => server.stop())
  const base = `${server.base}/ogc/collections/million/items`
  await download(`${base}?limit=10000`) // warm: the statement prepared, the connection open

  const rss = () => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${server.child.pid}/status`, 'utf8'))[1]) * 1024
  const before = rss()
  let peak = before
  const sampler = setInterval(() => { peak = Math.max(peak, rss()) }, 20)
  const started = Date.now()
  let all
  try {
    all = await download(`${base}?limit=1000000`)
  } finally {
    clearInterval(sampler)
  }
  const seconds = (Date.now() - started) / 1000
  assert.equal(all.status, 200)
  assert.ok(all.bytes > 100 * 2 ** 20, `the body is ${(all.bytes / 2 ** 20).toFixed(0)} MiB`)
  assert.ok(all.head.startsWith('{"type":"FeatureCollection","timeStamp":"'), all.head)
  assert.match(all.tail, /],"numberReturned":1000000,"numberMatched":1000000,"links":\[.*\]}$/)
  const growth = (peak - before) / 2 ** 20
  t.diagnostic(`${(all.bytes / 2 ** 20).toFixed(0)} MiB in ${seconds.toFixed(1)} s; RSS ${(before / 2 ** 20).toFixed(0)} MiB → peak ${(peak / 2 ** 20).toFixed(0)} MiB`)
  assert.ok(growth < 0.6 * all.bytes / 2 ** 20, `RSS grew ${growth.toFixed(0)} MiB streaming ${(all.bytes / 2 ** 20).toFixed(0)} MiB`)

  // Past the size answered in one piece, the stream is compressed as it goes.
  for (const coding of ['gzip', 'br']) {
    const res = await fetch(`${base}?limit=20000`, { headers: { 'accept-encoding': coding } })
    assert.equal(res.headers.get('content-encoding'), coding)
    assert.equal(res.headers.get('content-length'), null, 'streamed')
    const fc = await res.json() // fetch decodes gzip and br
    assert.equal(fc.numberReturned, 20000)
    assert.deepEqual(ids(fc), Array.from({ length: 20000 }, (_, i) => i + 1))
  }
  const small = await fetch(`${base}?limit=5`)
  assert.ok(Number(small.headers.get('content-length')) > 0, 'a small page is answered in one piece')

  // Away after 2 MB: the query stops (its connection is closed), the pool serves on.
  const gone = await download(`${base}?limit=1000000&sortby=-v`, (bytes) => bytes < 2e6)
  assert.equal(gone.aborted, true)
  let active
  for (let i = 0; i < 150; i++) {
    active = await query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'tile-cannon' AND state = 'active' AND query LIKE '%million%'")
    if (active[0].n === 0) break
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  assert.equal(active[0].n, 0, 'no query left running for a client that went away')
  const next = await download(`${base}?limit=3`)
  assert.equal(next.status, 200)
  assert.match(next.tail, /"numberReturned":3/)
})

test('the features page in a browser (Chromium): its table lists the page\'s features, ids and values past 2^53 as written', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const chromiumPath = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
  if (!needs(t, existsSync(chromiumPath), `Chromium is not installed at ${chromiumPath} (Debian: chromium)`)) return
  await runSql(db.url, `CREATE TABLE big_ids (id bigint PRIMARY KEY, n bigint, geom geometry(Point, 4326));
    INSERT INTO big_ids VALUES (9007199254740993, 9223372036854775807, 'SRID=4326;POINT(8.5 47.4)'), (1, -9007199254740995, 'SRID=4326;POINT(8.6 47.3)');`)
  t.after(() => runSql(db.url, 'DROP TABLE big_ids'))
  const app = await appOf(t)
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { chromium } = await import('playwright-core')
  const browser = await chromium.launch({ executablePath: chromiumPath, args: ['--headless', '--no-sandbox', '--disable-gpu', '--use-angle=swiftshader', '--enable-unsafe-swiftshader', '--no-first-run'] })
  t.after(() => browser.close())
  const page = await browser.newPage()
  const errors = []
  page.on('pageerror', (err) => errors.push(err.message))
  const answer = await page.goto(`http://127.0.0.1:${app.server.address().port}/ogc/collections/big_ids/items?f=html`)
  assert.equal(answer.status(), 200)
  await page.waitForFunction(() => document.getElementById('status').textContent !== 'loading…')
  const rows = await page.$$eval('#table tr', (trs) => trs.map((tr) => [...tr.cells].map((td) => td.textContent)))
  assert.deepEqual(rows, [['id', 'n'], ['1', '-9007199254740995'], ['9007199254740993', '9223372036854775807']])
  assert.equal(await page.textContent('#status'), '2 features of 2')
  assert.deepEqual(errors, [])
})

/** A Chromium page (closed after the test) of `width` × 700 px and the page errors it throws; null, skipped, without Chromium. */
async function browserPage (t, width = 1000) {
  const chromiumPath = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
  if (!needs(t, existsSync(chromiumPath), `Chromium is not installed at ${chromiumPath} (Debian: chromium)`)) return null
  const { chromium } = await import('playwright-core')
  const browser = await chromium.launch({ executablePath: chromiumPath, args: ['--headless', '--no-sandbox', '--disable-gpu', '--use-angle=swiftshader', '--enable-unsafe-swiftshader', '--no-first-run'] })
  t.after(() => browser.close())
  const page = await browser.newPage({ viewport: { width, height: 700 } })
  const errors = []
  page.on('pageerror', (err) => errors.push(err.message))
  return { page, errors }
}

test('a large features page (700 lines of 200 vertices) is drawn and framed: no page error', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  await runSql(db.url, `CREATE TABLE long_lines (id integer PRIMARY KEY, geom geometry(LineString, 4326));
    INSERT INTO long_lines SELECT i, ST_SetSRID(ST_MakeLine(ARRAY(SELECT ST_MakePoint(8 + v / 200.0, 47 + i / 700.0 + sin(v) / 1000) FROM generate_series(1, 200) AS v)), 4326)
      FROM generate_series(1, 700) AS i;`)
  t.after(() => runSql(db.url, 'DROP TABLE long_lines'))
  const browser = await browserPage(t)
  if (browser === null) return
  const { page, errors } = browser
  const app = await appOf(t)
  await app.listen({ port: 0, host: '127.0.0.1' })
  // Math.min(...xs) over its 140,000 positions threw "Maximum call stack size exceeded": the map stayed on the world.
  const answer = await page.goto(`http://127.0.0.1:${app.server.address().port}/ogc/collections/long_lines/items?limit=700&f=html`)
  assert.equal(answer.status(), 200)
  await page.waitForFunction(() => window.featuresMap !== undefined, null, { timeout: 30_000 }).catch(() => {})
  assert.deepEqual(errors, [])
  assert.equal(await page.textContent('#status'), '700 features of 700')
  const [zoom, [[w, s], [e, n]]] = await page.evaluate(() => [window.featuresMap.getZoom(), window.featuresMap.getBounds().toArray()])
  assert.ok(zoom > 5 && w < 8.01 && e > 8.99 && s < 47.01 && n > 47.99 && e - w < 6, `the map is framed on the lines (8..9, 47..48): zoom ${zoom}, ${[w, s, e, n]}`)
})

test('features pages never scroll sideways (375 px phone, 1000 px window): the properties table scrolls in its own box, long values wrap', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const columns = Array.from({ length: 14 }, (_, i) => `c${i} text`).join(', ')
  await runSql(db.url, `CREATE TABLE wide_rows (id integer PRIMARY KEY, ${columns}, geom geometry(Point, 4326));
    INSERT INTO wide_rows SELECT i, ${Array.from({ length: 14 }, (_, c) => c === 0 ? `'https://example.com/' || repeat('x', 300)` : `'value ' || i || ' of column ${c}'`).join(', ')},
      ST_SetSRID(ST_MakePoint(8 + i / 10.0, 47), 4326) FROM generate_series(1, 5) AS i;`)
  t.after(() => runSql(db.url, 'DROP TABLE wide_rows'))
  const app = await appOf(t)
  await app.listen({ port: 0, host: '127.0.0.1' })
  const base = `http://127.0.0.1:${app.server.address().port}/ogc/collections/wide_rows`
  // The table was 5,000 px wide in the page itself: the heading, the links and the map scrolled away with it.
  for (const width of [375, 1000]) {
    const browser = await browserPage(t, width)
    if (browser === null) return
    const { page, errors } = browser
    for (const path of ['/items?f=html', '/items/1?f=html', '?f=html']) {
      assert.equal((await page.goto(base + path)).status(), 200)
      await page.waitForFunction(() => document.getElementById('status')?.textContent !== 'loading…')
      const { scrollWidth, innerWidth, table } = await page.evaluate(() => {
        const box = document.querySelector('table')?.parentElement
        return { scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth, table: box && { box: box.clientWidth, scrolls: box.scrollWidth, cell: Math.max(...[...document.querySelectorAll('td')].map((td) => td.offsetWidth)) } }
      })
      assert.ok(scrollWidth <= innerWidth, `${path} at ${width} px: the page is ${scrollWidth} px wide`)
      if (path.includes('items')) {
        assert.ok(table.box <= innerWidth, `${path} at ${width} px: the table's box fits (${table.box} px)`)
        assert.ok(table.scrolls > table.box, `${path} at ${width} px: and the table scrolls in it (${table.scrolls} px)`)
        assert.ok(table.cell < 500, `${path} at ${width} px: a 320-character value wraps (${table.cell} px)`)
      }
    }
    assert.deepEqual(errors, [])
  }
})

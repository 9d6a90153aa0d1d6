// The source contract (lib/sources/contract.js): every kind listed in lib/sources/index.js, opened on small data made
// here, returns what the catalog and the routes rely on; a kind that breaks it is caught when a set opens.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync, spawnSync } from 'node:child_process'
import { copyFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { KINDS, kindForFile, kindForUrl } from '../lib/sources/index.js'
import { lonLatToTile } from '../lib/tilemath.js'
import { contractProblems } from '../lib/sources/contract.js'
import { VectorTile } from '@mapbox/vector-tile'
import { PbfReader } from 'pbf'
import { FIXTURES, HAVE_FIXTURES, makeApp, needs } from './helpers/app.js'
import { HAVE_SCHEMA, assertValidTileJson } from './helpers/tilejson.js'
import { PNG, pyramid, tempDir, vectorTiles, writeMbtiles, writePmtiles } from './helpers/data.js'
import { POSTGIS_MISSING, runSql, startPostgis } from './helpers/postgres.js'

const HAVE_GDAL = spawnSync('gdal_translate', ['--version']).status === 0

/** A set as the catalog opened it, checked beyond the shape: reads, TileJSON, an idempotent close. */
async function checkSource (source, kind, { z, x, y }) {
  assert.deepEqual(contractProblems(source), [], `${kind}: keeps the contract`)
  assert.equal(source.kind, kind)
  const query = source.parseQuery?.({}, source.formats ? { scale: 1, format: source.formats[0] } : undefined)
  const rendering = source.formats ? { scale: 1, format: source.formats[0] } : undefined
  const tile = await source.getTile(z, x, y, query, rendering)
  assert.ok(Buffer.isBuffer(tile) && tile.length > 0, `${kind}: a tile where there is data`)
  const none = await source.getTile(z, 0, 2 ** z - 1, query, rendering)
  assert.ok(none === null || Buffer.isBuffer(none), `${kind}: null or bytes where there is none`)
  assert.equal(source.tilejson.tiles, undefined, `${kind}: tilejson leaves tiles to the routes`)
}

test('every kind declares what the catalog needs: a name, a title, and open or openGroup', () => {
  for (const kind of KINDS) {
    assert.equal(typeof kind.kind, 'string', 'kind')
    assert.equal(typeof kind.title, 'string', `${kind.kind}: title`)
    assert.ok(typeof kind.open === 'function' || typeof kind.openGroup === 'function', `${kind.kind}: open or openGroup`)
    if (kind.openGroup) assert.equal(typeof kind.configSection, 'string', `${kind.kind}: configSection`)
    for (const ext of kind.extensions ?? []) assert.match(ext, /^\.[a-z0-9]+$/, `${kind.kind}: extension ${ext}`)
  }
  assert.equal(kindForFile('/x/a.MBTiles')?.kind, 'mbtiles')
  assert.equal(kindForFile('/x/a.tiff')?.kind, 'cog')
  assert.equal(kindForFile('/x/a.txt'), undefined)
  assert.equal(kindForUrl('https://h/a.pmtiles?v=1')?.kind, 'pmtiles')
  assert.equal(kindForUrl('postgresql://u@h/db')?.kind, 'postgis')
})

test('file kinds and the demo, opened on generated data, keep the contract', async (t) => {
  const dir = tempDir(t)
  writeMbtiles(join(dir, 'vector.mbtiles'), { tiles: vectorTiles(pyramid(0, 2)), metadata: { format: 'pbf' } })
  writeMbtiles(join(dir, 'raster.mbtiles'), { tiles: [{ z: 0, x: 0, y: 0, data: PNG }], metadata: { format: 'png' }, schema: 'tilemill' })
  writePmtiles(join(dir, 'archive.pmtiles'), { tiles: vectorTiles(pyramid(0, 2)) })
  writeFileSync(join(dir, 'points.geojson'), JSON.stringify({ type: 'FeatureCollection', features: [{ type: 'Feature', geometry: { type: 'Point', coordinates: [-100, 40] }, properties: { n: 1 } }] }))
  const paths = [dir]
  if (HAVE_GDAL) {
    const grid = join(dir, 'grid.asc')
    const rows = Array.from({ length: 300 }, (_, r) => Array.from({ length: 300 }, (_, c) => (r * 3 + c) % 250).join(' '))
    writeFileSync(grid, ['ncols 300', 'nrows 300', 'xllcorner 600000', 'yllcorner 5300000', 'cellsize 100', ...rows].join('\n') + '\n')
    execFileSync('gdal_translate', ['-q', '-of', 'COG', '-a_srs', 'EPSG:32633', '-ot', 'Byte', '-co', 'BLOCKSIZE=128', grid, join(dir, 'raster.tif')])
  } else {
    needs(t, false, 'gdal-bin is not installed: the COG kind is not checked')
  }
  const app = await makeApp(t, { paths })
  const demo = await makeApp(t, { demo: true })
  await checkSource(app.catalog.get('vector').source, 'mbtiles', { z: 1, x: 0, y: 0 })
  await checkSource(app.catalog.get('raster').source, 'mbtiles', { z: 0, x: 0, y: 0 })
  await checkSource(app.catalog.get('archive').source, 'pmtiles', { z: 2, x: 1, y: 1 })
  await checkSource(app.catalog.get('points').source, 'geojson', { z: 1, x: 0, y: 0 })
  await checkSource(demo.catalog.get('countries').source, 'demo', { z: 1, x: 1, y: 0 })
  if (HAVE_GDAL) {
    const cog = app.catalog.get('raster.tif').source
    const [lon, lat] = cog.tilejson.center // the raster's middle
    const [x, y] = lonLatToTile(lon, lat, cog.tilejson.maxzoom)
    await checkSource(cog, 'cog', { z: cog.tilejson.maxzoom, x, y })
  }
  for (const entry of app.catalog.available()) {
    await entry.source.close()
    await entry.source.close() // idempotent
  }
})

test('a database\'s sets (a group kind) keep the contract, composites too', async (t) => {
  const db = await startPostgis()
  t.after(() => db?.stop())
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  await runSql(db.url, `CREATE TABLE spots (id integer PRIMARY KEY, name text, geom geometry(Point, 4326));
    CREATE TABLE lines (id integer PRIMARY KEY, geom geometry(LineString, 4326));
    INSERT INTO spots VALUES (1, 'a', ST_SetSRID(ST_MakePoint(8.54, 47.37), 4326));
    INSERT INTO lines VALUES (1, ST_SetSRID(ST_MakeLine(ST_MakePoint(8.5, 47.3), ST_MakePoint(8.6, 47.4)), 4326));`)
  const app = await makeApp(t, { paths: [db.url] })
  await checkSource(app.catalog.get('spots').source, 'postgis', { z: 1, x: 1, y: 0 })
  await checkSource(app.catalog.get('spots,lines').source, 'composite', { z: 1, x: 1, y: 0 })
})

test('a kind whose source breaks the contract is unavailable with the reason; the others keep serving', async (t) => {
  const dir = tempDir(t)
  writeMbtiles(join(dir, 'good.mbtiles'), { tiles: vectorTiles(pyramid(0, 1)), metadata: { format: 'pbf' } })
  const app = await makeApp(t, { paths: [dir] })
  // A new kind with a bug: its sources have no getTile.
  const mbtiles = KINDS.find((k) => k.kind === 'mbtiles')
  const buggy = { kind: 'buggy', title: 'Buggy', extensions: ['.mbtiles'], open: async (spec, context) => ({ ...await mbtiles.open(spec, context), kind: 'buggy', getTile: undefined }) }
  writeMbtiles(join(dir, 'bad.mbtiles'), { tiles: vectorTiles(pyramid(0, 1)), metadata: { format: 'pbf' } })
  await app.catalog.openSpec({ path: join(dir, 'bad.mbtiles'), kind: buggy })
  const health = (await app.inject({ url: '/health' })).json()
  assert.deepEqual(health.unavailable.map((u) => u.id), ['bad'])
  assert.match(health.unavailable[0].reason, /contract: getTile is not a function/)
  assert.equal((await app.inject({ url: '/bad/0/0/0' })).statusCode, 503)
  assert.equal((await app.inject({ url: '/good/0/0/0' })).statusCode, 200)
})

test('GeoJSON files are vector tile sets: one layer named after the file, fields and bounds from the features', async (t) => {
  const dir = tempDir(t)
  const places = join(FIXTURES, 'postgis', 'geojson', 'ne_110m_populated_places', 'in.json')
  if (HAVE_FIXTURES) copyFileSync(places, join(dir, 'places.geojson')) // Natural Earth populated places (points)
  // With a byte order mark, as Windows tools write it (RFC 8259 lets a parser ignore it).
  writeFileSync(join(dir, 'line.geojson'), '\uFEFF' + JSON.stringify({ type: 'Feature', geometry: { type: 'LineString', coordinates: [[8.5, 47.3], [8.6, 47.4]] }, properties: { name: 'a', lanes: 2, open: true } }))
  writeFileSync(join(dir, 'broken.geojson'), '{"type": "FeatureCollection", "features": [')
  writeFileSync(join(dir, 'other.geojson'), '{"hello": "world"}')
  const app = await makeApp(t, { paths: [dir] })
  const line = (await app.inject({ url: '/line.json' })).json()
  if (HAVE_SCHEMA) assertValidTileJson(line, { label: 'line' })
  assert.deepEqual(line.vector_layers, [{ id: 'line', fields: { name: 'String', lanes: 'Number', open: 'Boolean' }, minzoom: 0, maxzoom: 14 }])
  assert.deepEqual(line.bounds, [8.5, 47.3, 8.6, 47.4])
  const [x, y] = lonLatToTile(8.55, 47.35, 12)
  const tile = await app.inject({ url: `/line/12/${x}/${y}.pbf` })
  assert.equal(tile.statusCode, 200)
  assert.equal(tile.headers['content-type'], 'application/x-protobuf')
  const feature = new VectorTile(new PbfReader(tile.rawPayload)).layers.line.feature(0)
  assert.deepEqual({ ...feature.properties }, { name: 'a', lanes: 2, open: true })
  assert.equal((await app.inject({ url: '/line/12/0/0' })).statusCode, 204, 'no features there')
  const down = Object.fromEntries((await app.inject({ url: '/health' })).json().unavailable.map((u) => [u.id, u.reason]))
  assert.match(down.broken, /^not valid JSON/)
  assert.match(down.other, /^not GeoJSON/)
  if (HAVE_FIXTURES) {
    const tj = (await app.inject({ url: '/places.json' })).json()
    assert.equal(tj.vector_layers[0].id, 'places')
    assert.equal(tj.vector_layers[0].fields.NAME, 'String')
    const [px, py] = lonLatToTile(2.35, 48.86, 5) // Paris
    const layer = new VectorTile(new PbfReader((await app.inject({ url: `/places/5/${px}/${py}` })).rawPayload)).layers.places
    const names = Array.from({ length: layer.length }, (_, i) => layer.feature(i).properties.NAME)
    assert.ok(names.includes('Paris'), `Paris in ${names}`)
  }
})

test('the demo draws countries that cross the antimeridian (Russia, Fiji) without a band across the world', async (t) => {
  const app = await makeApp(t, { paths: [], demo: true })
  // Tiles 1/1/0 and 1/1/1 run from 0° to 180° east: a ring drawn across the world from its jump at 180° would reach
  // their western edge; the countries themselves start well east of it.
  for (const [y, name] of [[0, 'Russia'], [1, 'Fiji']]) {
    const res = await app.inject({ url: `/countries/1/1/${y}`, headers: { 'accept-encoding': 'identity' } })
    const layer = new VectorTile(new PbfReader(res.rawPayload)).layers.countries
    const features = Array.from({ length: layer.length }, (_, i) => layer.feature(i)).filter((f) => f.properties.name === name)
    assert.ok(features.length > 0, `${name} is in tile 1/1/${y}`)
    const xs = features.flatMap((f) => f.loadGeometry().flat().map((p) => p.x))
    assert.ok(Math.min(...xs) > 0.05 * layer.extent, `${name} starts east of 0°: min x ${Math.min(...xs)} of ${layer.extent}`)
  }
})

// TileJSON is checked against the official 3.0.0 schema for every set, whatever its file's metadata claims.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { FIXTURES, HAVE_FIXTURES, makeApp, needs } from './helpers/app.js'
import { HAVE_SCHEMA, assertValidTileJson } from './helpers/tilejson.js'
import { gzipSync } from 'node:zlib'
import { makeMvt, pyramid, tempDir, vectorTiles, writeMbtiles, writePmtiles } from './helpers/data.js'
import { transcode } from '../lib/variants/transcode.js'
import { loadMlt } from '../lib/variants/mlt.js'

const isVector = (tj) => tj.format === 'pbf' || tj.format === 'mlt'

async function checkEverySet (app) {
  const ids = (await app.inject({ url: '/list' })).json()
  for (const id of ids) {
    const res = await app.inject({ url: `/${encodeURIComponent(id)}.json` })
    assert.equal(res.statusCode, 200, id)
    const tj = res.json()
    assertValidTileJson(tj, { raster: !isVector(tj), label: id })
  }
  return ids
}

test('every fixture set (MBTiles, PMTiles, COG) answers TileJSON valid against the official schema', async (t) => {
  if (!needs(t, HAVE_FIXTURES && HAVE_SCHEMA, '../shared/fixtures and ../shared/schemas are not present')) return
  const app = await makeApp(t, { paths: [join(FIXTURES, 'mbtiles'), join(FIXTURES, 'pmtiles'), join(FIXTURES, 'cog')] })
  const ids = await checkEverySet(app)
  assert.ok(ids.length >= 45, `all fixture sets served (${ids.length})`)
})

test('metadata is not taken on trust: zooms from the tiles, center inside, semver version, layer zooms clamped', async (t) => {
  if (!needs(t, HAVE_SCHEMA, '../shared/schemas is not present')) return
  const dir = tempDir(t)
  // Says z0-14; holds z13 only. Center outside its bounds, version "3.3", a layer claiming z0-20.
  writeMbtiles(join(dir, 'liar.mbtiles'), {
    tiles: vectorTiles(pyramid(13, 13, 2)),
    metadata: {
      format: 'pbf', minzoom: '0', maxzoom: '14', bounds: '-10,-10,10,10', center: '50,60,2', version: '3.3',
      json: { vector_layers: [{ id: 'points', fields: { z: 'Number', n: 7 }, minzoom: 0, maxzoom: 20 }, { fields: {} }] },
    },
  })
  // A PMTiles archive whose JSON says version 2 and has no layer fields, and a date as version.
  writePmtiles(join(dir, 'old.pmtiles'), { tiles: vectorTiles(pyramid(0, 2)), metadata: { version: '2', vector_layers: [{ id: 'points' }] } })
  // No vector_layers at all: read off a tile.
  writeMbtiles(join(dir, 'bare.mbtiles'), { tiles: vectorTiles(pyramid(0, 1)), metadata: { format: 'pbf' } })
  writePmtiles(join(dir, 'bare-pm.pmtiles'), { tiles: vectorTiles(pyramid(0, 1)), metadata: {} })
  writePmtiles(join(dir, 'bare-leaves.pmtiles'), { tiles: vectorTiles(pyramid(0, 2)), metadata: {}, leafSize: 4 }) // its root: leaves only
  writeMbtiles(join(dir, 'dated.mbtiles'), { tiles: vectorTiles(pyramid(0, 1)), metadata: { format: 'pbf', version: '2024-05-01', json: { vector_layers: [] } } })
  // No format, and a zero-length blob in the first row: the format and layers come from the first tile with bytes.
  writeMbtiles(join(dir, 'emptyfirst.mbtiles'), { tiles: [{ z: 0, x: 0, y: 0, data: Buffer.alloc(0) }, ...vectorTiles([[1, 0, 0]])], metadata: {} })
  // Fiji: bounds across the antimeridian, no center.
  writeMbtiles(join(dir, 'fiji.mbtiles'), { tiles: vectorTiles(pyramid(0, 6)), metadata: { format: 'pbf', bounds: '176,-21,-178,-12' } })
  // A PMTiles archive whose header's bounds cross the antimeridian (min_lon above max_lon).
  writePmtiles(join(dir, 'fiji-pm.pmtiles'), { tiles: vectorTiles(pyramid(0, 2)), metadata: {}, bounds: [176, -21, -178, -12] })
  // Bounds and center as JSON arrays in text, as some writers put them.
  writeMbtiles(join(dir, 'jsontext.mbtiles'), { tiles: vectorTiles(pyramid(0, 2)), metadata: { format: 'pbf', bounds: '[-10, -10, 10, 10]', center: '[1,2,2]' } })
  const app = await makeApp(t, { paths: [dir] })
  await checkEverySet(app)

  const emptyFirst = (await app.inject({ url: '/emptyfirst.json' })).json()
  assert.equal(emptyFirst.format, 'pbf', 'sniffed past the empty tile')
  assert.deepEqual(emptyFirst.vector_layers.map((l) => l.id), ['points'])
  assert.equal((await app.inject({ url: '/emptyfirst/0/0/0' })).statusCode, 204, 'an empty vector tile')
  const jsonText = (await app.inject({ url: '/jsontext.json' })).json()
  assert.deepEqual([jsonText.bounds, jsonText.center], [[-10, -10, 10, 10], [1, 2, 2]])
  const fiji = (await app.inject({ url: '/fiji.json' })).json()
  assert.deepEqual(fiji.center, [179, -16.5, 5], 'the middle of bounds across the antimeridian, at the zoom they fill')
  assert.deepEqual(fiji.bounds, [-180, -21, 180, -12], 'bounds never wrap (TileJSON 3.0.0): the world\'s width')
  assert.deepEqual((await app.inject({ url: '/fiji-pm.json' })).json().bounds, [-180, -21, 180, -12], 'a PMTiles header\'s too (its latitudes kept)')

  const liar = (await app.inject({ url: '/liar.json' })).json()
  assert.deepEqual([liar.minzoom, liar.maxzoom], [13, 13], 'the zooms the file holds')
  assert.deepEqual(liar.center, [10, 10, 13], 'center moved into the bounds and the zoom range')
  assert.equal(liar.version, '3.3.0')
  assert.deepEqual(liar.vector_layers, [{ id: 'points', fields: { z: 'Number', n: '7' }, minzoom: 13, maxzoom: 13 }], 'layer without id dropped; zooms clamped')
  assert.equal((await app.inject({ url: '/liar/12/0/0' })).statusCode, 404, 'outside the range it holds')
  assert.equal((await app.inject({ url: '/liar/14/0/0' })).statusCode, 404)
  assert.equal((await app.inject({ url: '/liar/13/0/0' })).statusCode, 200)

  assert.equal((await app.inject({ url: '/old.json' })).json().version, '2.0.0')
  for (const id of ['bare', 'bare-pm', 'bare-leaves']) {
    assert.deepEqual((await app.inject({ url: `/${id}.json` })).json().vector_layers, [{ id: 'points', fields: { z: 'Number', x: 'Number', y: 'Number' } }], `${id}: layers from a tile`)
  }
  assert.equal((await app.inject({ url: '/dated.json' })).json().version, undefined, 'a version that is not a version is left out')
  assert.equal((await app.inject({ url: '/dated/meta' })).json().version, '2024-05-01', '/meta keeps the raw value')
})

test('an MLT set whose metadata lists no vector_layers gets them read off a tile, as an MVT set does', async (t) => {
  const dir = tempDir(t)
  const mlt = await loadMlt()
  // Layer `points` as the server makes MLT of MVT; `roads` straight from the encoder, with a 64-bit integer column.
  const roads = mlt.encodeTile([{
    name: 'roads',
    extent: 4096,
    features: [{ geometry: { type: 'LineString', coordinates: [[0, 0], [10, 10]] }, properties: { name: 'Main', osm_id: 2n ** 40n, oneway: true } }],
  }])
  const tile = (z, x, y) => Buffer.concat([transcode('mlt', 'pbf', makeMvt(z, x, y), z, x, y, mlt), roads])
  const tiles = (compress) => pyramid(0, 1).map(([z, x, y]) => ({ z, x, y, data: compress(tile(z, x, y)) }))
  writePmtiles(join(dir, 'mlt-pm.pmtiles'), { tiles: tiles(gzipSync), tileType: 'mlt', metadata: {} })
  writePmtiles(join(dir, 'mlt-raw.pmtiles'), { tiles: tiles((b) => b), tileType: 'mlt', tileCompression: 'none', metadata: {} })
  writeMbtiles(join(dir, 'mlt-mb.mbtiles'), { tiles: tiles(gzipSync), metadata: { format: 'mlt' } })
  const app = await makeApp(t, { paths: [dir] })
  for (const id of ['mlt-pm', 'mlt-raw', 'mlt-mb']) {
    const tj = (await app.inject({ url: `/${id}.json` })).json()
    assert.equal(tj.encoding, 'mlt', id)
    assert.deepEqual(tj.vector_layers, [
      { id: 'points', fields: { z: 'Number', x: 'Number', y: 'Number' } },
      { id: 'roads', fields: { name: 'String', osm_id: 'Number', oneway: 'Boolean' } },
    ], `${id}: layers from a tile`)
    if (HAVE_SCHEMA) assertValidTileJson(tj, { label: id })
  }
})

test('bounds and centers a file gets wrong are repaired: south above north swapped, latitudes and longitudes brought onto the globe, a center off it derived', async (t) => {
  if (!needs(t, HAVE_SCHEMA, '../shared/schemas is not present')) return
  const dir = tempDir(t)
  const tiles = vectorTiles(pyramid(0, 2))
  writeMbtiles(join(dir, 'latswap.mbtiles'), { tiles, metadata: { format: 'pbf', bounds: '-10,50,10,40' } })
  writeMbtiles(join(dir, 'outofrange.mbtiles'), { tiles, metadata: { format: 'pbf', bounds: '-200,-100,200,100', center: '500,500,0' } })
  writeMbtiles(join(dir, 'pastdateline.mbtiles'), { tiles, metadata: { format: 'pbf', bounds: '170,-20,190,-10', center: '185,-15,1' } })
  writePmtiles(join(dir, 'badheader.pmtiles'), { tiles, metadata: {}, bounds: [-200, -95, 200, 95] })
  const app = await makeApp(t, { paths: [dir] })
  await checkEverySet(app)
  const tilejson = async (id) => (await app.inject({ url: `/${id}.json` })).json()
  const lat = 85.05112877980659

  const latswap = await tilejson('latswap')
  assert.deepEqual(latswap.bounds, [-10, 40, 10, 50], 'south and north swapped: a map asks for its tiles')
  assert.deepEqual(latswap.center, [0, 45, 2])
  const outOfRange = await tilejson('outofrange')
  assert.deepEqual(outOfRange.bounds, [-180, -lat, 180, lat], 'the world, as export takes it')
  assert.deepEqual(outOfRange.center, [0, 0, 0], 'a center off the globe: the middle of the bounds')
  const pastDateline = await tilejson('pastdateline')
  assert.deepEqual(pastDateline.bounds, [-180, -20, 180, -10], '170…190 is across the antimeridian: the world\'s width')
  assert.deepEqual(pastDateline.center, [-175, -15, 1], 'on the data: 185 is -175')
  const badHeader = await tilejson('badheader')
  assert.deepEqual(badHeader.bounds, [-180, -lat, 180, lat], 'a PMTiles header\'s too')
  assert.ok(badHeader.center[1] >= -lat && badHeader.center[1] <= lat)
  assert.equal((await app.inject({ url: '/outofrange/meta' })).json().bounds, '-200,-100,200,100', '/meta keeps the raw value')
})

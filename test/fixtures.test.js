// Conformance on the real tilesets in ../shared/fixtures (present in CI; skipped with the reason elsewhere).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import { brotliDecompressSync, gunzipSync, gzipSync } from 'node:zlib'
import Database from 'better-sqlite3'
import { FIXTURES, HAVE_FIXTURES, makeApp, needs } from './helpers/app.js'
import { storedTiles } from './helpers/data.js'

const PBF = 'application/x-protobuf'
// What each real tileset's tiles are, as documented in fixtures/SOURCES.md: [content type, stored encoding].
const EXPECTED = {
  'mbtiles/koh-samui_thailand.mbtiles': [PBF, 'gzip'],
  'mbtiles/trails.mbtiles': [PBF, 'gzip'],
  'mbtiles/world_cities.mbtiles': [PBF, 'gzip'],
  'mbtiles/zoomed_world_cities.mbtiles': [PBF, 'gzip'],
  'mbtiles/uncompressed_mvt.mbtiles': [PBF, 'identity'],
  'mbtiles/json.mbtiles': ['application/json', 'identity'],
  'mbtiles/geography-class-png.mbtiles': ['image/png', 'identity'],
  'mbtiles/geography-class-png-no-bounds.mbtiles': ['image/png', 'identity'],
  'mbtiles/geography-class-jpg.mbtiles': ['image/jpeg', 'identity'],
  'mbtiles/webp.mbtiles': ['image/webp', 'identity'],
  'mbtiles/invalid-tile-format.mbtiles': ['application/octet-stream', 'identity'],
  'mbtiles/plain_1.mbtiles': ['image/png', 'identity'],
  'mbtiles/plain_3.mbtiles': ['image/png', 'identity'],
  'mbtiles/corrupt_null_tile.mbtiles': ['image/png', 'identity'],
  'mbtiles/some-empty-tiles.mbtiles': ['image/png', 'identity'],
  'mbtiles/jakartabuildings.mbtiles': [PBF, 'gzip'],
  'mbtiles/protomaps538lakemerge.mbtiles': [PBF, 'gzip'],
  'pmtiles/protomaps(vector)ODbL_firenze.pmtiles': [PBF, 'gzip'],
  'pmtiles/stamen_toner(raster)CC-BY+ODbL_z3.pmtiles': ['image/png', 'identity'],
  'pmtiles/test_fixture_1.pmtiles': [PBF, 'gzip'],
  'pmtiles/test_fixture_2.pmtiles': [PBF, 'gzip'],
  'pmtiles/test_fixture_mlt.pmtiles': ['application/vnd.maplibre-vector-tile', 'gzip'],
  'pmtiles/trails.pmtiles': [PBF, 'gzip'],
  'pmtiles/webp2.pmtiles': ['image/webp', 'identity'],
  'pmtiles/leaf.pmtiles': ['application/octet-stream', 'identity'],
  'pmtiles/single_tile_brotli.pmtiles': ['image/png', 'br'],
  'pmtiles/unclustered.pmtiles': ['image/png', 'identity'],
}
const NEGATIVE = ['mbtiles/invalid.mbtiles', 'mbtiles/corrupt.mbtiles', 'pmtiles/invalid.pmtiles', 'pmtiles/invalid_v4.pmtiles',
  'pmtiles/empty.pmtiles', 'pmtiles/protomaps_vector_planet_odbl_z10_without_data.pmtiles']

function decodeStored (bytes, encoding) {
  return encoding === 'gzip' ? gunzipSync(bytes) : encoding === 'br' ? brotliDecompressSync(bytes) : bytes
}

/** Up to `n` tiles spread over the list, so large sets stay quick but every zoom is touched. */
const spread = (list, n) => (list.length <= n ? list : list.filter((_, i) => i % Math.ceil(list.length / n) === 0))

test('every real tileset answers its tiles with the right Content-Type and encoding', async (t) => {
  if (!needs(t, HAVE_FIXTURES, '../shared/fixtures is not present')) return
  const app = await makeApp(t, { paths: [join(FIXTURES, 'mbtiles'), join(FIXTURES, 'pmtiles')] })
  const present = readdirSync(join(FIXTURES, 'mbtiles')).map((f) => `mbtiles/${f}`).concat(readdirSync(join(FIXTURES, 'pmtiles')).map((f) => `pmtiles/${f}`))
  for (const rel of Object.keys(EXPECTED).filter((r) => present.includes(r))) {
    const [type, storedEncoding] = EXPECTED[rel]
    const name = rel.split('/')[1]
    const entry = app.catalog.get(name)
    assert.ok(entry?.source, `${rel} is served`)
    const tiles = await storedTiles(join(FIXTURES, rel))
    let checked = 0
    for (const [z, x, y, stored] of spread(tiles, 60)) {
      const url = `/${encodeURIComponent(name)}/${z}/${x}/${y}`
      if (stored === null || stored.length === 0) {
        assert.ok([204, 404].includes((await app.inject({ url })).statusCode), `${url}: a NULL or empty tile is absent`)
        continue
      }
      const plain = await app.inject({ url })
      assert.equal(plain.statusCode, 200, url)
      assert.equal(plain.headers['content-type'], type, url)
      assert.equal(plain.headers['content-encoding'], undefined, `${url} decoded for a client without Accept-Encoding`)
      assert.deepEqual(plain.rawPayload, decodeStored(stored, storedEncoding), `${url} bytes`)
      const accepting = await app.inject({ url, headers: { 'accept-encoding': storedEncoding === 'br' ? 'br' : 'gzip' } })
      if (storedEncoding !== 'identity') {
        assert.equal(accepting.headers['content-encoding'], storedEncoding, url)
        assert.deepEqual(accepting.rawPayload, stored, `${url} passed through untouched`)
      } else if (type.startsWith('image/')) {
        assert.equal(accepting.headers['content-encoding'], undefined, `${url}: images are not compressed again`)
      } else if (gzipSync(stored).length < stored.length) {
        assert.equal(accepting.headers['content-encoding'], 'gzip', url)
        assert.deepEqual(gunzipSync(accepting.rawPayload), stored, url)
      } else {
        assert.equal(accepting.headers['content-encoding'], undefined, `${url}: not gzipped when gzip would make it larger`)
        assert.deepEqual(accepting.rawPayload, stored, url)
      }
      checked++
    }
    if (tiles.some(([, , , d]) => d && d.length)) assert.ok(checked > 0, `${rel}: tiles were checked`)
  }
})

test('trails.mbtiles and trails.pmtiles answer identical bytes for all their tiles', async (t) => {
  if (!needs(t, HAVE_FIXTURES, '../shared/fixtures is not present')) return
  const app = await makeApp(t, { paths: [join(FIXTURES, 'mbtiles', 'trails.mbtiles'), join(FIXTURES, 'pmtiles', 'trails.pmtiles')] })
  const tiles = await storedTiles(join(FIXTURES, 'mbtiles', 'trails.mbtiles'))
  assert.equal(tiles.length, 1201)
  for (const [z, x, y] of tiles) {
    const a = await app.inject({ url: `/trails.mbtiles/${z}/${x}/${y}.pbf` })
    const b = await app.inject({ url: `/trails.pmtiles/${z}/${x}/${y}.pbf` })
    assert.equal(a.statusCode, 200)
    assert.equal(b.statusCode, 200)
    assert.ok(a.rawPayload.equals(b.rawPayload), `${z}/${x}/${y} differs`)
  }
})

test('every negative fixture is answered without a crash, and the rest keep serving', async (t) => {
  if (!needs(t, HAVE_FIXTURES, '../shared/fixtures is not present')) return
  const app = await makeApp(t, { paths: NEGATIVE.map((rel) => join(FIXTURES, rel)).concat(join(FIXTURES, 'mbtiles', 'world_cities.mbtiles')) })
  assert.deepEqual((await app.inject({ url: '/list' })).json(), ['world_cities'])
  const down = app.catalog.unavailable()
  assert.equal(down.length, NEGATIVE.length)
  for (const { id, reason } of down) {
    assert.ok(reason.length > 0)
    const res = await app.inject({ url: `/${encodeURIComponent(id)}/0/0/0` })
    assert.equal(res.statusCode, 503, id)
    assert.ok(!res.payload.includes(FIXTURES), 'no path in the answer')
    assert.equal((await app.inject({ url: `/${encodeURIComponent(id)}/meta` })).statusCode, 503)
  }
  // The NULL tile row of corrupt_null_tile, found by its own query.
  const nullApp = await makeApp(t, { paths: [join(FIXTURES, 'mbtiles', 'corrupt_null_tile.mbtiles')] })
  const db = new Database(join(FIXTURES, 'mbtiles', 'corrupt_null_tile.mbtiles'), { readonly: true })
  const row = db.prepare('SELECT zoom_level z, tile_column x, tile_row y FROM tiles WHERE tile_data IS NULL').get()
  db.close()
  const res = await nullApp.inject({ url: `/corrupt_null_tile/${row.z}/${row.x}/${2 ** row.z - 1 - row.y}.png` })
  assert.equal(res.statusCode, 404)
  assert.equal((await app.inject({ url: '/world_cities/0/0/0' })).statusCode, 200)
})

test('TileJSON for every real tileset: bounds, center and zooms from the file, defaults when missing', async (t) => {
  if (!needs(t, HAVE_FIXTURES, '../shared/fixtures is not present')) return
  const app = await makeApp(t, { paths: [join(FIXTURES, 'mbtiles'), join(FIXTURES, 'pmtiles')] })
  for (const id of (await app.inject({ url: '/list' })).json()) {
    const tj = (await app.inject({ url: `/${encodeURIComponent(id)}.json` })).json()
    assert.equal(tj.tilejson, '3.0.0', id)
    assert.equal(tj.bounds.length, 4, id)
    assert.ok(tj.center.length === 3 && tj.center[2] >= tj.minzoom && tj.center[2] <= tj.maxzoom, id)
    assert.ok(tj.tiles[0].includes(`/${encodeURIComponent(id)}/{z}/{x}/{y}`), id)
  }
  const koh = (await app.inject({ url: '/koh-samui_thailand.json' })).json()
  assert.deepEqual(koh.bounds, [99.904, 9.403, 100.103, 9.604])
  assert.deepEqual(koh.center, [100.0035, 9.5035, 10])
  assert.equal(koh.vector_layers.length, 14)
  const noBounds = (await app.inject({ url: '/geography-class-png-no-bounds.json' })).json()
  assert.deepEqual(noBounds.bounds, [-180, -85.05112877980659, 180, 85.05112877980659])
  const plain3 = (await app.inject({ url: '/plain_3.json' })).json()
  assert.deepEqual([plain3.minzoom, plain3.maxzoom], [4, 8], 'zoom range read from the tiles when metadata lacks it')
  // Its metadata says z0-6 but it holds only z6: the tiles decide, so clients overzoom z6 instead of asking z0-5.
  const zoomedTj = (await app.inject({ url: '/zoomed_world_cities.json' })).json()
  assert.deepEqual([zoomedTj.minzoom, zoomedTj.maxzoom], [6, 6], 'zoom range narrowed to the tiles present')
  const zoomed = (await app.inject({ url: '/zoomed_world_cities/0/0/0' }))
  assert.equal(zoomed.statusCode, 404, 'below the zooms it holds')
  assert.equal((await app.inject({ url: '/zoomed_world_cities/6/0/0' })).statusCode, 204, 'inside the range but absent: vector 204')
})

// A style's raster TileJSON (/styles/:id.json), as Leaflet and QGIS read it: the credits of what the style draws, and
// where to look first; valid against the official TileJSON 3.0.0 schema.
import assert from 'node:assert/strict'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import test from 'node:test'
import { makeApp, needs } from './helpers/app.js'
import { pyramid, tempDir, vectorTiles, writeMbtiles } from './helpers/data.js'
import { HAVE_SCHEMA, assertValidTileJson } from './helpers/tilejson.js'

const OSM = '© OpenStreetMap contributors'
const layer = (source) => ({ id: source, type: 'line', source, 'source-layer': 'points' })

test('a style\'s raster TileJSON credits the sets and sources it draws, once each, and has a center', async (t) => {
  if (!needs(t, HAVE_SCHEMA, '../shared/schemas is not present')) return
  const dir = tempDir(t)
  const tiles = join(dir, 'tiles')
  const styles = join(dir, 'styles')
  mkdirSync(tiles)
  mkdirSync(styles)
  const set = (id, metadata, maxzoom = 1) => writeMbtiles(join(tiles, `${id}.mbtiles`), { tiles: vectorTiles(pyramid(0, maxzoom)), metadata: { format: 'pbf', ...metadata } })
  set('samui', { attribution: OSM, bounds: '99.9,9.4,100.1,9.6', center: '100,9.5,12' }, 14)
  set('roads', { attribution: OSM }) // the same credit again
  set('labels', { attribution: '© Label Co' })
  set('unused', { attribution: '© Never Drawn' })
  set('bare', {})
  writeFileSync(join(styles, 'credited.json'), JSON.stringify({
    version: 8,
    sources: {
      samui: { type: 'vector', url: 'mbtiles://samui' },
      roads: { type: 'vector', url: 'mbtiles://roads' },
      relief: { type: 'raster', tiles: ['https://relief.example.org/{z}/{x}/{y}.png'], attribution: '© Relief Inc' },
      labels: { type: 'vector', url: 'mbtiles://labels', attribution: '© Labels, as the style credits them' },
      unused: { type: 'vector', url: 'mbtiles://unused' }, // no layer draws it
    },
    layers: [layer('samui'), layer('roads'), { id: 'relief', type: 'raster', source: 'relief' }, layer('labels')],
  }))
  writeFileSync(join(styles, 'centred.json'), JSON.stringify({ version: 8, center: [8.54, 47.37], zoom: 12, sources: { samui: { type: 'vector', url: 'mbtiles://samui' } }, layers: [layer('samui')] }))
  writeFileSync(join(styles, 'plain.json'), JSON.stringify({ version: 8, sources: { bare: { type: 'vector', url: 'mbtiles://bare' } }, layers: [{ id: 'bg', type: 'background' }, layer('bare')] }))
  const app = await makeApp(t, { paths: [tiles], styles })
  const tileJson = async (id) => {
    const res = await app.inject({ url: `/styles/${id}.json` })
    assert.equal(res.statusCode, 200, res.body)
    const tj = res.json()
    assertValidTileJson(tj, { raster: true, label: id })
    return tj
  }

  const credited = await tileJson('credited')
  assert.equal(credited.attribution, `${OSM} | © Relief Inc | © Labels, as the style credits them`)
  assert.deepEqual(credited.center, [100, 9.5, 12], 'the center of the first set it draws')

  // The style's own view: MapLibre's zoom 12 of 512 px tiles is zoom 13 of the 256 px tiles this TileJSON lists.
  const centred = await tileJson('centred')
  assert.deepEqual(centred.center, [8.54, 47.37, 13])
  assert.equal(centred.attribution, OSM)
  // Of its 512 px tiles (tileserver-gl's /styles/512/:id.json): the same view, one zoom less, as a 512 px tile of z12
  // shows what 256 px tiles of z13 do; the style's own zoom, a set's (a zoom of 256 px tiles, as the viewer takes it) less one.
  assert.deepEqual((await tileJson('256/centred')).center, [8.54, 47.37, 13])
  const centred512 = await tileJson('512/centred')
  assert.deepEqual(centred512.center, [8.54, 47.37, 12])
  assert.deepEqual([centred512.minzoom, centred512.maxzoom], [centred.minzoom, centred.maxzoom], 'both sizes are served at every zoom')
  assert.deepEqual((await tileJson('512/credited')).center, [100, 9.5, 11])

  const plain = await tileJson('plain')
  assert.equal(plain.attribution, undefined, 'nothing to credit')
  assert.ok(Array.isArray(plain.center), 'a center all the same: its set\'s')
})

// Rendered tiles and static images as tileserver-gl's users ask for them (its URL forms and query options), drawn by
// the engine that runs here (mapli; `npm run setup-render`): the answers a user compares with tileserver-gl's.
import assert from 'node:assert/strict'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import test from 'node:test'
import sharp from 'sharp'
import { chooseBackend } from '../lib/style/render/index.js'
import { makeApp, needs } from './helpers/app.js'
import { tempDir } from './helpers/data.js'

const choice = chooseBackend({})

/**
 * A style of the whole world in three colours, from GeoJSON in the style itself (no set): red, its western quarter
 * (180° W to 90° W) blue, north of 60° N green.
 */
const WORLD = {
  version: 8,
  sources: {
    parts: {
      type: 'geojson',
      data: {
        type: 'FeatureCollection',
        features: [
          { type: 'Feature', properties: { colour: '#0000ff' }, geometry: { type: 'Polygon', coordinates: [[[-180, -85.06], [-90, -85.06], [-90, 85.06], [-180, 85.06], [-180, -85.06]]] } },
          { type: 'Feature', properties: { colour: '#00ff00' }, geometry: { type: 'Polygon', coordinates: [[[-90, 60], [180, 60], [180, 85.06], [-90, 85.06], [-90, 60]]] } },
        ],
      },
    },
  },
  layers: [
    { id: 'bg', type: 'background', paint: { 'background-color': '#ff0000' } },
    { id: 'parts', type: 'fill', source: 'parts', paint: { 'fill-color': ['get', 'colour'], 'fill-antialias': false } },
  ],
}

async function serve (t, { icons, ...config } = {}) {
  const dir = tempDir(t)
  const styles = join(dir, 'styles')
  mkdirSync(styles)
  writeFileSync(join(styles, 'world.json'), JSON.stringify(WORLD))
  writeFileSync(join(styles, 'zurich.json'), JSON.stringify({ ...WORLD, center: [8.54, 47.37], zoom: 12 }))
  const options = { paths: [], styles, ...config }
  if (icons !== undefined) {
    options.icons = join(dir, 'icons')
    mkdirSync(options.icons)
    for (const [name, bytes] of Object.entries(icons)) writeFileSync(join(options.icons, name), bytes)
  }
  const app = await makeApp(t, options)
  assert.ok(app.renderer.available, app.renderer.reason)
  return app
}

async function pixels (buf) {
  const { data, info } = await sharp(buf).ensureAlpha().raw().toBuffer({ resolveWithObject: true })
  const at = (x, y) => Array.from(data.subarray((y * info.width + x) * 4, (y * info.width + x) * 4 + 4))
  return { info, at }
}

test('static images: a latitude up to 85.06 (tileserver-gl\'s limit) is drawn at the edge of the map, beyond it 400', async (t) => {
  if (!needs(t, choice.backend !== null, choice.why ?? '')) return
  const app = await serve(t)
  const get = (url) => app.inject({ url: `/styles/world/static/${url}` })
  // Web Mercator's world ends at 85.0511°: the engine refused anything past it, which was a 503 (retry later).
  const edge = await get('0,85.05112877980659,2/64x64.png')
  assert.equal(edge.statusCode, 200, edge.body)
  for (const url of ['0,85.06,2/64x64.png', '0,85.055,2/64x64.png']) {
    const res = await get(url)
    assert.equal(res.statusCode, 200, `${url}: ${res.body}`)
    assert.ok(res.rawPayload.equals(edge.rawPayload), `${url}: the centre clamped to the map's edge`)
  }
  assert.equal((await get('0,-85.06,0/64x64.png')).statusCode, 200)
  // A bbox reaching past the edge, or wholly past it (within 85.06), and overlays there.
  for (const url of ['-10,80,10,85.06/64x64.png', '-10,85.055,10,85.06/64x64.png', '-180,-85.06,180,85.06/64x64.png',
    'auto/64x64.png?path=0,80|10,85.06', 'auto/64x64.png?marker=10,85.06', 'auto/64x64.png?marker=10,85.06&marker=20,85.059',
    '0,80,3/64x64.png?path=0,80|10,85.06&marker=10,-85.06']) {
    const res = await get(url)
    assert.equal(res.statusCode, 200, `${url}: ${res.body}`)
    assert.equal(res.headers['content-type'], 'image/png')
  }
  for (const url of ['0,85.07,2/64x64.png', '-10,80,10,85.07/64x64.png', 'auto/64x64.png?path=0,80|10,85.07', 'auto/64x64.png?marker=0,-85.07']) {
    const res = await get(url)
    assert.equal(res.statusCode, 400, `${url}: ${res.statusCode} ${res.body}`)
  }
})

test('tileserver-gl\'s tile size forms: /styles/:id/256/:z/:x/:y is the default tile, /styles/256|512/:id.json TileJSON of that size', async (t) => {
  if (!needs(t, choice.backend !== null, choice.why ?? '')) return
  const app = await serve(t)
  for (const [sized, plain] of [['/styles/world/256/1/0/0.png', '/styles/world/1/0/0.png'], ['/styles/world/256/2/1/1@2x.webp', '/styles/world/2/1/1@2x.webp']]) {
    const [a, b] = await Promise.all([app.inject({ url: sized }), app.inject({ url: plain })])
    assert.equal(a.statusCode, 200, `${sized}: ${a.body}`)
    assert.equal(a.headers['content-type'], b.headers['content-type'])
    assert.equal(a.headers.etag, b.headers.etag, sized)
    assert.ok(a.rawPayload.equals(b.rawPayload), `${sized} is ${plain}`)
  }
  assert.equal((await app.inject({ url: '/styles/world/256/1/2/0.png' })).statusCode, 400, 'x beyond the zoom')
  assert.equal((await app.inject({ url: '/styles/nowhere/256/1/0/0.png' })).statusCode, 404)

  const plain = (await app.inject({ url: '/styles/zurich.json' })).json()
  assert.deepEqual(plain.center, [8.54, 47.37, 13], 'the style\'s zoom 12 (MapLibre\'s, of 512 px tiles) is zoom 13 of 256 px tiles')
  for (const size of [256, 512]) {
    const res = await app.inject({ url: `/styles/${size}/zurich.json`, headers: { host: 'maps.example' } })
    assert.equal(res.statusCode, 200, res.body)
    assert.ok(res.headers.etag)
    const tj = res.json()
    assert.equal(tj.tileSize, size)
    assert.deepEqual(tj.tiles, [`http://maps.example/styles/zurich/${size}/{z}/{x}/{y}.png`])
    // The same TileJSON but for its tiles, and the center's zoom: 512 px tiles show the style's view at its own zoom.
    const center = [8.54, 47.37, size === 512 ? 12 : 13]
    assert.deepEqual({ ...tj, tiles: undefined, tileSize: undefined }, { ...plain, tiles: undefined, tileSize: undefined, center })
    // Its tiles are the ones the size's own route draws.
    const tile = await app.inject({ url: tj.tiles[0].replace('http://maps.example', '').replace('{z}/{x}/{y}', '1/1/0') })
    assert.equal(tile.statusCode, 200)
    assert.equal((await sharp(tile.rawPayload).metadata()).width, size)
    assert.equal((await app.inject({ url: `/styles/${size}/nowhere.json` })).statusCode, 404)
  }
})

test('static images: latlng=1|true gives the points of paths and markers as lat,lon (tileserver-gl\'s option)', async (t) => {
  if (!needs(t, choice.backend !== null, choice.why ?? '')) return
  const app = await serve(t)
  const image = async (url) => {
    const res = await app.inject({ url: `/styles/world/static/${url}` })
    assert.equal(res.statusCode, 200, `${url}: ${res.body}`)
    return res.rawPayload
  }
  const overlays = 'stroke=%23ffff00&width=6&marker=8.6,47.4|color:%23ffffff'
  for (const view of ['auto/200x150.png', '8.5,47.4,9/200x150.png']) {
    const lonLat = await image(`${view}?path=8.4,47.3|8.7,47.45|8.5,47.5&${overlays}`)
    const flipped = `path=47.3,8.4|47.45,8.7|47.5,8.5&${overlays.replace('8.6,47.4', '47.4,8.6')}`
    for (const latlng of ['1', 'true']) assert.ok((await image(`${view}?${flipped}&latlng=${latlng}`)).equals(lonLat), `${view} latlng=${latlng}: the same image`)
    assert.ok(!(await image(`${view}?${flipped}`)).equals(lonLat), 'without latlng the points are lon,lat')
    assert.ok((await image(`${view}?path=8.4,47.3|8.7,47.45|8.5,47.5&${overlays}&latlng=0`)).equals(lonLat), 'latlng=0: lon,lat')
  }
  // An encoded polyline is lat/lon whatever latlng says.
  const enc = 'path=enc:_p~iF~ps|U_ulLnnqC_mqNvxq%60@'
  assert.ok((await image(`auto/100x100.png?${enc}&latlng=1`)).equals(await image(`auto/100x100.png?${enc}`)))
  for (const url of ['auto/50x50.png?path=8.4,47.3|8.7,47.45&latlng=yes', 'auto/50x50.png?marker=100,47.3&latlng=1', 'auto/50x50.png?path=47.3,8.4|47.3,200&latlng=true']) {
    const res = await app.inject({ url: `/styles/world/static/${url}` })
    assert.equal(res.statusCode, 400, `${url}: ${res.statusCode} ${res.body}`)
  }
})

test('static images below zoom 1 and small images of the world: as the tiles of that zoom, the world fitted', async (t) => {
  if (!needs(t, choice.backend !== null, choice.why ?? '')) return
  const app = await serve(t)
  const get = async (url) => {
    const res = await app.inject({ url })
    assert.equal(res.statusCode, 200, `${url}: ${res.body}`)
    return res.rawPayload
  }
  const blue = ([r, g, b]) => b > 200 && r < 60 && g < 60
  const red = ([r, g, b]) => r > 200 && b < 60 && g < 60
  const green = ([r, g, b]) => g > 200 && r < 60 && b < 60
  // Zoom 0 is the z0 tile, byte for byte (the engine's zoom is one less: it was drawn at its 0, half the world).
  const tile = await get('/styles/world/0/0/0.png')
  assert.ok((await get('/styles/world/static/0,0,0/256x256.png')).equals(tile), 'zoom 0: the z0 tile')
  assert.ok((await get('/styles/world/static/0,0,0/256x256@2x.png')).equals(await get('/styles/world/0/0/0@2x.png')), '@2x')
  const z0 = await pixels(tile)
  assert.ok(blue(z0.at(50, 128)) && red(z0.at(70, 128)) && green(z0.at(200, 20)), 'the z0 tile: the western quarter blue, the north green')
  // Zoom 0.5: a world of 362 px, centred; its western quarter ends 37 px from the left.
  const half = await pixels(await get('/styles/world/static/0,0,0.5/256x256.png'))
  assert.ok(blue(half.at(20, 128)) && red(half.at(50, 128)), `zoom 0.5 is not zoom 0: ${half.at(20, 128)} ${half.at(50, 128)}`)
  // The world's bbox fitted: in 256 px the z0 tile; in 64 px a quarter of it.
  assert.ok((await get('/styles/world/static/-180,-85.06,180,85.06/256x256.png?padding=0')).equals(tile), 'the world in 256 px: the z0 tile')
  const small = await pixels(await get('/styles/world/static/-180,-85.06,180,85.06/64x64.png?padding=0'))
  assert.deepEqual([small.info.width, small.info.height], [64, 64])
  assert.ok(blue(small.at(8, 32)) && red(small.at(40, 32)) && green(small.at(40, 10)), `the whole world in 64 px: ${small.at(8, 32)} ${small.at(40, 32)} ${small.at(40, 10)}`)
  const auto = await pixels(await get('/styles/world/static/auto/128x128.png?padding=0&path=-180,0|180,0&stroke=%23ffffff&width=1'))
  assert.ok(blue(auto.at(10, 90)) && red(auto.at(60, 90)), `auto over the world's width in 128 px: ${auto.at(10, 90)} ${auto.at(60, 90)}`)
  // A strip of the world, as wide as the engine draws: drawn, at the size asked.
  assert.equal((await sharp(await get('/styles/world/static/-180,-85.06,180,85.06/2048x10.png')).metadata()).width, 2048)
})

test('static images below zoom 1: paths and markers keep their size in pixels (the view is drawn larger and scaled down)', async (t) => {
  if (!needs(t, choice.backend !== null, choice.why ?? '')) return
  const pin = await sharp({ create: { width: 20, height: 30, channels: 4, background: { r: 255, g: 0, b: 255, alpha: 1 } } }).png().toBuffer()
  const app = await serve(t, { icons: { 'pin.png': pin } })
  const white = ([r, g, b]) => r > 200 && g > 127 && b > 127
  const black = ([r, g, b]) => r < 60 && g < 60 && b < 60
  const magenta = ([r, g, b]) => r > 200 && g < 60 && b > 200
  // The pixels of one kind along a column or a row of the image: how many, and where the first and last are.
  const along = (img, pick, kind) => {
    const found = []
    for (let i = 0; i < 256; i++) if (kind(pick(i))) found.push(i)
    return { count: found.length, first: found[0], last: found.at(-1) }
  }
  // A white line of 8 px along the equator, a black dot of radius 8 (its white stroke partly over it) north of it, a 20x30 pin moved 30 px east south of it.
  const overlays = 'path=-60,0|60,0&stroke=%23ffffff&width=8&marker=0,40|color:%23000000|size:8&marker=0,-40|pin.png|offset:30,0'
  const measure = async (zoom) => {
    const res = await app.inject({ url: `/styles/world/static/0,0,${zoom}/256x256.png?${overlays}` })
    assert.equal(res.statusCode, 200, res.body)
    const img = await pixels(res.rawPayload)
    const column = (x) => (y) => img.at(x, y)
    const line = along(img, column(100), white)
    const dot = along(img, (y) => (y < line.first ? img.at(128, y) : [255, 255, 255]), black)
    const pinColumn = along(img, column(158), magenta)
    const pinRow = along(img, (x) => img.at(x, pinColumn.first + 10), magenta)
    return { line: line.count, dot: dot.count, pinHeight: pinColumn.count, pinWidth: pinRow.count, pinCentre: (pinRow.first + pinRow.last + 1) / 2 }
  }
  const z1 = await measure(1)
  assert.ok(Math.abs(z1.line - 8) <= 1 && Math.abs(z1.dot - 15) <= 2 && z1.pinHeight === 30 && z1.pinWidth === 20 && z1.pinCentre === 158, `zoom 1: ${JSON.stringify(z1)}`)
  for (const zoom of [0.5, 0]) {
    const small = await measure(zoom)
    for (const [key, value] of Object.entries(z1)) assert.ok(Math.abs(small[key] - value) <= 1, `zoom ${zoom}: ${key} ${small[key]}, not ${value} as at zoom 1: ${JSON.stringify(small)}`)
  }
})

test('static images below zoom 1 are at most 2048 px a side (drawn twice as large, at most 4096): larger ones a 400, whatever render.maxSize allows', async (t) => {
  if (!needs(t, choice.backend !== null, choice.why ?? '')) return
  const app = await serve(t, { render: { maxSize: 8192 } })
  const get = (url) => app.inject({ url: `/styles/world/static/${url}` })
  for (const url of ['0,0,0/8192x8192.png', '0,0,0.5/2049x10.png', '0,0,0/10x2049.png', '0,0,0.99/1025x10@2x.png', '0,0,0/683x10@3x.png']) {
    const res = await get(url)
    assert.equal(res.statusCode, 400, `${url}: ${res.statusCode}`)
    assert.match(res.json().message, /below zoom 1 is at most 2048 pixels/)
  }
  for (const [url, width] of [['0,0,0/2048x10.png', 2048], ['0,0,0/1024x10@2x.png', 2048], ['0,0,1/2049x10.png', 2049]]) {
    const res = await get(url)
    assert.equal(res.statusCode, 200, `${url}: ${res.body}`)
    assert.equal((await sharp(res.rawPayload).metadata()).width, width, url)
  }
})

test('static images with overlays asked for again and again: the same image each time, and the style they are added to (parsed once, shared) left as it was', async (t) => {
  if (!needs(t, choice.backend !== null, choice.why ?? '')) return
  const app = await serve(t)
  // The engine ignores a layer added twice, so what an image left behind in the shared style would not show in the next
  // images: it would pile up, a copy of the overlays' layers per image, for the life of the process.
  const drawn = JSON.stringify(app.renderer.renderStyleObject(app.styles.get('world')))
  const url = '/styles/world/static/0,0,2/200x150.png?path=fill:%230000ff40|stroke:%23ffff00|-20,-20|20,-20|20,20|-20,20&marker=0,0|color:%23ffffff'
  const first = await app.inject({ url })
  assert.equal(first.statusCode, 200, first.body)
  for (const other of ['/styles/world/static/0,0,2/200x150.png?path=-10,-10|10,10', '/styles/world/static/auto/100x100.png?marker=5,5']) {
    assert.equal((await app.inject({ url: other })).statusCode, 200)
  }
  for (let i = 0; i < 2; i++) assert.ok((await app.inject({ url })).rawPayload.equals(first.rawPayload), `asked again (${i + 1}): the same image`)
  assert.equal(JSON.stringify(app.renderer.renderStyleObject(app.styles.get('world'))), drawn, 'the style as drawn is as it was')
})

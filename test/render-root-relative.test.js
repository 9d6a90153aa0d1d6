// A style's sprite and glyphs written from this server's root (`/styles/city/sprite`, `/fonts/{fontstack}/{range}.pbf`),
// as tiles and TileJSON URLs may be: clients get them absolute, and the renderer draws them from this server's own
// sprites and fonts; behind a --public-url path prefix written with it too (`/tiles/styles/city/sprite`).
import assert from 'node:assert/strict'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import test from 'node:test'
import sharp from 'sharp'
import { chooseBackend } from '../lib/style/render/index.js'
import { makeApp, needs } from './helpers/app.js'
import { pyramid, tempDir, writeMbtiles } from './helpers/data.js'

const choice = chooseBackend({})

/** A style filling the map blue, then with the sprite icon `icon` (a yellow square) as a pattern. */
const patterned = (sprite, icon = 'own', extra = {}) => JSON.stringify({
  version: 8,
  sources: {},
  sprite,
  layers: [{ id: 'bg', type: 'background', paint: { 'background-color': '#0000ff' } }, { id: 'pattern', type: 'background', paint: { 'background-pattern': icon } }],
  ...extra,
})

async function setUp (t, overrides = {}) {
  const styles = join(tempDir(t), 'styles')
  mkdirSync(join(styles, 'owner'), { recursive: true })
  writeFileSync(join(styles, 'owner', 'style.json'), patterned('sprite'))
  writeFileSync(join(styles, 'owner', 'sprite.json'), JSON.stringify({ own: { x: 0, y: 0, width: 16, height: 16, pixelRatio: 1 } }))
  writeFileSync(join(styles, 'owner', 'sprite.png'), await sharp({ create: { width: 16, height: 16, channels: 4, background: { r: 255, g: 255, b: 0, alpha: 1 } } }).png().toBuffer())
  writeFileSync(join(styles, 'rooted.json'), patterned('/styles/owner/sprite?v=2', 'own', { glyphs: '/fonts/{fontstack}/{range}.pbf' }))
  writeFileSync(join(styles, 'listed.json'), patterned([{ id: 'o', url: '/styles/owner/sprite' }], 'o:own'))
  // Naming nothing this server serves, from its root and relatively.
  writeFileSync(join(styles, 'elsewhere.json'), patterned('/elsewhere/sprite'))
  writeFileSync(join(styles, 'nofiles.json'), patterned('elsewhere/sprite'))
  // Written for the server behind the path prefix /tiles, from the host's root.
  writeFileSync(join(styles, 'prefixed.json'), patterned('/tiles/styles/owner/sprite?v=2', 'own', { glyphs: '/tiles/fonts/{fontstack}/{range}.pbf' }))
  writeFileSync(join(styles, 'prefixed-listed.json'), patterned([{ id: 'o', url: '/tiles/styles/owner/sprite' }], 'o:own'))
  writeFileSync(join(styles, 'prefixed-tiles.json'), JSON.stringify({
    version: 8,
    sources: { red: { type: 'raster', tiles: ['/tiles/red/{z}/{x}/{y}.png'], tileSize: 256 } },
    layers: [{ id: 'bg', type: 'background', paint: { 'background-color': '#0000ff' } }, { id: 'red', type: 'raster', source: 'red' }],
  }))
  // A set named as the prefix /tiles is (its first segment), its tiles from the server's own root and from the host's.
  for (const [id, path] of [['own-tiles', '/tiles/{z}/{x}/{y}.png'], ['prefixed-own-tiles', '/tiles/tiles/{z}/{x}/{y}.png']]) {
    writeFileSync(join(styles, `${id}.json`), JSON.stringify({
      version: 8,
      sources: { green: { type: 'raster', tiles: [path], tileSize: 256 } },
      layers: [{ id: 'bg', type: 'background', paint: { 'background-color': '#0000ff' } }, { id: 'green', type: 'raster', source: 'green' }],
    }))
  }
  const filled = (name, background) => sharp({ create: { width: 256, height: 256, channels: 3, background } }).png().toBuffer()
    .then((png) => writeMbtiles(join(styles, '..', `${name}.mbtiles`), { tiles: pyramid(0, 1).map(([z, x, y]) => ({ z, x, y, data: png })), metadata: { format: 'png', minzoom: '0', maxzoom: '1' } }))
  await filled('red', { r: 255, g: 0, b: 0 })
  await filled('tiles', { r: 0, g: 255, b: 0 })
  return makeApp(t, { paths: [join(styles, '..', 'red.mbtiles'), join(styles, '..', 'tiles.mbtiles')], styles, ...overrides })
}

test('a sprite and glyphs written from the root are absolute in the style clients get', async (t) => {
  const app = await setUp(t)
  const style = async (id) => (await app.inject({ url: `/styles/${id}/style.json`, headers: { host: 'h' } })).json()
  const rooted = await style('rooted')
  assert.equal(rooted.sprite, 'http://h/styles/owner/sprite?v=2')
  assert.equal(rooted.glyphs, 'http://h/fonts/{fontstack}/{range}.pbf')
  assert.deepEqual((await style('listed')).sprite, [{ id: 'o', url: 'http://h/styles/owner/sprite' }])
  const sheet = await app.inject({ url: '/styles/owner/sprite.json' })
  assert.equal(sheet.statusCode, 200, 'what the sprite URL names')
  // Naming nothing here: absolute all the same, and a 404 there, as a relative sprite without files is.
  assert.equal((await style('elsewhere')).sprite, 'http://h/elsewhere/sprite')
  assert.equal((await app.inject({ url: '/elsewhere/sprite.json' })).statusCode, 404)
  assert.equal((await style('nofiles')).sprite, 'http://h/styles/nofiles/sprite')
  assert.equal((await app.inject({ url: '/styles/nofiles/sprite.json' })).statusCode, 404)
})

test('a sprite written from the root is drawn from this server\'s sprite, as a relative one is; one naming nothing fails as a relative one does', async (t) => {
  if (!needs(t, choice.backend !== null, choice.why ?? '')) return
  const app = await setUp(t)
  for (const view of ['1/0/0.png', 'static/0,0,1/64x64.png']) {
    const own = await app.inject({ url: `/styles/owner/${view}` })
    assert.equal(own.statusCode, 200, own.body)
    const { data, info } = await sharp(own.rawPayload).ensureAlpha().raw().toBuffer({ resolveWithObject: true })
    assert.deepEqual(Array.from(data.subarray((20 * info.width + 20) * 4, (20 * info.width + 20) * 4 + 3)), [255, 255, 0], `${view}: the sprite's pattern`)
    for (const id of ['rooted', 'listed']) {
      const res = await app.inject({ url: `/styles/${id}/${view}` })
      assert.equal(res.statusCode, 200, `${id} ${view}: ${res.body}`)
      assert.ok(res.rawPayload.equals(own.rawPayload), `${id} ${view}: drawn as the style whose sprite it names`)
    }
    const relative = await app.inject({ url: `/styles/nofiles/${view}` })
    const rooted = await app.inject({ url: `/styles/elsewhere/${view}` })
    assert.equal(relative.statusCode, 503, relative.body)
    assert.equal(rooted.statusCode, 503, rooted.body)
    for (const res of [relative, rooted]) assert.match(res.json().message, /the style's sprite cannot be read/)
  }
})

test('behind a path prefix (--public-url http://host/tiles), a sprite, glyphs and tiles written from the host\'s root (/tiles/styles/owner/sprite) are this server\'s, for clients and the renderer', async (t) => {
  const app = await setUp(t, { publicUrl: 'http://host/tiles' })
  const style = async (id) => (await app.inject({ url: `/styles/${id}/style.json`, headers: { host: 'h' } })).json()
  const prefixed = await style('prefixed')
  assert.equal(prefixed.sprite, 'http://host/tiles/styles/owner/sprite?v=2', 'not the prefix twice')
  assert.equal(prefixed.glyphs, 'http://host/tiles/fonts/{fontstack}/{range}.pbf')
  assert.deepEqual((await style('prefixed-listed')).sprite, [{ id: 'o', url: 'http://host/tiles/styles/owner/sprite' }])
  assert.deepEqual((await style('prefixed-tiles')).sources.red.tiles, ['http://host/tiles/red/{z}/{x}/{y}.png'])
  const rooted = await style('rooted')
  assert.equal(rooted.sprite, 'http://host/tiles/styles/owner/sprite?v=2', 'from the server\'s own root, as before')
  assert.equal(rooted.glyphs, 'http://host/tiles/fonts/{fontstack}/{range}.pbf')

  if (!needs(t, choice.backend !== null, choice.why ?? '')) return
  const view = '1/0/0.png'
  const own = await app.inject({ url: `/styles/owner/${view}` })
  assert.equal(own.statusCode, 200, own.body)
  for (const id of ['prefixed', 'prefixed-listed', 'rooted']) {
    const res = await app.inject({ url: `/styles/${id}/${view}` })
    assert.equal(res.statusCode, 200, `${id}: ${res.body}`)
    assert.ok(res.rawPayload.equals(own.rawPayload), `${id}: drawn with the sprite it names`)
  }
  const tiles = await app.inject({ url: `/styles/prefixed-tiles/${view}` })
  assert.equal(tiles.statusCode, 200, tiles.body)
  const { data, info } = await sharp(tiles.rawPayload).ensureAlpha().raw().toBuffer({ resolveWithObject: true })
  assert.deepEqual(Array.from(data.subarray((20 * info.width + 20) * 4, (20 * info.width + 20) * 4 + 3)), [255, 0, 0], 'the set\'s tiles, drawn from here')
})

/** The colour at pixel (20, 20) of a PNG. */
const colourOf = async (png) => {
  const { data, info } = await sharp(png).ensureAlpha().raw().toBuffer({ resolveWithObject: true })
  return Array.from(data.subarray((20 * info.width + 20) * 4, (20 * info.width + 20) * 4 + 3))
}

test('behind a path prefix, a path from the server\'s own root that also reads as under the prefix is what this server serves: a set named as the prefix (/tiles/{z}/{x}/{y}.png behind /tiles), a sprite behind /styles', async (t) => {
  const app = await setUp(t, { publicUrl: 'http://host/tiles' })
  const style = async (server, id) => (await server.inject({ url: `/styles/${id}/style.json`, headers: { host: 'h' } })).json()
  // The set `tiles` either way: /{z}/{x}/{y}.png, the prefix taken off, names nothing here.
  for (const id of ['own-tiles', 'prefixed-own-tiles']) assert.deepEqual((await style(app, id)).sources.green.tiles, ['http://host/tiles/tiles/{z}/{x}/{y}.png'], id)
  assert.equal((await app.inject({ url: '/tiles/0/0/0.png' })).statusCode, 200, 'what the URL names behind the proxy')
  // The set's name the first segment of a longer prefix: not under it, from the server's own root as before.
  const longer = await setUp(t, { publicUrl: 'http://host/tiles/v1' })
  assert.deepEqual((await style(longer, 'own-tiles')).sources.green.tiles, ['http://host/tiles/v1/tiles/{z}/{x}/{y}.png'])
  assert.deepEqual((await style(longer, 'prefixed-own-tiles')).sources.green.tiles, ['http://host/tiles/v1/tiles/tiles/{z}/{x}/{y}.png'], 'a path naming nothing: from the server\'s root')
  // Behind /styles, /styles/owner/sprite is that style's sprite (/owner/sprite names none).
  const styled = await setUp(t, { publicUrl: 'http://h/styles' })
  assert.equal((await style(styled, 'rooted')).sprite, 'http://h/styles/styles/owner/sprite?v=2')
  assert.deepEqual((await style(styled, 'listed')).sprite, [{ id: 'o', url: 'http://h/styles/styles/owner/sprite' }])
  assert.equal((await style(styled, 'prefixed')).sprite, 'http://h/styles/tiles/styles/owner/sprite?v=2', 'under no prefix here: as written')

  if (!needs(t, choice.backend !== null, choice.why ?? '')) return
  const view = '1/0/0.png'
  for (const id of ['own-tiles', 'prefixed-own-tiles']) {
    const res = await app.inject({ url: `/styles/${id}/${view}` })
    assert.equal(res.statusCode, 200, `${id}: ${res.body}`)
    assert.deepEqual(await colourOf(res.rawPayload), [0, 255, 0], `${id}: the set tiles's tiles, drawn from here`)
  }
  const own = await styled.inject({ url: `/styles/owner/${view}` })
  assert.equal(own.statusCode, 200, own.body)
  for (const id of ['rooted', 'listed']) {
    const res = await styled.inject({ url: `/styles/${id}/${view}` })
    assert.equal(res.statusCode, 200, `${id}: ${res.body}`)
    assert.ok(res.rawPayload.equals(own.rawPayload), `${id}: drawn with the sprite it names`)
  }
})

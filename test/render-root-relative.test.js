// A style's sprite and glyphs written from this server's root (`/styles/city/sprite`, `/fonts/{fontstack}/{range}.pbf`),
// as tiles and TileJSON URLs may be: clients get them absolute, and the renderer draws them from this server's own
// sprites and fonts.
import assert from 'node:assert/strict'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import test from 'node:test'
import sharp from 'sharp'
import { chooseBackend } from '../lib/style/render/index.js'
import { makeApp, needs } from './helpers/app.js'
import { tempDir } from './helpers/data.js'

const choice = chooseBackend({})

/** A style filling the map blue, then with the sprite icon `icon` (a yellow square) as a pattern. */
const patterned = (sprite, icon = 'own', extra = {}) => JSON.stringify({
  version: 8,
  sources: {},
  sprite,
  layers: [{ id: 'bg', type: 'background', paint: { 'background-color': '#0000ff' } }, { id: 'pattern', type: 'background', paint: { 'background-pattern': icon } }],
  ...extra,
})

async function setUp (t) {
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
  return makeApp(t, { paths: [], styles })
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

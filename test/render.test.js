// Rendering styles with MapLibre Native, through the child that runs here (mapli; `npm run setup-render`, which
// .ci/run does): rendered tiles look like their style, go through the cache, and a broken style, a corrupt tile or a
// killed child each end in an answer, never a hung request or a dead server.
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:http'
import { dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { join } from 'node:path'
import test from 'node:test'
import { gzipSync } from 'node:zlib'
import pixelmatch from 'pixelmatch'
import sharp from 'sharp'
import { chooseBackend } from '../lib/style/render/index.js'
import { decodePolyline } from '../lib/style/static.js'
import { lonLatToTile } from '../lib/tilemath.js'
import { FIXTURES, HAVE_FIXTURES, makeApp, needs } from './helpers/app.js'
import { makeMvt, pyramid, tempDir, writeMbtiles, writePmtiles } from './helpers/data.js'
import { writeLiberty } from './helpers/styles.js'

const GOLDEN = join(dirname(fileURLToPath(import.meta.url)), 'golden')

/**
 * Compares a rendered PNG with its golden image (test/golden/NAME.png, made by this engine and checked by eye):
 * at most `share` of the pixels may differ beyond pixelmatch's colour threshold. UPDATE_GOLDEN=1 writes it anew.
 */
async function assertGolden (png, name, share = 0.01) {
  const file = join(GOLDEN, `${name}.png`)
  if (process.env.UPDATE_GOLDEN === '1' || !existsSync(file)) {
    if (process.env.UPDATE_GOLDEN !== '1') assert.fail(`no golden image ${name}.png (run with UPDATE_GOLDEN=1 once, and look at it)`)
    mkdirSync(GOLDEN, { recursive: true })
    writeFileSync(file, png)
    return
  }
  const raw = async (buf) => sharp(buf).ensureAlpha().raw().toBuffer({ resolveWithObject: true })
  const [a, b] = await Promise.all([raw(png), raw(readFileSync(file))])
  assert.deepEqual([a.info.width, a.info.height], [b.info.width, b.info.height], `${name}: size`)
  const differ = pixelmatch(a.data, b.data, null, a.info.width, a.info.height, { threshold: 0.1 })
  assert.ok(differ <= share * a.info.width * a.info.height, `${name}: ${differ} pixels differ from the golden image`)
}

const choice = chooseBackend({})
const RENDERER_MISSING = choice.why ?? ''

/** A style drawing the generated points: red background, blue circles of radius 20. */
function dotsStyle (extra = {}) {
  return {
    version: 8,
    name: 'Dots',
    sources: { dots: { type: 'vector', url: 'mbtiles://dots' } },
    layers: [
      { id: 'bg', type: 'background', paint: { 'background-color': '#ff0000' } },
      { id: 'dots', type: 'circle', source: 'dots', 'source-layer': 'points', paint: { 'circle-color': '#0000ff', 'circle-radius': 20 } },
    ],
    ...extra,
  }
}

function setUp (t) {
  const dir = tempDir(t)
  const tiles = join(dir, 'tiles')
  const styles = join(dir, 'styles')
  mkdirSync(tiles)
  mkdirSync(styles)
  // One point in the middle of every tile of z0-z4.
  writeMbtiles(join(tiles, 'dots.mbtiles'), { tiles: pyramid(0, 4, 16).map(([z, x, y]) => ({ z, x, y, data: gzipSync(makeMvt(z, x, y)) })), metadata: { format: 'pbf', minzoom: '0', maxzoom: '4' } })
  writeMbtiles(join(tiles, 'corrupt.mbtiles'), { tiles: pyramid(0, 2, 4).map(([z, x, y]) => ({ z, x, y, data: Buffer.from('this is not a vector tile at all') })), metadata: { format: 'pbf', minzoom: '0', maxzoom: '2' } })
  writeFileSync(join(styles, 'dots.json'), JSON.stringify(dotsStyle()))
  writeFileSync(join(styles, 'corrupt.json'), JSON.stringify({ ...dotsStyle(), sources: { dots: { type: 'vector', url: 'mbtiles://corrupt' } } }))
  writeFileSync(join(styles, 'nosource.json'), JSON.stringify({ ...dotsStyle(), sources: { dots: { type: 'vector', url: 'mbtiles://nowhere' } } }))
  writeFileSync(join(styles, 'badlayer.json'), JSON.stringify({ ...dotsStyle(), layers: [{ id: 'x', type: 'no-such-type', source: 'dots' }] }))
  // A raster layer over a vector source: MapLibre Native aborts its whole process on it.
  writeFileSync(join(styles, 'crasher.json'), JSON.stringify({ ...dotsStyle(), layers: [...dotsStyle().layers, { id: 'r', type: 'raster', source: 'dots' }] }))
  // Local files the catalog does not serve, named around it: drawn as empty, never opened by the engine.
  writeFileSync(join(styles, 'around.json'), JSON.stringify({
    ...dotsStyle(),
    sources: { dots: { type: 'vector', url: `mbtiles://${join(tiles, 'dots.mbtiles')}x` }, file: { type: 'vector', tiles: [`file://${tiles}/{z}/{x}/{y}.pbf`] } },
  }))
  // The set as tile URLs from this server's root, as a hand-written style may give them.
  writeFileSync(join(styles, 'rooted.json'), JSON.stringify({ ...dotsStyle(), sources: { dots: { type: 'vector', tiles: ['/dots/{z}/{x}/{y}.pbf'], maxzoom: 4 } } }))
  return { dir, tiles, styles }
}

async function pixels (buf) {
  const { data, info } = await sharp(buf).ensureAlpha().raw().toBuffer({ resolveWithObject: true })
  const at = (x, y) => Array.from(data.subarray((y * info.width + x) * 4, (y * info.width + x) * 4 + 4))
  return { info, at, data }
}

test('rendered tiles draw their style: 256 and 512 px, @2x, PNG, JPEG and WebP, cached with an ETag', async (t) => {
  if (!needs(t, choice.backend !== null, RENDERER_MISSING)) return
  const { tiles, styles } = setUp(t)
  const app = await makeApp(t, { paths: [tiles], styles })
  assert.ok(app.renderer.available, app.renderer.reason)

  // 512 px tiles are drawn at their own zoom: the point of vector tile 2/1/1 is at the centre.
  const big = await app.inject({ url: '/styles/dots/512/2/1/1.png' })
  assert.equal(big.statusCode, 200, big.body)
  assert.equal(big.headers['content-type'], 'image/png')
  const bigPx = await pixels(big.rawPayload)
  assert.deepEqual([bigPx.info.width, bigPx.info.height], [512, 512])
  const blue = ([r, g, b]) => b > 200 && r < 60 && g < 60
  const red = ([r, g, b]) => r > 200 && b < 60 && g < 60
  assert.ok(blue(bigPx.at(256, 256)), `the point at the tile's centre is blue: ${bigPx.at(256, 256)}`)
  assert.ok(red(bigPx.at(100, 100)), `the background is red: ${bigPx.at(100, 100)}`)
  await assertGolden(big.rawPayload, 'dots-512-2-1-1')
  // 256 px tiles show the same map one zoom level down (as every MapLibre raster tile server does): tile 2/1/1 is
  // the lower-right quarter of vector tile 1/0/0, whose point is at its top-left corner.
  const res = await app.inject({ url: '/styles/dots/2/1/1.png' })
  assert.equal(res.statusCode, 200, res.body)
  const png = await pixels(res.rawPayload)
  assert.deepEqual([png.info.width, png.info.height], [256, 256])
  assert.ok(blue(png.at(2, 2)), `the point at the corner: ${png.at(2, 2)}`)
  assert.ok(red(png.at(128, 128)), `red in the middle: ${png.at(128, 128)}`)

  const retina = await pixels((await app.inject({ url: '/styles/dots/2/1/1@2x.png' })).rawPayload)
  assert.deepEqual([retina.info.width, retina.info.height], [512, 512])
  const world = await pixels((await app.inject({ url: '/styles/dots/0/0/0.png' })).rawPayload)
  assert.deepEqual([world.info.width, world.info.height], [256, 256], 'z0 in 256 px (the engine has none: the 512 px world, halved)')

  const jpg = await app.inject({ url: '/styles/dots/2/1/1.jpg' })
  assert.equal(jpg.headers['content-type'], 'image/jpeg')
  assert.equal((await sharp(jpg.rawPayload).metadata()).format, 'jpeg')
  const webp = await app.inject({ url: '/styles/dots/2/1/1.webp' })
  assert.equal(webp.headers['content-type'], 'image/webp')
  assert.equal((await app.inject({ url: '/styles/dots/2/1/1.gif' })).statusCode, 400)
  assert.equal((await app.inject({ url: '/styles/dots/2/9/1.png' })).statusCode, 400, 'off the grid')
  assert.equal((await app.inject({ url: '/styles/nope/2/1/1.png' })).statusCode, 404)

  // Cached: the same bytes, an ETag that revalidates, and no second render.
  const rendersBefore = app.renderer.stats.renders
  const again = await app.inject({ url: '/styles/dots/2/1/1.png' })
  assert.deepEqual(again.rawPayload, res.rawPayload)
  assert.equal(app.renderer.stats.renders, rendersBefore, 'served from the tile cache')
  assert.equal((await app.inject({ url: '/styles/dots/2/1/1.png', headers: { 'if-none-match': res.headers.etag } })).statusCode, 304)

  const tj = (await app.inject({ url: '/styles/dots.json', headers: { host: 'h' } })).json()
  assert.deepEqual(tj.tiles, ['http://h/styles/dots/{z}/{x}/{y}.png'])
  assert.equal(tj.tileSize, 256)
})

test('static images: a centre and zoom, a bbox, auto; a path and a marker drawn where they belong; limits', async (t) => {
  if (!needs(t, choice.backend !== null, RENDERER_MISSING)) return
  const { tiles, styles } = setUp(t)
  const app = await makeApp(t, { paths: [tiles], styles, render: { maxSize: 1000, maxOverlays: 3 } })
  // A yellow line along the equator from 60 W to 60 E and a green marker at 0,0; zoom 2 of 256 px maps: 1024 px a world.
  const overlays = 'path=-60,0|60,0&stroke=%23ffff00&width=10&marker=0,0|color:%2300ff00|size:12'
  const res = await app.inject({ url: `/styles/dots/static/0,0,2/400x300.png?${overlays}` })
  assert.equal(res.statusCode, 200, res.body)
  assert.equal(res.headers['content-type'], 'image/png')
  assert.ok(res.headers.etag)
  const img = await pixels(res.rawPayload)
  assert.deepEqual([img.info.width, img.info.height], [400, 300])
  const green = ([r, g, b]) => g > 200 && r < 80 && b < 80
  const yellow = ([r, g, b]) => r > 200 && g > 200 && b < 80
  assert.ok(green(img.at(200, 150)), `the marker at the centre: ${img.at(200, 150)}`)
  assert.ok(yellow(img.at(200 + 120, 150)), `the path 60° east runs 170 px right: ${img.at(320, 150)}`)
  assert.ok(yellow(img.at(200 - 120, 150)), `and west: ${img.at(80, 150)}`)
  assert.ok(!yellow(img.at(200 + 120, 100)) && !yellow(img.at(200 + 190, 150)), 'nowhere else')
  await assertGolden(res.rawPayload, 'dots-static-path-marker')
  // Colour names in any case, as CSS and MapLibre read them: the same image.
  const named = await app.inject({ url: `/styles/dots/static/0,0,2/400x300.png?${overlays.replace('%23ffff00', 'Yellow').replace('%2300ff00', 'LIME')}` })
  assert.equal(named.statusCode, 200, named.body)
  assert.ok(named.rawPayload.equals(res.rawPayload), 'Yellow and LIME draw as #ffff00 and #00ff00')

  const retina = await pixels((await app.inject({ url: `/styles/dots/static/0,0,2/400x300@2x.webp?${overlays}` })).rawPayload)
  assert.deepEqual([retina.info.width, retina.info.height], [800, 600])
  const bbox = await app.inject({ url: '/styles/dots/static/-20,-10,20,10/300x200.jpg' })
  assert.equal(bbox.headers['content-type'], 'image/jpeg')
  assert.equal((await sharp(bbox.rawPayload).metadata()).width, 300)
  // auto: fitted to the overlays, so the path reaches across the image.
  const autoRes = await app.inject({ url: `/styles/dots/static/auto/400x300.png?${overlays}&padding=0.05` })
  assert.equal(autoRes.statusCode, 200, autoRes.body)
  const auto = await pixels(autoRes.rawPayload)
  assert.ok(yellow(auto.at(30, 150)) && yellow(auto.at(370, 150)), `the path spans the fitted view: ${auto.at(30, 150)} ${auto.at(370, 150)}`)
  const polyline = await app.inject({ url: '/styles/dots/static/auto/200x200.png?path=enc:_p~iF~ps|U_ulLnnqC_mqNvxq%60@' }) // Google's example
  assert.equal(polyline.statusCode, 200, polyline.body)

  for (const [url, why] of [
    ['/styles/dots/static/0,0,2/2000x10.png', 'too large'],
    ['/styles/dots/static/0,0,2/0x10.png', 'empty'],
    ['/styles/dots/static/0,0,2/10x10.gif', 'format'],
    ['/styles/dots/static/200,0,2/10x10.png', 'lon'],
    ['/styles/dots/static/0,0,2@0,75/10x10.png', 'pitch'],
    ['/styles/dots/static/10,0,-10,5/10x10.png', 'bbox'],
    ['/styles/dots/static/auto/10x10.png', 'no overlays'],
    ['/styles/dots/static/0,0,2/10x10.png?marker=1,1&marker=2,2&marker=3,3&marker=4,4', 'overlays'],
    ['/styles/dots/static/0,0,2/10x10.png?path=1,1', 'one point'],
    ['/styles/dots/static/0,0,2/10x10.png?path=1,1|2,2&stroke=javascript:x', 'colour'],
    // Colour-like words and short hex the engine would quietly draw in its default colour.
    ['/styles/dots/static/0,0,2/10x10.png?path=1,1|2,2&stroke=notacolor', 'colour name'],
    ['/styles/dots/static/0,0,2/10x10.png?path=1,1|2,2&stroke=%2312345', '5 hex digits'],
    ['/styles/dots/static/0,0,2/10x10.png?path=fill:zzz|1,1|2,2|2,1', 'fill'],
    ['/styles/dots/static/0,0,2/10x10.png?marker=1,1|color:bogus', 'marker colour'],
    ['/styles/dots/static/0,0,2/10x10.png?path=enc:%7F%7F%7F', 'polyline'],
    ['/styles/dots/static/0,0,2/10x10.png?path=1,1|nonsense', 'not a point'],
  ]) {
    const bad = await app.inject({ url })
    assert.equal(bad.statusCode, 400, `${why}: ${url} → ${bad.statusCode} ${bad.body}`)
  }
})

test('a sprite file that cannot be read fails the render (503, not cached); a remote sprite down is drawn without its icons, kept briefly; once it can, the icons are drawn', async (t) => {
  if (!needs(t, choice.backend !== null, RENDERER_MISSING)) return
  const { tiles, styles } = setUp(t)
  const sheet = await sharp({ create: { width: 16, height: 16, channels: 4, background: { r: 255, g: 255, b: 0, alpha: 1 } } }).png().toBuffer()
  const spriteJson = (ratio) => JSON.stringify({ own: { x: 0, y: 0, width: 16, height: 16, pixelRatio: ratio } })
  // A port that nothing listens on yet: the sprite's server is down, then comes up.
  const probe = createServer().listen(0, '127.0.0.1')
  await once(probe, 'listening')
  const port = probe.address().port
  probe.close()
  const style = (sprite) => JSON.stringify({ version: 8, sources: {}, sprite, layers: [{ id: 'bg', type: 'background', paint: { 'background-color': '#0000ff' } }, { id: 'pattern', type: 'background', paint: { 'background-pattern': 'own' } }] })
  writeFileSync(join(styles, 'remote.json'), style(`http://127.0.0.1:${port}/s/sheet?key=abc`))
  mkdirSync(join(styles, 'local'))
  writeFileSync(join(styles, 'local', 'style.json'), style('sprite'))
  const app = await makeApp(t, { paths: [tiles], styles, render: { incompleteTtlS: 1 } })
  const yellow = ([r, g, b]) => r > 200 && g > 200 && b < 60

  for (const url of ['/styles/local/1/0/0.png', '/styles/local/static/0,0,1/64x64.png']) {
    const down = await app.inject({ url })
    assert.equal(down.statusCode, 503, `${url}: ${down.body}`)
    assert.equal(down.headers['retry-after'] !== undefined, true, 'Retry-After')
  }
  // A remote sprite is read by the server, as a remote source is: its server down, drawn without its icons, kept briefly.
  for (const url of ['/styles/remote/1/0/0.png', '/styles/remote/static/0,0,1/64x64.png']) {
    const down = await app.inject({ url })
    assert.equal(down.statusCode, 200, `${url}: ${down.body}`)
    assert.deepEqual((await pixels(down.rawPayload)).at(20, 20).slice(0, 3), [0, 0, 255], `${url}: the background, no pattern`)
    assert.equal(down.headers['cache-control'], 'public, max-age=1', `${url}: incomplete, kept briefly`)
  }
  assert.match((await app.inject({ url: '/styles/local/1/0/0.png' })).json().message, /sprite/)

  const asked = []
  const server = createServer((req, res) => {
    asked.push(req.url)
    const m = /^\/s\/sheet(@2x)?\.(json|png)\?key=abc$/.exec(req.url)
    if (m === null) return res.writeHead(404).end()
    res.end(m[2] === 'json' ? spriteJson(m[1] ? 2 : 1) : sheet)
  }).listen(port, '127.0.0.1')
  await once(server, 'listening')
  t.after(() => server.close())
  writeFileSync(join(styles, 'local', 'sprite.json'), spriteJson(1))
  writeFileSync(join(styles, 'local', 'sprite.png'), sheet)
  // A failed style is registered with the engine afresh at most once a second (the engine does not retry a sprite).
  await new Promise((resolve) => setTimeout(resolve, 1100))
  for (const url of ['/styles/remote/1/0/0.png', '/styles/local/1/0/0.png', '/styles/local/static/0,0,1/64x64.png']) {
    let up = await app.inject({ url })
    // A registration that failed before, once; a remote sprite drawn without its icons, until its style is registered afresh.
    for (let tries = 1; (up.statusCode === 503 || up.headers['cache-control'] === 'public, max-age=1') && tries < 3; tries++) {
      await new Promise((resolve) => setTimeout(resolve, 1100))
      up = await app.inject({ url })
    }
    assert.equal(up.statusCode, 200, `${url}: ${up.body}`)
    assert.ok(yellow((await pixels(up.rawPayload)).at(20, 20)), `${url}: the sprite's pattern, now that it can be read`)
  }
  assert.ok(asked.some((u) => u.endsWith('.json?key=abc')), `the query string kept, the suffix before it: ${asked}`)

  // A sprite of a list whose id is `_` (its icons are `_:name`).
  mkdirSync(join(styles, 'listed'))
  writeFileSync(join(styles, 'listed', 'style.json'), JSON.stringify({ version: 8, sources: {}, sprite: [{ id: '_', url: 'sprite' }], layers: [{ id: 'pattern', type: 'background', paint: { 'background-pattern': '_:own' } }] }))
  writeFileSync(join(styles, 'listed', 'sprite.json'), spriteJson(1))
  writeFileSync(join(styles, 'listed', 'sprite.png'), sheet)
  await app.reloadStyles()
  const listed = await app.inject({ url: '/styles/listed/1/0/0.png' })
  assert.equal(listed.statusCode, 200, listed.body)
  assert.ok(yellow((await pixels(listed.rawPayload)).at(20, 20)), 'the listed sprite `_` draws its pattern')
})

test('a sprite file replaced is drawn at once: new tiles and tiles drawn before, static images, the list form\'s @2x', async (t) => {
  if (!needs(t, choice.backend !== null, RENDERER_MISSING)) return
  const { dir, tiles, styles } = setUp(t)
  const sheet = (background) => sharp({ create: { width: 16, height: 16, channels: 4, background } }).png().toBuffer()
  const yellow = { r: 255, g: 255, b: 0, alpha: 1 }
  const magenta = { r: 255, g: 0, b: 255, alpha: 1 }
  const spriteJson = (ratio) => JSON.stringify({ own: { x: 0, y: 0, width: 16, height: 16, pixelRatio: ratio } })
  const style = (sprite, icon) => JSON.stringify({ version: 8, sources: {}, sprite, layers: [{ id: 'pattern', type: 'background', paint: { 'background-pattern': icon } }] })
  mkdirSync(join(styles, 'one'))
  writeFileSync(join(styles, 'one', 'style.json'), style('sprites/sheet', 'own'))
  mkdirSync(join(styles, 'one', 'sprites'))
  writeFileSync(join(styles, 'one', 'sprites', 'sheet.json'), spriteJson(1))
  writeFileSync(join(styles, 'one', 'sprites', 'sheet.png'), await sheet(yellow))
  mkdirSync(join(styles, 'listed'))
  writeFileSync(join(styles, 'listed', 'style.json'), style([{ id: 's', url: 'sheet' }], 's:own'))
  for (const ratio of ['', '@2x']) {
    writeFileSync(join(styles, 'listed', `sheet${ratio}.json`), spriteJson(ratio === '' ? 1 : 2))
    writeFileSync(join(styles, 'listed', `sheet${ratio}.png`), await sheet(yellow))
  }
  const app = await makeApp(t, { paths: [tiles], styles, tileDir: { dir: join(dir, 'on-disk') } })
  const colour = async (url) => {
    const res = await app.inject({ url })
    assert.equal(res.statusCode, 200, `${url}: ${res.body}`)
    return (await pixels(res.rawPayload)).at(20, 20).slice(0, 3)
  }
  const isYellow = ([r, g, b]) => r > 200 && g > 200 && b < 60
  const isMagenta = ([r, g, b]) => r > 200 && g < 60 && b > 200
  for (const url of ['/styles/one/1/0/0.png', '/styles/one/static/0,0,1/64x64.png', '/styles/listed/1/0/0@2x.png']) assert.ok(isYellow(await colour(url)), url)
  await app.tileDir.idle()

  // Only the PNGs change (same size, same JSON): the engine had loaded the old sheet for the style's registration.
  await new Promise((resolve) => setTimeout(resolve, 20))
  writeFileSync(join(styles, 'one', 'sprites', 'sheet.png'), await sheet(magenta))
  writeFileSync(join(styles, 'listed', 'sheet@2x.png'), await sheet(magenta))
  await app.reloadStyles()
  assert.ok(!existsSync(join(dir, 'on-disk', 'styles', 'one', '1', '0', '0.png')), 'the tiles of the old sprite left the tile directory')
  for (const url of ['/styles/one/1/0/0.png', '/styles/one/1/1/1.png', '/styles/one/static/0,0,1/64x64.png', '/styles/listed/1/0/0@2x.png']) {
    assert.ok(isMagenta(await colour(url)), `${url}: drawn with the new sprite`)
  }
  assert.ok(isYellow(await colour('/styles/listed/1/0/0.png')), 'the 1x sheet of the list form did not change')
})

test('a font range replaced while serving (watched) is drawn anew: rendered tiles and static images use its new glyphs', { skip: !HAVE_FIXTURES && 'needs ../shared/fixtures' }, async (t) => {
  if (!needs(t, choice.backend !== null, RENDERER_MISSING)) return
  const { dir, tiles, styles } = setUp(t)
  const fonts = join(dir, 'fonts')
  mkdirSync(join(fonts, 'Label'), { recursive: true })
  const range = (font) => readFileSync(join(FIXTURES, 'styles', 'glyphs', font, '0-255.pbf'))
  writeFileSync(join(fonts, 'Label', '0-255.pbf'), range('Roboto Regular'))
  mkdirSync(join(styles, 'text'))
  writeFileSync(join(styles, 'text', 'point.geojson'), JSON.stringify({ type: 'Feature', properties: {}, geometry: { type: 'Point', coordinates: [-45, 40.979898] } }))
  writeFileSync(join(styles, 'text', 'style.json'), JSON.stringify({
    version: 8,
    glyphs: '{fontstack}/{range}.pbf',
    sources: { pt: { type: 'geojson', data: 'point.geojson' } },
    layers: [
      { id: 'bg', type: 'background', paint: { 'background-color': '#ffffff' } },
      { id: 'label', type: 'symbol', source: 'pt', layout: { 'text-field': 'Hamburgefonstiv', 'text-font': ['Label'], 'text-size': 32 }, paint: { 'text-color': '#000000' } },
    ],
  }))
  const app = await makeApp(t, { paths: [tiles], styles, fonts, watch: true, watchDebounceMs: 50 })
  const urls = ['/styles/text/512/2/1/1.png', '/styles/text/static/-45,40.98,2/256x128.png']
  const drawn = async () => Promise.all(urls.map(async (url) => {
    const res = await app.inject({ url })
    assert.equal(res.statusCode, 200, `${url}: ${res.body}`)
    return res.rawPayload
  }))
  const before = await drawn()
  for (const png of before) assert.ok((await pixels(png)).data.some((v, i) => i % 4 === 0 && v < 100), 'the label is drawn')

  writeFileSync(join(fonts, 'Label', '0-255.pbf'), range('Noto Sans Bold')) // another font's glyphs, in its place
  let after
  for (let tries = 0; tries < 20; tries++) {
    await new Promise((resolve) => setTimeout(resolve, 150))
    after = await drawn()
    if (after.every((png, i) => !png.equals(before[i]))) break
  }
  for (const [i, url] of urls.entries()) assert.ok(!after[i].equals(before[i]), `${url}: drawn with the new glyphs`)
})

test('a style naming another style\'s sprite or GeoJSON file by this server\'s URL is drawn anew when they change', async (t) => {
  if (!needs(t, choice.backend !== null, RENDERER_MISSING)) return
  const { tiles, styles } = setUp(t)
  const sheet = (background) => sharp({ create: { width: 16, height: 16, channels: 4, background } }).png().toBuffer()
  const point = (lon) => JSON.stringify({ type: 'Feature', properties: {}, geometry: { type: 'Point', coordinates: [lon, 40.979898] } })
  mkdirSync(join(styles, 'owner'))
  writeFileSync(join(styles, 'owner', 'style.json'), JSON.stringify({ version: 8, sprite: 'sprite', sources: { pt: { type: 'geojson', data: 'point.geojson' } }, layers: [{ id: 'pt', type: 'circle', source: 'pt' }] }))
  writeFileSync(join(styles, 'owner', 'sprite.json'), JSON.stringify({ own: { x: 0, y: 0, width: 16, height: 16, pixelRatio: 1 } }))
  writeFileSync(join(styles, 'owner', 'sprite.png'), await sheet({ r: 255, g: 255, b: 0, alpha: 1 }))
  writeFileSync(join(styles, 'owner', 'point.geojson'), point(-45))
  const base = 'https://maps.example.org'
  writeFileSync(join(styles, 'borrower.json'), JSON.stringify({
    version: 8,
    sprite: `${base}/styles/owner/sprite`,
    sources: { pt: { type: 'geojson', data: `${base}/styles/owner/files/point.geojson` } },
    layers: [{ id: 'pattern', type: 'background', paint: { 'background-pattern': 'own' } }, { id: 'pt', type: 'circle', source: 'pt', paint: { 'circle-color': '#00ff00', 'circle-radius': 10 } }],
  }))
  const app = await makeApp(t, { paths: [tiles], styles, publicUrl: base })
  const draw = async () => {
    const res = await app.inject({ url: '/styles/borrower/512/2/1/1.png' })
    assert.equal(res.statusCode, 200, res.body)
    const { at } = await pixels(res.rawPayload)
    return { corner: at(20, 20).slice(0, 3), middle: at(256, 256).slice(0, 3) }
  }
  assert.deepEqual(await draw(), { corner: [255, 255, 0], middle: [0, 255, 0] }, 'the other style\'s sprite and point')

  writeFileSync(join(styles, 'owner', 'sprite.png'), await sheet({ r: 255, g: 0, b: 255, alpha: 1 }))
  writeFileSync(join(styles, 'owner', 'point.geojson'), point(-30))
  await app.reloadStyles()
  assert.deepEqual(await draw(), { corner: [255, 0, 255], middle: [255, 0, 255] }, 'its new sprite, and its point moved away')
})

test('styles named in any script or with a # render, their sprites and GeoJSON files drawn', async (t) => {
  if (!needs(t, choice.backend !== null, RENDERER_MISSING)) return
  const { tiles, styles } = setUp(t)
  const sheet = await sharp({ create: { width: 16, height: 16, channels: 4, background: { r: 255, g: 255, b: 0, alpha: 1 } } }).png().toBuffer()
  for (const id of ['café', 'hash#1', '地図 2']) {
    mkdirSync(join(styles, id))
    writeFileSync(join(styles, id, 'style.json'), JSON.stringify({
      ...dotsStyle(),
      sources: { ...dotsStyle().sources, pt: { type: 'geojson', data: 'point.geojson' } },
      sprite: 'sprite',
      layers: [{ id: 'pattern', type: 'background', paint: { 'background-pattern': 'own' } }, ...dotsStyle().layers.slice(1), { id: 'pt', type: 'circle', source: 'pt', paint: { 'circle-color': '#00ff00', 'circle-radius': 10 } }],
    }))
    writeFileSync(join(styles, id, 'sprite.json'), JSON.stringify({ own: { x: 0, y: 0, width: 16, height: 16, pixelRatio: 1 } }))
    writeFileSync(join(styles, id, 'sprite.png'), sheet)
    writeFileSync(join(styles, id, 'point.geojson'), JSON.stringify({ type: 'Feature', properties: {}, geometry: { type: 'Point', coordinates: [-45, 40.979898] } }))
  }
  const app = await makeApp(t, { paths: [tiles], styles })
  for (const id of ['café', 'hash#1', '地図 2']) {
    const res = await app.inject({ url: `/styles/${encodeURIComponent(id)}/512/2/1/1.png` })
    assert.equal(res.statusCode, 200, `${id}: ${res.body}`)
    const { at } = await pixels(res.rawPayload)
    assert.deepEqual(at(20, 20).slice(0, 3), [255, 255, 0], `${id}: the sprite's pattern`)
    assert.deepEqual(at(256, 256).slice(0, 3), [0, 255, 0], `${id}: the GeoJSON file's point over the set's dot`)
  }
})

test('a relative sprite with a query (`sprite?v=2`, a cache-buster) is drawn from its files', async (t) => {
  if (!needs(t, choice.backend !== null, RENDERER_MISSING)) return
  const { tiles, styles } = setUp(t)
  const sheet = await sharp({ create: { width: 16, height: 16, channels: 4, background: { r: 255, g: 255, b: 0, alpha: 1 } } }).png().toBuffer()
  mkdirSync(join(styles, 'spq'))
  writeFileSync(join(styles, 'spq', 'style.json'), JSON.stringify({ version: 8, sources: {}, sprite: 'sprite?v=2', layers: [{ id: 'pattern', type: 'background', paint: { 'background-pattern': 'own' } }] }))
  writeFileSync(join(styles, 'spq', 'sprite.json'), JSON.stringify({ own: { x: 0, y: 0, width: 16, height: 16, pixelRatio: 1 } }))
  writeFileSync(join(styles, 'spq', 'sprite.png'), sheet)
  const app = await makeApp(t, { paths: [tiles], styles })
  for (const url of ['/styles/spq/1/0/0.png', '/styles/spq/1/0/0@2x.png', '/styles/spq/static/0,0,1/64x64.png']) {
    const res = await app.inject({ url })
    assert.equal(res.statusCode, 200, `${url}: ${res.body}`)
    assert.deepEqual((await pixels(res.rawPayload)).at(20, 20).slice(0, 3), [255, 255, 0], `${url}: the sprite's pattern`)
  }
})

test('a remote source that cannot be read is drawn empty and the rest of the map drawn; those tiles are kept briefly, logged once per host', async (t) => {
  if (!needs(t, choice.backend !== null, RENDERER_MISSING)) return
  const { dir, tiles, styles } = setUp(t)
  // A port that nothing listens on yet: the tiles' server is down, then comes up.
  const probe = createServer().listen(0, '127.0.0.1')
  await once(probe, 'listening')
  const port = probe.address().port
  probe.close()
  // The dots over a remote source: raster tiles at that port, or a TileJSON on a host that does not resolve.
  const withRemote = (source, layer) => {
    const style = dotsStyle()
    return JSON.stringify({ ...style, sources: { ...style.sources, far: source }, layers: [style.layers[0], { id: 'far', source: 'far', ...layer }, style.layers[1]] })
  }
  writeFileSync(join(styles, 'remtiles.json'), withRemote({ type: 'raster', tiles: [`http://127.0.0.1:${port}/{z}/{x}/{y}.png`], tileSize: 256 }, { type: 'raster' }))
  writeFileSync(join(styles, 'remjson.json'), withRemote({ type: 'vector', url: 'https://tiles.example.invalid/roads.json' }, { type: 'line', 'source-layer': 'roads' }))
  const logs = []
  const app = await makeApp(t, { paths: [tiles], styles, tileDir: { dir: join(dir, 'on-disk') }, render: { incompleteTtlS: 2 } }, { logs })

  for (const url of ['/styles/remtiles/512/2/1/1.png', '/styles/remtiles/512/2/2/1.png', '/styles/remjson/512/2/1/1.png', '/styles/remtiles/static/0,0,1/64x64.png']) {
    const res = await app.inject({ url })
    assert.equal(res.statusCode, 200, `${url}: ${res.body.slice(0, 200)}`)
    const px = await pixels(res.rawPayload)
    const middle = Math.floor(px.info.width / 2)
    assert.deepEqual(px.at(middle, middle).slice(0, 3), [0, 0, 255], `${url}: the local set's dot, drawn`)
    assert.deepEqual(px.at(2, 2).slice(0, 3), [255, 0, 0], `${url}: the background, under a remote source drawn empty`)
    assert.equal(res.headers['cache-control'], 'public, max-age=2', `${url}: incomplete, so kept briefly`)
  }
  await app.tileDir.idle()
  assert.ok(!existsSync(join(dir, 'on-disk', 'styles', 'remtiles', '512', '2', '1', '1.png')), 'an incomplete tile is not written to the tile directory')
  const warned = logs.filter((l) => /remote source/.test(l.msg))
  assert.deepEqual(warned.map((l) => l.host).sort(), [`127.0.0.1:${port}`, 'tiles.example.invalid'], 'one line per failing host, not one per tile')

  // The host comes up: once the incomplete tiles' lifetime is over, the style is drawn with its tiles, cached as usual.
  const green = await sharp({ create: { width: 256, height: 256, channels: 4, background: { r: 0, g: 255, b: 0, alpha: 1 } } }).png().toBuffer()
  const server = createServer((req, res) => res.writeHead(200, { 'content-type': 'image/png' }).end(green)).listen(port, '127.0.0.1')
  await once(server, 'listening')
  t.after(() => server.close())
  let res
  for (let tries = 0; tries < 5; tries++) {
    await new Promise((resolve) => setTimeout(resolve, 1100))
    res = await app.inject({ url: `/styles/remtiles/512/2/${tries}/2.png` })
    if (res.headers['cache-control'] !== 'public, max-age=2') break
  }
  assert.equal(res.statusCode, 200, res.body.slice(0, 200))
  assert.equal(res.headers['cache-control'], app.config.cacheControl, 'complete again: the tiles\' usual lifetime')
  assert.deepEqual((await pixels(res.rawPayload)).at(2, 2).slice(0, 3), [0, 255, 0], 'the remote tiles, drawn')
  assert.ok(logs.some((l) => /answers again/.test(l.msg) && l.host === `127.0.0.1:${port}`), 'its return is logged')
})

/** A port nothing listens on (a server that is down), on 127.0.0.1. */
async function freePort () {
  const probe = createServer().listen(0, '127.0.0.1')
  await once(probe, 'listening')
  const { port } = probe.address()
  await new Promise((resolve) => probe.close(resolve))
  return port
}

/** `handler` listening on 127.0.0.1 (on `port`, or any), closed after the test: its port. */
async function remoteHost (t, handler, port = 0) {
  const server = createServer(handler).listen(port, '127.0.0.1')
  await once(server, 'listening')
  t.after(() => { server.closeAllConnections(); server.close() })
  return server.address().port
}

/** The dots over a remote raster source at `tiles` (tile URLs), drawn under the dots. */
function dotsOverRemote (tiles) {
  const style = dotsStyle()
  return JSON.stringify({ ...style, sources: { ...style.sources, far: { type: 'raster', tiles, tileSize: 256 } }, layers: [style.layers[0], { id: 'far', type: 'raster', source: 'far' }, style.layers[1]] })
}

test('remote sources: user and password in a URL sent as Basic auth; logs name no password, key or token', async (t) => {
  if (!needs(t, choice.backend !== null, RENDERER_MISSING)) return
  const { tiles, styles } = setUp(t)
  const green = await sharp({ create: { width: 256, height: 256, channels: 4, background: { r: 0, g: 255, b: 0, alpha: 1 } } }).png().toBuffer()
  const expected = `Basic ${Buffer.from('map user:s3cret').toString('base64')}`
  const port = await remoteHost(t, (req, res) => {
    if (req.url.startsWith('/down/')) return res.writeHead(500).end()
    if (req.headers.authorization !== expected) return res.writeHead(401).end()
    res.writeHead(200, { 'content-type': 'image/png' }).end(green)
  })
  const refused = await freePort()
  writeFileSync(join(styles, 'basic.json'), dotsOverRemote([`http://map%20user:s3cret@127.0.0.1:${port}/{z}/{x}/{y}.png?key=k3y`]))
  writeFileSync(join(styles, 'token.json'), dotsOverRemote([`http://127.0.0.1:${port}/down/{z}/{x}/{y}.png?access_token=t0ken&v=2`]))
  writeFileSync(join(styles, 'gone.json'), dotsOverRemote([`http://u:s3cret@127.0.0.1:${refused}/{z}/{x}/{y}.png?key=k3y`]))
  const logs = []
  const app = await makeApp(t, { paths: [tiles], styles, render: { incompleteTtlS: 2 } }, { logs })

  const res = await app.inject({ url: '/styles/basic/512/2/1/1.png' })
  assert.equal(res.statusCode, 200, res.body.slice(0, 200))
  assert.deepEqual((await pixels(res.rawPayload)).at(2, 2).slice(0, 3), [0, 255, 0], 'the tiles of a server asking for Basic auth, drawn')
  assert.equal(res.headers['cache-control'], app.config.cacheControl, 'complete: the usual lifetime')
  for (const id of ['token', 'gone']) {
    const failed = await app.inject({ url: `/styles/${id}/512/2/1/1.png` })
    assert.equal(failed.statusCode, 200, failed.body.slice(0, 200))
    assert.equal(failed.headers['cache-control'], 'public, max-age=2', `${id}: incomplete`)
  }
  const warned = logs.filter((l) => /remote source/.test(l.msg))
  assert.deepEqual(warned.map((l) => [l.style, l.reason]).sort(), [['gone', 'ECONNREFUSED'], ['token', 'HTTP 500']], 'each failing host once, and why')
  const urlOf = (id) => warned.find((l) => l.style === id).url
  assert.match(urlOf('gone'), new RegExp(`^http://127\\.0\\.0\\.1:${refused}/\\d+/\\d+/\\d+\\.png\\?key=…$`), 'its origin and path; the query\'s values left out')
  assert.match(urlOf('token'), new RegExp(`^http://127\\.0\\.0\\.1:${port}/down/\\d+/\\d+/\\d+\\.png\\?access_token=…&v=…$`))
  const all = JSON.stringify(logs)
  for (const secret of ['s3cret', 'k3y', 't0ken']) assert.ok(!all.includes(secret), `no log line holds ${secret}`)
})

test('a remote host failing again after it answered is logged again; its tiles drawn and kept as usual in between', async (t) => {
  if (!needs(t, choice.backend !== null, RENDERER_MISSING)) return
  const { tiles, styles } = setUp(t)
  const green = await sharp({ create: { width: 256, height: 256, channels: 4, background: { r: 0, g: 255, b: 0, alpha: 1 } } }).png().toBuffer()
  let down = true
  const port = await remoteHost(t, (req, res) => (down ? res.writeHead(500).end() : res.writeHead(200, { 'content-type': 'image/png' }).end(green)))
  writeFileSync(join(styles, 'flaky.json'), dotsOverRemote([`http://127.0.0.1:${port}/{z}/{x}/{y}.png`]))
  const logs = []
  const app = await makeApp(t, { paths: [tiles], styles, render: { incompleteTtlS: 1 } }, { logs })
  const said = () => logs.filter((l) => l.host === `127.0.0.1:${port}`).map((l) => (/answers again/.test(l.msg) ? 'back' : /remote source/.test(l.msg) ? 'down' : l.msg))
  let x = 0
  const tile = async () => {
    const res = await app.inject({ url: `/styles/flaky/512/3/${x++}/3.png` }) // a new tile each time: asked of the host
    assert.equal(res.statusCode, 200, res.body.slice(0, 200))
    return { incomplete: res.headers['cache-control'] === 'public, max-age=1', remote: (await pixels(res.rawPayload)).at(2, 2).slice(0, 3) }
  }
  /** Tiles until one is complete (the style is registered afresh once its incomplete tiles' lifetime is over). */
  const untilComplete = async () => {
    for (let tries = 0; tries < 6; tries++) {
      await new Promise((resolve) => setTimeout(resolve, 600))
      const got = await tile()
      if (!got.incomplete) return got
    }
    assert.fail('the style was never drawn complete again')
  }

  assert.deepEqual(await tile(), { incomplete: true, remote: [255, 0, 0] }, 'the host down: drawn empty, kept briefly')
  assert.deepEqual(said(), ['down'])
  down = false
  assert.deepEqual((await untilComplete()).remote, [0, 255, 0], 'the host up: its tiles drawn, kept as usual')
  assert.deepEqual(said(), ['down', 'back'])
  down = true
  assert.deepEqual(await tile(), { incomplete: true, remote: [255, 0, 0] }, 'down again')
  assert.deepEqual(said(), ['down', 'back', 'down'], 'the second outage is logged as the first was')
  down = false
  await untilComplete()
  assert.deepEqual(said(), ['down', 'back', 'down', 'back'])
})

test('closing the app aborts remote fetches in flight: it closes at once, not after their timeout', async (t) => {
  if (!needs(t, choice.backend !== null, RENDERER_MISSING)) return
  const { tiles, styles } = setUp(t)
  let asked = null
  let hungUp = null
  const port = await remoteHost(t, (req) => { // never answers
    asked ??= Date.now()
    req.socket.on('close', () => { hungUp ??= Date.now() })
  })
  writeFileSync(join(styles, 'hangs.json'), dotsOverRemote([`http://127.0.0.1:${port}/{z}/{x}/{y}.png`]))
  const app = await makeApp(t, { paths: [tiles], styles })
  const pending = app.inject({ url: '/styles/hangs/512/2/1/1.png' }).catch((err) => err)
  for (let i = 0; i < 100 && asked === null; i++) await new Promise((resolve) => setTimeout(resolve, 50))
  assert.ok(asked !== null, 'the remote host was asked')
  const closing = Date.now()
  await app.close()
  await pending
  for (let i = 0; i < 40 && hungUp === null; i++) await new Promise((resolve) => setTimeout(resolve, 50))
  assert.ok(hungUp !== null && hungUp - closing < 1000, `the fetch aborted at close (its connection closed ${hungUp === null ? 'not within 2 s' : `${hungUp - closing} ms after`})`)
})

test('a remote tile refused (403 as beyond a provider\'s zooms or plan, 400, 401, 410) is no tile there: drawn empty, kept as usual, said once', async (t) => {
  if (!needs(t, choice.backend !== null, RENDERER_MISSING)) return
  const { tiles, styles } = setUp(t)
  // Every tile refused (MapLibre Native asks for the parent of a tile it did not get: a host serving lower zooms
  // would have them drawn enlarged).
  const port = await remoteHost(t, (req, res) => res.writeHead(Number(req.url.split('/')[1])).end('not in your plan'))
  for (const status of [400, 401, 403, 410]) writeFileSync(join(styles, `refused${status}.json`), dotsOverRemote([`http://127.0.0.1:${port}/${status}/{z}/{x}/{y}.png?key=k3y`]))
  const logs = []
  const app = await makeApp(t, { paths: [tiles], styles, render: { incompleteTtlS: 2 } }, { logs })
  for (const status of [400, 401, 403, 410]) {
    for (const url of [`/styles/refused${status}/512/2/1/1.png`, `/styles/refused${status}/static/0,0,1/64x64.png`]) {
      const res = await app.inject({ url })
      assert.equal(res.statusCode, 200, `${url}: ${res.body.slice(0, 200)}`)
      const px = await pixels(res.rawPayload)
      const middle = Math.floor(px.info.width / 2)
      assert.deepEqual(px.at(2, 2).slice(0, 3), [255, 0, 0], `${url}: the remote source drawn empty, the background under it`)
      assert.deepEqual(px.at(middle, middle).slice(0, 3), [0, 0, 255], `${url}: the local set's dot`)
      assert.equal(res.headers['cache-control'], app.config.cacheControl, `${url}: complete, kept as usual`)
    }
  }
  assert.deepEqual(logs.filter((l) => /remote source/.test(l.msg)), [], 'no remote source said to fail')
  const refused = logs.filter((l) => /refuses tiles/.test(l.msg))
  assert.deepEqual(refused.map((l) => l.reason).sort(), ['HTTP 400', 'HTTP 401', 'HTTP 403', 'HTTP 410'], 'each refusal said once')
  assert.ok(!JSON.stringify(refused).includes('k3y'))
})

test('a remote image, sprite or pmtiles://https://… archive that fails is drawn without it, as remote tiles are: kept briefly, logged once per host; drawn once it answers', async (t) => {
  if (!needs(t, choice.backend !== null, RENDERER_MISSING)) return
  const { dir, tiles, styles } = setUp(t)
  const colour = (r, g, b) => sharp({ create: { width: 256, height: 256, channels: 4, background: { r, g, b, alpha: 1 } } }).png().toBuffer()
  const green = await colour(0, 255, 0)
  const yellow = await colour(255, 255, 0)
  writePmtiles(join(dir, 'far.pmtiles'), { tiles: pyramid(0, 2, 4).map(([z, x, y]) => ({ z, x, y, data: green })), tileType: 'png', tileCompression: 'none' })
  const archive = readFileSync(join(dir, 'far.pmtiles'))
  const files = { '/img.png': green, '/s/sheet.json': Buffer.from(JSON.stringify({ own: { x: 0, y: 0, width: 16, height: 16, pixelRatio: 1 } })), '/s/sheet.png': yellow }
  let down = true
  const port = await remoteHost(t, (req, res) => {
    if (down) return res.writeHead(500).end()
    if (req.url === '/far.pmtiles') { // read by ranges
      const [, from, to] = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '') ?? []
      if (from === undefined) return res.end(archive)
      return res.writeHead(206, { 'content-range': `bytes ${from}-${Math.min(Number(to), archive.length - 1)}/${archive.length}` }).end(archive.subarray(Number(from), Number(to) + 1))
    }
    const file = files[req.url.replace(/\?.*$/, '')]
    return file === undefined ? res.writeHead(404).end() : res.end(file)
  })
  const origin = `http://127.0.0.1:${port}`
  const under = (id, source) => {
    const style = dotsStyle()
    writeFileSync(join(styles, `${id}.json`), JSON.stringify({ ...style, sources: { ...style.sources, far: source }, layers: [style.layers[0], { id: 'far', type: 'raster', source: 'far' }, style.layers[1]] }))
  }
  under('remimage', { type: 'image', url: `${origin}/img.png`, coordinates: [[-180, 85], [180, 85], [180, -85], [-180, -85]] })
  under('rempm', { type: 'raster', url: `pmtiles://${origin}/far.pmtiles`, tileSize: 256 })
  writeFileSync(join(styles, 'remsprite.json'), JSON.stringify({ ...dotsStyle(), sprite: `${origin}/s/sheet?key=k3y`, layers: [dotsStyle().layers[0], { id: 'pattern', type: 'background', paint: { 'background-pattern': 'own' } }, dotsStyle().layers[1]] }))
  const logs = []
  const app = await makeApp(t, { paths: [tiles], styles, render: { incompleteTtlS: 1 } }, { logs })
  const urls = ['/styles/remimage/512/2/1/1.png', '/styles/rempm/512/2/1/1.png', '/styles/remsprite/512/2/1/1.png', '/styles/remsprite/static/0,0,1/64x64.png']
  const draw = async (url) => {
    const res = await app.inject({ url })
    assert.equal(res.statusCode, 200, `${url}: ${res.body.slice(0, 200)}`)
    const px = await pixels(res.rawPayload)
    const middle = Math.floor(px.info.width / 2)
    assert.deepEqual(px.at(middle, middle).slice(0, 3), [0, 0, 255], `${url}: the local set's dot, drawn`)
    return { corner: px.at(2, 2).slice(0, 3), incomplete: res.headers['cache-control'] === 'public, max-age=1' }
  }
  for (const url of urls) assert.deepEqual(await draw(url), { corner: [255, 0, 0], incomplete: true }, `${url}: the origin down, drawn without it, kept briefly`)
  const warned = logs.filter((l) => /remote source/.test(l.msg))
  assert.deepEqual(warned.map((l) => l.host), [`127.0.0.1:${port}`], 'logged once for the host')
  assert.ok(!JSON.stringify(logs).includes('k3y'), 'no key in the log')

  down = false
  for (const [i, url] of urls.entries()) {
    let got
    for (let tries = 0; tries < 6; tries++) {
      await new Promise((resolve) => setTimeout(resolve, 400))
      got = await draw(url.replace('/1/1.png', `/${tries}/2.png`))
      if (!got.incomplete) break
    }
    assert.deepEqual(got, { corner: i < 2 ? [0, 255, 0] : [255, 255, 0], incomplete: false }, `${url}: the origin up, drawn with it, kept as usual`)
  }
})

test('a source naming a set of the other kind (vector over PNG or GIF tiles, raster over vector tiles) is drawn empty, the rest drawn; logged once naming it', async (t) => {
  if (!needs(t, choice.backend !== null, RENDERER_MISSING)) return
  const { tiles, styles } = setUp(t)
  const green = await sharp({ create: { width: 256, height: 256, channels: 3, background: { r: 0, g: 255, b: 0 } } }).png().toBuffer()
  writeMbtiles(join(tiles, 'relief.mbtiles'), { tiles: pyramid(0, 2, 4).map(([z, x, y]) => ({ z, x, y, data: green })), metadata: { format: 'png', minzoom: '0', maxzoom: '2' } })
  const gif = await sharp(green).gif().toBuffer()
  writeMbtiles(join(tiles, 'relief-gif.mbtiles'), { tiles: pyramid(0, 2, 4).map(([z, x, y]) => ({ z, x, y, data: gif })), metadata: { format: 'gif', minzoom: '0', maxzoom: '2' } })
  const withWrong = (source, layer) => {
    const style = dotsStyle()
    return JSON.stringify({ ...style, sources: { ...style.sources, wrong: source }, layers: [style.layers[0], { id: 'wrong', source: 'wrong', ...layer }, style.layers[1]] })
  }
  writeFileSync(join(styles, 'vector-png.json'), withWrong({ type: 'vector', url: 'mbtiles://relief' }, { type: 'line', 'source-layer': 'points', paint: { 'line-color': '#00ff00' } }))
  writeFileSync(join(styles, 'vector-gif.json'), withWrong({ type: 'vector', url: 'mbtiles://relief-gif' }, { type: 'line', 'source-layer': 'points', paint: { 'line-color': '#00ff00' } }))
  writeFileSync(join(styles, 'raster-pbf.json'), withWrong({ type: 'raster', url: 'mbtiles://dots' }, { type: 'raster' }))
  const logs = []
  const app = await makeApp(t, { paths: [tiles], styles }, { logs })
  for (const id of ['vector-png', 'vector-gif', 'raster-pbf']) {
    for (const url of [`/styles/${id}/512/2/1/1.png`, `/styles/${id}/512/2/2/1.png`]) {
      const res = await app.inject({ url })
      assert.equal(res.statusCode, 200, `${url}: ${res.body.slice(0, 200)}`)
      const px = await pixels(res.rawPayload)
      assert.deepEqual(px.at(256, 256).slice(0, 3), [0, 0, 255], `${url}: the dots, drawn`)
      assert.deepEqual(px.at(5, 5).slice(0, 3), [255, 0, 0], `${url}: the background; the source of the other kind drawn empty`)
    }
    const said = logs.filter((l) => l.level === 40 && l.style === id)
    assert.equal(said.length, 1, `${id}: logged once: ${JSON.stringify(said)}`)
    assert.equal(said[0].source, 'wrong')
    assert.match(JSON.stringify(said[0]), { 'vector-png': /relief.*png/, 'vector-gif': /relief-gif.*gif/, 'raster-pbf': /dots.*pbf/ }[id])
  }
})

test('layers using an expression the renderer does not support (global-state) are said once per style revision, by name', async (t) => {
  if (!needs(t, choice.backend === 'mapli', 'the unsupported expressions are known for mapli only')) return
  const { styles } = setUp(t)
  const line = { type: 'FeatureCollection', features: [{ type: 'Feature', properties: {}, geometry: { type: 'LineString', coordinates: [[-20, 0], [20, 0]] } }] }
  const style = (paint, filter) => JSON.stringify({
    version: 8,
    state: { lineColor: { default: '#00aa00' }, show: { default: true } },
    sources: { l: { type: 'geojson', data: line } },
    layers: [
      { id: 'bg', type: 'background', paint: { 'background-color': '#ffffff' } },
      { id: 'stateful', type: 'line', source: 'l', paint: { 'line-width': 10, ...paint }, ...(filter ? { filter } : {}) },
      { id: 'plain', type: 'line', source: 'l', paint: { 'line-color': '#0000ff', 'line-width': 2, 'line-offset': 20 } },
      { id: 'literal', type: 'line', source: 'l', paint: { 'line-color': ['to-color', ['at', 0, ['literal', ['#0000ff', 'global-state']]]], 'line-width': ['match', ['get', 'kind'], ['global-state', 'x'], 3, 2], 'line-offset': -20 } },
    ],
  })
  writeFileSync(join(styles, 'expr.json'), style({ 'line-color': ['coalesce', ['global-state', 'lineColor'], '#00aa00'] }, ['all', ['global-state', 'show']]))
  writeFileSync(join(styles, 'hcl.json'), style({ 'line-color': ['interpolate-hcl', ['linear'], ['zoom'], 0, '#00aa00', 10, '#00aa00'] }))
  const logs = []
  const app = await makeApp(t, { styles }, { logs })
  for (const url of ['/styles/expr/static/0,0,2/100x100.png', '/styles/expr/1/0/0.png', '/styles/hcl/1/0/0.png']) {
    const res = await app.inject({ url })
    assert.equal(res.statusCode, 200, `${url}: ${res.body.slice(0, 300)}`)
  }
  const said = (id) => logs.filter((l) => l.level === 40 && l.style === id && /does not support/.test(l.msg))
  assert.equal(said('expr').length, 1, 'once for the revision, not per render')
  assert.deepEqual(said('expr')[0].layers, [{ layer: 'stateful', expression: 'global-state' }], 'the layer and the expression; a literal or a match label is data')
  assert.deepEqual(said('hcl')[0].layers, [{ layer: 'stateful', expression: 'interpolate-hcl' }])
  writeFileSync(join(styles, 'expr.json'), style({ 'line-color': ['global-state', 'lineColor'] }))
  await app.reloadStyles()
  assert.equal((await app.inject({ url: '/styles/expr/1/0/0.png' })).statusCode, 200)
  assert.equal(said('expr').length, 2, 'said again for a new revision')
})

test('static images: marker icons from the icons folder, as tileserver-gl draws them; none from elsewhere', async (t) => {
  if (!needs(t, choice.backend !== null, RENDERER_MISSING)) return
  const { dir, tiles, styles } = setUp(t)
  const solid = (width, height, [r, g, b]) => sharp({ create: { width, height, channels: 4, background: { r, g, b, alpha: 1 } } }).png().toBuffer()
  // A style with a sprite of its own, filling the background with its icon 'own' (yellow): still drawn beside the markers'.
  mkdirSync(join(styles, 'pins'))
  writeFileSync(join(styles, 'pins', 'style.json'), JSON.stringify({ version: 8, sources: {}, sprite: 'sprite', layers: [{ id: 'bg', type: 'background', paint: { 'background-pattern': 'own' } }] }))
  writeFileSync(join(styles, 'pins', 'sprite.json'), JSON.stringify({ own: { x: 0, y: 0, width: 16, height: 16, pixelRatio: 1 } }))
  writeFileSync(join(styles, 'pins', 'sprite.png'), await solid(16, 16, [255, 255, 0]))
  const icons = join(dir, 'icons')
  mkdirSync(join(icons, 'sub'), { recursive: true })
  writeFileSync(join(icons, 'pin.png'), await solid(20, 30, [255, 0, 255]))
  writeFileSync(join(icons, 'sub', 'flag.png'), await solid(10, 10, [0, 255, 255]))
  writeFileSync(join(icons, 'notes.png'), 'not an image')
  writeFileSync(join(dir, 'secret.png'), await solid(10, 10, [0, 0, 0]))
  symlinkSync(join(dir, 'secret.png'), join(icons, 'link.png'))
  const app = await makeApp(t, { paths: [tiles], styles, icons })

  // Zoom 2 of 256 px maps: 1024 px a world, lon 0 at the centre (100, 100), lon -30 at 100 - 85 px.
  const url = '/styles/pins/static/0,0,2/200x200.png?marker=0,0|pin.png&marker=0,0|pin.png|scale:2|offset:40,0&marker=-30,0|sub/flag.png'
  const res = await app.inject({ url })
  assert.equal(res.statusCode, 200, res.body)
  const img = await pixels(res.rawPayload)
  const magenta = ([r, g, b]) => r > 200 && g < 60 && b > 200
  const cyan = ([r, g, b]) => r < 60 && g > 200 && b > 200
  const yellow = ([r, g, b]) => r > 200 && g > 200 && b < 60
  // An icon's bottom centre is on its point: pin.png (20x30) spans x 90-110, y 70-100.
  assert.ok(magenta(img.at(100, 85)) && magenta(img.at(92, 72)), `pin.png above 0,0: ${img.at(100, 85)}`)
  assert.ok(yellow(img.at(100, 104)) && yellow(img.at(100, 66)), `and only there: ${img.at(100, 104)} ${img.at(100, 66)}`)
  // scale:2 doubles it (40x60), offset:40,0 moves it 40 px right: x 120-160, y 40-100.
  assert.ok(magenta(img.at(140, 45)) && magenta(img.at(157, 97)), `the scaled, offset pin: ${img.at(140, 45)}`)
  assert.ok(yellow(img.at(140, 35)) && yellow(img.at(165, 90)), `and its edges: ${img.at(140, 35)} ${img.at(165, 90)}`)
  assert.ok(cyan(img.at(15, 95)), `an icon in a subfolder at -30,0: ${img.at(15, 95)}`)
  assert.ok(yellow(img.at(30, 30)), `the style's own sprite still fills the background: ${img.at(30, 30)}`)
  // @2x: icons keep their size in CSS pixels, so twice the device pixels.
  const retinaRes = await app.inject({ url: url.replace('200x200.png', '200x200@2x.png') })
  assert.equal(retinaRes.statusCode, 200, retinaRes.body)
  const retina = await pixels(retinaRes.rawPayload)
  assert.ok(magenta(retina.at(200, 145)) && magenta(retina.at(184, 198)), `@2x: ${retina.at(200, 145)}`)

  for (const [icon, why] of [['../secret.png', 'outside the folder'], ['link.png', 'a link out of it'], ['nope.png', 'missing'],
    ['notes.png', 'not an image'], [`${encodeURIComponent(join(dir, 'secret.png'))}`, 'an absolute path'], ['http://127.0.0.1:9/pin.png', 'remote, off'],
    ['pin.png|scale:0', 'scale'], ['pin.png|offset:x', 'offset']]) {
    const bad = await app.inject({ url: `/styles/pins/static/0,0,2/50x50.png?marker=0,0|${icon}` })
    assert.equal(bad.statusCode, 400, `${why}: ${bad.body}`)
    assert.ok(!bad.body.includes(dir) || icon.startsWith('%2F'), `no path the request did not give: ${bad.body}`)
  }
  const noFolder = await makeApp(t, { paths: [tiles], styles })
  const none = await noFolder.inject({ url: '/styles/pins/static/0,0,2/50x50.png?marker=0,0|pin.png' })
  assert.equal(none.statusCode, 400)
  assert.match(none.json().message, /icons folder/)

  // Remote icons from the URL prefixes allowed (render.allowRemoteMarkerIcons), fetched by the server.
  const pin = await solid(20, 30, [255, 0, 255])
  const huge = Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" width="16000" height="16000"/>')
  const server = createServer((req, res) => {
    if (req.url === '/icons/pin.png') return res.end(pin)
    if (req.url === '/icons/huge.svg') return res.end(huge)
    if (req.url === '/icons/moved.png') return res.writeHead(302, { location: '/icons/pin.png' }).end()
    res.writeHead(req.url === '/other/pin.png' ? 200 : 404).end(req.url === '/other/pin.png' ? pin : '')
  }).listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.after(() => server.close())
  const base = `http://127.0.0.1:${server.address().port}`
  const remote = await makeApp(t, { paths: [tiles], styles, render: { allowRemoteMarkerIcons: [`${base}/icons/`] } })
  const marker = (url) => `/styles/pins/static/0,0,2/200x200.png?marker=${encodeURIComponent(`0,0|${url}`)}`
  const fetched = await remote.inject({ url: marker(`${base}/icons/pin.png`) })
  assert.equal(fetched.statusCode, 200, fetched.body)
  assert.ok(magenta((await pixels(fetched.rawPayload)).at(100, 85)), 'a remote icon drawn')
  for (const [url, why] of [[`${base}/icons/gone.png`, 'missing'], [`${base}/other/pin.png`, 'not an allowed prefix'],
    [`${base}/icons/moved.png`, 'a redirect'], [`${base}/icons/huge.svg`, 'an image of 256 Mpx']]) {
    const bad = await remote.inject({ url: marker(url) })
    assert.equal(bad.statusCode, 400, `${why}: ${bad.body}`)
  }
})

test('a changed style is rendered anew: tiles of the old revision are not served again, from the tile directory neither', async (t) => {
  if (!needs(t, choice.backend !== null, RENDERER_MISSING)) return
  const { dir, tiles, styles } = setUp(t)
  const app = await makeApp(t, { paths: [tiles], styles, tileDir: { dir: join(dir, 'on-disk') } })
  const first = (await app.inject({ url: '/styles/dots/1/0/0.png' })).rawPayload
  const before = await pixels(first)
  assert.ok(before.at(5, 5)[0] > 200)
  await app.tileDir.idle()
  const onDisk = join(dir, 'on-disk', 'styles', 'dots', '1', '0', '0.png')
  assert.deepEqual(readFileSync(onDisk), first, 'a rendered tile is written where nginx finds it by its URL')
  const style = dotsStyle()
  style.layers[0].paint['background-color'] = '#00ff00'
  writeFileSync(join(styles, 'dots.json'), JSON.stringify(style))
  await app.reloadStyles()
  assert.ok(!existsSync(onDisk), 'the old revision\'s tiles left the tile directory with the reload')
  const after = await pixels((await app.inject({ url: '/styles/dots/1/0/0.png' })).rawPayload)
  assert.ok(after.at(5, 5)[1] > 200 && after.at(5, 5)[0] < 60, `now green: ${after.at(5, 5)}`)
})

test('a set replaced under a style: its rendered tiles are made anew', async (t) => {
  if (!needs(t, choice.backend !== null, RENDERER_MISSING)) return
  const { dir, tiles, styles } = setUp(t)
  const app = await makeApp(t, { paths: [tiles], styles, tileDir: { dir: join(dir, 'on-disk') } })
  const before = await pixels((await app.inject({ url: '/styles/dots/512/2/1/1.png' })).rawPayload)
  assert.ok(before.at(256, 256)[2] > 200, 'the point is there')
  await app.tileDir.idle()
  const onDisk = join(dir, 'on-disk', 'styles', 'dots', '512', '2', '1', '1.png')
  assert.ok(existsSync(onDisk), '512 px tiles have their own folder')
  // The file replaced (as `mv` does), now without points at z2.
  rmSync(join(tiles, 'dots.mbtiles'))
  writeMbtiles(join(tiles, 'dots.mbtiles'), { tiles: pyramid(0, 4, 16).filter(([z]) => z !== 2).map(([z, x, y]) => ({ z, x, y, data: gzipSync(makeMvt(z, x, y)) })), metadata: { format: 'pbf', minzoom: '0', maxzoom: '4' } })
  await app.catalog.reload()
  assert.ok(!existsSync(onDisk), 'tiles drawn from the old file left the tile directory')
  const after = await pixels((await app.inject({ url: '/styles/dots/512/2/1/1.png' })).rawPayload)
  assert.ok(after.at(256, 256)[0] > 200 && after.at(256, 256)[2] < 60, `no point any more: ${after.at(256, 256)}`)
})

test('a broken style, a missing set, a corrupt tile and a killed renderer each end in an answer; the server lives', async (t) => {
  if (!needs(t, choice.backend !== null, RENDERER_MISSING)) return
  const { tiles, styles } = setUp(t)
  const app = await makeApp(t, { paths: [tiles], styles, render: { timeoutMs: 20_000 } })
  const before = app.renderer.pids()
  // Styles the spec refuses are not served, so never drawn (one crashed every child that took it, again and again).
  for (const id of ['badlayer', 'crasher']) {
    const res = await app.inject({ url: `/styles/${id}/1/0/0.png` })
    assert.equal(res.statusCode, 404, `${id}: ${res.body}`)
    assert.match(res.json().message, /not a valid MapLibre style: /)
  }
  // A set the style names that is missing, or a file around the catalog: the map is drawn without it.
  for (const id of ['nosource', 'around']) {
    const res = await app.inject({ url: `/styles/${id}/1/0/0.png` })
    assert.equal(res.statusCode, 200, `${id}: ${res.body}`)
    const px = await pixels(res.rawPayload)
    assert.deepEqual(px.at(128, 128).slice(0, 3), [255, 0, 0], `${id}: the background, and no dots`)
  }
  const rooted = await app.inject({ url: '/styles/rooted/512/2/1/1.png' })
  assert.equal(rooted.statusCode, 200, rooted.body)
  assert.deepEqual((await pixels(rooted.rawPayload)).at(256, 256).slice(0, 3), [0, 0, 255], 'tiles from the server\'s root: its set, drawn')
  const corrupt = await app.inject({ url: '/styles/corrupt/1/0/0.png' })
  assert.ok([200, 503].includes(corrupt.statusCode), `corrupt: ${corrupt.statusCode} ${corrupt.body.slice(0, 200)}`)
  if (corrupt.statusCode === 503) assert.match(corrupt.json().message, /render|style|draw/i)
  const after = app.renderer.pids()
  assert.ok(before.every((pid) => after.includes(pid)), `no child was lost: ${before} then ${after}`)
  // A child killed in the middle of a render: that render answers 503, the child comes back, the next render works.
  const pending = app.inject({ url: '/styles/dots/4/3/3@3x.png' })
  await new Promise((resolve) => setTimeout(resolve, 5))
  const children = app.renderer.pids().length
  const pid = app.renderer.pids()[0]
  process.kill(pid, 'SIGKILL')
  const killed = await pending
  assert.ok([200, 503].includes(killed.statusCode), `in flight when killed: ${killed.statusCode}`)
  let back
  for (let i = 0; i < 100; i++) {
    back = await app.inject({ url: '/styles/dots/3/2/2.png' })
    if (back.statusCode === 200) break
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  assert.equal(back.statusCode, 200, 'the server renders on')
  for (let i = 0; i < 100 && app.renderer.pids().length < children; i++) await new Promise((resolve) => setTimeout(resolve, 100))
  assert.equal(app.renderer.pids().length, children, 'the killed child was replaced')
  assert.ok(!app.renderer.pids().includes(pid))
  assert.equal(app.renderer.stats.restarts, 1)
  assert.equal((await app.inject({ url: '/dots/0/0/0.pbf' })).statusCode, 200, 'tiles still served')
})

test('a style naming this server absolutely is drawn from its sets, never fetched by the engine over loopback HTTP', async (t) => {
  if (!needs(t, choice.backend !== null, RENDERER_MISSING)) return
  const { tiles, styles } = setUp(t)
  // What listens at the port the server is configured with: any request the engine made over HTTP would land here.
  const asked = []
  const loopback = createServer((req, res) => { asked.push(req.url); res.writeHead(500).end() }).listen(0, '127.0.0.1')
  await once(loopback, 'listening')
  t.after(() => loopback.close())
  const port = loopback.address().port
  const own = (sources, extra = {}) => JSON.stringify({ ...dotsStyle(), sources, ...extra })
  writeFileSync(join(styles, 'absolute.json'), own({ dots: { type: 'vector', url: `http://127.0.0.1:${port}/dots.json?key=pasted` } }, { glyphs: `http://127.0.0.1:${port}/fonts/{fontstack}/{range}.pbf` }))
  writeFileSync(join(styles, 'absolute-tiles.json'), own({ dots: { type: 'vector', tiles: [`http://127.0.0.1:${port}/data/dots/{z}/{x}/{y}.pbf`], maxzoom: 4 } }))
  writeFileSync(join(styles, 'public.json'), own({ dots: { type: 'vector', url: 'https://maps.example.org/tiles/dots.json' } }))
  const app = await makeApp(t, { paths: [tiles], styles, port, publicUrl: 'https://maps.example.org/tiles', apiKeys: ['k1'] })
  for (const id of ['absolute', 'absolute-tiles', 'public']) {
    const res = await app.inject({ url: `/styles/${id}/512/2/1/1.png`, headers: { 'x-api-key': 'k1' } })
    assert.equal(res.statusCode, 200, `${id}: ${res.body}`)
    assert.deepEqual((await pixels(res.rawPayload)).at(256, 256).slice(0, 3), [0, 0, 255], `${id}: the set's point, drawn`)
    assert.deepEqual(app.renderer.setsDrawn(app.styles.get(id)), ['dots'], `${id}: its tiles are the set's (cache, purges)`)
    assert.doesNotMatch(app.renderer.renderStyleJson(app.styles.get(id)), /https?:/, `${id}: nothing left for the engine to fetch`)
  }
  assert.deepEqual(asked, [], 'no request over loopback HTTP')
})

test('a GeoJSON source naming a file beside its style is drawn from it; a path leaving the style\'s folder draws nothing', async (t) => {
  if (!needs(t, choice.backend !== null, RENDERER_MISSING)) return
  const { dir, tiles, styles } = setUp(t)
  const point = (lon, lat) => JSON.stringify({ type: 'FeatureCollection', features: [{ type: 'Feature', properties: {}, geometry: { type: 'Point', coordinates: [lon, lat] } }] })
  const style = (data) => JSON.stringify({
    version: 8,
    sources: { pts: { type: 'geojson', data } },
    layers: [
      { id: 'bg', type: 'background', paint: { 'background-color': '#ff0000' } },
      { id: 'pts', type: 'circle', source: 'pts', paint: { 'circle-color': '#0000ff', 'circle-radius': 20 } },
    ],
  })
  mkdirSync(join(styles, 'geo', 'data'), { recursive: true })
  writeFileSync(join(styles, 'geo', 'data', 'points.geojson'), point(-45, 40.979898)) // the centre of tile 2/1/1
  writeFileSync(join(styles, 'geo', 'style.json'), style('data/points.geojson'))
  writeFileSync(join(dir, 'secret.geojson'), point(-45, 40.979898)) // outside every served folder
  writeFileSync(join(styles, 'escape.json'), style('../secret.geojson'))
  writeFileSync(join(styles, 'passwd.json'), style('../../../../../../../etc/passwd'))
  symlinkSync(join(dir, 'secret.geojson'), join(styles, 'linked.geojson')) // in the folder, leading out of it
  writeFileSync(join(styles, 'linked.json'), style('linked.geojson'))
  writeFileSync(join(styles, 'later.json'), style('later.geojson'))
  writeFileSync(join(styles, 'own.json'), style('http://localhost:3000/styles/geo/files/data/points.geojson')) // this server's URL of it
  const app = await makeApp(t, { paths: [tiles], styles, port: 3000 })
  const centre = async (id) => {
    const res = await app.inject({ url: `/styles/${id}/512/2/1/1.png` })
    return res.statusCode === 200 ? (await pixels(res.rawPayload)).at(256, 256).slice(0, 3) : `${res.statusCode} ${res.body}`
  }
  assert.deepEqual(await centre('geo'), [0, 0, 255], 'the file\'s point, drawn')
  assert.deepEqual(await centre('own'), [0, 0, 255], 'named at this server\'s address: read from the file, not fetched')
  assert.doesNotMatch(app.renderer.renderStyleJson(app.styles.get('own')), /http/)
  assert.deepEqual(await centre('escape'), [255, 0, 0], 'a file outside the styles folder is not read: the background only')
  assert.deepEqual(await centre('passwd'), [255, 0, 0])
  assert.deepEqual(await centre('linked'), [255, 0, 0], 'a link leading out of the folders: drawn empty, as a path leaving them')
  for (const id of ['escape', 'passwd', 'linked']) assert.doesNotMatch(app.renderer.renderStyleJson(app.styles.get(id)), /secret|passwd/, `${id}: nothing for the engine to open`)
  // A file not there yet fails the render (503, not cached, as a sprite does); once it is, it is drawn.
  const missing = await app.inject({ url: '/styles/later/512/2/1/1.png' })
  assert.equal(missing.statusCode, 503, missing.body)
  writeFileSync(join(styles, 'later.geojson'), point(-45, 40.979898))
  await app.reloadStyles()
  assert.deepEqual(await centre('later'), [0, 0, 255])
  // A changed file is a new revision of the style: its tiles are made anew, not served from the cache.
  writeFileSync(join(styles, 'geo', 'data', 'points.geojson'), point(100, -60))
  await app.reloadStyles()
  assert.deepEqual(await centre('geo'), [255, 0, 0], 'the point has moved away')
})

test('an image source beside its style is drawn from its file; a protocol-relative URL of this server from its set', async (t) => {
  if (!needs(t, choice.backend !== null, RENDERER_MISSING)) return
  const { dir, tiles, styles } = setUp(t)
  const green = await sharp({ create: { width: 64, height: 64, channels: 4, background: { r: 0, g: 255, b: 0, alpha: 1 } } }).png().toBuffer()
  // Over the western half of the world at z1: tile 1/0/0 is green where the image lies.
  const image = (url) => JSON.stringify({
    version: 8,
    sources: { overlay: { type: 'image', url, coordinates: [[-180, 85], [0, 85], [0, -85], [-180, -85]] } },
    layers: [{ id: 'bg', type: 'background', paint: { 'background-color': '#ff0000' } }, { id: 'overlay', type: 'raster', source: 'overlay' }],
  })
  mkdirSync(join(styles, 'img', 'pics'), { recursive: true })
  writeFileSync(join(styles, 'img', 'pics', 'overlay.png'), green)
  writeFileSync(join(styles, 'img', 'style.json'), image('pics/overlay.png'))
  writeFileSync(join(dir, 'secret.png'), green)
  writeFileSync(join(styles, 'escape.json'), image('../secret.png'))
  writeFileSync(join(styles, 'own.json'), image('//localhost:3000/styles/img/files/pics/overlay.png'))
  writeFileSync(join(styles, 'slashes.json'), JSON.stringify({ ...dotsStyle(), sources: { dots: { type: 'vector', url: '//localhost:3000/dots.json' } } }))
  const logs = []
  const app = await makeApp(t, { paths: [tiles], styles, port: 3000 }, { logs })
  const at = async (url, x, y) => {
    const res = await app.inject({ url })
    assert.equal(res.statusCode, 200, `${url}: ${res.body}`)
    return (await pixels(res.rawPayload)).at(x, y).slice(0, 3)
  }
  assert.deepEqual(await at('/styles/img/1/0/0.png', 128, 128), [0, 255, 0], 'the image, read from beside the style')
  assert.deepEqual(await at('/styles/img/static/0,0,1/512x512.png', 128, 256), [0, 255, 0])
  assert.deepEqual(await at('/styles/own/1/0/0.png', 128, 128), [0, 255, 0], 'at this server\'s address, protocol-relative')
  assert.deepEqual(await at('/styles/escape/1/0/0.png', 128, 128), [255, 0, 0], 'a file outside the styles folder is not read')
  assert.doesNotMatch(app.renderer.renderStyleJson(app.styles.get('escape')), /secret/)
  // A vector source at this server's address without a scheme: its set, drawn (the dot in the tile's middle).
  assert.deepEqual(await at('/styles/slashes/512/2/1/1.png', 256, 256), [0, 0, 255])
  assert.doesNotMatch(app.renderer.renderStyleJson(app.styles.get('slashes')), /localhost/)
  // A changed image is a new revision: drawn anew.
  writeFileSync(join(styles, 'img', 'pics', 'overlay.png'), await sharp({ create: { width: 64, height: 64, channels: 4, background: { r: 0, g: 0, b: 255, alpha: 1 } } }).png().toBuffer())
  await app.reloadStyles()
  assert.deepEqual(await at('/styles/img/1/0/0.png', 128, 128), [0, 0, 255])
})

test('local files a style names around the folders (file:, asset:) never reach the engine: drawn without them', async (t) => {
  if (!needs(t, choice.backend !== null, RENDERER_MISSING)) return
  const { tiles, styles } = setUp(t)
  writeFileSync(join(styles, 'local.json'), JSON.stringify({
    version: 8,
    sprite: 'file:///etc/passwd',
    glyphs: 'asset://fonts/{fontstack}/{range}.pbf',
    sources: {
      a: { type: 'vector', tiles: ['asset://tiles/{z}/{x}/{y}.pbf'] },
      b: { type: 'vector', url: 'file:///etc/passwd' },
      c: { type: 'geojson', data: 'asset://points.geojson' },
    },
    layers: [
      { id: 'bg', type: 'background', paint: { 'background-color': '#ff0000' } },
      { id: 'a', type: 'line', source: 'a', 'source-layer': 'x' },
      { id: 'c', type: 'circle', source: 'c' },
    ],
  }))
  writeFileSync(join(styles, 'sprites.json'), JSON.stringify({ version: 8, sprite: [{ id: 'x', url: 'file:///etc/x' }, { id: 'y', url: 'asset://y' }], sources: {}, layers: [{ id: 'bg', type: 'background', paint: { 'background-color': '#ff0000' } }] }))
  const app = await makeApp(t, { paths: [tiles], styles })
  for (const id of ['local', 'sprites']) {
    assert.doesNotMatch(app.renderer.renderStyleJson(app.styles.get(id)), /file:|asset:|passwd/, `${id}: nothing local for the engine to open`)
    const res = await app.inject({ url: `/styles/${id}/512/2/1/1.png` })
    assert.equal(res.statusCode, 200, res.body)
    assert.deepEqual((await pixels(res.rawPayload)).at(256, 256).slice(0, 3), [255, 0, 0], `${id}: the background, drawn`)
  }
})

test('a full queue answers 503 with Retry-After at once; a render past its time answers 503 and its child is replaced', async (t) => {
  if (!needs(t, choice.backend !== null, RENDERER_MISSING)) return
  const { tiles, styles } = setUp(t)
  const busy = await makeApp(t, { paths: [tiles], styles, cacheMB: 0, render: { queueMax: 2, children: 1 } })
  const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => busy.inject({ url: `/styles/dots/4/${i}/${i}@3x.png` })))
  const refused = answers.filter((a) => a.statusCode === 503)
  assert.ok(refused.length > 0 && answers.some((a) => a.statusCode === 200), `some refused, some drawn: ${answers.map((a) => a.statusCode)}`)
  assert.equal(refused[0].headers['retry-after'], '1')
  assert.match(refused[0].json().message, /busy/)

  const slow = await makeApp(t, { paths: [tiles], styles, cacheMB: 0, render: { timeoutMs: 100, children: 1, maxSize: 4000 } })
  const pid = slow.renderer.pids()[0]
  // An 8 MP static image takes this engine longer than 100 ms.
  const late = await slow.inject({ url: '/styles/dots/static/0,0,3/2000x2000@2x.png' })
  assert.equal(late.statusCode, 503, late.body)
  assert.equal(late.json().message, 'the render took longer than 0.1 s (render.timeoutMs)')
  for (let i = 0; i < 100 && (slow.renderer.pids().length === 0 || slow.renderer.pids()[0] === pid); i++) await new Promise((resolve) => setTimeout(resolve, 100))
  assert.notEqual(slow.renderer.pids()[0], pid, 'the child that overran was replaced')
  assert.ok(slow.renderer.pids().length === 1)
})

test('static images with ever new overlays: a child that has registered its share of styles is replaced, none fails', async (t) => {
  if (!needs(t, choice.backend !== null, RENDERER_MISSING)) return
  const { tiles, styles } = setUp(t)
  const app = await makeApp(t, { paths: [tiles], styles, render: { children: 1, maxStylesPerChild: 3 } })
  const first = app.renderer.pids()[0]
  const seen = new Set()
  for (let i = 0; i < 8; i++) {
    const res = await app.inject({ url: `/styles/dots/static/0,0,2/64x64.png?marker=${i},0` })
    assert.equal(res.statusCode, 200, `${i}: ${res.body}`)
    for (const pid of app.renderer.pids()) seen.add(pid)
  }
  assert.ok(seen.size >= 2 && !app.renderer.pids().includes(first), `children: ${[...seen]}`)
  for (let i = 0; i < 100 && app.renderer.pids().length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 50))
  assert.equal(app.renderer.pids().length, 1, 'one child at a time, as configured')
})

test('with no engine, rendered routes answer 503 with the reason and the rest keeps serving', async (t) => {
  const { tiles, styles } = setUp(t)
  const app = await makeApp(t, { paths: [tiles], styles, render: { backend: 'off' } })
  const res = await app.inject({ url: '/styles/dots/1/0/0.png' })
  assert.equal(res.statusCode, 503)
  assert.match(res.json().message, /turned off/)
  assert.ok(res.headers['retry-after'])
  assert.equal((await app.inject({ url: '/styles/dots/style.json' })).statusCode, 200)
  assert.equal((await app.inject({ url: '/dots/0/0/0.pbf' })).statusCode, 200)
  const missing = await makeApp(t, { paths: [tiles], styles, render: { backend: 'mapli', python: '/nonexistent/python' } })
  assert.match((await missing.inject({ url: '/styles/dots/1/0/0.png' })).json().message, /setup-render/)
})

test('OSM Liberty over koh-samui: roads, water and land in many colours, labels drawn', { skip: !HAVE_FIXTURES && 'needs ../shared/fixtures' }, async (t) => {
  if (!needs(t, choice.backend !== null, RENDERER_MISSING)) return
  const dir = tempDir(t)
  const styles = join(dir, 'styles')
  writeLiberty(styles)
  const app = await makeApp(t, { paths: [join(FIXTURES, 'mbtiles', 'koh-samui_thailand.mbtiles')], styles, fonts: join(FIXTURES, 'styles', 'glyphs') })
  // Koh Samui's west coast at Nathon (9.535 N, 99.935 E), z13: town, roads and the sea.
  const [x, y] = lonLatToTile(99.935, 9.535, 13)
  const res = await app.inject({ url: `/styles/liberty/13/${x}/${y}.png` })
  assert.equal(res.statusCode, 200, res.body)
  const { data, info } = await pixels(res.rawPayload)
  const colours = new Set()
  for (let i = 0; i < data.length; i += 4) colours.add(`${data[i] >> 3},${data[i + 1] >> 3},${data[i + 2] >> 3}`)
  assert.ok(colours.size > 40, `many colours, not blank: ${colours.size}`)
  // OSM Liberty's water is rgb(158, 189, 255): the sea around the island.
  let water = 0
  for (let i = 0; i < data.length; i += 4) if (Math.abs(data[i] - 158) < 12 && Math.abs(data[i + 1] - 189) < 12 && Math.abs(data[i + 2] - 255) < 12) water++
  assert.ok(water > info.width * info.height * 0.02, `water drawn: ${water} px`)
  await assertGolden(res.rawPayload, 'liberty-koh-samui-13', 0.03) // labels may shift a pixel between engine builds
  const retina = await app.inject({ url: `/styles/liberty/13/${x}/${y}@2x.png` })
  assert.equal((await sharp(retina.rawPayload).metadata()).width, 512)
})

test('encoded polylines decode as Google documents them', () => {
  assert.deepEqual(decodePolyline('_p~iF~ps|U_ulLnnqC_mqNvxq`@'), [[-120.2, 38.5], [-120.95, 40.7], [-126.453, 43.252]])
})

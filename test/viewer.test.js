// The viewer and the home page in a real browser: Debian's Chromium (/usr/bin/chromium, installed by .ci/run) driven
// by playwright-core, against a real server on 127.0.0.1. Each page must reach the map's `idle` with every request it
// made to the server answered 200, 204 or 304, and draw a map that is not blank. Screenshots are kept in
// test-artifacts/viewer/. Without Chromium these tests are skipped with the reason (a failure in CI).
import assert from 'node:assert/strict'
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { connect } from 'node:net'
import { join } from 'node:path'
import { text } from 'node:stream/consumers'
import { brotliDecompressSync } from 'node:zlib'
import { after, before, test } from 'node:test'
import pixelmatch from 'pixelmatch'
import sharp from 'sharp'
import { FIXTURES, HAVE_FIXTURES, ROOT, makeApp, needs } from './helpers/app.js'
import { tempDir, writeMbtiles } from './helpers/data.js'
import { writeLiberty } from './helpers/styles.js'
import { chooseBackend } from '../lib/style/render/index.js'

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
const NO_CHROMIUM = `Chromium is not installed at ${CHROMIUM} (Debian: chromium)`
const NO_FIXTURES = 'the shared fixtures (../shared/fixtures) are not present'
const ARTEFACTS = join(ROOT, 'test-artifacts', 'viewer')
const RENDERER = chooseBackend({})

let browser = null
before(async () => {
  if (!existsSync(CHROMIUM)) return
  const { chromium } = await import('playwright-core')
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--use-angle=swiftshader', '--enable-unsafe-swiftshader', '--disable-background-networking', '--no-first-run'],
  })
  mkdirSync(ARTEFACTS, { recursive: true })
})
after(() => browser?.close())

/** A folder of the fixture files named, as a user would point the server at one. */
function folderOf (t, files) {
  const dir = tempDir(t)
  for (const f of files) symlinkSync(join(FIXTURES, f), join(dir, f.split('/').pop()))
  return dir
}

async function serve (t, overrides) {
  const app = await makeApp(t, overrides)
  await app.listen({ port: 0, host: '127.0.0.1' })
  return { app, base: `http://127.0.0.1:${app.server.address().port}` }
}

/**
 * Opens `path` in a new page and waits for `ready` (default: the viewer's map went idle). Returns the page and every
 * answer the server gave it; fails on a page error or a request that did not answer 200, 204 or 304 (but for the
 * URLs in `missing`, which must answer 404).
 */
async function open (t, base, path, ready = () => window.viewer?.idle === true, missing = []) {
  const page = await browser.newPage({ viewport: { width: 1000, height: 700 } })
  t.after(() => page.close())
  const answers = []
  const problems = []
  page.on('response', (r) => { if (r.url().startsWith(base)) answers.push({ url: r.url().slice(base.length), status: r.status() }) })
  page.on('requestfailed', (r) => { if (r.url().startsWith(base)) problems.push(`failed: ${r.url()} ${r.failure()?.errorText}`) })
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`))
  await page.goto(base + path)
  await page.waitForFunction(ready, null, { timeout: 30_000 })
  const check = async () => {
    const errors = await page.evaluate(() => window.viewer?.errors ?? [])
    assert.deepEqual([...problems, ...errors], [], `${path}: no errors`)
    const bad = answers.filter((a) => ![200, 204, 304].includes(a.status) && !(missing.includes(a.url) && a.status === 404))
    assert.deepEqual(bad, [], `${path}: every request answered 200, 204 or 304`)
  }
  await check()
  return { page, answers, check }
}

/** A screenshot kept as an artefact, and how many distinct colours it has (a blank map has one or two). */
async function shoot (page, name, clip) {
  const png = await page.screenshot({ clip })
  writeFileSync(join(ARTEFACTS, `${name}.png`), png)
  const { data, info } = await sharp(png).removeAlpha().raw().toBuffer({ resolveWithObject: true })
  const colours = new Set()
  let tinted = 0 // pixels whose channels differ: colour, not grey
  for (let i = 0; i < data.length; i += info.channels) {
    colours.add((data[i] << 16) | (data[i + 1] << 8) | data[i + 2])
    if (Math.max(data[i], data[i + 1], data[i + 2]) - Math.min(data[i], data[i + 1], data[i + 2]) > 40) tinted++
  }
  return { colours: colours.size, tinted }
}
const MAP_AREA = { x: 340, y: 0, width: 660, height: 670 } // right of the panel, above the status line

/**
 * Clicks a drawn feature (a vertex of it in view, clear of the panel) and returns it with the popup's text.
 */
async function clickFeature (page) {
  const target = await page.evaluate(() => {
    const { map } = window.viewer
    const { width, height } = map.getCanvas().getBoundingClientRect()
    const layers = map.getStyle().layers.filter((l) => l.id !== 'background').map((l) => l.id)
    for (const f of map.queryRenderedFeatures({ layers })) {
      const coords = f.geometry.type === 'Point' ? [f.geometry.coordinates] : f.geometry.coordinates.flat(2).length ? flat(f.geometry) : []
      for (const c of coords) {
        const p = map.project(c)
        if (p.x > 360 && p.x < width - 60 && p.y > 60 && p.y < height - 60 && Object.keys(f.properties).length > 0) {
          return { x: p.x, y: p.y, layer: f.sourceLayer, keys: Object.keys(f.properties) }
        }
      }
    }
    return null
    function flat (g) {
      const out = []
      const walk = (a) => (typeof a[0] === 'number' ? out.push(a) : a.forEach(walk))
      walk(g.coordinates)
      return out
    }
  })
  assert.ok(target !== null, 'a feature with properties is drawn in view')
  await page.mouse.click(target.x, target.y)
  await page.waitForSelector('.maplibregl-popup .properties', { timeout: 5000 })
  return { ...target, popup: await page.textContent('.maplibregl-popup .properties') }
}

test('a vector MBTiles set: an inspect style from vector_layers, a legend that hides layers, properties on click', async (t) => {
  if (!needs(t, browser !== null, NO_CHROMIUM) || !needs(t, HAVE_FIXTURES, NO_FIXTURES)) return
  const { base } = await serve(t, { paths: [folderOf(t, ['mbtiles/koh-samui_thailand.mbtiles'])] })
  const { page, answers, check } = await open(t, base, '/viewer/koh-samui_thailand')
  assert.ok(answers.some((a) => a.url === '/koh-samui_thailand.json'), 'the page asked for the TileJSON')
  assert.ok(answers.some((a) => /^\/koh-samui_thailand\/\d+\/\d+\/\d+\.pbf$/.test(a.url)), 'and for tiles')
  assert.ok(answers.some((a) => a.url.startsWith('/viewer/assets/maplibre-gl')), 'MapLibre GL JS comes from this server')
  const legend = await page.$$eval('#legend label', (ls) => ls.map((l) => l.textContent))
  assert.ok(legend.includes('water') && legend.includes('transportation') && legend.includes('place'), `a legend entry per layer: ${legend}`)
  const shown = await shoot(page, 'vector-mbtiles', MAP_AREA)
  assert.ok(shown.colours > 50, `the map is drawn: ${shown.colours} colours`)

  const clicked = await clickFeature(page)
  assert.ok(clicked.popup.includes(clicked.layer), `the popup names the layer: ${clicked.popup}`)
  assert.ok(clicked.keys.some((k) => clicked.popup.includes(k)), `and shows its properties: ${clicked.keys} in ${clicked.popup}`)
  await shoot(page, 'vector-mbtiles-popup')

  // Hiding every layer leaves the background alone.
  await page.evaluate(() => { for (const box of document.querySelectorAll('#legend input')) box.click() })
  const hidden = await page.evaluate(() => window.viewer.map.getStyle().layers.filter((l) => l.layout?.visibility === 'none').length)
  assert.equal(hidden, 3 * legend.length, 'each checkbox hides its layer')
  // The view is in the URL's hash, so a link shows the same place.
  const hash = await page.evaluate(() => location.hash)
  assert.match(hash, /^#\d+(\.\d+)?\/9\.\d+\/(99|100)\.\d+/, `zoom/lat/lon in the hash: ${hash}`)
  const again = await open(t, base, `/viewer/koh-samui_thailand${hash}`)
  const zoom = await again.page.evaluate(() => window.viewer.map.getZoom())
  assert.ok(Math.abs(zoom - Number(hash.slice(1).split('/')[0])) < 0.01, 'a shared link opens at its view')
  // The status line says where the cursor is and which tile is under it.
  await again.page.mouse.move(600, 300)
  assert.match(await again.page.textContent('#status'), /zoom \d+\.\d\d · (99|100)\.\d+, 9\.\d+ · tile \d+\/\d+\/\d+/)
  await check()
})

test('a PMTiles set of lines, drawn and clickable', async (t) => {
  if (!needs(t, browser !== null, NO_CHROMIUM) || !needs(t, HAVE_FIXTURES, NO_FIXTURES)) return
  const { base } = await serve(t, { paths: [folderOf(t, ['pmtiles/trails.pmtiles'])] })
  const { page, answers, check } = await open(t, base, '/viewer/trails')
  assert.ok(answers.some((a) => /^\/trails\/\d+\/\d+\/\d+\.pbf$/.test(a.url) && a.status === 200), 'tiles came from the set')
  const shown = await shoot(page, 'vector-pmtiles', MAP_AREA)
  assert.ok(shown.colours > 10, `lines are drawn: ${shown.colours} colours`)
  const clicked = await clickFeature(page)
  assert.ok(clicked.popup.includes(clicked.layer), `the popup: ${clicked.popup}`)
  await check()
})

test('sets whose minzoom is above the zoom that fits their bounds (z13 only, z6 only) open at their minzoom, drawn at once', async (t) => {
  if (!needs(t, browser !== null, NO_CHROMIUM) || !needs(t, HAVE_FIXTURES, NO_FIXTURES)) return
  const { base } = await serve(t, { paths: [folderOf(t, ['mbtiles/jakartabuildings.mbtiles', 'mbtiles/zoomed_world_cities.mbtiles'])] })
  // Fitted to their bounds, they opened at z11.3 and z0.6, where MapLibre asks for no tile of them: a blank map.
  for (const [id, minzoom, colours, tinted] of [['jakartabuildings', 13, 50, 1000], ['zoomed_world_cities', 6, 10, 30]]) {
    const { page, answers, check } = await open(t, base, `/viewer/${id}`)
    const zoom = await page.evaluate(() => window.viewer.map.getZoom())
    assert.ok(zoom >= minzoom, `${id} opens at its minzoom ${minzoom} or deeper: ${zoom}`)
    assert.ok(answers.some((a) => a.url.startsWith(`/${id}/${minzoom}/`) && a.url.endsWith('.pbf') && a.status === 200), `${id}: tiles asked at open`)
    const shown = await shoot(page, `minzoom-${id}`, MAP_AREA)
    assert.ok(shown.colours > colours && shown.tinted > tinted, `${id} is drawn: ${shown.colours} colours, ${shown.tinted} tinted pixels`)
    await check()
  }
})

test('an MVT set drawn from its MLT variant (?encoding=mlt): MLT tiles asked and decoded, the map drawn and clickable', async (t) => {
  if (!needs(t, browser !== null, NO_CHROMIUM) || !needs(t, HAVE_FIXTURES, NO_FIXTURES)) return
  const { base } = await serve(t, { paths: [folderOf(t, ['mbtiles/koh-samui_thailand.mbtiles'])] })
  const { page, answers, check } = await open(t, base, '/viewer/koh-samui_thailand?encoding=mlt')
  assert.ok(answers.some((a) => a.url === '/koh-samui_thailand.json?encoding=mlt'), 'the TileJSON asked for MLT')
  const tiles = answers.filter((a) => /^\/koh-samui_thailand\/\d+\/\d+\/\d+\./.test(a.url))
  assert.ok(tiles.length > 0 && tiles.every((a) => a.url.endsWith('.mlt')), `only .mlt tiles: ${tiles.map((a) => a.url)}`)
  assert.ok(tiles.some((a) => a.status === 200), 'made and answered')
  const shown = await shoot(page, 'vector-mlt', MAP_AREA)
  assert.ok(shown.colours > 50 && shown.tinted > 1000, `the map is drawn in colour: ${shown.colours} colours, ${shown.tinted} tinted pixels`)
  const clicked = await clickFeature(page)
  assert.ok(clicked.popup.includes(clicked.layer), `features decoded from MLT keep their layer and properties: ${clicked.popup}`)
  // The panel links to the stored tiles, the same view; drawn from them, the map is the same, pixel for pixel.
  assert.equal(await page.getAttribute('#controls a', 'href'), `${base}/viewer/koh-samui_thailand`)
  await check()
  await page.mouse.click(5, 5) // the popup closed
  const mvt = await open(t, base, '/viewer/koh-samui_thailand')
  const pixels = async (p) => sharp(await p.screenshot({ clip: MAP_AREA })).ensureAlpha().raw().toBuffer()
  const [a, b] = [await pixels(page), await pixels(mvt.page)]
  const differ = pixelmatch(a, b, null, MAP_AREA.width, MAP_AREA.height, { threshold: 0.1 })
  assert.ok(differ < MAP_AREA.width * MAP_AREA.height * 0.001, `MLT and MVT draw the same map: ${differ} pixels differ`)
})

test('a raster set with an opacity slider; a COG with its options as controls: colormap, bands, terrain as hillshade', async (t) => {
  if (!needs(t, browser !== null, NO_CHROMIUM) || !needs(t, HAVE_FIXTURES, NO_FIXTURES)) return
  const { base } = await serve(t, { paths: [folderOf(t, ['mbtiles/geography-class-png.mbtiles', 'cog/cog.tif', 'cog/elev.tif'])] })
  const raster = await open(t, base, '/viewer/geography-class-png')
  assert.ok((await shoot(raster.page, 'raster-mbtiles', MAP_AREA)).colours > 50, 'the raster is drawn')
  await raster.page.$eval('#controls input[type=range]', (s) => { s.value = '0.2'; s.dispatchEvent(new Event('input')) })
  assert.equal(await raster.page.evaluate(() => window.viewer.map.getPaintProperty('set', 'raster-opacity')), 0.2)

  const cog = await open(t, base, '/viewer/cog')
  const names = await cog.page.$$eval('#controls [name]', (els) => els.map((e) => e.name))
  assert.deepEqual(names, ['bidx', 'expression', 'rescale', 'colormap_name', 'encoding', 'resampling'], 'the COG options as controls')
  const grey = await shoot(cog.page, 'cog-grey', MAP_AREA)
  await cog.page.evaluate(() => { window.viewer.idle = false })
  await cog.page.selectOption('select[name=colormap_name]', 'viridis')
  await cog.page.waitForFunction(() => window.viewer.idle === true, null, { timeout: 30_000 })
  const coloured = await shoot(cog.page, 'cog-viridis', MAP_AREA)
  assert.ok(coloured.tinted > 20_000 && coloured.tinted > 10 * (grey.tinted + 1), `viridis colours the single band: ${grey.tinted} → ${coloured.tinted} tinted pixels`)
  assert.ok(cog.answers.some((a) => /^\/cog\/\d+\/\d+\/\d+\.png\?colormap_name=viridis$/.test(a.url) && a.status === 200), 'through the tile URL')
  await cog.check()

  // A terrain encoding draws the heights as a hillshade (raster-dem), from the same tiles with ?encoding=.
  const elev = await open(t, base, '/viewer/elev')
  await elev.page.evaluate(() => { window.viewer.idle = false })
  await elev.page.selectOption('select[name=encoding]', 'terrarium')
  await elev.page.waitForFunction(() => window.viewer.idle === true, null, { timeout: 30_000 })
  assert.equal(await elev.page.evaluate(() => window.viewer.map.getLayer('set').type), 'hillshade')
  assert.ok(elev.answers.some((a) => a.url.endsWith('.png?encoding=terrarium') && a.status === 200), 'terrarium tiles asked for')
  assert.ok((await shoot(elev.page, 'cog-hillshade', MAP_AREA)).colours > 20, 'a hillshade is drawn')
  await elev.check()
  // A combination the set refuses says why, rather than showing nothing.
  await elev.page.selectOption('select[name=colormap_name]', 'viridis')
  await elev.page.waitForFunction(() => document.querySelector('#controls .note').textContent !== '', null, { timeout: 10_000 })
  assert.match(await elev.page.textContent('#controls .note'), /colormap_name and encoding cannot be combined/)
})

test('a COG across the antimeridian is drawn either side of it, asking only for tiles of the raster (no 404 in the console)', async (t) => {
  if (!needs(t, browser !== null, NO_CHROMIUM) || !needs(t, HAVE_FIXTURES, NO_FIXTURES)) return
  const { base } = await serve(t, { paths: [folderOf(t, ['cog/cog_dateline.tif'])] })
  // Its TileJSON bounds are the world's width: MapLibre asked for 6/62/21, 6/1/20 … outside the raster, each a 404.
  const { page, answers, check } = await open(t, base, '/viewer/cog_dateline')
  const tiles = answers.filter((a) => /^\/cog_dateline\/\d+\/\d+\/\d+\.png$/.test(a.url))
  const columns = new Set(tiles.map((a) => Number(a.url.split('/')[3])))
  const [z] = tiles[0].url.split('/').slice(2).map(Number)
  assert.ok(columns.has(0) && columns.has(2 ** z - 1), `tiles from both sides of the antimeridian: ${tiles.map((a) => a.url)}`)
  assert.ok((await shoot(page, 'cog-antimeridian', MAP_AREA)).colours > 20, 'the raster is drawn')
  await check()
})

test('a style, and beside it the same map rendered by the server', async (t) => {
  if (!needs(t, browser !== null, NO_CHROMIUM) || !needs(t, HAVE_FIXTURES, NO_FIXTURES)) return
  if (!needs(t, RENDERER.backend !== null, RENDERER.why ?? '')) return
  const styles = join(tempDir(t), 'styles')
  writeLiberty(styles)
  const { base } = await serve(t, { paths: [folderOf(t, ['mbtiles/koh-samui_thailand.mbtiles'])], styles, fonts: join(FIXTURES, 'styles', 'glyphs') })
  const { page, answers, check } = await open(t, base, '/viewer/styles/liberty')
  assert.ok(answers.some((a) => a.url === '/styles/liberty/style.json'), 'the style from this server')
  assert.ok(answers.some((a) => a.url.startsWith('/fonts/')) && answers.some((a) => a.url.startsWith('/styles/liberty/sprite')), 'its glyphs and sprites too')
  assert.ok((await shoot(page, 'style', MAP_AREA)).colours > 50, 'the style is drawn')
  await page.evaluate(() => { window.viewer.renderedIdle = false })
  await page.click('input[name=compare]')
  await page.waitForFunction(() => window.viewer.renderedIdle === true, null, { timeout: 60_000 })
  assert.ok(answers.some((a) => /^\/styles\/liberty\/\d+\/\d+\/\d+\.png$/.test(a.url) && a.status === 200), 'server-rendered tiles')
  const right = await shoot(page, 'style-compare', { x: 520, y: 0, width: 480, height: 670 })
  assert.ok(right.colours > 50, `the rendered map is drawn: ${right.colours} colours`)
  // Both maps show the same place.
  const [a, b] = await page.evaluate(() => [window.viewer.map, window.viewer.rendered].map((m) => [m.getCenter().lng, m.getCenter().lat, m.getZoom()]))
  assert.ok(a.every((v, i) => Math.abs(v - b[i]) < 1e-6), `the maps move together: ${a} ${b}`)
  await check()
})

test('the home page lists every set of a mixed folder, the one that cannot be served with its reason; every link answers 200', async (t) => {
  if (!needs(t, browser !== null, NO_CHROMIUM) || !needs(t, HAVE_FIXTURES, NO_FIXTURES)) return
  const dir = folderOf(t, ['mbtiles/koh-samui_thailand.mbtiles', 'mbtiles/geography-class-png.mbtiles', 'pmtiles/trails.pmtiles', 'cog/cog.tif', 'mbtiles/invalid.mbtiles', 'pmtiles/unclustered.pmtiles'])
  writeFileSync(join(dir, 'points.geojson'), JSON.stringify({ type: 'FeatureCollection', features: [{ type: 'Feature', geometry: { type: 'Point', coordinates: [8.5, 47.4] }, properties: { name: 'Zürich' } }] }))
  const { base } = await serve(t, { paths: [dir] })
  const { page } = await open(t, base, '/', () => document.readyState === 'complete', ['/unclustered/1/1/1.png'])
  await page.waitForLoadState('networkidle')
  const text = await page.textContent('body')
  for (const id of ['koh-samui_thailand', 'geography-class-png', 'trails', 'cog', 'points']) assert.ok(text.includes(id), `${id} is listed`)
  assert.match(text, /invalid: .*not an MBTiles file/, 'the unavailable set with its reason')
  assert.match(text, /tile-cannon \d+\.\d+\.\d+ · tile cache \d+ tiles/, 'version and cache figures')
  // Every preview image loaded, every link answers 200. A sparse set without a tile at its centre (unclustered's two
  // tiles are elsewhere) shows its bounds instead of a broken image.
  const images = await page.$$eval('img', (imgs) => imgs.map((i) => ({ src: i.src, width: i.naturalWidth })))
  assert.ok(images.length >= 2 && images.every((i) => i.width > 0), `raster previews load: ${JSON.stringify(images)}`)
  assert.ok(!images.some((i) => i.src.includes('/unclustered/')), 'no image left for the tile the sparse set lacks')
  const sparse = await page.$eval('a[href$="/viewer/unclustered"]', (a) => a.closest('li').querySelector('svg.preview') !== null)
  assert.ok(sparse, 'the sparse set shows its bounds')
  const hrefs = [...new Set(await page.$$eval('a[href]', (as) => as.map((a) => a.href)))]
  assert.ok(hrefs.length >= 5 * 3 + 3, `viewer, TileJSON and meta of each set, and the footer: ${hrefs.length}`)
  for (const href of hrefs) {
    assert.ok(href.startsWith(base), `a link to this server: ${href}`)
    const res = await fetch(href)
    assert.equal(res.status, 200, `${href} answers 200`)
  }
  await shoot(page, 'home')
})

test('with API keys, pages opened with ?key= draw: the key rides on every request, a COG\'s options after it', async (t) => {
  if (!needs(t, browser !== null, NO_CHROMIUM) || !needs(t, HAVE_FIXTURES, NO_FIXTURES)) return
  const styles = join(tempDir(t), 'styles')
  writeLiberty(styles)
  const { base } = await serve(t, {
    paths: [folderOf(t, ['cog/cog.tif', 'mbtiles/koh-samui_thailand.mbtiles'])],
    styles,
    fonts: join(FIXTURES, 'styles', 'glyphs'),
    apiKeys: ['viewer-key'],
  })
  // Every request the pages make carries the key, but for the viewer's code (open to all: lib/access.js).
  const keyless = (answers) => answers.filter((a) => !a.url.startsWith('/viewer/assets/') && !/[?&]key=viewer-key(&|$)/.test(a.url))

  const cog = await open(t, base, '/viewer/cog?key=viewer-key')
  await cog.page.evaluate(() => { window.viewer.idle = false })
  await cog.page.selectOption('select[name=colormap_name]', 'viridis')
  await cog.page.waitForFunction(() => window.viewer.idle === true, null, { timeout: 30_000 })
  assert.ok(cog.answers.some((a) => /^\/cog\/\d+\/\d+\/\d+\.png\?key=viewer-key&colormap_name=viridis$/.test(a.url) && a.status === 200), 'the option added after the key')
  await cog.check()
  assert.deepEqual(keyless(cog.answers), [])

  const style = await open(t, base, '/viewer/styles/liberty?key=viewer-key')
  assert.ok(style.answers.some((a) => a.url.startsWith('/fonts/')) && style.answers.some((a) => a.url.startsWith('/styles/liberty/sprite')), 'glyphs and sprites, with the key')
  assert.ok((await shoot(style.page, 'style-keyed', MAP_AREA)).colours > 50, 'the style is drawn')
  assert.deepEqual(keyless(style.answers), [])

  const home = await open(t, base, '/?key=viewer-key', () => document.readyState === 'complete')
  const links = await home.page.$$eval('a[href^="http"]', (as) => as.map((a) => a.href))
  assert.ok(links.length > 5 && links.every((href) => href.includes('key=viewer-key')), 'the home page links carry the key')
})

test('a set removed while its viewer is open: the panel says so; reloaded, /viewer/<set> is a 404 page for a browser, JSON for others', async (t) => {
  if (!needs(t, browser !== null, NO_CHROMIUM) || !needs(t, HAVE_FIXTURES, NO_FIXTURES)) return
  const dir = tempDir(t)
  copyFileSync(join(FIXTURES, 'mbtiles/koh-samui_thailand.mbtiles'), join(dir, 'vanish.mbtiles'))
  const { base } = await serve(t, { paths: [dir], watch: true, watchDebounceMs: 50 })
  const { page } = await open(t, base, '/viewer/vanish')
  rmSync(join(dir, 'vanish.mbtiles'))
  for (let i = 0; i < 100 && (await fetch(`${base}/vanish.json`)).status !== 404; i++) await new Promise((resolve) => setTimeout(resolve, 100))
  // Its tiles answer 404, which MapLibre draws as nothing and reports nowhere: the map went blank without a word.
  await new Promise((resolve) => setTimeout(resolve, 5000))
  await page.evaluate(() => window.viewer.map.zoomIn({ animate: false }))
  await page.waitForFunction(() => window.viewer.errors.length > 0, null, { timeout: 10_000 })
  assert.match(await page.textContent('#controls .error'), /this set cannot be shown now \(404: no tileset 'vanish'\)/)
  const again = await page.goto(`${base}/viewer/vanish`)
  assert.equal(again.status(), 404)
  assert.match(again.headers()['content-type'], /^text\/html/)
  assert.match(await page.textContent('body'), /no set 'vanish'/)
  assert.equal(await page.getAttribute('a', 'href'), `${base}/`, 'and a link home')
  const json = await fetch(`${base}/viewer/vanish`)
  assert.equal(json.status, 404)
  assert.equal((await json.json()).message, "no set 'vanish'")
  const style = await fetch(`${base}/viewer/styles/nope`, { headers: { accept: 'text/html' } })
  assert.equal(style.status, 404)
  assert.match(await style.text(), /<h1>not found<\/h1>/)
})

test('the viewer behind a proxy with a path prefix; --no-viewer leaves it out', async (t) => {
  const dir = tempDir(t)
  writeFileSync(join(dir, 'points.geojson'), JSON.stringify({ type: 'FeatureCollection', features: [] }))
  writeMbtiles(join(dir, 'records.mbtiles'), { tiles: [{ z: 0, x: 0, y: 0, data: Buffer.from('{"a":1}') }], metadata: { format: 'json' } })
  const app = await makeApp(t, { paths: [dir], trustProxy: true })
  const res = await app.inject({ url: '/viewer/points', headers: { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'maps.example', 'x-forwarded-prefix': '/tiles' } })
  assert.equal(res.statusCode, 200)
  assert.match(res.body, /src="https:\/\/maps\.example\/tiles\/viewer\/assets\/viewer\.js"/)
  assert.match(res.body, /"tilejson":"https:\/\/maps\.example\/tiles\/points\.json"/)
  assert.equal((await app.inject({ url: '/viewer/nope' })).statusCode, 404)
  const asset = await app.inject({ url: '/viewer/assets/maplibre-gl.mjs' })
  assert.equal(asset.statusCode, 200)
  assert.equal((await app.inject({ url: '/viewer/assets/maplibre-gl.mjs', headers: { 'if-none-match': asset.headers.etag } })).statusCode, 304)
  // Over a socket, as sent (inject would tidy the path first): what the static files refuse is a 404, not a 500.
  await app.listen({ port: 0, host: '127.0.0.1' })
  for (const path of ['/viewer/assets/../index.js', '/viewer/assets/%2e%2e/index.js', '/viewer/assets/..%2f..%2fpackage.json', '/viewer/assets/viewer.js%00']) {
    const socket = connect(app.server.address().port, '127.0.0.1')
    socket.write(`GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`) // the server closes after answering
    const [head] = (await text(socket)).split('\r\n')
    assert.match(head, /^HTTP\/1\.1 404/, `${path}: ${head}`)
  }
  // Sets whose tiles a map cannot draw (JSON tiles) have no viewer.
  const json = await app.inject({ url: '/viewer/records' })
  assert.equal(json.statusCode, 404)
  assert.match(json.json().message, /json tiles, which a map cannot draw/)
  assert.ok(!(await app.inject({ url: '/' })).body.includes('/viewer/records'), 'and no link to one')

  const off = await makeApp(t, { paths: [dir], viewer: false })
  for (const url of ['/viewer/points', '/viewer/assets/viewer.js']) assert.equal((await off.inject({ url })).statusCode, 404, url)
  const home = await off.inject({ url: '/' })
  assert.equal(home.statusCode, 200)
  assert.ok(home.body.includes('points') && !home.body.includes('/viewer/'), 'the home page lists the sets without viewer links')
  assert.equal(readFileSync(join(ROOT, 'lib', 'viewer', 'public', 'viewer.js'), 'utf8').includes('https://'), false, 'the viewer fetches nothing from elsewhere')
})

test('viewer assets answer their conditions: 416 with Content-Range past the end, 412 for a failed If-Match or If-Unmodified-Since', async (t) => {
  const app = await makeApp(t, { paths: [tempDir(t)] })
  const url = '/viewer/assets/viewer.css'
  const size = readFileSync(join(ROOT, 'lib', 'viewer', 'public', 'viewer.css')).length
  for (const range of ['bytes=99999999-', `bytes=${size}-`]) {
    const res = await app.inject({ url, headers: { range } })
    assert.equal(res.statusCode, 416, range)
    assert.equal(res.headers['content-range'], `bytes */${size}`, range)
  }
  assert.equal((await app.inject({ url, headers: { range: 'bytes=0-9' } })).statusCode, 206)
  assert.equal((await app.inject({ url, headers: { 'if-match': '"nope"' } })).statusCode, 412)
  assert.equal((await app.inject({ url, headers: { 'if-unmodified-since': 'Thu, 01 Jan 1970 00:00:00 GMT' } })).statusCode, 412)
  const etag = (await app.inject({ url })).headers.etag
  assert.equal((await app.inject({ url, headers: { 'if-match': etag } })).statusCode, 200)
  assert.equal((await app.inject({ url: '/viewer/assets/nope.css', headers: { range: 'bytes=99999999-' } })).statusCode, 404, 'only a file not there is a 404')
})

test('viewer assets: If-Modified-Since at or after the file\'s time is a 304; a date in the future, one that is no HTTP-date, or one beside If-None-Match is not', async (t) => {
  const app = await makeApp(t, { paths: [tempDir(t)] })
  const url = '/viewer/assets/viewer.css'
  const body = readFileSync(join(ROOT, 'lib', 'viewer', 'public', 'viewer.css'))
  for (const coding of ['identity', 'br']) {
    const ask = (headers) => app.inject({ url, headers: { 'accept-encoding': coding, ...headers } })
    const first = await ask({})
    assert.equal(first.statusCode, 200)
    const modified = first.headers['last-modified']
    assert.ok(Date.parse(modified) <= Date.now(), modified)
    const asctime = new Date(modified).toUTCString().replace(/^(\w+), (\d+) (\w+) (\d+) (\S+) GMT$/, (_, day, date, month, year, time) => `${day} ${month} ${date.padStart(2, ' ')} ${time} ${year}`)
    for (const since of [modified, new Date(Date.now() - 1000).toUTCString(), asctime]) {
      const res = await ask({ 'if-modified-since': since })
      assert.equal(res.statusCode, 304, `${coding}, If-Modified-Since: ${since}`)
      assert.equal(res.rawPayload.length, 0)
    }
    const later = new Date(Date.now() + 86400e3)
    for (const since of [later.toUTCString(), new Date(Date.now() - 1000).toISOString(), 'Tue Nov 24 2026', 'yesterday']) {
      const res = await ask({ 'if-modified-since': since })
      assert.equal(res.statusCode, 200, `${coding}, If-Modified-Since: ${since}`)
      assert.deepEqual(coding === 'br' ? brotliDecompressSync(res.rawPayload) : res.rawPayload, body, `${coding}, If-Modified-Since: ${since}`)
    }
    // If-None-Match decides alone (RFC 9110 §13.1.3): another version's ETag is a 200 whatever the date says.
    const stale = await ask({ 'if-none-match': '"another-version"', 'if-modified-since': modified })
    assert.equal(stale.statusCode, 200, `${coding}: If-None-Match of another version`)
    assert.equal((await ask({ 'if-none-match': first.headers.etag, 'if-modified-since': later.toUTCString() })).statusCode, 304, coding)
  }
})

test('/viewer/<set> chooses an HTML or JSON 404 by Accept, and every answer says Vary: Accept', async (t) => {
  const dir = tempDir(t)
  writeFileSync(join(dir, 'points.geojson'), JSON.stringify({ type: 'FeatureCollection', features: [] }))
  const app = await makeApp(t, { paths: [dir] })
  const vary = (res) => res.headers.vary.split(/\s*,\s*/)
  const page = await app.inject({ url: '/viewer/nope', headers: { accept: 'text/html' } })
  assert.equal(page.statusCode, 404)
  assert.match(page.headers['content-type'], /text\/html/)
  assert.ok(vary(page).includes('Accept'), page.headers.vary)
  const json = await app.inject({ url: '/viewer/nope', headers: { accept: 'application/json' } })
  assert.equal(json.statusCode, 404)
  assert.match(json.headers['content-type'], /application\/json/)
  assert.ok(vary(json).includes('Accept'), json.headers.vary)
  const found = await app.inject({ url: '/viewer/points', headers: { accept: 'text/html' } })
  assert.equal(found.statusCode, 200)
  assert.ok(vary(found).includes('Accept'), found.headers.vary)
})

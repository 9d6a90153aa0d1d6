// Sidecars GDAL keeps beside a served COG (<file>.msk, <file>.ovr) added, rebuilt or deleted while the file itself does
// not change: the set, and every raster worker, reads them as they are now, at SIGHUP (watching off) or once the watcher
// sees them (watching on), as it does a replaced file; a folder mosaic over the file too.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { copyFileSync, mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import sharp from 'sharp'
import { makeApp, needs } from './helpers/app.js'
import { tempDir, z8RasterPy } from './helpers/data.js'

const RIO_PYTHON = process.env.RIO_TILER_PYTHON || 'python3'
const HAVE_RASTERIO = spawnSync(RIO_PYTHON, ['-c', 'import rasterio'], { stdio: 'ignore' }).status === 0
const NO_RASTERIO = 'rasterio is not installed (pip install rio-tiler, or set RIO_TILER_PYTHON to a python that has it)'

// `a.tif` (in `folder/`): 4096 px over z8 tile 135/91, no overviews and no mask. Beside copies of it: `m.tif.msk`, a
// mask hiding diagonal stripes (an eighth of a z12 tile or more), and `o.tif.ovr`, its overviews 2…16 (gdaladdo -ro), which
// serve z8 (without them a z8 tile would read 16 Mpx: a 404).
const SCRIPT = `${z8RasterPy(4096)}
with rasterio.open(f'{d}/folder/a.tif', 'w', **prof) as f:
    f.write(((xx // 16 + yy // 16) % 200 + 40).astype('u1'), 1)
for name in ['m', 'o']:
    shutil.copy(f'{d}/folder/a.tif', f'{d}/{name}.tif')
with rasterio.Env(GDAL_TIFF_INTERNAL_MASK=False), rasterio.open(f'{d}/m.tif', 'r+') as f:
    f.write_mask((((xx + yy) % 512 >= 128) * 255).astype('u1'))
with rasterio.Env(TIFF_USE_OVR=True), rasterio.open(f'{d}/o.tif', 'r+') as f:
    f.build_overviews([2, 4, 8, 16], Resampling.nearest)
`

const TILES = ['12/2160/1456', '12/2161/1456', '12/2160/1457', '12/2161/1457', '11/1080/728', '10/540/364']

/** Every tile of TILES, asked of both sets 4 times at once (the 2 workers both draw each): its transparent pixels. */
async function transparency (app) {
  const urls = TILES.flatMap((tile) => ['a', 'folder'].flatMap((id) => Array(4).fill(`/${id}/${tile}.png`)))
  const answers = await Promise.all(urls.map((url) => app.inject(url)))
  const seen = {}
  for (const [i, res] of answers.entries()) {
    assert.equal(res.statusCode, 200, `${urls[i]}: ${res.body}`)
    const alpha = await sharp(res.rawPayload).ensureAlpha().extractChannel(3).raw().toBuffer()
    const hidden = alpha.filter((a) => a === 0).length
    const [id, ...tile] = urls[i].slice(1).split('/')
    const key = tile.join('/')
    seen[key] ??= hidden
    assert.equal(hidden, seen[key], `${urls[i]}: every worker and set draws the same (${hidden} pixels hidden, not ${seen[key]}) [${id}]`)
  }
  return seen
}

/** /a/meta, TileJSON's minzoom and z8's status, for both sets. */
async function state (app) {
  const meta = (await app.inject('/a/meta')).json()
  const z8 = await Promise.all(['a', 'folder'].map(async (id) => (await app.inject(`/${id}/8/135/91.png`)).statusCode))
  return { mask: meta.mask, externalOverviews: meta.externalOverviews, minzoom: (await app.inject('/a.json')).json().minzoom, z8 }
}

function makeFiles (t) {
  const dir = tempDir(t)
  mkdirSync(join(dir, 'folder'))
  const run = spawnSync(RIO_PYTHON, ['-c', SCRIPT, dir], { encoding: 'utf8' })
  assert.equal(run.status, 0, `rasterio failed: ${run.stderr}`)
  return { dir, file: join(dir, 'folder', 'a.tif') }
}

const appOf = (t, dir, file, watch) => makeApp(t, {
  paths: [file],
  sets: { folder: { path: join(dir, 'folder'), mosaic: true } },
  raster: { threads: 2 },
  cacheMB: 0,
  watch,
  watchDebounceMs: 50,
})

const PLAIN = { mask: false, externalOverviews: false, minzoom: 9, z8: [404, 404] }

test('a .msk or .ovr added or deleted beside an unchanged COG is read by every worker at SIGHUP', async (t) => {
  if (!needs(t, HAVE_RASTERIO, NO_RASTERIO)) return
  const { dir, file } = makeFiles(t)
  const app = await appOf(t, dir, file, false)
  assert.deepEqual(await state(app), PLAIN)
  const plain = await transparency(app) // (both workers now hold the file open)
  assert.ok(Object.values(plain).every((n) => n === 0), 'nothing hidden')

  copyFileSync(join(dir, 'm.tif.msk'), `${file}.msk`)
  await app.catalog.reload()
  assert.deepEqual(await state(app), { ...PLAIN, mask: true })
  const masked = await transparency(app)
  for (const [tile, hidden] of Object.entries(masked)) assert.ok(hidden > 4000, `${tile}: the .msk's stripes hidden (${hidden})`)

  copyFileSync(join(dir, 'o.tif.ovr'), `${file}.ovr`)
  await app.catalog.reload()
  const withOverviews = await state(app)
  assert.deepEqual(withOverviews, { mask: true, externalOverviews: true, minzoom: withOverviews.minzoom, z8: [200, 200] })
  assert.ok(withOverviews.minzoom < 9, `TileJSON's minzoom lowered (${withOverviews.minzoom})`)
  assert.deepEqual(await transparency(app), masked, 'the .ovr holds the same pixels')

  rmSync(`${file}.msk`)
  rmSync(`${file}.ovr`)
  await app.catalog.reload()
  assert.deepEqual(await state(app), PLAIN)
  assert.deepEqual(await transparency(app), plain)
})

/** Waits (at most 5 s) for `check()` to be true, the watcher's debounce and re-open. */
async function until (check, what) {
  for (const end = Date.now() + 5000; Date.now() < end; await sleep(50)) if (await check()) return
  assert.fail(`not seen in 5 s: ${what}`)
}

test('with watching on, a .msk or .ovr added, broken or deleted beside an unchanged COG re-opens its sets', async (t) => {
  if (!needs(t, HAVE_RASTERIO, NO_RASTERIO)) return
  const { dir, file } = makeFiles(t)
  const app = await appOf(t, dir, file, true)
  assert.deepEqual(await state(app), PLAIN)
  await transparency(app)

  copyFileSync(join(dir, 'm.tif.msk'), `${file}.msk`)
  await until(async () => (await state(app)).mask, 'the .msk read')
  await sleep(200) // (the folder mosaic re-opened too)
  for (const [tile, hidden] of Object.entries(await transparency(app))) assert.ok(hidden > 4000, `${tile}: the .msk's stripes hidden (${hidden})`)

  // A .ovr that is not one (the 503 says to delete it), then deleted: served again, without it.
  writeFileSync(`${file}.ovr`, 'not a tiff')
  await until(async () => (await app.inject('/a/12/2160/1456.png')).statusCode === 503, 'the broken .ovr refused')
  assert.match((await app.inject('/a/12/2160/1456.png')).json().message, /the overviews beside the file \(a\.tif\.ovr\) are not a readable TIFF/)
  rmSync(`${file}.ovr`)
  await until(async () => (await app.inject('/a/12/2160/1456.png')).statusCode === 200, 'served again once the .ovr is deleted')

  copyFileSync(join(dir, 'o.tif.ovr'), `${file}.ovr`)
  await until(async () => (await state(app)).externalOverviews, 'the .ovr read')
  await sleep(200)
  assert.deepEqual((await state(app)).z8, [200, 200])

  rmSync(`${file}.msk`)
  await until(async () => !(await state(app)).mask, 'the .msk deleted')
  await sleep(200)
  assert.ok(Object.values(await transparency(app)).every((n) => n === 0), 'nothing hidden')
})

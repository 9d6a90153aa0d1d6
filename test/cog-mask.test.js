// GDAL's per-dataset mask in a sidecar (`<file>.msk`), read as an internal mask is: transparent where rio-tiler's mask
// is 0. Files written by rasterio with GDAL_TIFF_INTERNAL_MASK=NO, as older GDAL wrote every mask.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { once } from 'node:events'
import { copyFileSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:http'
import { join } from 'node:path'
import pino from 'pino'
import sharp from 'sharp'
import { makeApp, needs } from './helpers/app.js'
import { tempDir, z8RasterPy } from './helpers/data.js'
import { loadConfig } from '../lib/config.js'
import { buildApp } from '../lib/app.js'

const RIO_PYTHON = process.env.RIO_TILER_PYTHON || 'python3'
const HAVE_RIO_TILER = spawnSync(RIO_PYTHON, ['-c', 'import rio_tiler'], { stdio: 'ignore' }).status === 0
const NO_RIO_TILER = 'rio-tiler is not installed (pip install rio-tiler, or set RIO_TILER_PYTHON to a python that has it)'
const HAVE_PROC_IO = (() => { try { return /syscr/.test(readFileSync('/proc/self/io', 'utf8')) } catch { return false } })()

// `masked.tif` and `fullmask.tif`: 512 px of grey over z11 tile 1080/728 in blocks of 256, a 2:1 overview inside, the
// mask (a disc and a strip on the west edge hidden) in the .msk beside, with its overview (masked) or without one
// (fullmask: GDAL samples the full mask for it); `strips.tif`, whose .msk is in strips. rio-tiler's mask (1 valid) for
// each tile asked.
const MASK_SCRIPT = `
import json, math, sys, warnings
warnings.filterwarnings('ignore')
import numpy as np, rasterio
from rasterio.enums import Resampling
from rasterio.transform import from_origin
from rio_tiler.io import Reader
d, tiles = sys.argv[1], sys.argv[2:]
W = 2 * math.pi * 6378137.0
prof = dict(driver='GTiff', width=512, height=512, count=1, dtype='uint8', crs='EPSG:3857', tiled=True, blockxsize=256,
            blockysize=256, transform=from_origin(-W / 2 + 1080 * W / 2048, W / 2 - 728 * W / 2048, W / 2048 / 512, W / 2048 / 512))
yy, xx = np.mgrid[0:512, 0:512]
valid = ~(((xx - 200) ** 2 + (yy - 300) ** 2 < 120 ** 2) | (xx < 41))
with rasterio.Env(GDAL_TIFF_INTERNAL_MASK=False):
    # masked: the mask written first, its overview with the file's in the .msk; fullmask: written after the overview
    for name in ['masked', 'fullmask']:
        with rasterio.open(f'{d}/{name}.tif', 'w', **prof) as f:
            f.write(((xx + 2 * yy) % 200 + 20).astype('u1'), 1)
            if name == 'masked':
                f.write_mask((valid * 255).astype('u1'))
        with rasterio.open(f'{d}/{name}.tif', 'r+') as f:
            f.build_overviews([2], Resampling.nearest)
            if name == 'fullmask':
                f.write_mask((valid * 255).astype('u1'))
    with rasterio.open(f'{d}/strips.tif', 'w', **prof) as f:
        f.write(np.full((512, 512), 99, 'u1'), 1)
    with rasterio.open(f'{d}/strips.tif.msk', 'w', driver='GTiff', width=512, height=512, count=1, dtype='uint8') as f:
        f.write((valid * 255).astype('u1'), 1)
out = {}
for name in ['masked', 'fullmask']:
    with Reader(f'{d}/{name}.tif') as r, rasterio.open(f'{d}/{name}.tif.msk') as m:
        out[name] = {'overviews': m.overviews(1)}
        for t in tiles:
            z, x, y = map(int, t.split('/'))
            out[name][t] = (r.tile(x, y, z).mask > 0).astype('u1').ravel().tolist()
print(json.dumps(out))
`

/** How many pixels of tile `url` are opaque where `valid` says transparent, or the other way round. */
async function differing (app, url, valid) {
  const res = await app.inject(url)
  assert.equal(res.statusCode, 200, `${url}: ${res.body}`)
  const rgba = await sharp(res.rawPayload).ensureAlpha().raw().toBuffer()
  return valid.filter((v, p) => v !== (rgba[p * 4 + 3] > 0 ? 1 : 0)).length
}

test('a mask in a .msk sidecar is read as an internal mask is: transparent where rio-tiler masks, at the full resolution and on overviews the .msk has none for', async (t) => {
  if (!needs(t, HAVE_RIO_TILER, NO_RIO_TILER)) return
  const dir = tempDir(t)
  // Full resolution (z12, z13), the overview read 1:1 (z11) and at 2:1 (z10), and a tile at the raster's edge.
  const exact = ['12/2160/1456', '12/2160/1457', '13/4320/2913', '11/1080/728']
  const coarser = ['10/540/364']
  const run = spawnSync(RIO_PYTHON, ['-c', MASK_SCRIPT, dir, ...exact, ...coarser], { encoding: 'utf8', maxBuffer: 64 * 2 ** 20 })
  assert.equal(run.status, 0, `rio-tiler failed: ${run.stderr}`)
  const reference = JSON.parse(run.stdout)
  assert.deepEqual([reference.masked.overviews, reference.fullmask.overviews], [[2], []], 'a .msk with an overview, one without')

  const logs = []
  const { config } = loadConfig({ overrides: { paths: [join(dir, 'masked.tif'), join(dir, 'fullmask.tif')], cacheMB: 0, watch: false, demo: false } })
  const app = await buildApp(config, { loggerInstance: pino({ level: 'info' }, { write: (line) => logs.push(JSON.parse(line)) }) })
  t.after(() => app.close())
  for (const id of ['masked', 'fullmask']) {
    assert.equal((await app.inject(`/${id}/meta`)).json().mask, true, `${id}: /meta says the file has a mask`)
    for (const tile of exact) {
      const valid = reference[id][tile]
      assert.ok(valid.filter((v) => v === 0).length > 1000, `${id} ${tile}: rio-tiler hides pixels`)
      for (const query of ['', '?resampling=bilinear', '?expression=b1*2&rescale=0,255']) {
        assert.equal(await differing(app, `/${id}/${tile}.png${query}`, valid), 0, `${id} ${tile}${query}: transparent where rio-tiler masks`)
      }
    }
    // A coarser read of an overview whose mask is sampled off the full one: on the overview's grid, where GDAL samples
    // the full mask for the tile, so the disc's edge may move by a pixel of the full image.
    for (const tile of coarser) {
      const wrong = await differing(app, `/${id}/${tile}.png`, reference[id][tile])
      assert.ok(wrong <= 64, `${id} ${tile}: ${wrong} pixels other than rio-tiler's`)
    }
  }
  assert.deepEqual(logs.filter((l) => /\.msk/.test(l.msg ?? '')), [], 'no warning that the mask is not read')

  // A .msk that cannot be used is the set's 503, saying why, without a path; the file without one is served.
  copyFileSync(join(dir, 'masked.tif'), join(dir, 'broken.tif'))
  writeFileSync(join(dir, 'broken.tif.msk'), 'not a tiff')
  const others = await makeApp(t, { paths: [join(dir, 'broken.tif'), join(dir, 'strips.tif'), join(dir, 'masked.tif')], cacheMB: 0 })
  for (const [id, reason] of [['broken', /the mask beside the file \(broken\.tif\.msk\) is not a readable TIFF/], ['strips', /the mask beside the file \(\.msk\) is not in blocks of the file's 256 × 256 pixels: rewrite the file with its mask inside \(`gdal_translate -of COG`\)/]]) {
    const res = await others.inject(`/${id}/12/2160/1456.png`)
    assert.equal(res.statusCode, 503, id)
    assert.match(res.json().message, reason, id)
    assert.ok(!res.body.includes(dir), 'no path')
  }
  assert.equal(await differing(others, '/masked/12/2160/1456.png', reference.masked['12/2160/1456']), 0)
})

// `wide.tif`: 4096 px over z8 tile 135/91 in blocks of 256, overviews 2…16 inside, the mask (a disc hidden) in a .msk
// written after them, so it holds the full image's only: every overview level samples its 256 blocks.
const WIDE_SCRIPT = `${z8RasterPy(4096)}
with rasterio.Env(GDAL_TIFF_INTERNAL_MASK=False):
    with rasterio.open(f'{d}/wide.tif', 'w', **prof) as f:
        f.write(((xx // 16 + yy // 16) % 200 + 40).astype('u1'), 1)
    with rasterio.open(f'{d}/wide.tif', 'r+') as f:
        f.build_overviews([2, 4, 8, 16], Resampling.nearest)
        f.write_mask((~((xx - 1500) ** 2 + (yy - 2500) ** 2 < 1000 ** 2) * 255).astype('u1'))
`

/** Read system calls this process has made (every thread's: the raster worker's and libuv's too). */
const readCalls = () => Number(/syscr: (\d+)/.exec(readFileSync('/proc/self/io', 'utf8'))[1])

test('a level sampling the .msk reads each of its blocks once: the next level down reuses them', async (t) => {
  if (!needs(t, HAVE_RIO_TILER, NO_RIO_TILER) || !needs(t, HAVE_PROC_IO, 'no /proc/self/io')) return
  const dir = tempDir(t)
  const run = spawnSync(RIO_PYTHON, ['-c', WIDE_SCRIPT, dir], { encoding: 'utf8' })
  assert.equal(run.status, 0, `rasterio failed: ${run.stderr}`)
  const app = await makeApp(t, { paths: [join(dir, 'wide.tif')], cacheMB: 0, raster: { threads: 1 } })
  const hidden = async (url) => {
    const res = await app.inject(url)
    assert.equal(res.statusCode, 200, `${url}: ${res.body}`)
    const alpha = await sharp(res.rawPayload).ensureAlpha().extractChannel(3).raw().toBuffer()
    return alpha.filter((a) => a === 0).length
  }
  // z8 reads the 16× overview, whose one block samples all 256 of the .msk's; z9 the 8× one, 64 of them each block.
  assert.ok(await hidden('/wide/8/135/91.png') > 5000, 'the disc hidden at z8')
  const before = readCalls()
  assert.ok(await hidden('/wide/9/270/183.png') > 5000, 'the disc hidden at z9')
  const reads = readCalls() - before
  t.diagnostic(`z9 read calls: ${reads}`)
  assert.ok(reads < 32, `z9's tile read ${reads} times: the .msk's blocks again, not from the block cache`)
})

// `a.tif`: 2048 px over z8 tile 135/91 in blocks of 256, no overviews inside, its mask (diagonal stripes 3 px wide
// every 8, and a disc) in a .msk; `gdaladdo -ro -r average` (rasterio with TIFF_USE_OVR) wrote overviews 2, 4, 8 of
// the file in a.tif.ovr and of the mask in a.tif.msk.ovr, where the stripes average to valid (sampling the .msk at a
// coarser scale, every sample falls on a stripe: all hidden). `b.tif`: the same, its .msk.ovr in blocks of 128, not
// the .ovr's 256. rio-tiler's mask (1 valid) for each tile asked.
const MASK_OVR_SCRIPT = `${z8RasterPy(2048)}
from rio_tiler.io import Reader
tiles = sys.argv[2:]
valid = ~(((xx + yy) % 8 < 3) | ((xx - 700) ** 2 + (yy - 1200) ** 2 < 500 ** 2))
for name, blocks in [('a', 256), ('b', 128)]:
    with rasterio.Env(GDAL_TIFF_INTERNAL_MASK=False), rasterio.open(f'{d}/{name}.tif', 'w', **prof) as f:
        f.write(((xx // 16 + yy // 16) % 200 + 40).astype('u1'), 1)
        f.write_mask((valid * 255).astype('u1'))
    with rasterio.Env(GDAL_TIFF_INTERNAL_MASK=False, TIFF_USE_OVR=True, GDAL_TIFF_OVR_BLOCKSIZE=blocks), rasterio.open(f'{d}/{name}.tif', 'r+') as f:
        f.build_overviews([2, 4, 8], Resampling.average)
shutil.copy(f'{d}/a.tif.ovr', f'{d}/b.tif.ovr')
out = {}
for name in ['a', 'b']:
    with Reader(f'{d}/{name}.tif') as r:
        out[name] = {'files': sorted(os.path.basename(p) for p in r.dataset.files)}
        for t in tiles:
            z, x, y = map(int, t.split('/'))
            out[name][t] = (r.tile(x, y, z).mask > 0).astype('u1').ravel().tolist()
print(json.dumps(out))
`

// The 8×, 4× and 2× overviews read 1:1, and the full resolution.
const MASK_OVR_TILES = ['8/135/91', '9/270/182', '10/541/365', '11/1080/728']

/** MASK_OVR_SCRIPT's files written in `dir`, and rio-tiler's masks of MASK_OVR_TILES over them (by set, then tile). */
function maskOvrFiles (dir) {
  const run = spawnSync(RIO_PYTHON, ['-c', MASK_OVR_SCRIPT, dir, ...MASK_OVR_TILES], { encoding: 'utf8', maxBuffer: 64 * 2 ** 20 })
  assert.equal(run.status, 0, `rio-tiler failed: ${run.stderr}`)
  return JSON.parse(run.stdout)
}

test('a .msk.ovr beside a .msk is read as the mask\'s overview levels: transparent where rio-tiler masks at every zoom, in the .ovr\'s blocks or its own; added at a reload, it is read', async (t) => {
  if (!needs(t, HAVE_RIO_TILER, NO_RIO_TILER)) return
  const dir = tempDir(t)
  const reference = maskOvrFiles(dir)
  const tiles = MASK_OVR_TILES
  assert.deepEqual(reference.a.files, ['a.tif', 'a.tif.msk', 'a.tif.msk.ovr', 'a.tif.ovr'], 'GDAL reads the .msk.ovr')
  // a.tif opens without its .msk.ovr: the reload that sees it added re-opens the set in every worker.
  renameSync(join(dir, 'a.tif.msk.ovr'), join(dir, 'aside'))
  const app = await makeApp(t, { paths: [join(dir, 'a.tif'), join(dir, 'b.tif')], cacheMB: 0, raster: { threads: 1 } })
  assert.equal((await app.inject('/a/8/135/91.png')).statusCode, 404, 'without the .msk.ovr, every sample of the .msk at z8 falls on a stripe: all hidden')
  renameSync(join(dir, 'aside'), join(dir, 'a.tif.msk.ovr'))
  await app.catalog.reload()
  for (const id of ['a', 'b']) {
    assert.equal((await app.inject(`/${id}/meta`)).json().mask, true, `${id}: /meta says the file has a mask`)
    for (const tile of tiles) {
      const valid = reference[id][tile]
      assert.ok(valid.filter((v) => v === 0).length > 1000 && valid.filter((v) => v === 1).length > 1000, `${id} ${tile}: rio-tiler hides some pixels, not all`)
      assert.equal(await differing(app, `/${id}/${tile}.png`, valid), 0, `${id} ${tile}: transparent where rio-tiler masks`)
    }
  }
  // One that is not a TIFF is the set's 503, saying why, without a path.
  writeFileSync(join(dir, 'b.tif.msk.ovr'), 'not a tiff')
  await app.catalog.reload()
  const res = await app.inject('/b/9/270/182.png')
  assert.equal(res.statusCode, 503)
  assert.match(res.json().message, /^tileset 'b' is unavailable: the mask's overviews beside the file \(b\.tif\.msk\.ovr\) are not a readable TIFF/)
  assert.ok(!res.body.includes(dir), 'no path')
})

/**
 * A real HTTP server on 127.0.0.1 answering range requests for the files of `dir` (an ETag each), 404 for any other
 * path, 403 for those `denied` (as S3 answers for a key that is not there to whoever may not list the bucket); `asked`
 * counts the requests for each name.
 */
async function folderServer (t, dir, denied = []) {
  const asked = {}
  const server = createServer((req, res) => {
    const name = decodeURIComponent(req.url.split('?')[0].slice(1))
    asked[name] = (asked[name] ?? 0) + 1
    if (denied.includes(name)) { res.writeHead(403); res.end(); return }
    let file
    try { file = readFileSync(join(dir, name)) } catch { res.writeHead(404); res.end(); return }
    const [, start, end] = (/bytes=(\d+)-(\d+)/.exec(req.headers.range ?? '') ?? []).map(Number)
    if (start === undefined) { res.writeHead(200, { 'content-length': file.length }); res.end(file); return }
    const last = Math.min(end, file.length - 1)
    res.writeHead(206, { 'content-range': `bytes ${start}-${last}/${file.length}`, 'content-length': last - start + 1, etag: `"${name}-${file.length}"` })
    res.end(file.subarray(start, last + 1))
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.after(() => server.close())
  return { url: (name) => `http://127.0.0.1:${server.address().port}/${name}`, asked }
}

test('a remote COG\'s .msk, .msk.ovr and .ovr are read as a local one\'s, each looked for once an open, not by every worker; none there (404, 403) is no sidecar, quietly', async (t) => {
  if (!needs(t, HAVE_RIO_TILER, NO_RIO_TILER)) return
  const dir = tempDir(t)
  const tiles = MASK_OVR_TILES
  const reference = maskOvrFiles(dir).a
  copyFileSync(join(dir, 'a.tif'), join(dir, 'plain.tif')) // no sidecars: its .msk a 404, its .ovr a 403
  const store = await folderServer(t, dir, ['plain.tif.ovr'])
  const logs = []
  const { config } = loadConfig({ overrides: { sets: { a: { url: store.url('a.tif') }, plain: { url: store.url('plain.tif') } }, raster: { threads: 2 }, cacheMB: 0, watch: false, demo: false } })
  const app = await buildApp(config, { loggerInstance: pino({ level: 'info' }, { write: (line) => logs.push(JSON.parse(line)) }) })
  t.after(() => app.close())
  const meta = (await app.inject('/a/meta')).json()
  assert.deepEqual([meta.mask, meta.externalOverviews, meta.overviews], [true, true, [[1024, 1024], [512, 512], [256, 256]]])
  for (const tile of tiles) {
    // Four at once: both workers draw it.
    for (const wrong of await Promise.all(Array.from({ length: 4 }, () => differing(app, `/a/${tile}.png`, reference[tile])))) {
      assert.equal(wrong, 0, `a ${tile}: transparent where rio-tiler masks`)
    }
  }
  // Without sidecars: no mask, no overviews, nothing said.
  const plain = (await app.inject('/plain/meta')).json()
  assert.deepEqual([plain.mask, plain.externalOverviews, plain.overviews], [false, false, []])
  const full = await Promise.all(Array.from({ length: 4 }, () => app.inject('/plain/11/1080/728.png')))
  assert.ok(full.every((res) => res.statusCode === 200), 'drawn by both workers')
  assert.deepEqual(logs.filter((l) => l.level >= 40), [], 'nothing to warn of')
  // Looked for once (the worker describing the set), a found one opened once by each worker: no more.
  assert.deepEqual(['plain.tif.msk', 'plain.tif.ovr'].map((name) => store.asked[name]), [1, 1], 'none there: asked once')
  assert.equal(store.asked['plain.tif.msk.ovr'], undefined, 'no .msk: its overviews not looked for')
  for (const name of ['a.tif.msk', 'a.tif.msk.ovr', 'a.tif.ovr']) assert.ok(store.asked[name] >= 1, `${name} read`)
})

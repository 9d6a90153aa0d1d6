// Overviews GDAL keeps beside a local file (`<file>.ovr`: `gdaladdo -ro`, or gdaladdo where it cannot write into the
// file), read as the file's own overview levels where it has none inside, as GDAL, rio-tiler and titiler read them:
// tiles drawn from them compared with rio-tiler's, the zoom range they open, and the .ovr's file closed with the file.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { copyFileSync, linkSync, readdirSync, readlinkSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import sharp from 'sharp'
import { makeApp, needs } from './helpers/app.js'
import { tempDir } from './helpers/data.js'
import { createRasterPool } from '../lib/raster/pool.js'
import { open as openCog } from '../lib/sources/cog.js'

const RIO_PYTHON = process.env.RIO_TILER_PYTHON || 'python3'
const HAVE_RIO_TILER = spawnSync(RIO_PYTHON, ['-c', 'import rio_tiler'], { stdio: 'ignore' }).status === 0
const NO_RIO_TILER = 'rio-tiler is not installed (pip install rio-tiler, or set RIO_TILER_PYTHON to a python that has it)'
const HAVE_PROC = (() => { try { return readdirSync('/proc/self/fd').length > 0 } catch { return false } })()

// Files written by rio-tiler's rasterio, none with overviews inside unless said:
// `big.tif`: 4096 px of noise over z8 tile 135/91 (full resolution at z12), overviews 2, 4, 8, 16 in big.tif.ovr
// (uncompressed): without them no tile below z9 may be drawn (one would read 16 Mpx of the full image).
// `rgb.tif`: 1024 px of RGB over z10 tile 540/364 with an internal mask (a disc hidden, which GDAL does not write
// overviews of beside the .ovr), overviews 2 and 4 in a .ovr of JPEG YCbCr pixel-interleaved blocks, unlike the file's.
// `both.tif`: 1024 px over the same tile with an overview (2) inside, and beside it the .ovr of a file of other values
// (4, 8): GDAL reads the internal one alone. `bands.tif`: one band, beside it a copy of rgb.tif.ovr (three bands).
// rio-tiler's tile (values, mask) for each `name:z/x/y` asked, with nearest and bilinear resampling.
const OVR_SCRIPT = `
import json, math, os, shutil, sys, warnings
warnings.filterwarnings('ignore')
import numpy as np, rasterio
from rasterio.enums import Resampling
from rasterio.transform import from_origin
from rio_tiler.io import Reader
d, tiles = sys.argv[1], sys.argv[2:]
W = 2 * math.pi * 6378137.0
def write(name, n, z, x, y, values, mask=None, internal=None):
    size = W / 2 ** z
    prof = dict(driver='GTiff', width=n, height=n, count=values.shape[0], dtype=values.dtype, crs='EPSG:3857', tiled=True,
                blockxsize=256, blockysize=256, compress='deflate', transform=from_origin(-W / 2 + x * size, W / 2 - y * size, size / n, size / n))
    with rasterio.Env(GDAL_TIFF_INTERNAL_MASK=True), rasterio.open(f'{d}/{name}', 'w', **prof) as f:
        f.write(values)
        if mask is not None:
            f.write_mask(mask)
        if internal:
            f.build_overviews(internal, Resampling.nearest)
def external(name, factors, **options):
    with rasterio.Env(TIFF_USE_OVR=True, **options), rasterio.open(f'{d}/{name}', 'r+') as f:
        f.build_overviews(factors, Resampling.nearest)
rng = np.random.default_rng(37)
write('big.tif', 4096, 8, 135, 91, rng.integers(0, 256, (1, 4096, 4096), dtype='u1'))
external('big.tif', [2, 4, 8, 16])
yy, xx = np.mgrid[0:1024, 0:1024]
rgb = np.stack([(xx // 4) % 256, (yy // 4) % 256, ((xx + yy) // 8) % 256]).astype('u1')
write('rgb.tif', 1024, 10, 540, 364, rgb, mask=(~((xx - 400) ** 2 + (yy - 600) ** 2 < 250 ** 2) * 255).astype('u1'))
external('rgb.tif', [2, 4], COMPRESS_OVERVIEW='JPEG', PHOTOMETRIC_OVERVIEW='YCBCR', INTERLEAVE_OVERVIEW='PIXEL')
noise = rng.integers(0, 256, (1, 1024, 1024), dtype='u1')
write('both.tif', 1024, 10, 540, 364, noise, internal=[2])
write('other.tif', 1024, 10, 540, 364, 255 - noise)
external('other.tif', [4, 8])
shutil.move(f'{d}/other.tif.ovr', f'{d}/both.tif.ovr')
os.remove(f'{d}/other.tif')
write('bands.tif', 1024, 10, 540, 364, noise)
shutil.copy(f'{d}/rgb.tif.ovr', f'{d}/bands.tif.ovr')
out = {}
for name in ['big', 'rgb', 'both']:
    with Reader(f'{d}/{name}.tif') as r:
        out[name] = {'overviews': r.dataset.overviews(1), 'files': sorted(os.path.basename(p) for p in r.dataset.files), 'minzoom': r.minzoom}
for t in tiles:
    name, zxy = t.split(':')
    z, x, y = map(int, zxy.split('/'))
    with Reader(f'{d}/{name}.tif') as r:
        for resampling in ['nearest', 'bilinear']:
            im = r.tile(x, y, z, resampling_method=resampling)
            out[name][f'{zxy} {resampling}'] = {'data': im.data.ravel().tolist(), 'mask': (im.mask > 0).astype('u1').ravel().tolist()}
print(json.dumps(out))
`

/**
 * Tile `url` against rio-tiler's `ref` ({ data: bands × 256², mask: 256² }): { hidden, wrong, off } the pixels opaque
 * where rio-tiler masks or transparent where it does not, the largest difference of a value where both show it, and
 * how many values differ.
 */
async function compare (app, url, ref) {
  const res = await app.inject(url)
  assert.equal(res.statusCode, 200, `${url}: ${res.body}`)
  const rgba = await sharp(res.rawPayload).ensureAlpha().raw().toBuffer()
  const pixels = ref.mask.length
  const bands = ref.data.length / pixels
  let hidden = 0; let wrong = 0; let off = 0
  for (let p = 0; p < pixels; p++) {
    const shown = rgba[p * 4 + 3] > 0
    if (shown !== (ref.mask[p] === 1)) hidden++
    if (!shown || ref.mask[p] === 0) continue
    for (let b = 0; b < 3; b++) {
      const d = Math.abs(rgba[p * 4 + b] - ref.data[(bands === 1 ? 0 : b) * pixels + p])
      if (d > 0) off++
      wrong = Math.max(wrong, d)
    }
  }
  return { hidden, wrong, off }
}

/** The files above in a new folder, and rio-tiler's answers for `tiles` (`name:z/x/y`). */
function generate (t, tiles = []) {
  const dir = tempDir(t)
  const run = spawnSync(RIO_PYTHON, ['-c', OVR_SCRIPT, dir, ...tiles], { encoding: 'utf8', maxBuffer: 256 * 2 ** 20 })
  assert.equal(run.status, 0, `rio-tiler failed: ${run.stderr}`)
  return { dir, reference: JSON.parse(run.stdout) }
}

test('overviews in a .ovr beside a file without any inside are its overview levels, as GDAL reads them: zooms below its full resolution drawn as rio-tiler draws them, and TileJSON\'s minzoom where they reach', async (t) => {
  if (!needs(t, HAVE_RIO_TILER, NO_RIO_TILER)) return
  // Read 1:1: big.tif's overviews (z8 to z11: 16, 8, 4, 2) and its full resolution (z12); rgb.tif's JPEG overviews (z10:
  // 4, z11: 2); both.tif's internal overview (z11: 2). Read coarser than a level: z7 of big.tif (its 16 at 2:1), z9 of
  // rgb.tif (its 4 at 2:1).
  const exact = { big: ['8/135/91', '9/270/182', '10/540/364', '11/1081/729', '12/2162/1459'], rgb: ['10/540/364', '11/1081/729'], both: ['11/1080/728'] }
  const coarser = { big: ['7/67/45'], rgb: ['9/270/182'] }
  const asked = [exact, coarser].flatMap((set) => Object.entries(set).flatMap(([name, tiles]) => tiles.map((tile) => `${name}:${tile}`)))
  const { dir, reference } = generate(t, asked)
  assert.deepEqual([reference.big.overviews, reference.big.files], [[2, 4, 8, 16], ['big.tif', 'big.tif.ovr']], 'GDAL reads big.tif.ovr')
  assert.deepEqual([reference.rgb.overviews, reference.rgb.files], [[2, 4], ['rgb.tif', 'rgb.tif.ovr']], 'GDAL reads rgb.tif.ovr')
  assert.deepEqual([reference.both.overviews, reference.both.files], [[2], ['both.tif', 'both.tif.ovr']], 'GDAL reads both.tif\'s internal overview alone')
  // The same file with its .ovr a link (not read, as a .msk or an .aux.xml that is a link is not): big.tif as it was
  // served before its .ovr was read.
  linkSync(join(dir, 'big.tif'), join(dir, 'linked.tif'))
  symlinkSync(join(dir, 'big.tif.ovr'), join(dir, 'linked.tif.ovr'))

  const logs = []
  const app = await makeApp(t, { paths: ['big', 'rgb', 'both', 'linked'].map((id) => join(dir, `${id}.tif`)), cacheMB: 0 }, { logs })
  const tile = (name, zxy, resampling) => compare(app, `/${name}/${zxy}.png?resampling=${resampling}`, reference[name][`${zxy} ${resampling}`])
  // Exact: noise read 1:1 off its level, nearest or bilinear (a 1:1 read samples the pixel centres), as through the
  // coarsest overview at 2:1 by nearest (bilinear at 2:1 differs as it does for internal overviews: GDAL widens its
  // kernel); both.tif through its internal overview (its .ovr's levels, of other values, are listed nowhere below).
  for (const zxy of exact.big) {
    for (const resampling of ['nearest', 'bilinear']) assert.deepEqual(await tile('big', zxy, resampling), { hidden: 0, wrong: 0, off: 0 }, `big ${zxy} ${resampling}`)
  }
  assert.deepEqual(await tile('big', '7/67/45', 'nearest'), { hidden: 0, wrong: 0, off: 0 }, 'big 7/67/45: the coarsest overview at 2:1')
  for (const zxy of exact.both) assert.deepEqual(await tile('both', zxy, 'nearest'), { hidden: 0, wrong: 0, off: 0 }, `both ${zxy}`)
  // rgb.tif's overviews are JPEG (YCbCr) where the file is DEFLATE: within 2 of GDAL's values, as an internal JPEG
  // YCbCr overview's are. Its internal mask has no overviews (GDAL writes none beside a .ovr): each level's is sampled
  // off the full mask on the level's grid, exact where the level is read 1:1; read at 2:1, where GDAL samples the full
  // mask on the tile's grid, the disc's edge moves by a pixel of the full image (40 of the tile's pixels: at most 64).
  for (const [zxy, hidden] of [...exact.rgb.map((zxy) => [zxy, 0]), ...coarser.rgb.map((zxy) => [zxy, 64])]) {
    for (const resampling of ['nearest', 'bilinear']) {
      const got = await tile('rgb', zxy, resampling)
      assert.ok(got.hidden <= hidden && got.wrong <= 2, `rgb ${zxy} ${resampling}: ${JSON.stringify(got)}`)
    }
  }

  // TileJSON's minzoom is rio-tiler's (z8), which the overviews reach; without them z9 (a z8 tile would read 16 Mpx of
  // the full image: 404). /meta lists the .ovr's levels and says where they are.
  const zooms = async (id) => {
    const meta = (await app.inject(`/${id}/meta`)).json()
    return { minzoom: (await app.inject(`/${id}.json`)).json().minzoom, overviews: meta.overviews, externalOverviews: meta.externalOverviews, z8: (await app.inject(`/${id}/8/135/91.png`)).statusCode }
  }
  assert.deepEqual(await zooms('big'), { minzoom: reference.big.minzoom, overviews: [[2048, 2048], [1024, 1024], [512, 512], [256, 256]], externalOverviews: true, z8: 200 })
  assert.equal(reference.big.minzoom, 8)
  assert.deepEqual(await zooms('linked'), { minzoom: 9, overviews: [], externalOverviews: false, z8: 404 })
  assert.deepEqual(await zooms('both'), { minzoom: reference.both.minzoom, overviews: [[512, 512]], externalOverviews: false, z8: 200 })
  assert.deepEqual((await zooms('rgb')).overviews, [[512, 512], [256, 256]])
  assert.ok((await app.inject('/big/meta')).json().servedZooms.minzoom < 8, 'served below minzoom off the coarsest overview, as titiler serves')
  assert.deepEqual(logs.filter((l) => l.level >= 40), [], 'nothing to warn of')
})

/** The descriptors this process (its worker threads included) holds open on `file`. */
function descriptorsOn (file) {
  let count = 0
  for (const fd of readdirSync('/proc/self/fd')) {
    try { if (readlinkSync(`/proc/self/fd/${fd}`) === file) count++ } catch {} // (one closed meanwhile)
  }
  return count
}

test('a .ovr that is not the file\'s overviews is the set\'s 503 saying why, as a damaged .msk is; the .ovr\'s file is closed with the file', async (t) => {
  if (!needs(t, HAVE_RIO_TILER, NO_RIO_TILER)) return
  const { dir } = generate(t)
  // bands.tif (one band) beside rgb.tif's .ovr (three); garbage.tif, a .ovr that is not a TIFF; shape.tif (1024 px)
  // beside big.tif's (2048 px and down).
  copyFileSync(join(dir, 'bands.tif'), join(dir, 'garbage.tif'))
  writeFileSync(join(dir, 'garbage.tif.ovr'), 'not a tiff')
  copyFileSync(join(dir, 'bands.tif'), join(dir, 'shape.tif'))
  copyFileSync(join(dir, 'big.tif.ovr'), join(dir, 'shape.tif.ovr'))
  const app = await makeApp(t, { paths: ['bands', 'garbage', 'shape', 'big'].map((id) => join(dir, `${id}.tif`)), cacheMB: 0 })
  const rebuild = /: delete it and build them again \(`gdaladdo -ro`\), or put them inside the file \(`gdal_translate -of COG`\)$/
  for (const [id, reason] of [
    ['bands', /^tileset 'bands' is unavailable: the overviews beside the file \(bands\.tif\.ovr\) hold 3 bands where the file has 1/],
    ['garbage', /^tileset 'garbage' is unavailable: the overviews beside the file \(garbage\.tif\.ovr\) are not a readable TIFF/],
    ['shape', /^tileset 'shape' is unavailable: the overviews beside the file \(shape\.tif\.ovr\) hold an image of 2048 × 2048 pixels, not an overview of the file's 1024 × 1024/],
  ]) {
    const res = await app.inject(`/${id}/11/1080/728.png`)
    assert.equal(res.statusCode, 503, id)
    assert.match(res.json().message, reason, id)
    if (id !== 'garbage') assert.match(res.json().message, rebuild, id)
    assert.ok(!res.body.includes(dir), 'no path')
  }
  assert.equal((await app.inject('/big/8/135/91.png')).statusCode, 200, 'the other sets serve')
  if (!HAVE_PROC) return
  for (const id of ['bands', 'garbage', 'shape']) assert.equal(descriptorsOn(join(dir, `${id}.tif.ovr`)), 0, `${id}: the .ovr refused is closed`)

  // A file replaced (here touched: another key for the workers) drops its old dataset 20 ms after its new one opens
  // (the worker idle meanwhile: its timers run between tasks), closing the .ovr's file with the file's.
  const file = join(dir, 'big.tif')
  // What the app's workers hold (one or both of its two, as its tasks went): this pool's are counted on top.
  const held = [descriptorsOn(file), descriptorsOn(`${file}.ovr`)]
  const rasterPool = createRasterPool({ threads: 1, blockCacheMB: 1, replacedCloseMs: 20 })
  t.after(() => rasterPool.close())
  const before = await openCog({ id: 'before', path: file }, { rasterPool })
  t.after(() => before.close())
  assert.ok(await before.getTile(8, 135, 91), 'a tile off the .ovr')
  assert.deepEqual([descriptorsOn(file), descriptorsOn(`${file}.ovr`)], held.map((n) => n + 1), 'this pool\'s worker holds both open too')
  const later = new Date(Date.now() + 60_000)
  utimesSync(file, later, later)
  const after = await openCog({ id: 'after', path: file }, { rasterPool })
  t.after(() => after.close())
  await new Promise((resolve) => setTimeout(resolve, 50))
  assert.ok(await after.getTile(9, 270, 182), 'a tile off the .ovr, the old dataset dropped meanwhile')
  assert.deepEqual([descriptorsOn(file), descriptorsOn(`${file}.ovr`)], held.map((n) => n + 1), 'the old dataset\'s file and .ovr closed')
})

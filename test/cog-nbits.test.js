// GeoTIFFs of samples that are not whole bytes (GDAL's NBITS=1..31: 1-bit masks and bitmaps, 4-bit classes, 12-bit
// sensor data), written by rasterio with GDAL and read back by rio-tiler for the reference values.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import sharp from 'sharp'
import { makeApp, needs } from './helpers/app.js'
import { tempDir } from './helpers/data.js'

const RIO_PYTHON = process.env.RIO_TILER_PYTHON || 'python3'
const HAVE_RIO_TILER = spawnSync(RIO_PYTHON, ['-c', 'import rio_tiler'], { stdio: 'ignore' }).status === 0
const NO_RIO_TILER = 'rio-tiler is not installed (pip install rio-tiler, or set RIO_TILER_PYTHON to a python that has it)'

// Files of 512 px over z11 tile 1080/728 in blocks of 256, with a 2:1 overview (which tile z11 reads), and rio-tiler's
// values of z11 1080/728 and z12 2161/1457 (full resolution), band by band, and GDAL's colour table of band 1.
const NBITS_SCRIPT = `
import json, math, sys, warnings
warnings.filterwarnings('ignore')
import numpy as np, rasterio
from rasterio.enums import Resampling
from rasterio.transform import from_origin
from rio_tiler.io import Reader
d = sys.argv[1]
W = 2 * math.pi * 6378137.0
prof = dict(driver='GTiff', width=512, height=512, crs='EPSG:3857', tiled=True, blockxsize=256, blockysize=256,
            transform=from_origin(-W / 2 + 1080 * W / 2048, W / 2 - 728 * W / 2048, W / 2048 / 512, W / 2048 / 512))
yy, xx = np.mgrid[0:512, 0:512]
checks = ((xx >> 3) + (yy >> 3)) % 2
twelve = [(xx * 8 + yy) % 4096, (yy * 8 + xx) % 4096, (xx * yy) % 4096]
files = {
  'bitmap': (dict(count=1, dtype='uint8', nbits=1, compress='lzw'), [checks]),
  'bitmapwhite': (dict(count=1, dtype='uint8', nbits=1, photometric='miniswhite', compress='deflate'), [checks]),
  'nibble': (dict(count=1, dtype='uint8', nbits=4, compress='deflate'), [((xx >> 4) + (yy >> 5)) % 16]),
  'twelve': (dict(count=1, dtype='uint16', nbits=12, compress='lzw'), twelve[:1]),
  'twelvebig': (dict(count=1, dtype='uint16', nbits=12, compress='packbits', endianness='big'), twelve[:1]),
  'twelvergb': (dict(count=3, dtype='uint16', nbits=12, compress='zstd', interleave='pixel'), twelve),
  'plain': (dict(count=1, dtype='uint16'), twelve[:1]),
  'plainrgb': (dict(count=3, dtype='uint16', interleave='pixel'), twelve),
  'bits24': (dict(count=1, dtype='uint32', nbits=24), [xx * 30000 + yy]),
  'bits27': (dict(count=1, dtype='uint32', nbits=27), [xx * 200000 + yy]),
}
out = {}
for name, (p, bands) in files.items():
    with rasterio.open(f'{d}/{name}.tif', 'w', **prof, **p) as f:
        f.write(np.stack(bands).astype(p['dtype']))
        f.build_overviews([2], Resampling.nearest)
    if name.startswith('bits'):
        continue
    with Reader(f'{d}/{name}.tif') as r:
        out[name] = {
          'z11': r.tile(1080, 728, 11).array.data.astype('f8').reshape(len(bands), -1).tolist(),
          'z12': r.tile(2161, 1457, 12).array.data.astype('f8').reshape(len(bands), -1).tolist(),
          'colormap': {str(k): v[:3] for k, v in (r.colormap or {}).items()},
        }
print(json.dumps(out))
`

/** A PNG tile decoded to RGB(A) bytes, `channels` a pixel. */
async function pixels (app, url) {
  const res = await app.inject(url)
  assert.equal(res.statusCode, 200, `${url}: ${res.body}`)
  const { data, info } = await sharp(res.rawPayload).raw().toBuffer({ resolveWithObject: true })
  return { data, channels: info.channels }
}

test('NBITS GeoTIFFs (1, 4 and 12-bit samples) are served with GDAL\'s values: a 1-bit bitmap black and white by GDAL\'s colour table, 12-bit ones as the same data in 16 bits', async (t) => {
  if (!needs(t, HAVE_RIO_TILER, NO_RIO_TILER)) return
  const dir = tempDir(t)
  const run = spawnSync(RIO_PYTHON, ['-c', NBITS_SCRIPT, dir], { encoding: 'utf8', maxBuffer: 256 * 2 ** 20 })
  assert.equal(run.status, 0, `rio-tiler failed: ${run.stderr}`)
  const reference = JSON.parse(run.stdout)
  const app = await makeApp(t, { paths: [dir], cacheMB: 0 })
  const tiles = { z11: '11/1080/728', z12: '12/2161/1457' }

  // Every band's values, exactly: terrarium heights are the values themselves.
  for (const [id, ref] of Object.entries(reference)) {
    for (const [zoom, tile] of Object.entries(tiles)) {
      for (const [b, values] of ref[zoom].entries()) {
        const { data, channels } = await pixels(app, `/${id}/${tile}.png?bidx=${b + 1}&encoding=terrarium`)
        const wrong = values.filter((v, p) => data[p * channels] * 256 + data[p * channels + 1] + data[p * channels + 2] / 256 - 32768 !== v)
        assert.equal(wrong.length, 0, `${id} ${tile} band ${b + 1}: ${wrong.length} values not rio-tiler's (${wrong.slice(0, 5)})`)
      }
    }
  }

  // Drawn as titiler draws them: a bitmap by GDAL's colour table (0 black, 1 white; MinIsWhite the other way round),
  // 4-bit values as the bytes they are (an 8-bit type: no stretch).
  for (const id of ['bitmap', 'bitmapwhite']) {
    const meta = (await app.inject(`/${id}/meta`)).json()
    assert.deepEqual([meta.dtype, meta.nbits, meta.palette], ['uint8', 1, true], id)
    const { colormap, z12: [values] } = reference[id]
    assert.equal(Object.keys(colormap).length, 2, `${id}: GDAL's colour table`)
    const { data, channels } = await pixels(app, `/${id}/${tiles.z12}.png`)
    const wrong = values.filter((v, p) => colormap[v].some((c, k) => data[p * channels + k] !== c))
    assert.equal(wrong.length, 0, `${id}: ${wrong.length} pixels not their colour table entry`)
    // The values stay 0 and 1: stretched by the user's rescale
    const stretched = await pixels(app, `/${id}/${tiles.z12}.png?rescale=0,1`)
    assert.ok(values.every((v, p) => stretched.data[p * stretched.channels] === v * 255), `${id}: rescale=0,1 draws 0 and 1 as 0 and 255`)
  }
  const nibble = await pixels(app, `/nibble/${tiles.z12}.png`)
  assert.ok(reference.nibble.z12[0].every((v, p) => nibble.data[p * nibble.channels] === v), '4-bit: the values as grey')
  assert.deepEqual((await app.inject('/nibble/meta')).json().statistics, null)

  // 12 bits: the same statistics, default stretch and tiles as the same data written in 16 bits.
  for (const [id, plain] of [['twelve', 'plain'], ['twelvebig', 'plain'], ['twelvergb', 'plainrgb']]) {
    const [meta, plainMeta] = await Promise.all([id, plain].map(async (s) => (await app.inject(`/${s}/meta`)).json()))
    assert.deepEqual([meta.dtype, meta.nbits], ['uint16', 12], id)
    assert.deepEqual(meta.statistics, plainMeta.statistics, `${id}: statistics`)
    for (const tile of Object.values(tiles)) {
      for (const query of ['', '?resampling=bilinear']) {
        const [ours, theirs] = await Promise.all([id, plain].map(async (s) => (await app.inject(`/${s}/${tile}.png${query}`)).rawPayload))
        assert.ok(ours.equals(theirs), `${id} ${tile}${query}: the 16-bit file's tile`)
      }
    }
  }

  // What geotiff.js does not unpack correctly is a 503 that says so and how to convert it.
  for (const id of ['bits24', 'bits27']) {
    const res = await app.inject(`/${id}/${tiles.z11}.png`)
    assert.equal(res.statusCode, 503, id)
    assert.match(res.json().message, /unsupported sample type: \d+-bit samples \(NBITS=\d+\), which geotiff\.js does not unpack correctly: rewrite it .*gdal_translate -of COG -ot UInt32/, id)
    assert.ok(!res.body.includes(dir), 'no path')
  }
})

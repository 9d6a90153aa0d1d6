// JPEG-compressed COGs decode as GDAL decodes them (libjpeg): tiles laid out so that a tile pixel is a pixel of the
// file, against GDAL's own reading of the same window (gdal_translate -srcwin to an uncompressed TIFF).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync, spawnSync } from 'node:child_process'
import { join } from 'node:path'
import sharp from 'sharp'
import { fromFile } from 'geotiff'
import { FIXTURES, HAVE_FIXTURES, makeApp, needs } from './helpers/app.js'
import { tempDir } from './helpers/data.js'
import { tileExtent } from '../lib/tilemath.js'

const HAVE_GDAL = spawnSync('gdal_translate', ['--version']).status === 0
const NO_GDAL = 'gdal-bin (gdal_translate) is not installed'

/** GDAL's values of the file's pixels [x0, x0 + 256) × [y0, y0 + 256), one array per band. */
async function gdalWindow (dir, file, x0, y0) {
  const out = join(dir, `window-${x0}-${y0}.tif`)
  execFileSync('gdal_translate', ['-q', '-srcwin', String(x0), String(y0), '256', '256', '-co', 'COMPRESS=NONE', file, out])
  return (await (await fromFile(out)).getImage()).readRasters()
}

/** Of our tile's opaque pixels (RGBA), how many there are and how many differ from GDAL's by more than 2 levels. */
function pixelsOff (rgba, bands) {
  let opaque = 0
  let off = 0
  for (let p = 0; p < 256 * 256; p++) {
    if (rgba[p * 4 + 3] === 0) continue
    opaque++
    for (let c = 0; c < 3; c++) {
      if (Math.abs(rgba[p * 4 + c] - bands[bands.length === 1 ? 0 : c][p]) > 2) { off++; break }
    }
  }
  return { opaque, off }
}

async function ourTile (app, url) {
  const res = await app.inject(url)
  assert.equal(res.statusCode, 200, `${url}: ${res.body}`)
  return sharp(res.rawPayload).ensureAlpha().raw().toBuffer()
}

/** The z/x/y of the tile whose top-left pixel is the file's pixel (x0, y0), when its grid is Web Mercator's at z. */
async function tileOf (file, z, x0, y0) {
  const image = await (await fromFile(file)).getImage()
  const [ox, oy] = image.getOrigin()
  const [w, , e, north] = tileExtent(z, 0, 0)
  const size = e - w
  const x = Math.round((ox + x0 * image.getResolution()[0] - w) / size)
  const y = Math.round((north - (oy + y0 * image.getResolution()[1])) / size)
  assert.ok(Math.abs(image.getResolution()[0] * 256 - size) < 1e-6 * size, 'a tile pixel is a pixel of the file')
  return [z, x, y]
}

test('JPEG COGs (YCbCr, RGB-stored, greyscale): tiles are GDAL\'s (libjpeg) decoding within 2 levels, colour edges too', async (t) => {
  if (!needs(t, HAVE_GDAL, NO_GDAL)) return
  const dir = tempDir(t)
  // A smooth RGB with a sharp blue edge every 256 px diagonally, where subsampled chroma is upsampled: libjpeg
  // interpolates it, geotiff.js's decoder took the nearest sample (blue up to 97 levels off GDAL).
  const n = 1024
  const rgb = Buffer.alloc(n * n * 3)
  for (let y = 0; y < n; y++) {
    for (let x = 0; x < n; x++) {
      const p = (y * n + x) * 3
      rgb[p] = Math.floor((x * 255) / n); rgb[p + 1] = Math.floor((y * 255) / n); rgb[p + 2] = (x + y) % 256
    }
  }
  const png = join(dir, 'source.png')
  await sharp(rgb, { raw: { width: n, height: n, channels: 3 } }).png().toFile(png)
  // Web Mercator z13 tiles 4320..4323 × 2912..2915: a tile pixel is a pixel of the file.
  const [w, , , north] = tileExtent(13, 4320, 2912)
  const [, south, east] = tileExtent(13, 4323, 2915)
  const georef = ['-a_srs', 'EPSG:3857', '-a_ullr', String(w), String(north), String(east), String(south)]
  const files = {
    jpeg_ycbcr: ['-of', 'COG', '-co', 'COMPRESS=JPEG', '-co', 'QUALITY=75', '-co', 'BLOCKSIZE=256'],
    jpeg_rgb: ['-of', 'GTiff', '-co', 'TILED=YES', '-co', 'COMPRESS=JPEG', '-co', 'PHOTOMETRIC=RGB'],
    jpeg_grey: ['-b', '3', '-of', 'COG', '-co', 'COMPRESS=JPEG', '-co', 'BLOCKSIZE=256'],
  }
  for (const [id, options] of Object.entries(files)) execFileSync('gdal_translate', ['-q', ...georef, ...options, png, join(dir, `${id}.tif`)])
  const app = await makeApp(t, { paths: [dir], cacheMB: 0 })
  for (const id of Object.keys(files)) {
    for (const [x0, y0] of [[256, 256], [512, 768]]) {
      const rgba = await ourTile(app, `/${id}/13/${4320 + x0 / 256}/${2912 + y0 / 256}.png`)
      const { opaque, off } = pixelsOff(rgba, await gdalWindow(dir, join(dir, `${id}.tif`), x0, y0))
      assert.equal(opaque, 65536)
      assert.ok(off <= 0.001 * opaque, `${id} at ${x0},${y0}: ${off} of 65536 pixels more than 2 levels off GDAL's`)
    }
  }
})

test('the NAIP JPEG fixture (YCbCr, 512 px blocks): a full-resolution tile is GDAL\'s decoding within 2 levels', async (t) => {
  if (!needs(t, HAVE_GDAL, NO_GDAL)) return
  if (!needs(t, HAVE_FIXTURES, 'the shared fixtures (../shared/fixtures) are not present')) return
  const dir = tempDir(t)
  const file = join(FIXTURES, 'cog', 'usda_naip_512_jpeg_z5.tif')
  const app = await makeApp(t, { paths: [file], cacheMB: 0 })
  // (The file holds data in blocks 10-11 × 14-16 only; the rest is masked out.)
  for (const [x0, y0] of [[5632, 7680], [5376, 7424]]) {
    const [z, x, y] = await tileOf(file, 18, x0, y0)
    const rgba = await ourTile(app, `/usda_naip_512_jpeg_z5/${z}/${x}/${y}.png`)
    const { opaque, off } = pixelsOff(rgba, await gdalWindow(dir, file, x0, y0))
    assert.ok(opaque > 10000, `${x0},${y0}: ${opaque} opaque pixels`)
    assert.ok(off <= 0.001 * opaque, `${x0},${y0}: ${off} of ${opaque} pixels more than 2 levels off GDAL's`)
  }
})

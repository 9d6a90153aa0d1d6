// The default stretch of data that is not 8-bit (each band's min/max, as /meta's statistics say), on rasters made here
// with GDAL: GDAL's stored statistics (in the file, in its .aux.xml) are what GDAL reports; nodata that float32 cannot
// hold exactly (ArcGIS's -3.4e38) is left out of the range; a constant band shows mid-grey. Tiles are checked against
// gdalwarp's values of the same tile, stretched by the same range.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync, spawnSync } from 'node:child_process'
import { copyFileSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import sharp from 'sharp'
import { fromFile } from 'geotiff'
import { makeApp, needs } from './helpers/app.js'
import { tempDir } from './helpers/data.js'
import { lonLatToTile, tileExtent } from '../lib/tilemath.js'

const HAVE_GDAL = spawnSync('gdalwarp', ['--version']).status === 0
const PYTHON = ['python3', '/usr/bin/python3'].find((p) => spawnSync(p, ['-c', 'import numpy, osgeo.gdal']).status === 0)
const missing = (t) => !needs(t, HAVE_GDAL, 'gdal-bin (gdalwarp, gdal_translate) is not installed') ||
  !needs(t, PYTHON !== undefined, 'python3 with numpy and GDAL\'s bindings (python3-numpy, python3-gdal) is not installed')
// GDAL writes no .aux.xml of its own here (gdalinfo -stats would): each test makes the ones it means.
const NO_PAM = { ...process.env, GDAL_PAM_ENABLED: 'NO' }
const ARCGIS_NODATA = -3.4e38 // what ArcGIS writes as a Float32 nodata; float32 holds -3.3999999521443642e38

// A raster in Web Mercator from 15°E 45°N: width × height pixels of 10 m, values f(col, row) (numpy arrays c, r),
// `nodata` where `hole(c, r)` when given, declared in the file unless `tag` is 'no'. A tiled GTiff without overviews.
const WRITE = `
import sys, numpy as np
from osgeo import gdal
gdal.UseExceptions()
path, width, height, dtype, value, hole, nodata, tag = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6], sys.argv[7], sys.argv[8]
r, c = np.mgrid[0:height, 0:width].astype('float64')
data = np.asarray(eval(value), dtype='float64') * np.ones((height, width))
if hole != '':
    data[eval(hole)] = float(nodata)
types = {'UInt16': gdal.GDT_UInt16, 'Float32': gdal.GDT_Float32}
ds = gdal.GetDriverByName('GTiff').Create(path, width, height, 1, types[dtype], ['TILED=YES', 'BLOCKXSIZE=256', 'BLOCKYSIZE=256', 'COMPRESS=DEFLATE'])
ds.SetGeoTransform([1669792.36, 10, 0, 5621521.49, 0, -10])
ds.SetProjection('EPSG:3857')
band = ds.GetRasterBand(1)
if hole != '' and tag == 'yes':
    band.SetNoDataValue(float(nodata))
band.WriteArray(data.astype({'UInt16': 'uint16', 'Float32': 'float32'}[dtype]))
ds = None
`

function raster (path, { width, height, dtype, value, hole = '', nodata = '', tag = true }) {
  execFileSync(PYTHON, ['-c', WRITE, path, String(width), String(height), dtype, value, hole, String(nodata), tag ? 'yes' : 'no'], { env: NO_PAM })
}

/** What GDAL itself reports of band 1: its statistics (when it has some stored) and nodata. */
function gdalBand (path) {
  const band = JSON.parse(execFileSync('gdalinfo', ['-json', path])).bands[0]
  const md = band.metadata?.[''] ?? {}
  return { statistics: md.STATISTICS_MINIMUM === undefined ? null : [Number(md.STATISTICS_MINIMUM), Number(md.STATISTICS_MAXIMUM)], nodata: band.noDataValue }
}

/** gdalwarp's Float32 values of tile z/x/y and its alpha (0/255). */
async function gdalTile (dir, path, z, x, y) {
  const out = join(dir, `ref-${z}-${x}-${y}-${path.split('/').pop()}`)
  execFileSync('gdalwarp', ['-q', '-overwrite', '-t_srs', 'EPSG:3857', '-te', ...tileExtent(z, x, y).map(String), '-ts', '256', '256',
    '-r', 'near', '-ot', 'Float32', '-dstalpha', path, out]) // (reading the .aux.xml beside `path`)
  const [values, alpha] = await (await (await fromFile(out)).getImage()).readRasters()
  return { values, alpha }
}

/** An .aux.xml as `gdalinfo -stats` writes it, band 1's statistics [min, max]; `end` closes the document. */
const pam = (min, max, end = '</PAMDataset>\n') => `<PAMDataset>\n  <PAMRasterBand band="1">\n    <Metadata>\n      <MDI key="STATISTICS_MAXIMUM">${max}</MDI>\n      <MDI key="STATISTICS_MINIMUM">${min}</MDI>\n    </Metadata>\n  </PAMRasterBand>\n${end}`

/** Our default tile (grey) as { grey, alpha } per pixel. */
async function ourTile (app, url) {
  const res = await app.inject(url)
  assert.equal(res.statusCode, 200, `${url}: ${res.body}`)
  const rgba = await sharp(res.rawPayload).ensureAlpha().raw().toBuffer()
  const n = rgba.length / 4
  const grey = new Uint8Array(n)
  const alpha = new Uint8Array(n)
  for (let k = 0; k < n; k++) { grey[k] = rgba[k * 4]; alpha[k] = rgba[k * 4 + 3] }
  return { grey, alpha }
}

/** Ours against GDAL's values stretched by [min, max]: share agreeing on transparency, worst byte difference. */
function compare (ours, ref, [min, max]) {
  let agree = 0
  let worst = 0
  let both = 0
  for (let k = 0; k < ours.grey.length; k++) {
    if ((ours.alpha[k] > 0) === (ref.alpha[k] > 0)) agree++
    if (ours.alpha[k] === 0 || ref.alpha[k] === 0) continue
    both++
    const want = Math.max(0, Math.min(255, Math.round(((ref.values[k] - min) * 255) / (max - min))))
    worst = Math.max(worst, Math.abs(want - ours.grey[k]))
  }
  return { agreement: agree / ours.grey.length, worst, both }
}

test('a Float32 nodata float32 cannot hold (ArcGIS\'s -3.4e38), in the file or only in its .aux.xml, is left out of the default stretch and is transparent, as GDAL draws it', async (t) => {
  if (missing(t)) return
  const dir = tempDir(t)
  // 2048 × 1024 px, values 100…2470 across, the left half nodata (the middle, where the statistics are read, is half
  // nodata: 1286…1877 there).
  const spec = { width: 2048, height: 1024, dtype: 'Float32', value: '100 + c * 2370 / 2047', hole: 'c < 1024', nodata: ARCGIS_NODATA }
  const tagged = join(dir, 'arcgis.tif')
  raster(tagged, spec)
  // The same values, nodata said only in the .aux.xml (set through GDAL on the file opened read-only: GDAL writes its PAM).
  const aux = join(dir, 'arcgis_aux.tif')
  raster(aux, { ...spec, tag: false })
  execFileSync(PYTHON, ['-c', 'import sys\nfrom osgeo import gdal\nds = gdal.Open(sys.argv[1])\nds.GetRasterBand(1).SetNoDataValue(float(sys.argv[2]))\nds = None', aux, String(ARCGIS_NODATA)])
  assert.equal(gdalBand(aux).nodata, ARCGIS_NODATA, 'GDAL reads the nodata off the .aux.xml')
  const app = await makeApp(t, { paths: [tagged, aux], cacheMB: 0 })
  for (const id of ['arcgis', 'arcgis_aux']) {
    const meta = (await app.inject(`/${id}/meta`)).json()
    assert.equal(meta.nodata, ARCGIS_NODATA, `${id}: nodata`)
    const [min, max] = meta.statistics.b1
    assert.ok(min >= 1285 && max <= 2471 && max - min > 500, `${id}: the data's range, nodata left out: ${meta.statistics.b1}`)
    // A tile across the nodata edge: transparent where GDAL's is, the rest stretched by that range (not all white).
    const z = 14
    const [x, y] = lonLatToTile(15.0 + (1024 * 10) / 111319.49, 45 - 0.03, z)
    const ours = await ourTile(app, `/${id}/${z}/${x}/${y}.png`)
    const result = compare(ours, await gdalTile(dir, join(dir, `${id}.tif`), z, x, y), [min, max])
    assert.ok(result.agreement > 0.999 && result.both > 1000, `${id}: transparency as GDAL's (${JSON.stringify(result)})`)
    assert.ok(result.worst <= 1, `${id}: values stretched as GDAL's by ${min},${max} (${JSON.stringify(result)})`)
    assert.ok(ours.alpha.some((a) => a === 0), `${id}: the nodata part is transparent`)
  }
})

test('GDAL\'s stored statistics set the default stretch: the file\'s (gdal_translate -stats), its .aux.xml\'s (gdalinfo -stats) over them as GDAL reads them; an .aux.xml that is a link is not read', async (t) => {
  if (missing(t)) return
  const dir = tempDir(t)
  // 2048 × 1024 px without overviews, 1000 in the middle column rising to 21480 at both sides: the middle 1024 px
  // (what is read without stored statistics) hold only 1000…11240.
  const plain = join(dir, 'plain.tif')
  raster(plain, { width: 2048, height: 1024, dtype: 'UInt16', value: '1000 + abs(c - 1024) * 20' })
  const inFile = join(dir, 'in_file.tif')
  execFileSync('gdal_translate', ['-q', '-stats', '-co', 'TILED=YES', '-co', 'COMPRESS=DEFLATE', plain, inFile], { env: NO_PAM })
  const sidecar = join(dir, 'sidecar.tif')
  copyFileSync(plain, sidecar)
  execFileSync('gdalinfo', ['-stats', sidecar]) // writes sidecar.tif.aux.xml
  // Stored in the file, and other numbers in an .aux.xml beside it: GDAL reports the .aux.xml's.
  const both = join(dir, 'both.tif')
  copyFileSync(inFile, both)
  writeFileSync(both + '.aux.xml', pam(500, 30000))
  // An .aux.xml that is a link (to one elsewhere): not followed.
  const linked = join(dir, 'linked.tif')
  copyFileSync(plain, linked)
  mkdirSync(join(dir, 'elsewhere'))
  writeFileSync(join(dir, 'elsewhere', 'x.aux.xml'), pam(7, 8))
  symlinkSync(join(dir, 'elsewhere', 'x.aux.xml'), linked + '.aux.xml')

  const expected = { in_file: [1000, 21480], sidecar: [1000, 21480], both: [500, 30000] }
  for (const [id, range] of Object.entries(expected)) assert.deepEqual(gdalBand(join(dir, `${id}.tif`)).statistics, range, `${id}: what GDAL reports`)
  const app = await makeApp(t, { paths: [inFile, sidecar, both, linked, plain], cacheMB: 0 })
  for (const [id, range] of Object.entries(expected)) {
    const meta = (await app.inject(`/${id}/meta`)).json()
    assert.deepEqual(meta.statistics.b1, range, `${id}: GDAL's statistics`)
    assert.deepEqual(meta.defaults.rescale, [range], `${id}: the default stretch`)
  }
  const linkedStats = (await app.inject('/linked/meta')).json().statistics.b1
  assert.deepEqual(linkedStats, (await app.inject('/plain/meta')).json().statistics.b1, 'a linked .aux.xml is not read: read off the file, as one without statistics')
  assert.ok(linkedStats[1] < 12000, `without stored statistics: the middle of the file (${linkedStats})`)

  // A tile at the file's west edge, stretched by GDAL's statistics: not saturated as the middle's range would make it.
  const z = 14
  const [x, y] = lonLatToTile(15.0 + (100 * 10) / 111319.49, 45 - 0.03, z)
  const ours = await ourTile(app, `/in_file/${z}/${x}/${y}.png`)
  const result = compare(ours, await gdalTile(dir, inFile, z, x, y), expected.in_file)
  assert.ok(result.both > 1000 && result.worst <= 1, JSON.stringify(result))
  assert.ok(ours.grey.some((v, k) => ours.alpha[k] > 0 && v < 250), 'the edge is not all white')
})

test('an .aux.xml of 1 MiB that repeats <PAMRasterBand> without closing it is read in one pass: the set opens at once and serves, with the statistics of its well-formed band', async (t) => {
  if (missing(t)) return
  const dir = tempDir(t)
  const path = join(dir, 'unclosed.tif')
  raster(path, { width: 512, height: 512, dtype: 'UInt16', value: '1000 + c * 10' })
  const head = pam(500, 30000, '')
  const tag = '<PAMRasterBand>'
  writeFileSync(path + '.aux.xml', head + tag.repeat(Math.floor((2 ** 20 - head.length) / tag.length))) // 1 MiB at most: read
  const start = performance.now()
  const app = await makeApp(t, { paths: [path], cacheMB: 0 })
  const meta = (await app.inject('/unclosed/meta')).json()
  const z = 15
  const [x, y] = lonLatToTile(15.0 + (256 * 10) / 111319.49, 45 - (256 * 10) / 111319.49 / Math.SQRT2, z)
  await ourTile(app, `/unclosed/${z}/${x}/${y}.png`) // (200: another worker may open the file, and read the .aux.xml, again)
  const ms = performance.now() - start
  assert.deepEqual(meta.statistics.b1, [500, 30000], 'the band before the unclosed ones is read')
  // Milliseconds of parsing; a scan from each opening tag to the end of the text took 9 s and more, per worker.
  assert.ok(ms < 5000, `opened and served in ${Math.round(ms)} ms`)
})

test('a constant band (statistics of no width) shows its value mid-grey, not black: UInt16 through the lookup tables, Float32 through the converter and band math', async (t) => {
  if (missing(t)) return
  const dir = tempDir(t)
  raster(join(dir, 'flat16.tif'), { width: 512, height: 512, dtype: 'UInt16', value: '77' })
  raster(join(dir, 'flat32.tif'), { width: 512, height: 512, dtype: 'Float32', value: '0.25' })
  const app = await makeApp(t, { paths: [dir], cacheMB: 0 })
  const z = 15
  const [x, y] = lonLatToTile(15.0 + (256 * 10) / 111319.49, 45 - (256 * 10) / 111319.49 / Math.SQRT2, z)
  for (const [id, value] of [['flat16', 77], ['flat32', 0.25]]) {
    assert.deepEqual((await app.inject(`/${id}/meta`)).json().statistics.b1, [value, value])
    for (const query of ['', '?resampling=bilinear']) {
      const { grey, alpha } = await ourTile(app, `/${id}/${z}/${x}/${y}.png${query}`)
      assert.ok(alpha.every((a) => a === 255), `${id}${query}: every pixel on the raster`)
      assert.ok(grey.every((v) => v === 128), `${id}${query}: mid-grey, found ${[...new Set(grey)]}`)
    }
  }
})

// COGs in CRSs whose definitions need more than a projection: a geographic CRS in grads from the Paris meridian (NTF
// (Paris)), and CRSs that epsg-index defines with a datum grid (+nadgrids: British National Grid, Gauss-Krüger), read
// with and without the grid file. Each against the tile gdalwarp cuts from the same file.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { join } from 'node:path'
import pino from 'pino'
import { buildApp } from '../lib/app.js'
import { loadConfig } from '../lib/config.js'
import { makeApp, needs } from './helpers/app.js'
import { tempDir } from './helpers/data.js'
import { HAVE_GDAL, NO_GDAL, makeCog, matchesGdal } from './helpers/gdal-tiles.js'
import { lonLatToTile } from '../lib/tilemath.js'

// Smooth grey (a shift of a fraction of a pixel changes little) with enough detail to show a misplaced tile.
const waves = (c, r) => Math.round((Math.sin(c / 17) * Math.cos(r / 11) * 0.5 + 0.5) * 230 + 10)

test('a geographic CRS in grads from the Paris meridian (EPSG:4807) is placed where GDAL places it', async (t) => {
  if (!needs(t, HAVE_GDAL, NO_GDAL)) return
  const dir = tempDir(t)
  // -1..2 grads east of Paris, 47.5..50 grads north: 1.44..4.14°E, 42.75..45°N.
  const file = makeCog(dir, 'ntf_paris', { width: 600, height: 500, srs: 'EPSG:4807', ullr: [-1, 50, 2, 47.5] }, waves)
  const app = await makeApp(t, { paths: [file], cacheMB: 0 })
  const { bounds } = (await app.inject('/ntf_paris.json')).json()
  const expected = [1.4365, 42.75, 4.1366, 45]
  bounds.forEach((v, i) => assert.ok(Math.abs(v - expected[i]) < 0.01, `bounds ${bounds} vs GDAL's ${expected}`))
  for (const [lon, lat, z] of [[2.8, 44, 8], [1.5, 43, 9], [4.1, 44.9, 10], [2.8, 43.9, 6]]) await matchesGdal(app, dir, 'ntf_paris', file, [z, ...lonLatToTile(lon, lat, z)])
})

test('a user-defined geographic CRS in grads (from Greenwich, no datum shift) is read in its unit', async (t) => {
  if (!needs(t, HAVE_GDAL, NO_GDAL)) return
  const dir = tempDir(t)
  // GDAL writes it as user-defined GeoKeys (GeographicTypeGeoKey 32767) with GeogAngularUnitsGeoKey 9105 (grad).
  const wkt = 'GEOGCS["grads",DATUM["grads_datum",SPHEROID["WGS 84",6378137,298.257223563],TOWGS84[0,0,0,0,0,0,0]],' +
    'PRIMEM["Greenwich",0],UNIT["grad",0.015707963267949]]'
  // 10..12 grads east, 50..52 grads north: 9..10.8°E, 45..46.8°N (gdalinfo's corners). GDAL 3.6 warps this CRS to
  // nothing (its inverse transform answers degrees), so its reference is the same pixels written in EPSG:4326.
  const file = makeCog(dir, 'wgs84_grads', { width: 400, height: 400, srs: wkt, ullr: [10, 52, 12, 50] }, waves)
  const degrees = makeCog(dir, 'in_degrees', { width: 400, height: 400, srs: 'EPSG:4326', ullr: [9, 46.8, 10.8, 45] }, waves)
  const app = await makeApp(t, { paths: [file], cacheMB: 0 })
  const { bounds } = (await app.inject('/wgs84_grads.json')).json()
  const expected = [9, 45, 10.8, 46.8]
  bounds.forEach((v, i) => assert.ok(Math.abs(v - expected[i]) < 1e-6, `bounds ${bounds} vs ${expected}`))
  for (const [lon, lat, z] of [[9.9, 45.9, 8], [9.05, 46.75, 10]]) await matchesGdal(app, dir, 'wgs84_grads', degrees, [z, ...lonLatToTile(lon, lat, z)])
})

test('CRSs that epsg-index defines with a datum grid are served without it, as GDAL does, said once in the log and never on stdout', async (t) => {
  if (!needs(t, HAVE_GDAL, NO_GDAL)) return
  const dir = tempDir(t)
  // British National Grid round London (50 m), Gauss-Krüger zone 3 (DHDN) round Kassel (25 m), NAD27 / UTM 14N in
  // Kansas (50 m): epsg-index gives each only +nadgrids (OSTN15, BETA2007, NTv2_0), which proj4 does not have.
  const files = {
    osgb: makeCog(dir, 'osgb', { width: 600, height: 500, srs: 'EPSG:27700', ullr: [500000, 200000, 530000, 175000] }, waves),
    osgb_too: makeCog(dir, 'osgb_too', { width: 200, height: 200, srs: 'EPSG:27700', ullr: [400000, 300000, 410000, 290000] }, waves),
    gk3: makeCog(dir, 'gk3', { width: 600, height: 500, srs: 'EPSG:31467', ullr: [3530000, 5700000, 3545000, 5687500] }, waves),
    nad27: makeCog(dir, 'nad27', { width: 600, height: 500, srs: 'EPSG:26714', ullr: [400000, 4430000, 430000, 4405000] }, waves),
  }
  const logs = []
  const printed = []
  const write = process.stdout.write
  process.stdout.write = function (chunk, ...rest) { // proj4's raw lines came from the workers through this stream
    printed.push(String(chunk))
    return write.call(this, chunk, ...rest)
  }
  t.after(() => { process.stdout.write = write })
  const { config } = loadConfig({ overrides: { paths: Object.values(files), cacheMB: 0, watch: false, demo: false } })
  const app = await buildApp(config, { loggerInstance: pino({ level: 'info' }, { write: (line) => logs.push(JSON.parse(line)) }) })
  t.after(() => app.close())
  const opened = {}
  for (const id of Object.keys(files)) opened[id] = await app.inject(`/${id}.json`)
  await new Promise((resolve) => setTimeout(resolve, 200)) // the workers' stdout reaches this thread's a moment later
  process.stdout.write = write
  assert.deepEqual(printed.filter((line) => /Unable to find|grid shift|Failed to find/.test(line)), [], 'nothing from proj4 on stdout')
  for (const [id, res] of Object.entries(opened)) assert.equal(res.statusCode, 200, `${id}: ${res.body}`)
  for (const [id, lon, lat, z] of [['osgb', -0.1, 51.5, 12], ['osgb', -0.3, 51.6, 14], ['gk3', 9.45, 51.3, 13], ['nad27', -98.5, 40.0, 12]]) {
    await matchesGdal(app, dir, id, files[id], [z, ...lonLatToTile(lon, lat, z)])
  }
  const said = logs.filter((l) => /without its datum grid/.test(l.msg ?? ''))
  assert.equal(said.filter((l) => /^EPSG:27700 .*OSTN15.*EPSG:1314/.test(l.msg)).length, 1, 'once for British National Grid, for both its files')
  assert.ok(said.some((l) => /^EPSG:31467 .*BETA2007/.test(l.msg)) && said.some((l) => /^EPSG:26714 .*NTv2_0/.test(l.msg)), JSON.stringify(said))
  assert.ok(said.every((l) => l.level === 40), 'a warning')
})

test('a CRS placed with no datum shift at all (a classical datum epsg-index gives none for) is said once, naming the code and how far off it may be; WGS 84\'s and GRS 80 datums are not', async (t) => {
  if (!needs(t, HAVE_GDAL, NO_GDAL)) return
  const dir = tempDir(t)
  // LUREF (EPSG:4181, International 1924) round Luxembourg, twice; SIRGAS 2000 (EPSG:4674, GRS 80) and WGS 84.
  const files = [
    makeCog(dir, 'luref', { width: 200, height: 200, srs: 'EPSG:4181', ullr: [6, 49.8, 6.2, 49.6] }, waves),
    makeCog(dir, 'luref_too', { width: 200, height: 200, srs: 'EPSG:4181', ullr: [6.1, 49.7, 6.3, 49.5] }, waves),
    makeCog(dir, 'sirgas', { width: 200, height: 200, srs: 'EPSG:4674', ullr: [-47, -15, -46.8, -15.2] }, waves),
    makeCog(dir, 'wgs84', { width: 200, height: 200, srs: 'EPSG:4326', ullr: [6, 49.8, 6.2, 49.6] }, waves),
  ]
  const logs = []
  const app = await makeApp(t, { paths: files, cacheMB: 0 }, { logs })
  assert.deepEqual((await app.inject('/list')).json(), ['luref', 'luref_too', 'sirgas', 'wgs84'])
  const said = logs.filter((l) => /datum shift/.test(l.msg ?? ''))
  assert.equal(said.length, 1, JSON.stringify(said))
  assert.ok(['luref', 'luref_too'].includes(said[0].set), said[0].set) // whichever opened first (sets open 8 at a time)
  assert.equal(said[0].level, 40)
  assert.match(said[0].msg, /^EPSG:4181 \(LUREF\) is used with no datum shift to WGS 84 .*a ballpark, so the raster may lie off by tens to hundreds of metres/)
})

test('a south-up file (positive pixel height, a ModelTransformation) and a GCP-georeferenced one are refused, saying what they are and to run gdalwarp; the south-up one warped is where GDAL puts it', async (t) => {
  if (!needs(t, HAVE_GDAL, NO_GDAL)) return
  const dir = tempDir(t)
  const north = makeCog(dir, 'north', { width: 400, height: 300, srs: 'EPSG:4326', ullr: [10, 46, 10.8, 45.4] }, waves)
  // -a_ullr with the top below the bottom: GDAL's geotransform (10, 0.002, 0, 45.4, 0, +0.002), rows going north.
  execFileSync('gdal_translate', ['-q', '-of', 'GTiff', '-co', 'TILED=YES', '-a_ullr', '10', '45.4', '10.8', '46', north, join(dir, 'southup.tif')])
  execFileSync('gdalwarp', ['-q', '-of', 'COG', join(dir, 'southup.tif'), join(dir, 'warped.tif')])
  execFileSync('gdal_translate', ['-q', '-co', 'TILED=YES', '-gcp', '0', '0', '10', '46', '-gcp', '400', '0', '10.8', '46', '-gcp', '0', '300', '10', '45.4',
    '-a_srs', 'EPSG:4326', north, join(dir, 'gcps.tif')])
  const app = await makeApp(t, { paths: [dir], cacheMB: 0 })
  const southUp = await app.inject('/southup/10/540/364.png')
  assert.equal(southUp.statusCode, 503)
  assert.match(southUp.json().message, /south-up .*`gdalwarp`/)
  assert.equal((await app.inject('/southup.json')).statusCode, 503, 'no TileJSON placing it elsewhere')
  const gcps = await app.inject('/gcps/10/540/364.png')
  assert.equal(gcps.statusCode, 503)
  assert.match(gcps.json().message, /georeferenced by 3 ground control points \(GCPs\).*`gdalwarp`/)
  assert.ok(!gcps.body.includes(dir))
  // Once warped north-up, it is served over 45.4..46°N (GDAL's corners), rows the right way up.
  const { bounds } = (await app.inject('/warped.json')).json()
  bounds.forEach((v, i) => assert.ok(Math.abs(v - [10, 45.4, 10.8, 46][i]) < 0.01, `bounds ${bounds}`))
  await matchesGdal(app, dir, 'warped', join(dir, 'warped.tif'), [10, ...lonLatToTile(10.4, 45.7, 10)])
})

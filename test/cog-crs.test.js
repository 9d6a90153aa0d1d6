// COGs in CRSs whose definitions need more than a projection: a geographic CRS in grads from the Paris meridian (NTF
// (Paris)), and CRSs that epsg-index defines with a datum grid (+nadgrids: British National Grid, Gauss-Krüger), read
// with and without the grid file. Each against the tile gdalwarp cuts from the same file.
import { test } from 'node:test'
import assert from 'node:assert/strict'
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

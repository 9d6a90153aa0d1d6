// COG sets against a real reference: GDAL (gdalwarp) cuts the same Web Mercator tile from the same file, and the
// pixels must agree within a stated tolerance. Runs on the shared fixtures (NAIP in 3857 with each compression, UTM,
// NAD83 UTM, 4326 world and full-earth, the dateline file, int16, float32 DEM, NaN nodata, paletted, RGBA, ZSTD,
// GOES geostationary) and on COGs the tests make with GDAL (UTM float DEM with nodata, Swiss LV95, LERC, big-endian
// band-interleaved, polar stereographic, geostationary as WKT). Zoom ranges are checked against rio-tiler's rule.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync, spawnSync } from 'node:child_process'
import { copyFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { once } from 'node:events'
import { createServer } from 'node:http'
import sharp from 'sharp'
import pino from 'pino'
import { fromFile } from 'geotiff'
import { FIXTURES, HAVE_FIXTURES, makeApp, needs } from './helpers/app.js'
import { tempDir } from './helpers/data.js'
import { rangeServer } from './helpers/http.js'
import { lonLatToTile, tileExtent } from '../lib/tilemath.js'
import { colormap, encode } from '../lib/raster/render.js'
import { openDataset } from '../lib/raster/dataset.js'
import { open as openCog } from '../lib/sources/cog.js'
import { createRasterPool } from '../lib/raster/pool.js'
import { ConfigError, loadConfig } from '../lib/config.js'
import { buildApp } from '../lib/app.js'
import { gridRow, sourceGrid, tileRatio } from '../lib/raster/warp.js'

const HAVE_GDAL = spawnSync('gdalwarp', ['--version']).status === 0
const COG = join(FIXTURES, 'cog')
const NO_GDAL = 'gdal-bin (gdalwarp, gdal_translate) is not installed'

/**
 * GDAL's tile: one array per band, then alpha (0/255), from `gdalwarp -te <tile bounds> -ts n n -r <resampling>`
 * (`-ovr <ovr>` when given).
 */
async function gdalTile (dir, file, z, x, y, { size = 256, resampling = 'near', ovr } = {}) {
  const out = join(dir, `ref-${z}-${x}-${y}-${size}-${resampling}.tif`)
  execFileSync('gdalwarp', ['-q', '-overwrite', '-t_srs', 'EPSG:3857', '-te', ...tileExtent(z, x, y).map(String),
    '-ts', String(size), String(size), '-r', resampling, ...(ovr === undefined ? [] : ['-ovr', String(ovr)]), '-dstalpha', file, out])
  return (await (await fromFile(out)).getImage()).readRasters()
}

test('rescale=min,max with min = max is a threshold (values up to it black, above it white), not a 400; min > max still is', async (t) => {
  const cog = anyCog(t)
  if (cog === null) return
  const app = await makeApp(t, { paths: [cog.file], cacheMB: 0 })
  const { id } = cog
  const tilejson = (await app.inject(`/${id}.json`)).json()
  const [z, x, y] = tileAt(tilejson, tilejson.maxzoom - 1)
  // A value the tile has on both sides of: its median grey under the full range, as a value.
  const [min, max] = (await app.inject(`/${id}/meta`)).json().statistics.b1
  const full = await ourTile(app, `/${id}/${z}/${x}/${y}.png?rescale=${min},${max}`)
  const shown = []
  for (let k = 0; k < full.rgba.length; k += 4) if (full.rgba[k + 3] > 0) shown.push(full.rgba[k])
  const middle = Math.round(min + (shown.sort((a, b) => a - b)[shown.length >> 1] / 255) * (max - min))
  const at = await ourTile(app, `/${id}/${z}/${x}/${y}.png?rescale=${middle},${middle}`)
  assert.equal(at.res.statusCode, 200, at.res.body)
  const greys = new Set()
  for (let k = 0; k < at.rgba.length; k += 4) if (at.rgba[k + 3] > 0) greys.add(at.rgba[k])
  assert.deepEqual([...greys].sort((a, b) => a - b), [0, 255], 'two levels only')
  // The file's values are integers: the same as a stretch from the value to the next one (up to it 0, from there 255).
  const next = await ourTile(app, `/${id}/${z}/${x}/${y}.png?rescale=${middle},${middle + 1}`)
  assert.deepEqual(at.rgba, next.rgba)
  assert.equal((await app.inject(`/${id}/${z}/${x}/${y}.png?rescale=${middle},${middle}&colormap_name=viridis`)).statusCode, 200)
  const bad = await app.inject(`/${id}/${z}/${x}/${y}.png?rescale=5,1`)
  assert.equal(bad.statusCode, 400)
  assert.match(bad.json().message, /rescale '5,1' is not min,max with min ≤ max/)
})

/** Our tile through the whole HTTP path, decoded to RGBA (null with the status when not 200). */
async function ourTile (app, url) {
  const res = await app.inject(url)
  if (res.statusCode !== 200) return { res, rgba: null }
  return { res, rgba: await sharp(res.rawPayload).ensureAlpha().raw().toBuffer() }
}

/**
 * How far our RGBA is from GDAL's values rendered the way the set's options say (bands, rescale): the share of pixels
 * where both agree on transparent vs not, and the mean absolute difference per channel where both are opaque.
 */
function compare (rgba, ref, options) {
  const { bidx, rescale } = options
  const alpha = ref[ref.length - 1]
  const n = alpha.length
  let agree = 0; let both = 0; let sum = 0
  for (let k = 0; k < n; k++) {
    const ours = rgba[k * 4 + 3] > 0
    const theirs = alpha[k] > 0
    if (ours === theirs) agree++
    if (!ours || !theirs) continue
    let skip = false
    let diff = 0
    for (let c = 0; c < 3; c++) {
      const b = bidx.length === 1 ? 0 : c
      let v = ref[bidx[b] - 1][k] // bands counted from 1, as /meta and `bidx` count them
      if (Number.isNaN(v)) { skip = true; break }
      if (rescale) v = ((v - rescale[b][0]) * 255) / (rescale[b][1] - rescale[b][0])
      v = Math.max(0, Math.min(255, Math.round(v)))
      diff += Math.abs(v - rgba[k * 4 + c])
    }
    if (skip) continue
    both++
    sum += diff / 3
  }
  return { agreement: agree / n, both, mean: both ? sum / both : 0 }
}

/** A tile at zoom z over the raster: its middle, or (for the dateline file) a given point. */
const tileAt = (tilejson, z, lonLat) => {
  const [w, s, e, n] = tilejson.bounds
  return [z, ...lonLatToTile(lonLat?.[0] ?? (w + e) / 2, lonLat?.[1] ?? (s + n) / 2, z)]
}

/** Writes an Esri ASCII grid (a format every GDAL reads) of width × height from f(col, row). */
function asciiGrid (path, { width, height, x0, y0, cell, nodata = -9999 }, f) {
  const lines = [`ncols ${width}`, `nrows ${height}`, `xllcorner ${x0}`, `yllcorner ${y0}`, `cellsize ${cell}`, `NODATA_value ${nodata}`]
  for (let r = 0; r < height; r++) lines.push(Array.from({ length: width }, (_, c) => f(c, r)).join(' '))
  writeFileSync(path, lines.join('\n') + '\n')
}

/** COGs made here with GDAL, so the suite has real data of its own (and kinds the fixtures lack). */
function generatedCogs (dir) {
  const dem = join(dir, 'dem.asc')
  // A hill with a nodata lake in one corner, on the UTM 33N grid around Vienna.
  asciiGrid(dem, { width: 600, height: 400, x0: 590000, y0: 5330000, cell: 25 }, (c, r) =>
    c < 80 && r < 60 ? -9999 : (200 + 300 * Math.exp(-((c - 300) ** 2 + (r - 200) ** 2) / 20000) + 15 * Math.sin(c / 7)).toFixed(2))
  execFileSync('gdal_translate', ['-q', '-of', 'COG', '-a_srs', 'EPSG:32633', '-ot', 'Float32', '-co', 'COMPRESS=DEFLATE',
    '-co', 'PREDICTOR=YES', '-co', 'BLOCKSIZE=128', '-co', 'OVERVIEWS=AUTO', dem, join(dir, 'utm_dem.tif')])
  const swiss = join(dir, 'swiss.asc')
  asciiGrid(swiss, { width: 500, height: 500, x0: 2680000, y0: 1240000, cell: 10 }, (c, r) => ((c * 7 + r * 3) % 997) + (c % 50 === 0 ? 4000 : 0))
  execFileSync('gdal_translate', ['-q', '-of', 'COG', '-a_srs', 'EPSG:2056', '-ot', 'UInt16', '-co', 'COMPRESS=LZW',
    '-co', 'BLOCKSIZE=256', '-co', 'OVERVIEWS=AUTO', swiss, join(dir, 'swiss_lv95.tif')])
  // LERC, as elevation is often stored: the DEM's lake as NaN, which GDAL writes as LERC's mask of valid pixels (then
  // ZSTD over it); and three pixel-interleaved UInt16 bands in one LERC blob, deflated.
  execFileSync('gdalwarp', ['-q', '-of', 'COG', '-s_srs', 'EPSG:32633', '-srcnodata', '-9999', '-dstnodata', 'nan', '-ot', 'Float32',
    '-co', 'COMPRESS=LERC_ZSTD', '-co', 'MAX_Z_ERROR=0', '-co', 'BLOCKSIZE=128', '-co', 'OVERVIEWS=AUTO', dem, join(dir, 'lerc_nan.tif')])
  execFileSync('gdal_translate', ['-q', '-of', 'COG', '-a_srs', 'EPSG:2056', '-ot', 'UInt16', '-b', '1', '-b', '1', '-b', '1',
    '-co', 'COMPRESS=LERC_DEFLATE', '-co', 'BLOCKSIZE=128', '-co', 'OVERVIEWS=AUTO', swiss, join(dir, 'lerc_rgb16.tif')])
  // Three bands, band-interleaved (planar), big-endian, ZSTD: all the byte-level variants at once.
  execFileSync('gdal_translate', ['-q', '-of', 'GTiff', '-a_srs', 'EPSG:32633', '-ot', 'Int16', '-b', '1', '-b', '1', '-b', '1',
    '-co', 'TILED=YES', '-co', 'BLOCKXSIZE=128', '-co', 'BLOCKYSIZE=128', '-co', 'INTERLEAVE=BAND', '-co', 'ENDIANNESS=BIG',
    '-co', 'COMPRESS=ZSTD', dem, join(dir, 'planar_bigendian.tif')])
  execFileSync('gdaladdo', ['-q', join(dir, 'planar_bigendian.tif'), '2', '4'])
  // Geographic, 179.5°E to 180.5°E: half of it is west of the antimeridian, on the other side of the map.
  execFileSync('gdal_translate', ['-q', '-of', 'COG', '-a_srs', 'EPSG:4326', '-a_ullr', '179.5', '60', '180.5', '59', '-ot', 'UInt16',
    '-co', 'COMPRESS=DEFLATE', '-co', 'BLOCKSIZE=128', '-co', 'OVERVIEWS=AUTO', swiss, join(dir, 'geo_antimeridian.tif')])
  // Polar stereographic north (NSIDC) from 72°N to beyond the Mercator edge: meridians converge across a tile, where a
  // coarse interpolation grid would stray by pixels.
  asciiGrid(swiss, { width: 400, height: 400, x0: -800000, y0: -2000000, cell: 4000 }, (c, r) => ((c * 7 + r * 3) % 997) + (c % 50 === 0 ? 4000 : 0))
  execFileSync('gdal_translate', ['-q', '-of', 'COG', '-a_srs', 'EPSG:3413', '-ot', 'UInt16', '-co', 'COMPRESS=DEFLATE',
    '-co', 'BLOCKSIZE=128', '-co', 'OVERVIEWS=AUTO', swiss, join(dir, 'polar_3413.tif')])
  // A geostationary full disk (Himawari's view) as GDAL writes it: a user-defined model type, the CRS only as ESRI WKT
  // in a citation key, with no PROJ string beside it (sweep y, PROJ's default); the corners are in space.
  asciiGrid(swiss, { width: 400, height: 400, x0: -5500000, y0: -5500000, cell: 27500 }, (c, r) => ((c * 7 + r * 3) % 997) + (c % 50 === 0 ? 4000 : 0))
  execFileSync('gdal_translate', ['-q', '-of', 'COG', '-a_srs', '+proj=geos +h=35785831 +lon_0=140.7 +ellps=WGS84', '-ot', 'UInt16',
    '-co', 'COMPRESS=DEFLATE', '-co', 'BLOCKSIZE=128', '-co', 'OVERVIEWS=AUTO', swiss, join(dir, 'geos_sweep_y.tif')])
  return ['utm_dem', 'swiss_lv95', 'lerc_nan', 'lerc_rgb16', 'planar_bigendian', 'geo_antimeridian', 'polar_3413', 'geos_sweep_y']
}

// file stem → tiles to check ([zoom offset from maxzoom] or explicit points) and the tolerances that hold for it.
const FIXTURE_CASES = {
  usda_naip_128_none_z2: {},
  usda_naip_256_lzw_z3: {},
  usda_naip_512_deflate_z2: {},
  usda_naip_512_jpeg_z5: { mean: 2 }, // JPEG decoders differ by a level or two
  usda_naip_512_webp_z5: {},
  'cog': {},
  cog_rgb: { mean: 2 },
  cog_rgba: {},
  cog_world: { points: [[10, 48], [-100, 40]] },
  cog_fullearth: { agreement: 0.95 }, // nearest-neighbour ties on its 0.83° grid fall either way
  cog_int16: {},
  cog_nodata_nan: {},
  cog_with_nan: {},
  cog_dateline: { points: [[179.5, 51.8], [-179.2, 51.8]] },
  elev: {},
  image_web_z5_z11: {},
  rgba8_cog: {},
  // Geostationary full disk, its CRS only as WKT in a citation key: the middle, a tile across the limb, and one
  // overzoomed (z0, where gdalwarp reads another level, has a test of its own).
  goes: { mean: 2, zooms: () => [1, 2, 4], points: [[-75, 0], [-150, 10]] },
}

/**
 * Our tiles against gdalwarp's: at `zooms` (a function of the TileJSON; default its maxzoom and two below, or one
 * below at each of `points`), in the middle of the raster or at each of `points`; nearest and, unless
 * `bilinear: false`, bilinear.
 */
async function checkAgainstGdal (t, app, dir, id, file, { points, zooms, mean = 1.5, agreement = 0.97, bilinear = true, ovr } = {}) {
  const tilejson = (await app.inject(`/${id}.json`)).json()
  const { defaults } = (await app.inject(`/${id}/meta`)).json()
  assert.ok(tilejson.maxzoom >= tilejson.minzoom, `${id}: zoom range`)
  const levels = zooms?.(tilejson) ?? (points ? [Math.max(tilejson.minzoom, tilejson.maxzoom - 1)] : [tilejson.maxzoom, Math.max(tilejson.minzoom, tilejson.maxzoom - 2)])
  const tiles = levels.flatMap((z) => (points ?? [undefined]).map((p) => tileAt(tilejson, z, p)))
  const resamplings = [['nearest', 'near', mean], ['bilinear', 'bilinear', mean + 2.5]].slice(0, bilinear ? 2 : 1)
  for (const [z, x, y] of tiles) {
    for (const [resampling, gdalName, limit] of resamplings) {
      const query = resampling === 'nearest' ? '' : '?resampling=bilinear'
      const { res, rgba } = await ourTile(app, `/${id}/${z}/${x}/${y}.png${query}`)
      const ref = await gdalTile(dir, file, z, x, y, { resampling: gdalName, ovr })
      const gdalOpaque = ref[ref.length - 1].filter((a) => a > 0).length
      if (rgba === null) {
        assert.equal(res.statusCode, 404, `${id} ${z}/${x}/${y}: ${res.body}`)
        assert.ok(gdalOpaque < 0.01 * 65536, `${id} ${z}/${x}/${y}: 404 where GDAL has ${gdalOpaque} pixels`)
        continue
      }
      assert.equal(res.headers['content-type'], 'image/png')
      const r = compare(rgba, ref, defaults)
      assert.ok(r.agreement >= agreement, `${id} ${z}/${x}/${y} ${resampling}: transparency agrees on only ${(r.agreement * 100).toFixed(1)} %`)
      assert.ok(gdalOpaque === 0 || r.both > 0.5 * gdalOpaque, `${id} ${z}/${x}/${y}: only ${r.both} of ${gdalOpaque} pixels compared`)
      assert.ok(r.mean <= limit, `${id} ${z}/${x}/${y} ${resampling}: mean difference ${r.mean.toFixed(2)} > ${limit}`)
    }
  }
}

test('COG fixtures: tiles match gdalwarp pixel for pixel (nearest and bilinear) in every CRS and compression', async (t) => {
  if (!needs(t, HAVE_GDAL, NO_GDAL)) return
  if (!needs(t, HAVE_FIXTURES, 'the shared fixtures (../shared/fixtures) are not present')) return
  const dir = tempDir(t)
  const app = await makeApp(t, { paths: [COG], cacheMB: 0 })
  for (const [id, options] of Object.entries(FIXTURE_CASES)) {
    const file = join(COG, (id === 'rgba8_cog' ? id + '.tiff' : id + '.tif'))
    await checkAgainstGdal(t, app, dir, id, file, options)
  }
})

const GENERATED_CASES = {
  lerc_nan: { zooms: (tj) => [tj.maxzoom, tj.maxzoom + 2], points: [[16.2247, 48.1995]] }, // the NaN lake, in the corner
  geo_antimeridian: { points: [[179.8, 59.5], [-179.7, 59.5]] },
  polar_3413: { points: [[-45, 84.5], [-10, 82], [-60, 76]] },
  geos_sweep_y: { zooms: () => [1, 3], points: [[140.7, 0], [65, 5]] }, // the middle and the limb
}

test('generated COGs (UTM float DEM with nodata, Swiss LV95, LERC with NaN and three bands, big-endian planar ZSTD int16, 4326 across the antimeridian, polar stereographic, geostationary as WKT) match gdalwarp', async (t) => {
  if (!needs(t, HAVE_GDAL, NO_GDAL)) return
  const dir = tempDir(t)
  const ids = generatedCogs(dir)
  const app = await makeApp(t, { paths: ids.map((id) => join(dir, id + '.tif')), cacheMB: 0 })
  for (const id of ids) {
    const meta = (await app.inject(`/${id}/meta`)).json()
    assert.ok(meta.statistics, `${id}: statistics for the default rescale`)
    // Bands are numbered from 1 in /meta as in `bidx`: the defaults name bands the statistics list.
    assert.deepEqual(Object.keys(meta.statistics), Array.from({ length: meta.bands }, (_, b) => `b${b + 1}`))
    assert.deepEqual(meta.defaults.rescale, meta.defaults.bidx.map((b) => meta.statistics[`b${b}`]))
    await checkAgainstGdal(t, app, dir, id, join(dir, id + '.tif'), GENERATED_CASES[id])
  }
  const planar = (await app.inject('/planar_bigendian/meta')).json()
  assert.deepEqual(planar.defaults.bidx, [1, 2, 3])
  const planarTile = (await app.inject('/planar_bigendian.json')).json()
  const [pz, px, py] = tileAt(planarTile, planarTile.maxzoom)
  const implicit = await app.inject(`/planar_bigendian/${pz}/${px}/${py}.png`)
  const explicit = await app.inject(`/planar_bigendian/${pz}/${px}/${py}.png?bidx=${planar.defaults.bidx.join(',')}`)
  assert.equal(explicit.headers.etag, implicit.headers.etag, '/meta\'s defaults.bidx, given as bidx, is the default rendering')
  const across = (await app.inject('/geo_antimeridian.json')).json()
  assert.deepEqual([across.bounds[0], across.bounds[2]], [-180, 180], 'bounds widen to the world rather than wrap')
  assert.ok(across.center[0] > 179 && across.center[0] <= 180, `centre on the raster: ${across.center}`)
  // The nodata lake is transparent: the top-left corner tile of the DEM at its finest zoom.
  const tj = (await app.inject('/utm_dem.json')).json()
  const meta = (await app.inject('/utm_dem/meta')).json()
  assert.equal(meta.nodata, -9999)
  assert.equal(meta.crs.includes('+proj=utm') || meta.crs.includes('+proj=tmerc'), true)
  const [cx, cy] = lonLatToTile(tj.bounds[0] + 0.001, tj.bounds[3] - 0.001, tj.maxzoom)
  const { res: corner, rgba } = await ourTile(app, `/utm_dem/${tj.maxzoom}/${cx}/${cy}.png`)
  assert.ok(rgba, 'corner tile renders')
  // One band shown as grey is a grey PNG (with alpha here, for the lake): a third of the samples of RGB.
  assert.equal(corner.rawPayload[25], 4, 'PNG colour type grey + alpha')
  let transparent = 0
  for (let k = 3; k < rgba.length; k += 4) if (rgba[k] === 0) transparent++
  assert.ok(transparent > 1000, `nodata shows as transparency (${transparent} px)`)
})

test('reprojection near the pole stays within 1/8 pixel of the exact transform (GDAL\'s error threshold)', async (t) => {
  if (!needs(t, HAVE_GDAL, NO_GDAL)) return
  const dir = tempDir(t)
  generatedCogs(dir)
  const ds = await openDataset({ key: 'polar', path: join(dir, 'polar_3413.tif') })
  const n = 256
  const scratch = { colLine: new Float64Array(n), rowLine: new Float64Array(n), cols: new Float64Array(n * n), rows: new Float64Array(n * n) }
  // A z2 tile from 66°N to 85°N: meridians converge across it, and 16 px interpolation cells would stray by 2/3 px.
  for (const [z, x, y] of [[2, 1, 0], [4, 5, 2], [3, 2, 1]]) {
    const grid = sourceGrid(ds, tileExtent(z, x, y), n, scratch)
    const ratio = Math.max(1, tileRatio(grid))
    const cols = new Float64Array(n); const rows = new Float64Array(n); const c = [0]; const r = [0]
    let worst = 0
    for (let j = 0; j < n; j++) {
      gridRow(grid, j, cols, rows)
      for (let i = 0; i < n; i++) {
        grid.exact(i, j, c, r, 0)
        if (Number.isFinite(c[0] + r[0])) worst = Math.max(worst, Math.hypot(c[0] - cols[i], r[0] - rows[i]) / ratio)
      }
    }
    assert.ok(worst <= 0.125, `${z}/${x}/${y}: off by ${worst.toFixed(3)} px`)
  }
})

test('paletted COG: the colour table applies, as GDAL expands it', async (t) => {
  if (!needs(t, HAVE_GDAL, NO_GDAL)) return
  if (!needs(t, HAVE_FIXTURES, 'the shared fixtures (../shared/fixtures) are not present')) return
  const dir = tempDir(t)
  const app = await makeApp(t, { paths: [join(COG, 'cog_cmap.tif')], cacheMB: 0 })
  const expanded = join(dir, 'expanded.vrt')
  execFileSync('gdal_translate', ['-q', '-of', 'VRT', '-expand', 'rgb', join(COG, 'cog_cmap.tif'), expanded])
  const tilejson = (await app.inject('/cog_cmap.json')).json()
  for (const z of [tilejson.maxzoom, tilejson.maxzoom - 3]) {
    const [, x, y] = tileAt(tilejson, z)
    const { rgba } = await ourTile(app, `/cog_cmap/${z}/${x}/${y}.png`)
    const ref = await gdalTile(dir, expanded, z, x, y)
    const r = compare(rgba, ref, { bidx: [1, 2, 3], rescale: null })
    assert.ok(r.both > 1000 && r.mean < 1, `cog_cmap z${z}: mean ${r.mean} over ${r.both} px`)
  }
})

/** A small COG for tests that need one, from the fixtures or made with GDAL. */
function anyCog (t) {
  if (HAVE_FIXTURES) return { file: join(COG, 'cog.tif'), id: 'cog' }
  if (!needs(t, HAVE_GDAL, `${NO_GDAL}, and without the shared fixtures there is no COG to serve`)) return null
  const dir = tempDir(t)
  const [id] = generatedCogs(dir)
  return { file: join(dir, id + '.tif'), id }
}

test('a file whose only overview is far coarser serves every advertised zoom (the next coarser level draws what the full image would take too much of)', async (t) => {
  const cog = anyCog(t)
  if (cog === null || !needs(t, HAVE_GDAL, NO_GDAL)) return
  const dir = tempDir(t)
  const file = join(dir, 'bigov.tif')
  execFileSync('gdal_translate', ['-q', '-of', 'GTiff', '-outsize', '8192', '8192', '-co', 'TILED=YES', '-co', 'COMPRESS=DEFLATE', cog.file, file])
  execFileSync('gdaladdo', ['-q', '-r', 'average', file, '64'])
  const app = await makeApp(t, { paths: [file], cacheMB: 0 })
  const tilejson = (await app.inject('/bigov.json')).json()
  for (let z = tilejson.minzoom; z <= tilejson.maxzoom; z++) {
    const [, x, y] = tileAt(tilejson, z)
    const res = await app.inject(`/bigov/${z}/${x}/${y}.png`)
    assert.equal(res.statusCode, 200, `z${z}: ${res.body}`)
  }
})

test('nodata= stands instead of the file\'s nodata (as titiler reads it), not beside it', async (t) => {
  if (!needs(t, HAVE_GDAL, NO_GDAL)) return
  const dir = tempDir(t)
  // Tile 10/300/400 pixel for pixel: rows 0-31 the file's nodata (-9999), column 0 -1000, the rest data.
  const cell = (2 * 20037508.342789244) / 256 / 1024
  const grid = join(dir, 'nd.asc')
  asciiGrid(grid, { width: 256, height: 256, x0: -20037508.342789244 + 300 * 256 * cell, y0: 20037508.342789244 - 401 * 256 * cell, cell },
    (c, r) => (r < 32 ? -9999 : c === 0 ? -1000 : 100 + c))
  execFileSync('gdal_translate', ['-q', '-of', 'COG', '-a_srs', 'EPSG:3857', '-ot', 'Int16', '-co', 'BLOCKSIZE=256', grid, join(dir, 'nd.tif')])
  const app = await makeApp(t, { paths: [join(dir, 'nd.tif')], cacheMB: 0 })
  const transparent = async (query) => {
    const { res, rgba } = await ourTile(app, `/nd/10/300/400.png?rescale=-1000,400${query}`)
    assert.equal(res.statusCode, 200, res.body)
    let n = 0
    for (let k = 3; k < rgba.length; k += 4) if (rgba[k] === 0) n++
    return n
  }
  assert.equal(await transparent(''), 32 * 256, 'the file\'s nodata rows')
  assert.equal(await transparent('&nodata=-1000'), 224, 'only the -1000 column below the rows, which are drawn now')
  const bilinear = await transparent('&nodata=-1000&resampling=bilinear')
  assert.ok(bilinear >= 224 && bilinear < 2 * 256, `bilinear: about the column (${bilinear})`)
  assert.equal(await transparent('&nodata=-1000&expression=b1%2B1'), 224, 'band math too')
})

test('COG options: bidx, rescale, colormap_name, nodata, resampling, formats and @2x; bad values are 400', async (t) => {
  const cog = anyCog(t)
  if (cog === null) return
  const app = await makeApp(t, { paths: [cog.file] })
  const { id } = cog
  const tilejson = (await app.inject(`/${id}.json`)).json()
  const [z, x, y] = tileAt(tilejson, tilejson.maxzoom - 1)
  const base = `/${id}/${z}/${x}/${y}`

  const png = await app.inject(`${base}.png`)
  assert.equal(png.statusCode, 200)
  assert.equal(png.headers['content-type'], 'image/png')
  assert.equal((await sharp(png.rawPayload).metadata()).width, 256)
  const noExt = await app.inject(base)
  assert.equal(noExt.headers['content-type'], 'image/png', 'no extension: PNG')
  const webp = await app.inject(`${base}.webp`)
  assert.equal(webp.headers['content-type'], 'image/webp')
  const jpg = await app.inject(`${base}.jpg`)
  assert.equal(jpg.headers['content-type'], 'image/jpeg')
  const jpeg = await app.inject(`${base}.jpeg`)
  assert.equal(jpeg.headers['content-type'], 'image/jpeg')
  const retina = await app.inject(`${base}@2x.png`)
  assert.equal(retina.statusCode, 200)
  assert.equal((await sharp(retina.rawPayload).metadata()).width, 512)

  // A colormap maps the rescaled grey through its ramp: every opaque pixel is a viridis colour of its grey level.
  const grey = await sharp(png.rawPayload).ensureAlpha().raw().toBuffer()
  const viridis = await app.inject(`${base}.png?colormap_name=viridis`)
  const colours = await sharp(viridis.rawPayload).ensureAlpha().raw().toBuffer()
  const ramp = colormap('viridis')
  let checked = 0
  for (let k = 0; k < grey.length; k += 4) {
    if (grey[k + 3] === 0) continue
    const g = grey[k]
    assert.deepEqual([colours[k], colours[k + 1], colours[k + 2]], [ramp[g * 3], ramp[g * 3 + 1], ramp[g * 3 + 2]])
    checked++
  }
  assert.ok(checked > 1000)
  assert.equal(viridis.rawPayload[25], 3, 'an indexed PNG (colour type 3): a byte a pixel')

  // rescale changes the picture; the same options spelled differently share a cache entry (same ETag).
  const a = await app.inject(`${base}.png?rescale=0,1000`)
  const b = await app.inject(`${base}.png?rescale=0.0,1e3&unknown=1`)
  assert.notEqual(a.headers.etag, png.headers.etag)
  assert.equal(a.headers.etag, b.headers.etag)
  // One band chosen explicitly, with cubic resampling.
  const bidx = await app.inject(`${base}.png?bidx=1&resampling=cubic`)
  assert.equal(bidx.statusCode, 200)
  // An empty bidx= is no bidx, as the other empty options are; an empty band within a list says so.
  const emptyBidx = await app.inject(`${base}.png?bidx=`)
  assert.equal(emptyBidx.statusCode, 200, emptyBidx.body)
  assert.equal(emptyBidx.headers.etag, png.headers.etag)
  const emptyBand = await app.inject(`${base}.png?bidx=1,,1`)
  assert.equal(emptyBand.statusCode, 400)
  assert.match(emptyBand.json().message, /^bidx has an empty band number/)

  for (const bad of ['bidx=0', 'bidx=9', 'bidx=1&bidx=1', 'rescale=5,1', 'rescale=a,b', 'rescale=1', 'colormap_name=nope',
    'resampling=lanczos2', 'encoding=png', 'nodata=abc', 'nodata=Infinity', 'nodata=0x10', 'nodata=%20', 'rescale=0,Infinity',
    'encoding=mapbox&colormap_name=viridis', 'resampling=nearest&resampling=cubic']) {
    const res = await app.inject(`${base}.png?${bad}`)
    assert.equal(res.statusCode, 400, `${bad}: ${res.body}`)
    assert.match(res.json().message, /\w/)
  }
  assert.equal((await app.inject(`${base}.gif`)).statusCode, 400)
  assert.equal((await app.inject(`${base}.jpg?encoding=mapbox`)).statusCode, 400, 'terrain-RGB in JPEG would corrupt heights')
  assert.equal((await app.inject(`${base}@3x.png`)).statusCode, 404)
  assert.equal((await app.inject(`/${id}.json?rescale=5,1`)).statusCode, 400)
  // TileJSON passes the options on to the tile URLs, as titiler does.
  const withOptions = (await app.inject(`/${id}.json?colormap_name=magma`)).json()
  assert.match(withOptions.tiles[0], /\/\{z\}\/\{x\}\/\{y\}\.png\?colormap_name=magma$/)
})

test('COG TileJSON and /meta: WGS84 bounds as GDAL computes them, zooms from the resolution, the file described', async (t) => {
  if (!needs(t, HAVE_GDAL, NO_GDAL)) return
  if (!needs(t, HAVE_FIXTURES, 'the shared fixtures (../shared/fixtures) are not present')) return
  const app = await makeApp(t, { paths: [COG] })
  for (const id of ['cog', 'usda_naip_512_webp_z5', 'cog_with_nan', 'cog_rgb']) {
    const info = JSON.parse(execFileSync('gdalinfo', ['-json', join(COG, id + '.tif')]))
    const ring = info.wgs84Extent.coordinates[0]
    const lons = ring.map((p) => p[0]); const lats = ring.map((p) => p[1])
    const tilejson = (await app.inject(`/${id}.json`)).json()
    const [w, s, e, n] = tilejson.bounds
    const tol = Math.max(1e-4, (Math.max(...lons) - Math.min(...lons)) * 0.01)
    assert.ok(Math.abs(w - Math.min(...lons)) < tol && Math.abs(e - Math.max(...lons)) < tol, `${id} lon bounds ${w},${e} vs GDAL`)
    assert.ok(Math.abs(s - Math.min(...lats)) < tol && Math.abs(n - Math.max(...lats)) < tol, `${id} lat bounds ${s},${n} vs GDAL`)
    const meta = (await app.inject(`/${id}/meta`)).json()
    assert.equal(meta.width, info.size[0])
    assert.equal(meta.height, info.size[1])
    assert.equal(meta.bands, info.bands.length)
    assert.equal(meta.overviews.length, info.bands[0].overviews?.length ?? 0)
  }
  const naip = (await app.inject('/usda_naip_512_webp_z5.json')).json()
  assert.equal(naip.maxzoom, 18, 'NAIP at 0.6 m: zoom 18')
  assert.equal(naip.format, 'png')
  assert.match((await app.inject('/cog/meta')).json().crs, /\+zone=21|lon_0=-57/)
  // A raster across the antimeridian: bounds cover the world's width, and tiles on both sides render.
  const dateline = (await app.inject('/cog_dateline.json')).json()
  assert.deepEqual([dateline.bounds[0], dateline.bounds[2]], [-180, 180])
  for (const lon of [179.5, -179.2]) {
    const [z, x, y] = tileAt(dateline, 8, [lon, 51.8])
    assert.equal((await app.inject(`/cog_dateline/${z}/${x}/${y}.png`)).statusCode, 200, `dateline tile at ${lon}`)
  }
})

const Z0_PIXEL = (2 * Math.PI * 6378137) / 256 // metres per pixel of a 256 px tile at zoom 0

/**
 * GDAL's suggested warp output into EPSG:3857, from gdalwarp itself (no -tr/-ts: GDALSuggestedWarpOutput2, what
 * rasterio's calculate_default_transform returns to rio-tiler); a Mercator file is taken as it is, as rio-tiler does.
 */
function gdalWarpOutput (dir, file) {
  let info = JSON.parse(execFileSync('gdalinfo', ['-json', file]))
  if (info.stac?.['proj:epsg'] !== 3857) {
    const vrt = join(dir, 'suggested.vrt')
    execFileSync('gdalwarp', ['-q', '-overwrite', '-of', 'VRT', '-t_srs', 'EPSG:3857', file, vrt])
    info = JSON.parse(execFileSync('gdalinfo', ['-json', vrt]))
  }
  const gt = info.geoTransform
  return { resolution: Math.max(Math.abs(gt[1]), Math.abs(gt[5])), width: info.size[0], height: info.size[1] }
}

/**
 * rio-tiler's zoom range (rio_tiler/io/base.py `_minzoom`/`_maxzoom`) from a warp output, written out again from its
 * sources: morecantile's zoom_for_res with the "auto" strategy on WebMercatorQuad, and rasterio's
 * get_maximum_overview_level (halve while the smaller side is over 256).
 */
function rioTilerZooms ({ resolution, width, height }) {
  const cell = (z) => Z0_PIXEL / 2 ** z
  const near = (a, b) => Math.abs(a - b) / b <= 1e-8
  const zoomForRes = (res) => {
    let z = 0
    for (; z < 24; z++) if (res > cell(z) || near(res, cell(z))) break
    if (z > 0 && !near(res, cell(z)) && cell(z - 1) / res < res / cell(z)) z--
    return z
  }
  let level = 0
  while (Math.min(Math.floor(width / 2 ** level), Math.floor(height / 2 ** level)) > 256) level++
  return { minzoom: zoomForRes(resolution * 2 ** level), maxzoom: zoomForRes(resolution) }
}

// rio-tiler itself, where installed: .ci/run puts it in a venv and names its python in RIO_TILER_PYTHON.
const RIO_PYTHON = process.env.RIO_TILER_PYTHON || 'python3'
const HAVE_RIO_TILER = spawnSync(RIO_PYTHON, ['-c', 'import rio_tiler'], { stdio: 'ignore' }).status === 0
const NO_RIO_TILER = 'rio-tiler is not installed (pip install rio-tiler, or set RIO_TILER_PYTHON to a python that has it)'

/** rio-tiler's own answer: { file: [minzoom, maxzoom] }. */
function rioTiler (files) {
  const script = 'import json, sys, warnings\nwarnings.filterwarnings("ignore")\nfrom rio_tiler.io import Reader\nout = {}\n' +
    'for f in sys.argv[1:]:\n    with Reader(f) as r:\n        out[f] = [r.minzoom, r.maxzoom]\nprint(json.dumps(out))\n'
  const run = spawnSync(RIO_PYTHON, ['-c', script, ...files], { encoding: 'utf8' })
  assert.equal(run.status, 0, `rio-tiler failed: ${run.stderr}`)
  return JSON.parse(run.stdout)
}

/** The COG files whose zoom range is checked: generated ones, plus fixtures where present. */
function zoomRangeFiles (dir) {
  generatedCogs(dir)
  const files = Object.fromEntries(['utm_dem', 'swiss_lv95', 'planar_bigendian'].map((id) => [id, join(dir, id + '.tif')]))
  // UTM (the minzoom was one too high for a UTM file), NAIP in 3857 (one too low), NZTM, 4326, with and without overviews.
  if (HAVE_FIXTURES) {
    for (const id of ['cog', 'cog_nodata_nan', 'cog_with_nan', 'cog_rgb', 'usda_naip_256_lzw_z3', 'usda_naip_512_jpeg_z5', 'image_web_z5_z11', 'elev']) files[id] = join(COG, id + '.tif')
    files.sparse = join(COG, 'sparse.tiff')
  }
  return files
}

test('COG zoom range: the same as rio-tiler\'s own (titiler\'s) for each file', async (t) => {
  if (!needs(t, HAVE_GDAL, NO_GDAL) || !needs(t, HAVE_RIO_TILER, NO_RIO_TILER)) return
  const files = zoomRangeFiles(tempDir(t))
  const app = await makeApp(t, { paths: Object.values(files), cacheMB: 0 })
  const reference = rioTiler(Object.values(files))
  for (const [id, file] of Object.entries(files)) {
    const tilejson = (await app.inject(`/${id}.json`)).json()
    assert.deepEqual([tilejson.minzoom, tilejson.maxzoom], reference[file], `${id}: rio-tiler's own range`)
  }
})

// Files whose nodata or NaN is in some bands only, written with rio-tiler's rasterio, each one tile (z12 2100/1400) of
// 256 px: `partial` (Float32, nodata -9999 in band 1 only at rows 0-9, cols 0-9), `partialnan` (the same without nodata,
// NaN in band 3 only at rows 0-9, cols 40-49), `partialbyte` (UInt8 RGB, nodata 0 in band 1 only, rows 20-29).
const PARTIAL_SCRIPT = `
import json, math, sys, warnings
warnings.filterwarnings('ignore')
import numpy as np, rasterio
from rasterio.transform import from_origin
from rio_tiler.io import Reader
d, cases = sys.argv[1], json.loads(sys.argv[2])
W = 2 * math.pi * 6378137.0
prof = dict(driver='GTiff', width=256, height=256, count=3, crs='EPSG:3857', tiled=True, blockxsize=128, blockysize=128,
            transform=from_origin(-W / 2 + 2100 * W / 4096, W / 2 - 1400 * W / 4096, W / 4096 / 256, W / 4096 / 256))
yy, xx = np.mgrid[0:256, 0:256]
a = np.stack([xx * 0.5 + yy * 0.25 - 50, np.sin(xx / 20.0) * 40 + yy * 0.1, np.cos(yy / 7.0) * 5]).astype('f4')
nan = a.copy(); nan[2, 0:10, 40:50] = np.nan
a[0, 0:10, 0:10] = -9999
byte = np.stack([xx % 200 + 10, yy % 200 + 10, np.full_like(xx, 77)]).astype('u1'); byte[0, 20:30, :] = 0
for name, data, extra in [('partial', a, dict(dtype='float32', nodata=-9999)), ('partialnan', nan, dict(dtype='float32')),
                          ('partialbyte', byte, dict(dtype='uint8', nodata=0))]:
    with rasterio.open(f'{d}/{name}.tif', 'w', **prof, **extra) as f: f.write(data)
out = []
for name, kw, bands in cases:
    with Reader(f'{d}/{name}.tif') as r:
        im = r.tile(2100, 1400, 12, **kw)
        read = r.tile(2100, 1400, 12, indexes=bands).array.data
    # rio-tiler's mask (a pixel valid where any output is), less NaN in a band read, which tile-cannon hides
    valid = np.logical_or.reduce(~np.ma.getmaskarray(im.array)) & ~np.isnan(read).any(axis=0)
    out.append({'valid': valid.astype('u1').ravel().tolist(), 'first': im.array.data[0].astype('f8').ravel().tolist()})
print(json.dumps(out))
`

test('transparency follows the bands a request reads, as rio-tiler masks them: bidx over the bands shown, band math where any band it reads is nodata', async (t) => {
  if (!needs(t, HAVE_RIO_TILER, NO_RIO_TILER)) return
  const dir = tempDir(t)
  // [file, query, rio-tiler's tile() arguments, the bands read (1-based)]
  const cases = [
    ['partial', 'bidx=1&encoding=terrarium', { indexes: 1 }, [1]],
    ['partial', 'bidx=1&encoding=terrarium&resampling=bilinear', { indexes: 1 }, [1]],
    ['partial', 'bidx=2&encoding=terrarium', { indexes: 2 }, [2]],
    ['partial', 'bidx=3,2,1&rescale=-100,100', { indexes: [3, 2, 1] }, [3, 2, 1]],
    ['partial', 'rescale=-100,100', {}, [1, 2, 3]],
    ['partial', 'expression=b1%2Bb2*b3&encoding=terrarium', { expression: 'b1+b2*b3' }, [1, 2, 3]],
    ['partial', 'expression=b1%2Bb2*b3&encoding=terrarium&resampling=bilinear', { expression: 'b1+b2*b3' }, [1, 2, 3]],
    ['partial', 'expression=b2-b3&encoding=terrarium', { expression: 'b2-b3' }, [2, 3]],
    ['partial', 'expression=b1;b2;b3&rescale=-100,100', { expression: 'b1;b2;b3' }, [1, 2, 3]],
    ['partialnan', 'bidx=1&encoding=terrarium', { indexes: 1 }, [1]],
    ['partialnan', 'expression=b1*2&encoding=terrarium', { expression: 'b1*2' }, [1]],
    ['partialnan', 'expression=b1%2Bb3&encoding=terrarium', { expression: 'b1+b3' }, [1, 3]],
    ['partialnan', 'rescale=-100,100', {}, [1, 2, 3]],
    ['partialbyte', 'bidx=2', { indexes: 2 }, [2]],
    ['partialbyte', 'bidx=1', { indexes: 1 }, [1]],
    ['partialbyte', '', {}, [1, 2, 3]],
    ['partialbyte', 'expression=b2;b1;b3', { expression: 'b2;b1;b3' }, [1, 2, 3]],
  ]
  const run = spawnSync(RIO_PYTHON, ['-c', PARTIAL_SCRIPT, dir, JSON.stringify(cases.map(([file, , kw, bands]) => [file, kw, bands]))],
    { encoding: 'utf8', maxBuffer: 64 * 2 ** 20 })
  assert.equal(run.status, 0, `rio-tiler failed: ${run.stderr}`)
  const reference = JSON.parse(run.stdout)
  const app = await makeApp(t, { paths: [dir], cacheMB: 0 })
  for (const [i, [file, query]] of cases.entries()) {
    const res = await app.inject(`/${file}/12/2100/1400.png?${query}`)
    assert.equal(res.statusCode, 200, `${file}?${query}`)
    const pixels = await sharp(res.rawPayload).ensureAlpha().raw().toBuffer()
    const { valid, first } = reference[i]
    const wrong = valid.filter((v, p) => v !== (pixels[p * 4 + 3] > 0 ? 1 : 0)).length
    assert.equal(wrong, 0, `${file}?${query}: transparent where rio-tiler masks, ${wrong} pixels not`)
    if (!query.includes('terrarium')) continue
    for (let p = 0; p < valid.length; p++) {
      if (valid[p] === 0) continue
      const height = pixels[p * 4] * 256 + pixels[p * 4 + 1] + pixels[p * 4 + 2] / 256 - 32768
      assert.ok(Math.abs(height - first[p]) <= 1 / 256, `${file}?${query}: pixel ${p} is ${height}, rio-tiler's ${first[p]}`)
    }
  }
})

test('COG zoom range: advertised by rio-tiler\'s rule, served from a few pixels across to `overzoom` levels past maxzoom', async (t) => {
  if (!needs(t, HAVE_GDAL, NO_GDAL)) return
  const dir = tempDir(t)
  const files = zoomRangeFiles(dir)
  const app = await makeApp(t, { paths: Object.values(files), cacheMB: 0 })
  for (const [id, file] of Object.entries(files)) {
    const tilejson = (await app.inject(`/${id}.json`)).json()
    const warp = gdalWarpOutput(dir, file)
    const expected = rioTilerZooms(warp)
    assert.deepEqual([tilejson.minzoom, tilejson.maxzoom], [expected.minzoom, expected.maxzoom], `${id}: rio-tiler's rule on ${JSON.stringify(warp)}`)
    // Served: down to where the raster is about 4 px across (or the advertised minzoom), 4 levels past maxzoom.
    const { servedZooms } = (await app.inject(`/${id}/meta`)).json()
    const across = (z) => (Math.max(warp.width, warp.height) * warp.resolution) / (Z0_PIXEL / 2 ** z)
    assert.ok(servedZooms.minzoom <= tilejson.minzoom && (servedZooms.minzoom === tilejson.minzoom || across(servedZooms.minzoom) >= 3.9), `${id}: served from ${servedZooms.minzoom}`)
    assert.ok(servedZooms.minzoom === 0 || across(servedZooms.minzoom - 1) < 4.1, `${id}: served from ${servedZooms.minzoom}, but at the zoom below the raster is ${across(servedZooms.minzoom - 1)} px`)
    assert.equal(servedZooms.maxzoom, tilejson.maxzoom + 4)
  }

  // Inside the served range a tile renders; one zoom beyond it at either end is a 404 that says why.
  const tilejson = (await app.inject('/utm_dem.json')).json()
  const { servedZooms } = (await app.inject('/utm_dem/meta')).json()
  assert.ok(servedZooms.minzoom > 0)
  for (const z of [servedZooms.minzoom, tilejson.minzoom - 1, tilejson.minzoom, tilejson.maxzoom, tilejson.maxzoom + 1, servedZooms.maxzoom]) {
    const [, x, y] = tileAt(tilejson, z)
    assert.equal((await app.inject(`/utm_dem/${z}/${x}/${y}.png`)).statusCode, 200, `z${z}`)
  }
  for (const z of [servedZooms.minzoom - 1, servedZooms.maxzoom + 1]) {
    const [, x, y] = tileAt(tilejson, z)
    const res = await app.inject(`/utm_dem/${z}/${x}/${y}.png`)
    assert.equal(res.statusCode, 404, `z${z}`)
    assert.match(res.json().message, new RegExp(`outside utm_dem's range ${servedZooms.minzoom}-${servedZooms.maxzoom}`))
  }

  // overzoom per set.
  const one = await makeApp(t, { paths: [], sets: { dem: { path: files.utm_dem, overzoom: 1 } }, cacheMB: 0 })
  assert.equal((await one.inject('/dem/meta')).json().servedZooms.maxzoom, tilejson.maxzoom + 1)
  for (const [z, status] of [[tilejson.maxzoom + 1, 200], [tilejson.maxzoom + 2, 404]]) {
    const [, x, y] = tileAt(tilejson, z)
    assert.equal((await one.inject(`/dem/${z}/${x}/${y}.png`)).statusCode, status, `overzoom 1: z${z}`)
  }

  // The server-wide default (config `raster`, which the catalog hands to open()) gives way to the set's own.
  const rasterPool = createRasterPool({ threads: 1, blockCacheMB: 64 })
  t.after(() => rasterPool.close())
  const global = await openCog({ id: 'dem', path: files.utm_dem }, { raster: { overzoom: 2 }, rasterPool })
  const own = await openCog({ id: 'dem', path: files.utm_dem, overzoom: 0 }, { raster: { overzoom: 2 }, rasterPool })
  t.after(() => Promise.all([global.close(), own.close()]))
  assert.deepEqual([global.servedZooms.maxzoom, own.servedZooms.maxzoom], [tilejson.maxzoom + 2, tilejson.maxzoom])

  // A large raster without overviews: no tile may read more than 2048 × 2048 of it, so the served range starts where
  // a tile needs no more, above the advertised minzoom (whose tiles would each read the whole raster).
  execFileSync('gdal_translate', ['-q', '-of', 'COG', '-outsize', '6000', '6000', '-co', 'OVERVIEWS=NONE', '-co', 'COMPRESS=DEFLATE',
    '-co', 'BLOCKSIZE=512', files.swiss_lv95, join(dir, 'flat.tif')])
  const flatApp = await makeApp(t, { paths: [join(dir, 'flat.tif')], cacheMB: 0 })
  const flat = (await flatApp.inject('/flat.json')).json()
  const flatServed = (await flatApp.inject('/flat/meta')).json().servedZooms
  const flatWarp = gdalWarpOutput(dir, join(dir, 'flat.tif'))
  // TileJSON advertises that range, not rio-tiler's (which counts on overviews the file lacks): its minzoom and centre
  // were zooms whose tiles are all 404, a blank map where a client opens it.
  const ruled = rioTilerZooms(flatWarp)
  assert.ok(flatServed.minzoom > ruled.minzoom, `served from ${flatServed.minzoom}, rio-tiler's rule from ${ruled.minzoom}`)
  assert.deepEqual([flat.minzoom, flat.maxzoom], [flatServed.minzoom, ruled.maxzoom])
  assert.ok(flat.center[2] >= flat.minzoom, `centre at z${flat.center[2]}`)
  const side = (z) => (256 * Z0_PIXEL) / 2 ** z / flatWarp.resolution // raster pixels across one tile
  assert.ok(side(flatServed.minzoom) <= 2048 && side(flatServed.minzoom - 1) > 2048)
  for (const [z, status] of [[flat.minzoom - 1, 404], [flat.minzoom, 200], [flat.center[2], 200]]) {
    const [, x, y] = tileAt(flat, z)
    assert.equal((await flatApp.inject(`/flat/${z}/${x}/${y}.png`)).statusCode, status, `z${z}`)
  }
})

test('tiles outside the advertised range match gdalwarp: underzoomed from the coarsest overview, overzoomed upsampled', async (t) => {
  if (!needs(t, HAVE_GDAL, NO_GDAL)) return
  const dir = tempDir(t)
  generatedCogs(dir)
  const files = { utm_dem: join(dir, 'utm_dem.tif'), swiss_lv95: join(dir, 'swiss_lv95.tif') }
  if (HAVE_FIXTURES) Object.assign(files, { cog: join(COG, 'cog.tif'), image_web_z5_z11: join(COG, 'image_web_z5_z11.tif') })
  const app = await makeApp(t, { paths: Object.values(files), cacheMB: 0 })
  for (const [id, file] of Object.entries(files)) {
    const { servedZooms } = (await app.inject(`/${id}/meta`)).json()
    await checkAgainstGdal(t, app, dir, id, file, { zooms: (tj) => [tj.minzoom - 1, tj.maxzoom + 2] })
    // Where the raster is a few pixels across: nearest only (gdalwarp's bilinear kernel there is scaled by the part
    // of the raster the tile covers).
    await checkAgainstGdal(t, app, dir, id, file, { zooms: () => [servedZooms.minzoom], bilinear: false })
  }
})

test('a geostationary full disk (its CRS only as WKT in a citation key) is served, its bounds found along the disk\'s edge', async (t) => {
  if (!needs(t, HAVE_GDAL, NO_GDAL)) return
  if (!needs(t, HAVE_FIXTURES, 'the shared fixtures (../shared/fixtures) are not present')) return
  const dir = tempDir(t)
  const file = join(COG, 'goes.tif')
  const app = await makeApp(t, { paths: [file], cacheMB: 0 })
  const meta = (await app.inject('/goes/meta')).json()
  assert.match(meta.crs, /\+proj=geos .*\+sweep=x/)
  // Seen from 35 786 km up, the Earth's edge is acos(a / (a + h)) = 81.3° from the sub-satellite point (75°W).
  const edge = (Math.acos(6378137 / (6378137 + 35786023)) * 180) / Math.PI
  const tilejson = (await app.inject('/goes.json')).json()
  const expected = [-75 - edge, -edge, -75 + edge, edge]
  tilejson.bounds.forEach((v, i) => assert.ok(Math.abs(v - expected[i]) < 0.3, `bounds ${tilejson.bounds} vs the disk's ${expected}`))
  assert.deepEqual([tilejson.minzoom, tilejson.maxzoom], [0, 2], 'rio-tiler\'s range')
  // The whole disk at z0, against gdalwarp reading the same overview (its -ovr AUTO measures the whole raster, not
  // the tile, and reads the full resolution here).
  await checkAgainstGdal(t, app, dir, 'goes', file, { zooms: () => [0], mean: 2, ovr: 0 })
})

test('terrain-RGB: encoding=mapbox and terrarium give heights that decode to the DEM values', async (t) => {
  if (!needs(t, HAVE_GDAL, NO_GDAL)) return
  const dir = tempDir(t)
  let file = HAVE_FIXTURES ? join(COG, 'elev.tif') : null
  if (file === null) { generatedCogs(dir); file = join(dir, 'utm_dem.tif') }
  const id = HAVE_FIXTURES ? 'elev' : 'utm_dem'
  const app = await makeApp(t, { paths: [file] })
  const tilejson = (await app.inject(`/${id}.json`)).json()
  const [z, x, y] = tileAt(tilejson, tilejson.maxzoom)
  const ref = await gdalTile(dir, file, z, x, y)
  for (const [encoding, decode] of [
    ['mapbox', (r, g, b) => -10000 + (r * 65536 + g * 256 + b) * 0.1],
    ['terrarium', (r, g, b) => r * 256 + g + b / 256 - 32768],
  ]) {
    const { res, rgba } = await ourTile(app, `/${id}/${z}/${x}/${y}.png?encoding=${encoding}`)
    assert.equal(res.statusCode, 200)
    let n = 0; let worst = 0
    for (let k = 0; k < ref[0].length; k++) {
      if (!(ref[1][k] > 0) || rgba[k * 4 + 3] === 0) continue
      worst = Math.max(worst, Math.abs(decode(rgba[k * 4], rgba[k * 4 + 1], rgba[k * 4 + 2]) - ref[0][k]))
      n++
    }
    assert.ok(n > 30000, `${encoding}: ${n} pixels compared`)
    assert.ok(worst <= (encoding === 'mapbox' ? 0.051 : 0.004), `${encoding}: worst height error ${worst} m`)
  }
  // Lossless WebP keeps terrain exact too.
  const webp = await app.inject(`/${id}/${z}/${x}/${y}.webp?encoding=mapbox`)
  const png = await app.inject(`/${id}/${z}/${x}/${y}.png?encoding=mapbox`)
  assert.deepEqual(await sharp(webp.rawPayload).raw().toBuffer(), await sharp(png.rawPayload).raw().toBuffer())
})

test('outside the raster 404, or a transparent tile with emptyTiles; a sparse COG with no data blocks answers cleanly', async (t) => {
  const cog = anyCog(t)
  if (cog === null) return
  const app = await makeApp(t, { paths: [cog.file] })
  const tilejson = (await app.inject(`/${cog.id}.json`)).json()
  const z = tilejson.maxzoom
  const [, x, y] = tileAt(tilejson, z)
  const far = `/${cog.id}/${z}/${(x + 2 ** (z - 1)) % 2 ** z}/${y}.png` // the other side of the world
  assert.equal((await app.inject(far)).statusCode, 404)
  const transparentApp = await makeApp(t, { paths: [], sets: { [cog.id]: { path: cog.file, emptyTiles: true } } })
  const empty = await transparentApp.inject(far)
  assert.equal(empty.statusCode, 200)
  const pixels = await sharp(empty.rawPayload).ensureAlpha().raw().toBuffer()
  assert.ok(pixels.every((v, i) => i % 4 !== 3 || v === 0), 'fully transparent')
  if (HAVE_FIXTURES) {
    const sparse = await makeApp(t, { paths: [join(COG, 'sparse.tiff')] })
    const tj = (await sparse.inject('/sparse.json')).json()
    for (const zoom of [tj.minzoom, tj.maxzoom]) {
      const [, sx, sy] = tileAt(tj, zoom)
      assert.equal((await sparse.inject(`/sparse/${zoom}/${sx}/${sy}.png`)).statusCode, 404, 'no data blocks: nothing to draw')
    }
  }
})

test('a block a sparse YCbCr JPEG COG leaves out (SPARSE_OK) is black, as GDAL reads it, not green (zeros taken for YCbCr)', async (t) => {
  if (!needs(t, HAVE_GDAL, NO_GDAL)) return
  const dir = tempDir(t)
  // 1024 px over z11 tile 1080/728 in blocks of 512: the lower-right block is all 0, so GDAL does not write it.
  const [west, , , north] = tileExtent(11, 1080, 728)
  const side = tileExtent(11, 1080, 728)[2] - west
  asciiGrid(join(dir, 'src.asc'), { width: 1024, height: 1024, x0: 0, y0: 0, cell: 1 }, (c, r) => (c >= 512 && r >= 512 ? 0 : ((c >> 2) % 200) + 40))
  const file = join(dir, 'sparse_jpeg.tif')
  execFileSync('gdal_translate', ['-q', '-of', 'COG', '-a_srs', 'EPSG:3857', '-a_ullr', west, north, west + side, north - side, '-a_nodata', 'none', '-ot', 'Byte',
    '-b', '1', '-b', '1', '-b', '1', '-co', 'COMPRESS=JPEG', '-co', 'SPARSE_OK=TRUE', '-co', 'BLOCKSIZE=512', join(dir, 'src.asc'), file].map(String))
  const app = await makeApp(t, { paths: [file], cacheMB: 0 })
  const missing = await app.inject('/sparse_jpeg/13/4322/2914.png') // within the block not written
  assert.equal(missing.statusCode, 200)
  const rgba = await sharp(missing.rawPayload).ensureAlpha().raw().toBuffer()
  assert.deepEqual([...rgba.subarray(0, 4)], [0, 0, 0, 255], 'GDAL reads the block as 0, 0, 0')
  const written = await sharp((await app.inject('/sparse_jpeg/13/4320/2912.png')).rawPayload).raw().toBuffer()
  assert.ok(Math.abs(written[0] - written[1]) <= 2 && written[0] > 30, `a block written is grey: ${[...written.subarray(0, 3)]}`)
  if (HAVE_FIXTURES) { // a block the NAIP fixture leaves out (rio-tiler and gdalwarp give black)
    const naip = await makeApp(t, { paths: [join(COG, 'usda_naip_512_jpeg_z5.tif')], cacheMB: 0 })
    const tile = await sharp((await naip.inject('/usda_naip_512_jpeg_z5/18/42711/97347.png')).rawPayload).ensureAlpha().raw().toBuffer()
    assert.deepEqual([...tile.subarray(0, 4)], [0, 0, 0, 255])
  }
})

test('overviews in a .ovr sidecar and a mask in a .msk, which GDAL reads, are read, without a warning', async (t) => {
  const cog = anyCog(t)
  if (cog === null || !needs(t, HAVE_GDAL, NO_GDAL)) return
  const dir = tempDir(t)
  const file = join(dir, 'side.tif')
  execFileSync('gdal_translate', ['-q', '-of', 'GTiff', '-outsize', '512', '512', '-co', 'TILED=YES', '-b', '1', '-mask', '1', '--config', 'GDAL_TIFF_INTERNAL_MASK', 'NO', cog.file, file])
  execFileSync('gdaladdo', ['-q', '-ro', file, '2', '4'])
  assert.ok(existsSync(`${file}.ovr`) && existsSync(`${file}.msk`))
  const logs = []
  const { config } = loadConfig({ overrides: { paths: [file], cacheMB: 0, watch: false, demo: false } })
  const app = await buildApp(config, { loggerInstance: pino({ level: 'info' }, { write: (line) => logs.push(JSON.parse(line)) }) })
  t.after(() => app.close())
  for (let i = 0; i < 2; i++) assert.equal((await app.inject('/side.json')).statusCode, 200)
  assert.deepEqual(logs.filter((l) => /beside the file|\.ovr|\.msk/.test(l.msg ?? '')), [])
  const meta = (await app.inject('/side/meta')).json()
  assert.deepEqual([meta.mask, meta.overviews, meta.externalOverviews], [true, [[256, 256], [128, 128]], true])
})

test('broken, non-COG and unsupported TIFFs are unavailable with a reason; the other sets keep serving', async (t) => {
  const cog = anyCog(t)
  if (cog === null) return
  const dir = tempDir(t)
  copyFileSync(cog.file, join(dir, 'good.tif'))
  writeFileSync(join(dir, 'garbage.tif'), 'this is not a tiff at all')
  writeFileSync(join(dir, 'empty.tiff'), '')
  writeFileSync(join(dir, 'truncated.tif'), readFileSync(cog.file).subarray(0, 600))
  const broken = ['garbage', 'empty', 'truncated']
  if (HAVE_FIXTURES) {
    for (const name of ['nocog.tif', 'cog_hirise_mars.tif']) copyFileSync(join(COG, name), join(dir, name))
    broken.push('nocog', 'cog_hirise_mars')
  }
  if (HAVE_GDAL) {
    // Interrupted Goode Homolosine: GeoTIFF has no keys for it, GDAL writes it as WKT, proj4 has no such projection.
    execFileSync('gdal_translate', ['-q', '-of', 'COG', '-a_srs', '+proj=igh +ellps=WGS84', '-a_ullr', '-1000000', '1000000', '1000000', '-1000000',
      '-outsize', '64', '64', cog.file, join(dir, 'goode.tif')])
    execFileSync('gdal_translate', ['-q', '-of', 'COG', '-ot', 'Int64', '-outsize', '64', '64', cog.file, join(dir, 'int64.tif')])
    broken.push('goode', 'int64')
  }
  const app = await makeApp(t, { paths: [dir] })
  assert.deepEqual((await app.inject('/list')).json(), ['good'])
  for (const id of broken) {
    const res = await app.inject(`/${id}/3/1/1.png`)
    assert.equal(res.statusCode, 503, id)
    assert.ok(!res.body.includes(dir) && !res.body.includes('    at '), `${id}: no path or stack in ${res.body}`)
  }
  if (HAVE_FIXTURES) {
    assert.match((await app.inject('/nocog/3/1/1.png')).json().message, /not a Cloud Optimized GeoTIFF/)
    assert.match((await app.inject('/cog_hirise_mars/3/1/1.png')).json().message, /not the Earth/)
  }
  if (HAVE_GDAL) {
    assert.match((await app.inject('/goode/3/1/1.png')).json().message, /unsupported CRS: .*only WKT describes \(projection "Goode_Homolosine"\)/)
    assert.match((await app.inject('/int64/3/1/1.png')).json().message, /unsupported sample type: 64-bit int$/)
  }
  const tilejson = (await app.inject('/good.json')).json()
  const [z, x, y] = tileAt(tilejson, tilejson.maxzoom)
  assert.equal((await app.inject(`/good/${z}/${x}/${y}.png`)).statusCode, 200)
})

test('a remote COG over HTTP range requests renders the same tile as the local file', async (t) => {
  const cog = anyCog(t)
  if (cog === null) return
  const bytes = readFileSync(cog.file)
  const remote = await rangeServer(t, bytes, 'remote.tif')
  // A store that answers at most 10 KB of any range (RFC 9110 lets it): the rest is asked for, never taken as all.
  const pieces = await rangeServer(t, bytes, 'pieces.tif', { piece: 10_000 })
  // Two servers behind one name, each with its own ETag: compared by size, read as one object.
  const nodes = await rangeServer(t, bytes, 'nodes.tif', { nodes: 2 })
  const app = await makeApp(t, { paths: [cog.file, remote.url, pieces.url, nodes.url] })
  const tilejson = (await app.inject('/remote.json')).json()
  const [z, x, y] = tileAt(tilejson, tilejson.maxzoom - 1)
  const local = await app.inject(`/${cog.id}/${z}/${x}/${y}.png`)
  const far = await app.inject(`/remote/${z}/${x}/${y}.png`)
  assert.equal(far.statusCode, 200)
  assert.deepEqual(far.rawPayload, local.rawPayload)
  const pieced = await app.inject(`/pieces/${z}/${x}/${y}.png`)
  assert.equal(pieced.statusCode, 200, pieced.body)
  assert.deepEqual(pieced.rawPayload, local.rawPayload, 'the same tile from a store answering in pieces')
  // A worker that opens it later, at the first server's ETag, meets the second's: re-opened, a few times, then by size.
  const deadline = Date.now() + 15_000
  while ((await app.inject(`/nodes/${z}/${x}/${y}.png`)).statusCode !== 200 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50))
  for (const [dz, dx, dy] of [[z, x, y], [z - 1, x >> 1, y >> 1], [z, x ^ 1, y]]) {
    const [a, b] = await Promise.all([app.inject(`/${cog.id}/${dz}/${dx}/${dy}.png`), app.inject(`/nodes/${dz}/${dx}/${dy}.png`)])
    assert.equal(b.statusCode, a.statusCode, `${dz}/${dx}/${dy} from two servers: ${b.body}`)
    assert.deepEqual(b.rawPayload, a.rawPayload, `${dz}/${dx}/${dy}: the same tile from two servers with their own ETags`)
  }
  assert.ok(remote.ranges.length > 0, 'read with range requests')
  const read = remote.ranges.reduce((s, [a, b]) => s + b - a + 1, 0)
  assert.ok(read < bytes.length, `read ${read} of ${bytes.length} bytes: only the blocks needed`)
})

test('a remote COG with no ETag and no Last-Modified replaced by one of the same size is re-opened once revalidateMs has passed: the new raster, not the old IFDs over new bytes', async (t) => {
  if (!needs(t, HAVE_FIXTURES, 'the shared fixtures are not there')) return
  // Two COGs of one size (the shorter padded: bytes past its blocks are never read), each served locally too.
  const dir = tempDir(t)
  const [one, two] = ['usda_naip_256_lzw_z3.tif', 'image_web_z5_z11.tif'].map((name) => readFileSync(join(COG, name)))
  const size = Math.max(one.length, two.length)
  const padded = [one, two].map((bytes, i) => {
    const file = join(dir, `v${i + 1}.tif`)
    writeFileSync(file, Buffer.concat([bytes, Buffer.alloc(size - bytes.length)]))
    return { file, bytes: readFileSync(file) }
  })
  let current = padded[0].bytes
  const server = createServer((req, res) => { // no validator at all
    if (req.url !== '/swap.tif') { res.writeHead(404); res.end(); return } // (its .aux.xml, .msk and .ovr: none)
    const [, a, b] = /bytes=(\d+)-(\d+)/.exec(req.headers.range)
    const [start, end] = [Number(a), Math.min(Number(b), current.length - 1)]
    res.writeHead(206, { 'content-range': `bytes ${start}-${end}/${current.length}`, 'content-length': end - start + 1 })
    res.end(current.subarray(start, end + 1))
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.after(() => server.close())
  const app = await makeApp(t, { paths: [padded[0].file, padded[1].file, `http://127.0.0.1:${server.address().port}/swap.tif`], cacheMB: 0, remote: { revalidateMs: 200 } })
  const bounds = async (id) => (await app.inject(`/${id}.json`)).json().bounds
  assert.deepEqual(await bounds('swap'), await bounds('v1'))
  const newer = (await app.inject('/v2.json')).json()
  const [z, x, y] = tileAt(newer, newer.maxzoom)

  current = padded[1].bytes
  const deadline = Date.now() + 5000
  do {
    await new Promise((resolve) => setTimeout(resolve, 50))
    await app.inject(`/swap/${z}/${x}/${y}.png`) // (read: revalidated when due)
  } while (JSON.stringify(await bounds('swap')) !== JSON.stringify(newer.bounds) && Date.now() < deadline)
  assert.deepEqual(await bounds('swap'), newer.bounds, 'the new object\'s raster, re-opened')
  const [theirs, ours] = [await app.inject(`/swap/${z}/${x}/${y}.png`), await app.inject(`/v2/${z}/${x}/${y}.png`)]
  assert.equal(theirs.statusCode, 200)
  assert.deepEqual(theirs.rawPayload, ours.rawPayload, 'its tiles the new object\'s')
})

test('the raster worker pool: sized by raster.threads and raster.blockCacheMB (env through loadConfig), started by the first COG set, destroyed with the app', async (t) => {
  // The environment reaches config.raster through loadConfig, validated, beside the file's or overrides' raster keys.
  const env = { TILE_CANNON_RASTER_THREADS: '1', TILE_CANNON_COG_BLOCK_CACHE_MB: '96' }
  const { config } = loadConfig({ env, overrides: { raster: { overzoom: 2 } } })
  assert.deepEqual(config.raster, { overzoom: 2, threads: 1, blockCacheMB: 96 })
  const defaults = loadConfig().config.raster
  assert.ok(Number.isInteger(defaults.threads) && defaults.threads >= 1 && defaults.blockCacheMB >= 64, JSON.stringify(defaults))
  for (const bad of [{ TILE_CANNON_RASTER_THREADS: '0' }, { TILE_CANNON_RASTER_THREADS: 'many' }, { TILE_CANNON_RASTER_THREADS: '1.5' },
    { TILE_CANNON_COG_BLOCK_CACHE_MB: '0' }, { TILE_CANNON_COG_BLOCK_CACHE_MB: 'lots' }]) {
    assert.throws(() => loadConfig({ env: bad }), (err) => err instanceof ConfigError && /raster\.(threads|blockCacheMB)/.test(err.message), JSON.stringify(bad))
  }

  // Held by each COG set from open to close: started by the first, stopped with the last.
  const shared = createRasterPool({ threads: 1, blockCacheMB: 64 })
  t.after(() => shared.close())
  assert.equal(shared.acquire(), shared.acquire())
  await shared.release()
  assert.notEqual(shared.piscina, null, 'one set still holds it')
  await shared.release()
  assert.equal(shared.piscina, null, 'stopped with the last')

  // No COG set: no worker thread.
  const none = await makeApp(t, { paths: [], raster: { threads: 2 } })
  assert.equal(none.rasterPool.threads, 2)
  assert.equal(none.rasterPool.piscina, null)

  const cog = anyCog(t)
  if (cog === null) return
  const app = await makeApp(t, { paths: [cog.file], raster: { threads: 2, blockCacheMB: 80 } })
  const tilejson = (await app.inject(`/${cog.id}.json`)).json()
  const [z, x, y] = tileAt(tilejson, tilejson.maxzoom)
  assert.equal((await app.inject(`/${cog.id}/${z}/${x}/${y}.png`)).statusCode, 200)
  const pool = app.rasterPool.piscina
  assert.equal(pool.threads.length, 2, 'raster.threads workers')
  assert.equal(pool.options.workerData.blockCacheBytes, 80 * 2 ** 20)
  const workers = [...pool.threads]
  await app.close()
  assert.equal(app.rasterPool.piscina, null)
  assert.equal(pool.threads.length, 0, 'destroyed with the app')
  assert.ok(workers.every((w) => w.threadId === -1), 'every worker thread has exited')
  assert.throws(() => app.rasterPool.acquire(), /closed/)
})

test('colormapped tiles: an indexed PNG where one can say the pixels, RGB(A) where not; the same pixels either way', async () => {
  const n = 256
  const count = n * n
  const ramp = colormap('viridis')
  // What every encoding must decode to: the ramp's colour at the given opacity, transparent black where it is 0.
  const expected = (indices, opacity) => {
    const rgba = Buffer.alloc(count * 4)
    for (let k = 0; k < count; k++) {
      if (opacity[k] === 0) continue
      rgba.set(ramp.subarray(indices[k] * 3, indices[k] * 3 + 3), k * 4)
      rgba[k * 4 + 3] = opacity[k]
    }
    return rgba
  }
  const cases = [
    ['opaque', (k) => k % 200, () => 255, 3],
    ['transparent stripes', (k) => k % 200, (k) => (k % 7 === 0 ? 0 : 255), 3],
    ['every colour used, and transparent pixels', (k) => k % 256, (k) => (k % 7 === 0 ? 0 : 255), 6],
    ['partly transparent pixels', (k) => k % 200, (k) => (k % 7 === 0 ? 128 : 255), 6],
  ]
  for (const [name, index, alpha, colourType] of cases) {
    const indices = Uint8Array.from({ length: count }, (_, k) => index(k))
    const opacity = Uint8Array.from({ length: count }, (_, k) => alpha(k))
    const want = expected(indices, opacity)
    const png = await encode(indices.slice(), opacity, n, 1, 'png', false, ramp)
    assert.equal(png[25], colourType, `${name}: PNG colour type`)
    assert.deepEqual(await sharp(png).ensureAlpha().raw().toBuffer(), want, `${name}: PNG pixels`)
    const webp = await encode(indices.slice(), opacity, n, 1, 'webp', true, ramp)
    assert.deepEqual(await sharp(webp).ensureAlpha().raw().toBuffer(), want, `${name}: lossless WebP pixels`)
  }
})

test('a remote COG\'s .aux.xml (GDAL\'s PAM) is read once at open, as a local one is: its nodata and statistics; none (404) is no note, one that fails is one warning and the set served', async (t) => {
  const cog = anyCog(t)
  if (cog === null) return
  const bytes = readFileSync(cog.file)
  const aux = '<PAMDataset>\n  <PAMRasterBand band="1">\n    <NoDataValue>0</NoDataValue>\n    <Metadata>\n      <MDI key="STATISTICS_MAXIMUM">5000</MDI>\n      <MDI key="STATISTICS_MINIMUM">100</MDI>\n    </Metadata>\n  </PAMRasterBand>\n</PAMDataset>\n'
  const asked = []
  const server = createServer((req, res) => {
    asked.push(req.url)
    const [, name, sidecar] = /^\/(\w+)\.tif(\.aux\.xml)?$/.exec(req.url) ?? []
    if (sidecar) {
      if (name === 'withaux') { res.writeHead(200, { 'content-type': 'application/xml' }); res.end(aux); return }
      res.writeHead(name === 'failing' ? 500 : 404); res.end(); return
    }
    if (name === undefined) { res.writeHead(404); res.end(); return } // (its .msk and .ovr, looked for: none)
    const m = /bytes=(\d+)-(\d+)/.exec(req.headers.range ?? '')
    const start = Number(m[1])
    const end = Math.min(Number(m[2]), bytes.length - 1)
    res.writeHead(206, { 'content-range': `bytes ${start}-${end}/${bytes.length}`, 'content-length': end - start + 1, etag: '"v1"' })
    res.end(bytes.subarray(start, end + 1))
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.after(() => server.close())
  const base = `http://127.0.0.1:${server.address().port}`
  const logs = []
  const app = await makeApp(t, { paths: ['withaux', 'without', 'failing'].map((name) => `${base}/${name}.tif`), raster: { threads: 2 } }, { logs })
  assert.deepEqual((await app.inject('/list')).json().sort(), ['failing', 'withaux', 'without'])
  const meta = (await app.inject('/withaux/meta')).json()
  assert.equal(meta.nodata, 0)
  assert.deepEqual(meta.statistics.b1, [100, 5000])
  const bare = (await app.inject('/without/meta')).json()
  assert.notDeepEqual(bare.statistics.b1, [100, 5000])
  assert.deepEqual((await app.inject('/failing/meta')).json().statistics, bare.statistics, 'read as if it had none')
  // The default stretch follows: the tiles differ where only the .aux.xml does.
  const tilejson = (await app.inject('/withaux.json')).json()
  const [z, x, y] = tileAt(tilejson, tilejson.maxzoom)
  const [a, b] = await Promise.all(['withaux', 'without'].map((id) => app.inject(`/${id}/${z}/${x}/${y}.png`)))
  assert.equal(a.statusCode, 200)
  assert.notDeepEqual(a.rawPayload, b.rawPayload)
  // Tiles enough at once that both workers open the files.
  await Promise.all([[0, 0], [0, 1], [1, 0], [1, 1]].flatMap(([dx, dy]) => ['withaux', 'without'].map((id) => app.inject(`/${id}/${z}/${x ^ dx}/${y ^ dy}.png`))))
  // Asked once each at open (the other worker takes what the first read), the 500 through its retries.
  assert.equal(asked.filter((u) => u === '/withaux.tif.aux.xml').length, 1)
  assert.equal(asked.filter((u) => u === '/without.tif.aux.xml').length, 1)
  const said = logs.filter((l) => /aux\.xml/.test(l.msg))
  assert.deepEqual(said.map((l) => l.set), ['failing'])
  assert.match(said[0].msg, /the \.aux\.xml beside it could not be read \(the remote store did not answer \(answered 500, 4 tries\)\): read without it/)
  assert.ok(!said[0].msg.includes('127.0.0.1'), 'no host in the log line')
})

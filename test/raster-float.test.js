// Floating-point rasters (issue #18): DEM tiles against gdalwarp's own floating-point output. Our heights come back
// through encoding=terrarium, which is lossless to 1/256 m, and GDAL's are its Float32 warp of the same tile window
// (`gdalwarp -te <tile bounds> -ts 256 256 -r near|bilinear|cubic -ot Float32`), so the two are compared in metres,
// pixel by pixel: a Float32 DEM in Web Mercator with overviews (from the shared elev.tif, or a DEM made here), the
// same DEM reprojected to UTM with NaN nodata, as Float64, as UInt16 and as half floats (Float16); complex data is
// refused.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync, spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { writeFileSync } from 'node:fs'
import sharp from 'sharp'
import { fromFile } from 'geotiff'
import { FIXTURES, HAVE_FIXTURES, makeApp, needs } from './helpers/app.js'
import { tempDir } from './helpers/data.js'
import { lonLatToTile, tileExtent } from '../lib/tilemath.js'

const HAVE_GDAL = spawnSync('gdalwarp', ['--version']).status === 0
const NO_GDAL = 'gdal-bin (gdalwarp, gdal_translate) is not installed'
const TERRARIUM_STEP = 1 / 256 // terrarium keeps heights to 1/256 m (rounded down)

/**
 * The DEMs, made with GDAL in `dir`: { mercator (Float32, EPSG:3857, 2048 × 2048 px with overviews), utm (Float32,
 * UTM, NaN outside the reprojected footprint), float64, uint16 }. From the shared elev.tif (San Francisco, 512 × 512
 * px of 6.7 m) where present, else from a hill with ripples written here, made 4× finer (cubic) so that tiles two
 * zooms below the finest lie wholly inside it.
 */
function makeDems (dir) {
  let source = join(FIXTURES, 'cog', 'elev.tif')
  let utm = 'EPSG:32610'
  if (!HAVE_FIXTURES) {
    source = join(dir, 'hill.asc')
    const lines = ['ncols 512', 'nrows 512', 'xllcorner 1113194.9', 'yllcorner 6106854.8', 'cellsize 6.7', 'NODATA_value -9999']
    for (let r = 0; r < 512; r++) {
      lines.push(Array.from({ length: 512 }, (_, c) =>
        (60 + 55 * Math.exp(-((c - 250) ** 2 + (r - 280) ** 2) / 9000) + 8 * Math.sin(c / 9) * Math.cos(r / 13)).toFixed(3)).join(' '))
    }
    writeFileSync(source, lines.join('\n') + '\n')
    utm = 'EPSG:32632'
  }
  const cog = ['-of', 'COG', '-co', 'BLOCKSIZE=256', '-co', 'COMPRESS=DEFLATE', '-co', 'PREDICTOR=YES', '-co', 'OVERVIEWS=AUTO']
  const out = (name) => join(dir, name + '.tif')
  execFileSync('gdal_translate', ['-q', '-a_srs', 'EPSG:3857', '-ot', 'Float32', '-outsize', '400%', '400%', '-r', 'cubic', ...cog, source, out('dem_mercator')])
  execFileSync('gdalwarp', ['-q', '-t_srs', utm, '-r', 'bilinear', '-dstnodata', 'nan', '-ot', 'Float32', ...cog, out('dem_mercator'), out('dem_utm')])
  execFileSync('gdal_translate', ['-q', '-ot', 'Float64', ...cog, out('dem_mercator'), out('dem_float64')])
  execFileSync('gdal_translate', ['-q', '-ot', 'UInt16', ...cog, out('dem_mercator'), out('dem_uint16')])
  return { mercator: out('dem_mercator'), utm: out('dem_utm'), float64: out('dem_float64'), uint16: out('dem_uint16') }
}

/** GDAL's heights for tile z/x/y: { heights (Float32, 256²), alpha (0 or 255) } from gdalwarp's Float32 output. */
async function gdalHeights (dir, file, z, x, y, resampling) {
  const out = join(dir, `ref-${z}-${x}-${y}-${resampling}-${file.split('/').pop()}`)
  execFileSync('gdalwarp', ['-q', '-overwrite', '-t_srs', 'EPSG:3857', '-te', ...tileExtent(z, x, y).map(String),
    '-ts', '256', '256', '-r', resampling, '-ot', 'Float32', '-dstalpha', file, out])
  const [heights, alpha] = await (await (await fromFile(out)).getImage()).readRasters()
  return { heights, alpha }
}

/** Our tile through the whole HTTP path as terrarium, decoded to heights (NaN where transparent); null if not 200. */
async function ourHeights (app, url) {
  const res = await app.inject(url)
  if (res.statusCode !== 200) return { res, heights: null }
  const rgba = await sharp(res.rawPayload).ensureAlpha().raw().toBuffer()
  const heights = new Float64Array(rgba.length / 4)
  for (let k = 0; k < heights.length; k++) {
    const q = k * 4
    heights[k] = rgba[q + 3] === 0 ? NaN : rgba[q] * 256 + rgba[q + 1] + rgba[q + 2] / 256 - 32768
  }
  return { res, heights }
}

/**
 * Ours against GDAL's: the share of pixels where both agree on transparent or not, how many are compared (opaque in
 * both, GDAL's value a number), the share of those within `tolerance` metres, and the worst and 99th-percentile
 * differences.
 */
function compareHeights (ours, ref, tolerance) {
  const n = ours.length
  let agree = 0
  const diffs = []
  for (let k = 0; k < n; k++) {
    const mine = !Number.isNaN(ours[k])
    const theirs = ref.alpha[k] > 0 && !Number.isNaN(ref.heights[k])
    if (mine === theirs) agree++
    if (mine && theirs) diffs.push(Math.abs(ours[k] - ref.heights[k]))
  }
  diffs.sort((a, b) => a - b)
  const within = diffs.filter((d) => d <= tolerance).length
  return {
    agreement: agree / n,
    compared: diffs.length,
    within: diffs.length ? within / diffs.length : 1,
    worst: diffs.length ? diffs[diffs.length - 1] : 0,
    p99: diffs.length ? diffs[Math.floor(diffs.length * 0.99)] : 0,
  }
}

/** Tiles of a set: at each zoom (a function of its TileJSON), at fractions [fx, fy] of its bounds (west → east, south → north). */
async function tilesOf (app, id, zooms, places = [[0.5, 0.5], [0.35, 0.6]]) {
  const tilejson = (await app.inject(`/${id}.json`)).json()
  const [w, s, e, n] = tilejson.bounds
  const tiles = []
  for (const z of zooms(tilejson)) {
    for (const [fx, fy] of places) {
      const tile = [z, ...lonLatToTile(w + fx * (e - w), s + fy * (n - s), z)]
      if (!tiles.some((t) => t.join() === tile.join())) tiles.push(tile)
    }
  }
  return tiles
}

/**
 * Checks set `id`'s tiles with `resampling` against gdalwarp's on `file`: transparency agrees on `agreement` of the
 * pixels, nearly every pixel GDAL has is compared, `share` of them are within `tolerance` metres and none is further
 * than `worst`.
 */
async function checkHeights (t, app, dir, id, file, { resampling, zooms, places, tolerance, share = 1, worst = tolerance, agreement = 0.99, query = '' }) {
  const gdalName = resampling === 'nearest' ? 'near' : resampling
  for (const [z, x, y] of await tilesOf(app, id, zooms, places)) {
    const where = `${id} ${z}/${x}/${y} ${resampling}`
    const { res, heights } = await ourHeights(app, `/${id}/${z}/${x}/${y}.png?encoding=terrarium&resampling=${resampling}${query}`)
    assert.equal(res.statusCode, 200, `${where}: ${res.body}`)
    const ref = await gdalHeights(dir, file, z, x, y, gdalName)
    const r = compareHeights(heights, ref, tolerance)
    t.diagnostic(`${where}: ${r.compared} px, ${(r.within * 100).toFixed(2)} % within ${tolerance} m, p99 ${r.p99.toFixed(4)} m, worst ${r.worst.toFixed(4)} m, transparency agrees on ${(r.agreement * 100).toFixed(2)} %`)
    assert.ok(r.agreement >= agreement, `${where}: transparency agrees on only ${(r.agreement * 100).toFixed(2)} %`)
    const theirs = ref.alpha.filter((a) => a > 0).length
    assert.ok(theirs > 1000 && r.compared >= 0.97 * theirs, `${where}: only ${r.compared} of GDAL's ${theirs} pixels compared`)
    assert.ok(r.within >= share, `${where}: only ${(r.within * 100).toFixed(2)} % within ${tolerance} m`)
    assert.ok(r.worst <= worst, `${where}: a height ${r.worst.toFixed(4)} m off`)
  }
}

// Zooms: reduced from an overview or the full resolution (maxzoom - 2, maxzoom - 1), about 1:1 (maxzoom) and
// upsampled (maxzoom + 1).
const ZOOMS = (tj) => [tj.maxzoom - 2, tj.maxzoom - 1, tj.maxzoom, tj.maxzoom + 1]

test('float DEM in Web Mercator: nearest exact, bilinear and cubic the same as gdalwarp\'s, overviews included', async (t) => {
  if (!needs(t, HAVE_GDAL, NO_GDAL)) return
  const dir = tempDir(t)
  const dems = makeDems(dir)
  const app = await makeApp(t, { paths: [dems.mercator], cacheMB: 0 })
  // The same pixels: only terrarium's rounding down to 1/256 m remains (GDAL's Float32 values are taken as they are).
  await checkHeights(t, app, dir, 'dem_mercator', dems.mercator, { resampling: 'nearest', zooms: ZOOMS, tolerance: TERRARIUM_STEP })
  // The same kernels, weights and kernel widths (reduced tiles widen them by the reduction, as gdalwarp does): the
  // terrarium step plus float rounding (1 mm allowed; measured below 0.01 mm).
  for (const resampling of ['bilinear', 'cubic']) {
    await checkHeights(t, app, dir, 'dem_mercator', dems.mercator, { resampling, zooms: ZOOMS, tolerance: TERRARIUM_STEP + 0.001 })
  }
})

test('float DEM in UTM with NaN nodata: bilinear and cubic within 1 cm of gdalwarp on 99 % of pixels, NaN transparent', async (t) => {
  if (!needs(t, HAVE_GDAL, NO_GDAL)) return
  const dir = tempDir(t)
  const dems = makeDems(dir)
  const app = await makeApp(t, { paths: [dems.utm], cacheMB: 0 })
  // Reprojection places each output pixel through an approximate transform, GDAL's and ours alike, within 1/8 of a
  // source pixel of the exact one (GDAL's error threshold), but on different grids (GDAL's adapts along each row, ours
  // has nodes every 16 px): a point 0.01 px apart on a slope of 0.5 is 8 mm higher. Measured: 99 % within 7 mm, none
  // beyond 2.1 cm.
  for (const resampling of ['bilinear', 'cubic']) {
    await checkHeights(t, app, dir, 'dem_utm', dems.utm, { resampling, zooms: ZOOMS, tolerance: 0.01, share: 0.99, worst: 0.05 })
  }
  // The corners outside the reprojected footprint are NaN: transparent where GDAL's are, and no height from them
  // bleeds into the tile (gdalwarp leaves out an output pixel whose source pixel is nodata, and so do we).
  const tilejson = (await app.inject('/dem_utm.json')).json()
  const [w, , , n] = tilejson.bounds
  const [z, x, y] = [tilejson.maxzoom, ...lonLatToTile(w + 0.0005, n - 0.0005, tilejson.maxzoom)]
  for (const resampling of ['nearest', 'bilinear', 'cubic']) {
    const { res, heights } = await ourHeights(app, `/dem_utm/${z}/${x}/${y}.png?encoding=terrarium&resampling=${resampling}`)
    assert.equal(res.statusCode, 200)
    const ref = await gdalHeights(dir, dems.utm, z, x, y, resampling === 'nearest' ? 'near' : resampling)
    const transparent = heights.filter(Number.isNaN).length
    const r = compareHeights(heights, ref, 0.01)
    t.diagnostic(`corner ${z}/${x}/${y} ${resampling}: ${transparent} px transparent, transparency agrees on ${(r.agreement * 100).toFixed(2)} %, p99 ${r.p99.toFixed(4)} m, worst ${r.worst.toFixed(4)} m`)
    assert.ok(transparent > 5000 && transparent < 60000, `${resampling}: ${transparent} transparent pixels in the corner tile`)
    assert.ok(r.agreement >= 0.995, `${resampling}: transparency agrees on only ${(r.agreement * 100).toFixed(2)} %`)
    assert.ok(r.within >= 0.99 && r.worst <= 0.1, `${resampling}: ${(r.within * 100).toFixed(2)} % within 1 cm, worst ${r.worst} m, next to the NaN area`)
  }
})

test('Float64 and UInt16 DEMs: nearest exact, bilinear the same as gdalwarp\'s; mapbox terrain-RGB of Float64 heights', async (t) => {
  if (!needs(t, HAVE_GDAL, NO_GDAL)) return
  const dir = tempDir(t)
  const dems = makeDems(dir)
  const app = await makeApp(t, { paths: [dems.float64, dems.uint16], cacheMB: 0 })
  for (const id of ['dem_float64', 'dem_uint16']) {
    const file = dems[id.slice(4)]
    await checkHeights(t, app, dir, id, file, { resampling: 'nearest', zooms: ZOOMS, tolerance: TERRARIUM_STEP })
    await checkHeights(t, app, dir, id, file, { resampling: 'bilinear', zooms: ZOOMS, tolerance: TERRARIUM_STEP + 0.001 })
  }
  // mapbox keeps heights to 0.1 m (rounded): Float64 samples straight from the blocks (nearest), and bilinear.
  const tilejson = (await app.inject('/dem_float64.json')).json()
  const [z, x, y] = [tilejson.maxzoom, ...lonLatToTile((tilejson.bounds[0] + tilejson.bounds[2]) / 2, (tilejson.bounds[1] + tilejson.bounds[3]) / 2, tilejson.maxzoom)]
  for (const resampling of ['nearest', 'bilinear']) {
    const res = await app.inject(`/dem_float64/${z}/${x}/${y}.png?encoding=mapbox&resampling=${resampling}`)
    assert.equal(res.statusCode, 200)
    const rgba = await sharp(res.rawPayload).ensureAlpha().raw().toBuffer()
    const ref = await gdalHeights(dir, dems.float64, z, x, y, resampling === 'nearest' ? 'near' : resampling)
    let worst = 0; let n = 0
    for (let k = 0; k < ref.heights.length; k++) {
      if (rgba[k * 4 + 3] === 0 || !(ref.alpha[k] > 0)) continue
      const height = -10000 + (rgba[k * 4] * 65536 + rgba[k * 4 + 1] * 256 + rgba[k * 4 + 2]) * 0.1
      worst = Math.max(worst, Math.abs(height - ref.heights[k]))
      n++
    }
    assert.ok(n > 60000, `mapbox ${resampling}: ${n} pixels compared`)
    assert.ok(worst <= 0.0501, `mapbox ${resampling}: a height ${worst} m off (0.05 m is mapbox's rounding)`)
  }
})

test('float nearest straight from the blocks draws the same pixels as the values path (band math) for grey, colormap and terrain-RGB', async (t) => {
  if (!needs(t, HAVE_GDAL, NO_GDAL)) return
  const dir = tempDir(t)
  const dems = makeDems(dir)
  const app = await makeApp(t, { paths: [dems.mercator, dems.utm, dems.float64], cacheMB: 0 })
  // expression=b1 is the same band, but band math needs values, so it goes through the window and toPixels. (With a
  // rescale given: an expression's values get no default stretch from the file's statistics.)
  for (const id of ['dem_mercator', 'dem_utm', 'dem_float64']) {
    const [z, x, y] = (await tilesOf(app, id, (tj) => [tj.maxzoom], [[0.5, 0.5]]))[0]
    for (const query of ['rescale=0,120', 'colormap_name=viridis&rescale=10,90', 'encoding=terrarium', 'encoding=mapbox']) {
      const direct = await app.inject(`/${id}/${z}/${x}/${y}.png?${query}`)
      const values = await app.inject(`/${id}/${z}/${x}/${y}.png?${query}&expression=b1`)
      assert.equal(direct.statusCode, 200, `${id} ?${query}: ${direct.body}`)
      assert.equal(values.statusCode, 200, `${id} ?${query}&expression=b1: ${values.body}`)
      const a = await sharp(direct.rawPayload).ensureAlpha().raw().toBuffer()
      const b = await sharp(values.rawPayload).ensureAlpha().raw().toBuffer()
      assert.ok(a.equals(b), `${id} ?${query}: the direct path and the values path differ`)
    }
  }
})

test('a Float16 DEM (GDAL\'s 16-bit floats) draws the heights gdalwarp reads of it; complex data is refused, saying so', async (t) => {
  if (!needs(t, HAVE_GDAL, NO_GDAL)) return
  const dir = tempDir(t)
  const dems = makeDems(dir)
  // Half floats as GDAL before 3.11 writes them (GTiff's NBITS=16 on Float32; 3.11 calls the type Float16), with and
  // without the floating-point predictor, overviews by gdaladdo.
  const ids = []
  for (const predictor of [1, 3]) {
    const id = `dem_float16_p${predictor}`
    execFileSync('gdal_translate', ['-q', '-of', 'GTiff', '-ot', 'Float32', '-co', 'NBITS=16', '-co', 'TILED=YES', '-co', 'COMPRESS=DEFLATE',
      '-co', `PREDICTOR=${predictor}`, dems.mercator, join(dir, `${id}.tif`)])
    execFileSync('gdaladdo', ['-q', join(dir, `${id}.tif`), '2', '4', '8'])
    ids.push(id)
  }
  for (const type of ['CFloat32', 'CInt16']) execFileSync('gdal_translate', ['-q', '-of', 'COG', '-ot', type, dems.mercator, join(dir, `dem_${type}.tif`)])
  const app = await makeApp(t, { paths: [dir], cacheMB: 0 })
  for (const id of ids) {
    assert.equal((await app.inject(`/${id}/meta`)).json().dtype, 'float16')
    const file = join(dir, `${id}.tif`)
    await checkHeights(t, app, dir, id, file, { resampling: 'nearest', zooms: ZOOMS, tolerance: TERRARIUM_STEP })
    await checkHeights(t, app, dir, id, file, { resampling: 'bilinear', zooms: ZOOMS, tolerance: TERRARIUM_STEP + 0.001 })
  }
  for (const type of ['CFloat32', 'CInt16']) {
    const tilejson = (await app.inject('/dem_float16_p1.json')).json()
    const res = await app.inject(`/dem_${type}/${tilejson.maxzoom}/${lonLatToTile(tilejson.center[0], tilejson.center[1], tilejson.maxzoom).join('/')}.png`)
    assert.equal(res.statusCode, 503)
    assert.match(res.json().message, new RegExp(`unsupported sample type: complex data \\(${type}\\) is not supported$`))
  }
})

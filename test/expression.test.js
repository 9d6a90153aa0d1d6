// Band math (`expression=`) against GDAL: gdalwarp cuts the tile's window from the same file (nearest or bilinear,
// Float32, every band), gdal_calc.py (numpy) computes the same expression on it, and our tile must show the same
// values after the same rescale, pixel by pixel (±1 in 8 bits), with the same pixels transparent (nodata, 0/0,
// sqrt of a negative). On 4-band UInt16 COGs made here with GDAL (UTM 33N, and the same warped to Web Mercator)
// and on the shared fixtures. Then the 400s (with the position of the error), the cache, and the kernels against
// plain arithmetic.
import { after, test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync, spawnSync } from 'node:child_process'
import { rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import sharp from 'sharp'
import { fromFile } from 'geotiff'
import { FIXTURES, HAVE_FIXTURES, makeApp, needs } from './helpers/app.js'
import { tempDir } from './helpers/data.js'
import { lonLatToTile, tileExtent } from '../lib/tilemath.js'
import { colormap } from '../lib/raster/render.js'
import { applyExpression, parseExpression } from '../lib/raster/expression.js'
import { describeOptions, resolveOptions } from '../lib/raster/options.js'

const HAVE_GDAL = spawnSync('gdalwarp', ['--version']).status === 0 && spawnSync('gdal_calc.py', ['--help'], { stdio: 'ignore' }).status === 0
const NO_GDAL = 'gdal-bin and python3-gdal with numpy (gdalwarp, gdal_translate, gdal_calc.py) are not installed'
const NO_FIXTURES = 'the shared fixtures (../shared/fixtures) are not present'
const COG = join(FIXTURES, 'cog')
const LETTERS = 'ABCDEFGH' // gdal_calc's names for bands 1, 2, …

/** Writes an Esri ASCII grid (a format every GDAL reads) of width × height from f(col, row). */
function asciiGrid (path, { width, height, x0, y0, cell }, f) {
  const lines = [`ncols ${width}`, `nrows ${height}`, `xllcorner ${x0}`, `yllcorner ${y0}`, `cellsize ${cell}`]
  for (let r = 0; r < height; r++) lines.push(Array.from({ length: width }, (_, c) => f(c, r)).join(' '))
  writeFileSync(path, lines.join('\n') + '\n')
}

// A block where bands 3 and 4 are both 0: NDVI is 0/0 there.
const inZeroBlock = (c, r) => c >= 500 && c < 560 && r >= 300 && r < 360
const GRID = { width: 600, height: 400, x0: 590000, y0: 5330000, cell: 25 } // UTM 33N, by Vienna

/**
 * A 4-band UInt16 COG in UTM 33N, bands unlike each other (a hill, a sawtooth, "red" and "near infrared" ramps with
 * a zero block), and the same warped to EPSG:3857. Returns { utm, mercator, zeroBlock: [lon, lat] }.
 */
function fourBandCogs (dir) {
  const bands = [
    (c, r) => Math.round(200 + 300 * Math.exp(-((c - 300) ** 2 + (r - 200) ** 2) / 20000) + 15 * Math.sin(c / 7)),
    (c, r) => (c * 7 + r * 3) % 997,
    (c, r) => (inZeroBlock(c, r) ? 0 : 100 + (c % 200) * 10),
    (c, r) => (inZeroBlock(c, r) ? 0 : 3000 - r * 5 + (c % 37) * 20),
  ]
  const files = bands.map((f, b) => {
    const file = join(dir, `band${b + 1}.asc`)
    asciiGrid(file, GRID, f)
    return file
  })
  execFileSync('gdalbuildvrt', ['-q', '-separate', join(dir, 'bands.vrt'), ...files])
  const utm = join(dir, 'four_utm.tif')
  execFileSync('gdal_translate', ['-q', '-of', 'COG', '-a_srs', 'EPSG:32633', '-ot', 'UInt16', '-co', 'COMPRESS=DEFLATE',
    '-co', 'BLOCKSIZE=128', '-co', 'OVERVIEWS=AUTO', join(dir, 'bands.vrt'), utm])
  const mercator = join(dir, 'four_3857.tif')
  execFileSync('gdalwarp', ['-q', '-t_srs', 'EPSG:3857', '-r', 'near', '-of', 'COG', '-co', 'COMPRESS=LZW', '-co', 'BLOCKSIZE=256', utm, mercator])
  // The middle of the zero block in WGS84, by GDAL.
  const x = GRID.x0 + 530 * GRID.cell; const y = GRID.y0 + (GRID.height - 330) * GRID.cell
  const lonLat = execFileSync('gdaltransform', ['-s_srs', 'EPSG:32633', '-t_srs', 'EPSG:4326', '-output_xy'], { input: `${x} ${y}\n`, encoding: 'utf8' })
  return { utm, mercator, zeroBlock: lonLat.trim().split(/\s+/).map(Number) }
}

// The four-band COGs, made once for the tests that need them; removed when the file's tests end.
let made = null
const madeCogs = () => (made ??= fourBandCogs(tempDir()))
after(() => { if (made !== null) rmSync(join(made.utm, '..'), { recursive: true, force: true }) })

/**
 * GDAL's window for tile z/x/y: gdalwarp cuts it from `file` (256 px, Float32). Returns { path (the warped file),
 * bands: [Float32Array per band], alpha }.
 */
async function gdalWindow (dir, file, bandCount, [z, x, y], resampling = 'near') {
  const path = join(dir, `window-${z}-${x}-${y}-${resampling}-${Math.random().toString(36).slice(2)}.tif`)
  execFileSync('gdalwarp', ['-q', '-overwrite', '-t_srs', 'EPSG:3857', '-te', ...tileExtent(z, x, y).map(String), '-ts', '256', '256',
    '-r', resampling, '-ot', 'Float32', '-dstalpha', file, path])
  const rasters = await (await (await fromFile(path)).getImage()).readRasters()
  return { path, bands: [...rasters].slice(0, bandCount), alpha: rasters[rasters.length - 1] } // (NAIP's band 4 is its alpha)
}

/** gdal_calc.py's `calcs` (numpy, one per output, bands as A, B, …) on a window: [Float32Array per output]. */
async function gdalCalc (window, calcs) {
  const out = window.path.replace(/\.tif$/, `-calc-${Math.random().toString(36).slice(2)}.tif`)
  const inputs = window.bands.flatMap((_, b) => [`-${LETTERS[b]}`, window.path, `--${LETTERS[b]}_band`, String(b + 1)])
  execFileSync('gdal_calc.py', ['--quiet', '--overwrite', ...inputs, ...calcs.flatMap((c) => ['--calc', c]), '--type', 'Float32',
    '--NoDataValue', 'nan', '--outfile', out], { stdio: ['ignore', 'ignore', 'pipe'] })
  return [...await (await (await fromFile(out)).getImage()).readRasters()]
}

/** Our tile through the whole HTTP path, decoded to RGBA; the response when not 200. */
async function ourTile (app, url) {
  const res = await app.inject(url)
  if (res.statusCode !== 200) return { res, rgba: null }
  return { res, rgba: await sharp(res.rawPayload).ensureAlpha().raw().toBuffer() }
}

const height = (rgba, k) => rgba[k * 4] * 256 + rgba[k * 4 + 1] + rgba[k * 4 + 2] / 256 - 32768 // terrarium

/**
 * Which pixels of our tile sampled what gdalwarp sampled: 1 where both are transparent, or both show every band
 * with the same value, within `tolerance` (read as terrarium heights: integers are exact, fractions to 1/256). Nearest
 * neighbour picks another source pixel than gdalwarp at a few percent of the pixels (a centre within GDAL's
 * approximate transformer's error of a pixel edge; test/cog.test.js allows for it), and band math would amplify
 * that neighbour's difference; the band math is checked where the inputs are the same.
 */
async function sameSamples (app, id, tile, window, resampling = 'nearest', tolerance = 1 / 256) {
  const same = new Uint8Array(window.alpha.length).fill(1)
  for (let b = 0; b < window.bands.length; b++) {
    const { res, rgba } = await ourTile(app, `/${id}/${tile.join('/')}.png?bidx=${b + 1}&encoding=terrarium&resampling=${resampling}`)
    assert.equal(res.statusCode, 200, res.body)
    for (let k = 0; k < same.length; k++) {
      const ours = rgba[k * 4 + 3] > 0
      const theirs = window.alpha[k] > 0
      if (ours !== theirs || (ours && Math.abs(height(rgba, k) - window.bands[b][k]) > tolerance)) same[k] = 0
    }
  }
  return same
}

const byte = (v) => (v <= 0 ? 0 : v >= 255 ? 255 : Math.round(v))

/**
 * Our RGBA against GDAL's `outputs` shown the way the options say, where the samples were the same: { transparency
 * (share of those pixels where both agree on transparent or not), close (share of those both show whose every
 * channel is within ±1), compared, sampled (share of GDAL's visible pixels sampled alike) }. `rescale`: [[min, max]]
 * per output or null; `ramp`: a colormap (one output).
 */
function compare (rgba, outputs, { alpha }, same, { rescale = null, ramp = null } = {}) {
  let agree = 0; let counted = 0; let both = 0; let close = 0; let shown = 0; let sampled = 0
  for (let k = 0; k < alpha.length; k++) {
    const values = outputs.map((o) => o[k])
    if (alpha[k] > 0) { shown++; sampled += same[k] }
    if (!same[k]) continue
    const theirs = alpha[k] > 0 && values.every(Number.isFinite) // 0/0, sqrt(-1): no value, transparent
    const ours = rgba[k * 4 + 3] > 0
    counted++
    if (ours === theirs) agree++
    if (!ours || !theirs) continue
    both++
    const bytes = values.map((v, o) => byte(rescale ? ((v - rescale[o][0]) * 255) / (rescale[o][1] - rescale[o][0]) : v))
    let ok
    if (ramp !== null) { // the ramp's colour at the grey level, or at one beside it
      ok = [-1, 0, 1].some((d) => {
        const g = Math.max(0, Math.min(255, bytes[0] + d))
        return [0, 1, 2].every((c) => rgba[k * 4 + c] === ramp[g * 3 + c])
      })
    } else {
      const channels = bytes.length === 1 ? [bytes[0], bytes[0], bytes[0]] : bytes
      ok = channels.every((v, c) => Math.abs(v - rgba[k * 4 + c]) <= 1)
    }
    if (ok) close++
  }
  return { transparency: agree / counted, close: both ? close / both : 0, compared: both, sampled: shown ? sampled / shown : 0 }
}

/** Asserts that our tile shows what gdal_calc.py computed, where the samples were the same. */
function assertMatches (what, r) {
  if (process.env.DEBUG_EXPR) console.log(what, r)
  assert.ok(r.sampled >= 0.9, `${what}: only ${(r.sampled * 100).toFixed(1)} % of GDAL's pixels sampled alike`)
  assert.ok(r.compared > 1000, `${what}: only ${r.compared} px compared`)
  assert.ok(r.transparency >= 0.9995, `${what}: transparency agrees on only ${(r.transparency * 100).toFixed(3)} %`)
  assert.ok(r.close >= 0.9995, `${what}: only ${(r.close * 100).toFixed(3)} % of ${r.compared} px within ±1`)
}

// Our expression, gdal_calc's (numpy) for each output, and the rendering options. Every operator and function.
const CASES = [
  { name: 'NDVI', expression: '(b4-b3)/(b4+b3)', calcs: ['(D-C)/(D+C)'], rescale: [[-1, 1]] },
  { name: 'a band divided by another (x/0: transparent)', expression: '(b1 - b3) / b2 * 10 + 100', calcs: ['(A - C) / B * 10 + 100'], rescale: [[0, 300]] },
  { name: 'where, comparison, power', expression: 'where(b1 > b2, b1 - b2, b2 ** 0.5) * 4', calcs: ['numpy.where(A > B, A - B, B ** 0.5) * 4'], rescale: [[0, 1000]] },
  { name: 'unary minus under **, a threshold', expression: '-b2**2/1000 + b1*3 >= 600', calcs: ['(-B**2/1000 + A*3 >= 600) * 1.0'], rescale: [[0, 1]] },
  { name: 'sqrt (of negatives too), log, exp', expression: 'sqrt(b4 - b3*2) + log(b1)*10 - exp(b2/500)', calcs: ['numpy.sqrt(D - C*2) + numpy.log(A)*10 - numpy.exp(B/500)'], rescale: [[0, 100]] },
  { name: 'min, max, abs', expression: 'max(b1, b2, b3/4) - min(b4/8, 300) + abs(b1 - b2)', calcs: ['numpy.maximum(numpy.maximum(A, B), C/4) - numpy.minimum(D/8, 300) + numpy.absolute(A - B)'], rescale: [[0, 2000]] },
  { name: '** right-associative, == and !=', expression: 'b1**0.5**2*100 + (b2 != b3)*50 + (b1 == 300)*7', calcs: ['A**0.5**2*100 + (B != C)*50 + (A == 300)*7'], rescale: [[0, 700]] },
  { name: 'RGB, values as they are', expression: 'b4/15; b3/8; b2/4', calcs: ['D/15', 'C/8', 'B/4'], rescale: null },
  { name: 'RGB, a rescale per output', expression: 'b1;b2;(b4-b3)/(b4+b3)', calcs: ['A', 'B', '(D-C)/(D+C)'], rescale: [[150, 550], [0, 1000], [0, 1]] },
  { name: 'colormap', expression: '(b4-b3)/(b4+b3)', calcs: ['(D-C)/(D+C)'], rescale: [[0, 1]], colormap: 'viridis' },
]

const query = ({ expression, rescale, colormap }, extra = '') => '?expression=' + encodeURIComponent(expression) +
  (rescale ? rescale.map((r) => `&rescale=${r}`).join('') : '') + (colormap ? `&colormap_name=${colormap}` : '') + extra

/** Tiles to check on a file: at `lonLat` (default the middle), at its maxzoom and two zooms coarser (an overview). */
async function tilesOf (app, id, lonLat) {
  const tj = (await app.inject(`/${id}.json`)).json()
  const [w, s, e, n] = tj.bounds
  const [lon, lat] = lonLat ?? [(w + e) / 2, (s + n) / 2]
  return [tj.maxzoom, tj.maxzoom - 2].map((z) => [z, ...lonLatToTile(lon, lat, z)])
}

test('band math matches gdal_calc.py on gdalwarp\'s window: every operator and function, RGB, colormap, UTM and Web Mercator', async (t) => {
  if (!needs(t, HAVE_GDAL, NO_GDAL)) return
  const dir = tempDir(t)
  const { utm, mercator, zeroBlock } = madeCogs()
  const app = await makeApp(t, { paths: [utm, mercator], cacheMB: 0 })
  let transparentForNaN = 0
  for (const [id, file] of [['four_utm', utm], ['four_3857', mercator]]) {
    for (const tile of [...await tilesOf(app, id), (await tilesOf(app, id, zeroBlock))[0]]) {
      const window = await gdalWindow(dir, file, 4, tile)
      const same = await sameSamples(app, id, tile, window)
      const all = await gdalCalc(window, CASES.flatMap((c) => c.calcs)) // one run for every case: a band per calc
      for (const c of CASES) {
        const url = `/${id}/${tile.join('/')}.png${query(c)}`
        const { res, rgba } = await ourTile(app, url)
        assert.equal(res.statusCode, 200, `${url}: ${res.body}`)
        const outputs = all.splice(0, c.calcs.length)
        assertMatches(`${id} ${tile.join('/')} ${c.name}`, compare(rgba, outputs, window, same, { rescale: c.rescale, ramp: c.colormap ? colormap(c.colormap) : null }))
        if (c.name === 'NDVI') transparentForNaN += outputs[0].filter((v, k) => same[k] && window.alpha[k] > 0 && Number.isNaN(v)).length
      }
    }
  }
  assert.ok(transparentForNaN > 1000, `0/0 made ${transparentForNaN} px transparent in GDAL's tiles, and in ours`)
})

test('band math after bilinear resampling: the bands are resampled first (as rio-tiler does), as gdal_calc.py on gdalwarp\'s', async (t) => {
  if (!needs(t, HAVE_GDAL, NO_GDAL)) return
  const dir = tempDir(t)
  const { utm } = madeCogs()
  const app = await makeApp(t, { paths: [utm], cacheMB: 0 })
  const [tile] = await tilesOf(app, 'four_utm')
  const base = `/four_utm/${tile.join('/')}.png`
  // Our bilinear and gdalwarp's differ by up to a unit or so of these integer bands (see test/cog.test.js); NDVI
  // moves by far less than an 8-bit step for that.
  const window = await gdalWindow(dir, utm, 4, tile, 'bilinear')
  const same = await sameSamples(app, 'four_utm', tile, window, 'bilinear', 1)
  const { rgba } = await ourTile(app, base + query(CASES[0], '&resampling=bilinear'))
  assertMatches(`bilinear ${tile.join('/')}`, compare(rgba, await gdalCalc(window, CASES[0].calcs), window, same, { rescale: CASES[0].rescale }))
  // A comparison of resampled values is 0 or 1, never a blend of 0s and 1s (which resampling after the math would make).
  const { rgba: threshold } = await ourTile(app, base + '?expression=' + encodeURIComponent('b2 > 500') + '&rescale=0,1&resampling=bilinear')
  const levels = new Set()
  for (let k = 0; k < threshold.length; k += 4) if (threshold[k + 3] > 0) levels.add(threshold[k])
  assert.deepEqual([...levels].sort((a, b) => a - b), [0, 255])
})

test('band math on the shared fixtures (NAIP in Web Mercator, a UInt16 UTM scene) matches gdal_calc.py', async (t) => {
  if (!needs(t, HAVE_GDAL, NO_GDAL) || !needs(t, HAVE_FIXTURES, NO_FIXTURES)) return
  const dir = tempDir(t)
  const naip = join(COG, 'usda_naip_256_lzw_z3.tif')
  const scene = join(COG, 'cog.tif')
  const app = await makeApp(t, { paths: [naip, scene], cacheMB: 0 })
  const strip = [-121.3467, 41.9694] // the NAIP file's data: a strip 62 px wide, transparent around it
  const sets = [
    [naip, 'usda_naip_256_lzw_z3', 4, strip, [
      { expression: '(b1-b2)/(b1+b2)', calcs: ['(A-B)/(A+B)'], rescale: [[-0.2, 0.2]] },
      { expression: 'b3;b2;b1', calcs: ['C', 'B', 'A'], rescale: null },
    ]],
    [scene, 'cog', 1, undefined, [
      { expression: 'sqrt(b1)*3 - log10(b1)', calcs: ['numpy.sqrt(A)*3 - numpy.log10(A)'], rescale: [[0, 260]] },
    ]],
  ]
  for (const [file, id, bands, lonLat, cases] of sets) {
    for (const tile of await tilesOf(app, id, lonLat)) {
      const window = await gdalWindow(dir, file, bands, tile)
      const same = await sameSamples(app, id, tile, window)
      const all = await gdalCalc(window, cases.flatMap((c) => c.calcs))
      for (const c of cases) {
        const { res, rgba } = await ourTile(app, `/${id}/${tile.join('/')}.png${query(c)}`)
        assert.equal(res.statusCode, 200, res.body)
        assertMatches(`${id} ${tile.join('/')} ${c.expression}`, compare(rgba, all.splice(0, c.calcs.length), window, same, { rescale: c.rescale }))
      }
    }
  }
})

test('band math as terrain-RGB: DEM arithmetic encoded as terrarium heights, as gdal_calc.py computes them', async (t) => {
  if (!needs(t, HAVE_GDAL, NO_GDAL)) return
  const dir = tempDir(t)
  const { utm } = madeCogs()
  const app = await makeApp(t, { paths: [utm], cacheMB: 0 })
  const [tile] = await tilesOf(app, 'four_utm')
  const { res, rgba } = await ourTile(app, `/four_utm/${tile.join('/')}.png?expression=${encodeURIComponent('b1*0.5 - 100 + b2/1000')}&encoding=terrarium`)
  assert.equal(res.statusCode, 200, res.body)
  const window = await gdalWindow(dir, utm, 4, tile)
  const same = await sameSamples(app, 'four_utm', tile, window)
  const [heights] = await gdalCalc(window, ['A*0.5 - 100 + B/1000'])
  let compared = 0
  for (let k = 0; k < heights.length; k++) {
    if (!same[k] || window.alpha[k] === 0) continue
    assert.ok(Math.abs(height(rgba, k) - heights[k]) <= 1 / 256 + 1e-4, `pixel ${k}: ${height(rgba, k)} vs GDAL's ${heights[k]}`) // terrarium's step
    compared++
  }
  assert.ok(compared > 0.9 * window.alpha.filter((a) => a > 0).length, `${compared} px compared`)
})

test('bad expressions are 400 with what and where; injection-like text is a plain 400; the server keeps serving', async (t) => {
  if (!needs(t, HAVE_GDAL, NO_GDAL)) return
  const { utm } = madeCogs()
  const app = await makeApp(t, { paths: [utm] })
  const [tile] = await tilesOf(app, 'four_utm')
  const base = `/four_utm/${tile.join('/')}.png`
  const bad = async (q, pattern) => {
    const res = await app.inject(`${base}?${q}`)
    assert.equal(res.statusCode, 400, `${q}: ${res.statusCode} ${res.body}`)
    const { message } = res.json()
    assert.match(message, pattern, q)
    assert.doesNotMatch(message, /\/tmp|\/work|node_modules|\n\s+at /, `${q}: no path or stack in the answer`)
    return message
  }
  const e = (text) => 'expression=' + encodeURIComponent(text)
  // Syntax: the message names the position (counted from 0) of what is wrong.
  await bad(e('(b4-b3))/(b4+b3)'), /^expression: unexpected '\)' at position 7$/)
  await bad(e('(b4-b3)/(b4+b3'), /unexpected end of text at position 14/)
  await bad(e('b1 + * b2'), /unexpected '\*' at position 5/)
  await bad('expression=(b4-b3)/(b4+b3)', /missing operator before 'b3'.*%2B.* at position 12/) // '+' decoded as a space
  await bad(e('b1 ^ 2'), /powers are '\*\*'.* at position 3/)
  await bad(e('b1 = 2'), /equality is '=='.* at position 3/)
  await bad(e('b1 < b2 < b3'), /cannot be chained.* at position 8/)
  await bad(e('2b1'), /malformed number '2b1' at position 0/)
  await bad(e('b1;;b2'), /empty expression at position 3/)
  await bad(e('2*3'), /reads no band/)
  await bad(e('(((((b1))))'.padStart(300, '(').padEnd(600, ')')), /nested more than 100 deep/)
  await bad(e('b1+'.repeat(400) + 'b1'), /longer than 1000 characters/)
  // Names and functions: unknown ones, arguments miscounted, bands out of range.
  await bad(e('b1 + ndvi'), /unknown name 'ndvi'.* at position 5/)
  await bad(e('b1 * cos(b2)'), /unknown function 'cos'.* at position 5/)
  await bad(e('where(b1 > 2, b1)'), /where\(\) takes 3 arguments, not 2 at position 0/)
  await bad(e('b1 + min(b2)'), /min\(\) takes 2 or more arguments, not 1 at position 5/)
  await bad(e('sqrt'), /sqrt is a function/)
  await bad(e('b1 + b5'), /^expression: b5 at position 5 is not a band of this file \(b1-b4\)$/)
  // However many digits (21 and more were read as 1e+21 and answered 'too complex once written out').
  for (const digits of [6, 20, 21, 400]) {
    await bad(e(`b1 + b${'9'.repeat(digits)}`), new RegExp(`^expression: b9{${digits}} at position 5 is not a band of this file \\(b1-b4\\)$`))
  }
  await bad(e('b1 + b65536'), /^expression: b65536 at position 5 is not a band of this file \(b1-b4\)$/)
  await bad(e('b0'), /unknown name 'b0'/)
  // Injection-like text: names are looked up in a fixed table, nothing is evaluated.
  for (const text of ['constructor', '__proto__', 'process.exit()', 'this.constructor', 'globalThis', 'require("fs")',
    'constructor(b1)', 'toString(b1)', 'b1;__proto__;b2', "b1'", 'b1 `x`', 'valueOf()', 'b1.constructor']) {
    await bad(e(text), /^expression: .* at position \d+$/)
  }
  // Combinations.
  await bad(`${e('b1')}&bidx=1`, /bidx and expression cannot be combined/)
  await bad(`${e('b1')}&${e('b2')}`, /expression is given more than once/)
  await bad(e('b1;b2'), /gives 2 outputs: it takes 1 .* or 3/)
  await bad(e('b1;b2;b3;b4'), /gives 4 outputs/)
  await bad(`${e('b1;b2;b3')}&colormap_name=viridis`, /colormap_name needs an expression with one output/)
  await bad(`${e('b1;b2;b3')}&encoding=terrarium`, /encoding=terrarium needs an expression with one output/)
  await bad(`${e('b1;b2;b3')}&rescale=0,1&rescale=0,2`, /rescale needs one min,max or one per output \(3\)/)
  // The same bad text again is answered from the parse cache, the same way.
  assert.equal(await bad(e('(b4-b3))/(b4+b3)'), /position 7/), "expression: unexpected ')' at position 7")

  // Still serving, with and without band math.
  assert.equal((await app.inject(base)).statusCode, 200)
  assert.equal((await app.inject(`${base}?${e('(b4-b3)/(b4+b3)')}&rescale=-1,1`)).statusCode, 200)
  assert.equal((await app.inject(`${base}?${e('b1;b2;b3')}&rescale=0,1&rescale=0,2&rescale=0,3`)).statusCode, 200)
  // TileJSON checks the options its tile URLs will carry, and passes them on.
  assert.equal((await app.inject(`/four_utm.json?${e('b9')}`)).statusCode, 400)
})

test('equal expressions spelled differently share one cache entry; another expression does not', async (t) => {
  if (!needs(t, HAVE_GDAL, NO_GDAL)) return
  const { utm } = madeCogs()
  const app = await makeApp(t, { paths: [utm] })
  const [tile] = await tilesOf(app, 'four_utm')
  const base = `/four_utm/${tile.join('/')}.png?rescale=-1,1&expression=`
  const get = async (text) => {
    const res = await app.inject(base + encodeURIComponent(text))
    assert.equal(res.statusCode, 200, res.body)
    return res
  }
  const first = await get('(b4-b3)/(b4+b3)')
  const { entries, hits } = app.tileCache.stats
  for (const spelling of [' ( B4 - b3 ) / ( b4 + B3 ) ', '((b4)-(b3))/((b4)+(b3))', '(b4 - b3) / (b4 + (b3))', '(b4-b3)/(+b4+--b3)']) {
    const again = await get(spelling)
    assert.equal(again.headers.etag, first.headers.etag, spelling)
  }
  assert.equal(app.tileCache.stats.entries, entries, 'no new cache entry')
  assert.equal(app.tileCache.stats.hits, hits + 4, 'each one a cache hit')
  const other = await get('(b4-b3)/(b4+b3+1)')
  assert.notEqual(other.headers.etag, first.headers.etag)
  assert.equal(app.tileCache.stats.entries, entries + 1)
})

test('expressions parse to one canonical text, with Python\'s precedence; options read only the bands named', () => {
  const canonical = (text) => parseExpression(text).text
  assert.equal(canonical(' ( b4 - b3 ) / ( b4 + b3 ) '), '(b4-b3)/(b4+b3)')
  assert.equal(canonical('-b1**2'), '-b1**2', 'unary minus binds less tightly than ** (numpy: -(b1**2))')
  assert.equal(canonical('(-b1)**2'), '(-b1)**2')
  assert.equal(canonical('2**3**2*b1'), '512*b1', '** is right-associative, constants folded')
  assert.equal(canonical('b1*(0.5+0.25) + 1e3'), 'b1*0.75+1000')
  assert.equal(canonical('where(1 > 0, b1, b2)'), 'b1', 'a constant condition takes its branch')
  assert.equal(canonical('B1 ; b2;b3'), 'b1;b2;b3')
  assert.equal(canonical('b1;b2;b3; '), 'b1;b2;b3', 'a trailing ; ends the last output (titiler takes it too)')
  assert.throws(() => parseExpression(';'), /empty expression at position 0/)
  assert.equal(canonical('b1 - (b2 - b3)'), 'b1-(b2-b3)')
  assert.equal(canonical('(b1 - b2) - b3'), 'b1-b2-b3')
  assert.equal(canonical('1/0 + b1'), '1/0+b1', 'a constant that is not finite stays as written')
  const parsed = parseExpression('b12 / b3 + b3')
  assert.deepEqual(parsed.bands, [2, 11])
  const file = { bands: 12, statistics: { b1: [0, 1] }, palette: null, alpha: false }
  const options = resolveOptions(file, { expression: '(b12-b3)/(b12+b3)' })
  assert.deepEqual(options.bidx, [2, 11], 'only the bands named are read, in order')
  assert.equal(options.rescale, null, 'no default stretch from the bands\' statistics')
  assert.equal(options.expression, '(b12-b3)/(b12+b3)')
  assert.doesNotThrow(() => JSON.stringify(options))
  assert.deepEqual(JSON.parse(JSON.stringify(options)), options, 'plain JSON: the cache key, sent to the workers')
  assert.equal(resolveOptions(file, {}).expression, null)
  const described = describeOptions(file, resolveOptions(file, {})).find((o) => o.name === 'expression')
  assert.equal(described.type, 'text')
})

test('the kernels give what plain arithmetic gives, value by value, for random expressions over every operator', () => {
  let seed = 7
  const random = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648 }
  const pick = (a) => a[Math.floor(random() * a.length)]
  const BINARY = {
    '+': (a, b) => a + b, '-': (a, b) => a - b, '*': (a, b) => a * b, '/': (a, b) => a / b, '**': (a, b) => a ** b,
    '<': (a, b) => +(a < b), '<=': (a, b) => +(a <= b), '>': (a, b) => +(a > b), '>=': (a, b) => +(a >= b), '==': (a, b) => +(a === b), '!=': (a, b) => +(a !== b),
  }
  // A random expression: [text, its value on one pixel's bands].
  const make = (depth) => {
    if (depth === 0 || random() < 0.2) {
      if (random() < 0.6) { const b = Math.floor(random() * 4); return [`b${b + 1}`, (v) => v[b]] }
      const c = pick([0, 1, 2, 0.5, 3.25, 100]); return [String(c), () => c]
    }
    const kind = random()
    if (kind < 0.5) {
      const op = pick(Object.keys(BINARY)); const [ta, fa] = make(depth - 1); const [tb, fb] = make(depth - 1)
      return [`(${ta})${op}(${tb})`, (v) => BINARY[op](fa(v), fb(v))]
    }
    if (kind < 0.6) { const [ta, fa] = make(depth - 1); return [`-(${ta})`, (v) => -fa(v)] }
    const fn = pick(['abs', 'sqrt', 'log', 'log10', 'exp', 'min', 'max', 'where'])
    const args = Array.from({ length: fn === 'where' ? 3 : fn === 'min' || fn === 'max' ? 2 + Math.floor(random() * 3) : 1 }, () => make(depth - 1))
    const f = fn === 'where' ? (a, b, c) => (a !== 0 ? b : c) : Math[fn]
    return [`${fn}(${args.map((a) => a[0]).join(',')})`, (v) => f(...args.map((a) => a[1](v)))]
  }
  const band = (b) => [`b${b + 1}`, (v) => v[b]]
  const normalized = (x, y, text) => [text, (v) => (v[x] - v[y]) / (v[x] + v[y])]
  // The outputs computed in one pass (a band, a normalized difference), alone and beside others, then random ones.
  const fixed = [
    [normalized(3, 2, '(b4-b3)/(b4+b3)')], [normalized(0, 1, '(b1 - b2) / (b2 + b1)')], [normalized(0, 0, '(b1-b1)/(b1+b1)')],
    [band(3), normalized(1, 0, '(b2-b1)/(b1+b2)'), band(0)], [band(2)], [band(1), band(1), make(3)],
    [['(b1-b2)/(b1+b3)', (v) => (v[0] - v[1]) / (v[0] + v[2])]], [['(b1-b2)/(b1-b2)', (v) => (v[0] - v[1]) / (v[0] - v[1])]],
  ]
  const n = 50
  let compared = 0
  for (let i = 0; i < 600 + fixed.length; i++) {
    const outputs = fixed[i] ?? Array.from({ length: random() < 0.3 ? 3 : 1 }, () => make(1 + Math.floor(random() * 5)))
    let parsed
    try { parsed = parseExpression(outputs.map((o) => o[0]).join(';')) } catch (err) { assert.match(err.message, /reads no band/); continue }
    assert.equal(parseExpression(parsed.text).text, parsed.text, 'the canonical text is its own canonical text')
    const pixels = Array.from({ length: n }, () => Array.from({ length: 4 }, () => Math.fround(pick([0, 1, -1, 2, 0.5, -3.5, 100, NaN, random() * 10 - 5]))))
    const nb = parsed.bands.length
    const values = Float32Array.from(pixels.flatMap((p) => parsed.bands.map((b) => p[b])))
    const alpha = new Float32Array(n).fill(1)
    alpha[0] = 0 // transparent stays transparent
    const tile = applyExpression({ values, alpha, nb }, { expression: parsed.text, bidx: parsed.bands }, {})
    assert.equal(tile.nb, outputs.length)
    for (let k = 0; k < n; k++) {
      const want = outputs.map((o) => o[1](pixels[k]))
      const visible = k > 0 && want.every(Number.isFinite)
      assert.equal(tile.alpha[k] > 0, visible, `${parsed.text} on ${pixels[k]}: ${want}`)
      if (visible) want.forEach((v, o) => assert.equal(tile.values[k * outputs.length + o], Math.fround(v), `${parsed.text} on ${pixels[k]}`))
      compared++
    }
  }
  assert.ok(compared > 20_000)
})

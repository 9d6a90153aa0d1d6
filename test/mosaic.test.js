// Mosaics (MosaicJSON, a STAC ItemCollection, a configured folder of COGs) against real references: `first` against
// gdalbuildvrt + gdalwarp of the same parts, the other pixel selections against numpy over each part's own gdalwarp
// tile. The data is made here with GDAL's python bindings: five overlapping COGs on one Web Mercator grid (z12 pixels,
// by Vienna), each with values of its own (RGB with a nodata hole in part 1, a Float32 band, and each RGB band as a
// COG of its own for STAC's assets). Then what is never read (parts outside a tile, parts under an opaque one), the
// 400s, TileJSON, discovery beside other .json files, parts outside the data folders, and re-opening on change.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync, spawnSync } from 'node:child_process'
import { cpSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { createServer } from 'node:http'
import { once } from 'node:events'
import { join, relative } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import sharp from 'sharp'
import { fromFile } from 'geotiff'
import { makeApp, needs } from './helpers/app.js'
import { rangeServer } from './helpers/http.js'
import { lonLatToTile, tileExtent } from '../lib/tilemath.js'

const GDAL_ENV = { ...process.env, GDAL_PAM_ENABLED: 'NO' } // no .aux.xml beside any file
const HAVE_GDAL = spawnSync('gdalwarp', ['--version']).status === 0 && spawnSync('gdalbuildvrt', ['--version']).status === 0
// The python that has GDAL's bindings and numpy (a pyenv python3 on PATH may have neither).
const PYTHON = ['python3', '/usr/bin/python3'].find((p) => spawnSync(p, ['-c', 'import numpy, osgeo.gdal']).status === 0)
const NO_GDAL = 'gdal-bin (gdalwarp, gdalbuildvrt) is not installed'
const NO_NUMPY = 'python3 with numpy and GDAL\'s bindings (python3-numpy, python3-gdal) is not installed'
const READY = HAVE_GDAL && PYTHON !== undefined
const missing = (t) => !needs(t, HAVE_GDAL, NO_GDAL) || !needs(t, PYTHON !== undefined, NO_NUMPY)

// The grid: z12 pixels, its corner on the corner of z12 tile 2234/1420; parts at pixel offsets within 1024 × 1024
// (4 × 4 tiles of z12), overlapping, part 1 with a nodata hole where part 2 lies under it.
const X0 = 2234
const Y0 = 1420
const PARTS = [[0, 0, 640, 512], [384, 128, 640, 640], [128, 384, 512, 512], [512, 512, 512, 512], [768, 0, 256, 256]]
const HOLE = [420, 150, 500, 230]

const GENERATE = `
import sys, json, os
import numpy as np
from osgeo import gdal, osr
gdal.UseExceptions()
out, parts, hole, x0, y0 = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
R = 2 * 20037508.342789244 / 256 / 4096
X = -20037508.342789244 + x0 * 256 * R
Y = 20037508.342789244 - y0 * 256 * R
srs = osr.SpatialReference(); srs.ImportFromEPSG(3857)
def write(path, geo, arrays, dtype, nodata):
    h, w = arrays[0].shape
    mem = gdal.GetDriverByName('MEM').Create('', w, h, len(arrays), dtype)
    mem.SetGeoTransform(geo)
    mem.SetProjection(srs.ExportToWkt())
    for b, a in enumerate(arrays):
        mem.GetRasterBand(b + 1).WriteArray(a)
        mem.GetRasterBand(b + 1).SetNoDataValue(nodata)
    gdal.Translate(path, mem, format='COG', creationOptions=['BLOCKSIZE=256', 'COMPRESS=DEFLATE', 'OVERVIEW_RESAMPLING=NEAREST', 'OVERVIEW_COUNT=2'])
for d in ['rgb', 'float', 'bands']:
    os.makedirs(os.path.join(out, d), exist_ok=True)
for i, (ox, oy, w, h) in enumerate(parts, start=1):
    geo = (X + ox * R, R, 0, Y - oy * R, 0, -R)
    x = np.arange(ox, ox + w)[None, :].repeat(h, 0)
    y = np.arange(oy, oy + h)[:, None].repeat(w, 1)
    r = (20 + (x * 3 + 40 * i) % 200).astype(np.uint8)
    g = (20 + (y * 2 + 50 * i) % 200).astype(np.uint8)
    b = np.full((h, w), 20 + 30 * i, np.uint8)
    f = (100 * i + 30 * np.sin((x + 7 * i) / 17.0) + 0.05 * y).astype(np.float32)
    if i == 1:
        inside = (x >= hole[0]) & (x < hole[2]) & (y >= hole[1]) & (y < hole[3])
        r[inside] = 0; g[inside] = 0; b[inside] = 0; f[inside] = -9999
    write(os.path.join(out, 'rgb', f'part{i}.tif'), geo, [r, g, b], gdal.GDT_Byte, 0)
    write(os.path.join(out, 'float', f'part{i}.tif'), geo, [f], gdal.GDT_Float32, -9999)
    for k, a in enumerate([r, g, b], start=1):
        write(os.path.join(out, 'bands', f'part{i}_b{k}.tif'), geo, [a], gdal.GDT_Byte, 0)
`

// numpy over the parts' tiles (band 1, and alpha last), for each [out, files] of the JSON argument: each method as
// Float32 in out-<method>.f32, NaN where no part has data.
const STATISTICS = `
import sys, json
import numpy as np
from osgeo import gdal
gdal.UseExceptions()
for out, files in json.loads(sys.argv[1]):
    values, masks = [], []
    for f in files:
        ds = gdal.Open(f)
        values.append(ds.GetRasterBand(1).ReadAsArray().astype(np.float64))
        masks.append(ds.GetRasterBand(ds.RasterCount).ReadAsArray() == 0)
    a = np.ma.masked_array(np.stack(values), mask=np.stack(masks))
    count = a.count(axis=0)
    results = {'mean': a.mean(axis=0), 'median': np.ma.median(a, axis=0), 'stdev': a.std(axis=0),
               'highest': a.max(axis=0), 'lowest': a.min(axis=0), 'count': np.ma.masked_equal(count, 0)}
    for name, r in results.items():
        np.ma.filled(np.ma.asarray(r).astype(np.float64), np.nan).astype(np.float32).tofile(out + '-' + name + '.f32')
`

const HALF = 20037508.342789244
/** The tiles of zoom z a Mercator box overlaps (not merely touches). */
function tilesOver ([minX, minY, maxX, maxY], z) {
  const size = (2 * HALF) / 2 ** z
  const tiles = []
  for (let x = Math.floor((minX + HALF) / size); x < Math.ceil((maxX + HALF) / size); x++) {
    for (let y = Math.floor((HALF - maxY) / size); y < Math.ceil((HALF - minY) / size); y++) tiles.push([x, y])
  }
  return tiles
}
const quadkey = (z, x, y) => Array.from({ length: z }, (_, i) => String(((x >> (z - 1 - i)) & 1) + 2 * ((y >> (z - 1 - i)) & 1))).join('')
const R12 = (2 * HALF) / 256 / 4096
/** Part i's extent in Mercator metres and in WGS84. */
function partBox ([ox, oy, w, h]) {
  const minX = -HALF + X0 * 256 * R12 + ox * R12
  const maxY = HALF - Y0 * 256 * R12 - oy * R12
  return [minX, maxY - h * R12, minX + w * R12, maxY]
}
const lon = (x) => (x / HALF) * 180
const lat = (y) => (Math.atan(Math.sinh(y / 6378137)) * 180) / Math.PI
const lonLatBox = ([minX, minY, maxX, maxY]) => [lon(minX), lat(minY), lon(maxX), lat(maxY)]

/** A MosaicJSON of `refs` (part i's asset string, in priority order) indexed at quadkey zoom `qz`. */
function mosaicJson (refs, { minzoom = 8, maxzoom = 12, qz = 11, boxes = PARTS.map(partBox), name } = {}) {
  const tiles = {}
  refs.forEach((ref, i) => {
    if (ref === null) return
    for (const [x, y] of tilesOver(boxes[i], qz)) (tiles[quadkey(qz, x, y)] ??= []).push(ref)
  })
  const b = boxes.map(lonLatBox)
  const bounds = [Math.min(...b.map((v) => v[0])), Math.min(...b.map((v) => v[1])), Math.max(...b.map((v) => v[2])), Math.max(...b.map((v) => v[3]))]
  return { mosaicjson: '0.0.3', name, version: '1.0.0', minzoom, maxzoom, quadkey_zoom: qz, bounds, tiles }
}

const COG_TYPE = 'image/tiff; application=geotiff; profile=cloud-optimized'
/** A STAC ItemCollection: one item per part, assets `visual` (RGB) and b1…b3, hrefs relative to `base`. */
function stacItems (dir, base, count = PARTS.length) {
  const href = (path) => './' + relative(base, path)
  return {
    type: 'FeatureCollection',
    features: PARTS.slice(0, count).map((part, k) => {
      const i = k + 1
      const [w, s, e, n] = lonLatBox(partBox(part))
      return {
        type: 'Feature',
        stac_version: '1.0.0',
        id: `part${i}`,
        bbox: [w, s, e, n],
        geometry: { type: 'Polygon', coordinates: [[[w, s], [e, s], [e, n], [w, n], [w, s]]] },
        properties: { datetime: '2024-01-01T00:00:00Z' },
        links: [],
        assets: {
          thumbnail: { href: href(join(dir, 'rgb', `part${i}.tif`)) + '.png', type: 'image/png', roles: ['thumbnail'] },
          b1: { href: href(join(dir, 'bands', `part${i}_b1.tif`)), type: COG_TYPE, roles: ['data'] },
          b2: { href: href(join(dir, 'bands', `part${i}_b2.tif`)), type: COG_TYPE, roles: ['data'] },
          b3: { href: href(join(dir, 'bands', `part${i}_b3.tif`)), type: COG_TYPE, roles: ['data'] },
          visual: { href: href(join(dir, 'rgb', `part${i}.tif`)), type: COG_TYPE, roles: ['visual'] },
        },
      }
    }),
  }
}

let DATA = null // the generated parts, shared by the tests (made once)
before(() => {
  if (!READY) return
  DATA = mkdtempSync(join(tmpdir(), 'tile-cannon-mosaic-'))
  execFileSync(PYTHON, ['-c', GENERATE, DATA, JSON.stringify(PARTS), JSON.stringify(HOLE), String(X0), String(Y0)], { env: GDAL_ENV })
})
after(() => { if (DATA !== null) rmSync(DATA, { recursive: true, force: true }) })

const rgbParts = (dir) => PARTS.map((_, k) => join(dir, 'rgb', `part${k + 1}.tif`))
const floatParts = (dir) => PARTS.map((_, k) => join(dir, 'float', `part${k + 1}.tif`))

const made = new Map() // references already made (a file's tile, a VRT), by what they are of
const memo = (key, make) => made.get(key) ?? made.set(key, make()).get(key)
const unique = () => Math.random().toString(36).slice(2)

/** GDAL's tile of `file`: one array per band, then alpha (0/255); made once per file and tile. */
function gdalTile (dir, file, z, x, y, size = 256) {
  return memo(`${file} ${z}/${x}/${y} ${size}`, async () => {
    const out = join(dir, `ref-${unique()}.tif`)
    execFileSync('gdalwarp', ['-q', '-overwrite', '-t_srs', 'EPSG:3857', '-te', ...tileExtent(z, x, y).map(String),
      '-ts', String(size), String(size), '-r', 'near', '-dstalpha', file, out], { env: GDAL_ENV })
    return { file: out, bands: await (await fromFile(out)).getImage().then((image) => image.readRasters()) }
  })
}

/**
 * `first` of the parts by GDAL: a VRT of them in reverse (in a VRT the later source wins), warped to the tile. With
 * overviews made as the parts' own are (nearest, ×2 and ×4): a mosaic's tile reads each part's overviews, as gdalwarp
 * reads a single file's.
 */
function firstVrt (dir, parts) {
  return memo(parts.join(' '), () => {
    const vrt = join(dir, `first-${unique()}.vrt`)
    execFileSync('gdalbuildvrt', ['-q', vrt, ...[...parts].reverse()], { env: GDAL_ENV })
    execFileSync('gdaladdo', ['-q', '-r', 'nearest', vrt, '2', '4'], { env: GDAL_ENV })
    return vrt
  })
}

/** Our tile through the whole HTTP path as RGBA, or null (with the answer) when not 200. */
async function ourTile (app, url) {
  const res = await app.inject(url)
  if (res.statusCode !== 200) return { res, rgba: null }
  const { data, info } = await sharp(res.rawPayload).toColourspace('srgb').ensureAlpha().raw().toBuffer({ resolveWithObject: true })
  assert.equal(info.channels, 4)
  return { res, rgba: data }
}

/** Pixels where our RGBA and GDAL's bands (in `order`, 0-based) differ: transparency, or any channel. */
function differences (rgba, ref, order = [0, 1, 2]) {
  const alpha = ref[ref.length - 1]
  let differ = 0; let opaque = 0
  for (let k = 0; k < alpha.length; k++) {
    const ours = rgba[k * 4 + 3] > 0
    if (ours !== (alpha[k] > 0)) { differ++; continue }
    if (!ours) continue
    opaque++
    if (order.some((b, c) => ref[b][k] !== rgba[k * 4 + c])) differ++
  }
  return { differ, opaque }
}

/** Our mosaic's `first` against GDAL's, pixel for pixel, at tiles [z, x, y] (at least half of each opaque). */
async function checkFirst (app, url, dir, parts, tiles, { query = '', order, size = 256 } = {}) {
  const vrt = firstVrt(dir, parts)
  for (const [z, x, y] of tiles) {
    const suffix = size === 512 ? '@2x' : ''
    const { res, rgba } = await ourTile(app, `${url}/${z}/${x}/${y}${suffix}.png${query}`)
    assert.equal(res.statusCode, 200, `${url} ${z}/${x}/${y}: ${res.body}`)
    const { bands } = await gdalTile(dir, vrt, z, x, y, size)
    const { differ, opaque } = differences(rgba, bands, order)
    assert.ok(opaque > size * size / 10, `${url} ${z}/${x}/${y}: only ${opaque} opaque pixels`)
    assert.equal(differ, 0, `${url} ${z}/${x}/${y}${query}: ${differ} pixels differ from gdalbuildvrt + gdalwarp`)
  }
}

// z12 tiles over the parts (x, y from the grid's corner): (1,0) has part 1's hole over part 2, (1,1) three parts with
// part 1 opaque over all of it, (2,2) parts 2, 3 and 4; then the z11 and z10 tiles over them (overviews).
/** The tile of zoom z over the grid's corner, moved by dx, dy tiles. */
const over = (z, dx = 0, dy = 0) => [z, Math.floor(X0 / 2 ** (12 - z)) + dx, Math.floor(Y0 / 2 ** (12 - z)) + dy]
const Z12 = [over(12, 1, 0), over(12, 1, 1), over(12, 2, 2)]
const COARSER = [over(11), over(11, 1, 1), over(10)]

test('first: MosaicJSON, a folder and STAC match gdalbuildvrt + gdalwarp of the same parts, pixel for pixel', async (t) => {
  if (missing(t)) return
  writeFileSync(join(DATA, 'rgb.json'), JSON.stringify(mosaicJson(rgbParts(DATA).map((p) => relative(DATA, p)))))
  writeFileSync(join(DATA, 'items.json'), JSON.stringify(stacItems(DATA, DATA)))
  const app = await makeApp(t, { paths: [join(DATA, 'rgb.json'), join(DATA, 'items.json')], sets: { folder: { path: join(DATA, 'rgb'), mosaic: true } }, cacheMB: 0 })
  for (const id of ['rgb', 'folder', 'items']) {
    await checkFirst(app, `/${id}`, DATA, rgbParts(DATA), [...Z12, ...COARSER])
  }
  // @2x: 512 px of the same tile.
  await checkFirst(app, '/rgb', DATA, rgbParts(DATA), Z12.slice(0, 1), { size: 512 })
  // STAC assets stacked as bands in the order asked: b3,b2,b1 is the image with red and blue swapped.
  await checkFirst(app, '/items', DATA, rgbParts(DATA), Z12, { query: '?assets=b3,b2,b1', order: [2, 1, 0] })
  await checkFirst(app, '/items', DATA, rgbParts(DATA), Z12.slice(0, 1), { query: '?assets=b1&assets=b2&assets=b3' })
})

/** Expected grey of a value through `rescale=min,max`, as toPixels makes it. */
const grey = (v, [min, max]) => Math.max(0, Math.min(255, Math.round((v - min) * (255 / (max - min)))))

/** numpy's results for the parts' tiles at each tile: per tile, method → Float32Array (NaN: no data). */
async function numpyTiles (dir, parts, tiles) {
  const jobs = []
  for (const [z, x, y] of tiles) {
    const files = []
    for (const part of parts) files.push((await gdalTile(dir, part, z, x, y)).file)
    jobs.push([join(dir, `numpy-${z}-${x}-${y}`), files])
  }
  execFileSync(PYTHON, ['-c', STATISTICS, JSON.stringify(jobs)], { env: GDAL_ENV })
  const read = (out, name) => { const b = readFileSync(`${out}-${name}.f32`); return new Float32Array(b.buffer, b.byteOffset, b.length / 4) }
  return jobs.map(([out]) => Object.fromEntries(['mean', 'median', 'stdev', 'highest', 'lowest', 'count'].map((m) => [m, read(out, m)])))
}

const RANGES = { mean: [0, 700], median: [0, 700], highest: [0, 700], lowest: [0, 700], stdev: [0, 300], count: [0, 5] }

test('mean, median, stdev, highest, lowest and count match numpy over the parts\' gdalwarp tiles', async (t) => {
  if (missing(t)) return
  const parts = floatParts(DATA)
  writeFileSync(join(DATA, 'heights.json'), JSON.stringify(mosaicJson(parts.map((p) => relative(DATA, p)))))
  // numpy first: GDAL and python run synchronously, and a server whose event loop stalls that long sheds load.
  const tiles = [...Z12, ...COARSER]
  const references = await numpyTiles(DATA, parts, tiles)
  const app = await makeApp(t, { paths: [join(DATA, 'heights.json')], sets: { heightsfolder: { path: join(DATA, 'float'), mosaic: true } }, cacheMB: 0 })
  for (const [i, [z, x, y]] of tiles.entries()) {
    const expected = references[i]
    for (const id of ['heights', 'heightsfolder']) {
      for (const [method, range] of Object.entries(RANGES)) {
        const { res, rgba } = await ourTile(app, `/${id}/${z}/${x}/${y}.png?pixel_selection=${method}&rescale=${range}`)
        assert.equal(res.statusCode, 200, `${id} ${method} ${z}/${x}/${y}: ${res.body}`)
        const want = expected[method]
        let differ = 0; let worst = 0; let compared = 0
        for (let k = 0; k < want.length; k++) {
          const has = !Number.isNaN(want[k])
          if ((rgba[k * 4 + 3] > 0) !== has) { differ++; continue }
          if (!has) continue
          compared++
          const d = Math.abs(rgba[k * 4] - grey(want[k], range))
          worst = Math.max(worst, d)
          if (d > 1) differ++
        }
        assert.ok(compared > 0, `${id} ${method} ${z}/${x}/${y}: nothing compared`)
        assert.equal(differ, 0, `${id} ${method} ${z}/${x}/${y}: ${differ} pixels differ from numpy (worst ${worst})`)
      }
    }
  }
  // The methods differ where parts overlap: the test could tell them apart.
  const [z, x, y] = Z12[2]
  const bodies = await Promise.all(['mean', 'median', 'highest', 'lowest'].map((m) => app.inject(`/heights/${z}/${x}/${y}.png?pixel_selection=${m}&rescale=0,700`).then((r) => r.body)))
  assert.equal(new Set(bodies).size, 4)
})

test('band math on stacked STAC assets: expression=b2-b1 with assets=b1,b2 is the RGB parts\' green minus red', async (t) => {
  if (missing(t)) return
  writeFileSync(join(DATA, 'bandmath.json'), JSON.stringify(stacItems(DATA, DATA)))
  const app = await makeApp(t, { paths: [join(DATA, 'bandmath.json')], cacheMB: 0 })
  const vrt = firstVrt(DATA, rgbParts(DATA))
  for (const [z, x, y] of Z12) {
    const { res, rgba } = await ourTile(app, `/bandmath/${z}/${x}/${y}.png?assets=b1,b2&expression=b2-b1&rescale=-255,255`)
    assert.equal(res.statusCode, 200, res.body)
    const { bands } = await gdalTile(DATA, vrt, z, x, y)
    let differ = 0
    for (let k = 0; k < bands[3].length; k++) {
      if ((rgba[k * 4 + 3] > 0) !== (bands[3][k] > 0)) { differ++; continue }
      if (bands[3][k] > 0 && Math.abs(rgba[k * 4] - grey(bands[1][k] - bands[0][k], [-255, 255])) > 1) differ++
    }
    assert.equal(differ, 0, `${z}/${x}/${y}: ${differ} pixels differ`)
  }
  // The same with the assets the other way round: b1 is now the first asset's (green), so the sign turns.
  const [z, x, y] = Z12[1]
  const swapped = await ourTile(app, `/bandmath/${z}/${x}/${y}.png?assets=b2,b1&expression=b1-b2&rescale=-255,255`)
  const straight = await ourTile(app, `/bandmath/${z}/${x}/${y}.png?assets=b1,b2&expression=b2-b1&rescale=-255,255`)
  assert.deepEqual(swapped.rgba, straight.rgba)
})

/** A copy of the RGB parts (and their bands) with a MosaicJSON and a STAC ItemCollection of them, served. */
async function servedCopy (t) {
  const dir = mkdtempSync(join(tmpdir(), 'tile-cannon-mosaic-gone-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  cpSync(join(DATA, 'rgb'), join(dir, 'rgb'), { recursive: true })
  cpSync(join(DATA, 'bands'), join(dir, 'bands'), { recursive: true })
  writeFileSync(join(dir, 'index.json'), JSON.stringify(mosaicJson(rgbParts(dir).map((p) => relative(dir, p)))))
  writeFileSync(join(dir, 'items.json'), JSON.stringify(stacItems(dir, dir)))
  const logs = []
  const app = await makeApp(t, { paths: [join(dir, 'index.json'), join(dir, 'items.json'), join(DATA, 'rgb', 'part1.tif')], cacheMB: 0 }, { logs })
  // Part i's files gone once the sets are open. The STAC items' default asset (visual: rgb/) has been opened by then,
  // for the items' zooms, and a worker may hold it open; their band assets (bands/) have not.
  const remove = (i) => {
    rmSync(join(dir, 'rgb', `part${i}.tif`))
    for (const b of [1, 2, 3]) rmSync(join(dir, 'bands', `part${i}_b${b}.tif`))
  }
  return { dir, app, remove, logs }
}

/**
 * Each set's tile `url` (MosaicJSON: index; STAC: items, its default asset and a band asset), after part `i`'s files
 * were deleted: a 503 naming the part's file, as a local file that cannot be opened is named (never its path, and not
 * as a changed source); the set is not re-opened (which would leave the part out: a 404 or a tile without it).
 */
async function deletedPart (app, logs, i, url) {
  for (const [id, query, file] of [['index', '', `part${i}`], ['items', '', `part${i}`], ['items', '&assets=b1', `part${i}_b1`]]) {
    const entry = app.catalog.get(id)
    const res = await app.inject(`/${id}${url}${query}`)
    assert.equal(res.statusCode, 503, `${id}${query}: ${res.statusCode === 200 ? 'drawn' : res.body}`)
    assert.match(res.json().message, new RegExp(`^tileset '${id}' could not read this tile: ${file}\\.tif: .*ENOENT: no such file or directory, open '${file}\\.tif'$`))
    assert.ok(!res.body.includes(DATA) && !res.body.includes(tmpdir() + '/'), 'no path in the answer')
    assert.equal(app.catalog.get(id), entry, `${id}${query}: not re-opened`)
  }
  assert.ok(!logs.some((l) => /re-opening/.test(l.msg)), 'no set said to be re-opened')
}

// Part 1 with a colour table, part 2 without: its values have no colours to draw in the mosaic's palette.
const PALETTED = `
import sys, json
import numpy as np
from osgeo import gdal, osr
gdal.UseExceptions()
out, parts, x0, y0 = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
R = 2 * 20037508.342789244 / 256 / 4096
srs = osr.SpatialReference(); srs.ImportFromEPSG(3857)
for i, (ox, oy, w, h) in enumerate(parts, start=1):
    mem = gdal.GetDriverByName('MEM').Create('', w, h, 1, gdal.GDT_Byte)
    mem.SetGeoTransform((-20037508.342789244 + (x0 * 256 + ox) * R, R, 0, 20037508.342789244 - (y0 * 256 + oy) * R, 0, -R))
    mem.SetProjection(srs.ExportToWkt())
    mem.GetRasterBand(1).WriteArray((np.arange(w)[None, :].repeat(h, 0) // 32 % 4).astype(np.uint8))
    if i == 1:
        table = gdal.ColorTable()
        for k, rgb in enumerate([(200, 30, 30), (30, 200, 30), (30, 30, 200), (220, 220, 40)]):
            table.SetColorEntry(k, rgb + (255,))
        mem.GetRasterBand(1).SetRasterColorTable(table)
    gdal.Translate(f'{out}/part{i}.tif', mem, format='COG', creationOptions=['BLOCKSIZE=256', 'COMPRESS=DEFLATE'])
`

test('a part without the colour table the first part has is left out of a folder (as gdalbuildvrt leaves it out), and of a document when a tile reads it (logged and counted once)', async (t) => {
  if (missing(t)) return
  const dir = mkdtempSync(join(tmpdir(), 'tile-cannon-mosaic-palette-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  mkdirSync(join(dir, 'parts'))
  execFileSync(PYTHON, ['-c', PALETTED, join(dir, 'parts'), JSON.stringify(PARTS.slice(0, 2)), String(X0), String(Y0)], { env: GDAL_ENV })
  writeFileSync(join(dir, 'index.json'), JSON.stringify(mosaicJson(['parts/part1.tif', 'parts/part2.tif'], { boxes: PARTS.slice(0, 2).map(partBox) })))
  const logs = []
  const app = await makeApp(t, { paths: [join(dir, 'index.json'), join(dir, 'parts', 'part1.tif')], sets: { folder: { path: join(dir, 'parts'), mosaic: true } }, cacheMB: 0 }, { logs })
  assert.equal((await app.inject('/folder/meta')).json().mosaic.leftOut, 1)
  const alone = over(12, 0, 0) // part 1's alone
  const second = over(12, 3, 2) // part 2's alone
  const { rgba: own } = await ourTile(app, `/part1/${alone.join('/')}.png`)
  assert.ok(own !== null)
  for (const id of ['folder', 'index']) {
    const { res, rgba } = await ourTile(app, `/${id}/${alone.join('/')}.png`)
    assert.equal(res.statusCode, 200, `${id}: ${res.body}`)
    assert.ok(rgba.equals(own), `${id}: part 1 drawn through its colour table, as the COG set draws it`)
  }
  for (const id of ['folder', 'index']) {
    for (let i = 0; i < 2; i++) {
      const left = await app.inject(`/${id}/${second.join('/')}.png`)
      assert.equal(left.statusCode, 404, `${id}: part 2 is left out: ${left.statusCode} ${left.body}`)
    }
  }
  assert.equal((await app.inject('/index/meta')).json().mosaic.leftOut, 1, 'counted once, however often met')
  const said = logs.filter((l) => l.set === 'index' && l.part === 'part2.tif')
  assert.equal(said.length, 1, JSON.stringify(said))
  assert.match(JSON.stringify(said[0]), /no colour table, where the mosaic's first part has one/)
})

test('a document\'s part with other bands than the first part\'s is left out when a tile reads it (logged and counted once), not a 503 for every tile it touches', async (t) => {
  if (missing(t)) return
  const dir = mkdtempSync(join(tmpdir(), 'tile-cannon-mosaic-bands-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  mkdirSync(join(dir, 'parts'))
  // Part 1 RGB (the shared parts), part 2 one band (of the mixed-types script).
  execFileSync(PYTHON, ['-c', MIXED_TYPES, join(dir, 'parts'), JSON.stringify(PARTS.slice(0, 2)), String(X0), String(Y0)], { env: GDAL_ENV })
  cpSync(rgbParts(DATA)[0], join(dir, 'parts', 'part1.tif'))
  writeFileSync(join(dir, 'index.json'), JSON.stringify(mosaicJson(['parts/part1.tif', 'parts/part2.tif'], { boxes: PARTS.slice(0, 2).map(partBox) })))
  const logs = []
  const app = await makeApp(t, { paths: [join(dir, 'index.json'), join(dir, 'parts', 'part1.tif')], cacheMB: 0 }, { logs })
  for (let i = 0; i < 2; i++) {
    const res = await app.inject(`/index/${over(12, 3, 2).join('/')}.png`) // part 2's alone
    assert.equal(res.statusCode, 404, `part 2 left out: ${res.statusCode} ${res.body}`)
  }
  const { rgba: own } = await ourTile(app, `/part1/${over(12, 1, 1).join('/')}.png`) // part 1 over part 2
  const { res, rgba } = await ourTile(app, `/index/${over(12, 1, 1).join('/')}.png`)
  assert.equal(res.statusCode, 200, res.body)
  assert.ok(rgba.equals(own), 'part 1 drawn as its COG set draws it')
  assert.equal((await app.inject('/index/meta')).json().mosaic.leftOut, 1)
  const said = logs.filter((l) => l.set === 'index' && l.part === 'part2.tif')
  assert.deepEqual(said.map((l) => l.reason), ['1 bands, where the mosaic\'s first part has 3'])
})

// Part 1 UInt16 (1000…7390 across), part 2 Byte: one band each, of other data types.
const MIXED_TYPES = `
import sys, json
import numpy as np
from osgeo import gdal, osr
gdal.UseExceptions()
out, parts, x0, y0 = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
R = 2 * 20037508.342789244 / 256 / 4096
srs = osr.SpatialReference(); srs.ImportFromEPSG(3857)
for i, (ox, oy, w, h) in enumerate(parts, start=1):
    dtype = gdal.GDT_UInt16 if i == 1 else gdal.GDT_Byte
    mem = gdal.GetDriverByName('MEM').Create('', w, h, 1, dtype)
    mem.SetGeoTransform((-20037508.342789244 + (x0 * 256 + ox) * R, R, 0, 20037508.342789244 - (y0 * 256 + oy) * R, 0, -R))
    mem.SetProjection(srs.ExportToWkt())
    x = np.arange(w)[None, :].repeat(h, 0)
    mem.GetRasterBand(1).WriteArray((1000 + x * 10).astype(np.uint16) if i == 1 else (20 + x % 200).astype(np.uint8))
    gdal.Translate(f'{out}/part{i}.tif', mem, format='COG', creationOptions=['BLOCKSIZE=256', 'COMPRESS=DEFLATE'])
`

test('a part of another data type than the first part\'s is left out, as gdalbuildvrt leaves it out: of a folder when it opens, of MosaicJSON and STAC when a tile reads it (logged and counted once)', async (t) => {
  if (missing(t)) return
  const dir = mkdtempSync(join(tmpdir(), 'tile-cannon-mosaic-dtypes-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  mkdirSync(join(dir, 'parts'))
  const boxes = PARTS.slice(0, 2).map(partBox)
  execFileSync(PYTHON, ['-c', MIXED_TYPES, join(dir, 'parts'), JSON.stringify(PARTS.slice(0, 2)), String(X0), String(Y0)], { env: GDAL_ENV })
  writeFileSync(join(dir, 'index.json'), JSON.stringify(mosaicJson(['parts/part1.tif', 'parts/part2.tif'], { boxes })))
  const items = boxes.map((box, k) => {
    const [w, s, e, n] = lonLatBox(box)
    return { type: 'Feature', stac_version: '1.0.0', id: `part${k + 1}`, bbox: [w, s, e, n], geometry: null, properties: { datetime: '2024-01-01T00:00:00Z' }, links: [], assets: { visual: { href: `./parts/part${k + 1}.tif`, type: COG_TYPE, roles: ['visual'] } } }
  })
  writeFileSync(join(dir, 'items.json'), JSON.stringify({ type: 'FeatureCollection', features: items }))
  const app = await makeApp(t, { paths: [join(dir, 'index.json'), join(dir, 'items.json'), join(dir, 'parts', 'part1.tif')], sets: { folder: { path: join(dir, 'parts'), mosaic: true } }, cacheMB: 0 })
  const leftOut = async (id) => (await app.inject(`/${id}/meta`)).json().mosaic.leftOut
  assert.deepEqual([await leftOut('folder'), await leftOut('index'), await leftOut('items')], [1, 0, 0], 'a folder\'s files are described when it opens, a document\'s parts when a tile needs them')
  // Part 2 alone: nothing of it drawn (stretched by the UInt16 part's statistics, its bytes came out black).
  const second = over(12, 3, 2)
  for (const id of ['folder', 'index', 'items']) {
    for (const query of ['', '?pixel_selection=mean']) {
      const res = await app.inject(`/${id}/${second.join('/')}.png${query}`)
      assert.equal(res.statusCode, 404, `${id}${query}: part 2 left out (${res.statusCode} ${res.body})`)
    }
  }
  assert.deepEqual([await leftOut('folder'), await leftOut('index'), await leftOut('items')], [1, 1, 1], 'counted once, however often met')
  // Part 1, alone or over part 2, is drawn as its own COG set draws it; with `mean` too (part 2 is not in the mean).
  for (const tile of [over(12, 0, 0), over(12, 1, 1)]) {
    const { rgba: own } = await ourTile(app, `/part1/${tile.join('/')}.png`)
    assert.ok(own !== null)
    for (const id of ['folder', 'index', 'items']) {
      for (const query of ['', '?pixel_selection=mean']) {
        const { res, rgba } = await ourTile(app, `/${id}/${tile.join('/')}.png${query}`)
        assert.equal(res.statusCode, 200, `${id}${query}: ${res.body}`)
        assert.ok(rgba.equals(own), `${id} ${tile.join('/')}${query}: part 1 as the COG set draws it`)
      }
    }
  }
})

test('parts outside a tile are never read', async (t) => {
  if (missing(t)) return
  const { app, remove, logs } = await servedCopy(t)
  remove(5) // the top-right corner: in another quadkey of the index than tiles (1,0) and (1,1), and its own bbox
  for (const id of ['index', 'items']) {
    for (const [z, x, y] of [over(12, 1, 0), over(12, 1, 1)]) {
      const res = await app.inject(`/${id}/${z}/${x}/${y}.png?pixel_selection=mean`)
      assert.equal(res.statusCode, 200, `${id} ${z}/${x}/${y}: ${res.body}`)
    }
  }
  // A z10 tile over part 5: it is read there, and cannot be: 503 naming it, not where it was.
  await deletedPart(app, logs, 5, `/${over(10, 1).join('/')}.png?pixel_selection=count`)
})

test('first reads no part under an opaque one; a part that cannot be read is a 503 for its tiles, the rest serve', async (t) => {
  if (missing(t)) return
  const { app, remove, logs } = await servedCopy(t)
  remove(2) // under part 1 in tile (1,1), which part 1 covers
  const [z, x, y] = over(12, 1, 1)
  for (const id of ['index', 'items']) {
    const first = await app.inject(`/${id}/${z}/${x}/${y}.png`)
    assert.equal(first.statusCode, 200, `${id} first: ${first.body}`)
  }
  // mean needs every part there: part 2 is read, and cannot be; still so once its file has been checked again.
  await deletedPart(app, logs, 2, `/${z}/${x}/${y}.png?pixel_selection=mean`)
  await sleep(1100)
  await deletedPart(app, logs, 2, `/${z}/${x}/${y}.png?pixel_selection=mean`)
  // STAC items are where their bbox says: tile (0,0) is part 1's alone, served with any method.
  assert.equal((await app.inject(`/items/${over(12).join('/')}.png?pixel_selection=mean`)).statusCode, 200)
  assert.equal((await app.inject(`/items/${over(12).join('/')}.png?pixel_selection=mean&assets=b3,b2`)).statusCode, 200)
  // The other sets keep serving.
  assert.equal((await app.inject(`/part1/${z}/${x}/${y}.png`)).statusCode, 200)
})

test('remote parts (HTTP range requests) render as local ones; a part whose server is down is a 503 naming it', async (t) => {
  if (missing(t)) return
  const servers = []
  for (const part of rgbParts(DATA)) servers.push(await rangeServer(t, readFileSync(part), part.split('/').pop()))
  // Parts 1-4 by URL, part 5 by a path relative to the document: both in one mosaic.
  writeFileSync(join(DATA, 'remote.json'), JSON.stringify(mosaicJson([...servers.slice(0, 4).map((s) => s.url), 'rgb/part5.tif'])))
  writeFileSync(join(DATA, 'local.json'), JSON.stringify(mosaicJson(rgbParts(DATA).map((p) => relative(DATA, p)))))
  // Remote parts are read only where raster.remoteParts allows them: off by default, they are left out.
  const closed = await makeApp(t, { paths: [join(DATA, 'remote.json')], cacheMB: 0 })
  assert.equal(closed.catalog.get('remote').source.metadata.mosaic.leftOut, 4, 'remote parts left out by default')
  assert.ok(servers.every((s) => s.ranges.length === 0), 'nothing fetched from a URL the config does not allow')
  const app = await makeApp(t, { paths: [join(DATA, 'remote.json'), join(DATA, 'local.json')], cacheMB: 0, raster: { remoteParts: ['http://127.0.0.1:'] } })
  // Tiles away from part 4 (in tile (2,2) and below it).
  for (const [z, x, y] of [over(12, 1, 0), over(12, 1, 1), over(12, 3, 0), over(11)]) {
    for (const query of ['', '?pixel_selection=mean']) {
      const remote = await app.inject(`/remote/${z}/${x}/${y}.png${query}`)
      const local = await app.inject(`/local/${z}/${x}/${y}.png${query}`)
      assert.equal(remote.statusCode, 200, remote.body)
      assert.deepEqual(remote.rawPayload, local.rawPayload, `${z}/${x}/${y}${query}`)
    }
  }
  assert.ok(servers[1].ranges.length > 0, 'read with range requests')
  // Part 4 (alone in tile (3,3)), never read so far: its server fails.
  assert.equal(servers[3].ranges.length, 0)
  servers[3].down()
  const down = await app.inject(`/remote/${over(12, 3, 3).join('/')}.png`)
  assert.equal(down.statusCode, 503)
  assert.match(down.json().message, /could not read this tile: part4\.tif: /)
  assert.ok(!down.body.includes('127.0.0.1'), 'no URL in the answer')
  assert.equal((await app.inject(`/remote/${Z12[0].join('/')}.png`)).statusCode, 200)
})

test('a remote part replaced at its URL re-opens the mosaic set (a local document), which then reads it afresh', async (t) => {
  if (missing(t)) return
  // Part 2 by URL from a server whose object can be replaced: a new body and a new ETag.
  let body = readFileSync(rgbParts(DATA)[1])
  let version = 1
  const server = createServer((req, res) => {
    if (req.url !== '/part2.tif') { res.writeHead(404); res.end(); return } // (its .msk and .ovr, looked for: none)
    const [, start, end] = /bytes=(\d+)-(\d+)/.exec(req.headers.range ?? '') ?? []
    if (start === undefined) { res.writeHead(200, { 'content-length': body.length }); res.end(body); return }
    const last = Math.min(Number(end), body.length - 1)
    res.writeHead(206, { 'content-range': `bytes ${start}-${last}/${body.length}`, 'content-length': last - Number(start) + 1, etag: `"v${version}"` })
    res.end(body.subarray(Number(start), last + 1))
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.after(() => server.close())
  const refs = rgbParts(DATA).map((p) => relative(DATA, p))
  refs[1] = `http://127.0.0.1:${server.address().port}/part2.tif`
  writeFileSync(join(DATA, 'replaced.json'), JSON.stringify(mosaicJson(refs)))
  const app = await makeApp(t, { paths: [join(DATA, 'replaced.json')], cacheMB: 0, raster: { remoteParts: true } })
  const entry = app.catalog.get('replaced')
  assert.equal((await app.inject(`/replaced/${over(12, 1, 0).join('/')}.png?pixel_selection=mean`)).statusCode, 200)
  const url = `/replaced/${over(12, 2, 2).join('/')}.png?pixel_selection=mean`
  // Replaced by part 3's file: blocks not read yet come with another ETag.
  body = readFileSync(rgbParts(DATA)[2])
  version = 2
  const changed = await app.inject(url)
  assert.equal(changed.statusCode, 503)
  assert.match(changed.json().message, /changed at its source and is being re-opened/)
  await eventually(() => app.catalog.get('replaced') !== entry, 'the set re-opened')
  const after = await app.inject(url)
  assert.equal(after.statusCode, 200, after.body)
})

test('a local part replaced in place under a document is noticed on use: the set re-opens and draws the new file', async (t) => {
  if (missing(t)) return
  // The document's parts are copies in a folder of their own (not watched: the watcher sees the served folders).
  const dir = join(DATA, 'swapped')
  mkdirSync(dir, { recursive: true })
  const parts = rgbParts(DATA)
  parts.forEach((p, i) => cpSync(p, join(dir, `part${i + 1}.tif`)))
  writeFileSync(join(DATA, 'swapped.json'), JSON.stringify(mosaicJson(parts.map((_, i) => `swapped/part${i + 1}.tif`))))
  const logs = []
  const app = await makeApp(t, { paths: [join(DATA, 'swapped.json')], cacheMB: 0 }, { logs })
  const entry = app.catalog.get('swapped')
  const url = `/swapped/${over(12, 2, 2).join('/')}.png?pixel_selection=mean`
  const before = await app.inject(url)
  assert.equal(before.statusCode, 200, before.body)
  // A deploy renames a new file over part 2 (here: part 3's data).
  cpSync(parts[2], join(dir, 'new.tif'))
  renameSync(join(dir, 'new.tif'), join(dir, 'part2.tif'))
  await eventually(async () => {
    await app.inject(url) // a use checks the part (at most once a second)
    return app.catalog.get('swapped') !== entry
  }, 'the set re-opened')
  const after = await app.inject(url)
  assert.equal(after.statusCode, 200, after.body)
  assert.notDeepEqual(after.rawPayload, before.rawPayload, 'the new part 2 is drawn')
  // Said as what it is: a local file, not a remote object.
  const said = logs.filter((l) => l.set === 'swapped' && /changed: re-opening the set/.test(l.msg))
  assert.deepEqual(said.map((l) => [l.msg, l.reason]), [['a file it reads changed: re-opening the set', 'its part part2.tif was replaced']])
})

test('TileJSON bounds and zooms come from the parts (MosaicJSON: its own fields); /meta tells the mosaic', async (t) => {
  if (missing(t)) return
  writeFileSync(join(DATA, 'named.json'), JSON.stringify(mosaicJson(rgbParts(DATA).map((p) => relative(DATA, p)), { minzoom: 9, maxzoom: 13, qz: 10, name: 'Vienna mosaic' })))
  writeFileSync(join(DATA, 'three.json'), JSON.stringify(stacItems(DATA, DATA, 3)))
  // Its quadkeys finer than its maxzoom.
  writeFileSync(join(DATA, 'fine.json'), JSON.stringify(mosaicJson(rgbParts(DATA).map((p) => relative(DATA, p)), { minzoom: 9, maxzoom: 11, qz: 12 })))
  const app = await makeApp(t, { paths: [join(DATA, 'named.json'), join(DATA, 'three.json'), join(DATA, 'fine.json')], sets: { folder: { path: join(DATA, 'rgb'), mosaic: true, overzoom: 2 } } })
  const boxes = PARTS.map((p) => lonLatBox(partBox(p)))
  const union = (list) => [Math.min(...list.map((b) => b[0])), Math.min(...list.map((b) => b[1])), Math.max(...list.map((b) => b[2])), Math.max(...list.map((b) => b[3]))]
  const close = (a, b, what) => a.forEach((v, i) => assert.ok(Math.abs(v - b[i]) < 1e-6, `${what}: ${a} vs ${b}`))

  const named = (await app.inject('/named.json')).json()
  assert.equal(named.name, 'Vienna mosaic')
  assert.deepEqual([named.minzoom, named.maxzoom], [9, 13])
  close(named.bounds, union(boxes), 'MosaicJSON bounds')
  const namedMeta = (await app.inject('/named/meta')).json()
  assert.deepEqual(namedMeta.mosaic, { type: 'MosaicJSON', parts: 5, leftOut: 0, quadkeyZoom: 10 })
  assert.deepEqual(namedMeta.servedZooms, { minzoom: 9, maxzoom: 17 })
  assert.equal((await app.inject(`/named/${over(8).join('/')}.png`)).statusCode, 404) // below its minzoom
  assert.equal((await app.inject('/fine/meta')).json().mosaic.quadkeyZoom, 12)
  for (const z of [10, 11, 12]) assert.equal((await app.inject(`/fine/${over(z).join('/')}.png`)).statusCode, 200, `quadkeys past maxzoom, z${z}`)

  // The folder: the parts' union; maxzoom of z12 pixels 12, minzoom by rio-tiler's rule on the largest part (640 px).
  const folder = (await app.inject('/folder.json')).json()
  close(folder.bounds, union(boxes), 'folder bounds')
  assert.deepEqual([folder.minzoom, folder.maxzoom], [10, 12])
  const folderMeta = (await app.inject('/folder/meta')).json()
  assert.equal(folderMeta.servedZooms.maxzoom, 14)
  assert.equal(folderMeta.mosaic.parts, 5)
  assert.equal(folderMeta.bands, 3)

  // STAC: the union of the items' bboxes, the default asset (visual) and every COG asset, the thumbnail not.
  const three = (await app.inject('/three.json')).json()
  close(three.bounds, union(boxes.slice(0, 3)), 'STAC bounds')
  // The items' zooms together, as the folder's parts': part 2 (640 × 640 px) has its smaller side at 256 px or less
  // two levels down, parts 1 and 3 one level down.
  assert.deepEqual([three.minzoom, three.maxzoom], [10, 12])
  const threeMeta = (await app.inject('/three/meta')).json()
  assert.deepEqual(threeMeta.mosaic, { type: 'STAC', parts: 3, leftOut: 0, assets: ['b1', 'b2', 'b3', 'visual'], defaultAssets: ['visual'] })
  // TileJSON carries the options to its tile URLs, checked as the tiles' are.
  const withOptions = await app.inject('/three.json?assets=b1&pixel_selection=mean')
  assert.match(withOptions.json().tiles[0], /assets=b1/)
  assert.equal((await app.inject('/three.json?pixel_selection=most')).statusCode, 400)
})

// One-band COGs, each [name, EPSG code, [x, y] of its top left corner, [width, height], cell size] in the JSON argument.
// Printed: each one's grid as a STAC item's projection fields say it (as rio-stac writes them).
const VIENNA = ['vienna', 32633, [590000, 5350000], [1200, 900], 10]
const DECLARED_GRIDS = `
import sys, json
import numpy as np
from osgeo import gdal, osr
gdal.UseExceptions()
out, rasters = sys.argv[1], json.loads(sys.argv[2])
grids = {}
for name, epsg, origin, size, cell in rasters:
    srs = osr.SpatialReference(); srs.ImportFromEPSG(epsg)
    w, h = size
    mem = gdal.GetDriverByName('MEM').Create('', w, h, 1, gdal.GDT_Byte)
    transform = (origin[0], cell, 0, origin[1], 0, -cell)
    mem.SetGeoTransform(transform)
    mem.SetProjection(srs.ExportToWkt())
    mem.GetRasterBand(1).WriteArray((20 + (np.arange(w)[None, :] + np.arange(h)[:, None]) % 200).astype(np.uint8))
    gdal.Translate(f'{out}/{name}.tif', mem, format='COG', creationOptions=['BLOCKSIZE=256', 'COMPRESS=DEFLATE'])
    grids[name] = {'epsg': epsg, 'shape': [h, w], 'transform': [cell, 0, origin[0], 0, -cell, origin[1]]}
print(json.dumps(grids))
`

test('a STAC set\'s zoom range covers all its items, from the grids they declare (proj:*), or from their files when they declare none', async (t) => {
  if (missing(t)) return
  const dir = mkdtempSync(join(tmpdir(), 'tile-cannon-mosaic-zooms-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  // Two rasters far apart in scale: by Vienna in UTM 33N (10 m pixels) and round the North Pole in polar stereographic
  // (EPSG:3413, 5 km).
  const grids = JSON.parse(execFileSync(PYTHON, ['-c', DECLARED_GRIDS, dir, JSON.stringify([VIENNA, ['arctic', 3413, [-2000000, 2000000], [800, 800], 5000]])], { env: GDAL_ENV }))
  // A copy of the Arctic file cut short: it cannot be opened, but its item declares its grid.
  writeFileSync(join(dir, 'arctic_cut.tif'), readFileSync(join(dir, 'arctic.tif')).subarray(0, 2000))
  const bboxes = { vienna: [15.7, 48.2, 15.9, 48.3], arctic: [-180, 60, 180, 90] }
  const item = (name, { href = `./${name}.tif`, declared = false } = {}) => {
    const g = grids[name]
    const visual = { href, type: COG_TYPE, roles: ['visual'] }
    const properties = { datetime: '2024-01-01T00:00:00Z' }
    // Vienna's grid on its asset (projection extension 2.0: proj:code), the Arctic's on the item (1.x: proj:epsg).
    if (declared && name === 'vienna') Object.assign(visual, { 'proj:code': `EPSG:${g.epsg}`, 'proj:shape': g.shape, 'proj:transform': g.transform })
    if (declared && name === 'arctic') Object.assign(properties, { 'proj:epsg': g.epsg, 'proj:shape': g.shape, 'proj:transform': g.transform })
    const extension = declared ? [`https://stac-extensions.github.io/projection/${name === 'vienna' ? 'v2.0.0' : 'v1.1.0'}/schema.json`] : []
    return { type: 'Feature', stac_version: '1.0.0', stac_extensions: extension, id: name, bbox: bboxes[name], geometry: null, properties, links: [], assets: { visual } }
  }
  const collection = (features) => JSON.stringify({ type: 'FeatureCollection', features })
  writeFileSync(join(dir, 'opened.json'), collection([item('vienna'), item('arctic')]))
  writeFileSync(join(dir, 'declared.json'), collection([item('vienna', { declared: true }), item('arctic', { declared: true })]))
  writeFileSync(join(dir, 'unread.json'), collection([item('vienna', { declared: true }), item('arctic', { declared: true, href: './arctic_cut.tif' })]))
  // As opened.json, on a copy of the Arctic's file that is replaced before any tile uses it.
  cpSync(join(dir, 'arctic.tif'), join(dir, 'arctic_copy.tif'))
  writeFileSync(join(dir, 'fresh.json'), collection([item('vienna'), item('arctic', { href: './arctic_copy.tif' })]))
  // Only a ground sample distance (STAC's common `gsd`, metres), over the item's bbox: an estimate.
  const bygsd = item('arctic', { href: './arctic_cut.tif' })
  bygsd.properties.gsd = 5000
  writeFileSync(join(dir, 'gsd.json'), collection([item('vienna', { declared: true }), bygsd]))
  const app = await makeApp(t, { paths: [join(dir, 'vienna.tif'), join(dir, 'arctic.tif'), ...['opened', 'declared', 'unread', 'gsd', 'fresh'].map((id) => join(dir, `${id}.json`))], cacheMB: 0 })
  const own = { vienna: (await app.inject('/vienna.json')).json(), arctic: (await app.inject('/arctic.json')).json() }
  assert.ok(own.arctic.maxzoom < own.vienna.minzoom, `ranges apart: ${own.arctic.minzoom}-${own.arctic.maxzoom}, ${own.vienna.minzoom}-${own.vienna.maxzoom}`)
  const expected = [own.arctic.minzoom, own.vienna.maxzoom]
  for (const id of ['opened', 'declared', 'unread']) {
    const tilejson = (await app.inject(`/${id}.json`)).json()
    assert.deepEqual([tilejson.minzoom, tilejson.maxzoom], expected, `${id}: from the Arctic's minzoom to Vienna's maxzoom`)
  }
  const gsd = (await app.inject('/gsd.json')).json()
  assert.ok(Math.abs(gsd.minzoom - own.arctic.minzoom) <= 1 && gsd.maxzoom === own.vienna.maxzoom, `gsd: about the Arctic's zooms (${gsd.minzoom}-${gsd.maxzoom})`)
  // The Arctic at its own zooms: drawn (it was a 404, below the first item's range); Vienna as before.
  const z = own.arctic.minzoom
  for (const id of ['opened', 'declared']) {
    const arctic = await app.inject(`/${id}/${z}/${2 ** (z - 1)}/${2 ** (z - 1) - 1}.png`)
    assert.equal(arctic.statusCode, 200, `${id} z${z} by the pole: ${arctic.body}`)
    assert.deepEqual(arctic.rawPayload, (await app.inject(`/arctic/${z}/${2 ** (z - 1)}/${2 ** (z - 1) - 1}.png`)).rawPayload, `${id}: as the Arctic's COG set draws it`)
  }
  // An item's file replaced after the set opened it (for its zooms) and before any tile used it: noticed on use.
  const entry = app.catalog.get('fresh')
  cpSync(join(dir, 'vienna.tif'), join(dir, 'new.tif'))
  renameSync(join(dir, 'new.tif'), join(dir, 'arctic_copy.tif'))
  await eventually(async () => {
    await app.inject(`/fresh/${z}/${2 ** (z - 1)}/${2 ** (z - 1) - 1}.png`)
    return app.catalog.get('fresh') !== entry
  }, 'the set re-opened')

  // rio-tiler's STACReader, which reads the same fields, gives the declared Vienna item the zooms its file has. (Not
  // the Arctic: round the pole GDAL's warp output is an artefact that ours departs from, see zooms.js, for a file as
  // for a declared grid; its declared zooms are its file's, above.)
  const rio = rioZooms(t, join(dir, 'declared.json'))
  if (rio !== null) assert.deepEqual(rio.vienna, [own.vienna.minzoom, own.vienna.maxzoom], 'rio-tiler\'s STACReader')
})

/** [minzoom, maxzoom] of each item of a STAC document by rio-tiler's STACReader, by item id; null (skipped) without it. */
function rioZooms (t, path) {
  const rioPython = process.env.RIO_TILER_PYTHON || 'python3'
  if (!needs(t, spawnSync(rioPython, ['-c', 'import rio_tiler, pystac'], { stdio: 'ignore' }).status === 0, 'rio-tiler is not installed (set RIO_TILER_PYTHON to a python that has it)')) return null
  const script = 'import json, sys, warnings\nwarnings.filterwarnings("ignore")\nimport pystac\nfrom rio_tiler.io import STACReader\n' +
    'out = {}\nfor f in json.load(open(sys.argv[1]))["features"]:\n  r = STACReader(None, item=pystac.Item.from_dict(f))\n  out[f["id"]] = [r.minzoom, r.maxzoom]\nprint(json.dumps(out))'
  return JSON.parse(execFileSync(rioPython, ['-c', script, path]))
}

test('STAC items declaring a CRS with a datum grid (British National Grid) or in grads (NTF (Paris)) get the zooms their grids say, as their files have them and rio-tiler reads them; nothing on stdout, and the datum note of a mosaic\'s parts logged once per CRS', async (t) => {
  if (missing(t)) return
  const dir = mkdtempSync(join(tmpdir(), 'tile-cannon-mosaic-datum-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  // Far coarser than Vienna's 10 m: each one's zooms start the set's range. NTF (Paris) in grads from the Paris
  // meridian: 4.8 × 4 grads over France; read as degrees, its pixels were 17 % larger and its minzoom one higher.
  const rasters = [VIENNA, ['osgb', 27700, [300000, 400000], [600, 500], 200], ['ntf', 4807, [-1, 50], [600, 500], 0.008],
    ['nad27', 26714, [400000, 4430000], [600, 500], 50]]
  const grids = JSON.parse(execFileSync(PYTHON, ['-c', DECLARED_GRIDS, dir, JSON.stringify(rasters)], { env: GDAL_ENV }))
  // Copies cut short: they cannot be opened, so their zooms can come only from the grids their items declare.
  for (const name of ['osgb', 'ntf']) writeFileSync(join(dir, `${name}_cut.tif`), readFileSync(join(dir, `${name}.tif`)).subarray(0, 2000))
  const item = (name, href = `./${name}.tif`) => {
    const { epsg, shape, transform } = grids[name]
    const properties = { datetime: '2024-01-01T00:00:00Z', 'proj:epsg': epsg, 'proj:shape': shape, 'proj:transform': transform }
    return { type: 'Feature', stac_version: '1.0.0', stac_extensions: ['https://stac-extensions.github.io/projection/v1.1.0/schema.json'], id: name, bbox: [-180, -85, 180, 85], geometry: null, properties, links: [], assets: { visual: { href, type: COG_TYPE, roles: ['visual'] } } }
  }
  const collection = (features) => JSON.stringify({ type: 'FeatureCollection', features })
  writeFileSync(join(dir, 'british.json'), collection([item('vienna'), item('osgb', './osgb_cut.tif')]))
  writeFileSync(join(dir, 'french.json'), collection([item('vienna'), item('ntf', './ntf_cut.tif')]))
  // A MosaicJSON whose NAD27 part (Kansas) is first opened by a tile, in a worker: its note comes back with the tile.
  // (Its first part, the one described as the set opens, is Vienna's.)
  const kansas = lonLatToTile(-100, 39.9, 9)
  writeFileSync(join(dir, 'kansas.json'), JSON.stringify({ mosaicjson: '0.0.3', minzoom: 6, maxzoom: 12, quadkey_zoom: 6, bounds: [-180, -85, 180, 85], tiles: { [quadkey(6, kansas[0] >> 3, kansas[1] >> 3)]: ['vienna.tif', 'nad27.tif'] } }))

  // proj4 told of a grid it lacks prints a line to stdout for every point: none may come, from this thread or a worker.
  const printed = []
  const write = process.stdout.write
  process.stdout.write = function (chunk, ...rest) {
    printed.push(String(chunk))
    return write.call(this, chunk, ...rest)
  }
  t.after(() => { process.stdout.write = write })
  const logs = []
  const app = await makeApp(t, { paths: ['british', 'french', 'kansas'].map((id) => join(dir, `${id}.json`)), cacheMB: 0 }, { logs })
  const set = { british: (await app.inject('/british.json')).json(), french: (await app.inject('/french.json')).json() }
  const tile = await app.inject(`/kansas/9/${kansas.join('/')}.png`)
  assert.equal(tile.statusCode, 200, tile.body)
  await sleep(200) // the workers' stdout reaches this thread's a moment later
  process.stdout.write = write
  assert.deepEqual(printed.filter((line) => /Unable to find|grid shift|Failed to find/.test(line)), [], 'nothing from proj4 on stdout')
  const said = logs.filter((l) => /without its datum grid/.test(l.msg ?? ''))
  assert.deepEqual(said.map((l) => [l.set, l.msg.split(' ')[0], l.level]), [['british', 'EPSG:27700', 40], ['kansas', 'EPSG:26714', 40]], 'once per CRS, naming the set')
  assert.match(said[0].msg, /OSTN15.*EPSG:1314/)
  assert.ok(!logs.some((l) => /declare no/.test(l.msg ?? '')), 'no item left without its zooms')

  // Each declared item's zooms are its file's, as its COG set has them: the set's range starts there.
  const files = await makeApp(t, { paths: ['vienna', 'osgb', 'ntf'].map((id) => join(dir, `${id}.tif`)), cacheMB: 0 })
  const own = {}
  for (const id of ['vienna', 'osgb', 'ntf']) own[id] = (await files.inject(`/${id}.json`)).json()
  for (const [id, name] of [['british', 'osgb'], ['french', 'ntf']]) {
    assert.ok(own[name].minzoom < own.vienna.minzoom, `${name} starts the range (${own[name].minzoom} < ${own.vienna.minzoom})`)
    assert.deepEqual([set[id].minzoom, set[id].maxzoom], [own[name].minzoom, own.vienna.maxzoom], `${id}: from ${name}'s minzoom to Vienna's maxzoom`)
  }
  // rio-tiler's STACReader reads the same items to the same zooms.
  const rio = rioZooms(t, join(dir, 'british.json'))
  if (rio !== null) {
    Object.assign(rio, rioZooms(t, join(dir, 'french.json')))
    for (const name of ['osgb', 'ntf']) assert.deepEqual(rio[name], [own[name].minzoom, own[name].maxzoom], `${name}: rio-tiler's STACReader`)
  }
})

test('bad pixel_selection and assets are a 400 with a message', async (t) => {
  if (missing(t)) return
  writeFileSync(join(DATA, 'opts.json'), JSON.stringify(stacItems(DATA, DATA)))
  const app = await makeApp(t, { paths: [join(DATA, 'opts.json')] })
  const [z, x, y] = Z12[0]
  const cases = [
    ['pixel_selection=most', /pixel_selection must be one of first, highest, lowest, mean, median, stdev, count/],
    ['pixel_selection=mean&pixel_selection=first', /given more than once/],
    ['assets=nir', /unknown asset 'nir': this set's COG assets are b1, b2, b3, visual/],
    ['assets=thumbnail', /unknown asset 'thumbnail'/],
    ['assets=b1,b1', /asset 'b1' is given twice/],
    ['assets=b1,b2&bidx=3', /bidx 3 is not a band of this file \(1-2\)/],
    ['assets=b1,b2&expression=b3-b1', /expression: b3 at position 0 is not a band/],
    ['pixel_selection=count&bidx=1,2,3&colormap_name=viridis', /colormap_name needs a single band/],
  ]
  for (const [query, message] of cases) {
    const res = await app.inject(`/opts/${z}/${x}/${y}.png?${query}`)
    assert.equal(res.statusCode, 400, query)
    assert.match(res.json().message, message, query)
  }
  // Spelled differently, the same tile (and cache entry): assets= repeated or comma-separated.
  const a = await app.inject(`/opts/${z}/${x}/${y}.png?assets=b1,b2&bidx=2`)
  const b = await app.inject(`/opts/${z}/${x}/${y}.png?assets=b1&assets=b2&bidx=2`)
  assert.equal(a.statusCode, 200)
  assert.equal(a.headers.etag, b.headers.etag)
  // Past raster.mosaicMaxParts in one tile, combining is refused (first, which keeps nothing, still draws).
  writeFileSync(join(DATA, 'capped.json'), JSON.stringify(mosaicJson(rgbParts(DATA).map((p) => relative(DATA, p)))))
  const capped = await makeApp(t, { paths: [join(DATA, 'capped.json')], cacheMB: 0, raster: { mosaicMaxParts: 2 } })
  const three = `/capped/${over(12, 1, 1).join('/')}.png` // three parts there
  const refused = await capped.inject(`${three}?pixel_selection=mean`)
  assert.equal(refused.statusCode, 400)
  assert.match(refused.json().message, /pixel_selection=mean would combine 3 parts in this tile; at most 2/)
  assert.equal((await capped.inject(three)).statusCode, 200)
})

test('discovery: mosaic .json files in a folder are sets, other .json is not; parts outside the data folders or missing are left out', async (t) => {
  if (missing(t)) return
  const dir = mkdtempSync(join(tmpdir(), 'tile-cannon-mosaic-found-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const served = join(dir, 'served')
  mkdirSync(served)
  cpSync(join(DATA, 'rgb'), join(served, 'rgb'), { recursive: true })
  cpSync(join(DATA, 'bands'), join(served, 'bands'), { recursive: true })
  const outside = join(dir, 'outside')
  cpSync(join(DATA, 'rgb'), outside, { recursive: true })
  const refs = rgbParts(served).map((p) => relative(served, p))
  writeFileSync(join(served, 'mosaic.json'), JSON.stringify(mosaicJson(refs)))
  writeFileSync(join(served, 'items.json'), JSON.stringify(stacItems(served, served)))
  // Part 1 outside the served folder (by a relative path, and by an absolute one), part 2 missing.
  writeFileSync(join(served, 'escapes.json'), JSON.stringify(mosaicJson(['../outside/part1.tif', 'rgb/missing.tif', ...refs.slice(2)])))
  writeFileSync(join(served, 'absolute.json'), JSON.stringify(mosaicJson([join(outside, 'part1.tif'), ...refs.slice(1)])))
  writeFileSync(join(served, 'style.json'), JSON.stringify({ version: 8, sources: {}, layers: [] }))
  writeFileSync(join(served, 'tiles.json'), JSON.stringify({ tilejson: '3.0.0', tiles: ['https://example.com/{z}/{x}/{y}.png'] }))
  writeFileSync(join(served, 'broken.json'), '{ "mosaicjson": ')
  writeFileSync(join(served, 'feature.json'), JSON.stringify({ type: 'Feature', geometry: null, properties: {} }))
  const app = await makeApp(t, { paths: [served], cacheMB: 0 })
  const ids = app.catalog.available().map((e) => e.id).sort()
  assert.deepEqual(ids, ['absolute', 'escapes', 'items', 'mosaic'])
  assert.deepEqual(app.catalog.unavailable(), [])
  assert.equal((await app.inject('/style.json')).statusCode, 404)

  // Left out, with the others serving: tile (0,0) is part 1's alone (404 without it), (1,1) has parts 1-3.
  for (const id of ['escapes', 'absolute']) {
    const meta = (await app.inject(`/${id}/meta`)).json()
    assert.equal(meta.mosaic.leftOut, id === 'escapes' ? 2 : 1, id)
    assert.equal((await app.inject(`/${id}/12/${X0}/${Y0}.png`)).statusCode, 404, id)
    assert.equal((await app.inject(`/${id}/12/${X0 + 1}/${Y0 + 1}.png`)).statusCode, 200, id)
  }
  assert.equal((await app.inject(`/mosaic/12/${X0}/${Y0}.png`)).statusCode, 200)

  // A .json given by name that is not a mosaic is skipped as any other file no kind serves.
  const single = await makeApp(t, { paths: [join(served, 'style.json'), join(served, 'mosaic.json')] })
  assert.deepEqual(single.catalog.available().map((e) => e.id), ['mosaic'])
  // A COG served on its own is that file only: a document may name it, never a file beside it (its folder is no
  // data folder).
  writeFileSync(join(served, 'beside.json'), JSON.stringify(mosaicJson([join(outside, 'part1.tif'), join(outside, 'part2.tif'), ...refs.slice(2)])))
  const lone = await makeApp(t, { paths: [served, join(outside, 'part2.tif')], cacheMB: 0 })
  assert.equal((await lone.inject('/beside/meta')).json().mosaic.leftOut, 1, 'part 1, beside the served part 2, is left out')
  assert.equal((await lone.inject(`/beside/12/${X0}/${Y0}.png`)).statusCode, 404)
  assert.equal((await lone.inject(`/beside/12/${X0 + 1}/${Y0 + 1}.png`)).statusCode, 200)
  // Configured by name, a document that is not a mosaic is a set that cannot be served, and says why.
  const configured = await makeApp(t, { sets: { bad: { path: join(served, 'broken.json') } } })
  assert.match(configured.catalog.unavailable()[0].reason, /not valid JSON/)
  assert.equal((await configured.inject('/bad/12/0/0.png')).statusCode, 503)
})

/** Polls until `check` holds (file events arrive asynchronously), failing after a few seconds. */
async function eventually (check, what) {
  for (let i = 0; i < 200; i++) {
    if (await check()) return
    await sleep(50)
  }
  assert.fail(`timed out waiting for: ${what}`)
}

test('watched: a new mosaic .json is served (a style beside it is not), an edited one re-opened, a COG added to a mosaic folder joins it', async (t) => {
  if (missing(t)) return
  const dir = mkdtempSync(join(tmpdir(), 'tile-cannon-mosaic-change-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  cpSync(join(DATA, 'rgb'), join(dir, 'rgb'), { recursive: true })
  mkdirSync(join(dir, 'folder'))
  for (const i of [1, 2]) cpSync(join(dir, 'rgb', `part${i}.tif`), join(dir, 'folder', `part${i}.tif`))
  const refs = rgbParts(dir).map((p) => relative(dir, p))
  const place = (name, doc) => { // written beside, then moved in: how a careful copy lands
    writeFileSync(join(dir, `.${name}.tmp`), JSON.stringify(doc))
    renameSync(join(dir, `.${name}.tmp`), join(dir, name))
  }
  place('index.json', mosaicJson(refs))
  const app = await makeApp(t, { paths: [dir], sets: { folder: { path: join(dir, 'folder'), mosaic: true } }, watch: true, watchDebounceMs: 50, cacheMB: 0 })
  const ids = () => app.catalog.available().map((e) => e.id).sort()
  assert.deepEqual(ids(), ['folder', 'index'])

  place('style.json', { version: 8, sources: {}, layers: [] })
  place('more.json', mosaicJson(refs.slice(0, 2)))
  await eventually(() => ids().includes('more'), 'more.json to be served')
  assert.deepEqual(ids(), ['folder', 'index', 'more'])

  // Tile (2,2): part 2 over parts 3 and 4. With part 2 gone from the index, part 3 shows there, as GDAL has it.
  const url = `/index/${over(12, 2, 2).join('/')}.png`
  const beforeEdit = (await app.inject(url)).body
  place('index.json', mosaicJson([refs[0], 'rgb/unused.tif', ...refs.slice(2)]))
  await eventually(async () => (await app.inject(url)).body !== beforeEdit, 'the edited index')
  const afterEdit = await ourTile(app, url)
  const { bands } = await gdalTile(dir, firstVrt(dir, [refs[0], ...refs.slice(2)].map((r) => join(dir, r))), ...over(12, 2, 2))
  assert.equal(differences(afterEdit.rgba, bands).differ, 0)
  assert.equal((await app.inject('/index/meta')).json().mosaic.leftOut, 1)

  // The folder: part 3 moved in; tile (1,3), part 3's alone, has data from then on.
  const tile = `/folder/${over(12, 1, 3).join('/')}.png`
  assert.equal((await app.inject(tile)).statusCode, 404)
  cpSync(join(dir, 'rgb', 'part3.tif'), join(dir, 'folder', '.part3.tmp'))
  renameSync(join(dir, 'folder', '.part3.tmp'), join(dir, 'folder', 'part3.tif'))
  await eventually(async () => (await app.inject(tile)).statusCode === 200, 'part 3 in the folder mosaic')
  assert.equal((await app.inject('/folder/meta')).json().mosaic.parts, 3)
  // The folder's COGs are parts, not sets of their own.
  assert.deepEqual(ids(), ['folder', 'index', 'more'])
})

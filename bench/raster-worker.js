#!/usr/bin/env node
// Worker time per raster tile, in-process: the raster worker's own task entry (lib/raster/worker.js `run`, op `tile`)
// called directly, datasets open and blocks decoded (two warm-up passes), so the figure is what a worker thread spends
// on a tile once its file is warm: sampling, resampling, rendering and PNG encoding. No pool, no HTTP. Cases: the 8-bit
// nearest direct path (the baseline, and on aerial imagery), a Float32 DEM in EPSG:3857 (elev.tif) with each
// resampling, terrain encoding and a colormap, the same DEM made 4× larger with overviews by gdal_translate (a zoom
// below its maxzoom: tiles reduce, as most of a real DEM's do), a UInt16 UTM file and a Float32 UTM file with nodata.
// Tiles: at the file's maxzoom (zooming further in until 4 tiles lie wholly inside the middle 80 % of the raster:
// elev.tif is small, its tiles are one zoom past maxzoom, upsampled), nearest the middle first. Rounds interleave the
// cases (order rotating), so load from other processes falls on all of them alike.
// Prints a markdown table: median and mean wall ms per tile, CPU ms per tile (process.cpuUsage), the ratio to the
// baseline and to 8-bit nearest on aerial imagery (the baseline file is black throughout: its PNGs cost next to
// nothing to compress, real imagery's do not), and the PNG's size. Needs the shared fixtures and gdal_translate.
//   node bench/raster-worker.js [--rounds 7] [--tiles 24] [--scale 1] [--only elev] [--save out.json] [--against before.json]
//                               [--profile out.cpuprofile]
import { execFileSync } from 'node:child_process'
import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { Session } from 'node:inspector/promises'
import { valueSymbol } from 'piscina'
import run from '../lib/raster/worker.js'
import { resolveOptions } from '../lib/raster/options.js'
import { zoomRange } from '../lib/raster/zooms.js'
import { lonLatToTile, tileBounds } from '../lib/tilemath.js'
import { FIXTURES, HAVE_FIXTURES } from '../test/helpers/app.js'
import { tempDir } from '../test/helpers/data.js'

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '7' },
    tiles: { type: 'string', default: '24' }, // per case, around the raster's middle
    scale: { type: 'string', default: '1' }, // 2: 512 px tiles
    only: { type: 'string' }, // cases whose name or file contains this (the two 8-bit ones always run)
    save: { type: 'string' }, // write the results as JSON
    against: { type: 'string' }, // a JSON of an earlier run (--save): adds its median and the change
    profile: { type: 'string' }, // write a CPU profile (.cpuprofile) of the timed rounds only, not of the warm-up
  },
})
if (!HAVE_FIXTURES) {
  console.error('bench/raster-worker.js needs the shared fixtures (../shared/fixtures)')
  process.exit(1)
}
const ROUNDS = Number(values.rounds)
const TILES = Number(values.tiles)
const SCALE = Number(values.scale)
const COG = join(FIXTURES, 'cog')

// elev.tif is 512 × 512 px without overviews; a 2048 × 2048 COG of it (cubic) has three, and its tiles a zoom below
// maxzoom reduce (kernels widen), as most tiles of a real DEM do.
const dir = tempDir()
process.on('exit', () => rmSync(dir, { recursive: true, force: true }))
const elevCog = join(dir, 'elev_x4_cog.tif')
execFileSync('gdal_translate', ['-q', '-of', 'COG', '-outsize', '400%', '400%', '-r', 'cubic', '-co', 'COMPRESS=DEFLATE',
  '-co', 'PREDICTOR=YES', '-co', 'BLOCKSIZE=256', '-co', 'OVERVIEWS=AUTO', join(COG, 'elev.tif'), elevCog])

const FILES = {
  web: { path: join(COG, 'image_web_z5_z11.tif'), label: 'image_web_z5_z11 (8-bit RGB, 3857; every pixel black)' },
  naip: { path: join(COG, 'usda_naip_256_lzw_z3.tif'), label: 'usda_naip_256_lzw_z3 (8-bit RGBA aerial imagery, 3857)' },
  elev: { path: join(COG, 'elev.tif'), label: 'elev (Float32 DEM, 3857, no overviews)' },
  elevOvr: { path: elevCog, label: 'elev ×4 (Float32 DEM, 3857, overviews), a zoom below maxzoom', zoom: -1 },
  utm16: { path: join(COG, 'cog.tif'), label: 'cog (UInt16, UTM 21N)' },
  utmFloat: { path: join(COG, 'cog_nodata_nan.tif'), label: 'cog_nodata_nan (Float32, UTM 10N, nodata)' },
}
const CASES = [
  { name: '8-bit RGB nearest (baseline)', file: 'web', query: {} },
  { name: '8-bit RGBA nearest, NAIP imagery', file: 'naip', query: {} },
  { name: 'Float32 DEM nearest', file: 'elev', query: {} },
  { name: 'Float32 DEM bilinear', file: 'elev', query: { resampling: 'bilinear' } },
  { name: 'Float32 DEM cubic', file: 'elev', query: { resampling: 'cubic' } },
  { name: 'Float32 DEM terrarium nearest', file: 'elev', query: { encoding: 'terrarium' } },
  { name: 'Float32 DEM terrarium bilinear', file: 'elev', query: { encoding: 'terrarium', resampling: 'bilinear' } },
  { name: 'Float32 DEM mapbox bilinear', file: 'elev', query: { encoding: 'mapbox', resampling: 'bilinear' } },
  { name: 'Float32 DEM viridis 0-300 nearest', file: 'elev', query: { colormap_name: 'viridis', rescale: '0,300' } },
  { name: 'Float32 DEM viridis 0-300 bilinear', file: 'elev', query: { colormap_name: 'viridis', rescale: '0,300', resampling: 'bilinear' } },
  { name: 'Float32 DEM ovr nearest', file: 'elevOvr', query: {} },
  { name: 'Float32 DEM ovr bilinear', file: 'elevOvr', query: { resampling: 'bilinear' } },
  { name: 'Float32 DEM ovr cubic', file: 'elevOvr', query: { resampling: 'cubic' } },
  { name: 'Float32 DEM ovr terrarium bilinear', file: 'elevOvr', query: { encoding: 'terrarium', resampling: 'bilinear' } },
  { name: 'UInt16 UTM nearest', file: 'utm16', query: {} },
  { name: 'UInt16 UTM bilinear', file: 'utm16', query: { resampling: 'bilinear' } },
  { name: 'Float32 UTM nearest', file: 'utmFloat', query: {} },
  { name: 'Float32 UTM bilinear', file: 'utmFloat', query: { resampling: 'bilinear' } },
].filter((c, i) => i < 2 || values.only === undefined || c.name.includes(values.only) || c.file.includes(values.only))

/**
 * A file opened in this process as the server opens it (the worker's `describe`), and the tiles to time: at its
 * maxzoom (plus the file's `zoom` offset, and more zooms in until there are 4), those whose bounds lie inside the
 * middle 80 % of the raster's, nearest the middle first, so every tile is (nearly) all raster.
 */
async function prepare (name) {
  const file = FILES[name]
  const src = { key: `${file.path}#bench`, path: file.path }
  const described = await run({ op: 'describe', src })
  const { maxzoom, served } = zoomRange(described.meta, described.warp, 4)
  const [w, s, e, n] = described.lonLatBounds
  const inner = [w + 0.1 * (e - w), s + 0.1 * (n - s), e - 0.1 * (e - w), n - 0.1 * (n - s)]
  let tiles = []
  let z = maxzoom + (file.zoom ?? 0)
  for (; z <= served.maxzoom && tiles.length < 4; z++) {
    const [x0, y0] = lonLatToTile(inner[0], inner[3], z)
    const [x1, y1] = lonLatToTile(inner[2], inner[1], z)
    tiles = []
    for (let x = x0; x <= x1; x++) {
      for (let y = y0; y <= y1; y++) {
        const [tw, ts, te, tn] = tileBounds(z, x, y)
        if (tw >= inner[0] && te <= inner[2] && ts >= inner[1] && tn <= inner[3]) tiles.push([z, x, y])
      }
    }
  }
  const [cx, cy] = [(inner[0] + inner[2]) / 2, (inner[1] + inner[3]) / 2]
  const away = ([tw, ts, te, tn]) => ((tw + te) / 2 - cx) ** 2 + ((ts + tn) / 2 - cy) ** 2
  tiles.sort((a, b) => away(tileBounds(...a)) - away(tileBounds(...b)))
  return { ...file, src, meta: described.meta, tiles: tiles.slice(0, TILES), zoom: z - 1, maxzoom }
}

const opened = {}
for (const c of CASES) opened[c.file] ??= await prepare(c.file)
for (const c of CASES) {
  c.set = opened[c.file]
  c.options = resolveOptions(c.set.meta, c.query, { format: 'png' })
  c.tiles = c.set.tiles
  c.wall = []
  c.cpu = 0
  c.count = 0
  c.bytes = 0
}

/**
 * One pass over a case's tiles: wall ms per tile into c.wall, CPU µs summed. The first (not recorded) keeps only the
 * tiles that render (a nodata area gives none).
 */
async function pass (c, record) {
  const started = process.cpuUsage()
  const rendered = []
  // Every pass times at least --tiles tiles, going round a short list again.
  const count = record ? Math.max(TILES, c.tiles.length) : c.tiles.length
  for (let i = 0; i < count; i++) {
    const [z, x, y] = c.tiles[i % c.tiles.length]
    const t0 = performance.now()
    const out = await run({ op: 'tile', src: c.set.src, z, x, y, scale: SCALE, format: 'png', options: c.options })
    const t1 = performance.now()
    if (out?.failed) throw new Error(`${c.name}: tile ${z}/${x}/${y}: ${out.failed}`)
    if (!record) {
      if (out !== null) rendered.push([z, x, y])
      continue
    }
    c.wall.push(t1 - t0)
    c.bytes += (out[valueSymbol] ?? out).byteLength // run() hands back bytes to move, wrapped by piscina
  }
  if (!record) {
    if (rendered.length === 0) throw new Error(`${c.name}: no tile renders`)
    c.tiles = rendered
    return
  }
  const used = process.cpuUsage(started)
  c.cpu += used.user + used.system
  c.count += count
}

const load = () => os.loadavg().map((l) => l.toFixed(2)).join(' ')
const loadBefore = load()
for (const c of CASES) await pass(c, false) // warm: datasets, blocks, lookup tables, ramps, JIT
for (const c of CASES) await pass(c, false)
const session = values.profile ? new Session() : null
if (session !== null) {
  session.connect()
  await session.post('Profiler.enable')
  await session.post('Profiler.start')
}
for (let r = 0; r < ROUNDS; r++) {
  const order = CASES.map((_, i) => CASES[(i + r) % CASES.length])
  for (const c of order) await pass(c, true)
}
if (session !== null) {
  const { profile } = await session.post('Profiler.stop')
  writeFileSync(values.profile, JSON.stringify(profile))
  session.disconnect()
}
const loadAfter = load()

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}
const results = CASES.map((c) => ({
  name: c.name,
  file: c.set.label,
  zoom: `${c.set.zoom} (max ${c.set.maxzoom})`,
  tiles: c.tiles.length,
  median: median(c.wall),
  mean: c.wall.reduce((a, b) => a + b, 0) / c.wall.length,
  cpu: c.cpu / 1000 / c.count,
  kb: c.bytes / 1024 / c.count,
}))
const base = results[0]
const naip = results[1]
const before = values.against ? new Map(JSON.parse(readFileSync(values.against, 'utf8')).results.map((r) => [r.name, r])) : null

const f2 = (v) => v.toFixed(2)
console.log(`\nWorker time per ${256 * SCALE} px PNG tile, in-process, warm (${ROUNDS} rounds; Node ${process.version}, ${os.cpus().length} cores; load ${loadBefore} → ${loadAfter})\n`)
const head = ['case', 'zoom', 'tiles', 'median ms', 'mean ms', 'CPU ms', '× baseline', '× NAIP', 'KiB']
if (before) head.push('before ms', 'speed-up')
console.log(`| ${head.join(' | ')} |`)
console.log(`|${head.map((_, i) => (i === 0 ? '---' : '---:')).join('|')}|`)
for (const r of results) {
  const row = [r.name, r.zoom, r.tiles, f2(r.median), f2(r.mean), f2(r.cpu), `${f2(r.median / base.median)}×`, `${f2(r.median / naip.median)}×`, r.kb.toFixed(1)]
  if (before) {
    const b = before.get(r.name)
    row.push(b ? f2(b.median) : '–', b ? `${f2(b.median / r.median)}×` : '–')
  }
  console.log(`| ${row.join(' | ')} |`)
}
console.log('\nFiles: ' + Object.values(opened).map((s) => s.label).join('; '))
if (values.save) writeFileSync(values.save, JSON.stringify({ date: new Date().toISOString(), load: [loadBefore, loadAfter], scale: SCALE, results }, null, 2))

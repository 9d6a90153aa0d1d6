#!/usr/bin/env node
// Issue #18's raster analysis against titiler, per zoom, cache off, same files, same options, as many rendering
// processes on each side: a Float32 DEM drawn bilinear as terrarium, NDVI band math on a 4-band COG, a 5-part
// MosaicJSON with pixel_selection first and mean, NDVI over a STAC item's two assets, and one plain band of the 4-band
// COG for reference. The data are made once from the shared fixtures with GDAL into a cache folder (never in the repo);
// titiler is started from its venv (or a running one is given); each case is one bench/run.js run (its tile finding,
// rounds, autocannon or wrk, and CPU measurement). A case tile-cannon does not serve yet (it answers 400/404/500) is
// run on titiler alone and reported with tile-cannon's answer. Prints a table: req/s, latency, server CPU (cores and
// per request) of each, and tile-cannon/titiler per row against the issue's target (≥ 20×). See bench/README.md.
//   node bench/raster-analysis.js [--cases dem-terrarium,ndvi,…] [--duration 10] [--rounds 2] [--titiler URL]
import { execFileSync, spawn } from 'node:child_process'
import { once } from 'node:events'
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import { join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { FIXTURES } from '../test/helpers/app.js'
import { tileBounds, tileRange, unionBounds } from '../lib/tilemath.js'
import { findTaskset } from './cpu.js'
import { freePort, startTileCannon } from './servers.js'
import { fill, findTiles } from './tiles.js'
import { parse, parseQuery, run, titilerUrls, UsageError } from './run.js'

// Each case: the set (a file of the data folder, named by id), tile-cannon's options, the zooms. The DEM's are its
// native zoom (15) and two upsampled ones (where bilinear matters); the others' the top three of cog.tif's range (5-9).
const CASES = [
  { id: 'cog', set: 'bands4', query: 'bidx=3&rescale=1,7872', zooms: '7-9', what: 'plain COG: one band of the 4-band COG, grey (reference)' },
  { id: 'dem-terrarium', set: 'dem', query: 'resampling=bilinear&encoding=terrarium', zooms: '15-17', what: 'Float32 DEM, bilinear, terrarium' },
  { id: 'ndvi', set: 'bands4', query: 'expression=(b4-b3)/(b4+b3)&rescale=-1,1&colormap_name=viridis', zooms: '7-9', what: 'NDVI on a 4-band UInt16 COG, viridis' },
  { id: 'mosaic-first', set: 'mosaic5', query: 'pixel_selection=first&rescale=1,7872', zooms: '7-9', what: '5-part MosaicJSON, first' },
  { id: 'mosaic-mean', set: 'mosaic5', query: 'pixel_selection=mean&rescale=1,7872', zooms: '7-9', what: '5-part MosaicJSON, mean' },
  { id: 'stac-ndvi', set: 'stac2', query: 'assets=red,nir&expression=(b2-b1)/(b2+b1)&rescale=-1,1&colormap_name=viridis', zooms: '7-9', what: 'NDVI over a STAC item\'s 2 assets' },
]
const TARGET = 20 // the issue's: ≥ 20× titiler's throughput on every case

const USAGE = `Usage: node bench/raster-analysis.js [options]

  --cases LIST         which cases, comma-separated (default: all): ${CASES.map((c) => c.id).join(', ')}
  --duration S         seconds per zoom and server (default 10)
  --warmup S           seconds of unrecorded load before each (default 2)
  --connections N      concurrent connections (default 10, the load of titiler's published figures)
  --rounds N           rounds, server order rotating (default 2)
  --tiles N            distinct tiles per zoom, at most (default 500)
  --client NAME        autocannon (default) or wrk (pinned to core 0, both servers to the others)
  --workers N          tile-cannon's raster threads and titiler's uvicorn workers (default: one per core)
  --titiler URL        a running titiler instead of starting one (its CPU is then unknown unless --titiler-pid)
  --titiler-pid PID    that titiler's uvicorn parent process, to measure its CPU
  --titiler-venv DIR   where titiler is installed, to start it (default /tmp/titiler)
  --data-dir DIR       where the bench data are made, once (default: <tmp>/tile-cannon-raster-analysis)
  --rebuild            make the data again
  --json FILE          write every figure, the commands and the machine to FILE
  -h, --help`

// The data, made by GDAL from the shared fixtures. Bump RECIPE when they change: the data folder is made again.
const RECIPE = 2
const PARTS = [[0, 0], [1122, 0], [0, 1131], [1122, 1131], [561, 565]] // -srcwin offsets in cog.tif (2658 × 2667)
const PART_SIZE = 1536 // so that neighbours overlap by 414-438 px and the fifth, central one overlaps all four
// The parts' zoom range as rio-tiler (cogeo-mosaic create) computes it; the quadkey index at the lowest zoom, as
// cogeo-mosaic makes it.
const MOSAIC_ZOOMS = { minzoom: 6, maxzoom: 9 }

function gdal (cmd, args) {
  try {
    execFileSync(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] })
  } catch (err) {
    if (err.code === 'ENOENT') throw new UsageError(`${cmd} is not installed (Debian: apt-get install gdal-bin python3-gdal)`)
    throw new UsageError(`${cmd} ${args.join(' ')} failed: ${String(err.stderr ?? err.message).trim().split('\n').pop()}`)
  }
}

/** [w, s, e, n] in WGS84 of a raster, from gdalinfo's footprint (its corners, reprojected). */
function wgs84Bounds (file) {
  const info = JSON.parse(execFileSync('gdalinfo', ['-json', file], { encoding: 'utf8', maxBuffer: 64 << 20 }))
  const ring = info.wgs84Extent.coordinates[0]
  return [Math.min(...ring.map((p) => p[0])), Math.min(...ring.map((p) => p[1])), Math.max(...ring.map((p) => p[0])), Math.max(...ring.map((p) => p[1]))]
}

const quadkey = (z, x, y) => Array.from({ length: z }, (_, i) => ((x >> (z - 1 - i)) & 1) + 2 * ((y >> (z - 1 - i)) & 1)).join('')
const overlaps = (a, b) => a[0] < b[2] && a[2] > b[0] && a[1] < b[3] && a[3] > b[1]

/**
 * The bench data in `dir`: sets/ (what tile-cannon serves: dem.tif, bands4.tif, mosaic5.json, stac2.json) and
 * sets/parts/ (the files the mosaic and the STAC item point to, by absolute path, which both servers read: inside the
 * served folder, as tile-cannon requires of a part, and not served as sets, as it does not list subfolders). Made once.
 */
function prepare (dir, fixtures, rebuild) {
  const sets = join(dir, 'sets')
  const parts = join(sets, 'parts')
  const stampFile = join(dir, 'recipe.json')
  const stamp = JSON.stringify({ recipe: RECIPE, dir, fixtures })
  if (!rebuild && existsSync(stampFile) && readFileSync(stampFile, 'utf8') === stamp) return sets
  const cog = join(fixtures, 'cog')
  for (const f of ['elev.tif', 'cog.tif']) if (!existsSync(join(cog, f))) throw new UsageError(`${join(cog, f)} is missing: the shared fixtures are needed`)
  process.stderr.write(`making the bench data in ${dir} (GDAL)…\n`)
  rmSync(sets, { recursive: true, force: true })
  mkdirSync(parts, { recursive: true })
  const co = ['-co', 'COMPRESS=DEFLATE']

  // The DEM: elev.tif (Float32, EPSG:3857, 512 × 512, no overviews) as a COG; 256 px blocks, so it gets an overview.
  gdal('gdal_translate', ['-q', '-of', 'COG', ...co, '-co', 'BLOCKSIZE=256', join(cog, 'elev.tif'), join(sets, 'dem.tif')])

  // 4 distinct UInt16 bands from cog.tif's real values (1-7872, UTM 21N): b3 as is (the "red"), b4 = 8000 - b3 (a
  // stand-in for near infrared, so that NDVI spans -1..1), b1 and b2 other functions of it. Nodata 0 (never a value).
  const src = join(cog, 'cog.tif')
  const calcs = ['A//2+1000', 'numpy.sqrt(A)*88', 'A', '8000-A']
  calcs.forEach((calc, i) => gdal('gdal_calc.py', ['--quiet', '-A', src, '--type=UInt16', '--NoDataValue=0', `--calc=${calc}`,
    `--outfile=${join(parts, `b${i + 1}.tif`)}`, '--co', 'COMPRESS=DEFLATE', '--co', 'TILED=YES', '--overwrite']))
  gdal('gdalbuildvrt', ['-q', '-separate', join(parts, 'bands4.vrt'), ...calcs.map((_, i) => join(parts, `b${i + 1}.tif`))])
  gdal('gdal_translate', ['-q', '-of', 'COG', ...co, join(parts, 'bands4.vrt'), join(sets, 'bands4.tif')])
  for (const f of ['bands4.vrt', ...calcs.map((_, i) => `b${i + 1}.tif`)]) rmSync(join(parts, f))

  // The STAC item's assets: bands 3 and 4 as single-band COGs.
  gdal('gdal_translate', ['-q', '-of', 'COG', ...co, '-b', '3', join(sets, 'bands4.tif'), join(parts, 'red.tif')])
  gdal('gdal_translate', ['-q', '-of', 'COG', ...co, '-b', '4', join(sets, 'bands4.tif'), join(parts, 'nir.tif')])
  const itemBounds = wgs84Bounds(join(parts, 'red.tif'))
  const [w, s, e, n] = itemBounds
  const asset = (file) => ({ href: join(parts, file), type: 'image/tiff; application=geotiff; profile=cloud-optimized', roles: ['data'] })
  writeFileSync(join(sets, 'stac2.json'), JSON.stringify({
    type: 'Feature',
    stac_version: '1.0.0',
    id: 'stac2',
    bbox: itemBounds,
    geometry: { type: 'Polygon', coordinates: [[[w, s], [e, s], [e, n], [w, n], [w, s]]] },
    properties: { datetime: '2024-01-01T00:00:00Z' },
    links: [],
    assets: { red: asset('red.tif'), nir: asset('nir.tif') },
  }, null, 2))

  // The mosaic: 5 overlapping windows of cog.tif as COGs, and a MosaicJSON 0.0.3 over them (assets in part order in
  // each quadkey: the order `first` takes them in).
  const files = PARTS.map(([x, y], i) => {
    const file = join(parts, `part${i + 1}.tif`)
    gdal('gdal_translate', ['-q', '-of', 'COG', ...co, '-srcwin', String(x), String(y), String(PART_SIZE), String(PART_SIZE), src, file])
    return { file, bounds: wgs84Bounds(file) }
  })
  const bounds = unionBounds(files.map((f) => f.bounds))
  const z = MOSAIC_ZOOMS.minzoom
  const [minX, minY, maxX, maxY] = tileRange(bounds, z)
  const tiles = {}
  for (let x = minX; x <= maxX; x++) {
    for (let y = minY; y <= maxY; y++) {
      const inTile = files.filter((f) => overlaps(f.bounds, tileBounds(z, x, y))).map((f) => f.file)
      if (inTile.length) tiles[quadkey(z, x, y)] = inTile
    }
  }
  writeFileSync(join(sets, 'mosaic5.json'), JSON.stringify({
    mosaicjson: '0.0.3',
    name: 'mosaic5',
    description: '5 overlapping parts of cog.tif (bench/raster-analysis.js)',
    version: '1.0.0',
    ...MOSAIC_ZOOMS,
    quadkey_zoom: z,
    bounds,
    center: [(bounds[0] + bounds[2]) / 2, (bounds[1] + bounds[3]) / 2, z],
    tiles,
  }, null, 2))
  writeFileSync(stampFile, stamp)
  return sets
}

/** titiler under uvicorn, `workers` processes, on a free port (pinned to `cpus` like the bench's other servers). */
async function startTitiler (venv, { workers, cpus }) {
  const uvicorn = join(venv, 'bin', 'uvicorn')
  if (!existsSync(uvicorn)) throw new UsageError(`no titiler in ${venv}: python3 -m venv ${venv} && ${venv}/bin/pip install titiler.application uvicorn (or give --titiler URL)`)
  const port = await freePort()
  const argv = [uvicorn, 'titiler.application.main:app', '--host', '127.0.0.1', '--port', String(port), '--workers', String(workers), '--no-access-log', '--log-level', 'warning']
  if (cpus !== null) argv.unshift(findTaskset(), '-c', cpus)
  // titiler's advice for its GDAL: no directory listing when a file is opened (it looks for sidecar files otherwise).
  const child = spawn(argv[0], argv.slice(1), { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, GDAL_DISABLE_READDIR_ON_OPEN: 'EMPTY_DIR' } })
  let stderr = ''
  child.stderr.on('data', (d) => { stderr += d })
  const base = `http://127.0.0.1:${port}`
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new UsageError(`titiler exited: ${stderr.trim().split('\n').pop()}`)
    try {
      if ((await fetch(`${base}/healthz`)).ok) break
    } catch {}
    if (i > 600) throw new UsageError('titiler did not start in 60 s')
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  return {
    base,
    pid: child.pid,
    command: argv.join(' '),
    async stop () {
      if (child.exitCode !== null) return
      child.kill('SIGTERM')
      await once(child, 'exit')
    },
  }
}

/**
 * Whether tile-cannon serves a case: a tile with its options answered 200 near the set's center, at its first zoom.
 * Otherwise the answer it gave ("404 no tileset 'mosaic5'", "400 …").
 */
async function probe (base, c) {
  const res = await fetch(`${base}/${c.set}.json`)
  if (!res.ok) return { served: false, reason: `${res.status} ${(await res.json().catch(() => ({}))).message ?? ''}`.trim() }
  const tilejson = await res.json()
  const template = `${base}/${c.set}/{z}/{x}/{y}?${c.queryString}`
  const z = Number(c.zooms.split(/[-,]/)[0])
  if ((await findTiles(template, tilejson, z, { want: 1, budget: 64 })).length) return { served: true }
  const [lon, lat] = tilejson.center ?? [(tilejson.bounds[0] + tilejson.bounds[2]) / 2, (tilejson.bounds[1] + tilejson.bounds[3]) / 2]
  const n = 2 ** z
  const x = Math.floor(((lon + 180) / 360) * n)
  const y = Math.floor(((1 - Math.asinh(Math.tan((lat * Math.PI) / 180)) / Math.PI) / 2) * n)
  const tile = await fetch(fill(template, z, x, y))
  const body = await tile.text()
  let message = body.slice(0, 120)
  try { message = JSON.parse(body).message ?? message } catch {}
  return { served: false, reason: `${tile.status} ${message}` }
}

const fmt = (n, digits = 0) => (Number.isFinite(n) ? n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits }) : '–')
const ms = (r) => (r ? `${fmt(r.latencyAvg, 1)} / ${fmt(r.latencyP99, 0)}` : '–')
const cores = (r) => (r && Number.isFinite(r.cores) ? fmt(r.cores, 2) : '–')
const cpuMs = (r) => (r && Number.isFinite(r.cpuPerRequest) ? fmt(r.cpuPerRequest / 1000, 2) : '–')

/**
 * A row per case and zoom. The req/s ratio is the issue's figure; titiler's CPU per request over tile-cannon's says
 * the same per unit of work, and holds better when other processes take the cores (both are measured over the run).
 */
export function table (cases) {
  const out = []
  out.push('| Case | Zoom | Tiles | tile-cannon req/s | titiler req/s | tile-cannon / titiler | ≥ 20× | tile-cannon ms avg / p99 | titiler ms avg / p99 | tile-cannon CPU (cores) | titiler CPU (cores) | tile-cannon CPU/req (ms) | titiler CPU/req (ms) | titiler ÷ tile-cannon CPU/req |')
  out.push('|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|')
  for (const c of cases) {
    for (const row of c.report.sets[0].rows) {
      const ours = row.results['tile-cannon']
      const theirs = row.results.titiler
      const failed = Object.values(row.results).some((r) => r.errors > 0 || r.non2xx > 0)
      const ratio = ours && theirs?.rps > 0 ? ours.rps / theirs.rps : null
      const cpuRatio = ours?.cpuPerRequest > 0 && Number.isFinite(theirs?.cpuPerRequest) ? `${(theirs.cpuPerRequest / ours.cpuPerRequest).toFixed(1)}×` : '–'
      const verdict = ratio === null ? 'not served yet' : `${ratio >= TARGET ? 'yes' : 'no'}${failed ? ' (failures: not comparable)' : ''}`
      out.push(`| ${c.id} | ${row.zoom} | ${row.tiles} | ${ours ? fmt(ours.rps) : '–'} | ${fmt(theirs?.rps)} | ${ratio === null ? '–' : `${ratio.toFixed(1)}×`} | ${verdict} | ${ms(ours)} | ${ms(theirs)} | ${cores(ours)} | ${cores(theirs)} | ${cpuMs(ours)} | ${cpuMs(theirs)} | ${cpuRatio} |`)
    }
  }
  return out.join('\n')
}

async function main () {
  let values, wanted, workers, common, serverCpus
  try {
    ({ values } = parseArgs({
      options: {
        cases: { type: 'string' },
        duration: { type: 'string', default: '10' },
        warmup: { type: 'string', default: '2' },
        connections: { type: 'string', default: '10' },
        rounds: { type: 'string', default: '2' },
        tiles: { type: 'string', default: '500' },
        client: { type: 'string', default: 'autocannon' },
        workers: { type: 'string', default: String(os.availableParallelism()) },
        titiler: { type: 'string' },
        'titiler-pid': { type: 'string' },
        'titiler-venv': { type: 'string', default: '/tmp/titiler' },
        'data-dir': { type: 'string', default: join(os.tmpdir(), 'tile-cannon-raster-analysis') },
        rebuild: { type: 'boolean', default: false },
        json: { type: 'string' },
        help: { type: 'boolean', short: 'h', default: false },
      },
      strict: true,
    }))
    if (values.help) return console.log(USAGE)
    wanted = values.cases?.split(',') ?? CASES.map((c) => c.id)
    const unknown = wanted.filter((id) => !CASES.some((c) => c.id === id))
    if (unknown.length) throw new UsageError(`unknown case(s) ${unknown.join(', ')}: the cases are ${CASES.map((c) => c.id).join(', ')}`)
    workers = Number(values.workers)
    if (!Number.isInteger(workers) || workers < 1) throw new UsageError('--workers must be a whole number ≥ 1')
    if (values['titiler-pid'] !== undefined && (values.titiler === undefined || !/^\d+$/.test(values['titiler-pid']))) throw new UsageError('--titiler-pid wants the process id of the titiler given with --titiler')
    if (values.titiler !== undefined && !/^https?:\/\/[^/]+/.test(values.titiler)) throw new UsageError('--titiler wants the base URL of a running titiler, like http://127.0.0.1:8000')
    // run.js's own options, shared by every case: checked here, with the others, before anything is made or started
    // (its parse gives the servers' cores too).
    common = ['--cache', 'off', '--duration', values.duration, '--warmup', values.warmup, '--connections', values.connections,
      '--rounds', values.rounds, '--tiles', values.tiles, '--client', values.client]
    ;({ serverCpus } = parse(common))
  } catch (err) {
    // A mistake in the command line: one line and exit 2, whichever option it is.
    console.error(`bench/raster-analysis.js: ${err.message}${err.code?.startsWith('ERR_PARSE_ARGS') ? ' (see --help)' : ''}`)
    process.exit(2)
  }
  const started = []
  try {
    const cases = CASES.filter((c) => wanted.includes(c.id)).map((c) => ({ ...c, queryString: parseQuery(c.query).map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join('&') }))
    const loadBefore = os.loadavg()

    const sets = prepare(resolve(values['data-dir']), FIXTURES, values.rebuild)
    // As many rendering processes on each side: tile-cannon's raster worker threads (its servers inherit this
    // environment) and titiler's uvicorn workers.
    process.env.TILE_CANNON_RASTER_THREADS = String(workers)
    let titiler
    if (values.titiler) {
      titiler = { base: values.titiler.replace(/\/$/, ''), pid: values['titiler-pid'] === undefined ? null : Number(values['titiler-pid']), command: null }
    } else {
      process.stderr.write(`starting titiler (${workers} uvicorn workers)…\n`)
      titiler = await startTitiler(values['titiler-venv'], { workers, cpus: serverCpus })
      started.push(titiler)
    }

    // Which cases tile-cannon serves now (the others are measured on titiler alone).
    const probeServer = await startTileCannon([sets], { cache: false })
    try {
      for (const c of cases) Object.assign(c, await probe(probeServer.base, c))
    } finally {
      await probeServer.stop()
    }

    const results = []
    for (const c of cases) {
      const file = ['.tif', '.json'].map((e) => join(sets, c.set + e)).find(existsSync)
      const urls = titilerUrls(titiler.base, file, parseQuery(c.query))
      const pid = titiler.pid === null ? [] : ['--pid', `titiler=${titiler.pid}`]
      const args = c.served
        ? ['--data', sets, '--set', c.set, '--titiler', titiler.base, '--query', c.query, ...pid]
        : ['--server', `titiler=${urls.tiles}`, '--tilejson', urls.tilejson, ...pid]
      const argv = [...args, '--zooms', c.zooms, ...common]
      process.stderr.write(`${c.id}: ${c.served ? 'tile-cannon and titiler' : `titiler alone (tile-cannon: ${c.reason})`}\n`)
      const report = await run(parse(argv))
      results.push({ id: c.id, what: c.what, set: c.set, query: c.query, served: c.served, reason: c.reason ?? null, titilerTiles: report.sets[0].titiler ?? urls.tiles, command: `node bench/run.js ${argv.map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a}'`)).join(' ')}`, report })
    }
    const loadAfter = os.loadavg()

    console.log(table(results))
    console.log('')
    for (const c of results) console.log(`- ${c.id}: ${c.what}; tile-cannon ?${c.query}${c.served ? '' : ` (not served yet: ${c.reason})`}; titiler ${c.titilerTiles}`)
    const first = results[0]?.report
    console.log('')
    console.log(`machine: ${first?.machine.cpu}, ${os.cpus().length} cores, Node ${process.version}, load ${loadBefore.map((l) => l.toFixed(2)).join(' ')} → ${loadAfter.map((l) => l.toFixed(2)).join(' ')}`)
    console.log(`client: ${values.client}, ${values.connections} connections, ${values.duration} s per zoom and server, ${values.rounds} round(s); tile-cannon with ${workers} raster threads, titiler ${titiler.command ? `under uvicorn with ${workers} workers` : `at ${titiler.base} (started by you)`}${serverCpus === null ? ', all unpinned' : `, both on core(s) ${serverCpus}`}`)
    if (values.json) {
      writeFileSync(values.json, JSON.stringify({ date: new Date().toISOString(), machine: { cores: os.cpus().length, cpu: first?.machine.cpu, node: process.version, loadBefore, loadAfter }, workers, titiler: titiler.command ?? titiler.base, cases: results }, null, 2))
    }
    const failed = results.some((c) => c.report.sets[0].rows.some((r) => Object.values(r.results).some((x) => x.errors > 0 || x.non2xx > 0)))
    if (failed) {
      console.error('bench: some requests failed or were not answered 2xx: those figures are not comparable')
      process.exitCode = 1
    }
  } catch (err) {
    console.error(`bench: ${err instanceof UsageError ? err.message : err.stack}`)
    process.exitCode = 1
  } finally {
    await Promise.all(started.map((s) => s.stop()))
  }
}

if (import.meta.url === `file://${process.argv[1]}`) main()

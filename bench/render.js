#!/usr/bin/env node
// The render bench: rendered tiles/s, median and p95 latency, and memory (PSS of the server and its renderer children),
// for 256 and 512 px tiles and a static image, tile-cannon's cache off (every request is a render).
//   node bench/render.js [--styles DIR --style ID --fonts DIR --data PATH] [--duration 20] [--concurrency 8]
//                        [--zooms 12-14] [--soak 5000]
// With no --styles: OSM Liberty from ../shared/fixtures over koh-samui_thailand.mbtiles, as the tests set it up.
// --soak N renders N more tiles after the measurements and reports PSS every 1,000: flat memory is the goal.
import { readFileSync, readdirSync } from 'node:fs'
import { basename, join } from 'node:path'
import { parseArgs } from 'node:util'
import os from 'node:os'
import { StartError, startTileCannon } from './servers.js'
import { tileRange } from '../lib/tilemath.js'
import { tempDir } from '../test/helpers/data.js'
import { FIXTURES, HAVE_FIXTURES } from '../test/helpers/app.js'
import { writeLiberty } from '../test/helpers/styles.js'

const USAGE = `Usage: node bench/render.js [--styles DIR --style ID --fonts DIR --data PATH] [--duration 20] [--concurrency 8]
                           [--zooms 12-14] [--soak 5000]
  --styles DIR, --style ID   the styles folder and the style rendered (default: OSM Liberty from ../shared/fixtures)
  --fonts DIR                glyphs (default with no --styles: the fixtures')
  --data PATH                files or folders the style's sources read (repeatable); the tiles asked for are those
                             over the served sets' bounds at --zooms, at most ${(100_000).toLocaleString('en')}
  --duration S               seconds per case (default 20)
  --concurrency N            requests at once (default 8)
  --zooms A-B                zoom levels (default 12-14)
  --soak N                   N more tiles after the measurements, PSS every 1,000
  -h, --help`
const MAX_TILES = 100_000 // the URLs of a case are held in memory: a world at z12 (16.8 M tiles) is not a bench

/** A mistake in what the bench was asked: one line and exit 2, no stack. */
class UsageError extends Error {}
const refuse = (message) => {
  console.error(`bench/render.js: ${message}`)
  process.exit(2)
}

let values
try {
  ({ values } = parseArgs({
    options: {
      styles: { type: 'string' },
      style: { type: 'string', default: 'liberty' },
      fonts: { type: 'string' },
      data: { type: 'string', multiple: true, default: [] },
      duration: { type: 'string', default: '20' },
      concurrency: { type: 'string', default: '8' },
      zooms: { type: 'string', default: '12-14' },
      soak: { type: 'string', default: '0' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  }))
} catch (err) {
  refuse(`${err.message} (see --help)`)
}
if (values.help) {
  console.log(USAGE)
  process.exit(0)
}
if (!/^\d+(-\d+)?$/.test(values.zooms)) refuse('--zooms must look like 12 or 12-14')

let styles = values.styles
let fonts = values.fonts
let data = values.data
if (styles === undefined) {
  if (!HAVE_FIXTURES) refuse(`with no --styles the style and data are the test fixtures, and ${FIXTURES} is not there: give --styles, --style, --fonts and --data`)
  styles = join(tempDir(), 'styles')
  writeLiberty(styles)
  fonts ??= join(FIXTURES, 'styles', 'glyphs')
  if (data.length === 0) data = [join(FIXTURES, 'mbtiles', 'koh-samui_thailand.mbtiles')]
}

/** Proportional set size of a process and everything under it, in MiB (Linux /proc). */
function pssMiB (pid) {
  const children = new Map()
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8')
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      if (!children.has(ppid)) children.set(ppid, [])
      children.get(ppid).push(Number(name))
    } catch {}
  }
  let kb = 0
  const todo = [pid]
  while (todo.length) {
    const p = todo.pop()
    try {
      kb += Number(/^Pss:\s+(\d+)/m.exec(readFileSync(`/proc/${p}/smaps_rollup`, 'utf8'))[1])
    } catch {}
    todo.push(...(children.get(p) ?? []))
  }
  return kb / 1024
}

const pct = (sorted, q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]

/** `concurrency` loops fetching the next URL until `seconds` pass or `count` are done. */
async function drive (urls, { seconds = Infinity, count = Infinity, concurrency }) {
  const latencies = []
  let next = 0
  let failed = 0
  const end = performance.now() + seconds * 1000
  const loop = async () => {
    while (performance.now() < end && next < count) {
      const url = urls[next++ % urls.length]
      const t0 = performance.now()
      const res = await fetch(url)
      const body = res.status === 200 ? await res.arrayBuffer() : null
      if (body === null && failed++ === 0) console.error(`bench/render.js: ${url} → ${res.status} ${(await res.text()).slice(0, 200)}`)
      latencies.push(performance.now() - t0)
    }
  }
  const t0 = performance.now()
  await Promise.all(Array.from({ length: concurrency }, loop))
  const wall = (performance.now() - t0) / 1000
  latencies.sort((a, b) => a - b)
  return { requests: latencies.length, failed, perSecond: latencies.length / wall, p50: pct(latencies, 0.5), p95: pct(latencies, 0.95) }
}

let server
try {
  server = await startTileCannon(['--styles', styles, ...(fonts ? ['--fonts', fonts] : []), ...data], { cache: false })
} catch (err) {
  if (!(err instanceof StartError)) throw err
  console.error(`bench/render.js: ${err.message}`)
  process.exit(err.exitCode === 2 ? 2 : 1)
}
try {
  const base = server.base
  const pid = server.child.pid
  const { bounds, center } = await servedArea(base, data)
  const [a, b] = values.zooms.split('-').map(Number)
  const ranges = []
  for (let z = a; z <= (b ?? a); z++) ranges.push([z, ...tileRange(bounds, z)])
  const count = ranges.reduce((sum, [, minX, minY, maxX, maxY]) => sum + (maxX - minX + 1) * (maxY - minY + 1), 0)
  if (count > MAX_TILES) {
    throw new UsageError(`zooms ${values.zooms} over the served sets' bounds (${bounds.map((v) => v.toFixed(2)).join(', ')}) are ${count.toLocaleString('en')} tiles, more than ${MAX_TILES.toLocaleString('en')}: give lower --zooms, or --data over a smaller area`)
  }
  const tiles = []
  for (const [z, minX, minY, maxX, maxY] of ranges) {
    for (let x = minX; x <= maxX; x++) for (let y = minY; y <= maxY; y++) tiles.push([z, x, y])
  }
  // In the order a map asks for them (zoom by zoom, row by row): neighbours share the engine's source tiles, as in a
  // browser; --concurrency is how many a client asks for at once.
  const concurrency = Number(values.concurrency)
  const id = encodeURIComponent(values.style)
  const cases = [
    ['256 px tiles', tiles.map(([z, x, y]) => `${base}/styles/${id}/${z}/${x}/${y}.png`)],
    ['512 px tiles', tiles.map(([z, x, y]) => `${base}/styles/${id}/512/${z}/${x}/${y}.png`)],
    ['800x600 static', tiles.slice(0, 500).map(([z], i) => `${base}/styles/${id}/static/${(center[0] + (i % 20 - 10) * 0.002).toFixed(4)},${center[1].toFixed(4)},${Math.min(z, 14)}/800x600.png`)],
  ]
  await drive(cases[0][1].slice(0, 20), { count: 20, concurrency }) // the engine's first style load
  const rows = []
  const pssStart = pssMiB(pid)
  for (const [name, urls] of cases) {
    const r = await drive(urls, { seconds: Number(values.duration), concurrency })
    rows.push({ name, ...r, pss: pssMiB(pid) })
  }
  const load = os.loadavg().map((l) => l.toFixed(2)).join(' ')
  console.log(`render bench: style ${values.style}, zooms ${values.zooms} (${tiles.length} distinct tiles), cache off, ${concurrency} concurrent, ${values.duration} s each; ${os.cpus()[0].model.trim()}, ${os.cpus().length} cores, load ${load}`)
  console.log('\n| case | renders/s | median ms | p95 ms | failed | PSS after (MiB) |\n|---|---:|---:|---:|---:|---:|')
  for (const r of rows) console.log(`| ${r.name} | ${r.perSecond.toFixed(1)} | ${r.p50.toFixed(1)} | ${r.p95.toFixed(1)} | ${r.failed} | ${r.pss.toFixed(0)} |`)
  console.log(`\nPSS of the server and its renderer children: ${pssStart.toFixed(0)} MiB after warm-up`)
  const soak = Number(values.soak)
  if (soak > 0) {
    const samples = []
    for (let done = 0; done < soak; done += 1000) {
      await drive(cases[0][1].slice(done % cases[0][1].length).concat(cases[0][1]), { count: Math.min(1000, soak - done), concurrency })
      samples.push(`${done + Math.min(1000, soak - done)}: ${pssMiB(pid).toFixed(0)}`)
    }
    console.log(`soak of ${soak} tiles, PSS (MiB) after each thousand: ${samples.join(', ')}`)
  }
} catch (err) {
  if (!(err instanceof UsageError)) throw err
  console.error(`bench/render.js: ${err.message}`)
  process.exitCode = 2
} finally {
  await server.stop()
}

/**
 * Where the tiles are: the bounds of the set a file given first serves, else of every set served (a folder's, or
 * several files'); the world when none says. The centre is the first such set's (static images are drawn there).
 */
async function servedArea (base, data) {
  const ids = await (await fetch(`${base}/list`)).json()
  const named = data.length > 0 ? basename(data[0]).replace(/\.(mbtiles|pmtiles)$/, '') : undefined
  const chosen = ids.includes(named) ? [named] : ids.slice(0, 100)
  const tilejsons = (await Promise.all(chosen.map((id) => fetch(`${base}/${encodeURIComponent(id)}.json`).then((r) => (r.ok ? r.json() : null))))).filter((tj) => Array.isArray(tj?.bounds))
  if (tilejsons.length === 0) return { bounds: [-180, -85, 180, 85], center: [0, 0, 2] }
  const bounds = tilejsons.map((tj) => tj.bounds).reduce((u, b) => [Math.min(u[0], b[0]), Math.min(u[1], b[1]), Math.max(u[2], b[2]), Math.max(u[3], b[3])])
  return { bounds, center: tilejsons[0].center ?? [(bounds[0] + bounds[2]) / 2, (bounds[1] + bounds[3]) / 2, 2] }
}

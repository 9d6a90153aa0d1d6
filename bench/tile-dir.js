#!/usr/bin/env node
// The tile directory's bench (lib/tile-dir): nginx, configured by `tile-cannon nginx`, in front of tile-cannon, on a
// set's made tiles (a COG's, by default), measured in one run against tile-cannon answered directly:
//   hit:  the tiles on disk, nginx sends them          vs tile-cannon from its warm tile cache, and made each time
//         (what a tile costs once it has left the tile cache: evicted, expired, or another replica's)
//   miss: no tile on disk, nginx hands each request on  vs tile-cannon direct (the price of the fall-through)
// wrk on core 0; tile-cannon and nginx's one worker on core 1 (on 2 cores; unpinned elsewhere).
//   node bench/tile-dir.js [--data file.tif] [--zoom 11] [--duration 8] [--connections 20] [--tiles 300]
import { execFileSync } from 'node:child_process'
import os from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { cpuSeconds } from './cpu.js'
import { findNginx, freePort, runNginx, startTileCannon } from './servers.js'
import { fill, findTiles } from './tiles.js'
import { wrk } from './wrk.js'
import { FIXTURES, ROOT } from '../test/helpers/app.js'
import { tempDir } from '../test/helpers/data.js'

const { values } = parseArgs({
  options: {
    data: { type: 'string', default: join(FIXTURES, 'cog', 'image_web_z5_z11.tif') },
    zoom: { type: 'string' },
    duration: { type: 'string', default: '8' },
    connections: { type: 'string', default: '20' },
    tiles: { type: 'string', default: '300' },
  },
})
if (findNginx() === null) throw new Error('nginx is not installed (apt-get install nginx-light)')
const twoCores = os.cpus().length >= 2
const clientCpus = twoCores ? '0' : null
const serverCpus = twoCores ? '1' : null
const scratch = tempDir()
const scriptFile = join(scratch, 'bench.lua')

/** tile-cannon (with a tile directory or not) and nginx in front of it, with the configuration `tile-cannon nginx` prints. */
async function stack (name, { writes }) {
  const tiles = join(scratch, name, 'tiles')
  const dirFlags = ['--tile-dir', tiles]
  const server = await startTileCannon([values.data], { cpus: serverCpus, flags: writes ? dirFlags : [] })
  const port = await freePort()
  const site = execFileSync(process.execPath, [join(ROOT, 'server.js'), 'nginx', values.data, ...dirFlags, '--upstream', server.base,
    '--listen', `127.0.0.1:${port}`, '--log-level', 'silent'], { encoding: 'utf8' })
  const nginx = await runNginx(join(scratch, name, 'nginx'), null, port, site, { cpus: serverCpus })
  return { server, nginx, async stop () { await nginx.stop(); await server.stop() } }
}

const rows = []
const hit = await stack('hit', { writes: true })
const miss = await stack('miss', { writes: false }) // its tile directory stays empty: every request falls through
const uncached = await startTileCannon([values.data], { cache: false, cpus: serverCpus })
try {
  const [set] = await (await fetch(`${hit.server.base}/list`)).json()
  const tilejson = await (await fetch(`${hit.server.base}/${set}.json`)).json()
  const z = Number(values.zoom ?? tilejson.maxzoom)
  const template = `${hit.server.base}/${set}/{z}/{x}/{y}.${tilejson.format}`
  const found = await findTiles(template, tilejson, z, { want: Number(values.tiles) })
  const paths = found.map(([tz, x, y]) => new URL(fill(template, tz, x, y)).pathname)
  const run = (base, duration) => wrk(base, paths, { duration, connections: Number(values.connections), cpus: clientCpus, scriptFile })
  // CPU per request of tile-cannon, and of nginx (its master and worker) when it is in the path: the server-bound figure.
  const measure = async (name, base, server, nginx = null) => {
    await run(base, 2) // warm-up: the tile cache filled, the tiles written
    const pids = [server.child.pid, nginx?.child.pid].filter(Boolean)
    const before = pids.map(cpuSeconds)
    const result = await run(base, Number(values.duration))
    const [tc, ngx = 0] = pids.map((pid, i) => cpuSeconds(pid) - before[i])
    rows.push({ name, ...result, cpuPerReq: (tc / result.requests) * 1e6, nginxPerReq: (ngx / result.requests) * 1e6 })
    console.error(`${name}: ${Math.round(result.rps)} req/s`)
  }
  await measure('tile-cannon direct (warm cache)', hit.server.base, hit.server)
  await measure('hit: nginx from the tile directory', hit.nginx.base, hit.server, hit.nginx)
  await measure('tile-cannon direct, made each time (--cache-mb 0)', uncached.base, uncached)
  await measure('tile-cannon direct (warm cache), second server', miss.server.base, miss.server)
  await measure('miss: nginx, falling through to tile-cannon', miss.nginx.base, miss.server, miss.nginx)
  const [direct, hits, made, direct2, misses] = rows
  console.log(`\n${values.data.split('/').pop()}, z${z}, ${paths.length} tiles, ${values.connections} connections, ${values.duration} s; wrk${clientCpus ? ` on core ${clientCpus}, tile-cannon and nginx's one worker on core ${serverCpus}` : ''}\n`)
  console.log('| path | req/s | ratio | p99 ms | tile-cannon CPU/req µs | nginx CPU/req µs | all CPU/req, ratio | errors | non-2xx |')
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|')
  const all = (r) => r.cpuPerReq + r.nginxPerReq
  const line = (r, base) => console.log(`| ${r.name} | ${Math.round(r.rps)} | ${(r.rps / base.rps).toFixed(2)}× | ${r.latencyP99?.toFixed(2)} | ${r.cpuPerReq.toFixed(1)} | ${r.nginxPerReq.toFixed(1)} | ${(all(r) / all(base)).toFixed(2)}× | ${r.errors} | ${r.non2xx} |`)
  line(direct, direct)
  line(hits, direct)
  line(made, direct)
  line(direct2, direct2)
  line(misses, direct2)
  console.log(`\nhit against made each time: ${(hits.rps / made.rps).toFixed(1)}× the requests/s, ${(made.cpuPerReq / (hits.cpuPerReq + hits.nginxPerReq)).toFixed(0)}× less CPU a request`)
  console.log(`\nmachine: ${os.cpus()[0].model}, ${os.cpus().length} cores, load ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}, Node ${process.version}`)
} finally {
  await hit.stop()
  await miss.stop()
  await uncached.stop()
}

#!/usr/bin/env node
// The shared cache's bench: the same made tiles (a COG's, warped and encoded by tile-cannon) answered three ways, by
// three tile-cannon servers on the same data: from the local tile cache (warm), from Redis (the local cache off, Redis
// filled by a warm-up pass: what a replica gets from tiles another replica made), and made every time (cache off, no
// Redis). wrk and redis-server on core 0, the servers on core 1 (on 2 cores; unpinned elsewhere).
//   node bench/redis.js [--data cog.tif] [--zoom 14] [--duration 8] [--connections 20]
import { spawn, spawnSync } from 'node:child_process'
import { once } from 'node:events'
import os from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { cpuSeconds } from './cpu.js'
import { freePort, startTileCannon } from './servers.js'
import { fill, findTiles } from './tiles.js'
import { wrk } from './wrk.js'
import { FIXTURES } from '../test/helpers/app.js'
import { tempDir } from '../test/helpers/data.js'

const { values } = parseArgs({
  options: {
    data: { type: 'string', default: join(FIXTURES, 'cog', 'cog.tif') },
    zoom: { type: 'string' },
    duration: { type: 'string', default: '8' },
    connections: { type: 'string', default: '20' },
    tiles: { type: 'string', default: '300' },
  },
})
const twoCores = os.cpus().length >= 2
const clientCpus = twoCores ? '0' : null
const serverCpus = twoCores ? '1' : null

const redisPort = await freePort()
const redis = spawn('taskset', ['-c', clientCpus ?? '0', 'redis-server', '--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' })
for (let i = 0; i < 100 && spawnSync('redis-cli', ['-p', String(redisPort), 'ping']).stdout?.toString().trim() !== 'PONG'; i++) await new Promise((resolve) => setTimeout(resolve, 50))
const redisUrl = `redis://127.0.0.1:${redisPort}/0`

const ways = [
  { name: 'local cache', cache: true, flags: [] },
  { name: 'redis', cache: false, flags: ['--redis', redisUrl] },
  { name: 'made each time', cache: false, flags: [] },
]
const scriptFile = join(tempDir(), 'bench.lua')
const rows = []
try {
  for (const way of ways) {
    const server = await startTileCannon([values.data], { cache: way.cache, cpus: serverCpus, flags: way.flags })
    try {
      const [set] = await (await fetch(`${server.base}/list`)).json()
      const tilejson = await (await fetch(`${server.base}/${set}.json`)).json()
      const z = Number(values.zoom ?? tilejson.maxzoom)
      const template = `${server.base}/${set}/{z}/{x}/{y}.png`
      const tiles = await findTiles(template, tilejson, z, { want: Number(values.tiles) })
      const paths = tiles.map(([tz, x, y]) => new URL(fill(template, tz, x, y)).pathname)
      const run = (duration) => wrk(server.base, paths, { duration, connections: Number(values.connections), cpus: clientCpus, scriptFile })
      await run(3) // warm-up: the local cache, or Redis, filled
      const before = cpuSeconds(server.child.pid)
      const result = await run(Number(values.duration))
      const cpu = cpuSeconds(server.child.pid) - before
      rows.push({ name: way.name, z, tiles: paths.length, ...result, cpuPerReq: (cpu / result.requests) * 1e6 })
      console.error(`${way.name}: ${Math.round(result.rps)} req/s`)
    } finally {
      await server.stop()
    }
  }
} finally {
  redis.kill('SIGKILL')
  await once(redis, 'exit')
}

const base = rows.find((r) => r.name === 'made each time')
console.log(`\n${values.data.split('/').pop()}, z${rows[0].z}, ${rows[0].tiles} tiles, ${values.connections} connections, ${values.duration} s; wrk${clientCpus ? ` and redis-server on core ${clientCpus}, servers on core ${serverCpus}` : ''}\n`)
console.log('| answered from | req/s | vs made | p99 ms | server CPU/req µs | errors | non-2xx |')
console.log('|---|---:|---:|---:|---:|---:|---:|')
for (const r of rows) {
  console.log(`| ${r.name} | ${Math.round(r.rps)} | ${(r.rps / base.rps).toFixed(2)}× | ${r.latencyP99?.toFixed(2)} | ${r.cpuPerReq.toFixed(1)} | ${r.errors} | ${r.non2xx} |`)
}
console.log(`\nmachine: ${os.cpus()[0].model}, ${os.cpus().length} cores, load ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}, Node ${process.version}`)

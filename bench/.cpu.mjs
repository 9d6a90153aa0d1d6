import autocannon from 'autocannon'
import { readFileSync } from 'node:fs'
import { findTiles } from './tiles.js'
import { startTileCannon } from './servers.js'
const ticks = (pid) => { const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' '); return Number(f[11]) + Number(f[12]) }
const z = Number(process.argv[3] ?? 14)
for (const cache of [false]) {
  const tc = await startTileCannon([process.argv[2]], { cache })
  const set = (await (await fetch(`${tc.base}/list`)).json())[0]
  const tj = await (await fetch(`${tc.base}/${set}.json`)).json()
  const paths = (await findTiles(`${tc.base}/${set}/{z}/{x}/{y}`, tj, z, {})).map(([z, x, y]) => `/${set}/${z}/${x}/${y}`)
  let n = 0
  const opts = { url: tc.base, connections: 100, duration: 5, headers: { 'accept-encoding': 'gzip, br' }, requests: [{ setupRequest: (req) => ({ ...req, path: paths[n++ % paths.length] }) }] }
  await autocannon({ ...opts, duration: 1 })
  const t0 = ticks(tc.child.pid); const c0 = process.cpuUsage()
  const r = await autocannon(opts)
  const t1 = ticks(tc.child.pid); const c1 = process.cpuUsage(c0)
  console.log(`${process.argv[2].split('/').pop()} z${z} cache ${cache ? 'on ' : 'off'}: ${Math.round(r.requests.average)} req/s, server cpu ${((t1 - t0) / 5).toFixed(0)}%, client cpu ${((c1.user + c1.system) / 5e4).toFixed(0)}%, server µs/req ${((t1 - t0) * 1e4 / r.requests.total).toFixed(1)}`)
  await tc.stop()
}

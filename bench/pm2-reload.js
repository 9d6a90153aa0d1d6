#!/usr/bin/env node
// Checks that `pm2 reload` drops no request: load from autocannon while pm2 replaces every process.
// Needs pm2 on PATH and tile-cannon running under it:
//   TILE_CANNON_ARGS=../shared/fixtures/mbtiles/trails.mbtiles TILE_CANNON_INSTANCES=2 pm2 start ecosystem.config.cjs
//   node bench/pm2-reload.js [base URL, default http://127.0.0.1:3000]
import { execFile } from 'node:child_process'
import { accountedLoad, describeLoad } from './load.js'
import { findTiles } from './tiles.js'

const base = process.argv[2] ?? 'http://127.0.0.1:3000'
const set = (await (await fetch(`${base}/list`)).json())[0]
const tilejson = await (await fetch(`${base}/${encodeURIComponent(set)}.json`)).json()
const z = Math.min(tilejson.maxzoom, Math.max(tilejson.minzoom, 12))
const paths = (await findTiles(`${base}/${encodeURIComponent(set)}/{z}/{x}/{y}`, tilejson, z)).map(([tz, x, y]) => `/${encodeURIComponent(set)}/${tz}/${x}/${y}`)
if (paths.length === 0) throw new Error(`no tiles found for ${set} at z${z}`)
let next = 0
// Every request accounted for (bench/load.js: autocannon alone misses requests lost on a closed connection).
const load = accountedLoad({ url: base, connections: 50, duration: 14, headers: { 'accept-encoding': 'gzip' }, requests: [{ setupRequest: (r) => ({ ...r, path: paths[next++ % paths.length] }) }] })
// Asynchronously: the load runs in this process, and must go on while pm2 reloads.
setTimeout(() => {
  const t = Date.now()
  execFile('pm2', ['reload', 'tile-cannon'], (err) => {
    if (err) console.error(`pm2 reload failed: ${err.message}`)
    console.log(`pm2 reload took ${Date.now() - t} ms`)
  })
}, 3000)
const run = await load.done
console.log(describeLoad(run))
process.exitCode = run.failures.total === 0 ? 0 : 1

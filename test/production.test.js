// What an operator relies on: /health and /ready, /metrics (one process and a cluster of them), load shedding,
// the access log, and log lines a person can read on a terminal.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { once } from 'node:events'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { connect } from 'node:net'
import { Writable } from 'node:stream'
import pino from 'pino'
import { ROOT, makeApp, needs } from './helpers/app.js'
import { tempDir, vectorTiles, writeMbtiles, writePmtiles, pyramid } from './helpers/data.js'
import { rangeServer } from './helpers/http.js'
import { startPostgis, POSTGIS_MISSING, runSql } from './helpers/postgres.js'
import { freePort } from '../bench/servers.js'
import { buildApp } from '../lib/app.js'
import { loadConfig } from '../lib/config.js'
import { makeLogger } from '../lib/logging.js'

const SERVER = join(ROOT, 'server.js')

/** A metric's value in Prometheus text: the line `name{labels} value` whose labels include all of `labels`. */
function metric (text, name, labels = {}) {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`)
  for (const line of text.split('\n')) {
    if (!line.startsWith(name + '{') && !line.startsWith(name + ' ')) continue
    if (wanted.every((w) => line.includes(w))) return Number(line.slice(line.lastIndexOf(' ') + 1))
  }
  return undefined
}

async function listening (t, overrides) {
  const app = await makeApp(t, overrides)
  await app.listen({ port: 0, host: '127.0.0.1' })
  return { app, base: `http://127.0.0.1:${app.server.address().port}` }
}

function tileset (t, name = 'roads') {
  const dir = tempDir(t)
  writeMbtiles(join(dir, `${name}.mbtiles`), { tiles: vectorTiles(pyramid(0, 3)) })
  return dir
}

test('/metrics counts requests by route, set and status class, the tile front\'s too, with the cache\'s figures', async (t) => {
  const { base } = await listening(t, { paths: [tileset(t)] })
  for (let i = 0; i < 5; i++) assert.equal((await fetch(`${base}/roads/1/0/0`)).status, 200) // the tile front
  assert.equal((await fetch(`${base}/roads/1/0/0?x=1`)).status, 200) // through Fastify (a query string)
  assert.equal((await fetch(`${base}/roads.json`)).status, 200)
  assert.equal((await fetch(`${base}/roads/9/0/0`)).status, 404) // outside its zooms
  assert.equal((await fetch(`${base}/nope-${Date.now()}/0/0/0`)).status, 404)
  const res = await fetch(`${base}/metrics`)
  assert.equal(res.status, 200)
  assert.match(res.headers.get('content-type'), /^text\/plain; version=0\.0\.4/)
  const text = await res.text()
  assert.equal(metric(text, 'tilecannon_requests_total', { route: 'tile', set: 'roads', status: '2xx' }), 6)
  assert.equal(metric(text, 'tilecannon_requests_total', { route: 'tile', set: 'roads', status: '4xx' }), 1)
  assert.equal(metric(text, 'tilecannon_requests_total', { route: 'tilejson', set: 'roads', status: '2xx' }), 1)
  assert.equal(metric(text, 'tilecannon_requests_total', { route: 'tile', set: '', status: '4xx' }), 1, 'an unknown set is not a label value')
  assert.ok(!text.includes('nope-'), 'names that are not sets never become label values')
  assert.equal(metric(text, 'tilecannon_request_duration_seconds_count', { route: 'tile', kind: 'mbtiles' }), 7)
  assert.equal(metric(text, 'tilecannon_request_duration_seconds_bucket', { route: 'tile', kind: 'mbtiles', le: '+Inf' }), 7)
  assert.equal(metric(text, 'tilecannon_cache_hits_total'), 5, 'one read, then hits')
  assert.equal(metric(text, 'tilecannon_source_read_seconds_count', { kind: 'mbtiles' }), 1)
  assert.equal(metric(text, 'tilecannon_cache_entries'), 1)
  assert.ok(metric(text, 'tilecannon_cache_bytes') > 0)
  assert.equal(metric(text, 'tilecannon_sets', { state: 'available' }), 1)
  assert.ok(metric(text, 'nodejs_eventloop_lag_seconds') >= 0, 'event-loop lag')
  assert.ok(metric(text, 'process_resident_memory_bytes') > 0, 'process metrics')
})

test('a tile read asynchronously is counted once: one miss, no join, one request', async (t) => {
  const dir = tempDir(t)
  const file = writePmtiles(join(dir, 'far.pmtiles'), { tiles: vectorTiles(pyramid(0, 2)) })
  const remote = await rangeServer(t, file, 'far.pmtiles')
  const { base } = await listening(t, { paths: [remote.url] })
  assert.equal((await fetch(`${base}/far/1/0/0`)).status, 200) // the front starts the read, the route answers it
  const text = await (await fetch(`${base}/metrics`)).text()
  assert.equal(metric(text, 'tilecannon_cache_misses_total'), 1)
  assert.equal(metric(text, 'tilecannon_inflight_joins_total'), 0)
  assert.equal(metric(text, 'tilecannon_requests_total', { route: 'tile', set: 'far', status: '2xx' }), 1)
  assert.equal(metric(text, 'tilecannon_source_read_seconds_count', { kind: 'pmtiles' }), 1)
})

test('/metrics can be turned off', async (t) => {
  const app = await makeApp(t, { metrics: { enabled: false } })
  assert.equal((await app.inject({ url: '/metrics' })).statusCode, 404)
})

test('/health answers while /ready follows the database: 503 while it is down, 200 when it is back', async (t) => {
  const db = await startPostgis()
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  t.after(() => db.stop())
  if (db.pause === null) return t.skip('DATABASE_URL given: this test needs the throwaway cluster to stop and start it')
  await runSql(db.url, 'CREATE TABLE points (id int, geom geometry(Point, 4326)); INSERT INTO points VALUES (1, ST_Point(8.5, 47.4, 4326))')
  const app = await makeApp(t, { paths: [db.url], postgres: { retryMs: 200 } })
  const ready = async () => {
    const res = await app.inject({ url: '/ready' })
    return { status: res.statusCode, body: res.json(), headers: res.headers }
  }
  let r = await ready()
  assert.equal(r.status, 200)
  assert.equal(r.body.status, 'ready')
  const [database] = r.body.backends
  assert.equal(database.kind, 'database')
  assert.equal(database.state, 'up')
  assert.ok(database.clients >= 1, 'its pool is shown')
  assert.equal(r.headers['cache-control'], 'no-store')
  assert.match((await app.inject({ url: '/metrics' })).payload, /tilecannon_backend_clients\{backend="tile_cannon_test_\w+",state="total"\} \d+/)

  await db.pause()
  await new Promise((resolve) => setTimeout(resolve, 1100)) // past the checks' once-a-second memo
  r = await ready()
  assert.equal(r.status, 503, 'a load balancer drains this replica')
  assert.equal(r.headers['retry-after'], '5')
  assert.equal(r.body.backends[0].state, 'down')
  assert.ok(!JSON.stringify(r.body).includes('127.0.0.1'), 'no host in the answer')
  assert.equal((await app.inject({ url: '/health' })).statusCode, 200, 'the process itself is alive')

  await db.start()
  const deadline = Date.now() + 15_000
  do {
    await new Promise((resolve) => setTimeout(resolve, 300))
    r = await ready()
  } while (r.status !== 200 && Date.now() < deadline)
  assert.equal(r.status, 200, 'ready again once the database answers')
})

test('under pressure, requests get 503 with Retry-After at once, the tile front\'s too; /health, /ready and /metrics say so', async (t) => {
  // A heap limit every process is past: pressure from the first sample on, without having to starve the machine.
  const { app, base } = await listening(t, { paths: [tileset(t)], shedding: { maxHeapUsedMB: 1, retryAfterS: 7 } })
  const deadline = Date.now() + 5000
  let res
  do {
    await new Promise((resolve) => setTimeout(resolve, 100))
    res = await fetch(`${base}/roads/0/0/0`)
  } while (res.status !== 503 && Date.now() < deadline)
  assert.equal(res.status, 503)
  assert.equal(res.headers.get('retry-after'), '7')
  assert.match((await res.json()).message, /overloaded/)
  assert.equal((await fetch(`${base}/roads.json`)).status, 503)
  assert.equal((await fetch(`${base}/health`)).status, 200)
  const ready = await fetch(`${base}/ready`)
  assert.equal(ready.status, 503)
  assert.equal((await ready.json()).underPressure, true)
  const text = await (await fetch(`${base}/metrics`)).text()
  assert.ok(metric(text, 'tilecannon_shed_total') >= 2)
  assert.ok(app.shedding.count >= 2)
})

test('--log-requests writes one JSON line per request: id, set, z/x/y, status, bytes, ms and cache hit', async (t) => {
  const start = async (overrides = {}) => {
    const raw = []
    const sink = new Writable({ write (chunk, _, done) { raw.push(...String(chunk).trim().split('\n')); done() } })
    const { config } = loadConfig({ overrides: { paths: [tileset(t)], watch: false, demo: false, logRequests: true, ...overrides } })
    const app = await buildApp(config, { loggerInstance: pino({ level: 'info' }, sink) })
    t.after(() => app.close())
    await app.listen({ port: 0, host: '127.0.0.1' })
    return { base: `http://127.0.0.1:${app.server.address().port}`, raw, requests: () => raw.map((l) => JSON.parse(l)).filter((l) => l.msg === 'request') }
  }
  const { base, raw, requests } = await start()
  for (let i = 0; i < 2; i++) await (await fetch(`${base}/roads/2/1/1.pbf`)).arrayBuffer()
  await (await fetch(`${base}/roads/2/3/3`)).arrayBuffer() // absent: 204
  await (await fetch(`${base}/roads.json`)).arrayBuffer()
  assert.equal(requests().length, 4)
  const [first, second, absent, tilejson] = requests()
  assert.deepEqual({ set: first.set, z: first.z, x: first.x, y: first.y, status: first.status, cache: first.cache }, { set: 'roads', z: 2, x: 1, y: 1, status: 200, cache: 'miss' })
  assert.equal(second.cache, 'hit')
  assert.equal(absent.status, 204)
  assert.ok(first.bytes > 100 && typeof first.ms === 'number' && first.reqId !== undefined)
  assert.deepEqual([tilejson.set, tilejson.status], ['roads', 200], 'the set a TileJSON URL names, not roads.json')
  assert.ok(!raw.some((l) => JSON.parse(l).msg === 'incoming request'), 'one line a request, not two')
  for (const line of raw.filter((l) => l.includes('"msg":"request"'))) assert.equal(line.match(/"reqId":/g).length, 1, `each key once: ${line}`)

  // A request refused before its route (no API key): the bytes sent all the same.
  const keyed = await start({ apiKeys: ['k3y'] })
  assert.equal((await fetch(`${keyed.base}/roads/2/1/1.pbf`)).status, 401)
  const [refused] = keyed.requests()
  assert.equal(refused.status, 401)
  assert.ok(refused.bytes > 100, `bytes: ${refused.bytes}`)
})

test('on a terminal the log is for people; with --log-format json (or piped) it is JSON lines', async (t) => {
  const script = spawnSync('script', ['--version'])
  if (!needs(t, script.status === 0, 'script (util-linux/bsdutils) is not installed: it gives the server a terminal')) return
  const dir = tileset(t)
  const start = async (format) => {
    const port = await freePort()
    const command = `${process.execPath} ${SERVER} --host 127.0.0.1 --port ${port} --no-watch ${format ? `--log-format ${format} ` : ''}${dir}`
    const child = spawn('script', ['-qfec', command, '/dev/null'], { stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    child.stdout.on('data', (d) => { out += d })
    const deadline = Date.now() + 15_000
    while (!/listening on/.test(out) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100))
    child.kill('SIGTERM')
    await once(child, 'exit')
    return out
  }
  const pretty = await start(null)
  assert.match(pretty, /INFO.*tile-cannon listening on http:\/\/127\.0\.0\.1:\d+/)
  assert.ok(!pretty.includes('{"level"'), 'no raw JSON on a terminal')
  const json = await start('json')
  assert.match(json, /\{"level":30,.*"msg":"tile-cannon listening on/)
})

test('under a cluster, a scrape of any worker sums the metrics of every worker alive, and what the gone ones counted', async (t) => {
  const dir = tileset(t)
  const metricsDir = join(tempDir(t), 'metrics')
  const configFile = join(tempDir(t), 'tc.json')
  writeFileSync(configFile, JSON.stringify({ metrics: { cluster: true, dir: metricsDir, intervalMs: 300 }, watch: false, paths: [dir] }))
  const workers = []
  for (let i = 0; i < 2; i++) {
    const port = await freePort()
    const child = spawn(process.execPath, [SERVER, '--config', configFile, '--host', '127.0.0.1', '--port', String(port), '--log-format', 'json'], { stdio: 'ignore' })
    t.after(() => child.kill('SIGKILL'))
    workers.push({ child, base: `http://127.0.0.1:${port}` })
  }
  for (const { base } of workers) {
    for (let i = 0; i < 50; i++) {
      try { if ((await fetch(`${base}/health`)).ok) break } catch {}
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  }
  for (let i = 0; i < 3; i++) await fetch(`${workers[0].base}/roads/0/0/0`)
  for (let i = 0; i < 4; i++) await fetch(`${workers[1].base}/roads/0/0/0`)
  // The other worker writes its figures every 300 ms: until then a scrape sums what it wrote before.
  const tiles = (text) => metric(text, 'tilecannon_requests_total', { route: 'tile', set: 'roads', status: '2xx' })
  let text
  const deadline = Date.now() + 5000
  do {
    await new Promise((resolve) => setTimeout(resolve, 100))
    text = await (await fetch(`${workers[0].base}/metrics`)).text()
  } while (tiles(text) !== 7 && Date.now() < deadline)
  assert.equal(metric(text, 'tilecannon_cluster_workers'), 2)
  assert.equal(tiles(text), 7)
  assert.equal(metric(text, 'tilecannon_cache_hits_total'), 5)
  workers[1].child.kill('SIGKILL')
  await once(workers[1].child, 'exit')
  text = await (await fetch(`${workers[0].base}/metrics`)).text()
  assert.equal(metric(text, 'tilecannon_cluster_workers'), 1, 'a dead worker\'s gauges are dropped')
  assert.equal(metric(text, 'tilecannon_requests_total', { route: 'tile', set: 'roads', status: '2xx' }), 7, 'its counters are kept (test/metrics-cluster.test.js)')
})

test('closing never waits on a connection that sent no request, or half of one (a browser\'s preconnect, a slow client)', async (t) => {
  const { app } = await listening(t, { paths: [tileset(t)] })
  const port = app.server.address().port
  const sockets = []
  for (const first of ['', 'GET /roads/0/0/0 HTTP/1.1\r\nHost: x\r\n']) {
    const socket = connect(port, '127.0.0.1')
    await once(socket, 'connect')
    socket.on('error', () => {})
    if (first) socket.write(first)
    sockets.push(socket)
  }
  await new Promise((resolve) => setTimeout(resolve, 50))
  const started = Date.now()
  const closed = await Promise.race([app.close().then(() => true), new Promise((resolve) => setTimeout(() => resolve(false), 3000))])
  for (const socket of sockets) socket.destroy() // (so that a close that waits on them ends, and the test with it)
  assert.ok(closed, 'close() did not wait on the clients')
  assert.ok(Date.now() - started < 2000, `closed in ${Date.now() - started} ms`)
})

test('on a terminal (pretty logs) a request line and the start-up line are one line each, not one line per field', async (t) => {
  const lines = []
  const sink = new Writable({ write (chunk, _, done) { lines.push(...String(chunk).replace(/\n$/, '').split('\n')); done() } })
  const { config } = loadConfig({ overrides: { paths: [tileset(t)], watch: false, demo: false, logRequests: true, logFormat: 'pretty' } })
  const app = await buildApp(config, { loggerInstance: makeLogger(config, sink) })
  t.after(() => app.close())
  await app.listen({ port: 0, host: '127.0.0.1' })
  await (await fetch(`http://127.0.0.1:${app.server.address().port}/roads/2/1/1.pbf`)).arrayBuffer()
  const request = lines.filter((l) => /INFO: request\b/.test(l))
  assert.equal(request.length, 1, lines.join('\n'))
  assert.match(request[0], /^\[\d\d:\d\d:\d\d\] INFO: request \{.*"status":200,"set":"roads".*\}$/)
  assert.ok(lines.some((l) => /INFO: serving \{.*"set":"roads".*"maxzoom":/.test(l)), lines.join('\n'))
  assert.ok(!lines.some((l) => /^\s+(reqId|status|set): /.test(l)), `no field on a line of its own:\n${lines.join('\n')}`)
})

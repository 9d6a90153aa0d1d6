// pm2, proven: tile-cannon under pm2 in cluster mode (ecosystem.config.cjs, 2 workers) with autocannon load through
// a reload, a worker killed with SIGKILL, and a set's file replaced; then one `node server.js` stopped by SIGTERM and
// SIGINT under load with a slow request in flight. pm2 runs for real, with PM2_HOME in a temp folder (the user's pm2
// is never touched) and a free port. Every request of the load is accounted for (bench/load.js): an answer, an error,
// or lost on a closed connection.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFile, spawn } from 'node:child_process'
import { once } from 'node:events'
import { existsSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { Agent, createServer as createHttpServer, request } from 'node:http'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { gunzipSync, gzipSync } from 'node:zlib'
import { ROOT, needs } from './helpers/app.js'
import { makeMvt, pyramid, tempDir, vectorTiles, writeMbtiles, writePmtiles } from './helpers/data.js'
import { freePort } from '../bench/servers.js'
import { accountedLoad, describeLoad } from '../bench/load.js'

const PM2 = join(ROOT, 'node_modules', '.bin', 'pm2')
const SERVER = join(ROOT, 'server.js')
const WATCH_DEBOUNCE_MS = 300
// A replaced file is served one debounce after its last change (lib/catalog/watch.js: events are coalesced for
// watchDebounceMs; a file renamed into place has not changed for that long then, so it is opened at once), plus this
// margin: re-opening takes milliseconds, the rest is room for a busy 2-core machine.
const SWAP_MARGIN_MS = 500
const METRICS_INTERVAL_MS = 300 // how often each worker writes its metrics for the others' scrapes
const SWAP_BOUND_MS = WATCH_DEBOUNCE_MS + SWAP_MARGIN_MS

/** Polls `check` until it returns a truthy value (returned), failing after `ms`. */
async function until (check, ms, what) {
  const deadline = Date.now() + ms
  for (;;) {
    const value = await check()
    if (value) return value
    if (Date.now() > deadline) assert.fail(`timed out after ${ms} ms waiting for: ${what}`)
    await sleep(50)
  }
}

/** Runs the pm2 CLI against our PM2_HOME (asynchronously: the load runs in this process). */
function pm2 (home, args, env = {}) {
  return new Promise((resolve, reject) => {
    execFile(PM2, args, { cwd: ROOT, env: { ...process.env, ...env, PM2_HOME: home }, timeout: 60_000, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`pm2 ${args.join(' ')} failed: ${err.message}\n${stdout}\n${stderr}`))
      else resolve(stdout)
    })
  })
}

/** Our pm2 daemon, by the pid in its PM2_HOME, if `pm2 kill` left it running (it stops its workers on SIGTERM). */
function stopDaemon (home) {
  try {
    const pid = Number(readFileSync(join(home, 'pm2.pid'), 'utf8'))
    if (pid > 0) process.kill(pid, 'SIGTERM')
  } catch {} // no pid file, or already gone
}

/** The app's workers as pm2 lists them: [{ id, pid, status, restarts }], by pm2 id. */
async function workers (home) {
  const list = JSON.parse(await pm2(home, ['jlist']))
  return list.map((p) => ({ id: p.pm_id, pid: p.pid, status: p.pm2_env.status, restarts: p.pm2_env.restart_time })).sort((a, b) => a.id - b.id)
}

/**
 * Established TCP connections on `port` held by process `pid` (Linux /proc): its socket inodes matched against the
 * kernel's TCP tables. In pm2's cluster mode the primary hands each accepted connection to one worker, which then
 * holds it alone.
 */
function connectionsHeld (pid, port) {
  const inodes = new Set()
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`))
      if (m) inodes.add(m[1])
    } catch {} // an fd closed meanwhile
  }
  let n = 0
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    if (!existsSync(table)) continue
    for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
      const f = line.trim().split(/\s+/)
      if (f.length < 10) continue
      const localPort = parseInt(f[1].split(':')[1], 16)
      if (localPort === port && f[3] === '01' && inodes.has(f[9])) n++ // 01: ESTABLISHED
    }
  }
  return n
}

/** A GET as the load sends it (on a fresh connection unless an agent is given): { status, headers, body }. */
function get (url, { agent = false, headers = { 'accept-encoding': 'gzip' } } = {}) {
  return new Promise((resolve, reject) => {
    request(url, { agent, headers }, (res) => {
      const chunks = []
      res.on('data', (c) => chunks.push(c)).on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }))
    }).on('error', reject).end()
  })
}

/** A set's tiles, each naming its set and version (so every tile's bytes, hence ETag, are its own), gzip as stored. */
const versionedTiles = (coords, set, version) => coords.map(([z, x, y]) => ({ z, x, y, data: gzipSync(makeMvt(z, x, y, { set, version })) }))

const COORDS = pyramid(0, 4, 4) // 1 + 4 + 16 + 16 + 16 tiles
const LOAD_SETS = ['roads', 'parks', 'swap', 'swap-pm']

/** Writes the served folder: two sets that stay, and two (MBTiles, PMTiles) that the swap test replaces. */
function writeTilesets (dir) {
  writeMbtiles(join(dir, 'roads.mbtiles'), { tiles: vectorTiles(COORDS), metadata: { format: 'pbf', minzoom: '0', maxzoom: '4' } })
  writePmtiles(join(dir, 'parks.pmtiles'), { tiles: vectorTiles(COORDS) })
  writeMbtiles(join(dir, 'swap.mbtiles'), { tiles: versionedTiles(COORDS, 'swap', 1), metadata: { format: 'pbf', minzoom: '0', maxzoom: '4' } })
  writePmtiles(join(dir, 'swap-pm.pmtiles'), { tiles: versionedTiles(COORDS, 'swap-pm', 1) })
}

/** autocannon options: every tile of `sets`, each connection taking the next from one shared counter. */
function loadOptions (base, sets, options = {}) {
  const paths = sets.flatMap((set) => COORDS.map(([z, x, y]) => `/${set}/${z}/${x}/${y}`))
  let next = 0
  return {
    url: base,
    connections: 10,
    duration: 120, // stopped by the test when its scenario is over
    timeout: 3, // seconds: a request answered by nobody shows as a timeout while the load still runs
    headers: { 'accept-encoding': 'gzip' },
    requests: [{ setupRequest: (req) => ({ ...req, path: paths[next++ % paths.length] }) }],
    ...options,
  }
}

/** The exit lines pm2's daemon logged since `offset`: [{ id, code, signal }]. */
function exitsLogged (home, offset) {
  const log = readFileSync(join(home, 'pm2.log'), 'utf8').slice(offset)
  return [...log.matchAll(/App \[tile-cannon:([^\]]+)\] exited with code \[(\d+)\] via signal \[(\w+)\]/g)].map((m) => ({ id: m[1], code: Number(m[2]), signal: m[3] }))
}

test('pm2 cluster of 2 under load: reload, a worker killed, a file replaced', async (t) => {
  if (!needs(t, existsSync(PM2), 'pm2 is not installed (a dev dependency: npm ci)')) return
  if (!needs(t, existsSync('/proc/net/tcp'), 'counting a worker\'s connections needs Linux /proc')) return
  // PM2_HOME: removed only after its daemon is gone (pm2 kill needs its socket there).
  const home = mkdtempSync(join(tmpdir(), 'tile-cannon-pm2-'))
  t.after(async () => {
    await pm2(home, ['kill']).catch(() => {})
    stopDaemon(home)
    rmSync(home, { recursive: true, force: true })
  })
  const data = tempDir(t)
  writeTilesets(data)
  const config = join(home, 'tile-cannon.yaml')
  writeFileSync(config, `watchDebounceMs: ${WATCH_DEBOUNCE_MS}\nmetrics: { intervalMs: ${METRICS_INTERVAL_MS} }\n`)
  const port = await freePort()
  const base = `http://127.0.0.1:${port}`
  // ecosystem.config.cjs as shipped: its script, cluster mode, wait_ready, kill_timeout; the port from the flags.
  const env = {
    TILE_CANNON_ARGS: `--port ${port} --host 127.0.0.1 --log-level warn --config ${config} ${data}`,
    TILE_CANNON_INSTANCES: '2',
  }
  await pm2(home, ['start', join(ROOT, 'ecosystem.config.cjs')], env)
  const started = await until(async () => {
    const list = await workers(home)
    return list.length === 2 && list.every((w) => w.status === 'online' && w.pid > 0) && list
  }, 30_000, 'two workers online')
  await until(async () => (await get(`${base}/health`).catch(() => ({}))).status === 200, 10_000, 'the cluster to answer')
  assert.deepEqual(JSON.parse((await get(`${base}/list`)).body).sort(), ['parks', 'roads', 'swap', 'swap-pm'])

  await t.test('pm2 reload under load: 0 errors, 0 non-2xx, 0 connection resets, 0 requests lost', async () => {
    const logOffset = readFileSync(join(home, 'pm2.log'), 'utf8').length
    let answeredDuringReload = 0
    let reloading = false
    const load = accountedLoad(loadOptions(base, LOAD_SETS), { onAnswer: () => { if (reloading) answeredDuringReload++ } })
    await sleep(1000)
    reloading = true
    const t0 = Date.now()
    await pm2(home, ['reload', 'tile-cannon'])
    const reloadMs = Date.now() - t0
    reloading = false
    const after = await until(async () => {
      const list = await workers(home)
      return list.length === 2 && list.every((w) => w.status === 'online') && list
    }, 30_000, 'two workers online after the reload')
    await sleep(1000)
    load.instance.stop()
    const run = await load.done
    console.log(`# pm2 reload of 2 workers took ${reloadMs} ms; load: ${describeLoad(run)}; answered during the reload: ${answeredDuringReload}`)
    for (const w of after) assert.notEqual(w.pid, started.find((s) => s.id === w.id).pid, `worker ${w.id} was replaced`)
    assert.equal(run.failures.errors.ECONNRESET ?? 0, 0, 'connection resets')
    assert.deepEqual(run.failures.errors, {}, 'socket errors and timeouts')
    assert.deepEqual(run.failures.non2xx, {}, 'answers other than 2xx')
    assert.equal(run.failures.lost, 0, 'requests lost on a closed connection')
    assert.equal(run.failures.stuck, 0, 'requests never answered')
    assert.ok(answeredDuringReload > 100, `the load went on during the reload (${answeredDuringReload} answers)`)
    // Each old worker finished its in-flight requests and exited by itself (0), not killed at kill_timeout.
    const exits = await until(() => { const e = exitsLogged(home, logOffset); return e.length >= 2 && e }, 15_000, 'the old workers to exit')
    for (const e of exits) assert.equal(e.code, 0, `old worker ${e.id} exited with ${e.code} (${e.signal})`)
  })

  await t.test('a worker killed with SIGKILL under load: pm2 replaces it, only its own connections fail', async () => {
    const before = await workers(home)
    const victim = before[0]
    const survivor = before[1]
    const timeoutsAt = []
    const load = accountedLoad(loadOptions(base, LOAD_SETS), { onError: (code, at) => { if (code === 'timeout') timeoutsAt.push(at) } })
    await sleep(1500)
    // The connections the victim holds just before it dies: the requests on them are the only ones allowed to fail.
    const held = connectionsHeld(victim.pid, port)
    const heldBySurvivor = connectionsHeld(survivor.pid, port)
    process.kill(victim.pid, 'SIGKILL')
    const killedAt = Date.now()
    const replacement = await until(async () => {
      const w = (await workers(home)).find((x) => x.id === victim.id)
      return w?.status === 'online' && w.pid > 0 && w.pid !== victim.pid && w
    }, 30_000, 'pm2 to start a new worker in place of the killed one')
    const replacedAt = Date.now()
    const replacedMs = replacedAt - killedAt
    // The new process serves: fresh connections (round-robin across both workers) reach it and are all answered.
    const probe = accountedLoad(loadOptions(base, LOAD_SETS, { connections: 6 }))
    const newHeld = await until(() => connectionsHeld(replacement.pid, port), 10_000, `the new worker (pid ${replacement.pid}) to hold connections`)
    await sleep(1000)
    probe.instance.stop()
    load.instance.stop()
    const [run, probeRun] = await Promise.all([load.done, probe.done])
    console.log(`# SIGKILL of worker pid ${victim.pid} holding ${held} of the load's 10 connections (the other ${heldBySurvivor}): ` +
      `${run.failures.total} requests failed (${describeLoad(run)}); replaced by pid ${replacement.pid} in ${replacedMs} ms, ` +
      `which then held ${newHeld} new connections; probe on fresh connections: ${describeLoad(probeRun)}`)
    assert.ok(held >= 1, `the victim held connections of the load (${held})`)
    assert.equal(replacement.restarts, victim.restarts + 1, 'pm2 counted the restart')
    // The requests on the killed worker's own connections fail, each once: reset, or lost (the connection closed under
    // it without an error: whether the kernel sends RST or FIN depends on the moment). A request never answered
    // (stuck, or a timeout when the load ran on for longer than its 3 s timeout after it) may come on top: on a
    // connection its client opened again at that moment, which Node's cluster primary (pm2 runs on it) handed to the
    // worker as it died (nodejs/node#21746): at most one for each connection it held.
    const unanswered = run.failures.stuck + (run.failures.errors.timeout ?? 0)
    const own = run.failures.total - unanswered
    assert.deepEqual(Object.keys(run.failures.errors).filter((code) => code !== 'ECONNRESET' && code !== 'timeout'), [], 'the failures are resets, lost and unanswered requests only')
    assert.ok(own <= held, `${own} requests reset or lost, at most the ${held} on the killed worker's connections`)
    assert.ok(unanswered <= held, `${unanswered} requests never answered, at most one for each of the ${held} connections reopened as it died`)
    // A timeout fires 3 s after its request was sent: each was sent before the replacement was online, not after.
    for (const at of timeoutsAt) assert.ok(at - 3000 <= replacedAt, `a request sent ${at - 3000 - replacedAt} ms after the replacement was online went unanswered`)
    assert.deepEqual(run.failures.non2xx, {}, 'no answer other than 2xx: failures are lost connections only')
    assert.equal(probeRun.failures.total, 0, `fresh connections after the replacement: ${describeLoad(probeRun)}`)
    assert.equal(survivor.pid, (await workers(home)).find((w) => w.id === survivor.id).pid, 'the other worker kept running')
  })

  await t.test('a set file replaced under load: every worker serves the new tiles within the watch debounce', async () => {
    const swapPaths = ['swap', 'swap-pm'].flatMap((set) => COORDS.map(([z, x, y]) => `/${set}/${z}/${x}/${y}`))
    // The ETags of the old and of the new tiles (a strong ETag is a hash of the bytes and the coding: the same on
    // every worker), for the encoding the load asks.
    const etagsOf = async () => new Set(await Promise.all(swapPaths.map(async (p) => (await get(base + p)).headers.etag)))
    const oldEtags = await etagsOf()
    assert.equal(oldEtags.size, swapPaths.length)
    let replacedAt = Infinity
    const seen = new Map() // connection → { lastOld, firstNew }
    const load = accountedLoad(loadOptions(base, ['swap', 'swap-pm']), {
      onAnswer (connection, status, headers, at) {
        if (!seen.has(connection)) seen.set(connection, { lastOld: 0, firstNew: Infinity })
        const s = seen.get(connection)
        if (oldEtags.has(headers.etag)) s.lastOld = at
        else if (at >= replacedAt) s.firstNew = Math.min(s.firstNew, at)
      },
    })
    await sleep(1500)
    const byWorker = (await workers(home)).map((w) => connectionsHeld(w.pid, port))
    // As deploys do: write the new file beside the old, then rename it over (atomic).
    writeMbtiles(join(data, 'swap.mbtiles.tmp'), { tiles: versionedTiles(COORDS, 'swap', 2), metadata: { format: 'pbf', minzoom: '0', maxzoom: '4' } })
    writePmtiles(join(data, 'swap-pm.pmtiles.tmp'), { tiles: versionedTiles(COORDS, 'swap-pm', 2) })
    replacedAt = Date.now()
    renameSync(join(data, 'swap.mbtiles.tmp'), join(data, 'swap.mbtiles'))
    renameSync(join(data, 'swap-pm.pmtiles.tmp'), join(data, 'swap-pm.pmtiles'))
    await sleep(SWAP_BOUND_MS + 1000)
    load.instance.stop()
    const run = await load.done
    const newEtags = await etagsOf()
    const lastOld = Math.max(...[...seen.values()].map((s) => s.lastOld))
    console.log(`# swap: connections per worker ${JSON.stringify(byWorker)}; the last old tile was answered ${lastOld - replacedAt} ms after the rename ` +
      `(debounce ${WATCH_DEBOUNCE_MS} ms, bound ${SWAP_BOUND_MS} ms); load: ${describeLoad(run)}`)
    assert.ok(byWorker.every((n) => n >= 1), `both workers held connections of the load: ${byWorker}`)
    for (const e of newEtags) assert.ok(!oldEtags.has(e), 'every tile of both sets is the new one')
    assert.equal(seen.size, 10, 'every connection was answered')
    for (const [connection, s] of seen) {
      assert.ok(s.lastOld - replacedAt <= SWAP_BOUND_MS, `connection ${connection} got an old tile ${s.lastOld - replacedAt} ms after the rename`)
      assert.ok(s.firstNew < Infinity, `connection ${connection} got new tiles`)
    }
    assert.equal(run.failures.total, 0, `no errors and no non-2xx while replacing: ${describeLoad(run)}`)
    assert.deepEqual(gunzipSync((await get(`${base}/swap/3/1/2`)).body), makeMvt(3, 1, 2, { set: 'swap', version: 2 }))
  })

  await t.test('one scrape of /metrics, whichever worker answers it, sums every worker', async () => {
    const tileRequests = (text) => Number(/^tilecannon_requests_total\{route="tile",set="parks",status="2xx"\} (\d+)$/m.exec(text)?.[1] ?? 0)
    // A new connection each: either worker. Gzip asked, as Prometheus asks it (/metrics is compressed for it).
    const scrape = async () => {
      const res = await get(`${base}/metrics`)
      return (res.headers['content-encoding'] === 'gzip' ? gunzipSync(res.body) : res.body).toString()
    }
    await sleep(METRICS_INTERVAL_MS * 2) // the figures of the load before, written by every worker
    const before = tileRequests(await scrape())
    for (let i = 0; i < 20; i++) await get(`${base}/parks/0/0/0`) // a connection each: pm2 deals them out round-robin
    await sleep(METRICS_INTERVAL_MS * 2) // every worker has written its figures since
    const scrapes = await Promise.all(Array.from({ length: 4 }, scrape))
    for (const text of scrapes) {
      assert.match(text, /^tilecannon_cluster_workers 2$/m, 'both workers counted')
      assert.equal(tileRequests(text) - before, 20, 'the requests both workers answered, summed')
    }
  })
})

/**
 * A range-serving origin for a remote PMTiles archive whose tile reads (ranges in the tile data section) can be made
 * slow: the slow request of the shutdown test is in flight inside tile-cannon, waiting on this origin.
 */
async function slowOrigin (t, file, delayMs) {
  const dataOffset = Number(file.readBigUInt64LE(56))
  let slow = false
  let onSlowRead = null
  const server = createHttpServer((req, res) => {
    const m = /bytes=(\d+)-(\d+)/.exec(req.headers.range ?? '')
    const start = m ? Number(m[1]) : 0
    const end = m ? Math.min(Number(m[2]), file.length - 1) : file.length - 1
    const answer = () => {
      res.writeHead(m ? 206 : 200, { 'content-length': end - start + 1, ...(m ? { 'content-range': `bytes ${start}-${end}/${file.length}` } : {}) })
      res.end(file.subarray(start, end + 1))
    }
    if (slow && start >= dataOffset) {
      onSlowRead?.()
      setTimeout(answer, delayMs)
    } else {
      answer()
    }
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.after(() => server.close())
  return {
    url: `http://127.0.0.1:${server.address().port}/slow.pmtiles`,
    /** From now on tile reads take delayMs; resolves when the first such read has arrived. */
    slowDown () {
      slow = true
      return new Promise((resolve) => { onSlowRead = resolve })
    },
  }
}

/** Opens a TCP connection to the port: 'connected', or the error code (ECONNREFUSED once nothing listens). */
function tryConnect (port) {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1')
    socket.once('connect', () => { socket.destroy(); resolve('connected') })
    socket.once('error', (err) => resolve(err.code))
  })
}

const SLOW_MS = 2000 // how long the slow request waits on its origin
const EXIT_BOUND_MS = 5000 // after the slow request: closing every set and exiting

for (const signal of ['SIGTERM', 'SIGINT']) {
  test(`${signal} to one node server.js under load: stops accepting, finishes in-flight requests (a slow one too), exits 0`, async (t) => {
    const data = tempDir(t)
    writeMbtiles(join(data, 'roads.mbtiles'), { tiles: vectorTiles(COORDS), metadata: { format: 'pbf', minzoom: '0', maxzoom: '4' } })
    const elsewhere = tempDir(t)
    const origin = await slowOrigin(t, writePmtiles(join(elsewhere, 'slow.pmtiles'), { tiles: vectorTiles(COORDS) }), SLOW_MS)
    const port = await freePort()
    const base = `http://127.0.0.1:${port}`
    const child = spawn(process.execPath, [SERVER, '--port', String(port), '--host', '127.0.0.1', '--log-level', 'info', '--no-watch', data, origin.url], { stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    child.stdout.on('data', (d) => { output += d })
    child.stderr.on('data', (d) => { output += d })
    const exited = once(child, 'exit')
    t.after(() => { if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL') })
    await until(async () => (await get(`${base}/health`).catch(() => ({}))).status === 200, 15_000, 'the server to answer')
    assert.deepEqual(JSON.parse((await get(`${base}/list`)).body).sort(), ['roads', 'slow'])

    const load = accountedLoad(loadOptions(base, ['roads'], { connections: 8 }))
    await sleep(1000)
    const slowRead = origin.slowDown()
    let slowDone = false
    // Asked as a browser or a CDN asks: on a keep-alive connection, kept open after the answer.
    const keepAlive = new Agent({ keepAlive: true })
    t.after(() => keepAlive.destroy())
    const slowAnswer = get(`${base}/slow/3/1/2`, { agent: keepAlive }).finally(() => { slowDone = true })
    await Promise.race([slowRead, sleep(5000).then(() => assert.fail('the slow request did not reach its origin'))])

    const signalledAt = Date.now()
    child.kill(signal)
    // It stops accepting at once: a new connection is refused while the slow request is still in flight.
    await until(async () => (await tryConnect(port)) === 'ECONNREFUSED', 3000, 'new connections to be refused')
    const refusedWhileInFlight = !slowDone
    const refusedAfterMs = Date.now() - signalledAt
    // The load's connections are done by now (each had its last answer, or its connection refused): stopping it here
    // spares the machine a loop of refused reconnections.
    await sleep(300)
    load.instance.stop()
    const slow = await slowAnswer
    const slowAfterMs = Date.now() - signalledAt
    const [code, killedBy] = await exited
    const exitAfterMs = Date.now() - signalledAt
    const run = await load.done
    console.log(`# ${signal}: refused new connections after ${refusedAfterMs} ms, the slow request answered ${slow.status} after ${slowAfterMs} ms, ` +
      `exit ${code} after ${exitAfterMs} ms; load: ${describeLoad(run)}`)

    assert.ok(refusedWhileInFlight, 'new connections were refused while the slow request was still in flight')
    assert.equal(slow.status, 200, 'the request in flight when the signal arrived was answered')
    assert.deepEqual(gunzipSync(slow.body), makeMvt(3, 1, 2))
    assert.equal(killedBy, null, `not killed by a signal: ${output}`)
    assert.equal(code, 0, `exit code: ${output}`)
    assert.ok(exitAfterMs <= SLOW_MS + EXIT_BOUND_MS, `exited ${exitAfterMs} ms after ${signal}`)
    assert.match(output, new RegExp(`${signal}: finishing in-flight requests`))
    assert.match(output, /closed every set and resource; exiting/, 'every onClose hook ran (sets, pools, renderer) before the exit')
    // The load's connections: every request the server took was answered 200; afterwards only refusals.
    assert.deepEqual(run.failures.non2xx, {}, 'answers other than 2xx')
    for (const code of Object.keys(run.failures.errors)) assert.equal(code, 'ECONNREFUSED', `socket errors: ${JSON.stringify(run.failures.errors)}`)
    assert.equal(run.failures.lost, 0, 'requests lost on a connection closed under them')
    assert.equal(run.failures.stuck, 0, 'requests never answered')
  })
}

test('pm2 as a new user runs it: no TILE_CANNON_ARGS and no ./tiles serves the demo on TILE_CANNON_PORT; a config error (exit 2) is not restarted', { timeout: 90_000 }, async (t) => {
  const home = mkdtempSync(join(tmpdir(), 'tile-cannon-pm2-'))
  t.after(async () => {
    await pm2(home, ['kill']).catch(() => {})
    stopDaemon(home)
    rmSync(home, { recursive: true, force: true })
  })
  const port = await freePort()
  // The user's shell: no TILE_CANNON_ARGS, a port of their own (the checkout has no ./tiles).
  const env = { TILE_CANNON_ARGS: '', TILE_CANNON_INSTANCES: '1', TILE_CANNON_PORT: String(port), TILE_CANNON_HOST: '127.0.0.1' }
  await pm2(home, ['start', join(ROOT, 'ecosystem.config.cjs')], env)
  await until(async () => (await get(`http://127.0.0.1:${port}/health`).catch(() => ({}))).status === 200, 20_000, 'the demo to answer on TILE_CANNON_PORT')
  assert.deepEqual(JSON.parse((await get(`http://127.0.0.1:${port}/list`)).body), ['countries'])
  await pm2(home, ['delete', 'tile-cannon'])

  await pm2(home, ['start', join(ROOT, 'ecosystem.config.cjs')], { ...env, TILE_CANNON_ARGS: '--cache-mb=-1' })
  await until(async () => (await workers(home)).every((w) => w.status === 'stopped'), 20_000, 'the worker to stop after exit 2')
  await sleep(1500)
  assert.deepEqual((await workers(home)).map((w) => [w.status, w.restarts]), [['stopped', 0]], 'not restarted')
})

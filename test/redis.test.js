// The shared tile cache against a real redis-server started here: replicas share made tiles, and Redis being down,
// slow or back never fails a request.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { once } from 'node:events'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { makeApp, needs } from './helpers/app.js'
import { makeMvt, pyramid, tempDir, vectorTiles, writeMbtiles } from './helpers/data.js'
import { gunzipSync } from 'node:zlib'
import { freePort } from '../bench/servers.js'

const HAVE_REDIS = spawnSync('redis-server', ['--version']).status === 0
const REDIS_MISSING = 'redis-server is not installed (Debian: redis-server)'

/** A throwaway redis-server on 127.0.0.1 (no persistence); `stop()` kills it, `start()` brings it back on its port. */
async function startRedis (t, port, extra = []) {
  port ??= await freePort()
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--enable-debug-command', 'yes', ...extra], { stdio: 'ignore' })
  t.after(() => child.kill('SIGKILL'))
  for (let i = 0; i < 100; i++) {
    if (/PONG|NOAUTH/.test(spawnSync('redis-cli', ['-p', String(port), 'ping']).stdout?.toString())) break
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  return {
    port,
    url: `redis://127.0.0.1:${port}/0`,
    cli: (...args) => spawnSync('redis-cli', ['-p', String(port), ...args], { encoding: 'utf8' }).stdout.trim(),
    async stop () {
      child.kill('SIGKILL')
      await once(child, 'exit')
    },
  }
}

/** Two replicas (apps with caches of their own) serving the same file, sharing one Redis for MBTiles tiles. */
async function replicas (t, redis, cache = {}) {
  const dir = tempDir(t)
  writeMbtiles(join(dir, 'roads.mbtiles'), { tiles: vectorTiles(pyramid(0, 3)) })
  const options = { paths: [dir], cache: { redis: redis.url, kinds: ['mbtiles'], ...cache } }
  const a = await makeApp(t, options)
  const b = await makeApp(t, options)
  for (const app of [a, b]) await untilUp(app)
  return [a, b]
}

async function untilUp (app, up = true) {
  const deadline = Date.now() + 10_000
  while (Date.now() < deadline) {
    if ((app.sharedCache.state.state === 'up') === up) return
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error(`the shared cache did not become ${up ? 'up' : 'down'}`)
}

/** Waits until Redis holds `count` keys matching `pattern` (stores are not awaited by the requests that make them). */
async function stored (redis, pattern, count = 1) {
  const deadline = Date.now() + 5000
  let keys = []
  do {
    keys = redis.cli('--scan', '--pattern', pattern).split('\n').filter(Boolean)
    if (keys.length >= count) return keys
    await new Promise((resolve) => setTimeout(resolve, 20))
  } while (Date.now() < deadline)
  return keys
}

const reads = (app) => app.pipeline.reads.get('mbtiles')?.count ?? 0
const tile = (app, z, x, y) => app.inject({ url: `/roads/${z}/${x}/${y}`, headers: { 'accept-encoding': 'gzip' } })

test('a tile one replica made is served by another from Redis, byte for byte, without reading its source', async (t) => {
  if (!needs(t, HAVE_REDIS, REDIS_MISSING)) return
  const redis = await startRedis(t)
  const [a, b] = await replicas(t, redis)
  const made = await tile(a, 2, 1, 1)
  assert.equal(made.statusCode, 200)
  assert.equal(reads(a), 1)
  await stored(redis, 'tc:roads:*')
  const shared = await tile(b, 2, 1, 1)
  assert.equal(shared.statusCode, 200)
  assert.deepEqual(shared.rawPayload, made.rawPayload)
  assert.equal(shared.headers.etag, made.headers.etag, 'the same ETag on every replica: a CDN sees one tile')
  assert.deepEqual(gunzipSync(shared.rawPayload), makeMvt(2, 1, 1))
  assert.equal(reads(b), 0, 'replica b never read its file')
  // Absent tiles are shared too (as such).
  assert.equal((await tile(a, 2, 3, 3)).statusCode, 204)
  await stored(redis, 'tc:roads:*', 2)
  assert.equal((await tile(b, 2, 3, 3)).statusCode, 204)
  assert.equal(reads(b), 0)
  const keys = await stored(redis, 'tc:roads:*', 2)
  assert.equal(keys.length, 2)
  assert.match(keys[0], /^tc:roads:\d+-\d+:2\/(1\/1|3\/3)$/, 'set, revision, z/x/y')
  const ttl = Number(redis.cli('pttl', keys[0]))
  assert.ok(ttl > 0 && ttl <= 86_400_000, 'stored with a lifetime')
  const metrics = (await b.inject({ url: '/metrics' })).payload
  assert.match(metrics, /tilecannon_shared_cache_hits_total 2/)
  assert.match(metrics, /tilecannon_shared_cache_up 1/)
  const ready = (await b.inject({ url: '/ready' })).json()
  assert.deepEqual(ready.backends.find((x) => x.name === 'redis'), { name: 'redis', kind: 'cache', required: false, state: 'up' })

  // A replica told its data changed (a PostGIS NOTIFY, SIGHUP) ignores what was shared before that moment.
  b.catalog.registry.expire(b.catalog.get('roads'))
  assert.equal((await tile(b, 2, 1, 1)).statusCode, 200)
  assert.equal(reads(b), 1, 'made again, not taken from Redis')
})

test('Redis down, slow or back: every request is answered, made locally meanwhile', async (t) => {
  if (!needs(t, HAVE_REDIS, REDIS_MISSING)) return
  const redis = await startRedis(t)
  const [a] = await replicas(t, redis, { timeoutMs: 50 })

  // Slow: Redis blocked for 1.5 s; a lookup gives up after 50 ms and the tile is made here.
  spawn('redis-cli', ['-p', String(redis.port), 'debug', 'sleep', '1.5'], { stdio: 'ignore' })
  await new Promise((resolve) => setTimeout(resolve, 100))
  let started = performance.now()
  assert.equal((await tile(a, 1, 0, 0)).statusCode, 200)
  assert.ok(performance.now() - started < 1000, `a slow Redis costs at most its timeout (took ${Math.round(performance.now() - started)} ms)`)
  assert.equal(reads(a), 1)
  assert.match((await a.inject({ url: '/metrics' })).payload, /tilecannon_shared_cache_errors_total [1-9]/)
  await new Promise((resolve) => setTimeout(resolve, 1500))

  // Down: killed mid-run.
  await redis.stop()
  await untilUp(a, false)
  started = performance.now()
  for (const [z, x, y] of [[1, 1, 0], [1, 1, 1], [2, 0, 0]]) assert.equal((await tile(a, z, x, y)).statusCode, 200)
  assert.ok(performance.now() - started < 1000, 'no waiting on a Redis that is down')
  const ready = await a.inject({ url: '/ready' })
  assert.equal(ready.statusCode, 200, 'a replica without its shared cache still serves: not drained')
  assert.equal(ready.json().backends.find((x) => x.name === 'redis').state, 'down')
  assert.match((await a.inject({ url: '/metrics' })).payload, /tilecannon_shared_cache_up 0/)

  // Back: it reconnects by itself and tiles are shared again.
  const again = await startRedis(t, redis.port)
  await untilUp(a)
  assert.equal((await tile(a, 3, 1, 1)).statusCode, 200)
  assert.match((await stored(again, 'tc:roads:*'))[0], /:3\/1\/1$/, 'stored again once Redis is back')
})

test('a hung Redis (connected, not answering) is rested after a few lookups in a row: the next tiles do not wait on it, and it is asked again', async (t) => {
  if (!needs(t, HAVE_REDIS, REDIS_MISSING)) return
  const redis = await startRedis(t)
  const [a] = await replicas(t, redis, { timeoutMs: 50 })
  spawn('redis-cli', ['-p', String(redis.port), 'debug', 'sleep', '2'], { stdio: 'ignore' })
  await new Promise((resolve) => setTimeout(resolve, 100))
  // Tiles not asked before, each a lookup (those the file has not too: 204, as shared as the rest).
  const cells = Array.from({ length: 64 }, (_, i) => [3, i % 8, i >> 3])
  const answered = async ([z, x, y]) => assert.ok([200, 204].includes((await tile(a, z, x, y)).statusCode))
  for (const cell of cells.slice(0, 5)) await answered(cell)
  assert.equal(a.sharedCache.state.state, 'down')
  assert.match(a.sharedCache.state.reason, /not answering in time/)
  const started = performance.now()
  for (const cell of cells.slice(5, 10)) await answered(cell)
  assert.ok(performance.now() - started < 200, `rested: not asked, no 50 ms each (took ${Math.round(performance.now() - started)} ms)`)
  // Its rest over (5 s; its sleep of 2 s too): asked again, and answering.
  const deadline = Date.now() + 10_000
  while (a.sharedCache.state.state !== 'up' && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 200))
  assert.equal(a.sharedCache.state.state, 'up', 'asked again once its rest is over')
  const errors = async () => Number(/tilecannon_shared_cache_errors_total (\d+)/.exec((await a.inject({ url: '/metrics' })).payload)[1])
  const before = await errors()
  for (const cell of cells.slice(10, 14)) await answered(cell)
  assert.equal(await errors(), before, 'and answering: no lookup failed')
  assert.equal(a.sharedCache.state.state, 'up')
})

test('a Redis database number the server has not (redis://…/99) is said, and the shared cache not used: never db 0 instead', async (t) => {
  if (!needs(t, HAVE_REDIS, REDIS_MISSING)) return
  const redis = await startRedis(t)
  const dir = tempDir(t)
  writeMbtiles(join(dir, 'roads.mbtiles'), { tiles: vectorTiles(pyramid(0, 3)) })
  const app = await makeApp(t, { paths: [dir], cache: { redis: redis.url.replace(/\/0$/, '/99'), kinds: ['mbtiles'] } })
  const deadline = Date.now() + 5000
  while (!/DB index/.test(app.sharedCache.state.reason ?? '') && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50))
  assert.equal(app.sharedCache.state.state, 'down')
  assert.match(app.sharedCache.state.reason, /DB index is out of range: check the database number in cache\.redis/)
  assert.equal((await tile(app, 1, 0, 0)).statusCode, 200)
  assert.equal(redis.cli('dbsize'), '0', 'nothing written to db 0')
})

test('a refusal at connect (a database number it has not, a wrong or missing password, no Redis at all there) is one clear line, naming what to check', async (t) => {
  if (!needs(t, HAVE_REDIS, REDIS_MISSING)) return
  const redis = await startRedis(t)
  const locked = await startRedis(t, undefined, ['--requirepass', 'sekrit'])
  const http = createServer((socket) => socket.on('data', () => socket.end('HTTP/1.1 400 Bad Request\r\n\r\n')))
  http.listen(0, '127.0.0.1')
  await once(http, 'listening')
  t.after(() => http.close())
  const dir = tempDir(t)
  writeMbtiles(join(dir, 'roads.mbtiles'), { tiles: vectorTiles(pyramid(0, 1)) })
  const cases = [
    [redis.url.replace(/\/0$/, '/99'), /^ERR DB index is out of range: check the database number in cache\.redis$/],
    [locked.url.replace('//', '//:wrong@'), /^Redis refused us \(WRONGPASS\): check the user and password in cache\.redis$/],
    [locked.url, /^Redis refused us \(NOAUTH\): check the user and password in cache\.redis$/],
    [`redis://127.0.0.1:${http.address().port}/0`, /^the server there does not speak the Redis protocol: check the host and port in cache\.redis$/],
  ]
  await Promise.all(cases.map(async ([url, reason]) => {
    const logs = []
    const app = await makeApp(t, { paths: [dir], cache: { redis: url, kinds: ['mbtiles'] } }, { logs })
    const said = () => logs.filter((l) => /redis/.test(l.msg))
    const deadline = Date.now() + 5000
    while (said().length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50))
    await new Promise((resolve) => setTimeout(resolve, 1000)) // a few reconnects (200 ms, 400 ms…): none says it again
    assert.equal(said().length, 1, `${url}: ${JSON.stringify(said())}`)
    assert.match(said()[0].reason, reason)
    assert.equal(app.sharedCache.state.state, 'down')
    assert.match(app.sharedCache.state.reason, reason)
    assert.equal((await tile(app, 1, 0, 0)).statusCode, 200)
  }))
})

test('tiles over the size cap, and kinds not configured, are not sent to Redis', async (t) => {
  if (!needs(t, HAVE_REDIS, REDIS_MISSING)) return
  const redis = await startRedis(t)
  const [a] = await replicas(t, redis, { maxEntryKB: 0.01 }) // 10 bytes: every tile is larger
  assert.equal((await tile(a, 0, 0, 0)).statusCode, 200)
  assert.equal((await tile(a, 2, 3, 3)).statusCode, 204) // an absent tile is tiny: shared
  assert.deepEqual((await stored(redis, 'tc:*')).map((k) => k.split(':').at(-1)), ['2/3/3'])

  const dir = tempDir(t)
  writeMbtiles(join(dir, 'other.mbtiles'), { tiles: vectorTiles(pyramid(0, 1)) })
  const plain = await makeApp(t, { paths: [dir], cache: { redis: redis.url } }) // default kinds: made tiles only
  await untilUp(plain)
  assert.equal((await plain.inject({ url: '/other/0/0/0' })).statusCode, 200)
  await new Promise((resolve) => setTimeout(resolve, 200)) // what a store would take, many times over
  assert.equal(redis.cli('--scan', '--pattern', 'tc:other:*'), '', 'stored tiles are read locally')
})

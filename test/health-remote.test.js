// /ready and remote sets, opened or not: a store down is a backend down (until they open); one refusing us is not.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { createServer } from 'node:http'
import { join } from 'node:path'
import { makeApp } from './helpers/app.js'
import { pyramid, tempDir, vectorTiles, writePmtiles } from './helpers/data.js'

/** A real origin on 127.0.0.1: `answer(path)` → 'down' (500), 'denied' (403), 'up' (the archive by ranges) or 'junk'. */
async function origin (t, file, answer) {
  const server = createServer((req, res) => {
    const state = answer(req.url)
    if (state === 'down') { res.writeHead(500); res.end(); return }
    if (state === 'denied') { res.writeHead(403); res.end(); return }
    const body = state === 'junk' ? Buffer.alloc(file.length, 'x') : file
    const [, a, b] = /bytes=(\d+)-(\d+)/.exec(req.headers.range)
    const [start, end] = [Number(a), Math.min(Number(b), body.length - 1)]
    res.writeHead(206, { 'content-range': `bytes ${start}-${end}/${body.length}`, 'content-length': end - start + 1, etag: '"v1"' })
    res.end(body.subarray(start, end + 1))
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.after(() => server.close())
  return `http://127.0.0.1:${server.address().port}`
}

test('/ready is 503 while a remote set cannot be opened because its store is down, until it opens', async (t) => {
  const file = writePmtiles(join(tempDir(t), 'x.pmtiles'), { tiles: vectorTiles(pyramid(0, 2)) })
  let state = 'down'
  const base = await origin(t, file, (path) => (path.startsWith('/junk') ? 'junk' : path.startsWith('/denied') ? 'denied' : state))
  const app = await makeApp(t, { paths: [`${base}/flaky.pmtiles`, `${base}/junk.pmtiles`], remote: { retryMs: 100 } })
  let res = await app.inject({ url: '/ready' })
  assert.equal(res.statusCode, 503, 'not ready while the store does not answer')
  const flaky = res.json().backends.find((b) => b.name === 'set flaky')
  assert.equal(flaky?.state, 'down')
  assert.match(flaky.reason, /the remote store did not answer \(answered 500/)
  assert.ok(!res.payload.includes('127.0.0.1'), 'the store is not named')
  assert.equal(res.json().backends.find((b) => b.name === 'set junk'), undefined, 'not a PMTiles archive: no backend down')

  state = 'up'
  const deadline = Date.now() + 5000
  do {
    await new Promise((resolve) => setTimeout(resolve, 1100)) // (checks run at most once a second)
    res = await app.inject({ url: '/ready' })
  } while (res.statusCode !== 200 && Date.now() < deadline)
  assert.equal(res.statusCode, 200, 'ready once the set opened')
  assert.equal((await app.inject({ url: '/flaky/0/0/0' })).statusCode, 200)
})

test('/ready stays 200 while the store refuses a remote set (403: wrong credentials), which /health lists', async (t) => {
  const file = writePmtiles(join(tempDir(t), 'x.pmtiles'), { tiles: vectorTiles(pyramid(0, 1)) })
  const base = await origin(t, file, (path) => (path.startsWith('/denied') ? 'denied' : 'up'))
  const app = await makeApp(t, { paths: [`${base}/denied.pmtiles`, `${base}/fine.pmtiles`] })
  const res = await app.inject({ url: '/ready' })
  assert.equal(res.statusCode, 200, 'a config error: draining every replica would not fix it')
  assert.equal(res.json().backends.find((b) => b.name === 'set denied'), undefined)
  const { unavailable } = (await app.inject({ url: '/health' })).json()
  assert.equal(unavailable.length, 1)
  assert.equal(unavailable[0].id, 'denied')
  assert.match(unavailable[0].reason, /access denied by the remote store \(403\)/)
})

test('/ready of an open remote set: 200 while its store refuses us (403), shown unrequired with why; 503 once it does not answer', async (t) => {
  const file = writePmtiles(join(tempDir(t), 'x.pmtiles'), { tiles: vectorTiles(pyramid(0, 1)) })
  let state = 'up'
  const base = await origin(t, file, () => state)
  const app = await makeApp(t, { paths: [`${base}/open.pmtiles`], cacheMB: 0 })
  assert.equal((await app.inject({ url: '/ready' })).statusCode, 200)
  const later = () => new Promise((resolve) => setTimeout(resolve, 1100)) // (checks run at most once a second)

  state = 'denied' // credentials revoked or rotated under a running service: every replica alike
  await later()
  let res = await app.inject({ url: '/ready' })
  assert.equal(res.statusCode, 200, 'a config error: draining every replica would not fix it')
  const refused = res.json().backends.find((b) => b.name === 'set open')
  assert.equal(refused?.state, 'down')
  assert.equal(refused.required, false)
  assert.match(refused.reason, /access denied by the remote store \(403\)/)
  assert.ok(!res.payload.includes('127.0.0.1'), 'the store is not named')
  assert.equal((await app.inject({ url: '/open/0/0/0' })).statusCode, 503, 'its tiles cannot be read (the reason logged once)')

  state = 'down'
  await later()
  res = await app.inject({ url: '/ready' })
  assert.equal(res.statusCode, 503, 'a store that does not answer is a backend down')
  const down = res.json().backends.find((b) => b.name === 'set open')
  assert.equal(down?.required, undefined)
  assert.match(down.reason, /the remote store did not answer \(answered 500/)
})

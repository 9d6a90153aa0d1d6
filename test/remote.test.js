// Remote PMTiles over HTTP range requests, against a real range-serving HTTP server on 127.0.0.1.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { once } from 'node:events'
import { createServer } from 'node:http'
import { gunzipSync } from 'node:zlib'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import pino from 'pino'
import { buildApp } from '../lib/app.js'
import { loadConfig } from '../lib/config.js'
import { freePort } from '../bench/servers.js'
import { makeApp } from './helpers/app.js'
import { rangeServer } from './helpers/http.js'
import { makeMvt, pyramid, tempDir, vectorTiles, writePmtiles } from './helpers/data.js'

test('a remote PMTiles URL is served through range requests, with leaf directories', async (t) => {
  const dir = tempDir(t)
  const file = writePmtiles(join(dir, 'x.pmtiles'), { tiles: vectorTiles(pyramid(0, 5, 4)), leafSize: 10, metadata: { name: 'Remote' } })
  const remote = await rangeServer(t, file)
  const app = await makeApp(t, { paths: [remote.url] })
  assert.deepEqual((await app.inject({ url: '/list' })).json(), ['remote'])
  assert.equal((await app.inject({ url: '/remote.json' })).json().name, 'Remote')
  for (const [z, x, y] of [[0, 0, 0], [3, 2, 1], [5, 3, 3]]) {
    const res = await app.inject({ url: `/remote.pmtiles/${z}/${x}/${y}.mvt` })
    assert.equal(res.statusCode, 200)
    assert.deepEqual(res.rawPayload, makeMvt(z, x, y))
  }
  assert.equal((await app.inject({ url: '/remote/5/30/30' })).statusCode, 204)
  assert.ok(remote.ranges.every(([s, e]) => e - s < file.length), 'only ranges were read, never the whole file')
  const before = remote.ranges.length
  await app.inject({ url: '/remote/3/2/1' })
  assert.equal(remote.ranges.length, before, 'a cached tile reads nothing')

  await app.catalog.reload()
  assert.deepEqual((await app.inject({ url: '/list' })).json(), ['remote'], 'a reload keeps remote sets')
  assert.equal((await app.inject({ url: '/remote/5/3/3' })).statusCode, 200)

  remote.down()
  const res = await app.inject({ url: '/remote/4/0/1' })
  assert.equal(res.statusCode, 503, 'remote errors are 503 for that set')
  assert.ok(!res.payload.includes('127.0.0.1'), 'the backend URL is not leaked')
  assert.deepEqual(gunzipSync(vectorTiles([[0, 0, 0]])[0].data), makeMvt(0, 0, 0))
})

test('a store answering less of a range than asked (a CDN\'s pieces) is read on until the range is whole', async (t) => {
  const dir = tempDir(t)
  // Tiles of 3 KB that do not compress, so a tile's own read comes in pieces too.
  const tiles = pyramid(0, 3).map(([z, x, y]) => ({ z, x, y, data: makeMvt(z, x, y, { pad: randomBytes(1500).toString('hex') }) }))
  const file = writePmtiles(join(dir, 'x.pmtiles'), { tiles, tileCompression: 'none', leafSize: 10, metadata: { name: 'Pieces' } })
  const remote = await rangeServer(t, file, 'pieces.pmtiles', { piece: 1100 })
  const app = await makeApp(t, { paths: [remote.url] })
  assert.equal((await app.inject({ url: '/pieces.json' })).json().name, 'Pieces')
  for (const { z, x, y, data } of tiles.filter((_, i) => i % 7 === 0)) {
    const res = await app.inject({ url: `/pieces/${z}/${x}/${y}.mvt` })
    assert.equal(res.statusCode, 200, res.body)
    assert.deepEqual(res.rawPayload, data)
  }
  assert.ok(remote.ranges.some(([s, e]) => e - s + 1 === 1100), 'answered in pieces')
})

test('an unreachable remote archive is unavailable, not fatal; tried again, it is logged unavailable once', async (t) => {
  const lines = []
  const stream = new Writable({ write (chunk, encoding, done) { lines.push(JSON.parse(chunk)); done() } })
  const closed = await freePort() // nothing listens there
  const { config } = loadConfig({ overrides: { paths: [`http://127.0.0.1:${closed}/nothing.pmtiles`], watch: false, demo: false, logLevel: 'info', remote: { retryMs: 50 } } })
  const app = await buildApp(config, { loggerInstance: pino({ level: 'info' }, stream) })
  t.after(() => app.close())
  assert.deepEqual((await app.inject({ url: '/list' })).json(), [])
  assert.equal((await app.inject({ url: '/nothing/0/0/0' })).statusCode, 503)
  await new Promise((resolve) => setTimeout(resolve, 2500)) // several tries (each one tried 4 times)
  assert.equal(lines.filter((l) => l.msg === 'tileset unavailable').length, 1, 'once per set and reason, not per try')
})

test('a store refusing the first range of an object that is not empty (416) is said so, not taken for an empty object', async (t) => {
  const server = createServer((req, res) => {
    const empty = req.url.startsWith('/empty')
    res.writeHead(416, { 'content-range': `bytes */${empty ? 0 : 5000}` })
    res.end()
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.after(() => server.close())
  const base = `http://127.0.0.1:${server.address().port}`
  const app = await makeApp(t, { paths: [`${base}/refusing.pmtiles`, `${base}/empty.pmtiles`] })
  const health = (await app.inject({ url: '/health' })).json()
  const reasons = Object.fromEntries(health.unavailable.map((u) => [u.id, u.reason]))
  assert.match(reasons.refusing, /the remote store refused the first range of the object \(416\)/)
  assert.match(reasons.empty, /the remote object is empty/)
})

test('a store whose servers give one object different ETags (two nodes behind one name) is compared by size after a few flips, and its set serves', async (t) => {
  const dir = tempDir(t)
  const tiles = pyramid(0, 4, 4).map(([z, x, y]) => ({ z, x, y, data: makeMvt(z, x, y, { pad: randomBytes(200).toString('hex') }) }))
  const file = writePmtiles(join(dir, 'x.pmtiles'), { tiles, tileCompression: 'none', leafSize: 10 })
  const remote = await rangeServer(t, file, 'nodes.pmtiles', { nodes: 2 })
  const lines = []
  const stream = new Writable({ write (chunk, encoding, done) { lines.push(JSON.parse(chunk)); done() } })
  const { config } = loadConfig({ overrides: { paths: [remote.url], watch: false, demo: false, logLevel: 'info', cacheMB: 0 } })
  const app = await buildApp(config, { loggerInstance: pino({ level: 'info' }, stream) })
  t.after(() => app.close())
  // Each flip re-opens the set (503 meanwhile); after 3 it is compared by size, and every tile answers.
  const deadline = Date.now() + 10_000
  let i = 0
  let streak = 0
  while (streak < 20 && Date.now() < deadline) {
    const { z, x, y, data } = tiles[i++ % tiles.length]
    const res = await app.inject({ url: `/nodes/${z}/${x}/${y}.mvt` })
    if (res.statusCode === 200) assert.deepEqual(res.rawPayload, data, 'never another tile')
    streak = res.statusCode === 200 ? streak + 1 : 0
    if (res.statusCode !== 200) await new Promise((resolve) => setTimeout(resolve, 20))
  }
  assert.equal(streak, 20, 'served, tile after tile')
  assert.equal(lines.filter((l) => /compared by size from now on/.test(l.msg)).length, 1, 'said once in the log')
})

test('an object replaced by one of the same size moments after its set opened is read anew, never mixed with the old (not taken for servers that disagree)', async (t) => {
  const [one, two] = sameSizeVersions(tempDir(t))
  let current = one
  let etag = '"a"'
  const server = createServer((req, res) => {
    const [, a, b] = /bytes=(\d+)-(\d+)/.exec(req.headers.range)
    if (req.headers['if-match'] !== undefined && req.headers['if-match'] !== etag) { res.writeHead(412); res.end(); return }
    const [start, end] = [Number(a), Math.min(Number(b), current.file.length - 1)]
    res.writeHead(206, { 'content-range': `bytes ${start}-${end}/${current.file.length}`, 'content-length': end - start + 1, etag })
    res.end(current.file.subarray(start, end + 1))
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.after(() => server.close())
  const app = await makeApp(t, { paths: [`http://127.0.0.1:${server.address().port}/same.pmtiles`], cacheMB: 0 })
  const { z, x, y } = one.tiles[4]
  assert.deepEqual((await app.inject({ url: `/same/${z}/${x}/${y}.mvt` })).rawPayload, one.tiles[4].data)
  current = two
  etag = '"b"'
  let res
  for (let i = 0; i < 100; i++) {
    res = await app.inject({ url: `/same/${z}/${x}/${y}.mvt` })
    if (res.statusCode === 200) break
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  assert.equal(res.statusCode, 200)
  assert.deepEqual(res.rawPayload, two.tiles[4].data, 'the new object\'s tile, read where its directory says')
  for (const tile of two.tiles) assert.deepEqual((await app.inject({ url: `/same/${tile.z}/${tile.x}/${tile.y}.mvt` })).rawPayload, tile.data)
})

test('an origin that ignores Range (200, the whole object) serves a small archive; a larger one is refused, saying why', async (t) => {
  const dir = tempDir(t)
  const small = vectorTiles(pyramid(0, 2))
  const files = {
    '/small.pmtiles': writePmtiles(join(dir, 'small.pmtiles'), { tiles: small, metadata: { name: 'Small' } }),
    '/large.pmtiles': writePmtiles(join(dir, 'large.pmtiles'), { tiles: pyramid(0, 3).map(([z, x, y]) => ({ z, x, y, data: randomBytes(20_000) })), tileCompression: 'none' }),
  }
  assert.ok(files['/small.pmtiles'].length < 64 * 1024 && files['/large.pmtiles'].length > 64 * 1024)
  const server = createServer((req, res) => {
    const file = files[req.url]
    res.writeHead(200, { 'content-length': file.length, etag: '"v1"' })
    res.end(file)
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.after(() => server.close())
  const base = `http://127.0.0.1:${server.address().port}`
  const app = await makeApp(t, { paths: [`${base}/small.pmtiles`, `${base}/large.pmtiles`] })
  assert.equal((await app.inject({ url: '/small.json' })).json().name, 'Small')
  for (const { z, x, y, data } of small) {
    const res = await app.inject({ url: `/small/${z}/${x}/${y}.mvt` })
    assert.equal(res.statusCode, 200)
    assert.deepEqual(res.rawPayload, gunzipSync(data))
  }
  const large = (await app.inject({ url: '/health' })).json().unavailable.find((u) => u.id === 'large')
  assert.match(large.reason, /does not answer range requests \(it sends the whole object, longer than the range asked\)/)
})

test('a URL with user:password@ is read with HTTP Basic auth, and the password shows nowhere', async (t) => {
  const dir = tempDir(t)
  const tiles = vectorTiles(pyramid(0, 2))
  const file = writePmtiles(join(dir, 'x.pmtiles'), { tiles, metadata: { name: 'Guarded' } })
  const expected = `Basic ${Buffer.from('reader:s3cr3t@x').toString('base64')}`
  const server = createServer((req, res) => {
    if (req.headers.authorization !== expected) { res.writeHead(401, { 'www-authenticate': 'Basic realm="tiles"' }); res.end(); return }
    const [, a, b] = /bytes=(\d+)-(\d+)/.exec(req.headers.range)
    const [start, end] = [Number(a), Math.min(Number(b), file.length - 1)]
    res.writeHead(206, { 'content-range': `bytes ${start}-${end}/${file.length}`, 'content-length': end - start + 1, etag: '"v1"' })
    res.end(file.subarray(start, end + 1))
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.after(() => server.close())
  const logs = []
  const app = await makeApp(t, { paths: [`http://reader:s3cr3t%40x@127.0.0.1:${server.address().port}/guarded.pmtiles`] }, { logs })
  assert.equal((await app.inject({ url: '/guarded.json' })).json().name, 'Guarded')
  const res = await app.inject({ url: '/guarded/2/1/1.mvt' })
  assert.equal(res.statusCode, 200)
  assert.deepEqual(res.rawPayload, gunzipSync(tiles.find((tile) => tile.z === 2 && tile.x === 1 && tile.y === 1).data))
  for (const url of ['/health', '/ready', '/guarded.json', '/catalog', '/list']) assert.ok(!(await app.inject({ url })).payload.includes('s3cr3t'), url)
  assert.ok(!JSON.stringify(logs).includes('s3cr3t'), 'never logged')
})

test('an object with no ETag and no Last-Modified replaced by one of the same size is re-opened once revalidateMs has passed: its tiles are the new ones, not old directories over new bytes', async (t) => {
  const [one, two] = sameSizeVersions(tempDir(t))
  let current = one
  const server = createServer((req, res) => { // no validator at all
    const [, a, b] = /bytes=(\d+)-(\d+)/.exec(req.headers.range)
    const [start, end] = [Number(a), Math.min(Number(b), current.file.length - 1)]
    res.writeHead(206, { 'content-range': `bytes ${start}-${end}/${current.file.length}`, 'content-length': end - start + 1 })
    res.end(current.file.subarray(start, end + 1))
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.after(() => server.close())
  const app = await makeApp(t, { paths: [`http://127.0.0.1:${server.address().port}/plain.pmtiles`], cacheMB: 0, remote: { revalidateMs: 200 } })
  const { z, x, y } = one.tiles[4]
  assert.deepEqual((await app.inject({ url: `/plain/${z}/${x}/${y}.mvt` })).rawPayload, one.tiles[4].data)
  current = two
  const deadline = Date.now() + 3000
  let res
  do {
    await new Promise((resolve) => setTimeout(resolve, 20))
    res = await app.inject({ url: `/plain/${z}/${x}/${y}.mvt` })
    // (Until it is revalidated, nothing tells it changed: with no validator, a read is bytes at an offset.)
    if (res.statusCode === 200 && res.rawPayload.equals(two.tiles[4].data)) break
  } while (Date.now() < deadline)
  assert.equal(res.statusCode, 200)
  assert.deepEqual(res.rawPayload, two.tiles[4].data, 'the new object\'s tile, read where its directory says')
  for (const tile of two.tiles) assert.deepEqual((await app.inject({ url: `/plain/${tile.z}/${tile.x}/${tile.y}.mvt` })).rawPayload, tile.data)
})

/**
 * Two archives of one size written in `dir` whose tiles lie elsewhere: tile 3 is 100 bytes longer in the second, tile
 * 4 as much shorter. → [{ tiles, file }, { tiles, file }]
 */
function sameSizeVersions (dir) {
  const version = (n, shift) => {
    const tiles = pyramid(0, 2).map(([z, x, y], i) => ({ z, x, y, data: makeMvt(z, x, y, { pad: 'x'.repeat(600 + (i === 3 ? shift : i === 4 ? -shift : 0)) + n }) }))
    return { tiles, file: writePmtiles(join(dir, `v${n}.pmtiles`), { tiles, tileCompression: 'none', internalCompression: 'none' }) }
  }
  const versions = [version(1, 0), version(2, 100)]
  assert.equal(versions[0].file.length, versions[1].file.length, 'the same size')
  return versions
}

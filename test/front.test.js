// The tile front (routes/tiles.js tileFront): tiles answered over real HTTP before Fastify must be exactly the answers
// the Fastify route gives (inject() goes through Fastify only), for every kind of request a client sends.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { request } from 'node:http'
import { execFileSync } from 'node:child_process'
import { renameSync } from 'node:fs'
import { join } from 'node:path'
import { makeApp } from './helpers/app.js'
import { PNG, makeMvt, pyramid, tempDir, vectorTiles, writeMbtiles, writePmtiles } from './helpers/data.js'

const WIRE_ONLY = new Set(['date', 'connection', 'keep-alive', 'transfer-encoding'])

/** One request over HTTP as sent on the wire (no decoding): { status, headers, body }. */
const get = (port, method, path, headers = {}) => new Promise((resolve, reject) => {
  request({ host: '127.0.0.1', port, method, path, headers }, (res) => {
    const chunks = []
    res.on('data', (c) => chunks.push(c))
    res.on('end', () => resolve({ status: res.statusCode, headers: comparable(res.headers), body: Buffer.concat(chunks) }))
  }).on('error', reject).end()
})

function comparable (headers) {
  const out = {}
  for (const [k, v] of Object.entries(headers)) if (!WIRE_ONLY.has(k)) out[k] = v
  return out
}

async function serve (t, overrides = {}) {
  const dir = tempDir(t)
  writeMbtiles(join(dir, 'roads.mbtiles'), { tiles: vectorTiles(pyramid(0, 3, 1)), metadata: { format: 'pbf', minzoom: '0', maxzoom: '3' } })
  writeMbtiles(join(dir, 'photo.mbtiles'), { tiles: [{ z: 0, x: 0, y: 0, data: PNG }, { z: 1, x: 0, y: 0, data: PNG }], metadata: { format: 'png' } })
  // Raw MVT: gzipped per request; one tile big enough to be gzipped off the event loop (lib/encoding.js).
  const raw = [{ z: 0, x: 0, y: 0, data: makeMvt(0, 0, 0) }, { z: 1, x: 0, y: 0, data: makeMvt(1, 0, 0, { pad: 'tile '.repeat(4000) }) }]
  writePmtiles(join(dir, 'raw.pmtiles'), { tiles: raw, tileCompression: 'none' })
  // Stored zstd: decoded for clients without zstd (by fzstd on a Node without it).
  const zstd = raw.map(({ z, x, y, data }) => ({ z, x, y, data: execFileSync('zstd', ['-c', '-q'], { input: data }) }))
  writePmtiles(join(dir, 'zstd.pmtiles'), { tiles: zstd, tileCompression: 'zstd' })
  const app = await makeApp(t, { paths: [dir], ...overrides })
  let seenByFastify = 0
  app.addHook('onRequest', (request, reply, done) => { seenByFastify++; done() })
  await app.listen({ port: 0, host: '127.0.0.1' })
  return { app, dir, port: app.server.address().port, seenByFastify: () => seenByFastify }
}

const REQUESTS = [
  ['GET', '/roads/2/0/0.pbf', { 'accept-encoding': 'gzip' }],
  ['GET', '/roads/2/0/0.pbf', {}],
  ['GET', '/roads/2/0/0', { 'accept-encoding': 'br' }],
  ['HEAD', '/roads/2/0/0.pbf', { 'accept-encoding': 'gzip' }],
  ['GET', '/roads/2/0/0.pbf', { 'accept-encoding': 'gzip', origin: 'http://a.example' }],
  ['GET', '/roads/2/0/0.pbf', { 'accept-encoding': 'gzip', 'if-none-match': 'W/"nope", *' }],
  ['GET', '/roads.mbtiles/2/0/0.mvt', { 'accept-encoding': 'gzip' }],
  ['GET', '/data/roads/2/0/0.pbf', { 'accept-encoding': 'gzip' }],
  ['GET', '/roads/2/0/0.pbf?any=thing', { 'accept-encoding': 'gzip' }],
  ['GET', '/roads/2/0/0.pbf/', { 'accept-encoding': 'gzip' }],
  ['GET', '/roads/3/7/7.pbf', { 'accept-encoding': 'gzip' }], // absent: 204
  ['HEAD', '/roads/3/7/7.pbf', {}],
  ['GET', '/photo/1/1/1.png', {}], // absent raster: 404 with a body
  ['GET', '/photo/0/0/0.png', {}],
  ['GET', '/photo/0/0/0@2x.png', {}],
  ['GET', '/raw/0/0/0', { 'accept-encoding': 'gzip' }],
  ['GET', '/raw/1/0/0', { 'accept-encoding': 'gzip' }],
  ['GET', '/raw/1/0/0', { 'accept-encoding': 'identity' }],
  ['GET', '/raw/1/0/0', { 'accept-encoding': 'gzip;q=1, br;q=0.1' }],
  ['GET', '/zstd/1/0/0', { 'accept-encoding': 'gzip' }],
  ['GET', '/zstd/0/0/0', {}],
  ['GET', '/zstd/0/0/0', { 'accept-encoding': 'gzip, zstd' }],
  ['GET', '/roads/2/0/0.pbf', { 'accept-encoding': 'gzip', 'if-match': '"nope"' }],
  ['GET', '/roads/2/0/0.pbf', { 'accept-encoding': 'gzip', 'if-match': '*' }],
  ['GET', '/roads/3/7/7.pbf', { 'accept-encoding': 'gzip', 'if-match': '*' }],
  ['GET', '/roads/9/0/0.pbf', {}], // outside the set's zooms
  ['GET', '/roads/2/4/0.pbf', {}], // outside the grid
  ['GET', '/roads/2/0x1/0.pbf', {}],
  ['GET', '/roads/2/0/0.pbf.gz', {}],
  ['GET', '/nope/2/0/0.pbf', {}],
  ['GET', '/r%6fads/2/0/0.pbf', { 'accept-encoding': 'gzip' }],
  ['GET', '/data/2/0/0', {}],
  ['POST', '/roads/2/0/0.pbf', {}],
]

async function assertSameAsRoute (app, port) {
  for (const [method, url, headers] of REQUESTS) {
    // Twice over the wire: the first may read the tile, the second finds it cached.
    for (const round of ['cold', 'warm']) {
      const wire = await get(port, method, url, headers)
      const routed = await app.inject({ method, url, headers })
      const label = `${method} ${url} ${JSON.stringify(headers)} (${round})`
      assert.equal(wire.status, routed.statusCode, label)
      assert.deepEqual(wire.headers, comparable(routed.headers), label)
      assert.deepEqual(wire.body, routed.rawPayload, label)
    }
  }
}

test('tiles answered before Fastify are the tile route\'s answers, byte for byte, header for header', async (t) => {
  const { app, port, seenByFastify } = await serve(t)
  await get(port, 'GET', '/roads/2/0/0.pbf', { 'accept-encoding': 'gzip' })
  const before = seenByFastify()
  for (let i = 0; i < 5; i++) assert.equal((await get(port, 'GET', '/roads/2/0/0.pbf', { 'accept-encoding': 'gzip' })).status, 200)
  assert.equal(seenByFastify(), before, 'a cached tile is answered without Fastify')
  await assertSameAsRoute(app, port)
})

test('the same with CORS for listed origins (the Origin echoed, Vary: Origin) and with the cache off', async (t) => {
  const cors = await serve(t, { cors: ['http://a.example'] })
  await assertSameAsRoute(cors.app, cors.port)
  const uncached = await serve(t, { cacheMB: 0 })
  await assertSameAsRoute(uncached.app, uncached.port)
})

test('with request logging on, every request goes through Fastify (and is logged)', async (t) => {
  const { port, seenByFastify } = await serve(t, { logRequests: true })
  for (let i = 0; i < 3; i++) await get(port, 'GET', '/roads/2/0/0.pbf', { 'accept-encoding': 'gzip' })
  assert.equal(seenByFastify(), 3)
})

test('a replaced file is served new over HTTP at once after a reload, never from what was answered before', async (t) => {
  const { app, dir, port } = await serve(t)
  const first = await get(port, 'GET', '/photo/0/0/0.png', {})
  assert.equal(first.headers['content-type'], 'image/png')
  writeMbtiles(join(dir, 'next.tmp'), { tiles: vectorTiles(pyramid(0, 1)), metadata: { format: 'pbf', maxzoom: '1' } })
  renameSync(join(dir, 'next.tmp'), join(dir, 'photo.mbtiles'))
  await app.catalog.reload()
  const after = await get(port, 'GET', '/photo/0/0/0.png', {})
  assert.equal(after.headers['content-type'], 'application/x-protobuf')
  assert.notEqual(after.headers.etag, first.headers.etag)
})

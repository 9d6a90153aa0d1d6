// The HTTP behaviour map clients and CDNs rely on, on generated MBTiles and PMTiles sets.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs'
import { connect } from 'node:net'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { text } from 'node:stream/consumers'
import { brotliDecompressSync, gunzipSync, gzipSync } from 'node:zlib'
import { decompress as fzstdDecompress } from 'fzstd'
import { VectorTile } from '@mapbox/vector-tile'
import { PbfReader as Pbf } from 'pbf'
import xxhash from 'xxhash-wasm'
import Database from 'better-sqlite3'
import { ROOT, WITHOUT_FILE_OVERRIDES, makeApp, needs } from './helpers/app.js'
import { PNG, makeMvt, pyramid, tempDir, vectorTiles, writeMbtiles, writePmtiles } from './helpers/data.js'

function decodeMvt (buf) {
  const tile = new VectorTile(new Pbf(buf))
  return { ...tile.layers.points.feature(0).properties }
}

const rawMvt = (z, x, y) => makeMvt(z, x, y, { note: 'a property long enough to make compression pay '.repeat(3) })

async function fixtureApp (t, overrides = {}) {
  const dir = tempDir(t)
  const coords = pyramid(0, 6)
  writeMbtiles(join(dir, 'roads.mbtiles'), {
    tiles: vectorTiles(coords),
    metadata: { name: 'Roads', format: 'pbf', minzoom: '0', maxzoom: '6', bounds: '-10,-10,10,10', center: '0,0,3', json: { vector_layers: [{ id: 'points', fields: { z: 'Number' } }] } },
  })
  writePmtiles(join(dir, 'roads-pm.pmtiles'), { tiles: vectorTiles(coords), metadata: { name: 'Roads PM', vector_layers: [{ id: 'points' }] } })
  // Raw tiles big enough for gzip to pay, and one too small for it (tile 0/0/0).
  writeMbtiles(join(dir, 'raw.mbtiles'), { tiles: coords.map(([z, x, y]) => ({ z, x, y, data: z === 0 ? makeMvt(z, x, y) : rawMvt(z, x, y) })), metadata: { format: 'pbf' } })
  writeMbtiles(join(dir, 'photo.mbtiles'), { tiles: pyramid(0, 2).map(([z, x, y]) => ({ z, x, y, data: PNG })), metadata: { format: 'png' }, schema: 'tilemill' })
  writeMbtiles(join(dir, 'gzpng.mbtiles'), { tiles: [{ z: 0, x: 0, y: 0, data: PNG }], metadata: {} })
  const app = await makeApp(t, { paths: [dir], ...overrides })
  return { app, dir }
}

test('serves stored gzip MVT untouched to gzip clients and decoded to others', async (t) => {
  const { app } = await fixtureApp(t)
  const stored = gzipSync(makeMvt(3, 1, 0))
  const gz = await app.inject({ url: '/roads/3/1/0.pbf', headers: { 'accept-encoding': 'gzip, deflate, br' } })
  assert.equal(gz.statusCode, 200)
  assert.equal(gz.headers['content-type'], 'application/x-protobuf')
  assert.equal(gz.headers['content-encoding'], 'gzip')
  assert.equal(gz.headers.vary, 'Accept-Encoding')
  assert.deepEqual(gz.rawPayload, stored, 'gzip bytes passed through as stored')
  assert.deepEqual(decodeMvt(gunzipSync(gz.rawPayload)), { z: 3, x: 1, y: 0 }, 'the right tile (TMS flipped)')

  const plain = await app.inject({ url: '/roads/3/1/0' })
  assert.equal(plain.statusCode, 200)
  assert.equal(plain.headers['content-encoding'], undefined)
  assert.equal(plain.headers.vary, 'Accept-Encoding')
  assert.deepEqual(plain.rawPayload, makeMvt(3, 1, 0))
  assert.notEqual(plain.headers.etag, gz.headers.etag, 'ETag differs per encoding')
  assert.match(gz.headers.etag, /^"[^"]+"$/, 'strong ETag')
})

test('raw MVT gets the protobuf type and is gzipped for gzip clients; images are never compressed', async (t) => {
  const { app } = await fixtureApp(t)
  const raw = await app.inject({ url: '/raw/2/1/1.mvt' })
  assert.equal(raw.headers['content-type'], 'application/x-protobuf')
  assert.equal(raw.headers['content-encoding'], undefined)
  assert.deepEqual(raw.rawPayload, rawMvt(2, 1, 1))
  const gz = await app.inject({ url: '/raw/2/1/1.mvt', headers: { 'accept-encoding': 'gzip' } })
  assert.equal(gz.headers['content-encoding'], 'gzip')
  assert.deepEqual(gunzipSync(gz.rawPayload), rawMvt(2, 1, 1))
  assert.ok(gz.rawPayload.length < raw.rawPayload.length)
  const br = await app.inject({ url: '/raw/2/1/1.mvt', headers: { 'accept-encoding': 'br' } })
  assert.equal(br.headers['content-encoding'], 'br')
  // A tile that gzip would make larger is sent as it is, to every client, with one ETag.
  const tiny = makeMvt(0, 0, 0)
  assert.ok(gzipSync(tiny).length >= tiny.length, 'the tiny tile does grow under gzip')
  const tinyGz = await app.inject({ url: '/raw/0/0/0', headers: { 'accept-encoding': 'gzip' } })
  const tinyPlain = await app.inject({ url: '/raw/0/0/0' })
  assert.equal(tinyGz.headers['content-encoding'], undefined)
  assert.deepEqual(tinyGz.rawPayload, tiny)
  assert.equal(tinyGz.headers.etag, tinyPlain.headers.etag)
  assert.equal(tinyGz.headers.vary, 'Accept-Encoding', 'still depends on Accept-Encoding for caches')

  const png = await app.inject({ url: '/photo/1/1/1.jpg', headers: { 'accept-encoding': 'gzip, br' } })
  assert.equal(png.statusCode, 200)
  assert.equal(png.headers['content-type'], 'image/png', 'the bytes decide, not the .jpg in the URL')
  assert.equal(png.headers['content-encoding'], undefined)
  assert.equal(png.headers.vary, undefined)
  assert.deepEqual(png.rawPayload, PNG)
  const noFormat = await app.inject({ url: '/gzpng/0/0/0' })
  assert.equal(noFormat.headers['content-type'], 'image/png', 'sniffed when metadata has no format')
})

test('zstd tiles (PMTiles tileCompression zstd) are decoded for clients that do not take zstd, on every Node version', async (t) => {
  const dir = tempDir(t)
  // One small tile (decoded inline) and one over 8 KiB stored (decoded off the inline path); the zstd CLI writing a
  // pipe leaves the frame's size out, as streaming encoders do.
  const raw = { '0/0/0': rawMvt(0, 0, 0), '1/1/0': makeMvt(1, 1, 0, { noise: randomBytes(12000).toString('hex') }) }
  const tiles = Object.entries(raw).map(([key, data]) => {
    const [z, x, y] = key.split('/').map(Number)
    return { z, x, y, data: execFileSync('zstd', ['-c', '-q'], { input: data }) }
  })
  assert.ok(tiles[1].data.length > 8192, 'the large tile is stored over the inline size')
  writePmtiles(join(dir, 'z.pmtiles'), { tiles, tileCompression: 'zstd' })
  const app = await makeApp(t, { paths: [dir] })
  for (const [key, data] of Object.entries(raw)) {
    const stored = tiles.find((tile) => `${tile.z}/${tile.x}/${tile.y}` === key).data
    assert.deepEqual(Buffer.from(fzstdDecompress(stored)), data, 'the stored tile is the raw one, compressed')
    for (const ae of [undefined, 'gzip', 'gzip, deflate, br']) {
      const res = await app.inject({ url: `/z/${key}`, headers: ae === undefined ? {} : { 'accept-encoding': ae } })
      assert.equal(res.statusCode, 200, `${key} [${ae}]`)
      assert.equal(res.headers['content-type'], 'application/x-protobuf')
      const body = { gzip: gunzipSync, br: brotliDecompressSync, undefined: (b) => b }[res.headers['content-encoding']](res.rawPayload)
      assert.deepEqual(body, data, `${key} [${ae}]: ${res.headers['content-encoding'] ?? 'identity'}`)
    }
    const zstd = await app.inject({ url: `/z/${key}`, headers: { 'accept-encoding': 'gzip, zstd' } })
    assert.equal(zstd.headers['content-encoding'], 'zstd')
    assert.deepEqual(zstd.rawPayload, stored, 'passed through as stored to a zstd client')
  }
  const health = await app.inject({ url: '/health' })
  assert.equal(health.statusCode, 200)
})

test('Accept-Encoding q-values rank the codings: the highest q the server can make wins, ties go to br', async (t) => {
  const { app } = await fixtureApp(t)
  const coding = async (url, ae) => (await app.inject({ url, headers: { 'accept-encoding': ae } })).headers['content-encoding'] ?? 'identity'
  const cases = [
    // stored raw: compressed per request
    ['/raw/2/1/1', 'gzip;q=1, br;q=0.1', 'gzip'],
    ['/raw/2/1/1', 'br;q=0.001, gzip', 'gzip'],
    ['/raw/2/1/1', 'gzip;q=0.5, br', 'br'],
    ['/raw/2/1/1', 'gzip;q=0.8, br;q=0.8', 'br'],
    ['/raw/2/1/1', 'gzip, deflate, br', 'br'],
    ['/raw/2/1/1', 'GZIP;Q=1, BR;Q=0.5', 'gzip'],
    ['/raw/2/1/1', 'gzip;q=0.5, identity', 'identity'],
    ['/raw/2/1/1', '*;q=0.1, gzip', 'gzip'],
    // stored gzip: passed through unless another coding is preferred
    ['/roads/3/1/0', 'br;q=0.5, gzip', 'gzip'],
    ['/roads/3/1/0', 'gzip;q=0.2, br', 'br'],
    // images: never compressed, whatever the ranks
    ['/photo/0/0/0', 'gzip;q=1, br;q=0.5', 'identity'],
  ]
  for (const [url, ae, expected] of cases) assert.equal(await coding(url, ae), expected, `${url} [${ae}]`)
  const ranked = await app.inject({ url: '/roads/3/1/0', headers: { 'accept-encoding': 'gzip;q=0.2, br' } })
  assert.deepEqual(decodeMvt(brotliDecompressSync(ranked.rawPayload)), { z: 3, x: 1, y: 0 })
})

test('If-None-Match gives 304; HEAD answers like GET without a body', async (t) => {
  const { app } = await fixtureApp(t)
  const first = await app.inject({ url: '/roads-pm/4/1/1', headers: { 'accept-encoding': 'gzip' } })
  assert.equal(first.statusCode, 200)
  const again = await app.inject({ url: '/roads-pm/4/1/1', headers: { 'accept-encoding': 'gzip', 'if-none-match': first.headers.etag } })
  assert.equal(again.statusCode, 304)
  assert.equal(again.rawPayload.length, 0)
  assert.equal(again.headers.etag, first.headers.etag)
  const listed = await app.inject({ url: '/roads-pm/4/1/1', headers: { 'accept-encoding': 'gzip', 'if-none-match': `"nope", ${first.headers.etag}` } })
  assert.equal(listed.statusCode, 304)
  const otherEncoding = await app.inject({ url: '/roads-pm/4/1/1', headers: { 'if-none-match': first.headers.etag } })
  assert.equal(otherEncoding.statusCode, 200, 'the gzip ETag does not validate the identity body')

  const head = await app.inject({ method: 'HEAD', url: '/roads-pm/4/1/1', headers: { 'accept-encoding': 'gzip' } })
  assert.equal(head.statusCode, 200)
  assert.equal(head.rawPayload.length, 0)
  assert.equal(head.headers['content-type'], 'application/x-protobuf')
  assert.equal(head.headers.etag, first.headers.etag)
  assert.equal(Number(head.headers['content-length']), first.rawPayload.length)
})

test('a large tile\'s ETag is the XXH64 of its bytes, and hashing it leaves no large WASM memory behind', async (t) => {
  const dir = tempDir(t)
  // PNG bytes (never compressed again: the identity ETag only) of sizes about the hash's 64 KiB chunk and far past it.
  const png = (size) => Buffer.concat([PNG, randomBytes(size - PNG.length)])
  const tiles = [65536, 65537, 8 * 2 ** 20 + 13].map((size, x) => ({ z: 2, x, y: 0, data: png(size) }))
  writeMbtiles(join(dir, 'big.mbtiles'), { tiles, metadata: { format: 'png' } })
  // The one-shot digest, from an instance of its own, before the WASM memories are watched.
  const { h64Raw } = await xxhash()
  const expected = tiles.map((tile) => h64Raw(tile.data).toString(36))
  const app = await makeApp(t, { paths: [dir] })
  // WASM memory only grows (Memory.grow; it never shrinks): the largest any instance asked for while serving the tiles.
  let largest = 0
  const grow = WebAssembly.Memory.prototype.grow
  WebAssembly.Memory.prototype.grow = function (pages) {
    const before = grow.call(this, pages)
    largest = Math.max(largest, this.buffer.byteLength)
    return before
  }
  t.after(() => { WebAssembly.Memory.prototype.grow = grow })
  for (const [i, tile] of tiles.entries()) {
    const res = await app.inject({ url: `/big/2/${tile.x}/0.png` })
    assert.equal(res.statusCode, 200)
    assert.equal(res.rawPayload.length, tile.data.length)
    assert.equal(res.headers.etag.replace(/^"|-[^-]*"$/g, ''), expected[i], `${tile.data.length} bytes: the one-shot XXH64, streamed or not`)
  }
  assert.ok(largest <= 256 * 1024, `WASM memory grew to ${largest} bytes hashing an 8 MiB tile`)
})

test('set names with or without the file extension, tiles with or without one', async (t) => {
  const { app } = await fixtureApp(t)
  for (const url of ['/roads/2/1/1', '/roads/2/1/1.pbf', '/roads.mbtiles/2/1/1.mvt', '/roads-pm.pmtiles/2/1/1', '/roads-pm/2/1/1.png']) {
    const res = await app.inject({ url })
    assert.equal(res.statusCode, 200, url)
    assert.deepEqual(decodeMvt(res.rawPayload), { z: 2, x: 1, y: 1 }, url)
  }
})

test('absent tiles: 204 for vector sets, 404 for raster, configurable per set', async (t) => {
  const { app } = await fixtureApp(t)
  assert.equal((await app.inject({ url: '/roads/5/20/20' })).statusCode, 204)
  assert.equal((await app.inject({ url: '/roads-pm/5/20/20' })).statusCode, 204)
  const raster = await app.inject({ url: '/photo/2/3/3' })
  assert.equal(raster.statusCode, 404)
  assert.equal(raster.json().statusCode, 404)

  const { app: configured } = await fixtureApp(t, { sets: { roads: { missingStatus: 404 }, photo: { missingStatus: 204 } } })
  assert.equal((await configured.inject({ url: '/roads/5/20/20' })).statusCode, 404)
  assert.equal((await configured.inject({ url: '/photo/2/3/3' })).statusCode, 204)
})

test('bad coordinates are 400, zooms outside the set 404, unknown sets 404 JSON', async (t) => {
  const { app } = await fixtureApp(t)
  for (const url of ['/roads/a/0/0', '/roads/1/b/0', '/roads/1/0/c', '/roads/-1/0/0', '/roads/1/-1/0', '/roads/1/0/-1',
    '/roads/1/2/0', '/roads/1/0/2', '/roads/31/0/0', '/roads/1.5/0/0', '/roads/2/1/1.p/bf', '/roads/2/1/1..pbf',
    '/roads/%203/0/0', '/roads/1e0/0/0', '/roads/0x1/0/0', '/roads/1/1e0/0', '/roads/1/%200/0', '/roads/100/0/0']) {
    const res = await app.inject({ url })
    assert.ok(res.statusCode === 400 || res.statusCode === 404, `${url} → ${res.statusCode}`)
    if (!url.includes('.p/')) assert.equal(res.statusCode, 400, url)
    assert.equal(typeof res.json().message, 'string')
  }
  const outside = await app.inject({ url: '/roads/7/0/0' })
  assert.equal(outside.statusCode, 404)
  assert.match(outside.json().message, /zoom 7 is outside/)
  assert.equal((await app.inject({ url: '/roads/2/1/1@2x.pbf' })).statusCode, 404, 'no 512 px tiles in a file set')
  const unknown = await app.inject({ url: '/nope/0/0/0' })
  assert.equal(unknown.statusCode, 404)
  assert.equal(unknown.headers['content-type'], 'application/json; charset=utf-8')
  assert.match(unknown.json().message, /no tileset 'nope'/)
})

test('paths that try to leave the data folder get 404 and never open a file', async (t) => {
  const { app, dir } = await fixtureApp(t)
  writeMbtiles(join(dir, '..', `outside-${process.pid}.mbtiles`), { tiles: vectorTiles([[0, 0, 0]]) })
  t.after(() => import('node:fs').then((fs) => fs.rmSync(join(dir, '..', `outside-${process.pid}.mbtiles`), { force: true })))
  const before = [...app.catalog.entries.keys()].sort()
  for (const url of [`/..%2Foutside-${process.pid}/0/0/0`, `/..%2F..%2Fetc%2Fpasswd/0/0/0`, '/%2e%2e/0/0/0', '/%2Fetc%2Fpasswd/0/0/0',
    '/roads%00/0/0/0', '/%00/0/0/0', '/..%5Croads/0/0/0', `/..%2Foutside-${process.pid}.mbtiles/meta`, '/..%2F..%2Fetc%2Fpasswd.json', '/..%2Froads.json']) {
    const res = await app.inject({ url })
    assert.ok([404, 400].includes(res.statusCode), `${url} → ${res.statusCode}`)
    assert.ok(!res.payload.includes(dir), 'the data folder is never named')
    assert.doesNotMatch(res.payload, /root:|SQLite/, 'no file was read')
  }
  assert.deepEqual([...app.catalog.entries.keys()].sort(), before, 'nothing new was opened')
})

test('TileJSON 3.0.0 with tiles URLs from the request, a proxy, or the public URL', async (t) => {
  const { app } = await fixtureApp(t)
  const res = await app.inject({ url: '/roads.json', headers: { host: 'tiles.example.com:8080' } })
  assert.equal(res.statusCode, 200)
  const tj = res.json()
  assert.equal(tj.tilejson, '3.0.0')
  assert.deepEqual(tj.tiles, ['http://tiles.example.com:8080/roads/{z}/{x}/{y}.pbf'])
  assert.deepEqual(tj.bounds, [-10, -10, 10, 10])
  assert.deepEqual(tj.center, [0, 0, 3])
  assert.equal(tj.minzoom, 0)
  assert.equal(tj.maxzoom, 6)
  assert.equal(tj.name, 'Roads')
  assert.deepEqual(tj.vector_layers, [{ id: 'points', fields: { z: 'Number' } }])
  assert.deepEqual((await app.inject({ url: '/roads.mbtiles.json' })).json().tiles, tj.tiles.map((u) => u.replace('tiles.example.com:8080', 'localhost:80')))

  // X-Forwarded-* count only from a trusted proxy (inject() comes from 127.0.0.1).
  const forwarded = { host: 'internal:3000', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'maps.example.org', 'x-forwarded-prefix': '/tiles' }
  const untrusted = await app.inject({ url: '/roads-pm.json', headers: forwarded })
  assert.deepEqual(untrusted.json().tiles, ['http://internal:3000/roads-pm/{z}/{x}/{y}.pbf'], 'forwarding headers of an untrusted peer ignored')
  assert.equal(untrusted.headers.vary, 'Host')
  const { app: behindProxy } = await fixtureApp(t, { trustProxy: ['loopback'] })
  const proxied = await behindProxy.inject({ url: '/roads-pm.json', headers: forwarded })
  assert.deepEqual(proxied.json().tiles, ['https://maps.example.org/tiles/roads-pm/{z}/{x}/{y}.pbf'])
  assert.equal(proxied.headers.vary, 'Host, X-Forwarded-Host, X-Forwarded-Proto, X-Forwarded-Prefix')
  assert.deepEqual(proxied.json().vector_layers, [{ id: 'points', fields: {} }], 'fields, which TileJSON requires, even when the file has none')
  const hostile = await behindProxy.inject({ url: '/roads.json', headers: { 'x-forwarded-host': 'evil.com/<script>', 'x-forwarded-proto': 'javascript', 'x-forwarded-prefix': '/<x>' } })
  assert.doesNotMatch(hostile.json().tiles[0], /evil|script|javascript/)

  const { app: pub } = await fixtureApp(t, { publicUrl: 'https://cdn.example.net/base/' })
  assert.deepEqual((await pub.inject({ url: '/photo.json' })).json().tiles, ['https://cdn.example.net/base/photo/{z}/{x}/{y}.png'])
})

test('/list, /catalog, /:set/meta and /health', async (t) => {
  const { app } = await fixtureApp(t)
  const list = (await app.inject({ url: '/list' })).json()
  assert.deepEqual(list.sort(), ['gzpng', 'photo', 'raw', 'roads', 'roads-pm'])
  for (const id of list) assert.equal((await app.inject({ url: `/${id}.json` })).statusCode, 200, id)
  const catalog = (await app.inject({ url: '/catalog', headers: { host: 'h' } })).json()
  const roads = catalog.find((c) => c.id === 'roads')
  assert.deepEqual(roads, { id: 'roads', kind: 'mbtiles', format: 'pbf', name: 'Roads', minzoom: 0, maxzoom: 6, bounds: [-10, -10, 10, 10], tilejson: 'http://h/roads.json' })
  assert.equal(catalog.find((c) => c.id === 'roads-pm').kind, 'pmtiles')

  const meta = (await app.inject({ url: '/roads.mbtiles/meta' })).json()
  assert.equal(meta.name, 'Roads')
  assert.deepEqual(meta.json, { vector_layers: [{ id: 'points', fields: { z: 'Number' } }] }, 'json field parsed')
  const pmMeta = (await app.inject({ url: '/roads-pm/meta' })).json()
  assert.equal(pmMeta.name, 'Roads PM')
  assert.equal(pmMeta.header.tileType, 'Mvt')
  assert.equal(pmMeta.header.maxZoom, 6)

  const health = await app.inject({ url: '/health' })
  assert.equal(health.statusCode, 200)
  assert.equal(health.json().status, 'ok')
  assert.equal(health.json().sets, 5)
})

test('/:set/meta shows values as text and JSON: a BLOB as its text (left out unless UTF-8), PMTiles JSON that is not an object under json', async (t) => {
  const dir = tempDir(t)
  writeMbtiles(join(dir, 'blobs.mbtiles'), { tiles: vectorTiles([[0, 0, 0]]), metadata: { format: 'pbf' } })
  const db = new Database(join(dir, 'blobs.mbtiles'))
  const insert = db.prepare('INSERT INTO metadata VALUES (?, ?)')
  insert.run('description', Buffer.from([0x00, 0xff]))
  insert.run('attribution', Buffer.from('© Zürich'))
  insert.run('json', Buffer.from(JSON.stringify({ vector_layers: [{ id: 'points', fields: {} }] })))
  db.close()
  writePmtiles(join(dir, 'listed.pmtiles'), { tiles: vectorTiles([[0, 0, 0]]), metadata: [1, 2, 3] })
  writePmtiles(join(dir, 'counted.pmtiles'), { tiles: vectorTiles([[0, 0, 0]]), metadata: 42 })
  const app = await makeApp(t, { paths: [dir] })

  const blobs = (await app.inject({ url: '/blobs/meta' })).json()
  assert.equal('description' in blobs, false, 'not UTF-8: left out')
  assert.equal(blobs.attribution, '© Zürich')
  assert.deepEqual(blobs.json, { vector_layers: [{ id: 'points', fields: {} }] }, 'parsed as a TEXT json is')
  assert.equal((await app.inject({ url: '/blobs.json' })).json().attribution, '© Zürich')
  const listed = (await app.inject({ url: '/listed/meta' })).json()
  assert.deepEqual(Object.keys(listed).sort(), ['header', 'json'])
  assert.deepEqual(listed.json, [1, 2, 3])
  assert.equal((await app.inject({ url: '/counted/meta' })).json().json, 42)
})

test('files of one name in two folders: the first keeps its id and file name, the other is served as roads-2 (roads-3 …), said once each', async (t) => {
  const root = tempDir(t)
  const [a, b] = [join(root, 'A'), join(root, 'B')]
  mkdirSync(a)
  mkdirSync(b)
  writeMbtiles(join(a, 'roads.mbtiles'), { tiles: vectorTiles([[0, 0, 0]]), metadata: { format: 'pbf' } })
  writePmtiles(join(a, 'roads.pmtiles'), { tiles: [{ z: 0, x: 0, y: 0, data: PNG }], tileType: 'png', tileCompression: 'none' })
  writeMbtiles(join(b, 'roads.mbtiles'), { tiles: [{ z: 0, x: 0, y: 0, data: PNG }], metadata: { format: 'png' } })
  writePmtiles(join(b, 'roads.pmtiles'), { tiles: vectorTiles([[0, 0, 0]]) })
  const logs = []
  const app = await makeApp(t, { paths: [a, b] }, { logs })
  assert.deepEqual((await app.inject({ url: '/list' })).json(), ['roads', 'roads.pmtiles', 'roads-2', 'roads-3'])
  const type = async (url) => (await app.inject({ url })).headers['content-type']
  assert.equal(await type('/roads.mbtiles/0/0/0'), 'application/x-protobuf', "A's roads.mbtiles, the file 'roads' was found as")
  assert.equal(await type('/roads/0/0/0'), 'application/x-protobuf')
  assert.equal(await type('/roads.pmtiles/0/0/0'), 'image/png', "A's roads.pmtiles")
  assert.equal(await type('/roads-2/0/0/0'), 'image/png', "B's roads.mbtiles")
  assert.equal(await type('/roads-3/0/0/0'), 'application/x-protobuf', "B's roads.pmtiles")
  const said = logs.filter((l) => l.file !== undefined && l.first !== undefined)
  assert.deepEqual(said.map((l) => [l.set, l.file, l.first, l.folder]), [['roads-2', 'roads.mbtiles', 'roads', b], ['roads-3', 'roads.pmtiles', 'roads.pmtiles', b]])
  assert.match(said[0].msg, /'roads\.mbtiles' is the name of a file served already \(set 'roads'\): this one is served as 'roads-2'/)
  // Re-opened on a reload: the same ids, nothing said again.
  await app.catalog.reload()
  assert.deepEqual((await app.inject({ url: '/list' })).json(), ['roads', 'roads.pmtiles', 'roads-2', 'roads-3'])
  assert.equal(logs.filter((l) => l.file !== undefined && l.first !== undefined).length, 2)
  assert.equal(await type('/roads.mbtiles/0/0/0'), 'application/x-protobuf')
})

test('CORS on by default, configurable; Cache-Control configurable', async (t) => {
  const { app } = await fixtureApp(t)
  const res = await app.inject({ url: '/roads/0/0/0', headers: { origin: 'https://a.example' } })
  assert.equal(res.headers['access-control-allow-origin'], '*')
  assert.equal(res.headers['cache-control'], 'public, max-age=3600')

  const { app: strict } = await fixtureApp(t, { cors: ['https://ok.example'], cacheControl: 'public, max-age=60', sets: { photo: { cacheControl: 'no-cache' } } })
  const ok = await strict.inject({ url: '/roads/0/0/0', headers: { origin: 'https://ok.example' } })
  assert.equal(ok.headers['access-control-allow-origin'], 'https://ok.example')
  assert.equal(ok.headers['cache-control'], 'public, max-age=60')
  const denied = await strict.inject({ url: '/roads/0/0/0', headers: { origin: 'https://other.example' } })
  assert.equal(denied.headers['access-control-allow-origin'], undefined)
  assert.equal((await strict.inject({ url: '/photo/0/0/0' })).headers['cache-control'], 'no-cache')

  // With a list of origins CORS answers Vary: Origin; the tile's Vary: Accept-Encoding joins it, never replaces it.
  assert.deepEqual(ok.headers.vary.split(', ').sort(), ['Accept-Encoding', 'Origin'])

  const { app: off } = await fixtureApp(t, { cors: false })
  assert.equal((await off.inject({ url: '/roads/0/0/0', headers: { origin: 'https://a.example' } })).headers['access-control-allow-origin'], undefined)
})

test('broken files never stop the others: left out of /list, 503 with a reason, no path leaked', async (t) => {
  const dir = tempDir(t)
  writeMbtiles(join(dir, 'good.mbtiles'), { tiles: vectorTiles([[0, 0, 0]]) })
  writeFileSync(join(dir, 'text.mbtiles'), 'this is not sqlite at all, just some text that is long enough '.repeat(20))
  writeFileSync(join(dir, 'empty.pmtiles'), '')
  writeFileSync(join(dir, 'bad-magic.pmtiles'), Buffer.alloc(200, 0x41))
  const v4 = writePmtiles(join(dir, 'v4.pmtiles'), { tiles: vectorTiles([[0, 0, 0]]) })
  v4[7] = 4
  writeFileSync(join(dir, 'v4.pmtiles'), v4)
  const full = writePmtiles(join(dir, 'cut.pmtiles'), { tiles: vectorTiles(pyramid(0, 3)) })
  writeFileSync(join(dir, 'cut.pmtiles'), full.subarray(0, full.length - 100))
  const noTiles = join(dir, 'notiles.mbtiles')
  writeMbtiles(noTiles, { tiles: [] })
  const Database = (await import('better-sqlite3')).default
  const db = new Database(noTiles)
  db.exec('DROP TABLE tiles')
  db.close()
  writeMbtiles(join(dir, 'nulls.mbtiles'), { tiles: [{ z: 0, x: 0, y: 0, data: null }, { z: 1, x: 0, y: 0, data: PNG }] })
  mkdirSync(join(dir, 'folder.mbtiles'))
  execFileSync('mkfifo', [join(dir, 'pipe.pmtiles')]) // opening a FIFO would block the event loop for good

  const app = await makeApp(t, { paths: [dir] })
  assert.deepEqual((await app.inject({ url: '/list' })).json().sort(), ['good', 'nulls'])
  const reasons = Object.fromEntries(app.catalog.unavailable().map((u) => [u.id, u.reason]))
  assert.match(reasons.text, /not an SQLite database/)
  assert.match(reasons.empty, /too short/)
  assert.match(reasons['bad-magic'], /bad magic/)
  assert.match(reasons.v4, /version 4/)
  assert.match(reasons.cut, /incomplete/)
  assert.match(reasons.notiles, /no tiles table/)
  assert.match(reasons.folder, /not a regular file/)
  assert.match(reasons.pipe, /not a regular file/)
  for (const id of Object.keys(reasons)) {
    const res = await app.inject({ url: `/${id}/0/0/0` })
    assert.equal(res.statusCode, 503, id)
    assert.doesNotMatch(res.payload, new RegExp(dir.replaceAll('/', '\\/')))
    assert.doesNotMatch(res.payload, /at .*\.js:\d+/, 'no stack')
    assert.equal((await app.inject({ url: `/${id}.json` })).statusCode, 503)
  }
  assert.equal((await app.inject({ url: '/good/0/0/0' })).statusCode, 200)
  assert.equal((await app.inject({ url: '/nulls/0/0/0' })).statusCode, 404, 'a NULL tile row is a missing tile')
  assert.equal((await app.inject({ url: '/nulls/1/0/0' })).statusCode, 200)
  const health = (await app.inject({ url: '/health' })).json()
  assert.equal(health.unavailable.length, 8)
  assert.ok(!JSON.stringify(health).includes(dir), 'no folder in /health either')
})

test('an unreadable MBTiles says why in the words a PMTiles does (EACCES), and a damaged PMTiles root directory says which part', async (t) => {
  const dir = tempDir(t)
  writeMbtiles(join(dir, 'locked.mbtiles'), { tiles: vectorTiles([[0, 0, 0]]) })
  writePmtiles(join(dir, 'locked.pmtiles'), { tiles: vectorTiles([[0, 0, 0]]) })
  for (const file of ['locked.mbtiles', 'locked.pmtiles']) chmodSync(join(dir, file), 0o000)
  chmodSync(dir, 0o755)
  // root reads any file: there the sets are opened without the capabilities that let it (WITHOUT_FILE_OVERRIDES).
  if (!needs(t, WITHOUT_FILE_OVERRIDES !== null, 'setpriv (util-linux) is not installed: as root, the server would read any file')) return
  const sources = pathToFileURL(join(ROOT, 'lib/sources/')).href
  const script = `for (const kind of ['mbtiles', 'pmtiles']) {
    const { open } = await import(${JSON.stringify(sources)} + kind + '.js')
    await open({ id: kind, path: ${JSON.stringify(dir)} + '/locked.' + kind }).then(() => console.log('opened'), (err) => console.log(err.message))
  }`
  const command = [...WITHOUT_FILE_OVERRIDES, process.execPath]
  const out = execFileSync(command[0], [...command.slice(1), '--input-type=module', '-e', script], { encoding: 'utf8' })
  // (the catalog takes the folder out of a reason: the PMTiles one has it here)
  assert.deepEqual(out.replaceAll(`${dir}/`, '').trim().split('\n'), ["EACCES: permission denied, open 'locked.mbtiles'", "EACCES: permission denied, open 'locked.pmtiles'"])

  // A root directory whose gzip stream is damaged (its header intact): zlib's words alone named no part of the file.
  const damaged = writePmtiles(join(dir, 'damaged.pmtiles'), { tiles: vectorTiles(pyramid(0, 2)) })
  const rootOffset = Number(damaged.readBigUInt64LE(8))
  const rootLength = Number(damaged.readBigUInt64LE(16))
  damaged.fill(0xff, rootOffset + 10, rootOffset + rootLength - 8)
  writeFileSync(join(dir, 'damaged.pmtiles'), damaged)
  chmodSync(join(dir, 'locked.mbtiles'), 0o644) // (the app below runs as this user)
  const app = await makeApp(t, { paths: [join(dir, 'damaged.pmtiles')] })
  const [unavailable] = app.catalog.unavailable()
  assert.match(unavailable.reason, new RegExp(`^damaged PMTiles archive: the root directory \\(${rootLength} bytes at offset ${rootOffset}\\) cannot be decompressed \\(gzip\\): \\S`))
  assert.equal((await app.inject({ url: '/damaged/0/0/0' })).statusCode, 503)
})

test('a tile read that fails at request time is a 503 for that set only', async (t) => {
  const dir = tempDir(t)
  writeMbtiles(join(dir, 'good.mbtiles'), { tiles: vectorTiles([[0, 0, 0]]) })
  const full = writePmtiles(join(dir, 'lying.pmtiles'), { tiles: vectorTiles(pyramid(0, 2)) })
  const app = await makeApp(t, { paths: [dir] })
  const entry = app.catalog.get('lying')
  // Cut away the tile data of an open archive (a disk going bad, a file truncated in place).
  await (await import('node:fs/promises')).truncate(join(dir, 'lying.pmtiles'), Number(full.readBigUInt64LE(56)))
  const res = await app.inject({ url: '/lying/2/1/1' })
  assert.equal(res.statusCode, 503)
  assert.match(res.json().message, /could not read this tile/)
  assert.equal((await app.inject({ url: '/good/0/0/0' })).statusCode, 200)
  assert.ok(entry.errors.size === 1, 'logged once')
  await app.inject({ url: '/lying/2/1/1' })
  assert.ok(entry.errors.size === 1, 'still logged once')
})

test('JSON tiles stored in a TEXT column are served', async (t) => {
  const dir = tempDir(t)
  const file = join(dir, 'text.mbtiles')
  writeMbtiles(file, { tiles: [] })
  const Database = (await import('better-sqlite3')).default
  const db = new Database(file)
  db.prepare('INSERT INTO tiles VALUES (0, 0, 0, ?)').run('{"type":"FeatureCollection","features":[]}')
  db.close()
  const app = await makeApp(t, { paths: [dir] })
  const res = await app.inject({ url: '/text/0/0/0' })
  assert.equal(res.statusCode, 200)
  assert.equal(res.headers['content-type'], 'application/json')
  assert.deepEqual(res.json(), { type: 'FeatureCollection', features: [] })
})

test('a malformed URL gets a JSON 400, not a crash', async (t) => {
  const { app } = await fixtureApp(t)
  const res = await app.inject({ url: '/roads/%E0%A4%A/0/0' })
  assert.equal(res.statusCode, 400)
  assert.equal(res.json().statusCode, 400)
})

test('a method the server does not serve is 405 with Allow where the path is served, 404 where it is not', async (t) => {
  const { app } = await fixtureApp(t)
  const address = await app.listen({ port: 0, host: '127.0.0.1' }) // the tile front answers GET and HEAD before Fastify
  for (const [method, path] of [['POST', '/roads/1/0/0.pbf'], ['DELETE', '/roads-pm/1/1/1'], ['PUT', '/list'], ['POST', '/roads.json'], ['PATCH', '/data/roads/0/0/0.pbf']]) {
    const res = await fetch(address + path, { method, body: method === 'DELETE' ? undefined : 'x' })
    assert.equal(res.status, 405, `${method} ${path}`)
    assert.equal(res.headers.get('allow'), 'GET, HEAD, OPTIONS', `${method} ${path}`)
    assert.match((await res.json()).message, new RegExp(`^${method} is not served here`))
  }
  for (const [method, path] of [['POST', '/no/such/route/at/all'], ['GET', '/no/such/route/at/all'], ['DELETE', '/']]) {
    const res = await fetch(address + path, { method })
    assert.equal(res.status, method === 'DELETE' ? 405 : 404, `${method} ${path}`) // '/' is the home page
  }
  const tile = await fetch(address + '/roads/1/0/0.pbf') // and the served methods still are
  assert.equal(tile.status, 200)
})

/** A request written as it is (a missing, doubled or bad Host; an absolute-form target): { status, body }. */
async function rawRequest (port, head) {
  const socket = connect(port, '127.0.0.1')
  socket.end(head + '\r\n')
  const answer = await text(socket)
  return { status: Number(answer.split(' ')[1]), body: answer.slice(answer.indexOf('\r\n\r\n') + 4) }
}

test('links name the request\'s authority: its port when Host is missing, the absolute target\'s host; a bad or doubled Host is a 400', async (t) => {
  const { app } = await fixtureApp(t)
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address()
  const tiles = (answer) => JSON.parse(answer.body).tiles
  // HTTP/1.0 may send no Host: the server's name (localhost, or the configured host) at the port the request came in on, not 80.
  const noHost = await rawRequest(port, 'GET /roads.json HTTP/1.0\r\n')
  assert.equal(noHost.status, 200)
  assert.deepEqual(tiles(noHost), [`http://localhost:${port}/roads/{z}/{x}/{y}.pbf`])
  const empty = await rawRequest(port, 'GET /roads.json HTTP/1.1\r\nHost:\r\nConnection: close\r\n')
  assert.deepEqual(tiles(empty), [`http://localhost:${port}/roads/{z}/{x}/{y}.pbf`])
  // RFC 9112 §3.2.2: an absolute-form target's authority, not Host.
  const absolute = await rawRequest(port, 'GET http://right.example:8080/roads.json HTTP/1.1\r\nHost: wrong.example\r\nConnection: close\r\n')
  assert.equal(absolute.status, 200)
  assert.deepEqual(tiles(absolute), ['http://right.example:8080/roads/{z}/{x}/{y}.pbf'])
  // RFC 9112 §3.2: a Host that is not one, or two of them, is a 400 (where links are made).
  for (const head of ['Host: bad host/x', 'Host: a.example\r\nHost: b.example', 'Host: user@a.example']) {
    const res = await rawRequest(port, `GET /roads.json HTTP/1.1\r\n${head}\r\nConnection: close\r\n`)
    assert.equal(res.status, 400, head)
    assert.match(JSON.parse(res.body).message, /Host/, head)
  }
  const named = await rawRequest(port, 'GET /roads.json HTTP/1.1\r\nHost: tiles.example:81\r\nConnection: close\r\n')
  assert.deepEqual(tiles(named), ['http://tiles.example:81/roads/{z}/{x}/{y}.pbf'])
})

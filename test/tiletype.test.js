// Tile type inference from bytes, Accept-Encoding negotiation, and the tile cache.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { brotliCompressSync, brotliDecompressSync, constants, deflateSync, gunzipSync, gzipSync } from 'node:zlib'
import Database from 'better-sqlite3'
import { describeTile } from '../lib/tiletype.js'
import { BR, GZIP, acceptMask, chooseEncoding } from '../lib/encoding.js'
import { TileCache } from '../lib/cache.js'
import { FIXTURES, makeApp } from './helpers/app.js'
import { PNG, makeMvt, tempDir, writeMbtiles, writePmtiles } from './helpers/data.js'

const JPEG_NO_EOI = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, 0x4a, 0x46, 0x49, 0x46, 0x00, 0x01])
const WEBP = Buffer.concat([Buffer.from('RIFF'), Buffer.alloc(4), Buffer.from('WEBPVP8 '), Buffer.alloc(8)])
const GIF = Buffer.from('GIF89a\x01\x00\x01\x00', 'latin1')
const AVIF = Buffer.concat([Buffer.from([0, 0, 0, 0x1c]), Buffer.from('ftypavif'), Buffer.alloc(8)])

test('formats and encodings come from the bytes', () => {
  const mvt = makeMvt(1, 0, 0)
  const cases = [
    [PNG, 'png', 'image/png', 'identity'],
    [JPEG_NO_EOI, 'jpg', 'image/jpeg', 'identity'],
    [WEBP, 'webp', 'image/webp', 'identity'],
    [GIF, 'gif', 'image/gif', 'identity'],
    [AVIF, 'avif', 'image/avif', 'identity'],
    [mvt, 'pbf', 'application/x-protobuf', 'identity'],
    [gzipSync(mvt), 'pbf', 'application/x-protobuf', 'gzip'],
    [deflateSync(mvt), 'pbf', 'application/x-protobuf', 'deflate'],
    [Buffer.from(' {"a":1}'), 'json', 'application/json', 'identity'],
    [gzipSync(Buffer.from('[1,2]')), 'json', 'application/json', 'gzip'],
    [Buffer.alloc(16, 0xff), 'bin', 'application/octet-stream', 'identity'],
  ]
  for (const [bytes, format, contentType, encoding] of cases) {
    assert.deepEqual(describeTile(bytes), { format, contentType, encoding }, format)
  }
  // What bytes cannot say, the archive's declaration does: brotli has no magic number, MLT none either.
  assert.deepEqual(describeTile(brotliCompressSync(mvt), { format: 'pbf', compression: 'br' }), { format: 'pbf', contentType: 'application/x-protobuf', encoding: 'br' })
  assert.deepEqual(describeTile(Buffer.from([0x02, 0x01, 0x05]), { format: 'mlt' }), { format: 'mlt', contentType: 'application/vnd.maplibre-vector-tile', encoding: 'identity' })
  // An uncompressed MLT tile whose first layer is 120 bytes long starts `78 01`, as a zlib stream does: not deflate
  // for an MLT set, nor where the archive says its tiles are uncompressed (PMTiles tile_compression none).
  const mltLike = Buffer.concat([Buffer.from([0x78, 0x01]), Buffer.alloc(119, 0x05)])
  assert.equal(((0x78 << 8) | 0x01) % 31, 0, 'a valid zlib header')
  assert.deepEqual(describeTile(mltLike, { format: 'mlt' }), { format: 'mlt', contentType: 'application/vnd.maplibre-vector-tile', encoding: 'identity' })
  assert.equal(describeTile(mltLike, { compression: 'identity' }).encoding, 'identity')
  assert.equal(describeTile(deflateSync(mvt), { format: 'pbf' }).encoding, 'deflate', 'zlib where nothing says otherwise')
  // A PNG in a set that claims pbf is still a PNG.
  assert.equal(describeTile(PNG, { format: 'pbf' }).contentType, 'image/png')
})

/** An MVT tile whose gzip starts with long Huffman code tables (many distinct characters): its first 64 bytes inflate to nothing. */
function variedMvt () {
  const words = Array.from({ length: 160 }, (_, i) => `${String.fromCharCode(65 + (i * 37) % 58)}${(i * 7919) % 9973}-${String.fromCharCode(97 + (i * 11) % 26)}${i}`)
  return makeMvt(0, 0, 0, { names: words.join(' ') })
}

test('a gzipped or zlib MVT is protobuf whatever the archive declares, also one whose first bytes inflate to nothing', () => {
  const gz = gzipSync(variedMvt())
  assert.equal(gunzipSync(gz.subarray(0, 64), { finishFlush: constants.Z_SYNC_FLUSH }).length, 0, 'the case: code tables first')
  assert.deepEqual(describeTile(gz, { format: 'png' }), { format: 'pbf', contentType: 'application/x-protobuf', encoding: 'gzip' })
  assert.equal(describeTile(deflateSync(variedMvt()), { format: 'png' }).format, 'pbf')
  // The set's memo keeps what the first tile held, whichever tile that is; a damaged first tile decides nothing.
  const memo = {}
  assert.equal(describeTile(gz.subarray(0, 10), { format: 'png' }, memo).format, 'png')
  assert.equal(describeTile(gz, { format: 'png' }, memo).format, 'pbf')
  assert.equal(describeTile(gzipSync(makeMvt(1, 0, 0)), { format: 'png' }, memo).format, 'pbf')
})

test('an MBTiles whose metadata says png for gzipped MVT tiles (or says it in a second row) serves them as MVT, and says so once', async (t) => {
  const dir = tempDir(t)
  const tiles = [{ z: 0, x: 0, y: 0, data: gzipSync(variedMvt()) }, { z: 1, x: 0, y: 0, data: gzipSync(makeMvt(1, 0, 0)) }]
  writeMbtiles(join(dir, 'said.mbtiles'), { tiles, metadata: { format: 'png', maxzoom: '1' } })
  writeMbtiles(join(dir, 'twice.mbtiles'), { tiles, metadata: { format: 'pbf', maxzoom: '1' } })
  const db = new Database(join(dir, 'twice.mbtiles'))
  db.prepare("INSERT INTO metadata VALUES ('format', 'png')").run()
  db.close()
  const logs = []
  const app = await makeApp(t, { paths: [dir] }, { logs })
  for (const id of ['said', 'twice']) {
    const tile = await app.inject({ url: `/${id}/0/0/0`, headers: { 'accept-encoding': 'gzip' } })
    assert.equal(tile.headers['content-type'], 'application/x-protobuf', id)
    assert.equal(tile.headers['content-encoding'], 'gzip', id)
    const tilejson = (await app.inject({ url: `/${id}.json` })).json()
    assert.equal(tilejson.format, 'pbf', id)
    assert.match(tilejson.tiles[0], /\.pbf$/, id)
    assert.deepEqual(tilejson.vector_layers.map((l) => l.id), ['points'], id)
    assert.equal((await app.inject({ url: `/${id}/0/0/0.geojson` })).statusCode, 200, id)
    assert.equal((await app.inject({ url: `/${id}/1/1/1` })).statusCode, 204, `${id}: an absent vector tile`)
    const said = logs.filter((l) => l.set === id && l.declared === 'png')
    assert.equal(said.length, 1, id)
    assert.match(said[0].msg, /the metadata says format 'png' but the tiles are 'pbf'/)
  }
})

test('a PMTiles whose header says another tile type than its tiles are (unknown, or mvt for PNG) is served and described as its tiles are, and says so once', async (t) => {
  const dir = tempDir(t)
  const png = [{ z: 0, x: 0, y: 0, data: PNG }, { z: 1, x: 0, y: 0, data: PNG }]
  writePmtiles(join(dir, 'unknown.pmtiles'), { tiles: png, tileType: 'unknown', tileCompression: 'none' })
  writePmtiles(join(dir, 'wrong.pmtiles'), { tiles: png, tileType: 'mvt', tileCompression: 'none' })
  writePmtiles(join(dir, 'said-png.pmtiles'), { tiles: [{ z: 0, x: 0, y: 0, data: gzipSync(variedMvt()) }, { z: 1, x: 0, y: 0, data: gzipSync(makeMvt(1, 0, 0)) }], tileType: 'png' })
  const logs = []
  const app = await makeApp(t, { paths: [dir] }, { logs })
  const catalog = Object.fromEntries((await app.inject({ url: '/catalog' })).json().map((s) => [s.id, s.format]))
  assert.deepEqual(catalog, { 'said-png': 'pbf', unknown: 'png', wrong: 'png' })
  for (const id of ['unknown', 'wrong']) {
    assert.equal((await app.inject({ url: `/${id}/0/0/0` })).headers['content-type'], 'image/png', id)
    const tilejson = (await app.inject({ url: `/${id}.json` })).json()
    assert.equal(tilejson.format, 'png', id)
    assert.match(tilejson.tiles[0], /\.png$/, id)
    assert.equal(tilejson.vector_layers, undefined, id)
    assert.equal((await app.inject({ url: `/${id}/1/1/1` })).statusCode, 404, `${id}: an absent raster tile`)
    assert.equal((await app.inject({ url: `/${id}/meta` })).json().header.tileType, id === 'wrong' ? 'Mvt' : 'Unknown', 'the header as it is')
  }
  const vector = (await app.inject({ url: '/said-png.json' })).json()
  assert.equal(vector.format, 'pbf')
  assert.deepEqual(vector.vector_layers.map((l) => l.id), ['points'])
  assert.equal((await app.inject({ url: '/said-png/0/0/0.geojson' })).statusCode, 200)
  assert.equal((await app.inject({ url: '/said-png/1/1/1' })).statusCode, 204, 'an absent vector tile')
  const said = logs.filter((l) => l.declared !== undefined).map((l) => [l.set, l.msg])
  assert.deepEqual(said.sort(), [
    ['said-png', "the header says tile type 'png' but the tiles are 'pbf': served as 'pbf'"],
    ['wrong', "the header says tile type 'pbf' but the tiles are 'png': served as 'png'"],
  ])
})

test('an MLT set whose first tile starts with { or [ (a first layer 123 or 91 bytes long) stays MLT, whatever that byte suggests', async (t) => {
  const dir = tempDir(t)
  const tile = (first) => Buffer.concat([Buffer.from([first, 0x01]), Buffer.alloc(first - 1)])
  writeMbtiles(join(dir, 'brace.mbtiles'), { tiles: [{ z: 0, x: 0, y: 0, data: tile(0x7b) }], metadata: { format: 'mlt' } })
  writeMbtiles(join(dir, 'bracket.mbtiles'), { tiles: [{ z: 0, x: 0, y: 0, data: tile(0x5b) }], metadata: { format: 'mlt' } })
  const logs = []
  const app = await makeApp(t, { paths: [dir] }, { logs })
  for (const id of ['brace', 'bracket']) {
    const res = await app.inject({ url: `/${id}/0/0/0` })
    assert.equal(res.statusCode, 200, id)
    assert.equal(res.headers['content-type'], 'application/vnd.maplibre-vector-tile', id)
    assert.equal((await app.inject({ url: `/${id}.json` })).json().encoding, 'mlt', id)
  }
  assert.deepEqual(logs.filter((l) => l.declared !== undefined), [], 'no disagreement said')
})

test('every MVT spec fixture that has content is recognised as protobuf', (t) => {
  const dir = join(FIXTURES, 'spec', 'mvt-fixtures', 'fixtures')
  if (!existsSync(dir)) return t.skip('mvt-fixtures not present')
  let n = 0
  for (const name of readdirSync(dir)) {
    const file = join(dir, name, 'tile.mvt')
    if (!existsSync(file)) continue
    const bytes = readFileSync(file)
    if (bytes.length === 0 || bytes[0] !== 0x1a) continue // some fixtures are deliberately invalid MVT
    assert.equal(describeTile(bytes, { format: 'pbf' }).contentType, 'application/x-protobuf', name)
    assert.equal(describeTile(gzipSync(bytes), { format: 'pbf' }).encoding, 'gzip', name)
    n++
  }
  assert.ok(n > 50)
})

test('Accept-Encoding: q-values, wildcards and the choice of coding', () => {
  assert.equal(acceptMask('gzip, deflate, br'), GZIP | BR | 4)
  assert.equal(acceptMask('br;q=1.0, gzip;q=0'), BR)
  assert.equal(acceptMask('*'), 15)
  assert.equal(acceptMask('gzip;q=0, *'), 15 & ~GZIP, '* speaks only for codings not named')
  assert.equal(acceptMask('*;q=0, br'), BR)
  assert.equal(acceptMask('identity'), 0)
  assert.equal(acceptMask(undefined), 0)
  assert.equal(chooseEncoding('gzip', true, GZIP), 'gzip')
  assert.equal(chooseEncoding('gzip', true, 0), 'identity')
  assert.equal(chooseEncoding('gzip', true, BR), 'br', 'stored gzip, client takes only br')
  assert.equal(chooseEncoding('identity', true, GZIP | BR), 'br', 'made compression: brotli when taken')
  assert.equal(chooseEncoding('identity', true, GZIP), 'gzip')
  assert.equal(chooseEncoding('identity', false, GZIP | BR), 'identity', 'images are never compressed')
  assert.equal(chooseEncoding('br', false, GZIP), 'identity', 'a brotli-stored image is decoded for a gzip-only client')
})

test('a raw tile compressed for a client: brotli when taken, gzip else; smaller when the answer is kept, cheaper when it is made per request', async (t) => {
  const dir = tempDir(t)
  // A raw vector tile with many similar features, as PostGIS tiles are: compression settings show in its size.
  const names = Array.from({ length: 300 }, (_, i) => `Bahnhofstrasse ${i % 97} Zürich ${i % 13}`)
  const raw = makeMvt(0, 0, 0, { names: names.join(';') })
  writeMbtiles(join(dir, 'raw.mbtiles'), { tiles: [{ z: 0, x: 0, y: 0, data: raw }], metadata: { format: 'pbf' } })
  const kept = await makeApp(t, { paths: [dir] })
  const made = await makeApp(t, { paths: [dir], cacheMB: 0 })
  const sizes = {}
  for (const [name, app] of [['kept', kept], ['made', made]]) {
    const br = await app.inject({ url: '/raw/0/0/0', headers: { 'accept-encoding': 'gzip, deflate, br' } })
    assert.equal(br.headers['content-encoding'], 'br', name)
    assert.deepEqual(brotliDecompressSync(br.rawPayload), raw, name)
    const gz = await app.inject({ url: '/raw/0/0/0', headers: { 'accept-encoding': 'gzip' } })
    assert.equal(gz.headers['content-encoding'], 'gzip', name)
    assert.deepEqual(gunzipSync(gz.rawPayload), raw, name)
    sizes[name] = { br: br.rawPayload.length, gzip: gz.rawPayload.length, etag: br.headers.etag }
    const again = await app.inject({ url: '/raw/0/0/0', headers: { 'accept-encoding': 'br', 'if-none-match': br.headers.etag } })
    assert.equal(again.statusCode, 304, `${name}: revalidated`)
  }
  assert.notEqual(sizes.kept.etag, sizes.made.etag, 'other bytes, another strong ETag')
  assert.ok(sizes.kept.br < sizes.kept.gzip, `kept: brotli smaller than gzip (${JSON.stringify(sizes)})`)
  assert.ok(sizes.kept.br < sizes.made.br, `made per request: the fast setting, larger (${JSON.stringify(sizes)})`)
  assert.ok(sizes.made.br < raw.length && sizes.made.gzip < raw.length, 'still compressed')
})

test('the cache is bounded in bytes and de-duplicates concurrent reads of one tile', async (t) => {
  const cache = new TileCache(10_000)
  for (let i = 0; i < 100; i++) cache.set(`k${i}`, { size: 1000 })
  assert.ok(cache.stats.bytes <= 10_000)
  assert.equal(cache.stats.entries, 10)
  cache.set('huge', { size: 20_000 })
  assert.equal(cache.get('huge'), undefined, 'a record bigger than the cache is not stored')

  const dir = tempDir(t)
  writeMbtiles(join(dir, 's.mbtiles'), { tiles: [{ z: 0, x: 0, y: 0, data: gzipSync(makeMvt(0, 0, 0)) }] })
  const app = await makeApp(t, { paths: [dir] })
  const entry = app.catalog.get('s')
  let reads = 0
  const getTile = entry.source.getTile
  // Counts reads of the real source, made asynchronous as a remote file's are (a synchronous read cannot overlap).
  entry.source.getTile = async (...args) => { reads++; await new Promise((resolve) => setTimeout(resolve, 20)); return getTile(...args) }
  const answers = await Promise.all(Array.from({ length: 20 }, () => app.inject({ url: '/s/0/0/0', headers: { 'accept-encoding': 'gzip' } })))
  assert.ok(answers.every((a) => a.statusCode === 200))
  assert.equal(reads, 1, '20 concurrent requests, one read')
  const before = app.tileCache.stats.bytes
  await app.inject({ url: '/s/0/0/0' })
  assert.equal(reads, 1, 'another encoding of a cached tile reads nothing')
  assert.equal(app.tileCache.stats.bytes, before + makeMvt(0, 0, 0).length, 'the decoded copy is weighed too')

  const off = await makeApp(t, { paths: [dir], cacheMB: 0 })
  const offEntry = off.catalog.get('s')
  let offReads = 0
  const offGet = offEntry.source.getTile
  offEntry.source.getTile = (...args) => { offReads++; return offGet(...args) }
  await off.inject({ url: '/s/0/0/0' })
  await off.inject({ url: '/s/0/0/0' })
  assert.equal(offReads, 2, 'cache off: every request reads')
})

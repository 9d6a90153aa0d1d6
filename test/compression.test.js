// Content codings of the answers that are not tiles: glyphs, sprite JSON, styles, TileJSON, /catalog, the home page,
// the viewer's assets and /metrics are sent in brotli or gzip to clients that take it (identity to the others), each
// decoding to exactly the identity body, with Vary: Accept-Encoding, an ETag per coding and its 304; images never.
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { test } from 'node:test'
import zlib from 'node:zlib'
import { FIXTURES, HAVE_FIXTURES, makeApp, needs } from './helpers/app.js'
import { tempDir } from './helpers/data.js'
import { writeLiberty } from './helpers/styles.js'

const DECODE = { gzip: zlib.gunzipSync, br: zlib.brotliDecompressSync }

async function fixtureApp (t) {
  const styles = tempDir(t)
  writeLiberty(styles)
  const sets = ['koh-samui_thailand', 'trails', 'world_cities', 'geography-class-png', 'webp', 'uncompressed_mvt', 'plain_1', 'json']
  return makeApp(t, { paths: sets.map((s) => join(FIXTURES, 'mbtiles', `${s}.mbtiles`)), styles, fonts: join(FIXTURES, 'styles', 'glyphs') })
}

// Vary names Accept-Encoding, once.
const varies = (res) => (res.headers.vary ?? '').split(',').filter((v) => v.trim().toLowerCase() === 'accept-encoding').length === 1

const DOCUMENTS = [
  '/fonts/Roboto%20Regular/0-255.pbf',
  '/styles/liberty/sprite.json',
  '/styles/liberty/style.json',
  '/koh-samui_thailand.json',
  '/catalog',
  '/',
  '/viewer/assets/maplibre-gl.css',
  '/viewer/assets/viewer.js',
]

test('documents are sent in br or gzip as asked, decoding to the identity body, with an ETag and a 304 per coding', async (t) => {
  if (!needs(t, HAVE_FIXTURES, 'the shared fixtures (../shared/fixtures) are not present')) return
  const app = await fixtureApp(t)
  for (const url of DOCUMENTS) {
    const plain = await app.inject({ url })
    assert.equal(plain.statusCode, 200, url)
    assert.ok(plain.rawPayload.length >= 1024, `${url} is large enough to be compressed (${plain.rawPayload.length} bytes)`)
    assert.equal(plain.headers['content-encoding'], undefined, url)
    assert.ok(varies(plain), `${url}: Vary: Accept-Encoding on identity too (${plain.headers.vary})`)
    const identity = await app.inject({ url, headers: { 'accept-encoding': 'identity' } })
    assert.equal(identity.headers['content-encoding'], undefined, url)
    assert.deepEqual(identity.rawPayload, plain.rawPayload, url)
    assert.equal(identity.headers.etag, plain.headers.etag, url)

    const etags = new Set([plain.headers.etag])
    for (const coding of ['gzip', 'br']) {
      const headers = { 'accept-encoding': coding === 'gzip' ? 'gzip, deflate' : 'gzip;q=0, br' }
      const res = await app.inject({ url, headers })
      assert.equal(res.statusCode, 200, `${url} ${coding}`)
      assert.equal(res.headers['content-encoding'], coding, `${url} ${coding}`)
      assert.ok(varies(res), `${url} ${coding}: ${res.headers.vary}`)
      assert.equal(Number(res.headers['content-length']), res.rawPayload.length, `${url} ${coding}: Content-Length`)
      assert.ok(res.rawPayload.length < plain.rawPayload.length * 0.8, `${url} ${coding}: ${res.rawPayload.length} of ${plain.rawPayload.length} bytes`)
      assert.deepEqual(DECODE[coding](res.rawPayload), plain.rawPayload, `${url} ${coding}: decodes to the identity body`)
      assert.equal(res.headers['content-type'], plain.headers['content-type'], url)
      assert.ok(res.headers.etag, `${url} ${coding}: an ETag`)
      etags.add(res.headers.etag)

      const again = await app.inject({ url, headers })
      assert.deepEqual(again.rawPayload, res.rawPayload, `${url} ${coding}: the same bytes again`)
      const head = await app.inject({ method: 'HEAD', url, headers })
      assert.equal(head.statusCode, 200, url)
      assert.equal(head.rawPayload.length, 0, url)
      for (const name of ['content-encoding', 'content-length', 'content-type', 'etag', 'vary']) assert.equal(head.headers[name], res.headers[name], `${url} ${coding} HEAD: ${name}`)

      const revalidated = await app.inject({ url, headers: { ...headers, 'if-none-match': res.headers.etag } })
      assert.equal(revalidated.statusCode, 304, `${url} ${coding}: 304 on its ETag`)
      assert.equal(revalidated.rawPayload.length, 0, url)
      assert.equal(revalidated.headers.etag, res.headers.etag, url)
      assert.equal(revalidated.headers['content-encoding'], undefined, `${url} ${coding}: a 304 has no content`)
      assert.ok(varies(revalidated), `${url} ${coding}: 304 Vary`)
      const other = await app.inject({ url, headers: { ...headers, 'if-none-match': plain.headers.etag } })
      assert.equal(other.statusCode, 200, `${url} ${coding}: the identity ETag is another representation`)
    }
    assert.equal(etags.size, 3, `${url}: an ETag per coding`)
  }
})

test('images are never recompressed; /metrics is compressed per scrape', async (t) => {
  if (!needs(t, HAVE_FIXTURES, 'the shared fixtures (../shared/fixtures) are not present')) return
  const app = await fixtureApp(t)
  for (const url of ['/styles/liberty/sprite.png', '/geography-class-png/0/0/0.png']) {
    const plain = await app.inject({ url })
    const res = await app.inject({ url, headers: { 'accept-encoding': 'gzip, br' } })
    assert.equal(res.statusCode, 200, url)
    assert.equal(res.headers['content-encoding'], undefined, url)
    assert.deepEqual(res.rawPayload, plain.rawPayload, url)
  }
  const sprite = await app.inject({ url: '/styles/liberty/sprite.png', headers: { 'accept-encoding': 'gzip, br' } })
  assert.ok(!varies(sprite), sprite.headers.vary)

  const plain = await app.inject({ url: '/metrics' })
  assert.equal(plain.statusCode, 200)
  assert.equal(plain.headers['content-encoding'], undefined)
  for (const coding of ['gzip', 'br']) {
    const res = await app.inject({ url: '/metrics', headers: { 'accept-encoding': coding } })
    assert.equal(res.headers['content-encoding'], coding)
    assert.ok(varies(res))
    assert.equal(Number(res.headers['content-length']), res.rawPayload.length)
    assert.match(DECODE[coding](res.rawPayload).toString(), /^# HELP /m)
  }
})

test('q-values rank a document\'s codings as they rank a tile\'s: the highest q wins, q=0 refuses, identity refused alone is identity', async (t) => {
  if (!needs(t, HAVE_FIXTURES, 'the shared fixtures (../shared/fixtures) are not present')) return
  const app = await fixtureApp(t)
  const tile = await app.inject({ url: '/koh-samui_thailand/0/0/0.pbf', headers: { 'accept-encoding': 'identity;q=0' } })
  assert.equal(tile.statusCode, 200)
  assert.equal(tile.headers['content-encoding'], undefined, 'a tile for a client refusing identity alone: as it is, not 406')
  const cases = [
    ['br;q=0.1, gzip;q=1', 'gzip'],
    ['br;q=0, gzip', 'gzip'],
    ['gzip;q=0.2, br;q=0.9', 'br'],
    ['br;q=0.5, gzip;q=0.5, identity', undefined],
    ['br;q=0, gzip;q=0', undefined],
    ['identity;q=0', undefined],
  ]
  for (const url of ['/koh-samui_thailand.json', '/viewer/assets/maplibre-gl.css', '/metrics']) {
    for (const [accept, coding] of cases) {
      const headers = { 'accept-encoding': accept }
      const res = await app.inject({ url, headers })
      assert.equal(res.statusCode, 200, `${url} ${accept}`)
      assert.equal(res.headers['content-encoding'], coding, `${url} ${accept}`)
      assert.ok(varies(res), `${url} ${accept}: ${res.headers.vary}`)
      if (url === '/metrics') continue
      const revalidated = await app.inject({ url, headers: { ...headers, 'if-none-match': res.headers.etag } })
      assert.equal(revalidated.statusCode, 304, `${url} ${accept}: 304 on the ETag of the coding sent`)
    }
  }
})

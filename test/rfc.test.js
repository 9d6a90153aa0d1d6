// What goes on the wire, read from raw sockets (inject() would hide what Node and Fastify add): RFC 9110's rules for
// 204 and 304, HEAD, CORS preflights, and validators on metadata answers.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { connect } from 'node:net'
import { once } from 'node:events'
import { join } from 'node:path'
import { makeApp } from './helpers/app.js'
import { PNG, pyramid, tempDir, vectorTiles, writeMbtiles } from './helpers/data.js'

/** One request on its own connection: { status, headers (lower-case names; repeated ones joined), body }. */
async function raw (port, method, path, headers = {}) {
  const socket = connect(port, '127.0.0.1')
  await once(socket, 'connect')
  const lines = Object.entries({ host: `127.0.0.1:${port}`, connection: 'close', ...headers }).map(([k, v]) => `${k}: ${v}\r\n`)
  socket.end(`${method} ${path} HTTP/1.1\r\n${lines.join('')}\r\n`)
  const chunks = []
  for await (const chunk of socket) chunks.push(chunk)
  const all = Buffer.concat(chunks)
  const end = all.indexOf('\r\n\r\n')
  const [statusLine, ...headerLines] = all.subarray(0, end).toString('latin1').split('\r\n')
  const parsed = {}
  for (const line of headerLines) {
    const i = line.indexOf(':')
    const name = line.slice(0, i).toLowerCase()
    const value = line.slice(i + 1).trim()
    parsed[name] = parsed[name] === undefined ? value : `${parsed[name]}, ${value}`
  }
  return { status: Number(statusLine.split(' ')[1]), headers: parsed, body: all.subarray(end + 4) }
}

async function serve (t) {
  const dir = tempDir(t)
  writeMbtiles(join(dir, 'roads.mbtiles'), { tiles: vectorTiles(pyramid(0, 4, 1)), metadata: { format: 'pbf', minzoom: '0', maxzoom: '4' } })
  writeMbtiles(join(dir, 'photo.mbtiles'), { tiles: [{ z: 0, x: 0, y: 0, data: PNG }, { z: 1, x: 0, y: 0, data: PNG }], metadata: { format: 'png' } })
  const app = await makeApp(t, { paths: [dir] })
  await app.listen({ port: 0, host: '127.0.0.1' })
  return app.server.address().port
}

const GZIP = { 'accept-encoding': 'gzip' }

test('204 for an absent tile: no Content-Length, no Content-Type, no body, for GET and HEAD', async (t) => {
  const port = await serve(t)
  for (const method of ['GET', 'HEAD']) {
    const res = await raw(port, method, '/roads/3/7/7.pbf', GZIP)
    assert.equal(res.status, 204, method)
    assert.equal(res.headers['content-length'], undefined, `${method}: a 204 has no Content-Length (RFC 9110 8.6)`)
    assert.equal(res.headers['content-type'], undefined, method)
    assert.equal(res.headers['transfer-encoding'], undefined, method)
    assert.equal(res.body.length, 0, method)
    assert.match(res.headers['cache-control'], /max-age/, `${method}: absent tiles are cacheable`)
  }
})

test('HEAD answers the headers of GET, Content-Length included, without a body', async (t) => {
  const port = await serve(t)
  for (const path of ['/roads/2/0/0.pbf', '/photo/1/0/0.png', '/roads.json', '/catalog', '/list', '/roads/meta', '/']) {
    const get = await raw(port, 'GET', path, GZIP)
    const head = await raw(port, 'HEAD', path, GZIP)
    assert.equal(get.status, 200, path)
    assert.equal(head.status, 200, path)
    assert.equal(Number(get.headers['content-length']), get.body.length, `${path}: GET's Content-Length is its body's`)
    assert.equal(head.headers['content-length'], get.headers['content-length'], `${path}: HEAD's Content-Length is GET's`)
    for (const name of ['content-type', 'content-encoding', 'etag', 'cache-control', 'vary']) {
      assert.equal(head.headers[name], get.headers[name], `${path}: ${name}`)
    }
    assert.equal(head.body.length, 0, `${path}: HEAD has no body`)
  }
})

test('304: the 200\'s ETag, Cache-Control and Vary; no Content-Type, Content-Encoding or Content-Length; tiles and metadata', async (t) => {
  const port = await serve(t)
  for (const path of ['/roads/2/0/0.pbf', '/photo/0/0/0', '/roads.json', '/catalog', '/list', '/roads/meta', '/']) {
    const ok = await raw(port, 'GET', path, GZIP)
    assert.equal(ok.status, 200, path)
    assert.match(ok.headers.etag, /^"[^"]+"$/, `${path}: strong ETag`)
    assert.ok(ok.headers['cache-control'], `${path}: Cache-Control`)
    for (const method of ['GET', 'HEAD']) {
      const res = await raw(port, method, path, { ...GZIP, 'if-none-match': ok.headers.etag })
      assert.equal(res.status, 304, `${method} ${path}`)
      assert.equal(res.headers.etag, ok.headers.etag, `${method} ${path}`)
      assert.equal(res.headers['cache-control'], ok.headers['cache-control'], `${method} ${path}`)
      assert.equal(res.headers.vary, ok.headers.vary, `${method} ${path}`)
      assert.equal(res.headers['content-type'], undefined, `${method} ${path}: no Content-Type`)
      assert.equal(res.headers['content-encoding'], undefined, `${method} ${path}: no Content-Encoding`)
      assert.ok(res.headers['content-length'] === undefined || res.headers['content-length'] === ok.headers['content-length'], `${method} ${path}: Content-Length ${res.headers['content-length']}`)
      assert.equal(res.body.length, 0, `${method} ${path}`)
    }
    const changed = await raw(port, 'GET', path, { ...GZIP, 'if-none-match': '"something-else"' })
    assert.equal(changed.status, 200, `${path}: another ETag gets the body`)
  }
})

test('metadata answers: configured Cache-Control, Vary: Host; /health never cached; a zoom outside the range is cacheable', async (t) => {
  const port = await serve(t)
  const tj = await raw(port, 'GET', '/roads.json')
  assert.equal(tj.headers['cache-control'], 'public, max-age=60')
  assert.match(tj.headers.vary, /\bHost\b/, 'links depend on Host')
  assert.equal((await raw(port, 'GET', '/health')).headers['cache-control'], 'no-store')
  const outside = await raw(port, 'GET', '/roads/9/0/0.pbf')
  assert.equal(outside.status, 404)
  assert.equal(outside.headers['cache-control'], 'public, max-age=3600', 'like an absent tile')
})

test('CORS preflight: 204 with the allowed methods and no Content-Length', async (t) => {
  const port = await serve(t)
  const res = await raw(port, 'OPTIONS', '/roads/2/0/0.pbf', { origin: 'https://maps.example.com', 'access-control-request-method': 'GET', 'access-control-request-headers': 'if-none-match' })
  assert.equal(res.status, 204)
  assert.equal(res.headers['content-length'], undefined, 'a 204 has no Content-Length (RFC 9110 8.6)')
  assert.equal(res.headers['access-control-allow-origin'], '*')
  assert.match(res.headers['access-control-allow-methods'], /GET/)
  assert.equal(res.headers['access-control-allow-headers'], 'if-none-match')
  assert.equal(res.body.length, 0)
})

test('a plain OPTIONS is 200 with Allow and Content-Length: 0 (RFC 9110 9.3.7), CORS on or off; `OPTIONS *` the server\'s; `GET *` a 400', async (t) => {
  const port = await serve(t)
  const dir = tempDir(t)
  writeMbtiles(join(dir, 'roads.mbtiles'), { tiles: vectorTiles(pyramid(0, 1, 1)), metadata: { format: 'pbf' } })
  const off = await makeApp(t, { paths: [dir], cors: false })
  await off.listen({ port: 0, host: '127.0.0.1' })
  for (const at of [port, off.server.address().port]) {
    for (const path of ['/roads/2/0/0.pbf', '/roads.json', '*']) {
      const res = await raw(at, 'OPTIONS', path)
      assert.equal(res.status, 200, path)
      assert.equal(res.headers.allow, 'GET, HEAD, OPTIONS', path)
      assert.equal(res.headers['content-length'], '0', path)
      assert.equal(res.body.length, 0, path)
    }
    assert.equal((await raw(at, 'OPTIONS', '/no/such/route/at/all')).status, 404)
    const refused = await raw(at, 'DELETE', '/roads.json')
    assert.equal(refused.status, 405)
    assert.equal(refused.headers.allow, 'GET, HEAD, OPTIONS', 'a 405 names OPTIONS, which is served')
  }
  // The asterisk form is OPTIONS's only (RFC 9112 3.2.4): it was the home page.
  for (const method of ['GET', 'HEAD']) assert.equal((await raw(port, method, '*')).status, 400, method)
})

test('If-Match on tiles (RFC 9110 13.1.1): 412 unless it names the answer\'s ETag strongly or is `*` on an existing tile', async (t) => {
  const port = await serve(t)
  const first = await raw(port, 'GET', '/roads/2/0/0.pbf', GZIP)
  const etag = first.headers.etag
  for (const method of ['GET', 'HEAD']) {
    for (const [ifMatch, status] of [['"nope"', 412], [`W/${etag}`, 412], ['"nope", ' + etag, 200], [etag, 200], ['*', 200]]) {
      const res = await raw(port, method, '/roads/2/0/0.pbf', { ...GZIP, 'if-match': ifMatch })
      assert.equal(res.status, status, `${method} If-Match: ${ifMatch}`)
      if (status === 412) assert.equal(res.headers.etag, undefined, 'a 412 is not the tile')
    }
    // The identity answer has an ETag of its own: the gzip one does not match it.
    assert.equal((await raw(port, method, '/roads/2/0/0.pbf', { 'if-match': etag })).status, 412, method)
    // No tile: If-Match, even `*`, is false.
    assert.equal((await raw(port, method, '/roads/3/7/7.pbf', { ...GZIP, 'if-match': '*' })).status, 412, method)
  }
  const failed = await raw(port, 'GET', '/roads/2/0/0.pbf', { ...GZIP, 'if-match': '"nope"' })
  assert.equal(failed.headers['content-type'], 'application/json; charset=utf-8')
  assert.equal(JSON.parse(failed.body).statusCode, 412)
  // If-Match is evaluated before If-None-Match (RFC 9110 13.2.2).
  assert.equal((await raw(port, 'GET', '/roads/2/0/0.pbf', { ...GZIP, 'if-match': etag, 'if-none-match': etag })).status, 304)
})

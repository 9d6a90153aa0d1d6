// Errors by type, mapped once (lib/errors.js): each type its status and Fastify's body shape; a bug inside a source is a
// 500 that shows nothing of itself and is logged once with its stack; a backend that is down is a 503 for that set.
// Real sets on generated data; to make a source fail, its getTile (the collaborator) is replaced on the open set.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdirSync, writeFileSync } from 'node:fs'
import { request as httpRequest } from 'node:http'
import { connect } from 'node:net'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { gzipSync } from 'node:zlib'
import pino from 'pino'
import { buildApp } from '../lib/app.js'
import { loadConfig } from '../lib/config.js'
import { BadRequest, NotFound, Unavailable, isBackendFailure } from '../lib/errors.js'
import { OptionError } from '../lib/sources/cog.js'
import { PNG, makeMvt, pyramid, tempDir, vectorTiles, writeMbtiles, writePmtiles } from './helpers/data.js'

const ERROR = 50 // pino's level number for error
const LONG_NAME = 'a-set-whose-file-name-is-long-enough-for-a-short-url-limit'

/** An app on a few real sets, its log lines captured (parsed pino JSON); `overrides` of its config. */
async function errorApp (t, overrides = {}) {
  const dir = tempDir(t)
  writeMbtiles(join(dir, 'roads.mbtiles'), { tiles: vectorTiles(pyramid(0, 3)), metadata: { format: 'pbf', minzoom: '0', maxzoom: '3' } })
  writePmtiles(join(dir, 'pm.pmtiles'), { tiles: vectorTiles(pyramid(0, 3)) })
  writeMbtiles(join(dir, 'photo.mbtiles'), { tiles: pyramid(0, 2).map(([z, x, y]) => ({ z, x, y, data: PNG })), metadata: { format: 'png' } })
  // Gzip's magic and header, then bytes that do not inflate: a tile damaged in the file.
  writeMbtiles(join(dir, 'damaged.mbtiles'), { tiles: [{ z: 0, x: 0, y: 0, data: Buffer.concat([gzipSync(makeMvt(0, 0, 0)).subarray(0, 10), Buffer.alloc(40, 0xff)]) }], metadata: { format: 'pbf' } })
  writeFileSync(join(dir, 'broken.pmtiles'), 'not a PMTiles archive, only text '.repeat(10))
  const lines = []
  const stream = new Writable({ write (chunk, encoding, done) { lines.push(JSON.parse(chunk)); done() } })
  writeMbtiles(join(dir, `${LONG_NAME}.mbtiles`), { tiles: vectorTiles(pyramid(0, 1)), metadata: { format: 'pbf' } })
  const { config } = loadConfig({ overrides: { paths: [dir], logLevel: 'info', watch: false, demo: false, ...overrides } })
  const app = await buildApp(config, { loggerInstance: pino({ level: 'info' }, stream) })
  t.after(() => app.close())
  const errorsSince = (from) => lines.slice(from).filter((l) => l.level >= ERROR)
  return { app, lines, errorsSince, dir }
}

const bodyKeys = (res) => Object.keys(res.json()).sort()

test('each error type answers its status in Fastify\'s shape, and none of them is logged as an error', async (t) => {
  const { app, lines, errorsSince } = await errorApp(t)
  const from = lines.length
  const cases = [
    // [url, status, message]
    ['/roads/2/4/0', 400, /tile 2\/4\/0 is outside the 2\^2 grid/],
    ['/roads/31/0/0', 400, /zoom 31 is above 30/],
    ['/roads/a/0/0', 400, /^'a\/0\/0' is not a tile address$/], // digits only, checked by lib/resolve.js
    ['/nope/0/0/0', 404, /^no tileset 'nope'$/],
    ['/nope.json', 404, /^no tileset 'nope'$/],
    ['/nope/meta', 404, /^no tileset 'nope'$/],
    ['/roads/5/0/0', 404, /^zoom 5 is outside roads's range 0-3$/],
    ['/roads/1/0/0@2x.pbf', 404, /^roads has no @2x tiles$/],
    ['/photo/2/3/3', 404, /^no tile at these coordinates$/],
    ['/broken/0/0/0', 503, /^tileset 'broken' is unavailable: /],
    ['/broken.json', 503, /^tileset 'broken' is unavailable: /],
    ['/broken/meta', 503, /^tileset 'broken' is unavailable: /],
  ]
  for (const [url, status, message] of cases) {
    const res = await app.inject({ url })
    assert.equal(res.statusCode, status, url)
    assert.equal(res.headers['content-type'], 'application/json; charset=utf-8', url)
    assert.deepEqual(bodyKeys(res), ['error', 'message', 'statusCode'], url)
    assert.equal(res.json().statusCode, status, url)
    assert.equal(res.json().error, { 400: 'Bad Request', 404: 'Not Found', 503: 'Service Unavailable' }[status], url)
    assert.match(res.json().message, message, url)
    assert.equal(res.headers['retry-after'], status === 503 ? '10' : undefined, `${url}: Retry-After only on 503`)
  }
  // A zoom outside the range and an absent tile are as cacheable as the set's tiles; the others say nothing.
  assert.equal((await app.inject({ url: '/roads/5/0/0' })).headers['cache-control'], 'public, max-age=3600')
  assert.equal((await app.inject({ url: '/photo/2/3/3' })).headers['cache-control'], 'public, max-age=3600')
  assert.equal((await app.inject({ url: '/nope/0/0/0' })).headers['cache-control'], undefined)
  const head = await app.inject({ method: 'HEAD', url: '/broken/0/0/0' })
  assert.equal(head.statusCode, 503)
  assert.equal(head.rawPayload.length, 0)
  assert.deepEqual(errorsSince(from), [], 'answers, not failures: nothing logged at error level')
})

test('a bug inside a source is a 500 "internal error": logged once with its stack, never shown, and the server keeps serving', async (t) => {
  const { app, lines, errorsSince } = await errorApp(t)
  const source = app.catalog.get('roads').source
  const getTile = source.getTile
  const bugs = [
    () => { throw new TypeError("Cannot read properties of undefined (reading 'secretColumn')") }, // thrown at once
    async () => { throw new RangeError('Invalid array length at /srv/secret/path') }, // a rejected promise
    async () => { throw new ReferenceError('secretVariable is not defined') },
    async () => { throw new Error('an invariant of the secret source broke') }, // a plain Error nobody recognises
    async () => { throw Object.assign(new Error('syntax error at or near "SELEC"'), { code: '42601', severity: 'ERROR' }) }, // our SQL
  ]
  for (const bug of bugs) {
    source.getTile = bug
    const from = lines.length
    const res = await app.inject({ url: '/roads/1/0/0', headers: { 'accept-encoding': 'gzip' } })
    assert.equal(res.statusCode, 500)
    assert.deepEqual(res.json(), { statusCode: 500, error: 'Internal Server Error', message: 'internal error' })
    assert.doesNotMatch(res.payload, /secret|SELEC|invariant|TypeError|RangeError|ReferenceError|\bat\b/, 'no message, name or stack in the body')
    assert.equal(res.headers['retry-after'], undefined)
    const logged = errorsSince(from)
    assert.equal(logged.length, 1, `exactly one error line, got ${JSON.stringify(logged)}`)
    assert.equal(logged[0].msg, 'request failed')
    assert.match(logged[0].err.stack, /errors\.test\.js:\d+/, 'the stack is in the log')
    assert.equal(logged[0].url, '/roads/1/0/0')

    // The server keeps serving: another set at once, and this one once the bug is gone (the failure was not cached).
    assert.equal((await app.inject({ url: '/pm/1/0/0' })).statusCode, 200)
    source.getTile = getTile
    assert.equal((await app.inject({ url: '/roads/1/0/0' })).statusCode, 200)
    app.tileCache.purge('roads')
  }
  assert.equal(app.catalog.get('roads').errors.size, 0, 'a bug is not a read failure of the set')

  // Concurrent requests for one cold tile share one read: each is answered 500, each logged once.
  let reads = 0
  source.getTile = async () => {
    reads++
    await new Promise((resolve) => setTimeout(resolve, 20))
    throw new TypeError('x is not a function')
  }
  const from = lines.length
  const answers = await Promise.all([0, 1, 2].map(() => app.inject({ url: '/roads/2/1/1' })))
  assert.deepEqual(answers.map((r) => r.statusCode), [500, 500, 500])
  assert.equal(reads, 1)
  assert.equal(errorsSince(from).length, 3)
})

test('a bug while resolving a request (a set\'s option parser) is a 500 too; an option the set refuses is a 400', async (t) => {
  const { app, errorsSince, lines } = await errorApp(t)
  const source = app.catalog.get('roads').source
  source.parseQuery = (query) => {
    if (query.bidx === '9') throw new OptionError('bidx 9 is not a band of this file (1-3)') // COG's option error type
    if (query.bidx === 'bug') return query.missing.value
    return {}
  }
  const from = lines.length
  for (const url of ['/roads/0/0/0?bidx=9', '/roads.json?bidx=9']) {
    const res = await app.inject({ url })
    assert.equal(res.statusCode, 400, url)
    assert.deepEqual(res.json(), { statusCode: 400, error: 'Bad Request', message: 'bidx 9 is not a band of this file (1-3)' })
  }
  assert.deepEqual(errorsSince(from), [])
  for (const url of ['/roads/0/0/0?bidx=bug', '/roads.json?bidx=bug']) {
    const res = await app.inject({ url })
    assert.equal(res.statusCode, 500, url)
    assert.equal(res.json().message, 'internal error')
  }
  assert.equal(errorsSince(from).length, 2)
  assert.equal((await app.inject({ url: '/roads/0/0/0' })).statusCode, 200)
  assert.ok(new OptionError('x') instanceof BadRequest, 'COG\'s OptionError is the BadRequest type')
})

test('a backend that is down or busy is a 503 naming the set, with Retry-After; each distinct failure logged once', async (t) => {
  const { app, lines, errorsSince } = await errorApp(t)
  const entry = app.catalog.get('roads')
  const failures = [
    Object.assign(new Error('connect ECONNREFUSED 10.1.2.3:5432'), { code: 'ECONNREFUSED' }), // database gone
    Object.assign(new Error('canceling statement due to statement timeout'), { code: '57014', severity: 'ERROR' }), // pg
    Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01', severity: 'FATAL' }),
    new Error('Connection terminated unexpectedly'), // pg, no code
    new Error('timeout exceeded when trying to connect'), // pg-pool
    Object.assign(new Error('EIO: i/o error, read'), { code: 'EIO' }), // a disk going bad
    Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' }),
    new TypeError('fetch failed', { cause: Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }) }), // remote
    new Error('Bad response code: 502'), // pmtiles over HTTP
    new Unavailable('the archive is being replaced'), // a source that knows
  ]
  for (const failure of failures) {
    entry.source.getTile = async () => { throw failure }
    const from = lines.length
    const res = await app.inject({ url: '/roads/1/0/0' })
    assert.equal(res.statusCode, 503, failure.message)
    assert.equal(res.headers['retry-after'], '10')
    assert.deepEqual(res.json(), { statusCode: 503, error: 'Service Unavailable', message: "tileset 'roads' could not read this tile" })
    assert.deepEqual(errorsSince(from).map((l) => [l.msg, l.set, l.reason]), [['tile read failed', 'roads', failure.message]], 'logged the first time')
    const again = await app.inject({ url: '/roads/1/0/0' })
    assert.equal(again.statusCode, 503)
    assert.deepEqual(errorsSince(from).length, 1, 'not logged again')
    assert.equal((await app.inject({ url: '/pm/1/0/0' })).statusCode, 200, 'the other sets keep serving')
  }
  assert.equal(entry.errors.size, failures.length)
})

test('a stored tile that cannot be decoded for the client is a 503 for that set, the bytes passed through to those who take them', async (t) => {
  const { app, lines, errorsSince } = await errorApp(t)
  const gz = await app.inject({ url: '/damaged/0/0/0', headers: { 'accept-encoding': 'gzip' } })
  assert.equal(gz.statusCode, 200, 'passed through untouched: the client decodes')
  const from = lines.length
  const plain = await app.inject({ url: '/damaged/0/0/0' })
  assert.equal(plain.statusCode, 503)
  assert.equal(plain.json().message, "tileset 'damaged' could not read this tile")
  assert.equal(errorsSince(from).length, 1)
  assert.equal(errorsSince(from)[0].set, 'damaged')
})

test('how a source\'s error is classified: its backend failing (503) or a bug (500)', () => {
  const coded = (message, code, extra) => Object.assign(new Error(message), { code, ...extra })
  const pg = (code) => coded('pg says no', code, { severity: 'ERROR' })
  const down = [
    new Unavailable('a source that knows'),
    coded('x', 'ECONNREFUSED'), coded('x', 'ETIMEDOUT'), coded('x', 'ENOENT'), coded('x', 'EIO'), coded('x', 'UND_ERR_SOCKET'),
    coded('x', 'SQLITE_IOERR_READ'), coded('x', 'SQLITE_CORRUPT'), coded('x', 'Z_DATA_ERROR'),
    pg('08006'), pg('57014'), pg('57P01'), pg('53300'), pg('42P01'), pg('42703'),
    pg('P0001'), pg('P0004'), pg('38001'), pg('22012'), // a tile function's RAISE or ASSERT, a routine's error, x / 0
    pg('22P02'), // data that cannot be read: a view's cast that does not fit (a client's values are a 400 before this)
    pg('42501'), pg('3F000'), pg('40001'), pg('55006'), pg('HV00N'), pg('54001'), // a grant revoked, a schema dropped, …
    pg('0A000'), pg('21000'), pg('23505'), pg('20000'), pg('U0001'), // what a view's function raises, a code of its own
    new Error('Connection terminated'), new Error('Query read timeout'), new Error('Bad response code: 500'),
    new Error('Task queue is at limit'), new Error('connect ECONNREFUSED 127.0.0.1:80'), // a worker's error, code lost
    new TypeError('fetch failed', { cause: coded('getaddrinfo ENOTFOUND example', 'ENOTFOUND') }),
    Object.assign(new Error('The operation was aborted due to timeout'), { name: 'TimeoutError' }),
  ]
  const bugs = [
    new TypeError('x is not a function'), new RangeError('Invalid array length'), new ReferenceError('y is not defined'),
    new SyntaxError('Unexpected token'), new Error('something nobody expected'),
    pg('42601'), pg('42804'), pg('42702'), pg('26000'), pg('25P02'), pg('34000'), // our statement, or its state
    coded('x', 'ERR_INVALID_ARG_TYPE'), new TypeError('Connection terminated'), // a TypeError is a bug whatever it says
    new TypeError('fetch failed'), // no network cause: a bad URL
    new BadRequest('an answer, not a failure'), new NotFound('an answer, not a failure'), 'a string', null, undefined,
  ]
  for (const err of down) assert.equal(isBackendFailure(err), true, `${err?.name}: ${err?.message} (${err?.code})`)
  for (const err of bugs) assert.equal(isBackendFailure(err), false, `${err?.name}: ${err?.message} (${err?.code})`)
})

test('limits and hostile addresses: 414 past the URL and query bounds, 400 past the composite bound, 400/404 for NUL bytes, overlong segments, huge and negative numbers; never a 500', async (t) => {
  const { app, lines, errorsSince } = await errorApp(t)
  const from = lines.length
  const parts = (n) => Array.from({ length: n }, (_, i) => `s${i}`).join(',')
  const cases = [
    // [url, status, message]
    ['/roads/0/0/0%00', 400, /is not a tile address/],
    ['/roads/0/0/0.pbf%00', 400, /is not a tile address/],
    ['/roads/0/0%00/0', 400, /is not a tile address/],
    ['/roads%00/0/0/0', 404, /^no tileset/],
    ['/roads%00.json', 404, /^no tileset/],
    ['/%00', 404, /^no tileset/],
    ['/roads/99999999999/0/0', 400, /is not a tile address/],
    ['/roads/-1/0/0', 400, /is not a tile address/],
    ['/roads/1/-1/0', 400, /is not a tile address/],
    ['/roads/1/0/-1.pbf', 400, /is not a tile address/],
    ['/roads/1/99999999999999999999/0', 400, /is not a tile address/],
    ['/roads/3/42949672960/0', 400, /is not a tile address/], // 11 digits: no coordinate of a grid of 2^30
    ['/roads/3/4294967296/0', 400, /outside the 2\^3 grid/],
    ['/roads/1e3/0/0', 400, /is not a tile address/],
    ['/roads/1/0/0.' + 'x'.repeat(9), 400, /is not a tile address/],
    ['/' + 'a'.repeat(600) + '/0/0/0', 414, /^a path segment is at most 512 characters$/],
    ['/roads/0/0/' + '1'.repeat(600), 414, /^a path segment is at most 512 characters$/],
    ['/' + 'a'.repeat(600) + '.json', 414, /^a path segment is at most 512 characters$/],
    ['/roads.json?' + 'x'.repeat(4097), 414, /^a query string is at most 4096 characters$/],
    ['/roads/0/0/0?' + 'a=1&'.repeat(1100), 414, /^a query string is at most 4096 characters$/],
    ['/roads/0/0/0?' + 'a=1&'.repeat(1000), 200, null], // under it: the set ignores what it does not take
    ['/' + 'r/'.repeat(4100), 414, /^a URL is at most 8192 characters$/],
    [`/${parts(17)}/0/0/0`, 400, /^a composite names at most 16 sets$/],
    [`/${parts(17)}.json`, 400, /^a composite names at most 16 sets$/],
    [`/${parts(16)}/0/0/0`, 404, /^no tileset/], // within the bound: simply no such sets
    ['/roads,pm/0/0/0', 400, /^'roads' cannot be part of a composite: only PostGIS tables and functions/], // files are no parts
    ['/roads,pm.json', 400, /^'roads' cannot be part of a composite/],
    ['/roads,nothing/0/0/0', 404, /^no tileset 'roads,nothing'$/],
    ['/roads.json?x=%FF', 400, /^the query string has a malformed %-escape/], // no UTF-8: the parser kept `%FF` as text
    ['/roads.json?x=%zz', 400, /^the query string has a malformed %-escape/],
  ]
  for (const [url, status, message] of cases) {
    const res = await app.inject({ url })
    assert.equal(res.statusCode, status, `${url.slice(0, 80)}: ${res.body.slice(0, 200)}`)
    if (message === null) continue
    assert.deepEqual(bodyKeys(res), ['error', 'message', 'statusCode'], url.slice(0, 80))
    assert.match(res.json().message, message, url.slice(0, 80))
  }
  assert.deepEqual(errorsSince(from), [], 'refusals, not failures: nothing logged as an error')
  assert.equal(lines.slice(from).filter((l) => l.msg === 'URL too long').length, 3, 'each 414 past our bounds logged once')

  // Past Node's own header limit (16 KiB with the request line): Node answers 431 itself, and the server goes on.
  await app.listen({ port: 0, host: '127.0.0.1' })
  const port = app.server.address().port
  // On a raw socket: Node answers 431 and closes at once, which node:http's client reports as a hang-up.
  const raw = (path) => new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1')
    const chunks = []
    socket.on('data', (c) => chunks.push(c))
    socket.on('error', () => {})
    socket.on('close', () => resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(Buffer.concat(chunks).toString('latin1'))?.[1])))
    socket.write(`GET ${path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n`)
  })
  assert.equal(await raw('/roads/0/0/0?' + 'x'.repeat(20_000)), 431)
  assert.equal(await raw('/roads/1/0/0.pbf'), 200)
})

test('limits are configurable, and hold for tiles the front answers too', async (t) => {
  const { app } = await errorApp(t, { limits: { maxUrlLength: 64, maxQueryLength: 16, maxCompositeParts: 2 } })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const port = app.server.address().port
  const get = (path) => new Promise((resolve, reject) => {
    httpRequest({ host: '127.0.0.1', port, path }, (res) => {
      const chunks = []
      res.on('data', (c) => chunks.push(c))
      res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString() }))
    }).on('error', reject).end()
  })
  const long = `/${LONG_NAME}/0/0/0.pbf` // a tile the front would answer, 5 characters past the bound
  assert.equal(long.length, 69)
  const refused = await get(long)
  assert.equal(refused.status, 414)
  assert.equal(JSON.parse(refused.body).message, 'a URL is at most 64 characters')
  assert.equal((await get(`/${LONG_NAME}.json`)).status, 200, 'the same set, by a shorter URL')
  assert.equal((await get('/roads.json?a=1&b=2&c=3&d=4&e=5')).status, 414)
  assert.equal((await get('/roads.json?a=1&b=2')).status, 200)
  assert.equal(JSON.parse((await get('/x,y,z/0/0/0')).body).message, 'a composite names at most 2 sets')
})

test('a static image too large is a 400 whatever the renderer\'s state (rendering off: 503 only for images it could make)', async (t) => {
  const dir = tempDir(t)
  mkdirSync(join(dir, 'styles'))
  writeFileSync(join(dir, 'styles', 'plain.json'), JSON.stringify({ version: 8, sources: {}, layers: [] }))
  const { app } = await errorApp(t, { styles: join(dir, 'styles'), render: { backend: 'off', maxSize: 1000 } })
  for (const [url, status, message] of [
    ['/styles/plain/static/0,0,2/1001x10.png', 400, /^an image is 1 to 1000 pixels on each side, its @2x or @3x scale included$/],
    ['/styles/plain/static/0,0,2/10x99999.png', 400, /^an image is 1 to 1000 pixels on each side, its @2x or @3x scale included$/],
    ['/styles/plain/static/0,0,2/999999x10@2x.png', 400, /is not a size/],
    ['/styles/plain/static/0,0,2/0x10.png', 400, /^an image is 1 to 1000 pixels on each side, its @2x or @3x scale included$/],
    ['/styles/plain/static/0,0,2/400x400@3x.png', 400, /^an image is 1 to 1000 pixels on each side, its @2x or @3x scale included$/], // 1200 px drawn
    ['/styles/nope/static/0,0,2/1001x10.png', 404, /^no style 'nope'$/],
    ['/styles/plain/static/0,0,2/1000x1000.png', 503, /cannot be rendered: rendering is turned off/],
  ]) {
    const res = await app.inject({ url })
    assert.equal(res.statusCode, status, url)
    assert.match(res.json().message, message, url)
  }
})

test('options configured for a set id that no set has are said in a warning at start; those that match are not', async (t) => {
  // `plain` is a style: its rendered tiles take the options of its id.
  const styles = tempDir(t)
  writeFileSync(join(styles, 'plain.json'), JSON.stringify({ version: 8, sources: {}, layers: [] }))
  const { lines } = await errorApp(t, { styles, sets: { trails: { missingStatus: 404 }, roads: { cacheControl: 'no-store' }, plain: { cacheControl: 'max-age=7' } } })
  const warned = lines.filter((l) => /configured options name no set/.test(l.msg))
  assert.deepEqual(warned.map((l) => l.sets), [['trails']])
})

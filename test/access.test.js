// Access control (API keys, lib/access.js) and the host allow-list (lib/urls.js): who is let in, what a refused
// request is told and what is logged, that the key a client gave is carried into every link it is given (so a
// MapLibre client given `?key=` once keeps working), that the key never splits the tile cache, and that a Host off
// the allow-list never reaches an answer.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdirSync, writeFileSync } from 'node:fs'
import { request as httpRequest } from 'node:http'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import pino from 'pino'
import { PbfWriter } from 'pbf'
import { buildApp } from '../lib/app.js'
import { ConfigError, loadConfig } from '../lib/config.js'
import { makeApp } from './helpers/app.js'
import { PNG, pyramid, tempDir, vectorTiles, writeMbtiles } from './helpers/data.js'

const KEY = 'k3y-for/tests+1' // characters a URL must encode
const ENC = encodeURIComponent(KEY)

function glyphPbf (name, range) {
  const w = new PbfWriter()
  w.writeMessage(1, (_, p) => { p.writeStringField(1, name); p.writeStringField(2, range) }, null)
  return Buffer.from(w.finish())
}

/** Tiles, a style naming them with a sprite and glyphs, fonts: what a MapLibre client asks for. */
function setUp (t) {
  const dir = tempDir(t)
  const tiles = join(dir, 'tiles')
  mkdirSync(tiles)
  writeMbtiles(join(tiles, 'roads.mbtiles'), { tiles: vectorTiles(pyramid(0, 2)), metadata: { format: 'pbf' } })
  writeMbtiles(join(tiles, 'photo.mbtiles'), { tiles: [{ z: 0, x: 0, y: 0, data: PNG }], metadata: { format: 'png' } })
  const styles = join(dir, 'styles')
  mkdirSync(join(styles, 'city', 'sprites'), { recursive: true })
  writeFileSync(join(styles, 'city', 'style.json'), JSON.stringify({
    version: 8,
    name: 'City',
    sources: { roads: { type: 'vector', url: 'mbtiles://roads' } },
    sprite: 'sprites/city',
    glyphs: '{fontstack}/{range}.pbf',
    layers: [{ id: 'bg', type: 'background', paint: { 'background-color': '#fff' } }],
  }))
  writeFileSync(join(styles, 'city', 'sprites', 'city.json'), JSON.stringify({ dot: { x: 0, y: 0, width: 1, height: 1, pixelRatio: 1 } }))
  writeFileSync(join(styles, 'city', 'sprites', 'city.png'), PNG)
  const fonts = join(dir, 'fonts')
  mkdirSync(join(fonts, 'Sans Regular'), { recursive: true })
  writeFileSync(join(fonts, 'Sans Regular', '0-255.pbf'), glyphPbf('Sans Regular', '0-255'))
  return { paths: [tiles], styles, fonts, render: { backend: 'off' } }
}

/** An app with keys whose log lines are kept (parsed), listening on 127.0.0.1. */
async function keyedApp (t, overrides = {}) {
  const lines = []
  const stream = new Writable({ write (chunk, _, done) { lines.push(JSON.parse(chunk)); done() } })
  const { config } = loadConfig({ overrides: { ...setUp(t), apiKeys: [KEY, 'second'], logLevel: 'info', watch: false, demo: false, ...overrides } })
  const app = await buildApp(config, { loggerInstance: pino({ level: 'info' }, stream) })
  t.after(() => app.close())
  let seenByFastify = 0
  app.addHook('onRequest', (request, reply, done) => { seenByFastify++; done() })
  await app.listen({ port: 0, host: '127.0.0.1' })
  return { app, lines, port: app.server.address().port, seenByFastify: () => seenByFastify }
}

/** One request over real HTTP (the tile front sees it): { status, headers, body }. */
const get = (port, path, headers = {}, method = 'GET') => new Promise((resolve, reject) => {
  httpRequest({ host: '127.0.0.1', port, path, headers, method }, (res) => {
    const chunks = []
    res.on('data', (c) => chunks.push(c))
    res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }))
  }).on('error', reject).end()
})

/** The path and query of an absolute link, for inject(). */
const local = (url) => { const u = new URL(url); return u.pathname + u.search }

test('off by default: nothing is asked for, and `key` is a query parameter like any other', async (t) => {
  const app = await makeApp(t, setUp(t))
  const source = app.catalog.get('roads').source
  const seen = []
  source.parseQuery = (query) => { seen.push({ ...query }); return {} } // a set that takes options
  const res = await app.inject({ url: '/roads/0/0/0?key=anything&color=red' })
  assert.equal(res.statusCode, 200)
  assert.deepEqual(seen, [{ key: 'anything', color: 'red' }])
  const tj = await app.inject({ url: '/roads.json?key=anything' })
  assert.equal(tj.json().tiles[0], 'http://localhost:80/roads/{z}/{x}/{y}.pbf?key=anything', 'passed on as any option is')
  assert.equal(tj.headers.vary, 'Host')
})

test('with keys: a missing or wrong key is a 401 in the errors\' shape, logged once per address and reason, the key never echoed', async (t) => {
  const { app, lines, port } = await keyedApp(t)
  const cases = [
    // [how, path, headers, message]
    ['no key', '/roads.json', {}, /^an API key is required: send it in the X-API-Key header or as \?key=$/],
    ['no key, a tile (the front)', '/roads/0/0/0.pbf', {}, /^an API key is required/],
    ['wrong header', '/roads/0/0/0.pbf', { 'x-api-key': 'wrong-secret-1' }, /^this API key is not accepted$/],
    ['wrong query', '/roads.json?key=wrong-secret-2', {}, /^this API key is not accepted$/],
    ['repeated query key', `/roads.json?key=${ENC}&key=${ENC}`, {}, /^this API key is not accepted$/],
    ['a key of another case', '/catalog', { 'x-api-key': KEY.toUpperCase() }, /^this API key is not accepted$/],
    ['no key, the home page', '/', {}, /^an API key is required/],
    ['no key, an unknown route', '/no/such/thing', {}, /^an API key is required/],
  ]
  const from = lines.length
  for (const [how, path, headers, message] of cases) {
    const res = await get(port, path, headers)
    assert.equal(res.status, 401, how)
    assert.equal(res.headers['content-type'], 'application/json; charset=utf-8', how)
    const body = JSON.parse(res.body)
    assert.deepEqual(Object.keys(body).sort(), ['error', 'message', 'statusCode'], how)
    assert.equal(body.statusCode, 401)
    assert.equal(body.error, 'Unauthorized')
    assert.match(body.message, message, how)
    assert.equal(res.headers['www-authenticate'], 'X-API-Key', how)
    assert.equal(res.headers['cache-control'], 'no-store', `${how}: no cache keeps a refusal`)
    assert.match(res.headers.vary, /X-API-Key/, how)
    assert.equal(res.headers['access-control-allow-origin'], '*', `${how}: a browser may read why`)
    assert.doesNotMatch(JSON.stringify(lines.slice(from)) + res.body, /wrong-secret|k3y|K3Y/, `${how}: no key in the log or the answer`)
  }
  // From one address: a warning for the first refusal of each reason, with its path.
  const logged = lines.slice(from).map((l) => [l.level, l.msg, l.path, l.ip])
  assert.deepEqual(logged, [[40, 'API key missing', '/roads.json', '127.0.0.1'], [40, 'API key not accepted', '/roads/0/0/0.pbf', '127.0.0.1']])
})

test('with keys: a client refused again and again is logged once a minute per reason, then with how many were not', async (t) => {
  t.mock.timers.enable({ apis: ['Date'], now: Date.now() })
  const { lines, port } = await keyedApp(t)
  const from = lines.length
  for (let i = 0; i < 6; i++) {
    assert.equal((await get(port, '/roads/0/0/0.pbf')).status, 401)
    assert.equal((await get(port, `/roads/0/0/${i}.pbf`, { 'x-api-key': 'bad' })).status, 401)
  }
  assert.deepEqual(lines.slice(from).map((l) => l.msg), ['API key missing', 'API key not accepted'], '12 refusals, 2 lines')
  t.mock.timers.tick(61_000)
  assert.equal((await get(port, '/roads.json')).status, 401)
  assert.equal((await get(port, '/roads.json')).status, 401)
  const later = lines.slice(from + 2)
  assert.equal(later.length, 1)
  assert.equal(later[0].msg, 'API key missing')
  assert.equal(later[0].repeats, 5, 'the refusals of the minute before that were not logged')
})

test('keys never reach the logs: the access log of --log-requests and a 500\'s line show URLs without them', async (t) => {
  const { app, lines, port } = await keyedApp(t, { logRequests: true })
  await get(port, `/roads.json?a=1&key=${ENC}`)
  await get(port, '/roads.json?key=wrong-secret-3')
  app.catalog.get('roads').source.getTile = () => { throw new TypeError('a bug') }
  assert.equal((await get(port, `/roads/0/0/0?k%65y=${ENC}`)).status, 500)
  const urls = lines.filter((l) => l.msg === 'request' || l.msg === 'request failed').map((l) => l.url)
  assert.deepEqual(urls, ['/roads.json?a=1', '/roads.json', '/roads/0/0/0', '/roads/0/0/0'])
  assert.doesNotMatch(JSON.stringify(lines), /k3y|wrong-secret/)
})

test('with keys and listed CORS origins, a 401 still says which origin may read it, and varies on both', async (t) => {
  const { port } = await keyedApp(t, { cors: ['https://maps.example'] })
  const res = await get(port, '/roads.json', { origin: 'https://maps.example' })
  assert.equal(res.status, 401)
  assert.equal(res.headers['access-control-allow-origin'], 'https://maps.example')
  assert.equal(res.headers.vary, 'Origin, X-API-Key')
})

test('with keys: a key in the header or ?key= lets a request in; probes, preflights and the viewer\'s code stay open', async (t) => {
  const { port } = await keyedApp(t)
  for (const [path, headers] of [
    ['/roads.json', { 'x-api-key': KEY }],
    [`/roads.json?key=${ENC}`, {}],
    ['/roads.json?key=second', {}],
    [`/roads.json?key=wrong&key=${ENC}`, { 'x-api-key': 'second' }], // the header's is good: the query's is not needed
    [`/roads/0/0/0.pbf?key=${ENC}`, {}],
    ['/roads/0/0/0.pbf', { 'x-api-key': 'second' }],
    [`/catalog?key=${ENC}`, {}],
    [`/?key=${ENC}`, {}],
  ]) assert.equal((await get(port, path, headers)).status, 200, `${path} ${JSON.stringify(headers)}`)

  // Open whatever the keys: what load balancers and Prometheus ask, preflights, and MapLibre GL JS's own files.
  for (const path of ['/health', '/health/', '/ready', '/metrics', '/viewer/assets/viewer.js', '/viewer/assets/maplibre-gl.mjs']) {
    const res = await get(port, path)
    assert.notEqual(res.status, 401, path)
    assert.ok(res.status < 500 || path === '/ready', `${path}: ${res.status}`)
  }
  const preflight = await get(port, '/roads/0/0/0.pbf', { origin: 'https://maps.example', 'access-control-request-method': 'GET', 'access-control-request-headers': 'x-api-key' }, 'OPTIONS')
  assert.equal(preflight.status, 204, 'browsers send no key in a preflight')
  assert.equal(preflight.headers['access-control-allow-headers'], 'x-api-key')
  // Only those paths: the same names elsewhere, or spelt another way, are not open.
  for (const path of ['/health/x', '/viewer/roads', '/viewer%2Fassets/viewer.js', '/metricsx']) assert.equal((await get(port, path)).status, 401, path)
})

test('the tile front checks the key too: a good header is answered before Fastify, anything else by Fastify', async (t) => {
  const { port, seenByFastify, lines } = await keyedApp(t)
  assert.equal((await get(port, '/roads/1/0/0.pbf', { 'x-api-key': KEY })).status, 200)
  let before = seenByFastify()
  const fast = await get(port, '/roads/1/0/0.pbf', { 'x-api-key': KEY, 'accept-encoding': 'gzip' })
  assert.equal(fast.status, 200)
  assert.equal(seenByFastify(), before, 'answered by the front')
  const from = lines.length
  for (const headers of [{}, { 'x-api-key': 'wrong' }, { 'x-api-key': `${KEY}, ${KEY}` }]) {
    assert.equal((await get(port, '/roads/1/0/0.pbf', headers)).status, 401, JSON.stringify(headers))
  }
  // Left to Fastify, whose hook refused them: logged there, once per reason (the third is the second not accepted).
  assert.deepEqual(lines.slice(from).filter((l) => /^API key/.test(l.msg)).map((l) => l.msg), ['API key missing', 'API key not accepted'])
  const queried = await get(port, `/roads/1/0/0.pbf?key=${ENC}`, { 'accept-encoding': 'gzip' })
  assert.equal(queried.status, 200)
  assert.deepEqual(queried.body, fast.body)
})

test('the key never splits the tile cache nor changes a tile\'s ETag, and sets never see it', async (t) => {
  const { app, port } = await keyedApp(t)
  const ways = [[`/roads/2/1/1.pbf?key=${ENC}`, {}], ['/roads/2/1/1.pbf', { 'x-api-key': KEY }], ['/roads/2/1/1.pbf', { 'x-api-key': 'second' }], ['/roads/2/1/1.pbf?key=second', {}]]
  const answers = []
  for (const [path, headers] of ways) answers.push(await get(port, path, { 'accept-encoding': 'gzip', ...headers }))
  const entries = app.tileCache.stats.entries
  for (const res of answers) {
    assert.equal(res.status, 200)
    assert.equal(res.headers.etag, answers[0].headers.etag)
    assert.deepEqual(res.body, answers[0].body)
    assert.equal(res.headers.vary, 'Accept-Encoding', 'a tile does not vary on the key')
  }
  assert.equal(app.tileCache.stats.misses, 1, 'read once, whatever the key')
  for (const [path, headers] of ways) await get(port, path, { 'accept-encoding': 'gzip', ...headers })
  assert.equal(app.tileCache.stats.entries, entries)

  // A set taking options (a COG, a PostGIS function) gets the query without the key: not an option, not a cache key.
  const seen = []
  app.catalog.get('photo').source.parseQuery = (query) => { seen.push({ ...query }); return {} }
  assert.equal((await get(port, `/photo/0/0/0.png?color=red&key=${ENC}`)).status, 200)
  assert.equal((await get(port, '/photo/0/0/0.png?color=red', { 'x-api-key': KEY })).status, 200)
  assert.deepEqual(seen, [{ color: 'red' }, { color: 'red' }])
  // Its TileJSON passes the options on, with the key once (however the request spelt it).
  for (const path of [`/photo.json?color=red&key=${ENC}`, `/photo.json?k%65y=${ENC}&color=red`, '/photo.json?color=red&key=second&key=x']) {
    const res = await get(port, path, path.includes('&key=x') ? { 'x-api-key': KEY } : {})
    assert.equal(res.status, 200, path)
    const expected = path.includes('&key=x') ? ENC : path.includes('second') ? 'second' : ENC
    assert.equal(JSON.parse(res.body).tiles[0], `http://127.0.0.1:${port}/photo/{z}/{x}/{y}.png?color=red&key=${expected}`, path)
  }
})

test('links carry the client\'s key: a MapLibre client given ?key= on its first URL keeps working', async (t) => {
  const { app } = await keyedApp(t)
  const ask = async (url, headers = {}) => {
    const res = await app.inject({ url, headers: { host: 'maps.test', ...headers } })
    assert.equal(res.statusCode, 200, `${url}: ${res.body}`)
    return res
  }
  // What MapLibre GL JS does with a style URL: the sources' TileJSON, the tiles, the sprite (@2x, before the query),
  // the glyphs; it adds nothing of its own to any of those URLs.
  const style = (await ask(`/styles/city/style.json?key=${ENC}`)).json()
  assert.equal(style.sources.roads.url, `http://maps.test/roads.json?key=${ENC}`)
  assert.equal(style.sprite, `http://maps.test/styles/city/sprite?key=${ENC}`)
  assert.equal(style.glyphs, `http://maps.test/fonts/{fontstack}/{range}.pbf?key=${ENC}`)
  const tj = (await ask(local(style.sources.roads.url))).json()
  assert.equal(tj.tiles[0], `http://maps.test/roads/{z}/{x}/{y}.pbf?key=${ENC}`)
  await ask(local(tj.tiles[0].replace('{z}', 1).replace('{x}', 1).replace('{y}', 0)))
  for (const ratio of ['', '@2x']) {
    for (const ext of ['.json', '.png']) {
      const sprite = new URL(style.sprite)
      sprite.pathname += `${ratio}${ext}` // maplibre-gl's normalizeSpriteURL
      await ask(local(sprite.href))
    }
  }
  await ask(local(style.glyphs.replace('{fontstack}', 'Sans%20Regular').replace('{range}', '0-255')))

  // A key sent as a header is carried the same way, and such answers vary on it.
  const viaHeader = await ask('/styles/city/style.json', { 'x-api-key': 'second' })
  assert.equal(viaHeader.json().sources.roads.url, 'http://maps.test/roads.json?key=second')
  assert.equal(viaHeader.headers.vary, 'Host, X-API-Key')

  // Lists, the raster TileJSON of a style, the home page and the viewer: every link keyed, and each answers.
  const catalog = (await ask(`/catalog?key=${ENC}`)).json()
  for (const set of catalog) {
    assert.ok(set.tilejson.endsWith(`.json?key=${ENC}`), set.tilejson)
    await ask(local(set.tilejson))
  }
  for (const s of (await ask(`/styles.json?key=${ENC}`)).json()) await ask(local(s.url))
  assert.equal((await ask(`/styles/city.json?key=${ENC}`)).json().tiles[0], `http://maps.test/styles/city/{z}/{x}/{y}.png?key=${ENC}`)
  const home = (await ask(`/?key=${ENC}`)).body
  const links = [...home.matchAll(/(?:href|src)="(http[^"]+)"/g)].map((m) => m[1].replace(/&amp;/g, '&').replace(/&#38;/g, '&'))
  assert.ok(links.length >= 10, `the home page has its links: ${links.length}`)
  for (const link of links) {
    assert.ok(link.endsWith(`?key=${ENC}`), `home page link without the key: ${link}`)
    const res = await app.inject({ url: local(link), headers: { host: 'maps.test' } })
    assert.notEqual(res.statusCode, 401, link)
  }
  const page = (await ask(`/viewer/photo?key=${ENC}`)).body
  const view = JSON.parse(/<script type="application\/json" id="view">(.*?)<\/script>/s.exec(page)[1])
  assert.equal(view.tilejson, `http://maps.test/photo.json?key=${ENC}`)
  assert.match(page, new RegExp(`href="http://maps.test/\\?key=${ENC.replace(/[+]/g, '\\+')}"`), 'the link home')
  const assets = [...page.matchAll(/(?:href|src)="(http[^"]+\/viewer\/assets\/[^"]+)"/g)].map((m) => m[1])
  assert.equal(assets.length, 3)
  for (const asset of assets) assert.equal((await app.inject({ url: local(asset) })).statusCode, 200, `${asset}: open, keyless`)
  const stylePage = (await ask(`/viewer/styles/city?key=${ENC}`)).body
  assert.match(stylePage, new RegExp(`"style":"http://maps.test/styles/city/style.json\\?key=${ENC.replace(/[+]/g, '\\+')}"`))
})

test('a Host or X-Forwarded-Host off the allow-list never reaches an answer: the first allowed host is used', async (t) => {
  const app = await makeApp(t, { ...setUp(t), allowedHosts: ['tiles.example.com', 'localhost:3000'], trustProxy: ['loopback'] })
  const poisons = [
    { host: 'evil.example' },
    { host: 'evil.example:3000' },
    { host: 'tiles.example.com.evil.example' },
    { host: 'localhost' }, // listed with its port only
    { host: 'tiles.example.com', 'x-forwarded-host': 'evil.example' }, // a trusted proxy passing a client's header on
    { host: '' },
  ]
  const urls = ['/roads.json', '/catalog', '/styles.json', '/styles/city/style.json', '/styles/city.json', '/', '/viewer/roads', '/viewer/styles/city']
  for (const headers of poisons) {
    for (const url of urls) {
      const res = await app.inject({ url, headers })
      assert.equal(res.statusCode, 200, `${url} ${JSON.stringify(headers)}`)
      assert.doesNotMatch(res.body, /evil|\/\/localhost[/"]/, `${url} ${JSON.stringify(headers)}`)
      assert.match(res.body, /http:\/\/tiles\.example\.com\//, `${url}: links name the first allowed host`)
    }
  }
  // Hosts on the list are used as they are (a name is case-insensitive).
  assert.equal((await app.inject({ url: '/roads.json', headers: { host: 'localhost:3000' } })).json().tiles[0], 'http://localhost:3000/roads/{z}/{x}/{y}.pbf')
  assert.equal((await app.inject({ url: '/roads.json', headers: { host: 'TILES.example.com' } })).json().tiles[0], 'http://TILES.example.com/roads/{z}/{x}/{y}.pbf')
  assert.equal((await app.inject({ url: '/roads.json', headers: { host: 'x', 'x-forwarded-host': 'localhost:3000', 'x-forwarded-proto': 'https' } })).json().tiles[0], 'https://localhost:3000/roads/{z}/{x}/{y}.pbf')
})

test('config: keys and allowed hosts from the environment (comma-separated), hosts from a flag; bad values refused', () => {
  const { config } = loadConfig({ env: { TILE_CANNON_API_KEYS: 'a1, b2 ,', TILE_CANNON_ALLOWED_HOSTS: 'tiles.example.com,localhost:3000', TILE_CANNON_MAX_URL_LENGTH: '2048' } })
  assert.deepEqual(config.apiKeys, ['a1', 'b2'])
  assert.deepEqual(config.allowedHosts, ['tiles.example.com', 'localhost:3000'])
  assert.deepEqual(config.limits, { maxUrlLength: 2048, maxQueryLength: 4096, maxCompositeParts: 16 })
  assert.deepEqual(loadConfig({ argv: ['--allowed-hosts', 'a.example, b.example'] }).config.allowedHosts, ['a.example', 'b.example'])
  assert.deepEqual(loadConfig({}).config.apiKeys, [], 'off by default')
  assert.throws(() => loadConfig({ overrides: { apiKeys: ['has space'] } }), ConfigError)
  assert.throws(() => loadConfig({ overrides: { allowedHosts: ['evil.example/path'] } }), ConfigError)
  assert.throws(() => loadConfig({ overrides: { limits: { maxUrlLength: 10 } } }), ConfigError)
})

// Archives and COGs on S3-compatible object storage, against a real S3 server: moto's standalone server on 127.0.0.1
// (MinIO is not packaged for Debian; .ci/run installs moto from PyPI and exports MOTO_SERVER). Objects are uploaded
// with signed requests; with IAM on, moto checks every signature the server makes.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, spawnSync, execFileSync } from 'node:child_process'
import { once } from 'node:events'
import { existsSync, readFileSync, writeFileSync, mkdirSync } from 'node:fs'
import { createServer } from 'node:net'
import { createServer as createHttpServer, request as httpRequest } from 'node:http'
import { randomBytes } from 'node:crypto'
import { homedir } from 'node:os'
import { join } from 'node:path'
import { gunzipSync, gzipSync } from 'node:zlib'
import aws4 from 'aws4'
import pino from 'pino'
import { FIXTURES, HAVE_FIXTURES, needs } from './helpers/app.js'
import { makeMvt, pyramid, tempDir, writePmtiles } from './helpers/data.js'
import { holdable } from './helpers/http.js'
import { buildApp } from '../lib/app.js'
import { loadConfig } from '../lib/config.js'

const MOTO = process.env.MOTO_SERVER ?? join(homedir(), '.cache/tile-cannon/moto-5.2.5/bin/moto_server')
const NO_MOTO = `moto's server is not installed (${MOTO}; .ci/run installs it and sets MOTO_SERVER)`
const HAVE_GDAL = spawnSync('gdal_translate', ['--version']).status === 0

async function freePort () {
  const server = createServer().listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address()
  server.close()
  await once(server, 'close')
  return port
}

/**
 * moto's S3 on 127.0.0.1:`port`, until the test ends. `auth`: IAM checks every request, and a user allowed s3:* is
 * made (its key in `credentials`); otherwise any credentials pass. `stop()` and `start()` take it down and up again on
 * the same port (empty: moto keeps its objects in memory).
 */
async function moto (t, { port, auth = false } = {}) {
  port ??= await freePort()
  const endpoint = `http://127.0.0.1:${port}`
  let child = null
  const start = async () => {
    // The first 3 requests (the IAM user, its policy, its key) pass unchecked; every later one must be signed by it.
    child = spawn(MOTO, ['-H', '127.0.0.1', '-p', String(port)], { stdio: 'ignore', env: { ...process.env, ...(auth ? { INITIAL_NO_AUTH_ACTION_COUNT: '3' } : {}) } })
    const exited = once(child, 'exit').then(() => { throw new Error('moto_server exited') })
    for (let i = 0; ; i++) {
      try {
        await Promise.race([fetch(`${endpoint}/moto-api/`), exited])
        break
      } catch (err) {
        if (err.message === 'moto_server exited' || i > 150) throw err
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
    }
  }
  const stop = async () => {
    if (child === null || child.exitCode !== null) return
    child.kill()
    await once(child, 'exit')
  }
  t.after(stop)
  await start()
  const store = { endpoint, port, start, stop, credentials: { accessKeyId: 'AKIATESTTESTTEST', secretAccessKey: 'not-checked' } }
  const call = async (service, method, path, { body, headers = {}, credentials = store.credentials } = {}) => {
    const signed = aws4.sign({ host: `127.0.0.1:${port}`, path, method, service, region: 'us-east-1', body, headers }, credentials)
    delete signed.headers.Host
    const res = await fetch(endpoint + path, { method, headers: signed.headers, body })
    const text = await res.text()
    assert.ok(res.ok, `${method} ${path}: ${res.status} ${text}`)
    return text
  }
  if (auth) {
    const iam = (params) => call('iam', 'POST', '/', {
      body: new URLSearchParams({ ...params, Version: '2010-05-08' }).toString(),
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    })
    await iam({ Action: 'CreateUser', UserName: 'tiles' })
    await iam({ Action: 'PutUserPolicy', UserName: 'tiles', PolicyName: 's3', PolicyDocument: JSON.stringify({ Version: '2012-10-17', Statement: [{ Effect: 'Allow', Action: 's3:*', Resource: '*' }] }) })
    const key = await iam({ Action: 'CreateAccessKey', UserName: 'tiles' })
    store.credentials = { accessKeyId: /<AccessKeyId>([^<]+)/.exec(key)[1], secretAccessKey: /<SecretAccessKey>([^<]+)/.exec(key)[1] }
  }
  store.bucket = (name) => call('s3', 'PUT', `/${name}`)
  // (an explicit Content-Type: aws4's default, a form, makes moto's web framework swallow the body)
  store.put = (bucket, key, bytes) => call('s3', 'PUT', `/${bucket}/${key}`, { body: bytes, headers: { 'content-type': 'application/octet-stream' } })
  return store
}

/**
 * The app as server.js builds it, its object storage settings from the environment; its log lines collected in
 * `logs` (to check that none names the bucket, the endpoint or a secret).
 */
async function s3App (t, store, overrides, { credentials = store.credentials, logs = [] } = {}) {
  const env = {
    AWS_ENDPOINT_URL_S3: store.endpoint,
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: credentials.accessKeyId,
    AWS_SECRET_ACCESS_KEY: credentials.secretAccessKey,
    TILE_CANNON_S3_FORCE_PATH_STYLE: 'true',
  }
  const { config } = loadConfig({ env, overrides: { watch: false, demo: false, viewer: false, raster: { threads: 1 }, ...overrides } })
  const loggerInstance = pino({ level: 'info' }, { write: (line) => logs.push(line) })
  const app = await buildApp(config, { loggerInstance })
  t.after(() => app.close())
  return app
}

async function localApp (t, paths) {
  const { config } = loadConfig({ overrides: { logLevel: 'silent', watch: false, demo: false, viewer: false, raster: { threads: 1 }, paths } })
  const app = await buildApp(config)
  t.after(() => app.close())
  return app
}

const get = (app, url) => app.inject({ url, headers: { 'accept-encoding': 'gzip' } }) // stored bytes as they are

/** A tile of `tilejson`'s centre at zoom z. */
function centreTile (tilejson, z) {
  const [lon, lat] = tilejson.center
  const n = 2 ** z
  const x = Math.min(n - 1, Math.floor((lon + 180) / 360 * n))
  const r = lat * Math.PI / 180
  const y = Math.min(n - 1, Math.floor((1 - Math.log(Math.tan(r) + 1 / Math.cos(r)) / Math.PI) / 2 * n))
  return [z, x, y]
}

/** A generated vector archive whose tiles say `version` (a replaced object is then told apart tile by tile). */
function versionedPmtiles (path, version, maxzoom = 5) {
  const tiles = pyramid(0, maxzoom, 4).map(([z, x, y]) => ({ z, x, y, data: gzipSync(makeMvt(z, x, y, { version })) }))
  return writePmtiles(path, { tiles, leafSize: 8, metadata: { name: `version ${version}` } })
}

/** Three small COGs to serve: the shared fixtures', else made with GDAL; null when there are neither. */
function cogFiles (t, dir) {
  if (HAVE_FIXTURES) {
    return { ortho: join(FIXTURES, 'cog', 'usda_naip_256_lzw_z3.tif'), dem: join(FIXTURES, 'cog', 'cog.tif'), other: join(FIXTURES, 'cog', 'image_web_z5_z11.tif') }
  }
  if (!needs(t, HAVE_GDAL, 'neither the shared fixtures nor gdal-bin (to make COGs) are present')) return null
  // Noise (so that no tile is a few cached blocks away), written as raw ENVI bands and made a COG by GDAL.
  const noise = (name, srs, ullr) => {
    const raw = join(dir, `${name}.bil`)
    writeFileSync(raw, randomBytes(1024 * 1024 * 3))
    writeFileSync(join(dir, `${name}.hdr`), 'ENVI\nsamples = 1024\nlines = 1024\nbands = 3\nheader offset = 0\nfile type = ENVI Standard\ndata type = 1\ninterleave = bsq\nbyte order = 0\n')
    const out = join(dir, `${name}.tif`)
    execFileSync('gdal_translate', ['-q', '-of', 'COG', '-a_srs', srs, '-a_ullr', ...ullr, '-co', 'COMPRESS=DEFLATE', '-co', 'BLOCKSIZE=256', raw, out])
    return out
  }
  return {
    ortho: noise('ortho', 'EPSG:3857', ['0', '1000000', '1000000', '0']),
    dem: noise('dem', 'EPSG:32633', ['400000', '5600000', '500000', '5500000']),
    other: noise('other', 'EPSG:3857', ['-2000000', '3000000', '-1000000', '2000000']),
  }
}

test('s3:// PMTiles and COGs serve the same bytes as the local files; a bucket prefix is served like a folder (signed requests, checked by moto\'s IAM)', async (t) => {
  if (!needs(t, existsSync(MOTO), NO_MOTO)) return
  const dir = tempDir(t)
  const cogs = cogFiles(t, dir)
  if (cogs === null) return
  const store = await moto(t, { auth: true })
  const local = join(dir, 'local')
  mkdirSync(local)
  const files = {
    'gen.pmtiles': versionedPmtiles(join(local, 'gen.pmtiles'), 1),
    'ortho.tif': readFileSync(cogs.ortho),
    'dem.tif': readFileSync(cogs.dem),
  }
  if (HAVE_FIXTURES) {
    files['trails.pmtiles'] = readFileSync(join(FIXTURES, 'pmtiles', 'trails.pmtiles')) // 1 MB: many blocks
    files['toner.pmtiles'] = readFileSync(join(FIXTURES, 'pmtiles', 'stamen_toner(raster)CC-BY+ODbL_z3.pmtiles'))
  }
  await store.bucket('tiles')
  for (const [name, bytes] of Object.entries(files)) {
    writeFileSync(join(local, name), bytes)
    await store.put('tiles', `maps/${name}`, bytes)
  }
  await store.put('tiles', 'maps/readme.txt', 'not a tileset')
  await store.put('tiles', 'maps/old/gen.pmtiles', files['gen.pmtiles']) // in a sub-"folder": not listed
  await store.put('tiles', 'single.pmtiles', files['gen.pmtiles'])

  const logs = []
  const app = await s3App(t, store, { paths: ['s3://tiles/maps/'], sets: { single: { url: 's3://tiles/single.pmtiles' } } }, { logs })
  const here = await localApp(t, [local])
  const names = Object.fromEntries(Object.keys(files).map((name) => [name.replace(/\.[a-z]+$/, ''), name]))
  const ids = Object.keys(names).sort()
  assert.deepEqual((await app.inject('/list')).json(), ['single', ...ids], 'every tileset of the prefix, ids as a folder\'s, beside a configured set')
  assert.deepEqual((await app.inject('/health')).json().unavailable, [])
  assert.equal((await get(app, '/gen.pmtiles/0/0/0')).statusCode, 200, 'addressed by its file name too')

  let compared = 0
  for (const id of ids) {
    const tilejson = (await here.inject(`/${id}.json`)).json()
    assert.deepEqual((await app.inject(`/${id}.json`)).json(), tilejson, `${id}: the same TileJSON`)
    const tiles = []
    for (let z = tilejson.minzoom; z <= Math.min(tilejson.maxzoom + 1, tilejson.minzoom + 5); z++) tiles.push(centreTile(tilejson, z))
    if (id === 'gen') tiles.push(...pyramid(0, 5, 4).filter((_, i) => i % 5 === 0))
    const raster = names[id].endsWith('.tif')
    for (const [z, x, y] of tiles) {
      const path = `/${id}/${z}/${x}/${y}${raster ? '.png' : ''}`
      const [theirs, ours] = [await get(app, path), await get(here, path)]
      assert.equal(theirs.statusCode, ours.statusCode, path)
      assert.deepEqual(theirs.rawPayload, ours.rawPayload, `${path}: byte-identical`)
      if (ours.statusCode === 200) compared++
    }
    if (raster) {
      const [z, x, y] = centreTile(tilejson, tilejson.maxzoom)
      const [theirs, ours] = [await get(app, `/${id}/${z}/${x}/${y}@2x.webp`), await get(here, `/${id}/${z}/${x}/${y}@2x.webp`)]
      assert.equal(theirs.statusCode, 200)
      assert.deepEqual(theirs.rawPayload, ours.rawPayload, `${id}: @2x WebP byte-identical`)
    }
  }
  assert.ok(compared >= 20, `${compared} tiles compared`)
  assert.deepEqual((await get(app, '/single/3/1/1')).rawPayload, (await get(here, '/gen/3/1/1')).rawPayload)

  // A reload lists the prefix again: an object added there is served.
  await store.put('tiles', 'maps/late.pmtiles', files['gen.pmtiles'])
  await app.catalog.reload()
  assert.deepEqual((await app.inject('/list')).json(), ['single', ...ids, 'late'])
  assert.deepEqual((await get(app, '/late/3/1/1')).rawPayload, (await get(here, '/gen/3/1/1')).rawPayload)
  assert.ok(!logs.some((l) => l.includes(store.credentials.secretAccessKey) || l.includes(store.credentials.accessKeyId)), 'no secret in the logs')
})

/**
 * A real proxy in front of moto (the server's S3 endpoint given to the app) that notes which prefixes were asked to be
 * listed (`listed`) and lets `route(prefix, forward, res)` pass each request on (forward), hold it or answer it.
 */
async function listingProxy (t, store, route) {
  const listed = []
  const proxy = createHttpServer((req, res) => {
    const prefix = new URL(req.url, 'http://x').searchParams.get('prefix')
    if (prefix !== null) listed.push(prefix)
    const forward = () => {
      const out = httpRequest(`${store.endpoint}${req.url}`, { method: req.method, headers: req.headers }, (answer) => {
        res.writeHead(answer.statusCode, answer.headers)
        answer.pipe(res)
      })
      req.pipe(out)
    }
    route(prefix, forward, res)
  })
  proxy.listen(0, '127.0.0.1')
  await once(proxy, 'listening')
  t.after(() => proxy.close())
  return { listed, endpoint: `http://127.0.0.1:${proxy.address().port}` }
}

test('bucket prefixes are listed at once: one whose listing is held does not hold the others\' back; ids and order as given', async (t) => {
  if (!needs(t, existsSync(MOTO), NO_MOTO)) return
  const dir = tempDir(t)
  const store = await moto(t)
  await store.bucket('tiles')
  const objects = ['one/b', 'one/a', 'two/c', 'two/a']
  for (const [i, key] of objects.entries()) await store.put('tiles', `${key}.pmtiles`, versionedPmtiles(join(dir, `${i}.pmtiles`), key, 1))
  // The listing of one/ held until released.
  const stalls = holdable(t)
  const { listed, endpoint } = await listingProxy(t, store, (prefix, forward) => (prefix === 'one/' ? stalls.hold(forward) : forward()))
  t.after(() => stalls.release())
  const building = s3App(t, { ...store, endpoint }, { paths: ['s3://tiles/one/', 's3://tiles/two/'] })
  const deadline = Date.now() + 3000
  while (!listed.includes('two/') && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10))
  const both = listed.includes('two/')
  stalls.release()
  const app = await building
  assert.ok(both, `two/ listed while one/'s listing was held (listed: ${listed.join(', ')})`)
  assert.deepEqual((await app.inject('/list')).json(), ['a', 'b', 'a-2', 'c'], 'one/\'s sets first, as given, and its a is `a`')
  assert.equal((await app.inject('/a.json')).json().name, 'version one/a')
  assert.equal((await app.inject('/a-2.json')).json().name, 'version two/a')
})

test('prefixes that could not be listed are listed again at once (one held does not hold the others back), and one a reload fails to list meanwhile is still listed again', async (t) => {
  if (!needs(t, existsSync(MOTO), NO_MOTO)) return
  const dir = tempDir(t)
  const store = await moto(t)
  await store.bucket('tiles')
  for (const [i, key] of ['one/a', 'two/b', 'three/c'].entries()) await store.put('tiles', `${key}.pmtiles`, versionedPmtiles(join(dir, `${i}.pmtiles`), key, 1))
  // A real proxy in front of moto whose listings of each prefix pass, are refused (403: at once, never retried) or held.
  const rule = { 'one/': 'deny', 'two/': 'pass', 'three/': 'deny' }
  const stalls = holdable(t, { holding: false })
  const { listed, endpoint } = await listingProxy(t, store, (prefix, forward, res) => {
    if (rule[prefix] === 'deny') {
      res.writeHead(403, { 'content-type': 'application/xml' })
      res.end('<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>')
    } else if (rule[prefix] === 'hold') stalls.hold(forward)
    else forward()
  })
  t.after(() => stalls.release())
  const app = await s3App(t, { ...store, endpoint }, { paths: ['s3://tiles/one/', 's3://tiles/two/', 's3://tiles/three/'], remote: { retryMs: 200 } })
  assert.deepEqual((await app.inject('/list')).json(), ['b'])
  const until = async (condition, what) => {
    const deadline = Date.now() + 5000
    while (!(await condition())) {
      assert.ok(Date.now() < deadline, `timed out waiting for: ${what}`)
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
  }

  // The retry: one/'s listing held, three/'s answers.
  stalls.start()
  rule['one/'] = 'hold'
  rule['three/'] = 'pass'
  const before = listed.length
  await until(() => stalls.held() === 1, "one/'s listing again")
  await until(() => listed.slice(before).includes('three/'), "three/ listed while one/'s listing is held")

  // Meanwhile a reload fails to list two/ (and one/): its sets kept, it must be listed again as the others are.
  rule['one/'] = 'deny'
  rule['two/'] = 'deny'
  await app.catalog.reload()
  stalls.release()
  await until(async () => (await app.inject('/list')).json().includes('a'), "one/'s set, once its listing answers")
  const ready = await app.inject('/ready')
  assert.equal(ready.statusCode, 503)
  assert.deepEqual(ready.json().backends.filter((b) => b.kind === 'remote').map((b) => b.name), ['bucket prefix paths[1]'], 'two/ still cannot be listed')
  rule['two/'] = 'pass'
  await store.put('tiles', 'two/d.pmtiles', versionedPmtiles(join(dir, 'd.pmtiles'), 'two/d', 1))
  await until(async () => (await app.inject('/list')).json().includes('d'), "two/ listed again: its new object's set")
  await until(async () => (await app.inject('/ready')).statusCode === 200, 'ready again (its checks are a second old at most)')
  assert.deepEqual((await app.inject('/list')).json().sort(), ['a', 'b', 'c', 'd'])
})

test('objects whose keys hold a space, non-ASCII letters, #, ? or % are served under their names, as files of those names are', async (t) => {
  if (!needs(t, existsSync(MOTO), NO_MOTO)) return
  const dir = tempDir(t)
  const store = await moto(t)
  await store.bucket('odd')
  const names = ['with space', 'ünï', 'a#b', 'a', 'c?d', '100%']
  for (const name of names) {
    const key = `maps/${name}.pmtiles`.split('/').map(encodeURIComponent).join('/')
    await store.put('odd', key, versionedPmtiles(join(dir, 'x.pmtiles'), name, 2))
  }
  const app = await s3App(t, store, { paths: ['s3://odd/maps/'] })
  assert.deepEqual((await app.inject('/list')).json().sort(), [...names].sort())
  for (const name of names) {
    const id = encodeURIComponent(name)
    const tilejson = (await app.inject(`/${id}.json`)).json()
    assert.equal(tilejson.name, `version ${name}`, name)
    assert.ok(tilejson.tiles[0].endsWith(`/${id}/{z}/{x}/{y}.pbf`), tilejson.tiles[0])
    const tile = await get(app, `/${id}/2/1/1`)
    assert.equal(tile.statusCode, 200, name)
    assert.deepEqual(gunzipSync(tile.rawPayload), makeMvt(2, 1, 1, { version: name }), 'the object of that key, read by its key')
    assert.equal((await app.inject(`/${encodeURIComponent(name + '.pmtiles')}/2/1/1`)).statusCode, 200, 'and by its full name')
  }
})

test('wrong credentials: the sets are unavailable with a clear reason, and no secret, key or bucket URL shows anywhere', async (t) => {
  if (!needs(t, existsSync(MOTO), NO_MOTO)) return
  const store = await moto(t, { auth: true })
  await store.bucket('tiles')
  await store.put('tiles', 'maps/gen.pmtiles', versionedPmtiles(join(tempDir(t), 'gen.pmtiles'), 1))
  const secrets = (credentials) => [credentials.accessKeyId, credentials.secretAccessKey, store.endpoint, `127.0.0.1:${store.port}`, 's3://', 'tiles/maps']
  for (const [credentials, code] of [
    [{ accessKeyId: store.credentials.accessKeyId, secretAccessKey: 'wrong-secret-1234' }, 'SignatureDoesNotMatch'],
    [{ accessKeyId: 'AKIANOSUCHKEY0000000', secretAccessKey: 'wrong-secret-5678' }, 'InvalidAccessKeyId'],
  ]) {
    const logs = []
    const app = await s3App(t, store, { paths: ['s3://tiles/maps/gen.pmtiles', 's3://tiles/maps/'] }, { credentials, logs })
    const [unavailable] = (await app.inject('/health')).json().unavailable
    assert.equal(unavailable.id, 'gen')
    assert.match(unavailable.reason, new RegExp(`^access denied by the remote store \\(403 ${code}\\): check the credentials`))
    const res = await app.inject('/gen/0/0/0')
    assert.equal(res.statusCode, 503)
    assert.match(res.json().message, new RegExp(`tileset 'gen' is unavailable: access denied .*${code}`))
    assert.ok(logs.some((l) => l.includes('bucket prefix not listed') && l.includes(code)), 'the prefix that could not be listed is logged, with the reason')
    const shown = [JSON.stringify((await app.inject('/health')).json()), res.payload, (await app.inject('/')).payload, ...logs].join('\n')
    for (const secret of secrets(credentials)) assert.ok(!shown.includes(secret), `${secret} is never shown`)
  }
})

test('a stopped object store: 503 for its sets, never a crash; started again: they recover without a restart, also those that could not open', async (t) => {
  if (!needs(t, existsSync(MOTO), NO_MOTO)) return
  const dir = tempDir(t)
  const cogs = cogFiles(t, dir)
  if (cogs === null) return
  const store = await moto(t)
  const pmtiles = versionedPmtiles(join(dir, 'gen.pmtiles'), 1)
  const upload = async () => {
    await store.bucket('tiles')
    await store.put('tiles', 'gen.pmtiles', pmtiles)
    await store.put('tiles', 'ortho.tif', readFileSync(cogs.ortho))
  }
  await upload()
  const paths = ['s3://tiles/gen.pmtiles', 's3://tiles/ortho.tif']
  const logs = []
  const app = await s3App(t, store, { paths, remote: { retryMs: 200 } }, { logs })
  const here = await localApp(t, [join(dir, 'gen.pmtiles'), cogs.ortho])
  const ortho = (await app.inject('/ortho.json')).json()
  const orthoId = (await here.inject('/list')).json().find((id) => id !== 'gen')
  const rasterTiles = [ortho.minzoom, ortho.maxzoom, ortho.maxzoom + 1].map((z) => centreTile(ortho, z))
  /** Does `server` answer `url` 200 with the bytes the local file gives for `localUrl`? */
  const same = async (url, localUrl, server = app) => {
    const [x, y] = [await get(server, url), await get(here, localUrl)]
    return x.statusCode === 200 && x.rawPayload.equals(y.rawPayload)
  }
  assert.ok(await same('/gen/1/1/1', '/gen/1/1/1'))
  assert.ok(await same(`/ortho/${rasterTiles[0].join('/')}.png`, `/${orthoId}/${rasterTiles[0].join('/')}.png`))

  await store.stop()
  for (const url of ['/gen/2/1/1', `/ortho/${rasterTiles[1].join('/')}.png`]) {
    const res = await get(app, url)
    assert.equal(res.statusCode, 503, `${url} while the store is down`)
    assert.ok(res.headers['retry-after'])
    assert.ok(!res.payload.includes(String(store.port)) && !res.payload.includes('s3://'), res.payload)
  }
  assert.ok(await same('/gen/1/1/1', '/gen/1/1/1'), 'a cached tile still answers')
  const ready = await app.inject('/ready')
  assert.equal(ready.statusCode, 503, '/ready drains a replica whose store is down')
  const down = ready.json().backends.filter((b) => b.name.startsWith('set '))
  assert.deepEqual(down.map((b) => [b.name, b.state]), [['set gen', 'down'], ['set ortho', 'down']])
  assert.match(down[0].reason, /^the remote store did not answer \(ECONNREFUSED, 1 try\)$/)
  // A server started while the store is down: its sets are unavailable, with the reason…
  const late = await s3App(t, store, { paths, remote: { retryMs: 200 } })
  const reasons = (await late.inject('/health')).json().unavailable
  assert.deepEqual(reasons.map((u) => u.id), ['gen', 'ortho'])
  assert.match(reasons[0].reason, /^the remote store did not answer \(ECONNREFUSED, 4 tries\)$/)
  // …and is not ready until they open (their store is a backend down).
  const lateReady = await late.inject('/ready')
  assert.equal(lateReady.statusCode, 503)
  assert.deepEqual(lateReady.json().backends.filter((b) => b.name.startsWith('set ')).map((b) => [b.name, b.state]), [['set gen', 'down'], ['set ortho', 'down']])

  await store.start()
  await upload() // (moto keeps nothing: the same bytes again, so the same ETags)
  // …and both servers serve every tile again, without a restart.
  const deadline = Date.now() + 15_000
  for (const server of [app, late]) {
    for (;;) {
      const ok = await same('/gen/2/1/1', '/gen/2/1/1', server) &&
        await same(`/ortho/${rasterTiles[1].join('/')}.png`, `/${orthoId}/${rasterTiles[1].join('/')}.png`, server) &&
        await same(`/ortho/${rasterTiles[2].join('/')}@2x.png`, `/${orthoId}/${rasterTiles[2].join('/')}@2x.png`, server)
      if (ok) break
      assert.ok(Date.now() < deadline, 'recovered within 15 s')
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  }
  assert.deepEqual((await late.inject('/health')).json().unavailable, [])
  assert.equal((await app.inject('/ready')).statusCode, 200)
  assert.ok(logs.some((l) => l.includes('"set":"gen"') && l.includes('tile read failed')), 'a read failure is logged with the set')
  assert.ok(!logs.some((l) => l.includes(String(store.port)) || l.includes('s3://')), 'no log line names the store')
})

test('a replaced object is re-opened: its new tiles and TileJSON, never old bytes after new ones', async (t) => {
  if (!needs(t, existsSync(MOTO), NO_MOTO)) return
  const dir = tempDir(t)
  const cogs = cogFiles(t, dir)
  if (cogs === null) return
  const store = await moto(t)
  await store.bucket('tiles')
  const v1 = versionedPmtiles(join(dir, 'v1.pmtiles'), 1, 4)
  const v2 = versionedPmtiles(join(dir, 'v2.pmtiles'), 2, 5)
  await store.put('tiles', 'gen.pmtiles', v1)
  await store.put('tiles', 'ortho.tif', readFileSync(cogs.ortho))
  const logs = []
  const app = await s3App(t, store, { paths: ['s3://tiles/gen.pmtiles', 's3://tiles/ortho.tif'], remote: { revalidateMs: 100 } }, { logs })
  const here = await localApp(t, [join(dir, 'v2.pmtiles'), cogs.other])
  assert.equal((await app.inject('/gen.json')).json().name, 'version 1')
  const tiles = [[1, 1, 1], [2, 1, 1], [3, 2, 2], [4, 3, 3]]
  /** Which archive a tile answer comes from: 1, 2, or 'neither' (bytes of no archive: a mix). */
  const versionOf = (res, tile) => {
    const raw = gunzipSync(res.rawPayload)
    for (const v of [1, 2]) if (raw.equals(makeMvt(...tile, { version: v }))) return v
    return 'neither'
  }
  assert.equal(versionOf(await get(app, '/gen/1/1/1'), [1, 1, 1]), 1) // now cached

  await store.put('tiles', 'gen.pmtiles', v2)
  // A tile read from the store sees the new ETag: the set is re-opened. Until then tiles are version 1 or 503; after
  // the first version 2, only version 2.
  let seenNew = false
  const deadline = Date.now() + 10_000
  while (!seenNew || (await app.inject('/gen.json')).json().name !== 'version 2') {
    for (const tile of tiles) {
      const res = await get(app, `/gen/${tile.join('/')}`)
      if (res.statusCode === 503) {
        assert.ok(!seenNew, 'no 503 once re-opened')
        assert.match(res.json().message, /tileset 'gen' changed at its source and is being re-opened/)
        continue
      }
      assert.equal(res.statusCode, 200)
      const v = versionOf(res, tile)
      if (v === 2) seenNew = true
      else assert.equal(v, seenNew ? 2 : 1, `${tile}: version ${v} ${seenNew ? 'after the new one was served' : ''}`)
    }
    assert.ok(Date.now() < deadline, 'the replaced archive is served within 10 s')
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  assert.equal((await app.inject('/gen.json')).json().maxzoom, 5, 'TileJSON of the new archive')
  assert.equal(versionOf(await get(app, '/gen/1/1/1'), [1, 1, 1]), 2, 'the cached tile of the old archive is gone')
  assert.equal((await get(app, '/gen/5/3/3')).statusCode, 200)

  // A COG replaced by another file: found by revalidation even while every block it needs is cached.
  const before = (await app.inject('/ortho.json')).json()
  await get(app, `/ortho/${centreTile(before, before.maxzoom).join('/')}.png`)
  await store.put('tiles', 'ortho.tif', readFileSync(cogs.other))
  const otherId = (await here.inject('/list')).json().find((id) => id !== 'v2')
  const after = (await here.inject(`/${otherId}.json`)).json()
  for (let i = 1; ; i++) {
    await get(app, `/ortho/${centreTile(before, before.maxzoom - 1).join('/')}.png?nodata=${i}`) // uncached: reaches the set
    const now = (await app.inject('/ortho.json')).json()
    if (JSON.stringify(now.bounds) === JSON.stringify(after.bounds)) break
    assert.ok(Date.now() < deadline + 10_000, 'the replaced COG is served within 10 s')
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  const tile = centreTile(after, after.maxzoom).join('/')
  assert.deepEqual((await get(app, `/ortho/${tile}.png`)).rawPayload, (await get(here, `/${otherId}/${tile}.png`)).rawPayload)
  const reopened = logs.filter((l) => l.includes('remote object changed: re-opening the set')).map((l) => JSON.parse(l).set)
  assert.deepEqual(reopened, ['gen', 'ortho'], 'each set re-opened once, and said so')
})

test('a bucket prefix that cannot be listed: never the demo in its place, /ready 503 naming it, and a reload keeps its sets', async (t) => {
  if (!needs(t, existsSync(MOTO), NO_MOTO)) return
  const dir = tempDir(t)
  const store = await moto(t)
  const upload = async () => {
    await store.bucket('tiles')
    await store.put('tiles', 'maps/gen.pmtiles', versionedPmtiles(join(dir, 'gen.pmtiles'), 1))
  }
  await upload()
  const options = { paths: ['s3://tiles/maps/'], demo: true, remote: { retryMs: 200 } } // the demo as by default
  const app = await s3App(t, store, options)
  assert.deepEqual((await app.inject('/list')).json(), ['gen'])

  await store.stop()
  await app.catalog.reload() // SIGHUP while the prefix cannot be listed
  assert.deepEqual((await app.inject('/list')).json(), ['gen'], 'its set kept, and no demo beside it')
  const ready = await app.inject('/ready')
  assert.equal(ready.statusCode, 503)
  assert.deepEqual(ready.json().backends.find((b) => b.kind === 'remote'), { name: 'bucket prefix paths[0]', kind: 'remote', state: 'down', reason: 'cannot be listed' })
  // A server started meanwhile serves nothing, and says it is not ready.
  const late = await s3App(t, store, options)
  assert.deepEqual((await late.inject('/list')).json(), [])
  assert.equal((await late.inject('/ready')).statusCode, 503)

  await store.start()
  await upload()
  const deadline = Date.now() + 15_000
  for (const server of [app, late]) {
    // Ready, and its set open again (a set re-opened on its own retry may come a moment after the prefix lists).
    for (;;) {
      const list = (await server.inject('/list')).json()
      assert.ok(!list.includes('countries'), 'never the demo')
      if ((await server.inject('/ready')).statusCode === 200 && list.length === 1) break
      // The late server's retry may list the bucket between its creation and the object's upload: an empty prefix,
      // listed. A new object is then found by a reload (SIGHUP), as the README says of objects added later.
      if (server === late && (await server.inject('/ready')).statusCode === 200) await late.catalog.reload()
      assert.ok(Date.now() < deadline, `${server === app ? 'reloaded' : 'late'}: ready again, with its set, within 15 s: ${JSON.stringify(list)}`)
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    assert.deepEqual((await server.inject('/list')).json(), ['gen'], 'the bucket\'s sets, and never the demo')
  }
})

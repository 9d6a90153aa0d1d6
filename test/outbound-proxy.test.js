// tile-cannon's own outbound HTTP through the proxy the environment names (http_proxy, https_proxy, no_proxy): the
// server runs as a child process with them set, reading a remote PMTiles archive (main thread) and a remote COG (raster
// workers) from a real range-serving origin, through a real forwarding proxy on 127.0.0.1. (test/proxy.test.js is
// about proxies in front of tile-cannon: X-Forwarded-* and --trust-proxy.)
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { createServer, request } from 'node:http'
import { connect } from 'node:net'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import sharp from 'sharp'
import { chooseBackend } from '../lib/style/render/index.js'
import { freePort } from '../bench/servers.js'
import { FIXTURES, HAVE_FIXTURES, ROOT, needs } from './helpers/app.js'
import { rangeServer } from './helpers/http.js'
import { makeMvt, pyramid, tempDir, vectorTiles, writePmtiles } from './helpers/data.js'
import { lonLatToTile } from '../lib/tilemath.js'
import { proxyFromEnv } from '../lib/outbound-proxy.js'

const PROXY_VARIABLES = ['http_proxy', 'https_proxy', 'no_proxy', 'all_proxy'].flatMap((name) => [name, name.toUpperCase()])
const COG_FILE = join(FIXTURES, 'cog', 'usda_naip_512_deflate_z2.tif') // EPSG:3857, 177 KB: read in several ranges

/**
 * A forwarding HTTP proxy: requests in absolute form are passed on (each recorded: method, URL, Range,
 * Proxy-Authorization), CONNECT is tunnelled (recorded as such).
 */
async function forwardingProxy (t) {
  const seen = []
  const server = createServer((req, res) => {
    seen.push({ method: req.method, url: req.url, range: req.headers.range, auth: req.headers['proxy-authorization'] })
    const headers = { ...req.headers }
    delete headers['proxy-authorization']
    const onward = request(req.url, { method: req.method, headers }, (answer) => {
      res.writeHead(answer.statusCode, answer.headers)
      answer.pipe(res)
    })
    onward.on('error', () => { res.writeHead(502); res.end() })
    req.pipe(onward)
  })
  server.on('connect', (req, socket, head) => {
    seen.push({ method: 'CONNECT', url: req.url })
    const [host, port] = req.url.split(':')
    const onward = connect(Number(port), host, () => {
      socket.write('HTTP/1.1 200 Connection Established\r\n\r\n')
      onward.write(head)
      onward.pipe(socket).pipe(onward)
    })
    onward.on('error', () => socket.end('HTTP/1.1 502 Bad Gateway\r\n\r\n'))
    socket.on('error', () => onward.destroy())
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.after(() => server.close())
  return { url: `http://127.0.0.1:${server.address().port}`, port: server.address().port, seen }
}

const renderer = chooseBackend({})

/** tile-cannon as a child process serving `paths`, with only the proxy variables of `proxyEnv` (the harness's dropped). */
async function serve (t, paths, proxyEnv) {
  const env = { ...process.env, TILE_CANNON_LOG_FORMAT: 'json', TILE_CANNON_RASTER_THREADS: '1' }
  for (const name of PROXY_VARIABLES) delete env[name]
  const port = await freePort()
  const child = spawn(process.execPath, [join(ROOT, 'server.js'), '--port', String(port), '--host', '127.0.0.1', '--log-level', 'info', '--no-watch', ...paths], { env: { ...env, ...proxyEnv }, stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  child.stdout.on('data', (d) => { output += d })
  child.stderr.on('data', (d) => { output += d })
  t.after(() => child.kill('SIGKILL'))
  const base = `http://127.0.0.1:${port}`
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`${base}/health`)).status === 200) break
    } catch {}
    if (i === 100 || child.exitCode !== null) throw new Error(`tile-cannon did not start: ${output}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  const logs = () => output.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l))
  return { base, child, output: () => output, logs }
}

/** A remote PMTiles archive and (with the shared fixtures) a remote COG, on a range-serving origin each. */
async function origins (t) {
  const file = writePmtiles(join(tempDir(t), 'x.pmtiles'), { tiles: vectorTiles(pyramid(0, 3)), metadata: { name: 'Far' } })
  const pmtiles = await rangeServer(t, file, 'far.pmtiles')
  const cog = HAVE_FIXTURES ? await rangeServer(t, readFileSync(COG_FILE), 'farcog.tif') : null
  return { pmtiles, cog, paths: [pmtiles.url, ...(cog ? [cog.url, COG_FILE] : [])] }
}

/** Fetches a vector tile and (with the COG) a raster tile of the remote COG, compared with the local file's. */
async function checkTiles (server, { cog = HAVE_FIXTURES } = {}) {
  const tile = await fetch(`${server.base}/far/3/1/1.mvt`)
  assert.equal(tile.status, 200, await tile.clone().text())
  assert.deepEqual(Buffer.from(await tile.arrayBuffer()), makeMvt(3, 1, 1), 'byte-identical to the archive\'s tile')
  if (!cog) return
  const tilejson = await (await fetch(`${server.base}/farcog.json`)).json()
  const [w, s, e, n] = tilejson.bounds
  const z = tilejson.minzoom + 1
  const [x, y] = lonLatToTile((w + e) / 2, (s + n) / 2, z)
  const [far, local] = await Promise.all(['farcog', 'usda_naip_512_deflate_z2'].map((id) => fetch(`${server.base}/${id}/${z}/${x}/${y}.png`)))
  assert.equal(far.status, 200, await far.clone().text())
  assert.deepEqual(Buffer.from(await far.arrayBuffer()), Buffer.from(await local.arrayBuffer()), 'the remote COG\'s tile, read by a raster worker, is the local file\'s')
}

test('with HTTP_PROXY set, remote PMTiles and COG range requests go through the proxy (its credentials sent, never logged); with the host in NO_PROXY, none does', async (t) => {
  const proxy = await forwardingProxy(t)
  const { pmtiles, cog, paths } = await origins(t)
  const proxyUrl = `http://tiles:s3cret@127.0.0.1:${proxy.port}` // (no_proxy unset: the harness may set NO_PROXY)
  const server = await serve(t, paths, { HTTP_PROXY: proxyUrl })
  await checkTiles(server)

  const ranged = (name) => proxy.seen.filter((r) => r.method === 'GET' && r.url.endsWith('/' + name) && /^bytes=\d+-\d+$/.test(r.range ?? ''))
  assert.ok(ranged('far.pmtiles').length >= 2, `the archive's header and tile ranges went through the proxy: ${JSON.stringify(proxy.seen)}`)
  assert.equal(ranged('far.pmtiles').length, pmtiles.ranges.length, 'every range the origin answered came through the proxy')
  if (cog) {
    assert.ok(ranged('farcog.tif').length >= 1, 'the raster workers\' ranges went through the proxy too (describing the COG and reading it are theirs)')
    assert.equal(ranged('farcog.tif').length, cog.ranges.length)
  }
  assert.ok(proxy.seen.every((r) => r.method !== 'CONNECT'), 'http:// is asked in absolute form, not tunnelled')
  assert.ok(proxy.seen.every((r) => r.auth === `Basic ${Buffer.from('tiles:s3cret').toString('base64')}`), 'the proxy\'s credentials are sent to it')
  const said = server.logs().filter((l) => /proxy/.test(l.msg))
  assert.deepEqual(said.map((l) => l.msg), [`outbound HTTP goes through the proxy http://127.0.0.1:${proxy.port}`], 'one line says so')
  assert.ok(!server.output().includes('s3cret'), 'the proxy\'s password is never logged')
  assert.ok(!/experimental/i.test(server.output()), 'no warning about the library')

  // The origin's host in no_proxy (lower case, among others): asked directly.
  const before = proxy.seen.length
  const direct = await serve(t, paths, { HTTP_PROXY: proxyUrl, no_proxy: 'example.com, .corp.example,127.0.0.1' })
  await checkTiles(direct)
  assert.equal(proxy.seen.length, before, 'the proxy saw nothing')
  assert.match(direct.logs().find((l) => /proxy/.test(l.msg))?.msg ?? '', /except to example\.com, \.corp\.example, 127\.0\.0\.1$/)
})

test('https_proxy alone: an http:// origin is asked directly, an https:// one is tunnelled with CONNECT', async (t) => {
  const proxy = await forwardingProxy(t)
  const { pmtiles, paths } = await origins(t)
  const closed = await freePort() // an https origin that is not there: the tunnel is asked for all the same
  const server = await serve(t, [paths[0], `https://127.0.0.1:${closed}/tls.pmtiles`], { HTTPS_PROXY: proxy.url })
  await checkTiles(server, { cog: false })
  assert.ok(pmtiles.ranges.length > 0)
  assert.ok(proxy.seen.some((r) => r.method === 'CONNECT' && r.url === `127.0.0.1:${closed}`), JSON.stringify(proxy.seen))
  assert.ok(proxy.seen.every((r) => r.method === 'CONNECT'), 'no http:// request went through it')
  const refused = await fetch(`${server.base}/tls/0/0/0.mvt`)
  assert.equal(refused.status, 503)
  assert.match((await refused.json()).message, /\(the proxy answered 502, 4 tries\)/, 'the proxy\'s refusal of the tunnel, said')
  assert.ok(server.logs().some((l) => l.msg === `outbound HTTP goes through the proxy ${proxy.url} for https:// URLs (http:// ones are asked directly)`))
})

test('the proxy down: the remote set answers 503 with its reason, logged once, and the server serves on', async (t) => {
  const { pmtiles, paths } = await origins(t)
  const down = await freePort() // nothing listens there
  const config = join(tempDir(t), 'tile-cannon.json')
  writeFileSync(config, JSON.stringify({ remote: { retryMs: 100 } })) // the set tried again and again while the test waits
  const server = await serve(t, ['--config', config, paths[0]], { http_proxy: `127.0.0.1:${down}` })
  const res = await fetch(`${server.base}/far/3/1/1.mvt`)
  assert.equal(res.status, 503)
  assert.match((await res.json()).message, /ECONNREFUSED/)
  assert.equal(pmtiles.ranges.length, 0, 'nothing reached the origin directly')
  await new Promise((resolve) => setTimeout(resolve, 1500)) // tried again, more than once
  assert.equal((await fetch(`${server.base}/far/3/1/1.mvt`)).status, 503)
  assert.equal((await fetch(`${server.base}/health`)).status, 200)
  assert.equal(server.child.exitCode, null, 'not a crash')
  const unavailable = server.logs().filter((l) => l.msg === 'tileset unavailable')
  assert.equal(unavailable.length, 1, `once: ${JSON.stringify(unavailable)}`)
  assert.ok(!server.output().includes('.pmtiles'), 'no URL in the log')
})

test('a proxy variable that is no proxy URL is one line and exit 2, its password not shown', async (t) => {
  const env = { ...process.env }
  for (const name of PROXY_VARIABLES) delete env[name]
  const child = spawn(process.execPath, [join(ROOT, 'server.js'), '--port', String(await freePort()), '--no-demo', tempDir(t)], { env: { ...env, HTTPS_PROXY: 'socks5://me:s3cret@127.0.0.1:1080' }, stdio: ['ignore', 'pipe', 'pipe'] })
  let err = ''
  child.stderr.on('data', (d) => { err += d })
  const [code] = await once(child, 'exit')
  assert.equal(code, 2)
  assert.equal(err.trim(), 'tile-cannon: https_proxy "socks5://127.0.0.1:1080" is not a proxy URL tile-cannon can use (http://host:port or https://host:port)')
})

test('a style rendered behind HTTP_PROXY: its remote GeoJSON (fetched by the server) and its sprite (by the renderer child\'s engine) go through the proxy', async (t) => {
  if (!needs(t, renderer.backend !== null, renderer.why ?? '')) return
  const proxy = await forwardingProxy(t)
  const sheet = await sharp({ create: { width: 16, height: 16, channels: 4, background: { r: 255, g: 255, b: 0, alpha: 1 } } }).png().toBuffer()
  const square = { type: 'FeatureCollection', features: [{ type: 'Feature', properties: {}, geometry: { type: 'Polygon', coordinates: [[[-170, -80], [-10, -80], [-10, 80], [-170, 80], [-170, -80]]] } }] }
  const origin = createServer((req, res) => {
    const sprite = /^\/s\/sheet(@2x)?\.(json|png)$/.exec(req.url)
    if (sprite !== null) return res.end(sprite[2] === 'json' ? JSON.stringify({ own: { x: 0, y: 0, width: 16, height: 16, pixelRatio: sprite[1] ? 2 : 1 } }) : sheet)
    if (req.url === '/square.geojson') return res.end(JSON.stringify(square))
    res.writeHead(404).end()
  }).listen(0, '127.0.0.1')
  await once(origin, 'listening')
  t.after(() => origin.close())
  const far = `http://127.0.0.1:${origin.address().port}`
  const styles = join(tempDir(t), 'styles')
  mkdirSync(styles)
  writeFileSync(join(styles, 'far.json'), JSON.stringify({
    version: 8,
    sprite: `${far}/s/sheet`,
    sources: { square: { type: 'geojson', data: `${far}/square.geojson` } },
    layers: [
      { id: 'bg', type: 'background', paint: { 'background-pattern': 'own' } },
      { id: 'square', type: 'fill', source: 'square', paint: { 'fill-color': '#ff0000' } },
    ],
  }))
  const server = await serve(t, ['--styles', styles, '--no-demo'], { HTTP_PROXY: proxy.url }) // (libcurl reads http_proxy alone)
  const res = await fetch(`${server.base}/styles/far/1/0/0.png`)
  assert.equal(res.status, 200, await res.clone().text())
  const { data, info } = await sharp(Buffer.from(await res.arrayBuffer())).raw().toBuffer({ resolveWithObject: true })
  // (in fractions of the tile, z1's north-west quarter of the world: the square from 170° W, 80° N, the sprite around)
  const at = (fx, fy) => { const i = (Math.floor(fy * info.height) * info.width + Math.floor(fx * info.width)) * info.channels; return [...data.subarray(i, i + 3)] }
  assert.deepEqual(at(0.5, 0.5), [255, 0, 0], 'the remote GeoJSON drawn')
  assert.deepEqual(at(0.02, 0.02), [255, 255, 0], 'the remote sprite drawn')
  const asked = proxy.seen.map((r) => r.url)
  assert.ok(asked.includes(`${far}/square.geojson`), `the server's fetch went through the proxy: ${asked}`)
  assert.ok(asked.some((u) => u.startsWith(`${far}/s/sheet`)), `the engine's sprite request went through the proxy: ${asked}`)
})

test('no_proxy as curl reads it: a bare domain is it and every host under it', () => {
  const { noProxy } = proxyFromEnv({ HTTP_PROXY: 'proxy:3128', NO_PROXY: 'corp.example, .other.example,10.0.0.1:8080 localhost' })
  assert.equal(noProxy, 'corp.example,.corp.example,.other.example,10.0.0.1:8080,localhost,.localhost')
  assert.equal(proxyFromEnv({ http_proxy: 'proxy:3128', no_proxy: '*' }).noProxy, '*')
  assert.equal(proxyFromEnv({ NO_PROXY: '*' }), null, 'no proxy named: nothing')
})

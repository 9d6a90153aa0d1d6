// The tile directory (--tile-dir) behind a real nginx configured by `tile-cannon nginx`: a tile's first request falls
// through to tile-cannon, which writes it; later ones are nginx's, with tile-cannon's headers, even with tile-cannon
// stopped; tiles of replaced, removed, expired or purged data are never served from disk.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { gunzipSync } from 'node:zlib'
import { findNginx, freePort, runNginx } from '../bench/servers.js'
import { buildApp } from '../lib/app.js'
import { ConfigError, loadConfig } from '../lib/config.js'
import { lonLatToTile } from '../lib/tilemath.js'
import { FIXTURES, HAVE_FIXTURES, ROOT, needs } from './helpers/app.js'
import { makeMvt, pyramid, tempDir, vectorTiles, writeMbtiles } from './helpers/data.js'
import { POSTGIS_MISSING, loadZurichPoints, runSql, startPostgis } from './helpers/postgres.js'

const NO_NGINX = 'nginx is not installed (apt-get install nginx-light)'
const COG = join(FIXTURES, 'cog', 'image_web_z5_z11.tif') // made to order: written by default
const COG_TILE = '8/50/98.png' // inside it
const COG_OUTSIDE = '8/0/0.png' // outside it: 404
const HEADERS = ['content-type', 'content-encoding', 'cache-control', 'vary', 'access-control-allow-origin', 'access-control-expose-headers']
// Who answered a 200: tile-cannon's ETags name the coding ("…-gzip"); nginx's are its file's mtime and size in hex.
const byNginx = (res) => /^(W\/)?"[0-9a-f]+-[0-9a-f]+"$/.test(res.headers.etag ?? '')
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * tile-cannon serving `paths` with a tile directory, and nginx in front with the configuration `tile-cannon nginx`
 * prints for the same arguments. `files`: the folder the sets are in (roads.mbtiles is written there, opted in).
 */
async function stack (t, { paths = [], config = {}, argv = [] } = {}) {
  const dir = tempDir(t)
  const tiles = join(dir, 'tiles')
  writeMbtiles(join(dir, 'roads.mbtiles'), { tiles: vectorTiles(pyramid(0, 3)), metadata: { format: 'pbf' } })
  const file = join(dir, 'config.json')
  writeFileSync(file, JSON.stringify({ ...config, sets: { roads: { tileDir: true }, ...config.sets } }))
  const args = ['-c', file, '--tile-dir', tiles, join(dir, 'roads.mbtiles'), ...paths, ...argv]
  const port = await freePort()
  const start = async () => {
    const { config: loaded } = loadConfig({ argv: args, overrides: { logLevel: 'silent', demo: false, watchDebounceMs: 50 } })
    const app = await buildApp(loaded)
    await app.listen({ port, host: '127.0.0.1' })
    return app
  }
  let app = await start()
  t.after(() => app.close())
  // Not execFileSync: the server in this process must keep answering (a blocked event loop is shed with 503s).
  // With a file that does not open among its paths: its warning goes to stderr, stdout is the configuration alone
  // (redirected into conf.d, a log line would make nginx refuse it).
  writeFileSync(join(dir, 'broken.mbtiles'), 'not an MBTiles file')
  const { stdout: site, stderr } = await promisify(execFile)(process.execPath, [join(ROOT, 'server.js'), 'nginx', ...args, join(dir, 'broken.mbtiles'),
    '--upstream', `http://127.0.0.1:${port}`, '--listen', `127.0.0.1:${await freePort()}`, '--log-format', 'json'], { encoding: 'utf8' })
  assert.match(stderr, /"set":"broken".*tileset unavailable/)
  assert.ok(site.startsWith('# nginx in front of tile-cannon'), site.slice(0, 200))
  const nginxPort = Number(/listen 127\.0\.0\.1:(\d+);/.exec(site)[1])
  const nginx = await runNginx(join(dir, 'nginx'), null, nginxPort, site)
  t.after(() => nginx.stop())
  return {
    dir,
    tiles,
    get app () { return app },
    nginxBase: nginx.base,
    nginx: (path, headers) => get(nginx.base + path, headers),
    direct: (path, headers) => get(`http://127.0.0.1:${port}${path}`, headers),
    async restart () {
      await app.close()
      app = await start()
    },
    stop: () => app.close(),
  }
}

async function get (url, headers = {}) {
  const res = await fetch(url, { headers, decompress: false })
  const body = Buffer.from(await res.arrayBuffer())
  return { status: res.status, headers: Object.fromEntries(res.headers), body }
}

// fetch decodes gzip itself; these requests must see the bytes as sent.
const GZIP = { 'accept-encoding': 'gzip' }
const IDENTITY = { 'accept-encoding': 'identity' }
const same = (a, b, label) => {
  assert.equal(a.status, b.status, `${label}: status`)
  for (const h of HEADERS) assert.equal(a.headers[h], b.headers[h], `${label}: ${h}`)
  assert.deepEqual(a.body, b.body, `${label}: body`)
}

test('a tile falls through to tile-cannon once, is written, then nginx serves it with the same headers, tile-cannon stopped or not', async (t) => {
  if (!needs(t, findNginx() !== null, NO_NGINX)) return
  if (!needs(t, HAVE_FIXTURES, 'the shared fixtures (../shared/fixtures) are not present')) return
  const s = await stack(t, { paths: [COG] })
  const cases = [
    ['/roads/2/1/1.pbf', GZIP, 200], // vector, stored gzip
    ['/roads/2/1/1.pbf', IDENTITY, 200], // decoded for a client without gzip (nginx: gunzip)
    ['/roads/3/5/5.pbf', GZIP, 204], // absent in a vector set
    [`/image_web_z5_z11/${COG_TILE}`, GZIP, 200], // a made raster
    [`/image_web_z5_z11/${COG_OUTSIDE}`, GZIP, 404], // outside the raster
    ['/data/roads/1/0/1.pbf', GZIP, 200], // tileserver-gl's URL form
  ]
  const expected = []
  const onDisk = (path) => ['', '.gz', '.none', '.404'].some((suffix) => existsSync(join(s.tiles, path.replace(/^\/data\//, '/').slice(1) + suffix)))
  for (const [path, headers, status] of cases) {
    const before = onDisk(path)
    const first = await s.nginx(path, headers)
    assert.equal(first.status, status, path)
    if (!before && status === 200) assert.ok(!byNginx(first), `${path}: the first answer is tile-cannon's (ETag ${first.headers.etag})`)
    await s.app.tileDir.idle()
    assert.ok(onDisk(path), `${path}: written`)
    const direct = await s.direct(path, headers)
    same(first, direct, `${path} (${headers['accept-encoding']}) first`)
    const second = await s.nginx(path, headers)
    if (status === 200) assert.ok(byNginx(second), `${path} (${headers['accept-encoding']}): then from disk (ETag ${second.headers.etag})`)
    same(second, direct, `${path} (${headers['accept-encoding']}) from disk`)
    expected.push([path, headers, direct])
  }
  await s.app.tileDir.idle()
  const stored = join(s.tiles, 'roads', '2', '1', '1.pbf.gz')
  assert.deepEqual(readFileSync(stored), vectorTiles([[2, 1, 1]])[0].data, 'vector tiles are on disk as served to gzip clients')
  assert.ok(existsSync(join(s.tiles, 'roads', '3', '5', '5.pbf.none')), 'an absent vector tile is remembered (204)')
  assert.ok(existsSync(join(s.tiles, 'image_web_z5_z11', '8', '0', '0.png.404')), 'and an absent raster tile (404)')
  assert.ok(existsSync(join(s.tiles, 'image_web_z5_z11', ...COG_TILE.split('/'))))
  const viaCdn = await s.nginx('/roads/2/1/1.pbf', { ...GZIP, via: '1.1 cdn' })
  assert.equal(viaCdn.headers['content-encoding'], 'gzip', 'a client behind a CDN gets gzip too')

  await s.stop()
  for (const [path, headers, direct] of expected) same(await s.nginx(path, headers), direct, `${path} (${headers['accept-encoding']}) with tile-cannon stopped`)
  const head = await fetch(`${s.nginxBase}/roads/2/1/1.pbf`, { method: 'HEAD', headers: GZIP })
  assert.equal(head.status, 200)
  assert.equal(head.headers.get('content-encoding'), 'gzip')
  assert.equal((await s.nginx('/roads/2/0/0.pbf', GZIP)).status, 502, 'a tile not on disk needs tile-cannon')
  assert.equal((await s.nginx('/roads/2/1/1.pbf?x=1', GZIP)).status, 502, 'a tile URL with a query string goes to tile-cannon')
  assert.equal((await s.nginx('/roads/2/1/1.pbf.gz', GZIP)).status, 502, 'the files themselves are not URLs')
  assert.equal((await s.nginx('/roads/.revision', GZIP)).status, 502)
})

test('a replaced set\'s tiles are never served from disk, a removed set\'s neither; a restart keeps what is still true', async (t) => {
  if (!needs(t, findNginx() !== null, NO_NGINX)) return
  const s = await stack(t)
  const path = '/roads/2/1/1.pbf'
  const v1 = await s.nginx(path, GZIP)
  assert.equal(v1.status, 200)
  await s.app.tileDir.idle()
  assert.ok(byNginx(await s.nginx(path, GZIP)), 'from disk')

  // A restart with the same file: its tiles stay on disk and in the index.
  await s.restart()
  await s.app.tileDir.walked
  assert.ok(s.app.tileDir.state.files >= 1, 'indexed again at start')
  assert.ok(byNginx(await s.nginx(path, GZIP)), 'still served from disk')

  // The file replaced (new tiles): the server sees it (watch), and from that moment nginx no longer has the old tile.
  const v2 = makeMvt(2, 1, 1, { version: 'two' })
  writeMbtiles(join(s.dir, 'roads.new'), { tiles: [{ z: 2, x: 1, y: 1, data: v2 }], metadata: { format: 'pbf' } })
  await import('node:fs').then((fs) => fs.renameSync(join(s.dir, 'roads.new'), join(s.dir, 'roads.mbtiles')))
  let direct
  for (let i = 0; i < 100; i++) {
    direct = await s.direct(path, IDENTITY)
    if (direct.body.equals(v2)) break
    await sleep(50)
  }
  assert.deepEqual(direct.body, v2, 'tile-cannon serves the new file')
  const after = await s.nginx(path, IDENTITY)
  assert.deepEqual(after.body, v2, 'nginx too, at once')
  assert.notDeepEqual((await s.nginx(path, GZIP)).body, v1.body)
  await s.app.tileDir.idle()
  assert.ok(byNginx(await s.nginx(path, IDENTITY)), 'the new tile is written')

  // Replaced while tile-cannon was down: moved aside at start.
  await s.stop()
  writeMbtiles(join(s.dir, 'roads.new'), { tiles: vectorTiles([[2, 1, 1]]), metadata: { format: 'pbf' } })
  await import('node:fs').then((fs) => fs.renameSync(join(s.dir, 'roads.new'), join(s.dir, 'roads.mbtiles')))
  // What an earlier run left in the trash (a write that landed in a folder being removed; in a container the pid is
  // the same at every start) must not stop the move.
  mkdirSync(join(s.tiles, '.trash', `roads.${process.pid}.1`, '2'), { recursive: true })
  writeFileSync(join(s.tiles, '.trash', `roads.${process.pid}.1`, '2', 'left.tmp'), 'x')
  await s.restart()
  const restarted = await s.nginx(path, GZIP)
  assert.ok(!byNginx(restarted), 'not the old tile from disk')
  assert.deepEqual(restarted.body, v1.body)

  // Removed: its folder goes, nginx hands its URLs to tile-cannon (404).
  await s.app.tileDir.idle()
  rmSync(join(s.dir, 'roads.mbtiles'))
  for (let i = 0; i < 100 && (await s.direct(path, GZIP)).status !== 404; i++) await sleep(50)
  assert.equal((await s.nginx(path, GZIP)).status, 404)
  assert.ok(!existsSync(join(s.tiles, 'roads')), 'the folder is gone')
})

test('tiles with a lifetime leave the directory when it ends; the directory keeps to its bound, oldest out first; options are not written', async (t) => {
  if (!needs(t, findNginx() !== null, NO_NGINX)) return
  if (!needs(t, HAVE_FIXTURES, 'the shared fixtures (../shared/fixtures) are not present')) return
  const s = await stack(t, { paths: [COG], config: { sets: { roads: { tileDir: true, cacheTtlS: 1 } }, tileDir: { maxMB: 0.02 } } })
  const path = '/roads/2/1/1.pbf'
  await s.nginx(path, GZIP)
  await s.app.tileDir.idle()
  const file = join(s.tiles, 'roads', '2', '1', '1.pbf.gz')
  assert.ok(existsSync(file))
  const cc = (await s.nginx(path, GZIP)).headers['cache-control']
  assert.equal(cc, 'public, max-age=1', 'nginx sends the set\'s own Cache-Control (from the generated map)')
  for (let i = 0; i < 60 && existsSync(file); i++) await sleep(100)
  assert.ok(!existsSync(file), 'removed once its lifetime ended')

  // Options other than the defaults: answered by tile-cannon, never written (nginx could not tell them apart).
  const grey = await s.nginx(`/image_web_z5_z11/${COG_TILE}?bidx=1`, GZIP)
  assert.equal(grey.status, 200)
  const rgb = await s.nginx(`/image_web_z5_z11/${COG_TILE}?bidx=1,2,3`, GZIP) // the defaults: the plain tile
  await s.app.tileDir.idle()
  const written = join(s.tiles, 'image_web_z5_z11', ...COG_TILE.split('/'))
  assert.deepEqual(readFileSync(written), rgb.body, 'the default options are the plain tile')
  assert.notDeepEqual(readFileSync(written), grey.body)

  // The bound (0.02 MiB): many raster tiles, the oldest removed first.
  const [z, x0, y0] = [9, ...lonLatToTile(-109.6, 38.7, 9)]
  const paths = []
  for (let dx = 0; dx < 6; dx++) for (let dy = 0; dy < 6; dy++) paths.push(`/image_web_z5_z11/${z}/${x0 + dx}/${y0 + dy}.png`)
  for (const p of paths) {
    await s.direct(p)
    await s.app.tileDir.idle()
  }
  let bytes = 0
  const walk = (d) => { for (const e of readdirSync(d, { withFileTypes: true })) e.isDirectory() ? walk(join(d, e.name)) : (bytes += statSync(join(d, e.name)).size) }
  walk(join(s.tiles, 'image_web_z5_z11'))
  assert.ok(bytes <= 0.02 * 2 ** 20, `${bytes} bytes on disk, bound 20971`)
  assert.ok(s.app.tileDir.state.evicted > 0, 'tiles were removed to keep the bound')
  const onDisk = (p) => ['', '.404'].some((suffix) => existsSync(join(s.tiles, p.slice(1) + suffix)))
  assert.ok(onDisk(paths.at(-1)), 'the newest is there')
  assert.ok(!onDisk(paths[0]), 'the oldest is not')
})

test('a PostGIS NOTIFY removes the set\'s tiles from disk; nginx sends the new data', async (t) => {
  if (!needs(t, findNginx() !== null, NO_NGINX)) return
  const db = await startPostgis()
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  t.after(() => db.stop())
  await loadZurichPoints(db.url)
  const s = await stack(t, { paths: [db.url] })
  const [x, y] = lonLatToTile(8.54, 47.37, 12)
  const path = `/zurich_points/12/${x}/${y}.pbf`
  const before = await s.nginx(path, IDENTITY)
  assert.equal(before.status, 200)
  await s.app.tileDir.idle()
  assert.ok(existsSync(join(s.tiles, 'zurich_points', '12', String(x), `${y}.pbf.gz`)), 'a PostGIS tile is written by default')
  assert.ok(byNginx(await s.nginx(path, IDENTITY)))
  assert.match((await s.nginx(path, GZIP)).headers['cache-control'], /max-age=60/, 'the database\'s lifetime')

  await runSql(db.url, 'DELETE FROM zurich_points; NOTIFY tile_cannon, \'zurich_points\'')
  for (let i = 0; i < 100 && existsSync(join(s.tiles, 'zurich_points', '12')); i++) await sleep(50)
  const after = await s.nginx(path, IDENTITY)
  assert.ok(!byNginx(after), 'not from disk')
  assert.notDeepEqual(after.body, before.body, 'the purged data is gone')
})

test('a tile directory that cannot be made is said in one line at start (exit 2), not a stack', async (t) => {
  const dir = tempDir(t)
  writeFileSync(join(dir, 'afile'), '')
  writeMbtiles(join(dir, 'roads.mbtiles'), { tiles: vectorTiles(pyramid(0, 1)), metadata: { format: 'pbf' } })
  const { config } = loadConfig({ overrides: { paths: [join(dir, 'roads.mbtiles')], watch: false, demo: false, logLevel: 'silent', tileDir: { dir: join(dir, 'afile', 'tiles') } } })
  await assert.rejects(buildApp(config), (err) => err instanceof ConfigError && err.message === `cannot use ${join(dir, 'afile', 'tiles')} as the tile directory (tileDir.dir): a part of its path is a file`)
  const run = await promisify(execFile)(process.execPath, [join(ROOT, 'server.js'), '--port', '0', '--no-watch', '--tile-dir', join(dir, 'afile', 'tiles'), join(dir, 'roads.mbtiles')]).catch((err) => err)
  assert.equal(run.code, 2)
  assert.match(run.stderr, /^tile-cannon: cannot use .* as the tile directory \(tileDir\.dir\): a part of its path is a file\n$/m)
  assert.doesNotMatch(run.stderr, /\n\s+at /, 'no stack')
})

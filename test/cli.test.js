// The entry point as users run it: `tile-cannon <paths>`, --help, bad flags, config layering, graceful shutdown.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { once } from 'node:events'
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { createServer as createHttpServer } from 'node:http'
import { join } from 'node:path'
import { ROOT, WITHOUT_FILE_OVERRIDES, needs } from './helpers/app.js'
import { freePort } from '../bench/servers.js'
import { tempDir, vectorTiles, writeMbtiles } from './helpers/data.js'
import { ConfigError, loadConfig } from '../lib/config.js'
import { chooseBackend } from '../lib/style/render/index.js'

const SERVER = join(ROOT, 'server.js')

function run (args, { cwd = ROOT, env = {}, as = [] } = {}) {
  const child = spawn(as[0] ?? process.execPath, [...as.slice(1), ...(as.length > 0 ? [process.execPath] : []), SERVER, ...args], { cwd, env: { ...process.env, ...env, TILE_CANNON_LOG_LEVEL: 'warn' }, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  child.stdout.on('data', (d) => { out += d })
  child.stderr.on('data', (d) => { out += d })
  return { child, output: () => out }
}

/** Is the process running (a zombie is not: it ended, and init has yet to reap it)? */
function running (pid) {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /s, '')[0] !== 'Z'
  } catch {
    return false
  }
}

async function waitForHealth (port) {
  for (let i = 0; i < 100; i++) {
    try {
      const res = await fetch(`http://127.0.0.1:${port}/health`)
      if (res.status === 200) return
    } catch {}
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error('server did not become healthy')
}

test('serves the given folders and files, prints each set, and exits cleanly on SIGTERM', async (t) => {
  const dir = tempDir(t)
  mkdirSync(join(dir, 'folder'))
  writeMbtiles(join(dir, 'folder', 'one.mbtiles'), { tiles: vectorTiles([[0, 0, 0]]) })
  writeMbtiles(join(dir, 'two.mbtiles'), { tiles: vectorTiles([[0, 0, 0]]) })
  const port = await freePort()
  const { child, output } = run(['--port', String(port), '--host', '127.0.0.1', '--log-format', 'pretty', join(dir, 'folder'), join(dir, 'two.mbtiles')])
  t.after(() => child.kill('SIGKILL'))
  await waitForHealth(port)
  assert.deepEqual(await (await fetch(`http://127.0.0.1:${port}/list`)).json(), ['one', 'two'])
  const tile = await fetch(`http://127.0.0.1:${port}/one/0/0/0.pbf`, { headers: { 'accept-encoding': 'gzip' } })
  assert.equal(tile.status, 200)
  assert.equal(tile.headers.get('content-type'), 'application/x-protobuf')
  assert.match(output(), new RegExp(`one: http://127.0.0.1:${port}/one.json`))
  child.kill('SIGTERM')
  const [code] = await once(child, 'exit')
  assert.equal(code, 0)
})

test('with JSON logs (not a terminal, as under pm2), stdout holds JSON lines only: the sets are a field of the start-up line', async (t) => {
  const dir = tempDir(t)
  writeMbtiles(join(dir, 'one.mbtiles'), { tiles: vectorTiles([[0, 0, 0]]) })
  const port = await freePort()
  const child = spawn(process.execPath, [SERVER, '--port', String(port), '--host', '127.0.0.1', '--log-level', 'info', dir], { env: { ...process.env, TILE_CANNON_LOG_FORMAT: 'json' }, stdio: ['ignore', 'pipe', 'ignore'] })
  t.after(() => child.kill('SIGKILL'))
  let out = ''
  child.stdout.on('data', (d) => { out += d })
  await waitForHealth(port)
  child.kill('SIGTERM')
  await once(child, 'exit')
  const lines = out.trim().split('\n')
  for (const line of lines) assert.doesNotThrow(() => JSON.parse(line), `not JSON: ${line}`)
  const start = lines.map((l) => JSON.parse(l)).find((l) => /^tile-cannon listening/.test(l.msg))
  assert.equal(lines.filter((l) => /listening/i.test(l)).length, 1, 'said once, not also once an address by Fastify')
  assert.deepEqual(start.sets, [{ id: 'one', tilejson: `http://127.0.0.1:${port}/one.json` }])
})

test('with no path: ./tiles when it exists, otherwise the built-in demo', async (t) => {
  const empty = tempDir(t)
  const port = await freePort()
  const demo = run(['--port', String(port), '--host', '127.0.0.1'], { cwd: empty })
  t.after(() => demo.child.kill('SIGKILL'))
  await waitForHealth(port)
  assert.deepEqual(await (await fetch(`http://127.0.0.1:${port}/list`)).json(), ['countries'])
  const tile = await fetch(`http://127.0.0.1:${port}/countries/1/1/0.pbf`)
  assert.equal(tile.status, 200)
  assert.ok((await tile.arrayBuffer()).byteLength > 1000, 'real country shapes')
  demo.child.kill('SIGTERM')
  await once(demo.child, 'exit')

  const withTiles = tempDir(t)
  mkdirSync(join(withTiles, 'tiles'))
  writeMbtiles(join(withTiles, 'tiles', 'local.mbtiles'), { tiles: vectorTiles([[0, 0, 0]]) })
  const port2 = await freePort()
  const local = run([], { cwd: withTiles, env: { TILE_CANNON_PORT: String(port2), TILE_CANNON_HOST: '127.0.0.1' } })
  t.after(() => local.child.kill('SIGKILL'))
  await waitForHealth(port2)
  assert.deepEqual(await (await fetch(`http://127.0.0.1:${port2}/list`)).json(), ['local'])
  local.child.kill('SIGINT')
  assert.equal((await once(local.child, 'exit'))[0], 0)
})

test('a path given that does not exist: logged once and the rest served, never the demo; none existing is one line and exit 2', { timeout: 30_000 }, async (t) => {
  const dir = tempDir(t)
  mkdirSync(join(dir, 'folder'))
  writeMbtiles(join(dir, 'folder', 'one.mbtiles'), { tiles: vectorTiles([[0, 0, 0]]) })
  const port = await freePort()
  const some = run(['--port', String(port), '--host', '127.0.0.1', '--log-format', 'json', join(dir, 'tilez'), join(dir, 'folder')])
  t.after(() => some.child.kill('SIGKILL'))
  await waitForHealth(port)
  assert.deepEqual(await (await fetch(`http://127.0.0.1:${port}/list`)).json(), ['one'])
  assert.equal((await fetch(`http://127.0.0.1:${port}/ready`)).status, 200)
  const said = some.output().split('\n').filter((l) => l.includes('path not found'))
  assert.equal(said.length, 1)
  assert.equal(JSON.parse(said[0]).path, join(dir, 'tilez'))

  for (const args of [[join(dir, 'tilez')], ['--no-demo', join(dir, 'tilez'), join(dir, 'other.pmtiles')]]) {
    const none = run(['--port', String(port + 1), '--host', '127.0.0.1', ...args])
    t.after(() => none.child.kill('SIGKILL'))
    assert.equal((await once(none.child, 'exit'))[0], 2)
    assert.match(none.output(), /^tile-cannon: (the path given does not exist|none of the paths given exists): .*tilez(, .*other\.pmtiles)?\n$/)
  }
  const nginx = run(['nginx', join(dir, 'tilez'), '--tile-dir', join(dir, 'made')])
  assert.equal((await once(nginx.child, 'exit'))[0], 2)
  assert.match(nginx.output(), /^tile-cannon nginx: the path given does not exist: .*tilez\n$/)
  const bad = run(['nginx', '--cache-mb=-1', '--tile-dir', join(dir, 'made')])
  assert.equal((await once(bad.child, 'exit'))[0], 2)
  assert.match(bad.output(), /^tile-cannon nginx: invalid configuration: --cache-mb must be >= 0, not "-1" \(see tile-cannon nginx --help\)\n$/, 'one line, not the usage after it')
})

// Root lists any folder: the server runs without the capabilities that let it (helpers/app.js WITHOUT_FILE_OVERRIDES).
const withoutOverrides = (args, options) => run(args, { ...options, as: WITHOUT_FILE_OVERRIDES })

test('a folder given that cannot be listed: logged once and the rest served (at start-up and at SIGHUP); alone, one line and exit 2', { timeout: 30_000 }, async (t) => {
  if (!needs(t, WITHOUT_FILE_OVERRIDES !== null, 'setpriv (util-linux) is not installed: as root, the server would list any folder')) return
  const dir = tempDir(t)
  chmodSync(dir, 0o755)
  for (const name of ['locked', 'good', 'other']) mkdirSync(join(dir, name), { mode: 0o755 })
  writeMbtiles(join(dir, 'good', 'one.mbtiles'), { tiles: vectorTiles([[0, 0, 0]]) })
  writeMbtiles(join(dir, 'other', 'two.mbtiles'), { tiles: vectorTiles([[0, 0, 0]]) })
  chmodSync(join(dir, 'locked'), 0)
  const port = await freePort()
  const some = withoutOverrides(['--port', String(port), '--host', '127.0.0.1', '--log-format', 'json', '--no-watch', join(dir, 'locked'), join(dir, 'good'), join(dir, 'other')])
  t.after(() => some.child.kill('SIGKILL'))
  await waitForHealth(port)
  assert.deepEqual(await (await fetch(`http://127.0.0.1:${port}/list`)).json(), ['one', 'two'])
  const said = some.output().split('\n').filter((l) => l.includes('cannot be listed'))
  assert.equal(said.length, 1)
  assert.equal(JSON.parse(said[0]).path, join(dir, 'locked'))
  assert.doesNotMatch(some.output(), /\n\s+at /, 'no stack')

  // A reload while another folder cannot be listed serves what is new elsewhere; the locked folder's sets are kept
  // (test/catalog-folders.test.js).
  chmodSync(join(dir, 'other'), 0)
  writeMbtiles(join(dir, 'good', 'new.mbtiles'), { tiles: vectorTiles([[0, 0, 0]]) })
  some.child.kill('SIGHUP')
  for (let i = 0; i < 50 && !some.output().includes('catalog reloaded'); i++) await new Promise((resolve) => setTimeout(resolve, 100))
  assert.deepEqual((await (await fetch(`http://127.0.0.1:${port}/list`)).json()).sort(), ['new', 'one', 'two'])
  assert.doesNotMatch(some.output(), /reload failed/)

  const none = withoutOverrides(['--port', String(port + 1), '--host', '127.0.0.1', join(dir, 'locked')])
  assert.equal((await once(none.child, 'exit'))[0], 2)
  assert.match(none.output(), /^tile-cannon: nothing given can be served: .*locked \(the folder cannot be listed \(EACCES\)\)\n$/)
  const nginx = withoutOverrides(['nginx', join(dir, 'locked'), '--tile-dir', join(dir, 'made')])
  assert.equal((await once(nginx.child, 'exit'))[0], 2)
  assert.match(nginx.output(), /^tile-cannon nginx: nothing given can be served: .*locked \(the folder cannot be listed \(EACCES\)\)\n$/)
})

test('paths given that can never be sets (a config file without --config, a .zip, a style) are one line and exit 2; an empty folder is served and said', { timeout: 30_000 }, async (t) => {
  const dir = tempDir(t)
  writeFileSync(join(dir, 'tile-cannon.yaml'), 'port: 3000\n')
  writeFileSync(join(dir, 'style.json'), '{"version": 8, "sources": {}, "layers": []}')
  writeFileSync(join(dir, 'tiles.zip'), 'PK')
  const port = await freePort()
  const none = run(['--port', String(port), '--host', '127.0.0.1', join(dir, 'tile-cannon.yaml')])
  t.after(() => none.child.kill('SIGKILL'))
  assert.equal((await once(none.child, 'exit'))[0], 2)
  assert.match(none.output(), /^tile-cannon: nothing given can be served: .*tile-cannon\.yaml \(not a tileset file .*; did you mean --config .*tile-cannon\.yaml\?\)\n$/)
  const style = run(['--port', String(port), '--host', '127.0.0.1', join(dir, 'style.json'), join(dir, 'tiles.zip')])
  t.after(() => style.child.kill('SIGKILL'))
  assert.equal((await once(style.child, 'exit'))[0], 2)
  assert.match(style.output(), /style\.json \(not a MosaicJSON\/STAC file .*\), .*tiles\.zip \(not a tileset file \(MBTiles/)

  mkdirSync(join(dir, 'empty'))
  const empty = run(['--port', String(port), '--host', '127.0.0.1', '--log-format', 'json', join(dir, 'empty'), join(dir, 'tiles.zip')])
  t.after(() => empty.child.kill('SIGKILL'))
  await waitForHealth(port)
  assert.deepEqual(await (await fetch(`http://127.0.0.1:${port}/list`)).json(), [])
  assert.equal(empty.output().split('\n').filter((l) => l.includes('no tileset file in this folder (yet): it is watched')).length, 1)
  assert.equal(empty.output().split('\n').filter((l) => l.includes('tiles.zip')).length, 1)
})

test('tile-cannon nginx --listen takes a port (1-65535) or address:port; anything else is one line and exit 2, never printed into a config', async (t) => {
  const dir = tempDir(t)
  writeMbtiles(join(dir, 'one.mbtiles'), { tiles: vectorTiles([[0, 0, 0]]) })
  for (const listen of ['99999', 'abc', '0', '127.0.0.1:70000', '8080; include /etc/passwd']) {
    const nginx = run(['nginx', dir, '--tile-dir', join(dir, 'made'), '--listen', listen])
    assert.equal((await once(nginx.child, 'exit'))[0], 2, listen)
    assert.match(nginx.output(), /^tile-cannon nginx: --listen is a port \(1-65535\) or address:port .*\n$/, listen)
  }
  for (const listen of ['8080', '127.0.0.1:8080', '[::1]:8080']) {
    const nginx = run(['nginx', dir, '--tile-dir', join(dir, 'made'), '--listen', listen])
    assert.equal((await once(nginx.child, 'exit'))[0], 0, listen)
    assert.ok(nginx.output().includes(`listen ${listen};`), listen)
  }
})

test("the Dockerfile's HEALTHCHECK asks the port the server listens on (TILE_CANNON_PORT), not 3000 whatever it is", async (t) => {
  const healthcheck = /^HEALTHCHECK .*? CMD (.*)$/m.exec(readFileSync(join(ROOT, 'Dockerfile'), 'utf8'))[1]
  assert.doesNotMatch(healthcheck, /^\[/, 'the shell form: the exec form expands no variable')
  const port = await freePort()
  const server = run(['--port', String(port), '--host', '127.0.0.1'])
  t.after(() => server.child.kill('SIGKILL'))
  await waitForHealth(port)
  const check = spawnSync('sh', ['-c', healthcheck], { env: { ...process.env, TILE_CANNON_PORT: String(port) }, timeout: 10_000 })
  assert.equal(check.status, 0, String(check.stderr))
})

test('--help prints usage; a bad flag or config is a clear message and exit 2, no stack', async (t) => {
  const help = run(['--help'])
  assert.equal((await once(help.child, 'exit'))[0], 0)
  assert.match(help.output(), /Usage: tile-cannon/)
  // What --no-viewer does (the home page keeps its previews: routes/index.js), not what it does not.
  assert.match(help.output(), /--no-viewer +no map viewer \(\/viewer\/…, and the home page's links to it; its previews stay\)/)
  const bad = run(['--bogus'])
  assert.equal((await once(bad.child, 'exit'))[0], 2)
  assert.match(bad.output(), /tile-cannon: .*bogus/)
  assert.doesNotMatch(bad.output(), /at .*\.js:\d+/)
  const port = run(['--port', 'eighty'])
  assert.equal((await once(port.child, 'exit'))[0], 2)
  // The one line, not the usage after it (40 lines); an unknown key in a config file named.
  assert.equal(port.output(), 'tile-cannon: invalid configuration: --port must be integer, not "eighty" (see --help)\n')
  const dir = tempDir(t)
  writeFileSync(join(dir, 'c.yaml'), 'bogusKey: 1\ns3:\n  regoin: eu-west-1\n')
  const unknown = run(['--config', join(dir, 'c.yaml')])
  assert.equal((await once(unknown.child, 'exit'))[0], 2)
  assert.equal(unknown.output(), 'tile-cannon: invalid configuration: config has no setting "bogusKey"; s3 has no setting "regoin" (see --help)\n')
  // A proxy that is no address, CIDR or name: a TypeError's stack (exit 1) when the app was built.
  for (const [args, env] of [[['--trust-proxy', '10.0.0.0/99']], [[], { TILE_CANNON_TRUST_PROXY: 'loopback, garbage/99' }]]) {
    const proxy = run(['--no-demo', ...args], { env })
    assert.equal((await once(proxy.child, 'exit'))[0], 2)
    assert.match(proxy.output(), /^tile-cannon: invalid configuration: (--trust-proxy "10\.0\.0\.0\/99"|TILE_CANNON_TRUST_PROXY="loopback, garbage\/99": trustProxy "garbage\/99") is not an address, a CIDR, loopback, linklocal or uniquelocal/)
    assert.doesNotMatch(proxy.output(), /TypeError|at .*\.js:\d+/)
  }
})

test('the port in use is a clear message and exit 1', async (t) => {
  const port = await freePort()
  const blocker = createServer().listen(port, '127.0.0.1')
  await once(blocker, 'listening')
  t.after(() => blocker.close())
  const { child, output } = run(['--port', String(port), '--host', '127.0.0.1', '--no-demo'])
  assert.equal((await once(child, 'exit'))[0], 1)
  assert.match(output(), /port is in use/)
})

test('SIGTERM during start-up (a remote store not answering yet) stops it: exit 0 at once, never listening, no renderer child left', { timeout: 30_000 }, async (t) => {
  const dir = tempDir(t)
  writeMbtiles(join(dir, 'dots.mbtiles'), { tiles: vectorTiles([[0, 0, 0]]) })
  mkdirSync(join(dir, 'styles'))
  writeFileSync(join(dir, 'styles', 'dots.json'), JSON.stringify({ version: 8, sources: { dots: { type: 'vector', url: 'mbtiles://dots' } }, layers: [{ id: 'bg', type: 'background', paint: { 'background-color': '#f00' } }] }))
  // An origin that holds its answer: start-up waits on it (its timeout is 20 s).
  const held = []
  let asked
  const origin = createHttpServer((req, res) => { held.push(res); asked?.() })
  const askedOnce = new Promise((resolve) => { asked = resolve })
  origin.listen(0, '127.0.0.1')
  await once(origin, 'listening')
  t.after(() => { for (const res of held) res.destroy(); origin.close() })
  const port = await freePort()
  const { child, output } = run(['--port', String(port), '--host', '127.0.0.1', '--log-format', 'json', '--log-level', 'info', '--styles', join(dir, 'styles'),
    join(dir, 'dots.mbtiles'), `http://127.0.0.1:${origin.address().port}/slow.pmtiles`])
  t.after(() => child.kill('SIGKILL'))
  await askedOnce // the catalog is loading: the renderer's children (if it can render here) have started
  const renderer = chooseBackend({}).backend !== null
  const children = spawnSync('pgrep', ['-P', String(child.pid)], { encoding: 'utf8' }).stdout.trim().split('\n').filter(Boolean).map(Number)
  if (renderer) assert.ok(children.length > 0, 'the renderer started its children')
  const sent = Date.now()
  child.kill('SIGTERM')
  const [code, signal] = await once(child, 'exit')
  assert.deepEqual([code, signal], [0, null], output())
  assert.ok(Date.now() - sent < 5000, `exited ${Date.now() - sent} ms after SIGTERM`)
  const lines = output().trim().split('\n').map((l) => JSON.parse(l))
  assert.equal(lines.filter((l) => /stopped during start-up/.test(l.msg)).length, 1, output())
  assert.equal(lines.filter((l) => /listening/.test(l.msg)).length, 0, 'never listened')
  await assert.rejects(fetch(`http://127.0.0.1:${port}/health`))
  for (const pid of children) {
    let alive = true
    for (let i = 0; i < 20 && (alive = running(pid)); i++) await new Promise((resolve) => setTimeout(resolve, 50))
    assert.equal(alive, false, `child ${pid} left running`)
  }
})

test('config layering: flags > environment > config file > defaults', (t) => {
  const dir = tempDir(t)
  writeFileSync(join(dir, 'c.yaml'), 'port: 4000\nhost: 127.0.0.1\ncacheMB: 16\npaths: [data]\nsets:\n  roads:\n    missingStatus: 404\n')
  writeFileSync(join(dir, 'c.json'), JSON.stringify({ port: 4100, cors: ['https://a.example'] }))
  const fileOnly = loadConfig({ argv: ['--config', 'c.yaml'], cwd: dir }).config
  assert.equal(fileOnly.port, 4000)
  assert.equal(fileOnly.cacheMB, 16)
  assert.deepEqual(fileOnly.paths, [join(dir, 'data')], 'relative to the config file')
  assert.equal(fileOnly.sets.roads.missingStatus, 404)
  assert.equal(fileOnly.cacheControl, 'public, max-age=3600', 'defaults fill the rest')
  const env = loadConfig({ argv: [], env: { TILE_CANNON_CONFIG: join(dir, 'c.yaml'), TILE_CANNON_PORT: '5000', TILE_CANNON_CORS: 'false' }, cwd: dir }).config
  assert.equal(env.port, 5000)
  assert.equal(env.cors, false)
  assert.equal(env.host, '127.0.0.1')
  const flags = loadConfig({ argv: ['--config', 'c.json', '--port', '6000', 'x', 'y'], env: { TILE_CANNON_PORT: '5000' }, cwd: dir }).config
  assert.equal(flags.port, 6000)
  assert.deepEqual(flags.cors, ['https://a.example'])
  assert.deepEqual(flags.paths, [join(dir, 'x'), join(dir, 'y')])
  assert.ok(Object.isFrozen(flags) && Object.isFrozen(flags.paths), 'frozen')
  assert.throws(() => loadConfig({ argv: ['--cache-mb', '-1'] }), ConfigError)
  assert.throws(() => loadConfig({ argv: ['--config', 'missing.yaml'], cwd: dir }), /cannot read config file/)
  writeFileSync(join(dir, 'bad.yaml'), 'port: [')
  assert.throws(() => loadConfig({ argv: ['--config', 'bad.yaml'], cwd: dir }), /not valid YAML/)
  writeFileSync(join(dir, 'unknown.json'), '{"prot": 1}')
  assert.throws(() => loadConfig({ argv: ['--config', 'unknown.json'], cwd: dir }), /invalid configuration: config has no setting "prot"$/)
})

test('a bad value from the environment names its variable; switches take the usual spellings; enums list their values', (t) => {
  const fails = (options) => { try { loadConfig(options) } catch (err) { return err.message } }
  assert.equal(fails({ env: { TILE_CANNON_LOG_REQUESTS: 'maybe' } }), 'invalid configuration: TILE_CANNON_LOG_REQUESTS="maybe" is not a switch: write true or false (1/0, yes/no, on/off also work)')
  assert.match(fails({ env: { TILE_CANNON_METRICS: 'nah' } }), /^invalid configuration: TILE_CANNON_METRICS="nah" is not a switch/)
  for (const [word, value] of [['1', true], ['0', false], ['yes', true], ['No', false], ['TRUE', true], ['false', false], [' on ', true], ['off', false]]) {
    const { config } = loadConfig({ env: { TILE_CANNON_LOG_REQUESTS: word, TILE_CANNON_METRICS: word, TILE_CANNON_WATCH: word } })
    assert.deepEqual([config.logRequests, config.metrics.enabled, config.watch], [value, value, value], word)
  }
  assert.equal(fails({ env: { TILE_CANNON_CACHE_MB: '1g' } }), 'invalid configuration: TILE_CANNON_CACHE_MB="1g": cacheMB must be number')
  assert.equal(fails({ argv: ['--cache-mb', '1g'], env: { TILE_CANNON_CACHE_MB: '1g' } }), 'invalid configuration: --cache-mb must be number, not "1g"', 'the flag set it, not the variable')
  assert.equal(fails({ env: { TILE_CANNON_API_KEYS: 'a b' } }), 'invalid configuration: TILE_CANNON_API_KEYS: apiKeys.0 must match pattern "^[\\x21-\\x7e]+$"', 'a secret is not repeated')
  // Enums: the values allowed, and the one given.
  assert.equal(fails({ argv: ['--log-level', 'verbose'] }), 'invalid configuration: --log-level must be one of "fatal", "error", "warn", "info", "debug", "trace", "silent", not "verbose"')
  assert.equal(fails({ env: { TILE_CANNON_LOG_FORMAT: 'text' } }), 'invalid configuration: TILE_CANNON_LOG_FORMAT="text": logFormat must be one of "auto", "pretty", "json", not "text"')
  assert.equal(fails({ overrides: { sets: { roads: { path: '/x.mbtiles', missingStatus: 500 } } } }), 'invalid configuration: sets.roads.missingStatus must be one of 204, 404, not 500')
})

test('a bad value given as a flag names the flag and the value, in one line and exit 2: numbers, enums, lists, patterns, switches', async (t) => {
  const cases = [
    [['--cache-mb', '-5'], '--cache-mb must be >= 0, not "-5"'],
    [['--cache-mb', 'abc'], '--cache-mb must be number, not "abc"'],
    [['--port', '99999'], '--port must be <= 65535, not "99999"'],
    [['-p', '1.5'], '--port must be integer, not "1.5"'],
    [['--tile-dir-max-mb', '0'], '--tile-dir-max-mb must be > 0, not "0"'],
    [['--log-format', 'text'], '--log-format must be one of "auto", "pretty", "json", not "text"'],
    [['--allowed-hosts', 'a.example,b example'], '--allowed-hosts must match pattern "^[A-Za-z0-9.\\-:[\\]_]+$", not "b example"'],
    [['--trust-proxy', 'loopback,10.0.0.0/99'], '--trust-proxy "10.0.0.0/99" is not an address, a CIDR, loopback, linklocal or uniquelocal (invalid range on address: 10.0.0.0/99)'],
    [['--public-url', 'tiles.example'], '--public-url must match pattern "^https?://", not "tiles.example"'],
    [['--redis', 'http://user:secret@cache'], '--redis must match pattern "^rediss?://"'], // a password is not repeated
    [['--log-requests=yes'], "Option '--log-requests' does not take an argument"],
  ]
  await Promise.all(cases.map(async ([args, message]) => {
    const bad = run(['--no-demo', ...args], { env: { TILE_CANNON_CACHE_MB: '64' } })
    assert.equal((await once(bad.child, 'exit'))[0], 2, args.join(' '))
    assert.equal(bad.output(), `tile-cannon: ${message.startsWith('Option') ? '' : 'invalid configuration: '}${message} (see --help)\n`, args.join(' '))
  }))
})

test('a set named like a route (styles, list, health…) is served under another id, with a warning naming both', async (t) => {
  const dir = tempDir(t)
  for (const name of ['styles', 'list', 'roads']) writeMbtiles(join(dir, `${name}.mbtiles`), { tiles: vectorTiles([[0, 0, 0]]) })
  const port = await freePort()
  const { child, output } = run(['--port', String(port), '--host', '127.0.0.1', dir])
  t.after(() => child.kill('SIGKILL'))
  await waitForHealth(port)
  const ids = await (await fetch(`http://127.0.0.1:${port}/list`)).json()
  assert.deepEqual(ids.sort(), ['list.mbtiles', 'roads', 'styles.mbtiles'])
  assert.equal((await fetch(`http://127.0.0.1:${port}/styles.mbtiles/0/0/0`)).status, 200)
  assert.match(output(), /'styles' is a reserved name \(\/styles\): the set is served as 'styles\.mbtiles'/)
  assert.match(output(), /'list' is a reserved name/)
})

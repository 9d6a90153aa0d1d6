// Served folders that misbehave for a while: one that cannot be listed at a reload (a mount glitch, a permissions
// slip), a link in one whose target is not there (yet).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { chmodSync, mkdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { ROOT, WITHOUT_FILE_OVERRIDES, makeApp, needs } from './helpers/app.js'
import { freePort } from '../bench/servers.js'
import { pyramid, tempDir, vectorTiles, writeMbtiles, writePmtiles } from './helpers/data.js'

/** Polls until `check` holds, failing after a few seconds. */
async function eventually (check, what, tries = 100) {
  for (let i = 0; i < tries; i++) {
    if (await check()) return
    await sleep(50)
  }
  assert.fail(`timed out waiting for: ${what}`)
}

/**
 * The server as a user runs it, bound by file permissions (root reads and lists any folder: helpers/app.js
 * WITHOUT_FILE_OVERRIDES), its JSON log lines gathered.
 */
async function serve (t, args) {
  const port = await freePort()
  const command = [...WITHOUT_FILE_OVERRIDES, process.execPath, join(ROOT, 'server.js'), '--port', String(port), '--host', '127.0.0.1', '--log-format', 'json', '--log-level', 'info', ...args]
  const child = spawn(command[0], command.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] })
  t.after(() => child.kill('SIGKILL'))
  let out = ''
  child.stdout.on('data', (d) => { out += d })
  child.stderr.on('data', (d) => { out += d })
  const lines = () => out.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l))
  const get = (path) => fetch(`http://127.0.0.1:${port}${path}`)
  await eventually(async () => (await get('/health').catch(() => null))?.status === 200, 'the server to start')
  const reloads = () => lines().filter((l) => l.msg === 'catalog reloaded').length
  const reload = async () => {
    const before = reloads()
    child.kill('SIGHUP')
    await eventually(() => reloads() > before, 'the reload')
  }
  return { get, lines, reload, list: async () => (await (await get('/list')).json()).sort(), output: () => out }
}

const said = (server, words) => server.lines().filter((l) => l.msg.includes(words))

for (const watching of [false, true]) {
  test(`a served folder that cannot be listed at a reload keeps its sets (said once), and is served as it is once it lists again (${watching ? 'watched' : 'at SIGHUP'})`, { timeout: 30_000 }, async (t) => {
    if (!needs(t, WITHOUT_FILE_OVERRIDES !== null, 'setpriv (util-linux) is not installed: as root, the server would list any folder')) return
    const dir = tempDir(t)
    chmodSync(dir, 0o755)
    const tiles = join(dir, 'tiles')
    mkdirSync(tiles, { mode: 0o755 })
    mkdirSync(join(dir, 'other'), { mode: 0o755 })
    writeMbtiles(join(tiles, 'a.mbtiles'), { tiles: vectorTiles(pyramid(0, 1)), metadata: { maxzoom: '1' } })
    writePmtiles(join(tiles, 'p.pmtiles'), { tiles: vectorTiles(pyramid(0, 1)) })
    writeMbtiles(join(dir, 'other', 'b.mbtiles'), { tiles: vectorTiles([[0, 0, 0]]) })
    const server = await serve(t, [...(watching ? [] : ['--no-watch']), tiles, join(dir, 'other')])
    assert.deepEqual(await server.list(), ['a', 'b', 'p'])

    chmodSync(tiles, 0)
    await server.reload()
    assert.deepEqual(await server.list(), ['a', 'b', 'p'], 'its sets are kept')
    // Tiles not read before (not cached): read through the handles opened before.
    assert.equal((await server.get('/a/1/1/1')).status, 200)
    assert.equal((await server.get('/p/1/0/1')).status, 200)
    const lines = said(server, 'cannot be listed')
    assert.equal(lines.length, 1)
    assert.equal(lines[0].path, tiles)
    assert.match(lines[0].msg, /^the folder cannot be listed \(EACCES\): its sets are kept/)
    assert.doesNotMatch(server.output(), /\n\s+at |reload failed/, 'no stack')

    // Still so at the next reload: kept, and not said again. Files added and removed meanwhile (by root) wait for the
    // listing.
    writeMbtiles(join(tiles, 'c.mbtiles'), { tiles: vectorTiles([[0, 0, 0]]) })
    rmSync(join(tiles, 'p.pmtiles'))
    await server.reload()
    assert.deepEqual(await server.list(), ['a', 'b', 'p'])
    assert.equal((await server.get('/p/1/1/1')).status, 200)
    assert.equal(said(server, 'cannot be listed').length, 1, 'said once while it stays so')

    chmodSync(tiles, 0o755)
    if (!watching) await server.reload()
    await eventually(async () => said(server, 'can be listed again').length > 0 && (await server.list()).includes('c') && !(await server.list()).includes('p'), 'the folder listed again')
    assert.deepEqual(await server.list(), ['a', 'b', 'c'])
    assert.equal(said(server, 'can be listed again').length, 1)
    assert.equal((await server.get('/c/0/0/0')).status, 200)
  })
}

test('served paths under a folder that cannot be searched at a reload (chmod 000 above them) keep their sets, said so, not "path not found"; back as they are once it can', { timeout: 30_000 }, async (t) => {
  if (!needs(t, WITHOUT_FILE_OVERRIDES !== null, 'setpriv (util-linux) is not installed: as root, the server would search any folder')) return
  const dir = tempDir(t)
  chmodSync(dir, 0o755)
  const outer = join(dir, 'outer')
  const tiles = join(outer, 'tiles')
  mkdirSync(tiles, { recursive: true, mode: 0o755 })
  chmodSync(outer, 0o755)
  mkdirSync(join(dir, 'other'), { mode: 0o755 })
  writeMbtiles(join(tiles, 'a.mbtiles'), { tiles: vectorTiles(pyramid(0, 1)), metadata: { maxzoom: '1' } })
  writePmtiles(join(outer, 'one.pmtiles'), { tiles: vectorTiles(pyramid(0, 1)) })
  writeMbtiles(join(dir, 'other', 'b.mbtiles'), { tiles: vectorTiles([[0, 0, 0]]) })
  // A set of its own too (sets.<id>.path, as given: relative to the config file).
  writeMbtiles(join(outer, 'own.mbtiles'), { tiles: vectorTiles(pyramid(0, 1)), metadata: { maxzoom: '1' } })
  const config = join(dir, 'tile-cannon.json')
  writeFileSync(config, JSON.stringify({ sets: { mine: { path: 'outer/own.mbtiles' } } }))
  const server = await serve(t, ['--no-watch', '--config', config, tiles, join(outer, 'one.pmtiles'), join(dir, 'other')])
  assert.deepEqual(await server.list(), ['a', 'b', 'mine', 'one'])

  chmodSync(outer, 0) // the folder served and the files served are there, but cannot be reached
  await server.reload()
  assert.deepEqual(await server.list(), ['a', 'b', 'mine', 'one'], 'their sets are kept')
  assert.equal((await server.get('/a/1/1/1')).status, 200, 'served from the handles opened before')
  assert.equal((await server.get('/one/1/0/1')).status, 200)
  assert.equal((await server.get('/mine/1/1/0')).status, 200)
  assert.equal(said(server, 'path not found').length, 0, 'they are there')
  const lines = said(server, 'cannot be searched')
  assert.deepEqual(lines.map((l) => l.path).sort(), [join(outer, 'one.pmtiles'), `${join(outer, 'own.mbtiles')} (sets.mine.path)`, tiles])
  for (const line of lines) assert.match(line.msg, /^a folder on its path cannot be searched \(EACCES\): its sets are kept/)
  await server.reload()
  assert.equal(said(server, 'cannot be searched').length, 3, 'said once while it stays so')
  assert.doesNotMatch(server.output(), /\n\s+at |reload failed/, 'no stack')

  // At start-up, alone, such a set of its own is one line and exit 2 as a path given is: never 'does not exist'.
  const alone = join(dir, 'alone.json')
  writeFileSync(alone, JSON.stringify({ sets: { mine: { path: 'outer/own.mbtiles' } } }))
  const startup = spawnSync(WITHOUT_FILE_OVERRIDES[0] ?? process.execPath, [...WITHOUT_FILE_OVERRIDES.slice(1), ...(WITHOUT_FILE_OVERRIDES.length > 0 ? [process.execPath] : []), join(ROOT, 'server.js'), '--config', alone, '--port', '0'], { encoding: 'utf8', timeout: 10_000 })
  assert.equal(startup.status, 2, startup.stderr)
  assert.match(startup.stderr, /^tile-cannon: nothing given can be served: \/.*\/outer\/own\.mbtiles \(sets\.mine\.path\) \(a folder on its path cannot be searched \(EACCES\)\)\n$/)

  writeMbtiles(join(tiles, 'c.mbtiles'), { tiles: vectorTiles([[0, 0, 0]]) }) // (by root, meanwhile)
  chmodSync(outer, 0o755)
  await server.reload()
  await eventually(async () => (await server.list()).includes('c'), 'the folder listed again')
  assert.deepEqual(await server.list(), ['a', 'b', 'c', 'mine', 'one'])
  assert.equal((await server.get('/one/1/0/1')).status, 200)
  assert.equal((await server.get('/mine/1/1/0')).status, 200)
})

test('a link in a served folder whose target is missing is said once (by its name in the folder), and served once the target is there: watched, or at SIGHUP', async (t) => {
  for (const watch of [true, false]) {
    const dir = tempDir(t)
    const served = join(dir, 'served')
    mkdirSync(served)
    writeMbtiles(join(served, 'a.mbtiles'), { tiles: vectorTiles([[0, 0, 0]]) })
    symlinkSync('../elsewhere/x.mbtiles', join(served, 'x.mbtiles'))
    symlinkSync('elsewhere/given.mbtiles', join(dir, 'given.mbtiles')) // a path given that is such a link
    const logs = []
    const app = await makeApp(t, { paths: [served, join(dir, 'given.mbtiles')], watch, watchDebounceMs: 50 }, { logs })
    const list = async () => (await app.inject({ url: '/list' })).json().sort()
    const broken = () => logs.filter((l) => /the link's target does not exist/.test(l.msg))
    assert.deepEqual(await list(), ['a'])
    assert.equal(broken().length, 1)
    assert.deepEqual([broken()[0].path, broken()[0].file], [served, 'x.mbtiles'])
    assert.match(broken()[0].msg, watch ? /it is watched/ : /at SIGHUP/)
    assert.doesNotMatch(JSON.stringify(broken()[0]), /elsewhere/, 'the target is not needed')

    await app.catalog.reload()
    assert.equal(broken().length, 1, 'not said again while it stays so')

    // Its target's folder appears, then the file, renamed into place.
    mkdirSync(join(dir, 'elsewhere'))
    for (const name of ['x', 'given']) {
      writeMbtiles(join(dir, 'elsewhere', `${name}.tmp`), { tiles: vectorTiles([[0, 0, 0]]) })
      renameSync(join(dir, 'elsewhere', `${name}.tmp`), join(dir, 'elsewhere', `${name}.mbtiles`))
    }
    if (watch) await eventually(async () => (await list()).length === 3, 'the links served once their targets are there')
    else await app.catalog.reload()
    assert.deepEqual(await list(), ['a', 'given', 'x'])
    assert.equal((await app.inject({ url: '/x/0/0/0' })).statusCode, 200)

    if (watch) {
      // A broken link put in the folder later is said and waited for too.
      symlinkSync('../elsewhere/y.mbtiles', join(served, 'y.mbtiles'))
      await eventually(() => broken().length === 2, 'the new broken link said')
      assert.equal(broken()[1].file, 'y.mbtiles')
      writeMbtiles(join(dir, 'elsewhere', 'y.mbtiles'), { tiles: vectorTiles([[0, 0, 0]]) })
      await eventually(async () => (await list()).includes('y'), 'the new link served once its target is there')
    }
  }
})

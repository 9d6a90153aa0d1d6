// The catalog follows its folders: new, replaced and deleted files, files still being written, SIGHUP-style reloads.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { makeApp, needs } from './helpers/app.js'
import { PNG, makeMvt, pyramid, tempDir, vectorTiles, writeMbtiles, writePmtiles } from './helpers/data.js'

/** Polls until `check` holds (fs events arrive asynchronously), failing after a few seconds. */
async function eventually (check, what, tries = 100) {
  for (let i = 0; i < tries; i++) {
    if (await check()) return
    await sleep(50)
  }
  assert.fail(`timed out waiting for: ${what}`)
}

const list = async (app) => (await app.inject({ url: '/list' })).json().sort()

test('a file dropped into a served folder is served without a restart; a deleted one is dropped', async (t) => {
  const dir = tempDir(t)
  writeMbtiles(join(dir, 'a.mbtiles'), { tiles: vectorTiles([[0, 0, 0]]) })
  const app = await makeApp(t, { paths: [dir], watch: true, watchDebounceMs: 50 })
  assert.deepEqual(await list(app), ['a'])

  // Written under another name, then moved in: how a careful copy lands.
  writePmtiles(join(dir, 'b.tmp'), { tiles: vectorTiles([[0, 0, 0]]) })
  renameSync(join(dir, 'b.tmp'), join(dir, 'b.pmtiles'))
  await eventually(async () => (await list(app)).includes('b'), 'b.pmtiles to appear')
  assert.equal((await app.inject({ url: '/b/0/0/0' })).statusCode, 200)

  rmSync(join(dir, 'a.mbtiles'))
  await eventually(async () => !(await list(app)).includes('a'), 'a.mbtiles to go')
  assert.equal((await app.inject({ url: '/a/0/0/0' })).statusCode, 404)
})

test('a replaced file is re-read: new tiles, new ETag, stale cache dropped', async (t) => {
  const dir = tempDir(t)
  writeMbtiles(join(dir, 'set.mbtiles'), { tiles: [{ z: 0, x: 0, y: 0, data: PNG }], metadata: { format: 'png' } })
  const app = await makeApp(t, { paths: [dir], watch: true, watchDebounceMs: 50 })
  const before = await app.inject({ url: '/set/0/0/0' })
  assert.equal(before.headers['content-type'], 'image/png')
  const oldEntry = app.catalog.get('set')

  writeMbtiles(join(dir, 'next.tmp'), { tiles: vectorTiles(pyramid(0, 1)), metadata: { format: 'pbf', maxzoom: '1' } })
  renameSync(join(dir, 'next.tmp'), join(dir, 'set.mbtiles'))
  await eventually(async () => (await app.inject({ url: '/set/0/0/0' })).headers['content-type'] === 'application/x-protobuf', 'the new content')
  const after = await app.inject({ url: '/set/0/0/0' })
  assert.notEqual(after.headers.etag, before.headers.etag)
  assert.equal((await app.inject({ url: '/set/1/1/1' })).statusCode, 200, 'new zoom range')
  assert.equal(oldEntry.retired, true)
  assert.equal(app.catalog.get('set').source.tilejson.maxzoom, 1)
})

test('in-flight reads on a replaced file finish on the old handle', async (t) => {
  const dir = tempDir(t)
  writePmtiles(join(dir, 'p.pmtiles'), { tiles: vectorTiles(pyramid(0, 3)) })
  const app = await makeApp(t, { paths: [dir], watch: false, cacheMB: 0 })
  const entry = app.catalog.get('p')
  // Many reads under way, then the file is replaced and the catalog re-opens it mid-flight.
  const pending = pyramid(0, 3).map(([z, x, y]) => app.inject({ url: `/p/${z}/${x}/${y}` }))
  writePmtiles(join(dir, 'p.tmp'), { tiles: vectorTiles(pyramid(0, 2)) })
  renameSync(join(dir, 'p.tmp'), join(dir, 'p.pmtiles'))
  await app.catalog.refreshFile(join(dir, 'p.pmtiles'))
  const results = await Promise.all(pending)
  for (const res of results) assert.equal(res.statusCode, 200)
  assert.equal(entry.retired, true)
  assert.equal(entry.active, 0)
  assert.equal((await app.inject({ url: '/p/3/0/0' })).statusCode, 404, 'the new file has no z3')
})

test('a file still being written is not served half-made', async (t) => {
  const dir = tempDir(t)
  const app = await makeApp(t, { paths: [dir], watch: true, watchDebounceMs: 50 })
  // An MBTiles with a rollback journal beside it: a writer is in the middle of a transaction.
  writeMbtiles(join(dir, 'w.tmp'), { tiles: vectorTiles([[0, 0, 0]]) })
  writeFileSync(join(dir, 'w.mbtiles-journal'), 'x')
  renameSync(join(dir, 'w.tmp'), join(dir, 'w.mbtiles'))
  await eventually(() => app.catalog.get('w') !== undefined, 'w to be seen')
  assert.deepEqual(await list(app), [])
  assert.equal((await app.inject({ url: '/w/0/0/0' })).statusCode, 503)
  rmSync(join(dir, 'w.mbtiles-journal'))
  await eventually(async () => (await list(app)).includes('w'), 'w once the journal is gone')

  // A PMTiles copied in place: first a part, then the whole.
  const full = writePmtiles(join(dir, 'tmp.bin'), { tiles: vectorTiles(pyramid(0, 3)) })
  writeFileSync(join(dir, 'c.pmtiles'), full.subarray(0, 300))
  await eventually(() => app.catalog.get('c') !== undefined, 'c to be seen')
  assert.equal((await app.inject({ url: '/c/0/0/0' })).statusCode, 503)
  assert.match(app.catalog.get('c').reason, /incomplete|too short/)
  writeFileSync(join(dir, 'c.pmtiles'), full)
  await eventually(async () => (await app.inject({ url: '/c/0/0/0' })).statusCode === 200, 'c once complete')
})

test('reload (SIGHUP) re-opens every set, finds new files and drops missing ones', async (t) => {
  const dir = tempDir(t)
  writeMbtiles(join(dir, 'a.mbtiles'), { tiles: vectorTiles([[0, 0, 0]]) })
  writeMbtiles(join(dir, 'b.mbtiles'), { tiles: vectorTiles([[0, 0, 0]]) })
  const app = await makeApp(t, { paths: [dir], watch: false })
  const a = app.catalog.get('a')
  rmSync(join(dir, 'b.mbtiles'))
  writePmtiles(join(dir, 'c.pmtiles'), { tiles: vectorTiles([[0, 0, 0]]) })
  assert.deepEqual(await list(app), ['a', 'b'], 'nothing changes without watching until the reload')
  await app.catalog.reload()
  assert.deepEqual(await list(app), ['a', 'c'])
  assert.notEqual(app.catalog.get('a'), a, 're-opened')
  assert.equal(a.retired, true)
  assert.equal((await app.inject({ url: '/a/0/0/0' })).statusCode, 200)
})

test('a writer committing into a new file in a served folder is never blocked, and the set appears when done', async (t) => {
  const dir = tempDir(t)
  const app = await makeApp(t, { paths: [dir], watch: true, watchDebounceMs: 50 })
  const Database = (await import('better-sqlite3')).default
  const db = new Database(join(dir, 'grow.mbtiles'))
  db.exec('CREATE TABLE metadata (name TEXT, value TEXT); CREATE TABLE tiles (zoom_level INTEGER, tile_column INTEGER, tile_row INTEGER, tile_data BLOB)')
  const insert = db.prepare('INSERT INTO tiles VALUES (?, ?, ?, ?)')
  const tiles = vectorTiles(pyramid(0, 3))
  for (const tile of tiles) {
    insert.run(tile.z, tile.x, 2 ** tile.z - 1 - tile.y, tile.data) // one commit each; throws if the server locked it
    await sleep(30)
  }
  db.close()
  await eventually(async () => (await app.inject({ url: '/grow/3/1/1' })).statusCode === 200, 'the finished file')
  assert.equal(app.catalog.get('grow').source.tilejson.maxzoom, 3)
})

test('a WAL-mode MBTiles is served, and survives a reload', async (t) => {
  const dir = tempDir(t)
  const file = join(dir, 'wal.mbtiles')
  writeMbtiles(file, { tiles: vectorTiles([[0, 0, 0]]) })
  const Database = (await import('better-sqlite3')).default
  const db = new Database(file)
  db.pragma('journal_mode = WAL')
  db.close()
  const app = await makeApp(t, { paths: [dir], settleMs: 0 })
  assert.equal((await app.inject({ url: '/wal/0/0/0' })).statusCode, 200)
  await app.catalog.reload()
  assert.equal((await app.inject({ url: '/wal/0/0/0' })).statusCode, 200)
})

test('a WAL-mode MBTiles committed to in place is re-opened once its -wal is quiet: the new tile, the new zoom, the TileJSON', async (t) => {
  const dir = tempDir(t)
  const file = join(dir, 'wal.mbtiles')
  writeMbtiles(file, { tiles: [{ z: 0, x: 0, y: 0, data: makeMvt(0, 0, 0) }], metadata: { format: 'pbf' } })
  const Database = (await import('better-sqlite3')).default
  const db = new Database(file)
  db.pragma('journal_mode = WAL')
  db.pragma('wal_autocheckpoint = 0') // the main file stays as it is: every change is in the -wal, as under a reader
  t.after(() => db.close())
  const app = await makeApp(t, { paths: [dir], watch: true, watchDebounceMs: 50 })
  const before = await app.inject({ url: '/wal/0/0/0.geojson' })
  assert.equal(before.json().features[0].properties.z, 0)
  assert.equal((await app.inject({ url: '/wal.json' })).json().maxzoom, 0)

  db.prepare('UPDATE tiles SET tile_data = ? WHERE zoom_level = 0').run(makeMvt(9, 9, 9))
  db.prepare('INSERT INTO tiles VALUES (1, 0, 1, ?)').run(makeMvt(1, 0, 0))
  await eventually(async () => (await app.inject({ url: '/wal/0/0/0.geojson' })).json().features[0].properties.z === 9, 'the committed tile', 200)
  assert.equal((await app.inject({ url: '/wal.json' })).json().maxzoom, 1)
  assert.equal((await app.inject({ url: '/wal/1/0/0' })).statusCode, 200)
  // Re-checked with nothing new in the -wal (the reader's own -shm changes, say): kept as it is.
  const entry = app.catalog.get('wal')
  await app.catalog.refreshFile(file)
  assert.equal(app.catalog.get('wal'), entry)
})

test('a WAL-mode MBTiles is served though readers left a -wal and -shm beside it (a second server, a restart), and replaced by mv', async (t) => {
  const dir = tempDir(t)
  const file = join(dir, 'wal.mbtiles')
  writeMbtiles(file, { tiles: [{ z: 0, x: 0, y: 0, data: PNG }] })
  const Database = (await import('better-sqlite3')).default
  const db = new Database(file)
  db.pragma('journal_mode = WAL')
  db.close()
  const first = await makeApp(t, { paths: [dir], watch: true, watchDebounceMs: 50 })
  assert.equal((await first.inject({ url: '/wal/0/0/0' })).statusCode, 200)
  assert.ok(existsSync(file + '-wal') && existsSync(file + '-shm'), 'the reader made them')
  const second = await makeApp(t, { paths: [dir] }) // another replica on the same file, while the first serves it
  assert.equal((await second.inject({ url: '/wal/0/0/0' })).statusCode, 200)
  await second.close()
  const restarted = await makeApp(t, { paths: [dir] })
  assert.ok(existsSync(file + '-wal'), 'a read-only connection cannot remove it on close')
  assert.equal((await restarted.inject({ url: '/wal/0/0/0' })).statusCode, 200)
  // Replaced by a rename (a rollback-mode file), the old -wal and -shm still beside it.
  writeMbtiles(join(dir, 'next.tmp'), { tiles: vectorTiles([[0, 0, 0]]) })
  renameSync(join(dir, 'next.tmp'), file)
  await eventually(async () => (await first.inject({ url: '/wal/0/0/0' })).headers['content-type'] === 'application/x-protobuf', 'the replaced file')
})

// A read-only folder (a `:ro` Docker volume), made with a bind mount in a mount namespace of its own (root only).
const CAN_MOUNT = spawnSync('unshare', ['-m', 'true']).status === 0

test('a WAL-mode MBTiles in a read-only folder is read (immutable) where its -wal is empty, refused with the way out where it is not', async (t) => {
  if (!needs(t, CAN_MOUNT, 'unshare -m and mount (root) to make a read-only folder')) return
  const src = tempDir(t)
  const ro = tempDir(t)
  const Database = (await import('better-sqlite3')).default
  for (const name of ['clean', 'pending']) {
    writeMbtiles(join(src, `${name}.mbtiles`), { tiles: [{ z: 0, x: 0, y: 0, data: PNG }] })
    const db = new Database(join(src, `${name}.mbtiles`))
    db.pragma('journal_mode = WAL')
    if (name === 'pending') { // a change left in the -wal: a copy of the -wal taken while the writer had it open
      db.pragma('wal_autocheckpoint = 0')
      db.prepare("INSERT INTO metadata VALUES ('name', 'pending')").run()
      copyFileSync(join(src, 'pending.mbtiles-wal'), join(src, 'pending.wal-copy'))
    }
    db.close()
  }
  renameSync(join(src, 'pending.wal-copy'), join(src, 'pending.mbtiles-wal'))
  const script = `const { open } = await import(${JSON.stringify(new URL('../lib/sources/mbtiles.js', import.meta.url).href)})
    for (const name of ['clean', 'pending']) {
      try { const s = await open({ id: name, path: ${JSON.stringify(ro)} + '/' + name + '.mbtiles' }); console.log(name, 'tile', s.getTile(0, 0, 0).length) }
      catch (err) { console.log(name, 'refused:', err.message) }
    }`
  const run = spawnSync('unshare', ['-m', 'sh', '-c', `mount --bind "$1" "$2" && mount -o remount,bind,ro "$2" && exec "$3" --input-type=module -e "$4"`,
    'sh', src, ro, process.execPath, script], { encoding: 'utf8' })
  assert.equal(run.status, 0, run.stderr)
  const lines = run.stdout.trim().split('\n')
  assert.equal(lines[0], `clean tile ${PNG.length}`)
  assert.match(lines[1], /^pending refused: a WAL-mode file with changes in its -wal, where SQLite cannot make its -shm \(a read-only folder\): checkpoint it/)
})

test('a set configured by path is watched too', async (t) => {
  const dir = tempDir(t)
  writeMbtiles(join(dir, 'one.mbtiles'), { tiles: [{ z: 0, x: 0, y: 0, data: PNG }] })
  const app = await makeApp(t, { sets: { named: { path: join(dir, 'one.mbtiles') } }, watch: true, watchDebounceMs: 50 })
  assert.equal((await app.inject({ url: '/named/0/0/0' })).headers['content-type'], 'image/png')
  writeMbtiles(join(dir, 'next.tmp'), { tiles: vectorTiles([[0, 0, 0]]) })
  renameSync(join(dir, 'next.tmp'), join(dir, 'one.mbtiles'))
  await eventually(async () => (await app.inject({ url: '/named/0/0/0' })).headers['content-type'] === 'application/x-protobuf', 'the replaced file')
})

test('a folder and a configured file missing at start-up are served once they appear (a volume mounted late), the file under its configured id', async (t) => {
  const dir = tempDir(t)
  writeMbtiles(join(dir, 'here.mbtiles'), { tiles: vectorTiles([[0, 0, 0]]) })
  const late = join(dir, 'late', 'tiles') // two levels not there yet: the watch moves down as each appears
  const named = join(dir, 'elsewhere', 'file-name.pmtiles')
  const logs = []
  const app = await makeApp(t, { paths: [dir + '/here.mbtiles', late], sets: { configured: { path: named } }, watch: true, watchDebounceMs: 50 }, { logs })
  assert.deepEqual(await list(app), ['here'])
  assert.equal(logs.filter((l) => l.msg === 'path not found: nothing served from it').length, 2)
  assert.equal((await app.inject({ url: '/ready' })).statusCode, 200, 'what is there is served: missing paths do not hold readiness back')

  mkdirSync(late, { recursive: true })
  writeMbtiles(join(late, 'roads.tmp'), { tiles: vectorTiles([[0, 0, 0]]) })
  renameSync(join(late, 'roads.tmp'), join(late, 'roads.mbtiles'))
  mkdirSync(join(dir, 'elsewhere'))
  writePmtiles(join(dir, 'elsewhere', 'p.tmp'), { tiles: [{ z: 0, x: 0, y: 0, data: PNG }], tileType: 'png', tileCompression: 'none' })
  renameSync(join(dir, 'elsewhere', 'p.tmp'), named)
  await eventually(async () => (await list(app)).length === 3, 'the late folder and file to be served')
  assert.deepEqual(await list(app), ['configured', 'here', 'roads'])
  assert.equal((await app.inject({ url: '/roads/0/0/0' })).statusCode, 200)
  assert.equal((await app.inject({ url: '/configured/0/0/0' })).headers['content-type'], 'image/png')
  assert.equal((await app.inject({ url: '/ready' })).statusCode, 200)

  // Now watched as any served folder and file: a file added to the folder, the configured file replaced.
  writePmtiles(join(late, 'more.tmp'), { tiles: vectorTiles([[0, 0, 0]]) })
  renameSync(join(late, 'more.tmp'), join(late, 'more.pmtiles'))
  writePmtiles(join(dir, 'elsewhere', 'p.tmp'), { tiles: vectorTiles([[0, 0, 0]]) })
  renameSync(join(dir, 'elsewhere', 'p.tmp'), named)
  await eventually(async () => (await list(app)).includes('more'), 'a file added to the late folder')
  await eventually(async () => (await app.inject({ url: '/configured/0/0/0' })).headers['content-type'] === 'application/x-protobuf', 'the configured file replaced')
  assert.deepEqual(await list(app), ['configured', 'here', 'more', 'roads'])
})

// Remote sets at start-up: opened at once (an origin that hangs holds up its own sets only), ids and order as found.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { createServer } from 'node:http'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { makeApp } from './helpers/app.js'
import { holdable } from './helpers/http.js'
import { pyramid, tempDir, vectorTiles, writePmtiles } from './helpers/data.js'

/**
 * A real origin on 127.0.0.1 serving `files` (path → Buffer) by ranges; a request whose path `holding(path)` says is
 * held waits until `release()` (and from then on none is). `asked`: the paths asked for, in order.
 */
async function origin (t, files, holding = () => false) {
  const asked = []
  const stalls = holdable(t)
  const server = createServer((req, res) => {
    const path = req.url.split('?')[0]
    asked.push(path)
    const answer = () => {
      const file = files[path]
      if (file === undefined) { res.writeHead(404); res.end(); return }
      const [, a, b] = /bytes=(\d+)-(\d+)/.exec(req.headers.range)
      const [start, end] = [Number(a), Math.min(Number(b), file.length - 1)]
      res.writeHead(206, { 'content-range': `bytes ${start}-${end}/${file.length}`, 'content-length': end - start + 1, etag: '"v1"' })
      res.end(file.subarray(start, end + 1))
    }
    if (holding(path)) stalls.hold(answer)
    else answer()
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.after(() => { stalls.release(); server.close() })
  return { base: `http://127.0.0.1:${server.address().port}`, asked, release: stalls.release }
}

const archive = (dir, name) => writePmtiles(join(dir, `${name}.pmtiles`), { tiles: vectorTiles(pyramid(0, 2)), metadata: { name } })

async function until (condition, ms = 3000) {
  const deadline = Date.now() + ms
  while (!condition() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10))
  return condition()
}

test('remote sets are opened at once: an origin that does not answer holds up each set once, not one after another', async (t) => {
  const dir = tempDir(t)
  const names = ['d', 'c', 'b', 'a']
  const files = Object.fromEntries(names.map((name) => [`/${name}.pmtiles`, archive(dir, name)]))
  const remote = await origin(t, files, () => true) // every request waits
  const building = makeApp(t, { paths: names.map((name) => `${remote.base}/${name}.pmtiles`) })
  const all = await until(() => names.every((name) => remote.asked.includes(`/${name}.pmtiles`)))
  remote.release()
  const app = await building
  assert.ok(all, `each set asked its origin while the others waited (asked: ${remote.asked.join(', ')})`)
  assert.deepEqual((await app.inject({ url: '/list' })).json(), names, 'in the order given')
})

test('sets opened at once get the ids and names they would get in turn: the first found is `a`, even when it opens last', async (t) => {
  const dir = tempDir(t)
  const files = { '/one/a.pmtiles': archive(dir, 'first'), '/two/a.pmtiles': archive(dir, 'second'), '/b.pmtiles': archive(dir, 'b') }
  const remote = await origin(t, files, (path) => path.startsWith('/one/'))
  const building = makeApp(t, { paths: Object.keys(files).map((path) => remote.base + path) })
  // The others have opened (their whole archive read) before the first answers.
  assert.ok(await until(() => remote.asked.filter((path) => !path.startsWith('/one/')).length >= 4))
  await new Promise((resolve) => setTimeout(resolve, 100))
  remote.release()
  const app = await building
  assert.deepEqual((await app.inject({ url: '/list' })).json(), ['a', 'a-2', 'b'])
  assert.equal((await app.inject({ url: '/a.json' })).json().name, 'first')
  assert.equal((await app.inject({ url: '/a-2.json' })).json().name, 'second')
  assert.equal((await app.inject({ url: '/a.pmtiles.json' })).json().name, 'first', 'the file name stays the first found')
})

test('a URL\'s set is named by its decoded file name: with%20space.pmtiles is `with space`, as a file of that name', async (t) => {
  const dir = tempDir(t)
  const files = { '/with%20space.pmtiles': archive(dir, 'spaced'), '/%C3%BCn%C3%AF.pmtiles': archive(dir, 'accented') }
  const remote = await origin(t, files)
  const app = await makeApp(t, { paths: Object.keys(files).map((path) => remote.base + path) })
  assert.deepEqual((await app.inject({ url: '/list' })).json(), ['with space', 'ünï'])
  const tilejson = (await app.inject({ url: '/with%20space.json' })).json()
  assert.equal(tilejson.name, 'spaced')
  assert.ok(tilejson.tiles[0].endsWith('/with%20space/{z}/{x}/{y}.pbf'), tilejson.tiles[0])
  assert.equal((await app.inject({ url: '/with%20space/1/1/1' })).statusCode, 200)
  assert.equal((await app.inject({ url: '/with%20space.pmtiles/1/1/1' })).statusCode, 200, 'and by its full name')
  assert.equal((await app.inject({ url: `/${encodeURIComponent('ünï')}.json` })).json().name, 'accented')
})

/**
 * A folder served after a remote set whose origin holds a reload's re-open: `f.pmtiles` is added to the folder, and
 * `alongside(app, path)` asked while that reload waits. `f` must be one set, whatever asks for it meanwhile.
 */
async function newFileDuringReload (t, alongside) {
  const dir = tempDir(t)
  const folder = join(dir, 'folder')
  mkdirSync(folder)
  writePmtiles(join(folder, 'e.pmtiles'), { tiles: vectorTiles(pyramid(0, 1)), metadata: { name: 'e' } })
  const files = { '/slow.pmtiles': archive(dir, 'slow') }
  let hold = false
  const remote = await origin(t, files, () => hold)
  const app = await makeApp(t, { paths: [`${remote.base}/slow.pmtiles`, folder] })
  hold = true
  const asked = remote.asked.length
  writePmtiles(join(folder, 'f.pmtiles'), { tiles: vectorTiles(pyramid(0, 1)), metadata: { name: 'f' } })
  const first = app.catalog.reload()
  const second = alongside(app, join(folder, 'f.pmtiles'))
  assert.ok(await until(() => remote.asked.length > asked), 'the reload waits for the origin')
  await new Promise((resolve) => setTimeout(resolve, 100)) // (f opened meanwhile, waiting for its turn)
  remote.release()
  await Promise.all([first, second])
  return (await app.inject({ url: '/list' })).json()
}

test('two reloads at once with a new file serve it once (not as `f` and `f-2`)', async (t) => {
  assert.deepEqual(await newFileDuringReload(t, (app) => app.catalog.reload()), ['slow', 'e', 'f'])
})

test('a new file re-checked (the watcher) while a reload opens it is served once', async (t) => {
  assert.deepEqual(await newFileDuringReload(t, (app, path) => app.catalog.refreshFile(path, { force: true })), ['slow', 'e', 'f'])
})

test('remote sets retried while their origin hangs do not hold up the re-open of a replaced local file', async (t) => {
  const dir = tempDir(t)
  const local = join(dir, 'local.pmtiles')
  writePmtiles(local, { tiles: vectorTiles(pyramid(0, 1)), metadata: { name: 'before' } })
  let hold = false
  const remote = await origin(t, {}, () => hold) // no such object (404), then no answer at all
  const urls = Array.from({ length: 16 }, (_, i) => `${remote.base}/r${i}.pmtiles`)
  const app = await makeApp(t, { paths: [local, ...urls], remote: { retryMs: 50 } })
  hold = true
  const asked = remote.asked.length
  assert.ok(await until(() => remote.asked.length >= asked + 8), 'retries under way, hung')
  writePmtiles(local, { tiles: vectorTiles(pyramid(0, 1)), metadata: { name: 'after' } })
  const started = Date.now()
  const reopened = await Promise.race([
    app.catalog.refreshFile(local, { force: true }).then(() => true),
    new Promise((resolve) => setTimeout(resolve, 3000, false)),
  ])
  assert.ok(reopened, `re-opened at once (waited ${Date.now() - started} ms)`)
  assert.equal((await app.inject({ url: '/local.json' })).json().name, 'after')
})

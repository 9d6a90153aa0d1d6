// The raster workers' open files: every set reading an unchanged file (a COG set and a mosaic over it, the usual
// layout of a folder) shares one open file per worker, and no file is closed while a tile reads it, however often the
// sets reading it under different keys (a file touched or replaced while its old set still serves) take turns.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { copyFileSync, mkdirSync, readdirSync, readlinkSync, renameSync, rmSync, utimesSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { FIXTURES, HAVE_FIXTURES, makeApp, needs } from './helpers/app.js'
import { tempDir } from './helpers/data.js'
import { createRasterPool } from '../lib/raster/pool.js'
import { open as openCog } from '../lib/sources/cog.js'
import { open as openMosaic } from '../lib/sources/mosaic.js'
import { lonLatToTile } from '../lib/tilemath.js'

const NO_FIXTURES = 'the shared fixtures (../shared/fixtures) are not present'
const HAVE_PROC = (() => { try { return readdirSync('/proc/self/fd').length > 0 } catch { return false } })()

/** A copy of the UTM fixture (tiles reprojected: several block reads each) in a folder of its own. */
function cogInFolder (t) {
  const folder = join(tempDir(t), 'tiles')
  mkdirSync(folder)
  const file = join(folder, 'utm.tif')
  copyFileSync(join(FIXTURES, 'cog', 'cog.tif'), file)
  return { folder, file }
}

/** The descriptors this process (its worker threads included) holds open on `file`. */
function descriptorsOn (file) {
  let count = 0
  for (const fd of readdirSync('/proc/self/fd')) {
    try { if (readlinkSync(`/proc/self/fd/${fd}`) === file) count++ } catch {} // (one closed meanwhile)
  }
  return count
}

/** The tiles of a set's max zoom over its bounds' middle, a 4 × 4 block of them. */
function tilesOf (set) {
  const [west, south, east, north] = set.metadata.bounds
  const z = set.metadata.maxzoom
  const [x0, y0] = lonLatToTile((west + east) / 2, (south + north) / 2, z)
  const tiles = []
  for (let dx = -2; dx < 2; dx++) for (let dy = -2; dy < 2; dy++) tiles.push([z, x0 + dx, y0 + dy])
  return tiles
}

/**
 * Tiles of every set asked at once, again and again for `ms` (cubic: each tile reads several blocks, its task awaiting
 * the file between them); the failures, as 'set z/x/y: message'.
 */
async function hammer (sets, ms) {
  const failures = []
  const end = performance.now() + ms
  let round = 0
  while (performance.now() < end) {
    round++
    await Promise.all(sets.flatMap((set) => tilesOf(set).map(async ([z, x, y]) => {
      // A rescale of its own per round: every tile is drawn afresh (no set caches tiles; this keeps it so).
      const options = set.parseQuery({ rescale: `0,${1000 + round}`, resampling: 'cubic' })
      try {
        await set.getTile(z, x, y, options)
      } catch (err) {
        failures.push(`${set.id} ${z}/${x}/${y}: ${err.message}`)
      }
    })))
  }
  return failures
}

test('a COG set and a folder mosaic over the same file share one open file in the worker; their tiles, asked together, all draw', { timeout: 60_000 }, async (t) => {
  if (!needs(t, HAVE_FIXTURES, NO_FIXTURES)) return
  const { folder, file } = cogInFolder(t)
  // One worker, and a replaced file's old dataset closed 20 ms after (30 s in service): both sets meet in the worker.
  const rasterPool = createRasterPool({ threads: 1, blockCacheMB: 1, replacedCloseMs: 20 })
  t.after(() => rasterPool.close())
  const cog = await openCog({ id: 'utm', path: file }, { rasterPool })
  t.after(() => cog.close())
  const mosaic = await openMosaic({ id: 'tiles', path: folder }, { rasterPool })
  t.after(() => mosaic.close())
  // Each set opened the file under its own key: the worker held it open twice, and each set's opening dropped the
  // other's dataset 20 ms later, closing its file under the tiles reading it (EBADF, a 503).
  if (HAVE_PROC) assert.equal(descriptorsOn(file), 1, 'the file is open once')
  const failures = await hammer([cog, mosaic], 1500)
  assert.deepEqual(failures, [])
  if (HAVE_PROC) assert.equal(descriptorsOn(file), 1, 'the file is open once')
})

test('sets reading one file under different keys (touched while the old set still serves): tiles of both, asked together, all draw', { timeout: 60_000 }, async (t) => {
  if (!needs(t, HAVE_FIXTURES, NO_FIXTURES)) return
  const { file } = cogInFolder(t)
  const rasterPool = createRasterPool({ threads: 1, blockCacheMB: 1, replacedCloseMs: 20 })
  t.after(() => rasterPool.close())
  const before = await openCog({ id: 'before', path: file }, { rasterPool })
  t.after(() => before.close())
  const later = new Date(Date.now() + 60_000)
  utimesSync(file, later, later) // another version of the file as far as the workers know: a key of its own
  const after = await openCog({ id: 'after', path: file }, { rasterPool })
  t.after(() => after.close())
  // Each set's turn drops the other's dataset 20 ms later: it was closed under the tiles still reading it (EBADF).
  const failures = await hammer([before, after], 1500)
  assert.deepEqual(failures, [])
})

test('with watching on, a COG replaced or deleted on a quiet server is let go by every worker without another tile asked', { timeout: 60_000 }, async (t) => {
  if (!needs(t, HAVE_FIXTURES, NO_FIXTURES)) return
  if (!needs(t, HAVE_PROC, 'counting the workers\' descriptors needs Linux /proc')) return
  const folder = join(tempDir(t), 'tiles')
  mkdirSync(folder)
  // Three sets: c.tif stays, so the pool (and its workers) keep running once a.tif is replaced and b.tif deleted.
  for (const id of ['a', 'b', 'c']) copyFileSync(join(FIXTURES, 'cog', 'cog.tif'), join(folder, `${id}.tif`))
  const app = await makeApp(t, { paths: [folder], raster: { threads: 2 }, cacheMB: 0, watch: true, watchDebounceMs: 50 })
  const draw = async (id) => {
    const set = (await app.inject(`/${id}/meta`)).json()
    const [west, south, east, north] = set.bounds
    const [x, y] = lonLatToTile((west + east) / 2, (south + north) / 2, set.maxzoom)
    // Eight at once: both workers draw (2 tasks each at most), so both open the file.
    const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => app.inject(`/${id}/${set.maxzoom}/${x + (i % 4)}/${y + (i >> 2)}.png`)))
    for (const res of answers) assert.equal(res.statusCode, 200, `${id}: ${res.body}`)
  }
  for (const id of ['a', 'b', 'c']) await draw(id)
  const a = join(folder, 'a.tif')
  const b = join(folder, 'b.tif')
  assert.ok(descriptorsOn(a) >= 1 && descriptorsOn(b) >= 1, 'the workers hold the files open')

  // a.tif replaced by another file (renamed over it: the old one's space is freed only once no descriptor holds it),
  // b.tif deleted. Once the watcher re-opened a and dropped b, no tile is asked: the workers wait idle.
  copyFileSync(join(FIXTURES, 'cog', 'cog.tif'), join(folder, 'new.tmp'))
  const old = (await app.inject('/a/meta')).json()
  renameSync(join(folder, 'new.tmp'), a)
  rmSync(b)
  const end = Date.now() + 5000
  while ((await app.inject('/b/meta')).statusCode !== 404 || descriptorsOn(a) === 0) {
    assert.ok(Date.now() < end, 'the watcher re-opened a.tif and dropped b.tif within 5 s')
    await sleep(50)
  }
  assert.deepEqual((await app.inject('/a/meta')).json().bounds, old.bounds, 'a.tif is served (its new file)')
  const gone = (file) => `${file} (deleted)` // what /proc says of a descriptor on a file deleted or renamed over
  let held
  for (const until = Date.now() + 2000; Date.now() < until; await sleep(50)) {
    held = { replaced: descriptorsOn(gone(a)), deleted: descriptorsOn(gone(b)) }
    if (held.replaced === 0 && held.deleted === 0) break
  }
  assert.deepEqual(held, { replaced: 0, deleted: 0 }, 'the old a.tif and the deleted b.tif are no longer held open')
  assert.equal(descriptorsOn(join(folder, 'c.tif')) >= 1, true, 'c.tif, still served, stays open')
  await draw('a')
  await draw('c')
})

test('a COG set closed (reloaded or removed) leaves open the file a folder mosaic over it still reads; the mosaic closed, the workers let it go', { timeout: 60_000 }, async (t) => {
  if (!needs(t, HAVE_FIXTURES, NO_FIXTURES)) return
  if (!needs(t, HAVE_PROC, 'counting the workers\' descriptors needs Linux /proc')) return
  const { folder, file } = cogInFolder(t)
  const other = join(tempDir(t), 'other.tif') // a set of its own that keeps the pool (and its worker) running
  copyFileSync(join(FIXTURES, 'cog', 'cog.tif'), other)
  const rasterPool = createRasterPool({ threads: 1, blockCacheMB: 1 })
  t.after(() => rasterPool.close())
  const keeper = await openCog({ id: 'other', path: other }, { rasterPool })
  t.after(() => keeper.close())
  const cog = await openCog({ id: 'utm', path: file }, { rasterPool })
  t.after(() => cog.close())
  const mosaic = await openMosaic({ id: 'tiles', path: folder }, { rasterPool })
  t.after(() => mosaic.close())
  assert.deepEqual(await hammer([cog, mosaic], 300), [])
  assert.equal(descriptorsOn(file), 1, 'the file is open once')

  // The COG set goes (as a reload or removal closes it): the mosaic still reads the file, under the same key.
  await cog.close()
  await sleep(200) // (a retirement reaches the worker on its event loop)
  assert.equal(descriptorsOn(file), 1, 'the mosaic\'s file is still open: not closed under it, to be reopened cold')
  assert.deepEqual(await hammer([mosaic], 300), [])
  assert.equal(descriptorsOn(file), 1, 'and is the same one')

  // The mosaic goes too: nothing reads the file, and the worker, still running for the other set, closes it.
  await mosaic.close()
  let open
  for (const until = Date.now() + 2000; Date.now() < until; await sleep(50)) if ((open = descriptorsOn(file)) === 0) break
  assert.equal(open, 0, 'closed once no set reads it')
  assert.equal(descriptorsOn(other), 1, 'the other set\'s file stays open')
})

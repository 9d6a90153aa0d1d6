// COGs whose tile data is damaged, as files are in the wild (a copy cut short, bit rot in a block): each such tile is
// a 503 naming the set, at once, logged once, and the rest of the file, the other sets and the process keep serving.
// Under any decoder, the raster workers' limits: a task past its time is stopped and its worker replaced.
// The files are made here with GDAL (in Web Mercator, exactly over one z10 tile: each z12 tile reads one 256 px block
// of the full image), then damaged at the byte offsets their TIFF directory gives.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync, spawnSync } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import pino from 'pino'
import { fromFile } from 'geotiff'
import { needs } from './helpers/app.js'
import { tempDir } from './helpers/data.js'
import { rangeServer } from './helpers/http.js'
import { buildApp } from '../lib/app.js'
import { loadConfig } from '../lib/config.js'
import { tileExtent } from '../lib/tilemath.js'
import { createRasterPool } from '../lib/raster/pool.js'
import { open as openCog } from '../lib/sources/cog.js'

const HAVE_GDAL = spawnSync('gdal_translate', ['--version']).status === 0
const NO_GDAL = 'gdal-bin (gdal_translate) is not installed'
const ERROR = 50 // pino's level number for error
const SIDE = 1024 // pixels across the file, over z10 tile 554/368 (Vienna): 4 × 4 blocks of 256
const [Z, X0, Y0] = [10, 554, 368]

/** The z12 tile over block (bx, by) of the full image. */
const tileOver = (bx, by) => `12/${X0 * 4 + bx}/${Y0 * 4 + by}`

/**
 * A COG made by gdal_translate from an ASCII grid with a busy pattern (blocks of realistic size): `type` (GDAL's),
 * `bands` copies of the grid, creation options `options`. Overviews down to one block, which the statistics of a
 * non-8-bit file are read from; GDAL writes the full image's blocks last, row by row.
 */
function makeCog (dir, name, { type = 'Byte', bands = 1, options = [] } = {}) {
  const grid = join(dir, `${name}.asc`)
  const [minX, minY, maxX] = tileExtent(Z, X0, Y0)
  const lines = [`ncols ${SIDE}`, `nrows ${SIDE}`, `xllcorner ${minX}`, `yllcorner ${minY}`, `cellsize ${(maxX - minX) / SIDE}`]
  for (let r = 0; r < SIDE; r++) lines.push(Array.from({ length: SIDE }, (_, c) => ((c * 7 + r * 13) % 199) + ((c * r) % 53)).join(' '))
  writeFileSync(grid, lines.join('\n') + '\n')
  const file = join(dir, `${name}.tif`)
  execFileSync('gdal_translate', ['-q', '-of', 'COG', '-a_srs', 'EPSG:3857', '-ot', type, ...Array.from({ length: bands }, () => ['-b', '1']).flat(),
    '-co', 'BLOCKSIZE=256', '-co', 'OVERVIEWS=AUTO', ...options.flatMap((o) => ['-co', o]), grid, file], { env: { ...process.env, GDAL_PAM_ENABLED: 'NO' } })
  return file
}

/** [offset, length] of block (bx, by) of image `level` (0: the full image; its first plane) in `file`. */
async function blockAt (file, bx, by, level = 0) {
  const tiff = await fromFile(file)
  try {
    const image = await tiff.getImage(level)
    const index = by * Math.ceil(image.getWidth() / image.getTileWidth()) + bx
    return [Number((await image.fileDirectory.loadValue('TileOffsets'))[index]), Number((await image.fileDirectory.loadValue('TileByteCounts'))[index])]
  } finally {
    await tiff.close()
  }
}

/**
 * `file` copied to `to` with the second half of block (bx, by) zeros: a block half written, as a copy that allocates
 * the whole file first leaves it. (`level`: of the full image, 0, or an overview.)
 */
async function holeInBlock (file, to, bx, by, level = 0) {
  const [offset, length] = await blockAt(file, bx, by, level)
  const bytes = readFileSync(file)
  bytes.fill(0, offset + (length >> 1), offset + length)
  writeFileSync(to, bytes)
}

/** An app on `overrides` whose log lines are kept (parsed): errorsSince(n) gives the error lines from line n on. */
async function loggedApp (t, overrides) {
  const lines = []
  const stream = new Writable({ write (chunk, encoding, done) { lines.push(JSON.parse(chunk)); done() } })
  const { config } = loadConfig({ overrides: { logLevel: 'info', watch: false, demo: false, cacheMB: 0, ...overrides } })
  const app = await buildApp(config, { loggerInstance: pino({ level: 'info' }, stream) })
  t.after(() => app.close())
  return { app, lines, errorsSince: (from) => lines.slice(from).filter((l) => l.level >= ERROR) }
}

/** The answer to GET `url` and how long it took, in ms. */
async function timed (app, url) {
  const start = performance.now()
  const res = await app.inject(url)
  return { res, ms: performance.now() - start }
}

test('a ZSTD block half written is a 503 at once (the decoder grew without end on it), its neighbours 200, logged once', { timeout: 120_000 }, async (t) => {
  if (!needs(t, HAVE_GDAL, NO_GDAL)) return
  const dir = tempDir(t)
  // 8-bit (no statistics read at open) and 16-bit with a predictor, whose statistics come from the smallest overview.
  const byte = makeCog(dir, 'byte', { options: ['COMPRESS=ZSTD'] })
  const u16 = makeCog(dir, 'u16', { type: 'UInt16', options: ['COMPRESS=ZSTD', 'PREDICTOR=YES'] })
  await holeInBlock(byte, join(dir, 'byte_hole.tif'), 1, 1)
  await holeInBlock(u16, join(dir, 'u16_hole.tif'), 2, 1)
  const { app, lines, errorsSince } = await loggedApp(t, { paths: [dir], raster: { threads: 1 } })
  for (const [id, bx, by] of [['byte_hole', 1, 1], ['u16_hole', 2, 1]]) {
    const from = lines.length
    for (let i = 0; i < 3; i++) {
      const { res, ms } = await timed(app, `/${id}/${tileOver(bx, by)}.png`)
      assert.equal(res.statusCode, 503, `${id}: ${res.body}`)
      assert.ok(ms < 10_000, `${id}: answered in ${Math.round(ms)} ms`)
      assert.match(res.json().message, new RegExp(`^tileset '${id}' could not read this tile$`))
    }
    const logged = errorsSince(from)
    assert.equal(logged.length, 1, `${id}: one error line for one failure: ${JSON.stringify(logged)}`)
    assert.equal(logged[0].set, id)
    assert.match(logged[0].reason, /corrupt data: a ZSTD block does not decode/)
    // The same file's sound blocks, and the intact files, still draw (the worker is alive and well).
    assert.equal((await app.inject(`/${id}/${tileOver(3, 3)}.png`)).statusCode, 200, `${id}: a sound block`)
  }
  for (const id of ['byte', 'u16']) assert.equal((await app.inject(`/${id}/${tileOver(1, 1)}.png`)).statusCode, 200, id)
})

test('a ZSTD block read at open for the statistics, damaged: the set is unavailable with the reason, at once; the others open', { timeout: 120_000 }, async (t) => {
  if (!needs(t, HAVE_GDAL, NO_GDAL)) return
  const dir = tempDir(t)
  const u16 = makeCog(dir, 'u16', { type: 'UInt16', options: ['COMPRESS=ZSTD', 'PREDICTOR=YES'] })
  await holeInBlock(u16, join(dir, 'stats_hole.tif'), 0, 0, 2) // the smallest overview (one block): the statistics' read
  const start = performance.now()
  const { app } = await loggedApp(t, { paths: [dir], raster: { threads: 1 } })
  const ms = performance.now() - start
  assert.ok(ms < 20_000, `opened in ${Math.round(ms)} ms`)
  const res = await app.inject(`/stats_hole/${tileOver(0, 0)}.png`)
  assert.equal(res.statusCode, 503)
  assert.match(res.json().message, /^tileset 'stats_hole' is unavailable: .*corrupt data: a ZSTD block does not decode/)
  assert.equal((await app.inject(`/u16/${tileOver(0, 0)}.png`)).statusCode, 200)
})

test('a raster task past the time limit fails (503 naming the set) and its worker is replaced; the set answers again', { timeout: 120_000 }, async (t) => {
  if (!needs(t, HAVE_GDAL, NO_GDAL)) return
  const dir = tempDir(t)
  const file = makeCog(dir, 'byte', { options: ['COMPRESS=DEFLATE'] })
  // A remote COG whose server stops answering after the file is opened: the tile's task waits on it past the limit.
  const remote = await rangeServer(t, readFileSync(file), 'slow.tif')
  const rasterPool = createRasterPool({ threads: 1, blockCacheMB: 64, taskTimeLimitMs: 1500 })
  t.after(() => rasterPool.close())
  const set = await openCog({ id: 'slow', url: remote.url }, { rasterPool })
  t.after(() => set.close())
  const before = rasterPool.piscina.threads[0].threadId
  remote.hold()
  const start = performance.now()
  await assert.rejects(set.getTile(12, X0 * 4 + 1, Y0 * 4 + 1), (err) => {
    assert.equal(err.statusCode, 503)
    assert.match(err.message, /^a raster task ran past 1\.5 s and was stopped \(its worker replaced\)$/)
    return true
  })
  const ms = performance.now() - start
  assert.ok(ms >= 1400 && ms < 8000, `stopped after ${Math.round(ms)} ms`)
  remote.release()
  const tile = await set.getTile(12, X0 * 4 + 1, Y0 * 4 + 1)
  assert.ok(Buffer.isBuffer(tile) && tile.length > 0, 'drawn by the new worker')
  assert.equal(rasterPool.piscina.threads.length, 1)
  assert.notEqual(rasterPool.piscina.threads[0].threadId, before, 'the worker was replaced')
})

test('the raster workers run with a bounded heap (resourceLimits): a worker past it is ended, not the process', async (t) => {
  const rasterPool = createRasterPool({ threads: 1, blockCacheMB: 64 })
  t.after(() => rasterPool.close())
  rasterPool.acquire()
  assert.equal(rasterPool.piscina.options.resourceLimits.maxOldGenerationSizeMb, 256)
})

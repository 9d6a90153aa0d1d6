// COGs whose tile data is damaged, as files are in the wild (a copy cut short, bit rot in a block): each such tile is
// a 503 naming the set, at once, logged once, and the rest of the file, the other sets and the process keep serving.
// Under any decoder, the raster workers' limits: a task past its time is stopped and its worker replaced.
// The files are made here with GDAL (in Web Mercator, exactly over one z10 tile: each z12 tile reads one 256 px block
// of the full image), then damaged at the byte offsets their TIFF directory gives.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync, spawnSync } from 'node:child_process'
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
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

const GDAL_ENV = { ...process.env, GDAL_PAM_ENABLED: 'NO' } // no .aux.xml beside any file

/**
 * A COG made by gdal_translate from an ASCII grid with a busy pattern (blocks of realistic size): `type` (GDAL's),
 * `bands` copies of the grid, creation options `options`. Overviews down to one block, which the statistics of a
 * non-8-bit file are read from; GDAL writes the full image's blocks last, row by row. `gtiff`: a tiled GeoTIFF
 * instead (for compressions the COG driver does not write), its overviews by gdaladdo.
 */
function makeCog (dir, name, { type = 'Byte', bands = 1, options = [], gtiff = false, extra = [] } = {}) {
  const grid = join(dir, `${name}.asc`)
  const [minX, minY, maxX] = tileExtent(Z, X0, Y0)
  const lines = [`ncols ${SIDE}`, `nrows ${SIDE}`, `xllcorner ${minX}`, `yllcorner ${minY}`, `cellsize ${(maxX - minX) / SIDE}`]
  for (let r = 0; r < SIDE; r++) lines.push(Array.from({ length: SIDE }, (_, c) => ((c * 7 + r * 13) % 199) + ((c * r) % 53)).join(' '))
  writeFileSync(grid, lines.join('\n') + '\n')
  const file = join(dir, `${name}.tif`)
  const layout = gtiff ? ['-of', 'GTiff', '-co', 'TILED=YES', '-co', 'BLOCKXSIZE=256', '-co', 'BLOCKYSIZE=256'] : ['-of', 'COG', '-co', 'BLOCKSIZE=256', '-co', 'OVERVIEWS=AUTO']
  execFileSync('gdal_translate', ['-q', ...layout, '-a_srs', 'EPSG:3857', '-ot', type, ...Array.from({ length: bands }, () => ['-b', '1']).flat(),
    ...options.flatMap((o) => ['-co', o]), ...extra, grid, file], { env: GDAL_ENV })
  if (gtiff) execFileSync('gdaladdo', ['-q', file, '2', '4'], { env: GDAL_ENV })
  return file
}

// The compressions GDAL writes, each on the data it is made for: [name, GDAL type, bands, creation options, gtiff,
// other arguments of gdal_translate].
const KINDS = [
  ['lzw', 'Byte', 1, ['COMPRESS=LZW']],
  ['zstd', 'Byte', 1, ['COMPRESS=ZSTD']],
  ['deflate', 'UInt16', 1, ['COMPRESS=DEFLATE', 'PREDICTOR=YES']],
  ['webp', 'Byte', 3, ['COMPRESS=WEBP']],
  ['jpeg', 'Byte', 3, ['COMPRESS=JPEG']], // YCbCr, as GDAL writes JPEG of three bands
  ['lerc', 'Float32', 1, ['COMPRESS=LERC', 'MAX_Z_ERROR=0']],
  ['lerc_zstd', 'Float32', 1, ['COMPRESS=LERC_ZSTD', 'MAX_Z_ERROR=0']],
  ['packbits', 'Byte', 1, ['COMPRESS=PACKBITS'], true],
  ['mask', 'Byte', 3, ['COMPRESS=DEFLATE'], false, ['-mask', '1']], // an internal mask: 1-bit blocks of its own
]

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
 * `file` copied to `to` with block (bx, by) zeros from `from` (a fraction of it) on: a block half written (or never),
 * as a copy that allocates the whole file first leaves it. (`level`: of the full image, 0, or an overview.)
 */
async function holeInBlock (file, to, bx, by, { level = 0, from = 0.5 } = {}) {
  const [offset, length] = await blockAt(file, bx, by, level)
  const bytes = readFileSync(file)
  bytes.fill(0, offset + Math.floor(length * from), offset + length)
  writeFileSync(to, bytes)
}

/** `file` copied to `to` with block (bx, by) random bytes from its first quarter on (the same each run): bit rot. */
async function rotBlock (file, to, bx, by) {
  const [offset, length] = await blockAt(file, bx, by)
  const bytes = readFileSync(file)
  let seed = 1
  for (let i = offset + (length >> 2); i < offset + length; i++) bytes[i] = (seed = (seed * 1103515245 + 12345) >>> 0) >>> 24
  writeFileSync(to, bytes)
}

/** `file` copied to `to` cut short in the middle of block (bx, by) of the full image: a copy that stopped there. */
async function cutInBlock (file, to, bx, by) {
  const [offset, length] = await blockAt(file, bx, by)
  writeFileSync(to, readFileSync(file).subarray(0, offset + (length >> 1)))
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

test('a ZSTD block of the smallest overview, read at open for the statistics, damaged: the set opens (the stretch read off the next overview, logged once); only the tiles that read that block fail', { timeout: 120_000 }, async (t) => {
  if (!needs(t, HAVE_GDAL, NO_GDAL)) return
  const dir = tempDir(t)
  const u16 = makeCog(dir, 'u16', { type: 'UInt16', options: ['COMPRESS=ZSTD', 'PREDICTOR=YES'] })
  await holeInBlock(u16, join(dir, 'stats_hole.tif'), 0, 0, { level: 2 }) // the smallest overview (one block): the statistics' read
  const start = performance.now()
  const { app, lines } = await loggedApp(t, { paths: [dir], raster: { threads: 1 } })
  const ms = performance.now() - start
  assert.ok(ms < 20_000, `opened in ${Math.round(ms)} ms`)
  const said = lines.filter((l) => l.set === 'stats_hole' && l.level >= 40)
  assert.deepEqual(said.map((l) => l.msg), ['the default stretch is read off a larger overview: the smallest does not decode (corrupt data: a ZSTD block does not decode)'])
  const meta = (await app.inject('/stats_hole/meta')).json()
  // The stretch is the data's (0…250 at full resolution, a little narrower averaged), not the type's 0…65535.
  const [min, max] = meta.statistics.b1
  assert.ok(min >= 0 && min < 60 && max > 180 && max <= 250, JSON.stringify(meta.statistics))
  for (const [url, status] of [[tileOver(0, 0), 200], [`11/${X0 * 2}/${Y0 * 2}`, 200], [`10/${X0}/${Y0}`, 503]]) {
    const res = await app.inject(`/stats_hole/${url}.png`)
    assert.equal(res.statusCode, status, `${url}: ${res.body}`)
  }
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

/** Whatever the process prints while `run` runs (the raster workers' console goes to the process's stdout and stderr). */
async function printedDuring (run) {
  const printed = []
  const writes = [process.stdout, process.stderr].map((stream) => {
    const write = stream.write
    stream.write = function (chunk, ...rest) {
      printed.push(String(chunk))
      return write.call(this, chunk, ...rest)
    }
    return () => { stream.write = write }
  })
  try {
    await run()
    await new Promise((resolve) => setTimeout(resolve, 200)) // a worker's output reaches the process a moment later
  } finally {
    for (const restore of writes) restore()
  }
  return printed.join('')
}

test('a file cut short: a tile over a block past its end is a 503 (not zeros, not a 500), logged once; the blocks before draw', { timeout: 180_000 }, async (t) => {
  if (!needs(t, HAVE_GDAL, NO_GDAL)) return
  const dir = tempDir(t)
  for (const [name, type, bands, options, gtiff, extra] of KINDS) {
    const file = makeCog(join(tempDir(t)), name, { type, bands, options, gtiff, extra })
    await cutInBlock(file, join(dir, `${name}_cut.tif`), 3, 3)
  }
  const { app, lines, errorsSince } = await loggedApp(t, { paths: [dir], raster: { threads: 1 } })
  const printed = await printedDuring(async () => {
    for (const [name] of KINDS) {
      const id = `${name}_cut`
      const from = lines.length
      for (let i = 0; i < 2; i++) {
        const res = await app.inject(`/${id}/${tileOver(3, 3)}.png`)
        assert.equal(res.statusCode, 503, `${id}: ${res.body}`)
        assert.equal(res.json().message, `tileset '${id}' could not read this tile`)
      }
      const logged = errorsSince(from)
      assert.equal(logged.length, 1, `${id}: one error line: ${JSON.stringify(logged)}`)
      assert.equal(logged[0].reason, 'truncated file: a block lies past its end', id)
      assert.equal((await app.inject(`/${id}/${tileOver(0, 0)}.png`)).statusCode, 200, `${id}: a block before the cut`)
    }
  })
  assert.doesNotMatch(printed, /ran off the end|EOI_CODE/, 'nothing printed outside the log')
})

test('damaged data inside a file: a block that does not decode (or decodes short) is a 503 with the reason, logged once; its neighbours draw', { timeout: 180_000 }, async (t) => {
  if (!needs(t, HAVE_GDAL, NO_GDAL)) return
  const dir = tempDir(t)
  // A block never written: all zeros. (Half of one can decode to pixels, wrong ones, where the format has no check:
  // lossy WebP, or ZSTD's raw literals; libwebp and libzstd under GDAL draw the same.)
  for (const [name, type, bands, options, gtiff, extra] of KINDS) {
    const file = makeCog(join(tempDir(t)), name, { type, bands, options, gtiff, extra })
    await holeInBlock(file, join(dir, `${name}_hole.tif`), 1, 1, { from: 0 })
    // Random bytes in an LZW block: geotiff.js's decoder met a code past its table and grew an array until V8 took
    // the whole process down (the worker's heap limit leaves too little room to stop it).
    if (name === 'lzw') await rotBlock(file, join(dir, 'lzw_rot.tif'), 1, 1)
  }
  const { app, lines, errorsSince } = await loggedApp(t, { paths: [dir], raster: { threads: 1 } })
  const printed = await printedDuring(async () => {
    for (const id of [...KINDS.map(([name]) => `${name}_hole`), 'lzw_rot']) {
      const from = lines.length
      for (let i = 0; i < 2; i++) {
        const res = await app.inject(`/${id}/${tileOver(1, 1)}.png`)
        assert.equal(res.statusCode, 503, `${id}: ${res.body}`)
        assert.equal(res.json().message, `tileset '${id}' could not read this tile`)
        assert.ok(!res.body.includes(dir) && !res.body.includes('    at '), `${id}: no path or stack`)
      }
      const logged = errorsSince(from)
      assert.equal(logged.length, 1, `${id}: one error line: ${JSON.stringify(logged)}`)
      assert.match(logged[0].reason, /^corrupt data: /, id)
      assert.equal(logged[0].err, undefined, `${id}: a reason, not a stack`)
      assert.equal((await app.inject(`/${id}/${tileOver(3, 3)}.png`)).statusCode, 200, `${id}: a sound block`)
    }
  })
  assert.doesNotMatch(printed, /ran off the end|EOI_CODE/, 'nothing printed outside the log')
})

test('a folder mosaic whose part is damaged: a 503 naming the part\'s file (no path), logged once; tiles from sound blocks draw', { timeout: 120_000 }, async (t) => {
  if (!needs(t, HAVE_GDAL, NO_GDAL)) return
  const dir = tempDir(t)
  const parts = join(dir, 'parts')
  mkdirSync(parts)
  const file = makeCog(dir, 'deflate', { type: 'UInt16', options: ['COMPRESS=DEFLATE', 'PREDICTOR=YES'] })
  await holeInBlock(file, join(parts, '1_damaged.tif'), 1, 1, { from: 0 }) // first in name order: read first
  copyFileSync(file, join(parts, '2_sound.tif'))
  const { app, lines, errorsSince } = await loggedApp(t, { paths: [], sets: { mosaic: { path: parts, mosaic: true } }, raster: { threads: 1 } })
  const from = lines.length
  for (let i = 0; i < 2; i++) {
    const res = await app.inject(`/mosaic/${tileOver(1, 1)}.png`)
    assert.equal(res.statusCode, 503, res.body)
    assert.match(res.json().message, /^tileset 'mosaic' could not read this tile: 1_damaged\.tif: corrupt data: a block does not decode/)
    assert.ok(!res.body.includes(dir), `no path: ${res.body}`)
  }
  assert.equal(errorsSince(from).length, 1, JSON.stringify(errorsSince(from)))
  assert.equal((await app.inject(`/mosaic/${tileOver(3, 3)}.png`)).statusCode, 200)
})

// `tile-cannon export`, run as users run it (`node server.js export …`, a child process), against real sources: a
// throwaway PostGIS, real COGs, PMTiles written here. What an export holds is checked against what the server answers
// for the same set: the exported file, served by tile-cannon, must answer every tile with the same bytes and headers.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, spawnSync, execFileSync } from 'node:child_process'
import { once } from 'node:events'
import { createServer } from 'node:http'
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { gunzipSync, gzipSync } from 'node:zlib'
import Database from 'better-sqlite3'
import sharp from 'sharp'
import { FIXTURES, HAVE_FIXTURES, ROOT, makeApp, needs } from './helpers/app.js'
import { HAVE_SCHEMA, assertValidTileJson } from './helpers/tilejson.js'
import { POSTGIS_MISSING, loadZurichPoints, runSql, startPostgis } from './helpers/postgres.js'
import { makeMvt, pyramid, tempDir, vectorTiles, writeMbtiles, writePmtiles } from './helpers/data.js'
import { flipY, tileRange } from '../lib/tilemath.js'
import { chooseBackend } from '../lib/style/render/index.js'

const SERVER = join(ROOT, 'server.js')
// The official TileJSON schema (../shared/schemas) is there in CI; elsewhere tiles.json is checked without it.
const SCHEMA_CHECK = HAVE_SCHEMA || process.env.CI === 'true'
const HAVE_GDAL = spawnSync('gdal_translate', ['--version']).status === 0
const RENDERER = chooseBackend({})
// The Zurich points lie in 8.24-8.84 E, 47.17-47.57 N; this box has empty tiles round them.
const ZURICH = [8.1, 47.0, 9.0, 47.7]
const ZURICH_POINTS = [8.24, 47.17, 8.84, 47.57]

let db = null

before(async () => {
  db = await startPostgis()
  if (db === null) return
  await loadZurichPoints(db.url)
  // ST_AsMVT encodes rows in the order the plan yields them, and the plan of one prepared statement may change on a
  // connection after its first five runs (custom plans, then a generic one that may scan otherwise); a parallel scan
  // yields rows as its workers finish. Each gives equally right but other MVT bytes (seen: the same tile 4 bytes
  // apart from two processes). Tiles are compared byte for byte here, so every run gets the same kind of plan.
  const name = new URL(db.url).pathname.slice(1)
  await runSql(db.url, `ALTER DATABASE ${name} SET plan_cache_mode = force_custom_plan; ALTER DATABASE ${name} SET max_parallel_workers_per_gather = 0`)
  await runSql(db.url, `
    -- Seconds each tile of slow_points waits first: long enough to interrupt an export, then set to 0 to finish it.
    CREATE TABLE export_delay (s double precision);
    INSERT INTO export_delay VALUES (0.04);
    CREATE FUNCTION slow_points(z integer, x integer, y integer) RETURNS bytea AS $$
    DECLARE mvt bytea;
    BEGIN
      PERFORM pg_sleep(s) FROM export_delay;
      SELECT ST_AsMVT(t, 'points', 4096, 'geom') INTO mvt FROM (
        SELECT id, ST_AsMVTGeom(ST_Transform(geom, 3857), ST_TileEnvelope(z, x, y)) AS geom FROM zurich_points
        WHERE geom && ST_Transform(ST_TileEnvelope(z, x, y), 4326)) AS t;
      RETURN mvt;
    END $$ LANGUAGE plpgsql STABLE;
    -- Fails for every tile whose x + y is odd: an export counts those and goes on.
    CREATE FUNCTION flaky_points(z integer, x integer, y integer) RETURNS bytea AS $$
    BEGIN
      IF (x + y) % 2 = 1 THEN RAISE EXCEPTION 'flaky tile %/%/%', z, x, y; END IF;
      RETURN (SELECT ST_AsMVT(t, 'points', 4096, 'geom') FROM (
        SELECT id, ST_AsMVTGeom(ST_Transform(geom, 3857), ST_TileEnvelope(z, x, y)) AS geom FROM zurich_points
        WHERE geom && ST_Transform(ST_TileEnvelope(z, x, y), 4326)) AS t);
    END $$ LANGUAGE plpgsql STABLE;
    CREATE FUNCTION broken_points(z integer, x integer, y integer) RETURNS bytea AS $$
    BEGIN RAISE EXCEPTION 'this function always fails'; END $$ LANGUAGE plpgsql STABLE;
  `)
})

after(async () => { await db?.stop() })

/** `node server.js export …args` as a child; resolves { code, stderr } when it exits. */
function exportCli (args, { cwd = ROOT } = {}) {
  const child = startExport(args, { cwd })
  return child.exited
}

function startExport (args, { cwd = ROOT } = {}) {
  const env = { ...process.env }
  delete env.TILE_CANNON_LOG_LEVEL // the export's own default (warn)
  const child = spawn(process.execPath, [SERVER, 'export', ...args], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] })
  let stderr = ''
  let stdout = ''
  child.stderr.on('data', (d) => { stderr += d })
  child.stdout.on('data', (d) => { stdout += d })
  child.exited = once(child, 'exit').then(([code, signal]) => ({ code, signal, stderr, stdout }))
  child.stderrSoFar = () => stderr
  return child
}

/** Every tile of `bbox` at zooms lo..hi, as [z, x, y] (the area an export of that box covers). */
function tilesOf (bbox, lo, hi) {
  const out = []
  for (let z = lo; z <= hi; z++) {
    const [x0, y0, x1, y1] = tileRange(bbox, z)
    for (let x = x0; x <= x1; x++) for (let y = y0; y <= y1; y++) out.push([z, x, y])
  }
  return out
}

/**
 * The exported set, served by tile-cannon, answers each tile as the source set does: status, Content-Type,
 * Content-Encoding, Vary and body bytes, for a client sending `Accept-Encoding: gzip` and for one sending none.
 * Returns how many tiles the source has (200) and lacks.
 */
async function assertSameAnswers (source, sourcePath, exported, exportedPath, tiles) {
  let present = 0
  let absent = 0
  for (const [z, x, y] of tiles) {
    for (const headers of [{ 'accept-encoding': 'gzip' }, {}]) {
      const want = await source.inject({ url: `${sourcePath(z, x, y)}`, headers })
      const got = await exported.inject({ url: `${exportedPath(z, x, y)}`, headers })
      const label = `${z}/${x}/${y} (${headers['accept-encoding'] ?? 'no Accept-Encoding'})`
      assert.equal(got.statusCode, want.statusCode, `${label}: status`)
      for (const name of ['content-type', 'content-encoding', 'vary']) assert.equal(got.headers[name], want.headers[name], `${label}: ${name}`)
      assert.ok(got.rawPayload.equals(want.rawPayload), `${label}: body bytes (${got.rawPayload.length} vs ${want.rawPayload.length})`)
      if (headers['accept-encoding'] === undefined) want.statusCode === 200 ? present++ : absent++
    }
  }
  return { present, absent }
}

const readMetadata = (file) => {
  const d = new Database(file, { readonly: true })
  try {
    return Object.fromEntries(d.prepare('SELECT name, value FROM metadata').all().map((r) => [r.name, r.value]))
  } finally {
    d.close()
  }
}
const countTiles = (file) => {
  const d = new Database(file, { readonly: true })
  try {
    return d.prepare('SELECT count(*) FROM tiles').pluck().get()
  } finally {
    d.close()
  }
}

/** A COG to export: a fixture (Web Mercator imagery at z5-11), else one made here with GDAL. */
function cogFile (t) {
  if (HAVE_FIXTURES) return { path: join(FIXTURES, 'cog', 'image_web_z5_z11.tif'), id: 'image_web_z5_z11', zooms: '5-8' }
  if (!needs(t, HAVE_GDAL, 'neither the shared fixtures nor GDAL (gdal-bin) to make a COG')) return null
  const dir = tempDir(t)
  const grid = join(dir, 'hill.asc')
  const lines = ['ncols 400', 'nrows 300', 'xllcorner 900000', 'yllcorner 5900000', 'cellsize 100']
  for (let r = 0; r < 300; r++) lines.push(Array.from({ length: 400 }, (_, c) => ((c * 3 + r * 5) % 251)).join(' '))
  writeFileSync(grid, lines.join('\n') + '\n')
  execFileSync('gdal_translate', ['-q', '-of', 'COG', '-a_srs', 'EPSG:3857', '-ot', 'Byte', '-co', 'COMPRESS=DEFLATE', '-co', 'OVERVIEWS=AUTO', grid, join(dir, 'hill.tif')])
  return { path: join(dir, 'hill.tif'), id: 'hill', zooms: '8-12' }
}

test('a PostGIS table exported to MBTiles: served, it answers every tile as the table does (bytes, type, coding, Vary); absent tiles stay absent; metadata', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const dir = tempDir(t)
  const out = join(dir, 'zurich.mbtiles')
  const run = await exportCli([db.url, '--set', 'zurich_points', '--zooms', '8-12', '--bbox', ZURICH.join(','), '--out', out])
  assert.equal(run.code, 0, run.stderr)
  assert.match(run.stderr, /export complete: \d+ tiles written, \d+ absent, 0 failed/)

  const source = await makeApp(t, { paths: [db.url] })
  const exported = await makeApp(t, { paths: [out] })
  assert.deepEqual((await exported.inject('/list')).json(), ['zurich'])
  const tiles = tilesOf(ZURICH, 8, 12)
  const { present, absent } = await assertSameAnswers(source, (z, x, y) => `/zurich_points/${z}/${x}/${y}`, exported, (z, x, y) => `/zurich/${z}/${x}/${y}.pbf`, tiles)
  assert.ok(present > 50 && absent > 10, `the box has tiles with points (${present}) and without (${absent})`)
  assert.equal(countTiles(out), present, 'one row per tile the table has, none for the empty ones')

  const meta = readMetadata(out)
  assert.equal(meta.name, 'zurich_points')
  assert.equal(meta.format, 'pbf')
  assert.deepEqual(meta.bounds.split(',').map(Number), ZURICH)
  assert.equal(meta.minzoom, '8')
  assert.equal(meta.maxzoom, '12')
  const layers = JSON.parse(meta.json).vector_layers
  assert.equal(layers[0].id, 'zurich_points')
  assert.deepEqual(layers[0].fields, { id: 'Number', name: 'String', value: 'Number' })
  assert.deepEqual([layers[0].minzoom, layers[0].maxzoom], [8, 12], 'the layer is said to span the exported zooms')
  // Stored as MBTiles and tippecanoe store vector tiles: gzip.
  const d = new Database(out, { readonly: true })
  t.after(() => d.close())
  const big = d.prepare('SELECT tile_data FROM tiles ORDER BY length(tile_data) DESC LIMIT 1').pluck().get()
  assert.deepEqual([...big.subarray(0, 2)], [0x1f, 0x8b], 'vector tiles are stored gzipped')
  // TMS rows: the row of a tile with points, read directly, is the tile the server answers at its XYZ address.
  const [z, x, y] = [12, ...tileRange([8.54, 47.37, 8.54, 47.37], 12).slice(0, 2)]
  const stored = d.prepare('SELECT tile_data FROM tiles WHERE zoom_level = ? AND tile_column = ? AND tile_row = ?').pluck().get(z, x, flipY(z, y))
  assert.ok(gunzipSync(stored).equals((await source.inject(`/zurich_points/${z}/${x}/${y}`)).rawPayload))
})

test('a COG exported to MBTiles and to a folder (tiles.json valid TileJSON 3.0.0) answers as the COG does; --format webp writes WebP', async (t) => {
  const cog = cogFile(t)
  if (cog === null) return
  const dir = tempDir(t)
  const [lo, hi] = cog.zooms.split('-').map(Number)
  const mbtiles = join(dir, 'cog.mbtiles')
  const folder = join(dir, 'cog-png')
  const webp = join(dir, 'cog-webp')
  const runs = await Promise.all([
    exportCli([cog.path, '--set', cog.id, '--zooms', cog.zooms, '--out', mbtiles]),
    exportCli([cog.path, '--set', cog.id, '--zooms', cog.zooms, '--out', folder]),
    exportCli([cog.path, '--set', cog.id, '--zooms', cog.zooms, '--out', webp, '--format', 'webp']),
  ])
  for (const run of runs) assert.equal(run.code, 0, run.stderr)

  const source = await makeApp(t, { paths: [cog.path] })
  const bounds = (await source.inject(`/${cog.id}.json`)).json().bounds
  const tiles = tilesOf(bounds, lo, hi)
  const exported = await makeApp(t, { paths: [mbtiles] })
  const { present } = await assertSameAnswers(source, (z, x, y) => `/${cog.id}/${z}/${x}/${y}.png`, exported, (z, x, y) => `/cog/${z}/${x}/${y}.png`, tiles)
  assert.ok(present >= 20, `${present} tiles`)
  const meta = readMetadata(mbtiles)
  assert.equal(meta.format, 'png')
  assert.equal(meta.type, 'baselayer')
  assert.equal(meta.json, undefined, 'no vector_layers for a raster set')
  assert.equal(countTiles(mbtiles), present)

  // The folder: the same bytes at {z}/{x}/{y}.png, and a tiles.json pointing at them.
  let files = 0
  for (const [z, x, y] of tiles) {
    const want = await source.inject(`/${cog.id}/${z}/${x}/${y}.png`)
    const file = join(folder, String(z), String(x), `${y}.png`)
    if (want.statusCode !== 200) {
      assert.ok(!existsSync(file), `${file}: no file for an absent tile`)
      continue
    }
    assert.ok(readFileSync(file).equals(want.rawPayload), `${z}/${x}/${y}.png`)
    files++
  }
  assert.equal(files, present)
  const tilejson = JSON.parse(readFileSync(join(folder, 'tiles.json'), 'utf8'))
  if (SCHEMA_CHECK) assertValidTileJson(tilejson, { raster: true })
  assert.deepEqual(tilejson.tiles, ['{z}/{x}/{y}.png'])
  assert.deepEqual([tilejson.minzoom, tilejson.maxzoom], [lo, hi])
  assert.equal(readdirSync(folder).filter((n) => !n.startsWith('.')).sort().join(','), [...Array.from({ length: hi - lo + 1 }, (_, i) => String(lo + i)), 'tiles.json'].sort().join(','))

  // --format webp: WebP files, the bytes the COG answers for .webp
  const [z, x, y] = tiles.find(([tz, tx, ty]) => existsSync(join(folder, String(tz), String(tx), `${ty}.png`)))
  const bytes = readFileSync(join(webp, String(z), String(x), `${y}.webp`))
  assert.equal((await sharp(bytes).metadata()).format, 'webp')
  assert.ok(bytes.equals((await source.inject(`/${cog.id}/${z}/${x}/${y}.webp`)).rawPayload))
  assert.deepEqual(JSON.parse(readFileSync(join(webp, 'tiles.json'), 'utf8')).tiles, ['{z}/{x}/{y}.webp'])
})

test('a PMTiles set exported to a folder with --encoding identity: raw MVT files, the set\'s identity answers', async (t) => {
  const dir = tempDir(t)
  const archive = join(dir, 'points.pmtiles')
  const coords = pyramid(0, 3)
  writePmtiles(archive, { tiles: vectorTiles(coords), metadata: { name: 'Points', attribution: '© test', vector_layers: [{ id: 'points', fields: { z: 'Number' } }] } })
  const out = join(dir, 'points')
  const run = await exportCli([archive, '--set', 'points', '--zooms', '0-3', '--out', out, '--encoding', 'identity'])
  assert.equal(run.code, 0, run.stderr)
  assert.match(run.stderr, new RegExp(`${coords.length} tiles written`))

  const source = await makeApp(t, { paths: [archive] })
  let files = 0
  for (const [z, x, y] of tilesOf([-180, -85.0511, 180, 85.0511], 0, 3)) {
    const want = await source.inject(`/points/${z}/${x}/${y}.pbf`) // no Accept-Encoding: identity
    const file = join(out, String(z), String(x), `${y}.pbf`)
    if (want.statusCode === 204) {
      assert.ok(!existsSync(file), `${z}/${x}/${y}: absent`)
      continue
    }
    const bytes = readFileSync(file)
    assert.equal(bytes[0], 0x1a, `${z}/${x}/${y}: raw MVT, not gzip`)
    assert.ok(bytes.equals(want.rawPayload), `${z}/${x}/${y}: the set's identity answer`)
    files++
  }
  assert.equal(files, coords.length)
  const tilejson = JSON.parse(readFileSync(join(out, 'tiles.json'), 'utf8'))
  if (SCHEMA_CHECK) assertValidTileJson(tilejson)
  assert.equal(tilejson.attribution, '© test')
  assert.deepEqual(tilejson.vector_layers.map((l) => l.id), ['points'])
})

test('on a terminal, progress is one line redrawn in place (bar, done/total, %, tiles/s, eta, failures); in a log, no redrawing, and the summary line', async (t) => {
  // util-linux `script` gives the child a terminal, as a person running the command has.
  if (!needs(t, spawnSync('script', ['--version']).status === 0, 'script (util-linux) is not installed')) return
  const dir = tempDir(t)
  const archive = join(dir, 'points.pmtiles')
  const coords = pyramid(0, 4)
  writePmtiles(archive, { tiles: vectorTiles(coords) })
  const command = [process.execPath, SERVER, 'export', archive, '--set', 'points', '--zooms', '0-4', '--out', join(dir, 'out.mbtiles')]
  const onTty = spawnSync('script', ['-qec', command.map((a) => `'${a}'`).join(' '), '/dev/null'], { encoding: 'utf8' })
  assert.equal(onTty.status, 0, onTty.stdout)
  assert.match(onTty.stdout, /\r\[#{24}\] points: 341\/341 tiles 100\.0% · \d+ tiles\/s · eta 0s · 0 failed\x1b\[K/, 'the bar, redrawn with a carriage return')
  assert.match(onTty.stdout, new RegExp(`export complete: ${coords.length} tiles written, ${341 - coords.length} absent, 0 failed in [\\d.]+ s \\(\\d+ tiles/s\\)`))
  const inLog = await exportCli(command.slice(3, -1).concat(join(dir, 'log.mbtiles')))
  assert.equal(inLog.code, 0)
  assert.doesNotMatch(inLog.stderr, /\r|\x1b/, 'no redrawing in a log')
  assert.match(inLog.stderr, new RegExp(`export complete: ${coords.length} tiles written`))
})

test('Ctrl-C: exit 130, a valid MBTiles tile-cannon serves; the same command resumes and completes it, with no tile missing or twice; other options are refused without --force', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const dir = tempDir(t)
  const out = join(dir, 'slow.mbtiles')
  const args = [db.url, '--set', 'slow_points', '--zooms', '10-13', '--bbox', ZURICH_POINTS.join(','), '--out', out, '--concurrency', '2']
  await runSql(db.url, 'UPDATE export_delay SET s = 0.04')
  const child = startExport(args)
  t.after(() => child.kill('SIGKILL'))
  // Interrupted once some tiles are committed (a checkpoint each second).
  const deadline = Date.now() + 15_000
  const committed = () => { try { return countTiles(out) } catch { return 0 } } // (no file, or no table yet)
  while (Date.now() < deadline && committed() === 0) await new Promise((resolve) => setTimeout(resolve, 100))
  child.kill('SIGINT')
  const first = await child.exited
  assert.equal(first.code, 130, first.stderr)
  assert.match(first.stderr, /SIGINT/)
  assert.match(first.stderr, /export interrupted/)
  assert.ok(!existsSync(out + '-journal'), 'no transaction left open')
  const partial = countTiles(out)
  const total = tilesOf(ZURICH_POINTS, 10, 13).length
  assert.ok(partial > 0 && partial < total, `${partial} of ${total} tiles before the interruption`)
  const record = JSON.parse(readMetadata(out)['tile-cannon:export'])
  assert.equal(record.complete, false)
  assert.ok(record.done > 0 && record.done < total, `progress recorded: ${record.done}`)
  {
    const app = await makeApp(t, { paths: [out] })
    assert.deepEqual((await app.inject('/list')).json(), ['slow'])
    const served = await app.inject('/slow.json')
    assert.equal(served.statusCode, 200)
    const d = new Database(out, { readonly: true })
    const row = d.prepare('SELECT zoom_level AS z, tile_column AS x, tile_row AS row, tile_data AS data FROM tiles LIMIT 1').get()
    d.close()
    const written = await app.inject({ url: `/slow/${row.z}/${row.x}/${flipY(row.z, row.row)}`, headers: { 'accept-encoding': 'gzip' } })
    assert.equal(written.statusCode, 200, 'a tile written before the interruption is served')
    assert.ok(written.rawPayload.equals(row.data))
    await app.close()
  }

  // Other options over it: refused, the file untouched.
  const other = await exportCli([...args.slice(0, 4), '10-12', ...args.slice(5)])
  assert.equal(other.code, 2)
  assert.match(other.stderr, /holds an export of other options: zooms 10-12 \(was 10-13\).*--force/)
  assert.equal(countTiles(out), partial)

  await runSql(db.url, 'UPDATE export_delay SET s = 0')
  const second = await exportCli(args)
  assert.equal(second.code, 0, second.stderr)
  assert.match(second.stderr, new RegExp(`resuming .*slow\\.mbtiles: ${record.done} of ${total} tiles`))
  assert.match(second.stderr, /export complete/)
  assert.ok(JSON.parse(readMetadata(out)['tile-cannon:export']).complete)

  // Every tile of the box is there once (a unique index holds them) and is the function's answer.
  const source = await makeApp(t, { paths: [db.url] })
  const exported = await makeApp(t, { paths: [out] })
  const { present } = await assertSameAnswers(source, (z, x, y) => `/slow_points/${z}/${x}/${y}`, exported, (z, x, y) => `/slow/${z}/${x}/${y}`, tilesOf(ZURICH_POINTS, 10, 13))
  assert.equal(countTiles(out), present)

  const third = await exportCli(args)
  assert.equal(third.code, 0)
  assert.match(third.stderr, /already holds the whole export .*nothing to do/)
  const forced = await exportCli([...args.slice(0, 4), '10', ...args.slice(5), '--force'])
  assert.equal(forced.code, 0, forced.stderr)
  assert.equal(countTiles(out), tilesOf(ZURICH_POINTS, 10, 10).length, '--force started over with the new options')
})

test('bad input: an unknown set lists those there are; bad --zooms, --bbox, --format: exit 2 with the reason', async (t) => {
  const dir = tempDir(t)
  const archive = join(dir, 'points.pmtiles')
  writePmtiles(archive, { tiles: vectorTiles(pyramid(0, 2)) })
  const out = join(dir, 'out.mbtiles')
  const cases = [
    [[archive, '--set', 'nope', '--zooms', '0-2', '--out', out], /no set or style 'nope'\n {2}sets: points/],
    [[archive, '--set', 'points', '--zooms', 'two', '--out', out], /--zooms 'two' is not a zoom/],
    [[archive, '--set', 'points', '--zooms', '3-31', '--out', out], /zooms go from 0 to 30/],
    [[archive, '--set', 'points', '--zooms', '0-2', '--bbox', '8,47,9', '--out', out], /--bbox '8,47,9' is not minx,miny,maxx,maxy/],
    [[archive, '--set', 'points', '--zooms', '0-2', '--bbox', '8,48,9,47', '--out', out], /miny be below maxy/],
    [[archive, '--set', 'points', '--zooms', '0-2', '--bbox', '-200,40,-100,50', '--out', out], /longitudes go from -180 to 180/], // a box starting with a minus is the value of --bbox
    [[archive, '--set', 'points', '--zooms', '0-2', '--format', 'png', '--out', out], /--format png: 'points' holds pbf tiles/],
    [[archive, '--set', 'points', '--zooms', '0-2', '--scale', '2', '--out', out], /--scale 2: 'points' has @1x tiles/],
    [[archive, '--set', 'points', '--zooms', '20-22', '--out', out], /'points' serves zooms 0-2 only/],
    [[archive, '--set', 'points', '--zooms', '0-2', '--bogus', '--out', out], /Unknown option '--bogus'/],
    [[archive, '--set', 'points', '--zooms', '0-2'], /--out is required/],
    // A name that says a format export does not write is not taken for a folder's.
    [[archive, '--set', 'points', '--zooms', '0-2', '--out', join(dir, 'copy.pmtiles')], /export does not write PMTiles \(\.pmtiles\)\. It writes an MBTiles file \(--out NAME\.mbtiles\) or a folder/],
    [[archive, '--set', 'points', '--zooms', '0-2', '--out', join(dir, 'points.GPKG')], /export does not write GeoPackage/],
  ]
  const cog = HAVE_FIXTURES ? join(FIXTURES, 'cog', 'image_web_z5_z11.tif') : null
  if (cog !== null) cases.push([[cog, '--set', 'image_web_z5_z11', '--zooms', '5', '--format', 'gif', '--out', out], /--format gif is not a format of 'image_web_z5_z11' \(png, webp, jpg\)/])
  // A set that cannot be read at all is not a usage mistake: exit 1, with its reason.
  const broken = join(dir, 'broken.mbtiles')
  writeFileSync(broken, Buffer.alloc(4096, 7))
  const [unavailable, ...runs] = await Promise.all([exportCli([broken, '--set', 'broken', '--zooms', '0', '--out', out]), ...cases.map(([args]) => exportCli(args))])
  runs.forEach((run, i) => {
    assert.equal(run.code, 2, `${cases[i][0].join(' ')}: ${run.stderr}`)
    assert.match(run.stderr, cases[i][1])
    assert.doesNotMatch(run.stderr, /Usage:/, 'the reason, not the usage after it')
  })
  // A path that does not exist is a usage mistake too, as when serving: one line, exit 2.
  const missing = await exportCli([join(dir, 'nowhere.mbtiles'), '--set', 'nowhere', '--zooms', '0', '--out', out])
  assert.equal(missing.code, 2, missing.stderr)
  assert.match(missing.stderr, /^tile-cannon export: the path given does not exist: .*nowhere\.mbtiles\n$/)
  assert.equal(unavailable.code, 1, unavailable.stderr)
  assert.match(unavailable.stderr, /tileset 'broken' is unavailable: not an SQLite database/)
  assert.ok(!existsSync(out), 'nothing written')
  assert.ok(!existsSync(join(dir, 'copy.pmtiles')), 'no folder named as an archive')
})

test('boxes: one across the antimeridian takes the tiles on both sides; one ending on a tile edge takes no tile beyond it; a folder not an export is never emptied by --force', async (t) => {
  const dir = tempDir(t)
  const world = join(dir, 'world.mbtiles')
  writeMbtiles(world, { tiles: vectorTiles(pyramid(0, 3, 8)), metadata: { format: 'pbf' } })
  const across = await exportCli([world, '--set', 'world', '--zooms', '3', '--bbox', '170,-10,-170,10', '--out', join(dir, 'across.mbtiles')])
  assert.equal(across.code, 0, across.stderr)
  assert.match(across.stderr, /4 tiles \(z3: 4\)/)
  const rows = new Database(join(dir, 'across.mbtiles'), { readonly: true }).prepare('SELECT tile_column FROM tiles ORDER BY tile_column').pluck().all()
  assert.deepEqual([...new Set(rows)], [0, 7], 'the first and the last column of z3')
  // 0,0 to 90,66.51326…: exactly tile 2/2/1; its neighbours to the east and south only touch the box.
  const edge = await exportCli([world, '--set', 'world', '--zooms', '2', '--bbox', '0,0,90,66.51326044311186', '--out', join(dir, 'edge.mbtiles')])
  assert.match(edge.stderr, /1 tiles \(z2: 1\)/)
  // --force over a folder that holds someone else's files: nothing of theirs is deleted.
  const theirs = join(dir, 'theirs')
  mkdirSync(join(theirs, '10'), { recursive: true })
  writeFileSync(join(theirs, '10', 'keep.txt'), 'mine')
  const forced = await exportCli([world, '--set', 'world', '--zooms', '0', '--out', theirs, '--force'])
  assert.equal(forced.code, 0, forced.stderr)
  assert.equal(readFileSync(join(theirs, '10', 'keep.txt'), 'utf8'), 'mine')
  assert.ok(existsSync(join(theirs, '0', '0', '0.pbf')))
})

test('a box across the antimeridian: bounds the world\'s width in the metadata, tiles.json and the served TileJSON (they must not wrap); z0 read and written once; a set whose own bounds wrap is exported over them', async (t) => {
  const dir = tempDir(t)
  const world = join(dir, 'world.mbtiles')
  writeMbtiles(world, { tiles: vectorTiles(pyramid(0, 3, 8)), metadata: { format: 'pbf' } })
  const box = '170,-50,-170,10'
  const file = join(dir, 'across.mbtiles')
  const folder = join(dir, 'across')
  const [toFile, toFolder] = await Promise.all([file, folder].map((out) => exportCli([world, '--set', 'world', '--zooms', '0-3', '--bbox', box, '--out', out])))
  // z1: the two columns each side of 180°, two rows; z0: its one tile, once (it lies on both sides).
  const expected = new Set()
  for (const half of [[170, -50, 180, 10], [-180, -50, -170, 10]]) for (const [z, x, y] of tilesOf(half, 0, 3)) expected.add(`${z}/${x}/${y}`)
  for (const run of [toFile, toFolder]) {
    assert.equal(run.code, 0, run.stderr)
    assert.match(run.stderr, new RegExp(`${expected.size} tiles \\(z0: 1, z1: 4, `))
  }
  assert.match(toFile.stderr, new RegExp(`holds ${expected.size} tiles`), 'as many tiles written as counted')
  const world180 = [-180, -50, 180, 10]
  assert.equal(readMetadata(file).bounds, world180.join(','))
  assert.match(readMetadata(file).center, /^-?180,-20,0$/, 'no centre of the set\'s in the box: the box\'s middle, on the antimeridian')
  const tilejson = JSON.parse(readFileSync(join(folder, 'tiles.json'), 'utf8'))
  assert.deepEqual(tilejson.bounds, world180)
  assert.ok(tilejson.center[0] === -180 || tilejson.center[0] === 180, `centre on the antimeridian: ${tilejson.center}`)
  if (SCHEMA_CHECK) assertValidTileJson(tilejson)
  const app = await makeApp(t, { paths: [file] })
  assert.deepEqual((await app.inject('/across.json')).json().bounds, world180, 'served, as it is written')

  // An MBTiles of another tool whose bounds wrap (176..-178, Fiji): its TileJSON says the world's width, and an
  // export given no --bbox covers its own box, not every column of the world.
  const fiji = join(dir, 'fiji.mbtiles')
  writeMbtiles(fiji, { tiles: vectorTiles(pyramid(0, 3, 8)), metadata: { format: 'pbf', bounds: '176,-21,-178,-12', center: '-179,-15,3' } })
  const served = await makeApp(t, { paths: [fiji] })
  assert.deepEqual((await served.inject('/fiji.json')).json().bounds, [-180, -21, 180, -12])
  const again = await exportCli([fiji, '--set', 'fiji', '--zooms', '3', '--out', join(dir, 'fiji-out.mbtiles')])
  assert.equal(again.code, 0, again.stderr)
  assert.match(again.stderr, /2 tiles \(z3: 2\)/, 'the first and the last column of z3')
  const fijiOut = readMetadata(join(dir, 'fiji-out.mbtiles'))
  assert.equal(fijiOut.bounds, '-180,-21,180,-12')
  assert.equal(fijiOut.center, '-179,-15,3', 'the set\'s centre, east of 180° in a box starting west of it, kept')
})

test('a source failing for some tiles: failures counted and shown, the rest exported, exit 1 (tiles are missing); the same command retries them; failing for all: exit 1', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const dir = tempDir(t)
  const out = join(dir, 'flaky.mbtiles')
  const [flaky, broken] = await Promise.all([
    exportCli([db.url, '--set', 'flaky_points', '--zooms', '10-12', '--bbox', ZURICH_POINTS.join(','), '--out', out]),
    exportCli([db.url, '--set', 'broken_points', '--zooms', '10-11', '--bbox', ZURICH_POINTS.join(','), '--out', join(dir, 'broken')]),
  ])
  const tiles = tilesOf(ZURICH_POINTS, 10, 12)
  const failing = tiles.filter(([, x, y]) => (x + y) % 2 === 1).length
  assert.equal(flaky.code, 1, `tiles the set has are missing from the output: ${flaky.stderr}`)
  // The function's RAISE is its backend failing (503 when served), said with the database's words.
  assert.match(flaky.stderr, /tile \d+\/\d+\/\d+ failed: tileset 'flaky_points' could not read this tile: flaky tile/)
  assert.match(flaky.stderr, new RegExp(`${tiles.length - failing} tiles written, 0 absent, ${failing} failed`))
  assert.match(flaky.stderr, /run the same command again to retry them/)
  assert.match(flaky.stderr, /"msg":"tile read failed"/, 'the server\'s log on stderr too')
  assert.equal(flaky.stdout, '', 'stdout stays clean')
  assert.equal(countTiles(out), tiles.length - failing)
  assert.equal(JSON.parse(readMetadata(out)['tile-cannon:export']).complete, false)
  // Resumable as before: the same command reads the failed tiles again (they fail again) and writes nothing twice.
  const rerun = await exportCli([db.url, '--set', 'flaky_points', '--zooms', '10-12', '--bbox', ZURICH_POINTS.join(','), '--out', out])
  assert.equal(rerun.code, 1, rerun.stderr)
  assert.match(rerun.stderr, /resuming/)
  assert.match(rerun.stderr, new RegExp(`0 tiles written, 0 absent, ${failing} failed`))
  assert.equal(countTiles(out), tiles.length - failing)

  assert.equal(broken.code, 1, broken.stderr)
  assert.match(broken.stderr, /this function always fails/)
  assert.match(broken.stderr, /0 tiles written, 0 absent, \d+ failed/)
})

test('every stored tile failing, with absent tiles round them: exit 1 (absent tiles are not reads that worked)', async (t) => {
  const dir = tempDir(t)
  const archive = join(dir, 'damaged.pmtiles')
  // Gzip whose deflate data is damaged: each stored tile fails when decoded for --encoding identity; z1 has two tiles
  // the archive does not hold.
  const damaged = (z, x, y) => {
    const bytes = gzipSync(makeMvt(z, x, y))
    for (let i = 12; i < bytes.length - 8; i += 3) bytes[i] ^= 0x5a
    return bytes
  }
  writePmtiles(archive, { tiles: [[0, 0, 0], [1, 0, 0], [1, 1, 1]].map(([z, x, y]) => ({ z, x, y, data: damaged(z, x, y) })) })
  const run = await exportCli([archive, '--set', 'damaged', '--zooms', '0-1', '--encoding', 'identity', '--out', join(dir, 'out.mbtiles')])
  assert.match(run.stderr, /0 tiles written, 2 absent, 3 failed/)
  assert.equal(run.code, 1, run.stderr)
})

test('an output that cannot be written: exit 1 with the reason, what was committed kept for the next run', async (t) => {
  const dir = tempDir(t)
  const archive = join(dir, 'points.pmtiles')
  writePmtiles(archive, { tiles: vectorTiles(pyramid(0, 2)) })
  const out = join(dir, 'out')
  const args = [archive, '--set', 'points', '--zooms', '0-2', '--out', out]
  assert.equal((await exportCli(args)).code, 0)
  // As if the run had stopped after zoom 1 and something had since put a file where zoom 2's folder goes.
  const recordFile = join(out, '.tile-cannon-export.json')
  const record = JSON.parse(readFileSync(recordFile, 'utf8'))
  writeFileSync(recordFile, JSON.stringify({ ...record, done: 5, reached: 5, complete: false }))
  rmSync(join(out, '2'), { recursive: true })
  writeFileSync(join(out, '2'), 'not a folder')
  const run = await exportCli(args)
  assert.equal(run.code, 1, run.stderr)
  assert.match(run.stderr, /writing .*out failed: .*(ENOTDIR|EEXIST)/)
  assert.equal(JSON.parse(readFileSync(recordFile, 'utf8')).done, 5, 'the record still says where to continue')
})

test('a style whose remote source fails over part of the map only (its TileJSON bounds, the tiles it has): the tiles that do not draw it are complete and written, those that do are left out', async (t) => {
  if (!needs(t, RENDERER.backend !== null, RENDERER.why ?? '')) return
  const dir = tempDir(t)
  // `east`: a TileJSON source over the north-east quarter (its bounds), every tile answering 500; MapLibre Native draws
  // it in the tiles of its bounds and those touching their south edge (z1: x 1; z2: x 2-3, y 0-2). `tiles`: a source of
  // the whole world whose server has no tile (404) but z2's 3/3, which answers 500. The engine still asks for the
  // sources' z0 tile in the west, as a placeholder it does not draw there.
  const port = await originServer(t, (req, res) => {
    if (req.url === '/east.json') return res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ tilejson: '3.0.0', tiles: [`http://127.0.0.1:${port}/east/{z}/{x}/{y}.png`], bounds: [0, 0, 180, 85], minzoom: 0, maxzoom: 2 }))
    res.writeHead(req.url.startsWith('/east/') || req.url === '/tiles/2/3/3.png' ? 500 : 404).end()
  })
  const styles = join(dir, 'styles')
  mkdirSync(styles)
  writeFileSync(join(styles, 'parts.json'), JSON.stringify({
    version: 8,
    sources: { east: { type: 'raster', url: `http://127.0.0.1:${port}/east.json`, tileSize: 256 }, tiles: { type: 'raster', tiles: [`http://127.0.0.1:${port}/tiles/{z}/{x}/{y}.png`], tileSize: 256 } },
    layers: [
      { id: 'bg', type: 'background', paint: { 'background-color': '#ff0000' } },
      { id: 'east', type: 'raster', source: 'east' },
      { id: 'tiles', type: 'raster', source: 'tiles' },
    ],
  }))
  const config = join(dir, 'config.json')
  writeFileSync(config, JSON.stringify({ render: { incompleteTtlS: 1 } })) // retries a second apart
  const out = join(dir, 'parts.mbtiles')
  const run = await exportCli(['--styles', styles, '--config', config, '--set', 'parts', '--zooms', '1-2', '--out', out])
  assert.equal(run.code, 1, run.stderr)
  const leftOut = ['1/1/0', '1/1/1', '2/2/0', '2/2/1', '2/2/2', '2/3/0', '2/3/1', '2/3/2', '2/3/3']
  assert.match(run.stderr, new RegExp(`export incomplete: ${20 - leftOut.length} tiles written, 0 absent, 0 failed, ${leftOut.length} left out incomplete`))
  const kept = new Database(out, { readonly: true }).prepare('SELECT zoom_level AS z, tile_column AS x, tile_row AS row FROM tiles').all()
  const written = kept.map(({ z, x, row }) => `${z}/${x}/${flipY(z, row)}`).sort()
  assert.deepEqual(written, tilesOf([-180, -85, 180, 85], 1, 2).map((tile) => tile.join('/')).filter((tile) => !leftOut.includes(tile)).sort())
})

/** `handler` listening on 127.0.0.1 (any port), closed after the test: its port. */
async function originServer (t, handler) {
  const server = createServer(handler).listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.after(() => { server.closeAllConnections(); server.close() })
  return server.address().port
}

test('a style whose remote source cannot be read: its incomplete tiles are not written, read again, then left out with a summary naming the host and exit 1; a re-run fills them; a source back within the retries is written', async (t) => {
  if (!needs(t, RENDERER.backend !== null, RENDERER.why ?? '')) return
  const dir = tempDir(t)
  const solid = (r, g, b) => sharp({ create: { width: 256, height: 256, channels: 4, background: { r, g, b, alpha: 1 } } }).png().toBuffer()
  const [green, blue] = await Promise.all([solid(0, 255, 0), solid(0, 0, 255)])
  // Two remote raster sources: one always answers (green, the left half of the map), one answers 500 while `down`
  // (blue, the right half).
  let down = true
  let onDown = null
  const good = await originServer(t, (req, res) => res.writeHead(200, { 'content-type': 'image/png' }).end(green))
  const flaky = await originServer(t, (req, res) => {
    if (!down) return res.writeHead(200, { 'content-type': 'image/png' }).end(blue)
    res.writeHead(500).end()
    onDown?.()
  })
  const styles = join(dir, 'styles')
  mkdirSync(styles)
  const raster = (port, bounds) => ({ type: 'raster', tiles: [`http://u:s3cret@127.0.0.1:${port}/{z}/{x}/{y}.png?key=k3y`], tileSize: 256, bounds })
  writeFileSync(join(styles, 'remote.json'), JSON.stringify({
    version: 8,
    sources: { good: raster(good, [-180, -85, 0, 85]), flaky: raster(flaky, [0, -85, 180, 85]) },
    layers: [
      { id: 'bg', type: 'background', paint: { 'background-color': '#ff0000' } },
      { id: 'good', type: 'raster', source: 'good' },
      { id: 'flaky', type: 'raster', source: 'flaky' },
    ],
  }))
  // Retries a second apart (the pause is the time a host that could not be reached is rested: incompleteTtlS, at most 10 s).
  const config = join(dir, 'config.json')
  writeFileSync(config, JSON.stringify({ render: { incompleteTtlS: 1 } }))
  const out = join(dir, 'remote.mbtiles')
  const args = ['--styles', styles, '--config', config, '--set', 'remote', '--zooms', '0-1', '--out', out]

  const failing = await exportCli(args)
  assert.equal(failing.code, 1, failing.stderr)
  // The tiles that show the failing source (z0, and z1's east column) are never written; the west ones, which do not
  // draw it, are, whenever they are drawn.
  const [, written, leftOut] = /(\d+) tiles written, 0 absent, 0 failed, (\d+) left out incomplete/.exec(failing.stderr) ?? []
  assert.equal(Number(written), 2, failing.stderr)
  assert.equal(Number(leftOut), 3, failing.stderr)
  assert.match(failing.stderr, new RegExp(`${leftOut} tiles left out: drawn without remote source 127\\.0\\.0\\.1:${flaky} \\(HTTP 500\\), which could not be read \\(read again 3 times\\); run the same command again to fill them`))
  assert.ok(!failing.stderr.includes(`127.0.0.1:${good} (`), 'the source that works is not named')
  // The renderer's warning says what the export does with such tiles, not what the server does (keep them briefly).
  assert.match(failing.stderr, /a remote source of a style cannot be read: drawn empty, and the tiles drawn without it are not written: read again, then left out of the export/)
  assert.ok(!/kept only briefly/.test(failing.stderr), failing.stderr)
  for (const secret of ['s3cret', 'k3y']) assert.ok(!failing.stderr.includes(secret), `no ${secret} in what export says`)
  const db = new Database(out, { readonly: true })
  const kept = db.prepare('SELECT zoom_level, tile_column FROM tiles').all()
  db.close()
  assert.equal(kept.length, Number(written))
  assert.ok(kept.every((tile) => tile.zoom_level === 1 && tile.tile_column === 0), 'no tile showing the failing source in the archive')
  assert.equal(JSON.parse(readMetadata(out)['tile-cannon:export']).complete, false)

  // The source back: the same command fills what was left out.
  down = false
  const again = await exportCli(args)
  assert.equal(again.code, 0, again.stderr)
  assert.match(again.stderr, /resuming/)
  assert.match(again.stderr, new RegExp(`${5 - Number(written)} tiles written, 0 absent, 0 failed`)) // (those written before are found)
  assert.equal(countTiles(out), 5)
  const z1 = new Database(out, { readonly: true }).prepare('SELECT tile_column, tile_data FROM tiles WHERE zoom_level = 1 AND tile_row = 1').all()
  const colour = async (png) => Array.from((await sharp(png).raw().toBuffer()).subarray(0, 3))
  assert.deepEqual(await Promise.all(z1.sort((a, b) => a.tile_column - b.tile_column).map((r) => colour(r.tile_data))), [[0, 255, 0], [0, 0, 255]], 'both sources drawn')

  // Down for a moment: the tiles drawn meanwhile that show it are read again after the others, and written.
  down = true
  onDown = () => {
    onDown = null
    setTimeout(() => { down = false }, 300)
  }
  const folder = join(dir, 'remote')
  const brief = await exportCli([...args.slice(0, -1), folder])
  assert.equal(brief.code, 0, brief.stderr)
  assert.match(brief.stderr, /reading the \d+ incomplete tiles again \(1 of 3\)/)
  assert.match(brief.stderr, /export complete: 5 tiles written, 0 absent, 0 failed in/)
  assert.deepEqual(readdirSync(join(folder, '1')).flatMap((x) => readdirSync(join(folder, '1', x))).length, 4)
})

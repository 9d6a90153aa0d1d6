// The bench runs end to end on a generated set (one second per zoom); its report has the published tables' shape.
// No test asserts a speed.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { FIXTURES, HAVE_FIXTURES, ROOT, needs } from './helpers/app.js'
import { pyramid, tempDir, vectorTiles, writeMbtiles, writePmtiles } from './helpers/data.js'

const RUN = join(ROOT, 'bench', 'run.js')
const bench = (args) => spawnSync(process.execPath, [RUN, ...args], { encoding: 'utf8', timeout: 120_000 })

test('bench: per-zoom rows for tile-cannon and the baseline, JSON with the machine, an SVG chart', async (t) => {
  const dir = tempDir(t)
  writeMbtiles(join(dir, 'gen.mbtiles'), { tiles: vectorTiles(pyramid(0, 2, 4)), metadata: { format: 'pbf', minzoom: '0', maxzoom: '2' } })
  writePmtiles(join(dir, 'gen-pm.pmtiles'), { tiles: vectorTiles(pyramid(0, 2, 4)) })
  const json = join(dir, 'report.json')
  const chart = join(dir, 'chart.svg')
  const res = bench(['--data', dir, '--format', 'mbtiles', '--zooms', '1-2', '--duration', '1', '--warmup', '0', '--connections', '4',
    '--baseline', '--cache', 'on,off', '--json', json, '--chart', chart, '--markdown'])
  assert.equal(res.status, 0, res.stderr)
  assert.match(res.stdout, /\| Zoom \| Location \| Server \| Requests\/sec \|/)
  assert.match(res.stdout, /### Summary/)
  assert.match(res.stdout, /machine: .*cores, Node v\d+/)

  const report = JSON.parse(readFileSync(json, 'utf8'))
  assert.deepEqual(report.servers, ['node:http baseline', 'tile-cannon (cache on)', 'tile-cannon (cache off)'])
  assert.equal(report.machine.cores > 0, true)
  assert.equal(report.machine.loadBefore.length, 3)
  assert.equal(report.sets.length, 1, '--format mbtiles picks the MBTiles set only')
  assert.equal(report.sets[0].id, 'gen')
  assert.deepEqual(report.sets[0].rows.map((r) => r.zoom), [1, 2])
  for (const row of report.sets[0].rows) {
    assert.ok(row.tiles >= 2, 'many distinct tiles per zoom')
    for (const server of report.servers) {
      const r = row.results[server]
      for (const k of ['rps', 'throughput', 'latencyAvg', 'requests']) assert.ok(r[k] > 0, `${server} z${row.zoom} ${k} = ${r[k]}`)
      assert.ok(r.latencyP99 >= r.latencyAvg * 0 && Number.isFinite(r.latencyP99))
      assert.equal(r.errors, 0)
      assert.equal(r.non2xx, 0)
    }
  }
  assert.equal(report.summary.length, 3)
  const svg = readFileSync(chart, 'utf8')
  assert.match(svg, /^<svg [^>]*xmlns="http:\/\/www.w3.org\/2000\/svg"/)
  assert.equal((svg.match(/<rect [^>]*><title>/g) ?? []).length, 6, 'a bar per zoom and server')
})

test('bench: another server by URL template, side by side', async (t) => {
  const dir = tempDir(t)
  writeMbtiles(join(dir, 'a.mbtiles'), { tiles: vectorTiles(pyramid(0, 1, 2)) })
  // A second tile-cannon stands in for "another server": the bench only knows it by its URL template.
  const { startTileCannon } = await import('../bench/servers.js')
  const other = await startTileCannon([dir])
  t.after(() => other.stop())
  const json = join(dir, 'r.json')
  const res = bench(['--data', dir, '--server', `other=${other.base}/a/{z}/{x}/{y}.pbf`, '--zooms', '0-1', '--duration', '1', '--warmup', '0', '--connections', '2', '--json', json])
  assert.equal(res.status, 0, res.stderr)
  const report = JSON.parse(readFileSync(json, 'utf8'))
  assert.deepEqual(report.servers, ['tile-cannon', 'other'])
  assert.ok(report.sets[0].rows.every((r) => r.results.other.rps > 0 && r.results.other.errors === 0))
})

test('bench: bad input is a clear message and a non-zero exit, never a stack', async (t) => {
  const noPlaceholders = bench(['--server', 'x=http://127.0.0.1:9/tiles'])
  assert.equal(noPlaceholders.status, 2)
  assert.match(noPlaceholders.stderr, /needs \{z\}, \{x\} and \{y\}/)

  const { freePort } = await import('../bench/servers.js')
  const closed = await freePort() // nothing listens there
  const unreachable = bench(['--server', `x=http://127.0.0.1:${closed}/{z}/{x}/{y}`, '--zooms', '0', '--duration', '1'])
  assert.equal(unreachable.status, 1)
  assert.match(unreachable.stderr, new RegExp(`cannot reach http://127\\.0\\.0\\.1:${closed}.*ECONNREFUSED`))

  const dir = tempDir(t)
  writeMbtiles(join(dir, 'low.mbtiles'), { tiles: vectorTiles(pyramid(0, 1)), metadata: { maxzoom: '5' } })
  const empty = bench(['--data', dir, '--zooms', '4', '--duration', '1'])
  assert.equal(empty.status, 1)
  assert.match(empty.stderr, /low has no tiles at z4/)

  const badZooms = bench(['--zooms', 'ten'])
  assert.equal(badZooms.status, 2)
  for (const r of [noPlaceholders, unreachable, empty, badZooms]) assert.doesNotMatch(r.stderr, /at .*\.js:\d+/)
})

test('bench baselines answer exactly what tile-cannon answers: node:http and nginx', async (t) => {
  const { findNginx, startNginx, startTileCannon } = await import('../bench/servers.js')
  const { mirror } = await import('../bench/mirror.js')
  const dir = tempDir(t)
  writeMbtiles(join(dir, 'm.mbtiles'), { tiles: vectorTiles(pyramid(0, 2, 4)) })
  const tc = await startTileCannon([dir])
  t.after(() => tc.stop())
  const urls = pyramid(1, 2, 4).map(([z, x, y]) => `${tc.base}/m/${z}/${x}/${y}`)
  const headers = { 'accept-encoding': 'gzip, br' }
  const answers = await mirror(urls, headers)
  assert.equal(answers.size, urls.length)
  for (const a of answers.values()) {
    assert.equal(a.status, 200)
    assert.equal(a.head['content-encoding'], 'gzip', 'wire bytes kept as sent')
  }
  if (!needs(t, findNginx() !== null, 'nginx is not installed (apt-get install nginx-light)')) return
  const nginx = await startNginx(answers, join(dir, 'nginx'))
  t.after(() => nginx.stop())
  const { request } = await import('node:http')
  for (const url of urls) {
    const path = new URL(url).pathname
    const res = await new Promise((resolve, reject) => request(nginx.base + path, { headers }, (r) => {
      const chunks = []
      r.on('data', (c) => chunks.push(c)).on('end', () => resolve({ status: r.statusCode, headers: r.headers, body: Buffer.concat(chunks) }))
    }).on('error', reject).end())
    const expected = answers.get(path)
    assert.equal(res.status, 200)
    assert.deepEqual(res.body, expected.body, path)
    for (const h of ['content-type', 'content-encoding', 'vary', 'cache-control', 'access-control-allow-origin']) assert.equal(res.headers[h], expected.head[h], `${path} ${h}`)
  }

  const json = join(dir, 'r.json')
  const res = bench(['--data', dir, '--zooms', '2', '--duration', '1', '--warmup', '0', '--connections', '2', '--baseline', '--nginx', '--json', json])
  assert.equal(res.status, 0, res.stderr)
  const report = JSON.parse(readFileSync(json, 'utf8'))
  assert.deepEqual(report.servers, ['node:http baseline', 'nginx static files', 'tile-cannon'])
  for (const server of report.servers) assert.ok(report.sets[0].rows[0].results[server].rps > 0 && report.sets[0].rows[0].results[server].non2xx === 0, server)
})

test('bench: COG mode, cache off, with the server CPU it kept busy', async (t) => {
  if (!needs(t, HAVE_FIXTURES, 'the shared fixtures (../shared/fixtures) hold the COGs this bench reads')) return
  const dir = tempDir(t)
  const json = join(dir, 'cog.json')
  const res = bench(['--data', join(FIXTURES, 'cog', 'image_web_z5_z11.tif'), '--format', 'cog', '--zooms', '9', '--duration', '1',
    '--warmup', '0', '--connections', '4', '--cache', 'off', '--json', json, '--markdown'])
  assert.equal(res.status, 0, res.stderr)
  assert.match(res.stdout, /Server CPU \(cores\)/)
  const row = JSON.parse(readFileSync(json, 'utf8')).sets[0].rows[0]
  const r = row.results['tile-cannon']
  assert.ok(r.rps > 0 && r.errors === 0 && r.non2xx === 0, JSON.stringify(r))
  assert.ok(r.cores > 0, `server CPU measured: ${r.cores}`)
})

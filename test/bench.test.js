// The bench runs end to end on a generated set (one second per zoom); its report has the published tables' shape.
// No test asserts a speed: only that the figures are there and agree with what the servers answer.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { once } from 'node:events'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
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
  assert.match(res.stdout, /client: autocannon, 4 connections, unpinned/)
  // The server-bound figure: CPU per request, with its ratio to the first server (lower is better), per row and overall.
  assert.match(res.stdout, /\| CPU\/req \(µs\) \| CPU\/req vs node:http baseline \(lower is better\) \|/)
  assert.match(res.stdout, /\| Avg CPU\/req \(µs\) \| CPU\/req vs node:http baseline \(lower is better\) \|/)
  const rows = res.stdout.split('\n').filter((l) => /^\| \d+ \| gen\b/.test(l)).map((l) => l.split('|').slice(1, -1).map((c) => c.trim()))
  assert.equal(rows.length, 6, 'a row per zoom and server')
  for (const cells of rows) {
    assert.match(cells.at(-2), /^\d[\d,]*\.\d$/, `CPU/req of ${cells[2]}: ${cells.at(-2)}`)
    assert.match(cells.at(-1), /^\d+\.\d\d×$/, `CPU/req ratio of ${cells[2]}: ${cells.at(-1)}`)
    if (cells[2] === 'node:http baseline') assert.equal(cells.at(-1), '1.00×')
  }

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
      assert.ok(Number.isFinite(r.cpuPerRequest) && r.cpuPerRequest > 0, `${server} z${row.zoom} CPU/req = ${r.cpuPerRequest} µs`)
    }
  }
  assert.equal(report.summary.length, 3)
  for (const s of report.summary) assert.ok(s.cpuPerRequest > 0 && s.firstCpuPerRequest > 0, JSON.stringify(s))
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

test('bench and bench/render.js: --help, a bad flag, a path that does not exist, too many tiles: one line, never a stack', (t) => {
  const RENDER = join(ROOT, 'bench', 'render.js')
  const render = (args) => spawnSync(process.execPath, [RENDER, ...args], { encoding: 'utf8', timeout: 60_000 })
  const help = render(['--help'])
  assert.equal(help.status, 0, help.stderr)
  assert.match(help.stdout, /^Usage: node bench\/render\.js/)
  const unknown = render(['--bogus'])
  assert.equal(unknown.status, 2)
  assert.equal(unknown.stderr, "bench/render.js: Unknown option '--bogus' (see --help)\n")
  const dir = tempDir(t)
  const missing = bench(['--data', join(dir, 'nonexistent.mbtiles'), '--duration', '1'])
  assert.equal(missing.status, 2)
  assert.equal(missing.stderr.split('\n').at(-2), `bench: server.js exited with 2: tile-cannon: the path given does not exist: ${join(dir, 'nonexistent.mbtiles')}`)
  assert.doesNotMatch(missing.stderr, /at .*\.js:\d+/)
  const renderMissing = render(['--styles', dir, '--data', join(dir, 'nonexistent.mbtiles')])
  assert.equal(renderMissing.status, 2)
  assert.match(renderMissing.stderr, /^bench\/render\.js: server\.js exited with 2: tile-cannon: the path given does not exist: [^\n]+\n$/)
  // A folder: the tiles are over its sets' bounds (it has no TileJSON of its own: the world was asked, 4^12 tiles at
  // z12, and the bench ran out of memory); over 100,000 tiles is refused.
  mkdirSync(join(dir, 'tiles'))
  writeMbtiles(join(dir, 'tiles', 'quarter.mbtiles'), { tiles: vectorTiles([[0, 0, 0]]), metadata: { bounds: '0,0,45,45' } })
  const tooMany = render(['--styles', dir, '--data', join(dir, 'tiles'), '--zooms', '12', '--duration', '1'])
  assert.equal(tooMany.status, 2, tooMany.stderr)
  assert.match(tooMany.stderr, /^bench\/render\.js: zooms 12 over the served sets' bounds \(0\.00, 0\.00, 45\.00, 45\.00\) are [\d,]+ tiles, more than 100,000: give lower --zooms, or --data over a smaller area\n$/)
})

test('a server a bench started goes when the bench dies (SIGKILL); one forked without the bench\'s flag, as pm2\'s workers are, stays', async (t) => {
  const dir = tempDir(t)
  writeMbtiles(join(dir, 'a.mbtiles'), { tiles: vectorTiles([[0, 0, 0]]) })
  const alive = (pid) => { try { process.kill(pid, 0); return true } catch { return false } }
  const serverOf = async (script) => {
    const file = join(dir, `parent-${Math.random().toString(36).slice(2)}.mjs`) // (a fork inherits -e's --input-type)
    writeFileSync(file, script)
    const parent = spawn(process.execPath, [file], { stdio: ['ignore', 'pipe', 'inherit'] })
    t.after(() => parent.kill('SIGKILL'))
    const [line] = await once(parent.stdout, 'data')
    const pid = Number(String(line).trim())
    t.after(() => { if (alive(pid)) process.kill(pid, 'SIGKILL') })
    parent.kill('SIGKILL')
    await once(parent, 'exit')
    return pid
  }
  const servers = JSON.stringify(pathToFileURL(join(ROOT, 'bench', 'servers.js')).href)
  const benched = await serverOf(`const { startTileCannon } = await import(${servers}); const s = await startTileCannon([${JSON.stringify(dir)}]); console.log(s.child.pid)`)
  // A plain fork with an IPC channel (pm2 cluster workers have one): its parent's death is no reason to stop.
  const forked = await serverOf(`import { fork } from 'node:child_process'; const { freePort } = await import(${servers})
    const child = fork(${JSON.stringify(join(ROOT, 'server.js'))}, ['--port', String(await freePort()), '--host', '127.0.0.1', '--log-level', 'warn', '--no-watch', ${JSON.stringify(dir)}], { stdio: 'ignore', env: { ...process.env, TILE_CANNON_EXIT_WITH_PARENT: '' } })
    child.on('message', (m) => { if (m === 'ready') console.log(child.pid) })`)
  const deadline = Date.now() + 10_000
  while (alive(benched) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100))
  assert.equal(alive(benched), false, 'the bench\'s server exited with it')
  assert.equal(alive(forked), true, 'the plain fork is still serving')
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

test('bench: wrk\'s summary is read into the bench\'s figures', async () => {
  const { parseWrk, wrkScript } = await import('../bench/wrk.js')
  const text = `Running 1s test @ http://127.0.0.1:8099
  1 threads and 50 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     4.38ms   11.74ms 118.07ms   95.28%
    Req/Sec    24.96k    11.46k   37.81k    50.00%
  Latency Distribution
     50%    1.55ms
     75%    2.73ms
     90%    5.56ms
     99%  712.00us
  24864 requests in 1.00s, 27.16MB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 8288
Requests/sec:  24809.05
Transfer/sec:     27.10MB
`
  assert.deepEqual(parseWrk(text), { rps: 24809.05, throughput: 27.1 * 1024 ** 2, latencyAvg: 4.38, latencyP99: 0.712, errors: 3, non2xx: 8288, requests: 24864 })
  // The script's exact line wins over the rounded text.
  const exact = parseWrk(`${text}\nBENCH_WRK requests=24864 duration_us=1002215 bytes=28477568 connect=0 read=0 write=0 status=0 timeout=0 latency_mean_us=4379.807 latency_p99_us=71312.000\n`)
  assert.equal(exact.requests, 24864)
  assert.equal(exact.throughput, 28477568 / 1.002215)
  assert.equal(exact.latencyP99, 71.312)
  assert.equal(exact.non2xx, 0)
  assert.throws(() => parseWrk('unable to connect to 127.0.0.1:9 Connection refused'), /cannot read wrk's output/)
  // Paths and headers reach Lua as escaped string literals.
  const lua = wrkScript(['/a%20b/1/2/3', '/q"\\'], { 'accept-encoding': 'gzip, br' }, 2)
  assert.match(lua, /"\/a%20b\/1\/2\/3",/)
  assert.match(lua, /"\/q\\34\\92",/)
  assert.match(lua, /wrk\.headers\["accept-encoding"\] = "gzip, br"/)
  assert.match(lua, /#reqs \/ 2\)/)
})

test('bench --client wrk: pinned away from the servers, req/s and bytes agree with the servers\' own answers', async (t) => {
  const { findWrk } = await import('../bench/wrk.js')
  if (!needs(t, findWrk() !== null, 'wrk is not installed (apt-get install wrk)')) return
  const { affinity } = await import('../bench/cpu.js')
  const { startTileCannon } = await import('../bench/servers.js')
  const dir = tempDir(t)
  writeMbtiles(join(dir, 'w.mbtiles'), { tiles: vectorTiles(pyramid(0, 2, 4)) })

  // A server started with cpus runs there, every thread of it.
  const pinned = await startTileCannon([dir], { cpus: '0' })
  t.after(() => pinned.stop())
  for (const task of readdirSync(`/proc/${pinned.child.pid}/task`)) assert.equal(affinity(`${pinned.child.pid}/task/${task}`), '0')

  // The raw size of each answer (status line, headers and body, as wrk counts bytes), asked as wrk asks: keep-alive.
  const { request } = await import('node:http')
  const rawSize = (url) => new Promise((resolve, reject) => request(url, { agent: false, headers: { 'accept-encoding': 'gzip, br', connection: 'keep-alive' } }, (res) => {
    const socket = res.socket
    res.resume().on('end', () => { resolve({ status: res.statusCode, bytes: socket.bytesRead }); socket.destroy() })
  }).on('error', reject).end())

  const json = join(dir, 'wrk.json')
  const res = bench(['--data', dir, '--zooms', '2', '--duration', '1', '--warmup', '0', '--client', 'wrk', '--connections', '8', '--baseline', '--json', json, '--markdown'])
  assert.equal(res.status, 0, res.stderr)
  const report = JSON.parse(readFileSync(json, 'utf8'))
  assert.equal(report.options.client, 'wrk')
  assert.equal(report.options.threads, 1)
  assert.equal(report.options.connections, 8)
  if (report.machine.cores > 1) {
    assert.equal(report.options.clientCpus, '0')
    assert.equal(report.options.serverCpus, Array.from({ length: report.machine.cores - 1 }, (_, i) => i + 1).join(','))
    assert.match(res.stdout, /client: wrk \(1 thread\), 8 connections, on core\(s\) 0; servers started by the bench on core\(s\) 1/)
  }
  assert.deepEqual(report.servers, ['node:http baseline', 'tile-cannon'])
  const row = report.sets[0].rows[0]
  const sizes = await Promise.all(pyramid(2, 2, 4).filter(([z]) => z === 2).slice(0, row.tiles).map(([z, x, y]) => rawSize(`${pinned.base}/w/${z}/${x}/${y}`)))
  assert.ok(sizes.every((s) => s.status === 200))
  const meanSize = sizes.reduce((a, s) => a + s.bytes, 0) / sizes.length
  for (const server of report.servers) {
    const r = row.results[server]
    assert.ok(r.rps > 0 && r.requests > 0, `${server}: ${r.rps} req/s`)
    assert.equal(r.errors, 0, `${server}: socket errors`)
    assert.equal(r.non2xx, 0, `${server}: answers ≥ 400`)
    const seconds = r.requests / r.rps
    assert.ok(seconds >= 0.95 && seconds < 1.5, `${server}: ${r.requests} requests at ${r.rps} req/s is ${seconds} s, for --duration 1`)
    // Every path of the zoom was asked for, in turn: the bytes read per request are those of the average answer.
    const perRequest = r.throughput / r.rps
    assert.ok(Math.abs(perRequest - meanSize) / meanSize < 0.03, `${server}: ${perRequest.toFixed(1)} bytes per request, answers average ${meanSize.toFixed(1)}`)
    assert.ok(r.cpuPerRequest > 0 && r.cores > 0, `${server}: ${r.cpuPerRequest} µs of CPU per request`)
  }
})

test('bench --query and --titiler: the same options reach both, in titiler\'s spelling, for COGs, mosaics and STAC items', async (t) => {
  const { parseQuery, titilerQuery, titilerUrls } = await import('../bench/run.js')
  // As written in a URL, a + stays a plus (an expression's), not a space.
  assert.deepEqual(parseQuery('expression=(b4-b3)/(b4+b3)&rescale=-1,1'), [['expression', '(b4-b3)/(b4+b3)'], ['rescale', '-1,1']])
  assert.deepEqual([...titilerQuery(parseQuery('resampling=bilinear&encoding=terrarium&assets=red,nir&bidx=1,2&pixel_selection=mean'))], [
    ['resampling', 'bilinear'], ['reproject', 'bilinear'], ['algorithm', 'terrarium'], ['assets', 'red'], ['assets', 'nir'], ['bidx', '1'], ['bidx', '2'], ['pixel_selection', 'mean'],
  ])
  assert.equal(titilerQuery([['encoding', 'mapbox']]).get('algorithm'), 'terrainrgb')
  const dir = tempDir(t)
  const { writeFileSync } = await import('node:fs')
  writeFileSync(join(dir, 'm.json'), JSON.stringify({ mosaicjson: '0.0.3', minzoom: 0, maxzoom: 1, bounds: [-1, -1, 1, 1], tiles: {} }))
  writeFileSync(join(dir, 's.json'), JSON.stringify({ type: 'Feature', stac_version: '1.0.0', assets: {} }))
  const q = parseQuery('expression=(b2-b1)/(b2+b1)')
  assert.equal(titilerUrls('http://t:1/', '/d/a.tif', q).tiles, 'http://t:1/cog/tiles/WebMercatorQuad/{z}/{x}/{y}.png?url=%2Fd%2Fa.tif&expression=%28b2-b1%29%2F%28b2%2Bb1%29')
  assert.match(titilerUrls('http://t:1', join(dir, 'm.json')).tiles, /^http:\/\/t:1\/mosaicjson\/tiles\/WebMercatorQuad\/\{z\}\/\{x\}\/\{y\}\.png\?url=/)
  assert.match(titilerUrls('http://t:1', join(dir, 's.json'), q).tilejson, /^http:\/\/t:1\/stac\/WebMercatorQuad\/tilejson\.json\?url=.*&expression=/)

  const withBaseline = bench(['--data', dir, '--query', 'resampling=bilinear', '--baseline'])
  assert.equal(withBaseline.status, 2)
  assert.match(withBaseline.stderr, /--query does not apply to --baseline/)

  if (!needs(t, HAVE_FIXTURES, 'the shared fixtures (../shared/fixtures) hold the COG this part reads')) return
  // A stand-in for titiler that records what it is asked (the bench only reads statuses and sizes).
  const { createServer } = await import('node:http')
  const asked = []
  const fake = createServer((req, res) => { asked.push(req.url); res.writeHead(200, { 'content-type': 'image/png' }).end(Buffer.alloc(100)) })
  await new Promise((resolve) => fake.listen(0, '127.0.0.1', resolve))
  t.after(() => fake.close())
  const cog = join(FIXTURES, 'cog', 'image_web_z5_z11.tif')
  const json = join(dir, 'q.json')
  const res = await new Promise((resolve) => {
    const child = spawn(process.execPath, [RUN, '--data', cog, '--titiler', `http://127.0.0.1:${fake.address().port}`, '--pid', `titiler=${process.pid}`,
      '--query', 'resampling=bilinear', '--cache', 'off', '--zooms', '9', '--duration', '1', '--warmup', '0', '--connections', '2', '--json', json], { stdio: ['ignore', 'pipe', 'pipe'] })
    let stderr = ''
    child.stderr.on('data', (d) => { stderr += d })
    child.on('exit', (status) => resolve({ status, stderr }))
  })
  assert.equal(res.status, 0, res.stderr)
  const report = JSON.parse(readFileSync(json, 'utf8'))
  assert.equal(report.options.query, 'resampling=bilinear')
  assert.deepEqual(report.servers, ['tile-cannon', 'titiler'])
  const titiler = report.sets[0].rows[0].results.titiler
  assert.ok(titiler.requests > 0 && titiler.non2xx === 0)
  assert.ok(Number.isFinite(titiler.cores), '--pid titiler=PID: its CPU is measured')
  // The query's options in titiler's spelling, and tile-cannon's default bands where the query leaves them open.
  const url = new URL(asked.at(-1), 'http://x')
  assert.match(url.pathname, /^\/cog\/tiles\/WebMercatorQuad\/9\/\d+\/\d+\.png$/)
  assert.equal(url.searchParams.get('url'), cog)
  assert.equal(url.searchParams.get('resampling'), 'bilinear')
  assert.equal(url.searchParams.get('reproject'), 'bilinear')
  assert.deepEqual(url.searchParams.getAll('bidx'), ['1', '2', '3'])
})

/** The pids of every process under `pid` (children, theirs, …), from /proc. */
function descendants (pid) {
  const parents = new Map()
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      // The command may hold spaces and parentheses: the ppid is the second field after the last ')'.
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8')
      parents.set(Number(name), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]))
    } catch {}
  }
  const out = []
  const walk = (p) => { for (const [child, parent] of parents) if (parent === p) { out.push(child); walk(child) } }
  walk(pid)
  return out
}
const alive = (pid) => { try { process.kill(pid, 0); return true } catch { return false } }

/** The bench started with `args` (TMPDIR `tmp`), resolved once its stderr says it measures: { child, exited }. */
async function benchMeasuring (args, tmp) {
  const child = spawn(process.execPath, [RUN, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, TMPDIR: tmp } })
  let stderr = ''
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal, stderr })))
  await new Promise((resolve, reject) => {
    child.stderr.on('data', (d) => { stderr += d; if (/\[1\/\d+\]/.test(stderr)) resolve() })
    exited.then(() => reject(new Error(`the bench ended before measuring: ${stderr}`)))
  })
  return { child, exited }
}

test('bench stopped by SIGINT or SIGTERM to its process alone: every server it started (nginx too) is stopped, its folder removed, exit 130/143; killed outright, nginx goes too', async (t) => {
  const { findNginx } = await import('../bench/servers.js')
  const dir = tempDir(t)
  writeMbtiles(join(dir, 'a.mbtiles'), { tiles: vectorTiles(pyramid(0, 2, 4)) })
  const tmp = join(dir, 'tmp')
  mkdirSync(tmp)
  const nginx = findNginx() !== null
  const args = ['--data', join(dir, 'a.mbtiles'), '--zooms', '2', '--duration', '5', '--warmup', '0', '--connections', '2', '--baseline', ...(nginx ? ['--nginx'] : [])]
  for (const [signal, code] of [['SIGINT', 130], ['SIGTERM', 143]]) {
    const { child, exited } = await benchMeasuring(args, tmp)
    const under = descendants(child.pid)
    t.after(() => { for (const pid of under) if (alive(pid)) process.kill(pid, 'SIGKILL') })
    assert.ok(under.length >= (nginx ? 4 : 2), `tile-cannon, the baseline${nginx ? ', nginx and its worker' : ''}: ${under}`)
    child.kill(signal)
    const res = await exited
    assert.equal(res.code, code, res.stderr)
    assert.match(res.stderr, new RegExp(`bench: ${signal}: stopping the servers it started\\n$`))
    assert.deepEqual(under.filter(alive), [], `${signal}: nothing the bench started is left`)
    assert.deepEqual(readdirSync(tmp), [], `${signal}: the bench's folder is removed`)
  }
  if (!needs(t, nginx, 'nginx is not installed (apt-get install nginx-light)')) return
  // SIGKILL: no handler runs; the node servers close with their IPC channel, nginx on its parent-death signal.
  const { child, exited } = await benchMeasuring(args, tmp)
  const under = descendants(child.pid)
  t.after(() => { for (const pid of under) if (alive(pid)) process.kill(pid, 'SIGKILL') })
  child.kill('SIGKILL')
  await exited
  const deadline = Date.now() + 10_000
  while (under.some(alive) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100))
  assert.deepEqual(under.filter(alive), [], 'SIGKILL: nothing the bench started is left')
})

/** A node:http server on 127.0.0.1 that takes requests and never answers them. */
async function hangingServer (t) {
  const { createServer } = await import('node:http')
  const server = createServer(() => {})
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => { server.closeAllConnections(); server.close() })
  return `http://127.0.0.1:${server.address().port}`
}

/** Processes whose command line holds `text`. */
function processesWith (text) {
  return readdirSync('/proc').filter((p) => /^\d+$/.test(p)).filter((p) => {
    try { return readFileSync(`/proc/${p}/cmdline`, 'utf8').includes(text) } catch { return false }
  }).map(Number)
}

test('the node:http baseline over a server that stops answering: mirror gives up, a start that times out is killed, and it goes with its bench while it waits', { timeout: 30_000 }, async (t) => {
  const { StartError, startBaseline } = await import('../bench/servers.js')
  const { mirror } = await import('../bench/mirror.js')
  const hanging = await hangingServer(t)
  await assert.rejects(mirror([`${hanging}/t/0/0/0`], {}, { timeoutMs: 300 }), { message: `${hanging}/t/0/0/0 did not answer in 0.3 s` })

  const dir = tempDir(t)
  const listFile = join(dir, 'urls.json')
  writeFileSync(listFile, JSON.stringify({ urls: [`${hanging}/t/0/0/0`], headers: {} }))
  t.after(() => { for (const pid of processesWith(listFile)) process.kill(pid, 'SIGKILL') })
  await assert.rejects(startBaseline(listFile, { timeoutMs: 1500 }), (err) => err instanceof StartError && err.message === 'baseline.js did not start in 1.5 s')
  assert.deepEqual(processesWith(listFile), [], 'the baseline that did not start is not left running')

  // A bench killed while its baseline reads the answers: the baseline goes too (its IPC channel closed).
  const file = join(dir, 'parent.mjs')
  writeFileSync(file, `const { startBaseline } = await import(${JSON.stringify(pathToFileURL(join(ROOT, 'bench', 'servers.js')).href)}); await startBaseline(${JSON.stringify(listFile)})`)
  const parent = spawn(process.execPath, [file], { stdio: 'ignore' })
  t.after(() => parent.kill('SIGKILL'))
  let deadline = Date.now() + 10_000
  while (processesWith(listFile).length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50))
  const [baseline] = processesWith(listFile)
  assert.ok(baseline, 'the baseline started')
  await new Promise((resolve) => setTimeout(resolve, 300)) // into its mirror()
  parent.kill('SIGKILL')
  deadline = Date.now() + 5000
  while (alive(baseline) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100))
  assert.equal(alive(baseline), false, 'the baseline went with its bench')
})

/** A node:http server on 127.0.0.1 answering with `handler`; its base URL. */
async function serve (t, handler) {
  const { createServer } = await import('node:http')
  const server = createServer(handler)
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => { server.closeAllConnections(); server.close() })
  return `http://127.0.0.1:${server.address().port}`
}
const TILE = Buffer.from([0x1a, 0x02, 0x78, 0x02]) // the start of an MVT layer: what the finder takes for a tile
const benchAsync = (args) => new Promise((resolve) => {
  const child = spawn(process.execPath, [RUN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (d) => { stdout += d })
  child.stderr.on('data', (d) => { stderr += d })
  child.on('exit', (status) => resolve({ status, stdout, stderr }))
})

test('bench finder: a redirect, an HTML page or an empty 200 is not a tile; a server that never answers is said in seconds, by name; one reset is not "cannot reach"', { timeout: 60_000 }, async (t) => {
  const redirect = await serve(t, (req, res) => res.writeHead(302, { location: '/elsewhere' + req.url }).end())
  const html = await serve(t, (req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<html>not found</html>'))
  const empty = await serve(t, (req, res) => res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end())
  const hanging = await hangingServer(t)
  let resets = 0
  const flaky = await serve(t, (req, res) => {
    if (req.url === '/1/0/0' && resets++ === 0) return req.socket.destroy() // one request's connection reset
    res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end(TILE)
  })
  const args = (name, base) => ['--server', `${name}=${base}/{z}/{x}/{y}`, '--zooms', '1', '--duration', '1', '--warmup', '0', '--connections', '2']
  const [r, h, e, never, reset] = await Promise.all([benchAsync(args('r', redirect)), benchAsync(args('h', html)), benchAsync(args('e', empty)), benchAsync(args('never', hanging)), benchAsync(args('flaky', flaky))])
  assert.equal(r.status, 1, r.stderr)
  assert.match(r.stderr, /^bench: r has no tiles at z1 \(within its bounds\): r answered 302 ×4, none a tile$/m)
  assert.match(h.stderr, /^bench: h has no tiles at z1 \(within its bounds\): h answered text\/html ×4, none a tile$/m)
  assert.match(e.stderr, /^bench: e has no tiles at z1 \(within its bounds\): e answered empty ×4, none a tile$/m)
  assert.equal(never.status, 1, never.stderr)
  assert.match(never.stderr, new RegExp(`^bench: never: ${hanging}/1/\\d/\\d did not answer in 5 s$`, 'm'))
  assert.equal(reset.status, 0, reset.stderr)
  for (const res of [r, h, e, never, reset]) assert.doesNotMatch(res.stderr, /at .*\.js:\d+/)
})

test('bench --baseline and --nginx mirror a --server whose template has a query (an API key)', async (t) => {
  const { findNginx, startTileCannon } = await import('../bench/servers.js')
  const dir = tempDir(t)
  writeMbtiles(join(dir, 'a.mbtiles'), { tiles: vectorTiles(pyramid(0, 1, 2)) })
  const other = await startTileCannon([dir])
  t.after(() => other.stop())
  const json = join(dir, 'r.json')
  const nginx = findNginx() !== null
  const res = await benchAsync(['--server', `keyed=${other.base}/a/{z}/{x}/{y}?key=abc`, '--tilejson', `${other.base}/a.json`, '--baseline', ...(nginx ? ['--nginx'] : []),
    '--zooms', '1', '--duration', '1', '--warmup', '0', '--connections', '2', '--json', json])
  assert.equal(res.status, 0, res.stderr)
  const report = JSON.parse(readFileSync(json, 'utf8'))
  assert.deepEqual(report.servers, ['node:http baseline', ...(nginx ? ['nginx static files'] : []), 'keyed'])
  for (const [server, r] of Object.entries(report.sets[0].rows[0].results)) assert.ok(r.requests > 0 && r.non2xx === 0 && r.errors === 0, `${server}: ${JSON.stringify(r)}`)
})

test('bench with autocannon: a request that times out is one error', { timeout: 30_000 }, async (t) => {
  const { measure } = await import('../bench/run.js')
  let received = 0
  const base = await serve(t, () => { received++ }) // never answers
  const r = await measure(base, ['/0/0/0'], { client: 'autocannon', connections: 1, headers: {}, timeout: 1 }, 3.5)
  // One connection, a 1 s timeout over 3.5 s: three timed out, the fourth was still waiting at the end.
  assert.ok(r.errors >= 1 && r.errors <= received && r.errors >= received - 1, `${r.errors} errors for ${received} requests unanswered`)
})

test('bench --json, --chart: a path that cannot be written is refused before the run; one that fails after it still prints the tables', async (t) => {
  const dir = tempDir(t)
  const started = Date.now()
  const noFolder = bench(['--json', join(dir, 'nonexistent', 'r.json'), '--duration', '1'])
  assert.equal(noFolder.status, 2)
  assert.equal(noFolder.stderr, `bench: --json ${join(dir, 'nonexistent', 'r.json')}: its folder ${join(dir, 'nonexistent')} does not exist\n`)
  const folder = bench(['--chart', dir, '--duration', '1'])
  assert.equal(folder.status, 2)
  assert.equal(folder.stderr, `bench: --chart ${dir}: is a folder\n`)
  assert.ok(Date.now() - started < 5000, 'refused before anything ran')

  // The folder goes during the run: the figures are not lost.
  writeMbtiles(join(dir, 'a.mbtiles'), { tiles: vectorTiles(pyramid(0, 1, 2)) })
  const out = join(dir, 'out')
  mkdirSync(out)
  const child = spawn(process.execPath, [RUN, '--data', join(dir, 'a.mbtiles'), '--zooms', '1', '--duration', '1', '--warmup', '0', '--connections', '2', '--json', join(out, 'r.json')], { stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (d) => { stdout += d })
  child.stderr.on('data', (d) => {
    stderr += d
    if (/\[1\/1\]/.test(stderr)) rmSync(out, { recursive: true, force: true })
  })
  const [status] = await once(child, 'exit')
  assert.equal(status, 1, stderr)
  assert.match(stdout, /### Summary/)
  assert.equal(stderr.split('\n').at(-2), `bench: --json ${join(out, 'r.json')}: cannot write it (ENOENT)`)
  assert.doesNotMatch(stderr, /at .*\.js:\d+/)
})

test('bench with autocannon: latencies of a sub-millisecond server are to the fraction of a ms (Little\'s law agrees)', async (t) => {
  const { measure } = await import('../bench/run.js')
  const base = await serve(t, (req, res) => res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end(TILE))
  const r = await measure(base, ['/0/0/0', '/1/0/0'], { client: 'autocannon', connections: 2, headers: {} }, 1)
  // Little's law: with 2 requests always out, each takes 2 / (req/s) on average, at most (the client's own time
  // between an answer and the next request is in the law's figure, not in the latency).
  const little = (2 / r.rps) * 1000
  assert.ok(r.latencyAvg > little * 0.3 && r.latencyAvg <= little * 1.05, `mean ${r.latencyAvg} ms, Little's law ${little} ms`)
  assert.ok(r.latencyP99 >= r.latencyAvg && r.latencyP99 > 0, `p99 ${r.latencyP99} ms`)
})

test('bench --pid or --db-pid of a process that is not running: refused before the run, one line, exit 2', async (t) => {
  const gone = spawn(process.execPath, ['-e', ''])
  await once(gone, 'exit')
  const base = await serve(t, (req, res) => res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end(TILE))
  const res = await benchAsync(['--server', `x=${base}/{z}/{x}/{y}`, '--pid', `x=${gone.pid}`, '--zooms', '0', '--duration', '1', '--warmup', '0'])
  assert.equal(res.status, 2)
  assert.equal(res.stderr, `bench: --pid x=${gone.pid}: no process ${gone.pid} is running\n`)
  const db = await benchAsync(['--server', `x=${base}/{z}/{x}/{y}`, '--db-pid', String(gone.pid), '--zooms', '0', '--duration', '1', '--warmup', '0'])
  assert.equal(db.status, 2)
  assert.equal(db.stderr, `bench: --db-pid ${gone.pid}: no process ${gone.pid} is running\n`)
})

test('bench --data with a --server that is down, or answers no tile: one line naming it before anything is measured', async (t) => {
  const { freePort } = await import('../bench/servers.js')
  const dir = tempDir(t)
  writeMbtiles(join(dir, 'a.mbtiles'), { tiles: vectorTiles(pyramid(0, 1, 2)) })
  const closed = await freePort()
  const missing = await serve(t, (req, res) => res.writeHead(404).end())
  const args = (template) => ['--data', dir, '--server', `other=${template}`, '--zooms', '1', '--duration', '5', '--warmup', '0', '--connections', '2']
  const started = Date.now()
  const [down, notFound] = await Promise.all([benchAsync(args(`http://127.0.0.1:${closed}/a/{z}/{x}/{y}`)), benchAsync(args(`${missing}/a/{z}/{x}/{y}`))])
  assert.equal(down.status, 1)
  assert.match(down.stderr, new RegExp(`^bench: other: cannot reach http://127\\.0\\.0\\.1:${closed}/a/1/\\d/\\d: ECONNREFUSED$`, 'm'))
  assert.equal(notFound.status, 1)
  assert.match(notFound.stderr, new RegExp(`^bench: other answered 404 to ${missing}/a/1/\\d/\\d, where tile-cannon answered a tile$`, 'm'))
  for (const res of [down, notFound]) assert.doesNotMatch(res.stderr, /\[1\/\d+\]|at .*\.js:\d+/, 'nothing measured, no stack')
  assert.ok(Date.now() - started < 5000 + 10_000, 'not benched for --duration 5 per server')
})

test('bench: a server whose answers turn to errors during the run is marked in the Summary and the chart, and named on stderr', async (t) => {
  let broken = false
  const base = await serve(t, (req, res) => {
    if (broken) return res.writeHead(500, { 'content-type': 'text/plain' }).end('oops')
    res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end(TILE)
  })
  const dir = tempDir(t)
  const chart = join(dir, 'c.svg')
  const child = spawn(process.execPath, [RUN, '--server', `flaky=${base}/{z}/{x}/{y}`, '--zooms', '1', '--duration', '1', '--warmup', '0', '--connections', '2', '--chart', chart], { stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (d) => { stdout += d })
  child.stderr.on('data', (d) => { stderr += d; if (/\[1\/1\]/.test(stderr)) broken = true })
  const [status] = await once(child, 'exit')
  assert.equal(status, 1, stderr)
  const summary = stdout.split('### Summary')[1]
  assert.match(summary, /\| flaky ⚠ not comparable: [\d,]+ non-2xx \| /)
  assert.match(stderr, /^bench: some requests to flaky failed or were not answered 2xx \(see Errors and Non-2xx\): those figures are not comparable$/m)
  const svg = readFileSync(chart, 'utf8')
  assert.match(svg, /<rect [^>]*fill="url\(#failed\)"[^>]*class="failed"><title>flaky z1: \d+ req\/s ⚠ not comparable: \d+ non-2xx<\/title>/)
})

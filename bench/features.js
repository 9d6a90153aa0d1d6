#!/usr/bin/env node
// OGC API – Features speed: the seed comparison's workload, 200 features a request (limit=200, each request another
// city-viewport bbox) in CRS84 as GeoJSON, from a table of points and one of short lines (OSM-like, generated around
// Zurich: 200,000 points, 100,000 lines of 3-8 vertices, a few text and integer properties), at 4, 8, 16 and 32
// concurrent requests: req/s, mean latency and server CPU per request; pages in key order (the default: stable
// paging) and, with features.orderByKey false, in the order the spatial index yields them. Against:
//   - GeoServer's published GeoJSON figures: 80-310 req/s at 4-32 concurrent requests, 17-142 ms (target: 5× its best);
//   - the database-bound ceiling, run here: a bare node:http server that runs the very same statement through pg
//     (tile-cannon's own parameter reading and SQL, lib/features) and writes the rows' text out (target: 0.9×).
//   node bench/features.js [--db-cpus 1 --bench-cpus 0] [--duration 8] [--connections 4,8,16,32] [--order key,none]
//                          [--points N --lines N] [--layout random|clustered]
// --layout: how the rows lie on disk. `random` (the default): in id order, each viewport's rows scattered over the
// table's pages. `clustered`: rewritten in the order of their geometries (CLUSTER on the spatial index), as osm2pgsql
// writes the tables it imports (its default), so a viewport's rows share a few pages.
// As bench/postgis.js: --db-cpus pins the throwaway PostgreSQL to its own core(s), --bench-cpus the servers and the
// client (autocannon, in this process) to the others, as when the database runs on its own machine.
import { fork } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:http'
import os from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import autocannon from 'autocannon'
import { startPostgis, runSql } from '../test/helpers/postgres.js'
import { freePort, startTileCannon } from './servers.js'
import { cpuSeconds, findTaskset, pin } from './cpu.js'
import { UsageError, cpuOption, numberListOption, numberOption, readArgs, refuse } from './args.js'

const HERE = fileURLToPath(import.meta.url)
const GEOSERVER = { reqs: [80, 310], ms: [17, 142] } // published GeoJSON figures, 4-32 concurrent requests
const LIMIT = 200

const SCRIPT = 'bench/features.js'
const args = process.argv.slice(2)

/** The ceiling: node:http, pg, the statement tile-cannon would run; rows buffered by pg, joined, written once. */
async function ceiling (url, port, byKey) {
  const { createProvider } = await import('../lib/sources/postgis/index.js')
  const { collectionOf } = await import('../lib/features/collection.js')
  const { readItemsQuery } = await import('../lib/features/params.js')
  const { itemsStatement, itemsValues } = await import('../lib/features/sql.js')
  const { featureOptions } = await import('../lib/features/index.js')
  const options = featureOptions({ orderByKey: byKey })
  const provider = createProvider(url, { poolSize: 10 }) // tile-cannon's default pool
  const collections = new Map()
  for (const { id, source } of await provider.discover()) if (source?.features) collections.set(id, collectionOf({ source }))
  createServer(async (req, res) => {
    const u = new URL(req.url, 'http://x')
    const c = collections.get(decodeURIComponent(u.pathname.split('/')[3] ?? ''))
    try {
      const q = readItemsQuery(Object.fromEntries(u.searchParams), c, options)
      const st = itemsStatement(c, q, options.precision.degrees, options.orderByKey)
      const { rows } = await c.d.pool.query({ name: st.name, text: st.text, values: itemsValues(q), rowMode: 'array' })
      const features = rows.slice(0, q.limit).map((r) => r[0])
      res.writeHead(200, { 'content-type': 'application/geo+json' })
      res.end(`{"type":"FeatureCollection","features":[${features.join(',')}],"numberReturned":${features.length}}`)
    } catch (err) {
      res.writeHead(500, { 'content-type': 'text/plain' })
      res.end(String(err.message))
    }
  }).listen(port, '127.0.0.1', () => process.send('ready'))
  process.on('SIGTERM', () => provider.close().finally(() => process.exit(0)))
  // The bench gone (killed, or ended without stopping it): its IPC channel closes, and the ceiling goes with it.
  process.on('disconnect', () => provider.close().finally(() => process.exit(0)))
}

/** A deterministic PRNG (mulberry32): every run and every server asks the same boxes. */
function random (seed) {
  return () => {
    seed = (seed + 0x6D2B79F5) | 0
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** `n` viewport boxes of `w`×`h` degrees around the city's centre, as /items paths. */
function boxes (table, n, w, h, seed) {
  const r = random(seed)
  return Array.from({ length: n }, () => {
    const x = 8.54 + (r() - 0.5) * 0.12
    const y = 47.37 + (r() - 0.5) * 0.07
    return `/ogc/collections/${table}/items?limit=${LIMIT}&bbox=${[x - w / 2, y - h / 2, x + w / 2, y + h / 2].map((v) => v.toFixed(5)).join(',')}`
  })
}

const DATA = (points, lines) => `
SELECT setseed(0.17);
CREATE TABLE osm_points (id bigint PRIMARY KEY, name text, amenity text, population integer, geom geometry(Point, 4326));
INSERT INTO osm_points SELECT i, 'poi ' || i, (ARRAY['cafe', 'restaurant', 'bench', 'school', 'shop', 'bus_stop', 'atm', 'pharmacy'])[1 + i % 8],
  (random() * 5000)::int, ST_SetSRID(ST_MakePoint(8.54 + (random() + random() + random() - 1.5) * 0.1, 47.37 + (random() + random() + random() - 1.5) * 0.06), 4326)
  FROM generate_series(1, ${points}) AS i;
CREATE TABLE osm_lines (id bigint PRIMARY KEY, name text, highway text, lanes integer, maxspeed integer, geom geometry(LineString, 4326));
INSERT INTO osm_lines SELECT s.i, 'street ' || s.i, (ARRAY['residential', 'service', 'footway', 'primary', 'secondary', 'track'])[1 + s.i % 6],
  1 + s.i % 4, (ARRAY[30, 50, 60, 80])[1 + s.i % 4], ST_SetSRID(l.line, 4326)
  FROM (SELECT i, 8.54 + (random() + random() + random() - 1.5) * 0.1 AS x0, 47.37 + (random() + random() + random() - 1.5) * 0.06 AS y0,
               (random() - 0.5) * 0.002 AS dx, (random() - 0.5) * 0.002 AS dy, 2 + (random() * 5)::int AS n FROM generate_series(1, ${lines}) AS i) AS s
  CROSS JOIN LATERAL (SELECT ST_MakeLine(ST_MakePoint(s.x0 + k * s.dx + (random() - 0.5) * 0.0003, s.y0 + k * s.dy + (random() - 0.5) * 0.0003) ORDER BY k) AS line
                      FROM generate_series(0, s.n) AS k) AS l;
CREATE INDEX osm_points_geom ON osm_points USING gist (geom);
CREATE INDEX osm_lines_geom ON osm_lines USING gist (geom);`

const CLUSTERED = `CLUSTER osm_points USING osm_points_geom;
CLUSTER osm_lines USING osm_lines_geom;`

const USAGE = `Usage: node bench/features.js [options]

  --db-cpus LIST       pin the throwaway PostgreSQL to these cores (e.g. 1)
  --bench-cpus LIST    pin the servers and the client to these (e.g. 0)
  --duration S         seconds per level and server (default 8)
  --connections LIST   concurrent requests, comma-separated (default 4,8,16,32)
  --order LIST         key (stable paging, the default), none (the spatial index's order), or both (key,none: the
                       default)
  --points N --lines N rows generated (default 200000 and 100000; too few, and no box holds a full page: refused)
  --layout L           random (default: rows in id order, scattered) or clustered (rows in geometry order, as osm2pgsql
                       writes them)
  -h, --help`

/** Forks this file as the ceiling server, pinned like tile-cannon. */
async function startCeiling (url, cpus, byKey) {
  const port = await freePort()
  const pinned = cpus === undefined ? {} : { execPath: findTaskset(), execArgv: ['-c', cpus, process.execPath] }
  const child = fork(HERE, ['--ceiling', url, String(port), String(byKey)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], ...pinned })
  const [message] = await once(child, 'message')
  if (message !== 'ready') throw new Error('the ceiling server did not start')
  return { child, base: `http://127.0.0.1:${port}`, async stop () { child.kill('SIGTERM'); await once(child, 'exit') } }
}

/** Keeps the paths whose answer is a full page of 200 features; → { paths, bytes (mean body) }. */
async function fullPages (base, paths) {
  const kept = []
  let bytes = 0
  for (const p of paths) {
    const res = await fetch(base + p)
    const body = await res.text()
    if (!res.ok) throw new Error(`tile-cannon answered ${res.status} to ${p}: ${body.slice(0, 200)}`)
    if (JSON.parse(body).numberReturned === LIMIT) {
      kept.push(p)
      bytes += body.length
    }
  }
  return { paths: kept, bytes: kept.length ? Math.round(bytes / kept.length) : 0 }
}

function load (base, paths, connections, duration) {
  let next = 0
  return new Promise((resolve, reject) => {
    autocannon({
      url: base,
      connections,
      duration,
      requests: [{ setupRequest: (req) => ({ ...req, path: paths[next++ % paths.length] }) }],
    }, (err, result) => (err ? reject(err) : resolve(result)))
  })
}

/** The command line, every value checked (nothing is started before); a mistake throws a UsageError. */
function options (argv) {
  const values = readArgs(argv, {
    'db-cpus': { type: 'string' },
    'bench-cpus': { type: 'string' },
    duration: { type: 'string', default: '8' },
    connections: { type: 'string', default: '4,8,16,32' },
    order: { type: 'string', default: 'key,none' },
    points: { type: 'string', default: '200000' },
    lines: { type: 'string', default: '100000' },
    layout: { type: 'string', default: 'random' },
    help: { type: 'boolean', short: 'h', default: false },
  })
  if (values.help) return { help: true }
  const orders = values.order === 'both' ? ['key', 'none'] : values.order.split(',')
  if (!orders.every((o) => o === 'key' || o === 'none') || new Set(orders).size < orders.length) throw new UsageError(`--order takes key, none or both (key,none), not '${values.order}'`)
  if (values.layout !== 'random' && values.layout !== 'clustered') throw new UsageError(`--layout is random or clustered, not '${values.layout}'`)
  return {
    dbCpus: cpuOption('db-cpus', values['db-cpus']),
    benchCpus: cpuOption('bench-cpus', values['bench-cpus']),
    duration: numberOption('duration', values.duration, { min: 0, above: true }),
    levels: numberListOption('connections', values.connections, { min: 1, integer: true }),
    orders,
    points: numberOption('points', values.points, { min: 1, integer: true }),
    lines: numberOption('lines', values.lines, { min: 1, integer: true }),
    layout: values.layout,
  }
}

async function main () {
  let opts
  try {
    opts = options(args)
  } catch (err) {
    refuse(SCRIPT, err.message)
  }
  if (opts.help) return console.log(USAGE)
  const { dbCpus, benchCpus, duration, levels, orders, points, lines, layout } = opts
  const db = await startPostgis({ cpus: dbCpus })
  if (db === null) refuse(SCRIPT, 'PostgreSQL with PostGIS is not installed (Debian: postgresql postgresql-15-postgis-3) and DATABASE_URL is not set')
  const servers = []
  const dir = mkdtempSync(join(os.tmpdir(), 'tile-cannon-bench-'))
  try {
    let started = Date.now()
    await runSql(db.url, DATA(points, lines))
    if (layout === 'clustered') await runSql(db.url, CLUSTERED)
    await runSql(db.url, 'VACUUM ANALYZE osm_points') // one statement each: VACUUM runs outside a transaction
    await runSql(db.url, 'VACUUM ANALYZE osm_lines')
    console.error(`data: ${points} points, ${lines} lines, ${layout}, in ${((Date.now() - started) / 1000).toFixed(1)} s`)
    if (benchCpus !== undefined) pin(process.pid, benchCpus) // the client beside the servers, off the database's cores
    for (const order of orders) {
      const config = join(dir, `${order}.json`)
      writeFileSync(config, JSON.stringify({ features: { orderByKey: order === 'key' } }))
      const cannon = await startTileCannon([db.url], { cpus: benchCpus ?? null, flags: ['--no-viewer', '--no-metrics', '--config', config] })
      servers.push({ name: 'tile-cannon', order, ...cannon })
      servers.push({ name: 'ceiling', order, ...(await startCeiling(db.url, benchCpus, order === 'key')) })
    }
    const workloads = []
    for (const [table, w, h, seed] of [['osm_points', 0.012, 0.008, 1], ['osm_lines', 0.012, 0.008, 2]]) {
      const { paths, bytes } = await fullPages(servers[0].base, boxes(table, 600, w, h, seed))
      workloads.push({ table, paths, bytes })
    }
    // The bench measures full pages only: with too few rows no box holds one, and there is nothing to ask.
    const empty = workloads.filter((w) => w.paths.length === 0)
    if (empty.length) {
      throw new UsageError(`no box of ${empty.map((w) => w.table).join(' or ')} holds a full page of ${LIMIT} features with --points ${points} --lines ${lines}: give more rows (the defaults are 200000 and 100000)`)
    }
    const rows = []
    const failures = []
    for (const { table, paths, bytes } of workloads) {
      for (const connections of levels) {
        for (const server of servers) {
          await load(server.base, paths, connections, 1) // warm-up: statements prepared, connections open
          const cpu0 = cpuSeconds(server.child.pid)
          started = Date.now()
          const r = await load(server.base, paths, connections, duration)
          const cpu = cpuSeconds(server.child.pid) - cpu0
          const answered = r['2xx']
          if (r.non2xx > 0 || r.errors > 0) {
            failures.push(`${server.name} (${server.order} order) ${table} c${connections}: ${r.non2xx} non-2xx, ${r.errors} errors`)
            console.error(failures.at(-1))
          }
          rows.push({ table, connections, order: server.order, server: server.name, reqs: answered / ((Date.now() - started) / 1000), ms: r.latency.average, cpuUs: (cpu / answered) * 1e6, bytes })
          console.error(`${table} c${connections} ${server.name} (${server.order} order): ${rows.at(-1).reqs.toFixed(0)} req/s, ${r.latency.average.toFixed(1)} ms`)
        }
      }
    }
    report(rows, { duration, orders, dbCpus, benchCpus, workloads })
    // A server that failed requests was not answering the pages asked for: its figures do not count.
    if (failures.length) {
      console.error(`${SCRIPT}: some requests failed or were not answered 2xx, those figures are not comparable: ${failures.join('; ')}`)
      process.exitCode = 1
    }
  } catch (err) {
    console.error(`${SCRIPT}: ${err instanceof UsageError ? err.message : err.stack}`)
    process.exitCode = err instanceof UsageError ? 2 : 1
  } finally {
    for (const s of servers) await s.stop().catch(() => {})
    await db.stop().catch(() => {}) // DATABASE_URL's server gone: its database cannot be dropped, nothing else to do
    rmSync(dir, { recursive: true, force: true })
  }
}

/** A figure to `digits` places; '–' where there is none (no request answered: a CPU per request of x/0). */
const fixed = (n, digits) => (Number.isFinite(n) ? n.toFixed(digits) : '–')

function report (rows, { duration, orders, dbCpus, benchCpus, workloads }) {
  const load = os.loadavg().map((v) => v.toFixed(2)).join(' ')
  console.log(`\n## OGC API – Features: ${LIMIT} features a request, CRS84 GeoJSON, a different city-viewport bbox each\n`)
  console.log(`\`node bench/features.js ${process.argv.slice(2).join(' ')}\` · ${duration} s per level · ${os.cpus().length} cores (${os.cpus()[0]?.model.trim()}) · ` +
    `database on core(s) ${dbCpus ?? 'any'}, servers and client on ${benchCpus ?? 'any'} · Node ${process.version} · load average at the end ${load}\n`)
  for (const w of workloads) console.log(`- ${w.table}: ${w.paths.length} boxes holding a full page each, ${(w.bytes / 1024).toFixed(0)} KiB a page uncompressed`)
  for (const order of orders) {
    console.log(`\n### Pages ${order === 'key' ? 'in key order (default: stable paging)' : 'in the spatial index\'s order (features.orderByKey: false)'}\n`)
    console.log('| table | concurrent | tile-cannon req/s | mean ms | CPU/req µs | ceiling req/s | mean ms | CPU/req µs | vs ceiling | vs GeoServer best (310 req/s) |')
    console.log('|---|---|---|---|---|---|---|---|---|---|')
    for (const tc of rows.filter((r) => r.order === order && r.server === 'tile-cannon')) {
      const ceil = rows.find((r) => r.order === order && r.server === 'ceiling' && r.table === tc.table && r.connections === tc.connections)
      console.log(`| ${tc.table} | ${tc.connections} | ${fixed(tc.reqs, 0)} | ${fixed(tc.ms, 1)} | ${fixed(tc.cpuUs, 0)} | ${fixed(ceil.reqs, 0)} | ${fixed(ceil.ms, 1)} | ${fixed(ceil.cpuUs, 0)} | ` +
        `${fixed(tc.reqs / ceil.reqs, 2)}× | ${fixed(tc.reqs / GEOSERVER.reqs[1], 1)}× |`)
    }
  }
  console.log(`\nGeoServer (published): ${GEOSERVER.reqs[0]}-${GEOSERVER.reqs[1]} req/s, ${GEOSERVER.ms[0]}-${GEOSERVER.ms[1]} ms at 4-32 concurrent requests.`)
}

if (args[0] === '--ceiling') await ceiling(args[1], Number(args[2]), args[3] !== 'false')
else await main()

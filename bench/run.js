#!/usr/bin/env node
// The honest bench: per-zoom req/s, throughput and latency for tile-cannon and any other server, side by side, over
// many real tiles per zoom, with fixed request headers, servers alternating across rounds, and an optional node:http
// baseline in the same run so results read as ratios on a noisy machine, with each server's CPU per request (the figure
// a saturated client cannot blur); --client wrk drives the load from a separate process pinned to its own core, so
// req/s are server-bound too. See bench/README.md.
import { accessSync, constants, existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import { basename, dirname, join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import autocannon from 'autocannon'
import { StartError, findNginx, startBaseline, startNginx, startPgHttp, startTileCannon, stopAll } from './servers.js'
import { cpuSeconds, findTaskset, otherCpus, parseCpuList, pin } from './cpu.js'
import { findWrk, stopWrk, wrk } from './wrk.js'
import { mirror } from './mirror.js'
import { createProvider } from '../lib/sources/postgis/index.js'
import { UnreachableError, askTile, describeRefused, fill, findTiles } from './tiles.js'
import { markdown, svgChart } from './report.js'

const USAGE = `Usage: node bench/run.js [options]

  --data PATH          start tile-cannon on this file, folder or URL (repeatable); no --data and no --server: the demo
  --server NAME=URL    another server to compare, URL with {z}/{x}/{y} (repeatable)
  --pid NAME=PID       the process of a --server you started, or titiler=PID for --titiler's (uvicorn's parent): its
                       CPU (threads and child processes) is measured too
  --db-pid PID         a database's process (the postmaster): its CPU per request is reported beside each server's
  --config FILE        tile-cannon's config file (e.g. postgres.featureLimit)
  --set ID             which tile-cannon set(s) to bench (repeatable; default: all, filtered by --format)
  --format KIND        mbtiles|pmtiles|postgres|cog|demo: only sets of this kind
  --tilejson URL       bounds/center for finding tiles when only --server is given
  --zooms A-B          zoom levels, or a list like 3,5,7 (default: 10-14 within each set's range)
  --duration S         seconds per zoom and server (default 10; whole seconds with --client wrk)
  --connections N      concurrent connections (default 100 with autocannon, 50 with wrk)
  --warmup S           seconds of unrecorded load before each measurement (default 1)
  --client NAME        autocannon (default: in the bench's own process) or wrk (a separate process, where wrk is
                       installed, Debian: apt-get install wrk), pinned to --client-cpus
  --threads N          wrk threads (default 1)
  --client-cpus LIST   cores of the client (taskset list like 0 or 0,2-3; default 0 with wrk, none with autocannon;
                       "all": no pinning); with autocannon it pins the bench's own process
  --server-cpus LIST   cores of the servers the bench starts, every thread and child process (default: the cores
                       not in --client-cpus when that is set, otherwise none; "all": no pinning)
  --rounds N           rounds; the server order rotates every round (default 1)
  --cache on|off|on,off  tile-cannon's tile cache (default on); on,off benches both
  --tiles N            distinct tiles per zoom (default 500)
  --header "K: V"      request header (repeatable; default "Accept-Encoding: gzip, br")
  --baseline           add a bare node:http server answering the same tiles from memory
  --nginx              add the same tiles exploded to files under nginx (one worker), where nginx is installed
  --titiler URL        add a running titiler (its base URL), asked for the same files and rendering: COG sets
                       (/cog), MosaicJSON and STAC item sets (<set>.json among --data: /mosaicjson, /stac)
  --query Q            tile options for tile-cannon and titiler, written as in a URL (a + is a plus), e.g.
                       "expression=(b4-b3)/(b4+b3)&rescale=-1,1"; titiler gets them in its own spelling
  --pg-ceiling         for PostGIS sets: the same tile queries run directly with pg in a tight loop, no HTTP
                       (the database-bound ceiling; its row comes first), and a bare node:http server running
                       the same query per request (the HTTP + database floor)
  --markdown           print markdown tables (default: also printed when no --json)
  --json FILE          write every figure and the machine to FILE
  --chart FILE         write an SVG chart of req/s per zoom and server
  -h, --help`

export class UsageError extends Error {}

/** Tile options as written in a URL (`a=1&b=2`), a + kept as a plus (an expression's): [[name, value]]. */
export function parseQuery (text) {
  return text.replace(/^\?/, '').split('&').filter(Boolean).map((pair) => {
    const i = pair.indexOf('=')
    if (i < 1) throw new UsageError(`--query wants name=value pairs joined by &, got "${pair}"`)
    try {
      return [decodeURIComponent(pair.slice(0, i)), decodeURIComponent(pair.slice(i + 1))]
    } catch {
      throw new UsageError(`--query: a bad %-escape in "${pair}"`)
    }
  })
}

const queryString = (entries) => entries.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join('&')

export function parse (argv) {
  const { values } = parseArgs({
    args: argv,
    options: {
      data: { type: 'string', multiple: true, default: [] },
      server: { type: 'string', multiple: true, default: [] },
      pid: { type: 'string', multiple: true, default: [] },
      'db-pid': { type: 'string' },
      set: { type: 'string', multiple: true, default: [] },
      format: { type: 'string' },
      config: { type: 'string' },
      tilejson: { type: 'string' },
      zooms: { type: 'string' },
      duration: { type: 'string', default: '10' },
      connections: { type: 'string' },
      client: { type: 'string', default: 'autocannon' },
      threads: { type: 'string', default: '1' },
      'client-cpus': { type: 'string' },
      'server-cpus': { type: 'string' },
      warmup: { type: 'string', default: '1' },
      rounds: { type: 'string', default: '1' },
      cache: { type: 'string', default: 'on' },
      tiles: { type: 'string', default: '500' },
      header: { type: 'string', multiple: true, default: [] },
      baseline: { type: 'boolean', default: false },
      nginx: { type: 'boolean', default: false },
      'pg-ceiling': { type: 'boolean', default: false },
      titiler: { type: 'string' },
      query: { type: 'string' },
      markdown: { type: 'boolean', default: false },
      json: { type: 'string' },
      chart: { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
  })
  if (values.help) return { help: true }
  const num = (name, min) => {
    const n = Number(values[name])
    if (!Number.isFinite(n) || n < min) throw new UsageError(`--${name} must be a number ≥ ${min}`)
    return n
  }
  let zooms = null // null: per set, 10-14 within its zoom range
  if (values.zooms !== undefined) {
    zooms = /^\d+-\d+$/.test(values.zooms)
      ? (([a, b]) => Array.from({ length: b - a + 1 }, (_, i) => a + i))(values.zooms.split('-').map(Number))
      : values.zooms.split(',').map(Number)
    if (zooms.length === 0 || !zooms.every((z) => Number.isInteger(z) && z >= 0 && z <= 30)) throw new UsageError('--zooms must look like 10-14 or 3,5,7')
  }
  const servers = values.server.map((s) => {
    const i = s.indexOf('=')
    if (i < 1) throw new UsageError(`--server wants NAME=URL_TEMPLATE, got "${s}"`)
    const template = s.slice(i + 1)
    if (!['{z}', '{x}', '{y}'].every((p) => template.includes(p))) throw new UsageError(`--server ${s.slice(0, i)}: the URL template needs {z}, {x} and {y}`)
    if (!/^https?:\/\//.test(template)) throw new UsageError(`--server ${s.slice(0, i)}: the URL must start with http:// or https://`)
    return { name: s.slice(0, i), template }
  })
  let titilerPid = null
  for (const p of values.pid) {
    const [name, pid] = p.split('=')
    const server = servers.find((s) => s.name === name)
    const isPid = /^\d+$/.test(pid ?? '')
    if (server === undefined && name === 'titiler' && values.titiler !== undefined && isPid) {
      titilerPid = Number(pid)
      continue
    }
    if (server === undefined || !isPid) throw new UsageError(`--pid wants NAME=PID of a --server (or titiler=PID with --titiler), got "${p}"`)
    server.pid = Number(pid)
  }
  if (values['db-pid'] !== undefined && !/^\d+$/.test(values['db-pid'])) throw new UsageError('--db-pid wants a process id')
  const dbPid = values['db-pid'] === undefined ? null : Number(values['db-pid'])
  const cacheModes = values.cache.split(',')
  if (!cacheModes.every((m) => m === 'on' || m === 'off')) throw new UsageError('--cache takes on, off or on,off')
  const headers = {}
  for (const h of values.header.length ? values.header : ['Accept-Encoding: gzip, br']) {
    const i = h.indexOf(':')
    if (i < 1) throw new UsageError(`--header wants "Name: value", got "${h}"`)
    headers[h.slice(0, i).trim().toLowerCase()] = h.slice(i + 1).trim()
  }
  if (values.titiler !== undefined && !/^https?:\/\/[^/]+/.test(values.titiler)) throw new UsageError('--titiler wants the base URL of a running titiler, like http://127.0.0.1:8000')
  const query = values.query === undefined ? [] : parseQuery(values.query)
  // The baselines mirror answers by path (nginx serves files): an option in the query would be lost on them.
  if (query.length && (values.baseline || values.nginx)) throw new UsageError('--query does not apply to --baseline and --nginx: they answer by path')
  if (!['autocannon', 'wrk'].includes(values.client)) throw new UsageError(`--client takes autocannon or wrk, got "${values.client}"`)
  const isWrk = values.client === 'wrk'
  values.connections ??= isWrk ? '50' : '100'
  const duration = num('duration', isWrk ? 1 : 0.1)
  const warmup = num('warmup', 0)
  const threads = num('threads', 1)
  const connections = num('connections', 1)
  if (isWrk && (!Number.isInteger(duration) || !Number.isInteger(warmup))) throw new UsageError('--client wrk runs whole seconds: give --duration and --warmup as integers')
  if (!Number.isInteger(threads) || connections < threads) throw new UsageError('--threads must be a whole number, at most --connections')
  // Cores: a taskset list each, or null for no pinning. The client's default is core 0 with wrk; the servers' default
  // is every other core, whenever the client is pinned.
  const cores = os.cpus().length
  const cpuList = (name, value) => {
    if (value === undefined || value === 'all') return null
    let cpus
    try {
      cpus = parseCpuList(value)
    } catch (err) {
      throw new UsageError(`--${name}: ${err.message}`)
    }
    if (cpus.some((c) => c >= cores)) throw new UsageError(`--${name} ${value}: this machine has cores 0-${cores - 1}`)
    return cpus.join(',')
  }
  const clientCpus = cpuList('client-cpus', values['client-cpus'] ?? (isWrk && cores > 1 ? '0' : undefined))
  let serverCpus = cpuList('server-cpus', values['server-cpus'])
  if (values['server-cpus'] === undefined && clientCpus !== null) serverCpus = otherCpus(clientCpus, cores) || null
  return {
    ...values,
    zooms,
    servers,
    dbPid,
    titilerPid,
    query,
    cacheModes,
    headers,
    duration,
    connections,
    warmup,
    threads,
    clientCpus,
    serverCpus,
    rounds: num('rounds', 1),
    tiles: num('tiles', 1),
  }
}

/** Zooms 10-14 within the set's range; a set that stops below 10 gets its five highest zooms. */
function defaultZooms (tilejson) {
  const min = Number.isInteger(tilejson.minzoom) ? tilejson.minzoom : 0
  const max = Number.isInteger(tilejson.maxzoom) ? tilejson.maxzoom : 14
  const inRange = [10, 11, 12, 13, 14].filter((z) => z >= min && z <= max)
  if (inRange.length) return inRange
  const out = []
  for (let z = max; z >= min && out.length < 5; z--) out.unshift(z)
  return out
}

/**
 * One autocannon run over `paths` (cycled by a shared counter, so connections never move in lockstep): autocannon's
 * result, with `latencyMs` the latencies of the 2xx answers (as autocannon's), to the fraction of a ms.
 */
function load (origin, paths, { duration, connections, headers, timeout = 10 }) {
  let next = 0
  // autocannon's own latency histogram holds whole ms (a 0.3 ms answer is 0): its mean and p99 of a fast server are
  // wrong by orders of magnitude. Each answer's time, measured with hrtime, comes with its 'response' event.
  const latencyMs = []
  return new Promise((resolve, reject) => {
    const instance = autocannon({
      url: origin,
      connections,
      duration,
      headers,
      timeout, // s, as wrk's --timeout
      requests: [{ setupRequest: (req) => ({ ...req, path: paths[next++ % paths.length] }) }],
    }, (err, result) => (err ? reject(err) : resolve({ ...result, latencyMs })))
    instance.on('response', (client, status, bytes, ms) => { if (status >= 200 && status < 300) latencyMs.push(ms) })
    autocannon.track(instance, { renderProgressBar: false, renderResultsTable: false, renderLatencyTable: false })
  })
}

/** The mean and p99 of latencies in ms (null for none). */
function latencyFigures (latencyMs) {
  if (latencyMs.length === 0) return { latencyAvg: null, latencyP99: null }
  const sorted = Float64Array.from(latencyMs).sort()
  return { latencyAvg: sorted.reduce((a, b) => a + b, 0) / sorted.length, latencyP99: sorted[Math.ceil(sorted.length * 0.99) - 1] }
}

/**
 * One measurement with the chosen client, as the bench's figures: req/s, bytes/s, mean and p99 latency (ms), errors
 * (socket errors and timeouts: autocannon's errors count its timeouts already), non-2xx answers and the requests
 * answered.
 */
export async function measure (origin, paths, opts, duration, scriptFile) {
  if (opts.client === 'wrk') {
    const r = await wrk(origin, paths, { duration, connections: opts.connections, threads: opts.threads, headers: opts.headers, cpus: opts.clientCpus, scriptFile })
    return { rps: r.rps, throughput: r.throughput, latencyAvg: r.latencyAvg, latencyP99: r.latencyP99, errors: r.errors, non2xx: r.non2xx, requests: r.requests }
  }
  const r = await load(origin, paths, { ...opts, duration })
  return { rps: r.requests.average, throughput: r.throughput.average, ...latencyFigures(r.latencyMs), errors: r.errors, non2xx: r.non2xx, requests: r.requests.total }
}

/**
 * tile-cannon's tile options as titiler spells them: a terrain encoding is one of its `algorithm`s, `resampling` sets
 * both its kernels (reading from an overview and warping), lists (bidx, assets) are repeated keys; the other names
 * (expression, rescale, colormap_name, pixel_selection, nodata) are the same. Expressions need no translation: titiler
 * names a COG's bands b1, b2, … and a STAC item's stacked assets b1, b2, … in the order of `assets`, as tile-cannon does.
 */
export function titilerQuery (entries) {
  const out = new URLSearchParams()
  for (const [name, value] of entries) {
    if (name === 'encoding') out.append('algorithm', value === 'mapbox' ? 'terrainrgb' : value)
    else if (name === 'resampling') {
      out.append('resampling', value)
      out.append('reproject', value)
    } else if (name === 'bidx' || name === 'assets') {
      for (const v of value.split(',')) out.append(name, v)
    } else out.append(name, value)
  }
  return out
}

/** titiler's endpoint for a file: /cog for a GeoTIFF, /mosaicjson for a MosaicJSON, /stac for a STAC item. */
function titilerEndpoint (file) {
  if (!/\.json$/i.test(file)) return 'cog'
  let doc
  try {
    doc = JSON.parse(readFileSync(file, 'utf8'))
  } catch (err) {
    throw new UsageError(`--titiler: ${file}: ${err.message}`)
  }
  if (doc?.mosaicjson) return 'mosaicjson'
  if (doc?.type === 'Feature' && doc.stac_version) return 'stac'
  throw new UsageError(`--titiler: ${file} is neither a MosaicJSON nor a STAC item`)
}

/**
 * titiler's URLs for a local file and tile-cannon's options (`entries`, as parseQuery gives them): the tile template
 * (256 px PNG in WebMercatorQuad, as tile-cannon's default tile) and its TileJSON (where to find tiles without
 * tile-cannon).
 */
export function titilerUrls (base, file, entries = []) {
  const endpoint = titilerEndpoint(file)
  const query = String(titilerQuery([['url', file], ...entries]))
  const root = base.replace(/\/$/, '')
  return { tiles: `${root}/${endpoint}/tiles/WebMercatorQuad/{z}/{x}/{y}.png?${query}`, tilejson: `${root}/${endpoint}/WebMercatorQuad/tilejson.json?${query}` }
}

/** The file a set was opened from, among --data (a file, or one named after the set in a folder). */
function fileOfSet (id, data) {
  return data.filter((d) => existsSync(d)).map((d) => resolve(d))
    .flatMap((d) => (statSync(d).isDirectory() ? ['.tif', '.tiff', '.json'].map((e) => join(d, id + e)) : [d]))
    .find((f) => existsSync(f) && basename(f).replace(/\.(tiff?|json)$/i, '') === id)
}

/**
 * titiler's URL for the same file and the same rendering: `url=` the file's path, the options of --query, and where
 * they leave the rendering to the server, the bands and rescale tile-cannon applies by default (titiler's defaults
 * differ), so both servers do the same work.
 */
async function titilerTemplate (base, set, data, ours, query) {
  const file = fileOfSet(set.id, data)
  if (!file) throw new UsageError(`--titiler: cannot find the file of ${set.id} among --data (a COG, a MosaicJSON or a STAC item)`)
  const metaUrl = `${ours}/${encodeURIComponent(set.id)}/meta`
  // A COG set has /meta; a mosaic or STAC set may not (then titiler's defaults stand).
  const meta = set.kind === 'cog' ? await getJson(metaUrl) : await fetch(metaUrl).then((res) => (res.ok ? res.json() : null), () => null)
  const defaults = meta?.defaults
  const has = (...names) => query.some(([name]) => names.includes(name))
  const entries = [...query]
  // /meta numbers bands from 1, as bidx does; a terrain encoding is of the raw values, never rescaled.
  if (defaults?.bidx && !has('bidx', 'expression', 'assets')) entries.push(['bidx', defaults.bidx.join(',')])
  if (defaults?.rescale && !has('rescale', 'expression', 'encoding')) for (const [min, max] of defaults.rescale) entries.push(['rescale', `${min},${max}`])
  return titilerUrls(base, file, entries).tiles
}

/** The useful part of a fetch failure: ECONNREFUSED, bad port, … */
const why = (err) => err.cause?.code ?? err.cause?.message ?? err.message

/**
 * The database-bound ceiling: a source's own tile query, run with its pg pool in a tight loop (as many at once as the
 * pool has connections) for `duration` seconds. No HTTP, no cache: what tile-cannon with the cache off cannot beat.
 */
async function queryLoop (source, tiles, { duration }) {
  const latencies = []
  let bytes = 0
  let errors = 0
  let next = 0
  const end = Date.now() + duration * 1000
  const started = Date.now()
  await Promise.all(Array.from({ length: 10 }, async () => {
    while (Date.now() < end) {
      const [z, x, y] = tiles[next++ % tiles.length]
      const t = process.hrtime.bigint()
      try {
        const tile = await source.getTile(z, x, y)
        bytes += tile?.length ?? 0
      } catch {
        errors++
      }
      latencies.push(Number(process.hrtime.bigint() - t) / 1e6)
    }
  }))
  const seconds = (Date.now() - started) / 1000
  latencies.sort((a, b) => a - b)
  return {
    rps: latencies.length / seconds,
    throughput: bytes / seconds,
    latencyAvg: latencies.reduce((a, b) => a + b, 0) / latencies.length,
    latencyP99: latencies[Math.floor(latencies.length * 0.99)] ?? 0,
    errors,
    non2xx: 0,
    requests: latencies.length,
  }
}

const progress = (msg) => { if (process.stderr.isTTY) process.stderr.write(`\r\x1b[K${msg}`); else process.stderr.write(`${msg}\n`) }

async function getJson (url) {
  let res
  try {
    res = await fetch(url)
  } catch (err) {
    throw new UsageError(`cannot reach ${url}: ${why(err)}`)
  }
  if (!res.ok) throw new UsageError(`${url} answered ${res.status}`)
  return res.json()
}

/** The signal that stopped the run (SIGINT, SIGTERM), once one has: nothing more is measured nor reported. */
let interrupted = null
class Interrupted extends Error {}
const SIGNAL_EXIT = { SIGINT: 130, SIGTERM: 143 }

export async function run (opts) {
  const started = []
  const tmp = mkdtempSync(join(os.tmpdir(), 'tile-cannon-bench-'))
  let cleaning = null
  const cleanup = () => (cleaning ??= (async () => {
    stopWrk()
    await Promise.all([...started.map((s) => s.stop()), stopAll()])
    rmSync(tmp, { recursive: true, force: true })
  })())
  // Ctrl-C, or a kill of the bench's process alone: what it started (servers still starting too, nginx, wrk) is
  // stopped and its folder removed, as at the end of a run, then it exits 130 or 143. A second signal ends it at once.
  const onSignal = (signal) => {
    interrupted = signal
    process.stderr.write(`${process.stderr.isTTY ? '\r\x1b[K' : ''}bench: ${signal}: stopping the servers it started\n`)
    cleanup().finally(() => process.exit(SIGNAL_EXIT[signal]))
  }
  process.once('SIGINT', onSignal)
  process.once('SIGTERM', onSignal)
  try {
    const machine = { cpu: os.cpus()[0]?.model ?? 'unknown', cores: os.cpus().length, memoryGiB: Math.round(os.totalmem() / 2 ** 30), node: process.version, platform: `${os.type()} ${os.release()}`, loadBefore: os.loadavg() }
    if (opts.client === 'wrk' && !findWrk()) throw new UsageError('--client wrk: wrk is not installed (Debian: apt-get install wrk)')
    if ((opts.clientCpus !== null || opts.serverCpus !== null) && !findTaskset()) throw new UsageError('--client-cpus and --server-cpus need taskset (Debian: util-linux)')
    if (opts.client === 'wrk' && opts.clientCpus === null) progress('note: wrk is not pinned (one core, or --client-cpus all): client and servers share the cores')
    const cpus = opts.serverCpus
    // tile-cannon instances (one per cache mode) when there is data, or nothing else to bench.
    const instances = []
    const data = opts.data.length || opts.servers.length ? opts.data : []
    if (opts.data.length || opts.servers.length === 0) {
      for (const mode of opts.cacheModes) {
        progress(`starting tile-cannon (cache ${mode})…`)
        const tc = await startTileCannon(data, { cache: mode === 'on', cpus, flags: opts.config ? ['--config', opts.config] : [] })
        started.push(tc)
        instances.push({ name: opts.cacheModes.length > 1 ? `tile-cannon (cache ${mode})` : 'tile-cannon', base: tc.base })
      }
    }
    // The sets to bench: tile-cannon's (filtered), or one pseudo-set for external servers alone.
    let sets
    if (instances.length) {
      const catalog = await getJson(`${instances[0].base}/catalog`)
      sets = catalog.filter((s) => (!opts.format || s.kind === (opts.format === 'postgres' ? 'postgis' : opts.format)) && (opts.set.length === 0 || opts.set.includes(s.id)))
      if (sets.length === 0) throw new UsageError(`no tile-cannon set matches${opts.format ? ` --format ${opts.format}` : ''}${opts.set.length ? ` --set ${opts.set.join(',')}` : ''}`)
      // Another server is known by one URL template, so it can be compared on one set only.
      if (opts.servers.length && sets.length > 1) throw new UsageError(`--server compares one set, and ${sets.length} match: pick one with --set (${sets.map((s) => s.id).join(', ')})`)
      for (const s of sets) s.tilejsonData = await getJson(`${instances[0].base}/${encodeURIComponent(s.id)}.json`)
    } else {
      const tilejsonData = opts.tilejson ? await getJson(opts.tilejson) : {}
      sets = [{ id: null, name: opts.servers[0].name, tilejsonData }]
    }

    // tile-cannon's tile URLs: with --query's options, if any.
    const ourTemplate = (base, set) => `${base}/${encodeURIComponent(set.id)}/{z}/{x}/{y}${opts.query.length ? `?${queryString(opts.query)}` : ''}`
    // Tiles per set and zoom, found on the first server; every server gets the same list.
    for (const set of sets) {
      const probeTemplate = instances.length ? ourTemplate(instances[0].base, set) : opts.servers[0].template
      const probeName = instances.length ? instances[0].name : opts.servers[0].name
      Object.assign(set, { probeTemplate, probeName })
      set.tiles = {}
      set.zooms = opts.zooms ?? defaultZooms(set.tilejsonData)
      for (const z of set.zooms) {
        progress(`finding tiles of ${set.id ?? set.name} at z${z}…`)
        const refused = new Map()
        let found
        try {
          found = await findTiles(probeTemplate, set.tilejsonData, z, { want: opts.tiles, headers: opts.headers, refused })
        } catch (err) {
          if (err instanceof UnreachableError) throw new UsageError(`${probeName}: ${err.message}`)
          throw err
        }
        // Absent tiles (404, 204) are what a zoom without data answers; anything else is said, as the likelier reason.
        const odd = [...refused.keys()].some((k) => k !== '404' && k !== '204')
        if (found.length === 0) throw new UsageError(`${set.id ?? set.name} has no tiles at z${z} (within its bounds)${odd ? `: ${probeName} answered ${describeRefused(refused)}, none a tile` : ': pick other --zooms'}`)
        set.tiles[z] = found
      }
    }

    // Every server as { name, template(set) }.
    const servers = [
      ...instances.map((i) => ({ name: i.name, template: (set) => ourTemplate(i.base, set) })),
      ...opts.servers.map((s) => ({ name: s.name, template: () => s.template, pid: s.pid })),
    ]
    if (opts.titiler) {
      if (!instances.length) throw new UsageError('--titiler compares with tile-cannon on the same files: give them with --data')
      for (const set of sets) set.titiler = await titilerTemplate(opts.titiler, set, data, instances[0].base, opts.query)
      servers.push({ name: 'titiler', template: (set) => set.titiler, pid: opts.titilerPid })
    }
    // Every other server is asked one of the tiles before any is measured: one that is down, or answers something
    // else than a tile, is said now rather than benched at 0 req/s for every zoom.
    for (const set of sets) {
      const [z, x, y] = set.tiles[set.zooms[0]][0]
      for (const server of servers.slice(instances.length ? 1 : 0)) {
        if (server.template(set) === set.probeTemplate) continue
        const url = fill(server.template(set), z, x, y)
        let why
        try {
          why = await askTile(url, { headers: opts.headers })
        } catch (err) {
          if (err instanceof UnreachableError) throw new UsageError(`${server.name}: ${err.message}`)
          throw err
        }
        if (why !== null) throw new UsageError(`${server.name} answered ${why} to ${url}, where ${set.probeName} answered a tile`)
      }
    }
    // Baselines answer the first server's paths with its very answers, so the same path list works for them.
    const reference = servers[0]
    const origin = new URL(fill(reference.template(sets[0]), 0, 0, 0)).origin
    const urls = sets.flatMap((set) => Object.values(set.tiles).flat().map(([z, x, y]) => fill(reference.template(set), z, x, y)))
    if (opts.nginx) {
      if (!findNginx()) throw new UsageError('--nginx: nginx is not installed (Debian: apt-get install nginx-light)')
      progress('starting the nginx static-file baseline…')
      let answers
      try {
        answers = await mirror(urls, opts.headers)
      } catch (err) {
        throw new UsageError(`--nginx: cannot read the answers to mirror: ${err.message}`)
      }
      const nginx = await startNginx(answers, join(tmp, 'nginx'), { cpus })
      started.push(nginx)
      servers.unshift({ name: 'nginx static files', template: (set) => reference.template(set).replace(origin, nginx.base) })
    }
    if (opts.baseline) {
      const listFile = join(tmp, 'urls.json')
      writeFileSync(listFile, JSON.stringify({ urls, headers: opts.headers }))
      progress('starting the node:http baseline…')
      const base = await startBaseline(listFile, { cpus })
      started.push(base)
      servers.unshift({ name: 'node:http baseline', template: (set) => reference.template(set).replace(origin, base.base) })
    }

    if (opts['pg-ceiling']) {
      const database = opts.data.find((d) => /^postgres(ql)?:\/\//.test(d))
      if (!database) throw new UsageError('--pg-ceiling needs --data postgres://…')
      progress('discovering the database for the pg ceiling…')
      const provider = createProvider(database, { poolSize: 10 })
      started.push({ stop: () => provider.close() })
      const direct = new Map((await provider.discover()).map(({ id, source }) => [id, source]))
      progress('starting the node:http + pg floor…')
      const floor = await startPgHttp(database, { cpus })
      started.push(floor)
      servers.unshift({ name: 'node:http + pg', template: (set) => `${floor.base}/${encodeURIComponent(set.id)}/{z}/{x}/{y}` })
      servers.unshift({ name: 'pg direct (ceiling)', direct: (set) => direct.get(set.id) })
    }

    // Measure: for each round, set and zoom, every server in a rotated order. A server the bench started has a known
    // process, whose CPU time (with its threads and child processes) is read around each measurement.
    const originOf = (template) => { try { return new URL(fill(template, 0, 0, 0)).origin } catch { return null } }
    for (const s of servers) {
      const o = s.template ? originOf(s.template(sets[0])) : null
      s.pid ??= started.find((p) => p.base && p.base === o)?.child?.pid ?? null
    }
    // autocannon runs in this process: --client-cpus pins it now, after the servers have started with their own cores.
    if (opts.client === 'autocannon' && opts.clientCpus !== null) pin(process.pid, opts.clientCpus)
    const scriptFile = join(tmp, 'paths.lua')
    const results = {} // set → zoom → server → [runs]
    const total = opts.rounds * servers.length * sets.reduce((n, set) => n + set.zooms.length, 0)
    let done = 0
    for (let round = 0; round < opts.rounds; round++) {
      const order = servers.map((_, i) => servers[(i + round) % servers.length])
      for (const set of sets) {
        for (const z of set.zooms) {
          for (const server of order) {
            const key = set.id ?? set.name
            if (interrupted !== null) throw new Interrupted()
            if (server.direct) {
              const source = server.direct(set)
              if (!source) continue
              progress(`[${++done}/${total}] round ${round + 1} ${key} z${z} ${server.name}`)
              if (opts.warmup > 0) await queryLoop(source, set.tiles[z], { ...opts, duration: opts.warmup })
              const r = await queryLoop(source, set.tiles[z], opts)
              results[key] ??= {}
              results[key][z] ??= {}
              ;(results[key][z][server.name] ??= []).push(r)
              continue
            }
            const template = server.template(set)
            const origin = new URL(template.replace('{z}', 0).replace('{x}', 0).replace('{y}', 0)).origin
            const paths = set.tiles[z].map(([tz, x, y]) => fill(template, tz, x, y).slice(origin.length))
            progress(`[${++done}/${total}] round ${round + 1} ${set.id ?? set.name} z${z} ${server.name}`)
            if (opts.warmup > 0) await measure(origin, paths, opts, opts.warmup, scriptFile)
            const cpuBefore = server.pid ? cpuSeconds(server.pid) : null
            const dbBefore = opts.dbPid !== null ? cpuSeconds(opts.dbPid) : null
            const wallBefore = performance.now()
            const r = await measure(origin, paths, opts, opts.duration, scriptFile)
            const cpuAfter = cpuBefore === null ? null : cpuSeconds(server.pid)
            const dbCpu = dbBefore === null ? null : cpuSeconds(opts.dbPid) - dbBefore
            // The server's CPU over the run (every thread of its process and of its children, as nginx's worker):
            // in cores, rendering spread over the machine shows; per request answered, the cost of each.
            const cpu = cpuAfter === null ? null : cpuAfter - cpuBefore
            const cores = cpu === null ? null : cpu / ((performance.now() - wallBefore) / 1000)
            results[key] ??= {}
            results[key][z] ??= {}
            results[key][z][server.name] ??= []
            results[key][z][server.name].push({ ...r, cpu, cores, cpuPerRequest: cpu !== null && r.requests > 0 ? (cpu * 1e6) / r.requests : null, dbCpu })
          }
        }
      }
    }
    if (process.stderr.isTTY) process.stderr.write('\r\x1b[K')

    const mean = (runs, k) => runs.reduce((a, r) => a + r[k], 0) / runs.length
    const sum = (runs, k) => runs.reduce((a, r) => a + r[k], 0)
    const report = {
      date: new Date().toISOString(),
      machine: { ...machine, loadAfter: os.loadavg() },
      options: { zooms: opts.zooms ?? 'per set: 10-14 within its range', duration: opts.duration, connections: opts.connections, warmup: opts.warmup, rounds: opts.rounds, cache: opts.cacheModes, headers: opts.headers, tilesPerZoom: opts.tiles, data: opts.data, query: opts.query.length ? queryString(opts.query) : null, client: opts.client, threads: opts.client === 'wrk' ? opts.threads : null, clientCpus: opts.clientCpus, serverCpus: opts.serverCpus },
      servers: servers.map((s) => s.name),
      sets: sets.map((set) => {
        const key = set.id ?? set.name
        const c = set.tilejsonData.center
        return {
          id: set.id,
          location: `${key}${Array.isArray(c) ? ` (${c[0].toFixed(2)}, ${c[1].toFixed(2)})` : ''}`,
          ...(set.titiler ? { titiler: set.titiler } : {}), // the URL titiler was asked, options and defaults included
          rows: set.zooms.map((z) => ({
            zoom: z,
            tiles: set.tiles[z].length,
            results: Object.fromEntries(Object.entries(results[key][z]).map(([name, runs]) => [name, {
              rps: mean(runs, 'rps'), throughput: mean(runs, 'throughput'), latencyAvg: mean(runs, 'latencyAvg'), latencyP99: mean(runs, 'latencyP99'), errors: sum(runs, 'errors'), non2xx: sum(runs, 'non2xx'), requests: sum(runs, 'requests'),
              ...(runs.every((r) => Number.isFinite(r.cpu)) && sum(runs, 'requests') > 0
                ? { cores: mean(runs, 'cores'), cpuPerRequest: (sum(runs, 'cpu') * 1e6) / sum(runs, 'requests') } // µs, over every round
                : { cores: null, cpuPerRequest: null }),
              ...(runs.every((r) => Number.isFinite(r.dbCpu)) && sum(runs, 'requests') > 0
                ? { dbCpuPerRequest: (sum(runs, 'dbCpu') * 1e6) / sum(runs, 'requests') } // the database's µs per request
                : {}),
              runs,
            }])),
          })),
        }
      }),
    }
    // CPU per request across zooms: the mean of the zooms' figures, like req/s (null when a zoom has none). Its ratios
    // are to the first server with a CPU figure (the first, unless its process is unknown: pg direct, external servers).
    const meanCpu = (rows) => (rows.every((r) => Number.isFinite(r?.cpuPerRequest)) ? mean(rows, 'cpuPerRequest') : null)
    report.cpuReference = report.servers.find((server) => report.sets.some((set) => meanCpu(set.rows.map((r) => r.results[server])) !== null)) ?? report.servers[0]
    report.summary = report.sets.flatMap((set) => {
      const firstRps = mean(set.rows.map((r) => r.results[report.servers[0]]), 'rps')
      const firstCpuPerRequest = meanCpu(set.rows.map((r) => r.results[report.cpuReference]))
      return report.servers.map((server) => {
        const rows = set.rows.map((r) => r.results[server])
        // Requests that failed or were answered other than 2xx: the averages are not of tiles served.
        const failed = { errors: sum(rows, 'errors'), non2xx: sum(rows, 'non2xx') }
        return { location: set.location, server, rps: mean(rows, 'rps'), firstRps, throughput: mean(rows, 'throughput'), latencyAvg: mean(rows, 'latencyAvg'), cpuPerRequest: meanCpu(rows), firstCpuPerRequest, ...(failed.errors || failed.non2xx ? { failed } : {}) }
      })
    })
    return report
  } finally {
    if (interrupted === null) {
      process.off('SIGINT', onSignal)
      process.off('SIGTERM', onSignal)
    }
    await cleanup()
    // A signal during the run: its handler exits once everything is stopped; nothing is reported meanwhile.
    if (interrupted !== null) await new Promise(() => {})
  }
}

/** Why a report cannot be written at `file` (a folder that is not there, or not writable, a folder at the path), or null. */
function unwritable (file) {
  try {
    if (statSync(file).isDirectory()) return 'is a folder'
    accessSync(file, constants.W_OK)
    return null
  } catch (err) {
    if (err.code === 'EACCES') return 'cannot be written (EACCES)'
    if (err.code !== 'ENOENT') return `cannot be written (${err.code ?? err.message})`
  }
  const dir = dirname(resolve(file))
  try {
    if (!statSync(dir).isDirectory()) return `${dir} is not a folder`
    accessSync(dir, constants.W_OK)
    return null
  } catch (err) {
    return err.code === 'ENOENT' ? `its folder ${dir} does not exist` : `its folder ${dir} cannot be written (${err.code ?? err.message})`
  }
}

async function main () {
  let opts
  try {
    opts = parse(process.argv.slice(2))
  } catch (err) {
    console.error(`bench: ${err.message}\n\n${USAGE}`)
    process.exit(2)
  }
  if (opts.help) return console.log(USAGE)
  // A process that is not there would be measured as nothing, its CPU columns "–", silently.
  const running = (pid) => {
    try {
      process.kill(pid, 0)
      return true
    } catch (err) {
      return err.code === 'EPERM' // there, another user's
    }
  }
  const pids = [...opts.servers.filter((s) => s.pid !== undefined).map((s) => [`--pid ${s.name}=${s.pid}`, s.pid]), [`--pid titiler=${opts.titilerPid}`, opts.titilerPid], [`--db-pid ${opts.dbPid}`, opts.dbPid]]
  for (const [flag, pid] of pids) {
    if (pid !== null && !running(pid)) {
      console.error(`bench: ${flag}: no process ${pid} is running`)
      process.exit(2)
    }
  }
  // Where the report goes is checked before the run, not found wrong after it.
  for (const name of ['json', 'chart']) {
    const why = opts[name] === undefined ? null : unwritable(opts[name])
    if (why !== null) {
      console.error(`bench: --${name} ${opts[name]}: ${why}`)
      process.exit(2)
    }
  }
  try {
    const report = await run(opts)
    // A file that cannot be written after all (its folder removed during the run): the tables are printed anyway.
    const failedWrites = []
    const write = (name, text) => {
      try {
        writeFileSync(opts[name], text)
      } catch (err) {
        failedWrites.push(`bench: --${name} ${opts[name]}: cannot write it (${err.code ?? err.message})`)
      }
    }
    if (opts.json) write('json', JSON.stringify(report, null, 2))
    if (opts.chart) write('chart', svgChart(report))
    if (opts.markdown || !opts.json || failedWrites.length) console.log(markdown(report))
    console.log(`machine: ${report.machine.cpu}, ${report.machine.cores} cores, Node ${report.machine.node}, load ${report.machine.loadBefore.map((l) => l.toFixed(2)).join(' ')} → ${report.machine.loadAfter.map((l) => l.toFixed(2)).join(' ')}`)
    const o = report.options
    console.log(`client: ${o.client}${o.client === 'wrk' ? ` (${o.threads} thread${o.threads > 1 ? 's' : ''})` : ''}, ${o.connections} connections, ${o.clientCpus === null ? 'unpinned' : `on core(s) ${o.clientCpus}`}; servers started by the bench ${o.serverCpus === null ? 'unpinned' : `on core(s) ${o.serverCpus}`}`)
    for (const line of failedWrites) console.error(line)
    if (failedWrites.length) process.exitCode = 1
    // A server answering errors or non-2xx was not serving the tiles asked for: its figures do not count.
    const failed = [...new Set(report.summary.filter((s) => s.failed).map((s) => s.server))]
    if (failed.length) {
      console.error(`bench: some requests to ${failed.join(', ')} failed or were not answered 2xx (see Errors and Non-2xx): those figures are not comparable`)
      process.exitCode = 1
    }
  } catch (err) {
    // A server that refused its command line (a --data path that does not exist): its one line, exit 2 as a usage error.
    if (err instanceof StartError && err.exitCode === 2) {
      console.error(`bench: ${err.message}`)
      process.exit(2)
    }
    console.error(`bench: ${err instanceof UsageError || err instanceof StartError ? err.message : err.stack}`)
    process.exit(1)
  }
}

if (import.meta.url === `file://${process.argv[1]}`) main()

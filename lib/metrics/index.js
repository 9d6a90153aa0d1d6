// /metrics in Prometheus's text format (prom-client), as a plugin that owns its registry and timers. The request path
// only bumps plain numbers (lib/metrics/stats.js, the tile cache's and pipeline's counters); everything else is read
// from the parts that own it when Prometheus scrapes. Under a pm2 cluster each worker also writes its metrics to a
// folder the workers share, and a scrape of any worker answers for them all (see clusterSnapshots).
import { closeSync, existsSync, lstatSync, mkdirSync, openSync, readFileSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import fp from 'fastify-plugin'
import client from 'prom-client'
import { GET_HEAD } from '../../routes/http.js'
import { databaseName } from '../urls.js'
import { SMALL, documentCoding, varyOnCoding } from '../compression.js'
import { encode } from '../encoding.js'
import { RequestStats, histogramValues } from './stats.js'

// Route URL → the route kind in the requests' labels (few values, whatever the URL held).
const ROUTE_KINDS = {
  '/:set/:z/:x/:y': 'tile',
  '/data/:set/:z/:x/:y': 'tile',
  '/:set': 'tilejson',
  '/data/:set': 'tilejson',
  '/:set/meta': 'meta',
  '/list': 'list',
  '/catalog': 'list',
  '/styles.json': 'style',
  '/styles/:id/style.json': 'style',
  '/styles/:id/:file': 'style',
  '/styles/:id/sprite/:file': 'sprite',
  '/styles/:id.json': 'render',
  '/styles/:id/:z/:x/:y': 'render',
  '/styles/:id/512/:z/:x/:y': 'render',
  '/styles/:id/static/:view/:size': 'static',
  '/fonts.json': 'font',
  '/fonts/:stack/:file': 'font',
  '/': 'index',
  '/viewer/:set': 'viewer',
  '/viewer/styles/:id': 'viewer',
  '/viewer/assets/*': 'viewer',
  '/health': 'health',
  '/ready': 'ready', // a 503 here (not ready) is no failure of /health, which always answers 200
  '/metrics': 'metrics',
}

// Process and event-loop metrics: once per process (their event-loop monitor and GC observer are never stopped),
// merged with each app's own registry when scraped.
let processRegistry = null
function processMetrics () {
  if (processRegistry === null) {
    processRegistry = new client.Registry()
    client.collectDefaultMetrics({ register: processRegistry, eventLoopMonitoringPrecision: 10 })
  }
  return processRegistry
}

/** A metric whose values are read when scraped: `values()` → [{ labels, value }] (or a histogram's, with metricName). */
class ReadMetric {
  constructor ({ name, help, type, values, aggregator = 'sum' }) {
    Object.assign(this, { name, help, type, values, aggregator })
  }

  get () { return { name: this.name, help: this.help, type: this.type, values: this.values(), aggregator: this.aggregator } }
}

async function metricsPlugin (app, config) {
  const options = config.metrics ?? {}
  const stats = new RequestStats()
  const register = new client.Registry()
  const { catalog, tileCache, pipeline } = app
  const add = (metric) => register.registerMetric(new ReadMetric(metric))
  const one = (value, labels = {}) => [{ labels, value }]

  add({ name: 'tilecannon_requests_total', help: 'Requests answered, by route kind, set and status class.', type: 'counter', values: () => stats.requestValues() })
  add({ name: 'tilecannon_request_duration_seconds', help: 'Time to answer, by route kind and source kind.', type: 'histogram', values: () => stats.latencyValues('tilecannon_request_duration_seconds') })
  add({
    name: 'tilecannon_source_read_seconds',
    help: 'Time a source took to read or make a tile (PostGIS query, COG warp, render), by source kind.',
    type: 'histogram',
    values: () => histogramValues('tilecannon_source_read_seconds', pipeline.reads, (kind) => ({ kind })),
  })
  add({ name: 'tilecannon_cache_hits_total', help: 'Tile cache lookups that found the tile.', type: 'counter', values: () => one(tileCache.hits) })
  add({ name: 'tilecannon_cache_misses_total', help: 'Tile cache lookups that did not.', type: 'counter', values: () => one(tileCache.misses) })
  add({ name: 'tilecannon_inflight_joins_total', help: 'Requests that joined a read of the same tile already under way (de-duplicated).', type: 'counter', values: () => one(tileCache.joins) })
  add({ name: 'tilecannon_cache_entries', help: 'Tiles in the tile cache.', type: 'gauge', values: () => one(tileCache.stats.entries) })
  add({ name: 'tilecannon_cache_bytes', help: 'Bytes of the tile cache in use.', type: 'gauge', values: () => one(tileCache.stats.bytes) })
  add({ name: 'tilecannon_cache_max_bytes', help: 'Bytes the tile cache may hold.', type: 'gauge', values: () => one(tileCache.maxBytes) })
  add({ name: 'tilecannon_inflight_reads', help: 'Distinct tile reads under way.', type: 'gauge', values: () => one(tileCache.inflight.size) })
  add({
    name: 'tilecannon_sets',
    help: 'Tilesets by state.',
    type: 'gauge',
    values: () => [{ labels: { state: 'available' }, value: catalog.available().length }, { labels: { state: 'unavailable' }, value: catalog.unavailable().length }],
  })
  add({
    name: 'tilecannon_backend_clients',
    help: 'Connections of each database pool, by state (total, idle, waiting: requests queued for a connection).',
    type: 'gauge',
    values: () => {
      const values = []
      for (const [url, group] of catalog.providers) {
        const pool = group.pool
        if (pool === undefined) continue
        const backend = databaseName(url)
        values.push({ labels: { backend, state: 'total' }, value: pool.totalCount },
          { labels: { backend, state: 'idle' }, value: pool.idleCount },
          { labels: { backend, state: 'waiting' }, value: pool.waitingCount })
      }
      return values
    },
  })
  add({
    name: 'tilecannon_raster_queue',
    help: 'COG tiles waiting for a raster worker thread.',
    type: 'gauge',
    values: () => one(app.rasterPool.piscina?.queueSize ?? 0),
  })
  add({ name: 'tilecannon_raster_threads', help: 'Raster worker threads running.', type: 'gauge', values: () => one(app.rasterPool.piscina?.threads.length ?? 0) })
  add({ name: 'tilecannon_renderer_children', help: 'Renderer processes alive.', type: 'gauge', values: () => one(app.renderer?.stats?.children ?? 0) })
  add({ name: 'tilecannon_renderer_queue', help: 'Renders waiting or under way.', type: 'gauge', values: () => one(app.renderer?.stats?.pending ?? 0) })
  add({ name: 'tilecannon_renderer_restarts_total', help: 'Renderer processes restarted after they died.', type: 'counter', values: () => one(app.renderer?.stats?.restarts ?? 0) })
  add({ name: 'tilecannon_shed_total', help: 'Requests refused with 503 because the process was under pressure.', type: 'counter', values: () => one(app.shedding?.count ?? 0) })
  for (const metric of app.sharedCache?.metrics ?? []) add(metric)
  if (config.tileDir?.dir) { // lib/tile-dir: registered after this plugin, read when scraped
    add({ name: 'tilecannon_tile_dir_bytes', help: 'Bytes of tiles in the tile directory, as this process knows it.', type: 'gauge', values: () => one(app.tileDir?.state.bytes ?? 0) })
    add({ name: 'tilecannon_tile_dir_files', help: 'Tiles in the tile directory, as this process knows it.', type: 'gauge', values: () => one(app.tileDir?.state.files ?? 0) })
    add({
      name: 'tilecannon_tile_dir_tiles_total',
      help: 'Tiles of the tile directory by fate: written, dropped (queue full), failed, evicted (bound), expired (lifetime), and places purged.',
      type: 'counter',
      values: () => ['written', 'dropped', 'failed', 'evicted', 'expired', 'purged'].map((event) => ({ labels: { event }, value: app.tileDir?.state[event] ?? 0 })),
    })
  }

  app.decorate('requestStats', stats)
  const everything = () => client.Registry.merge([processMetrics(), register])
  app.decorate('metricsRegistry', register)

  // Every request Fastify answers (the tile front counts its own: routes/tiles.js).
  const styleIds = (id) => (app.styles?.get(id) !== undefined ? id : '')
  app.addHook('onResponse', (request, reply, done) => {
    const route = ROUTE_KINDS[request.routeOptions.url] ?? 'none'
    const params = request.params
    let set = ''
    let kind = ''
    if (params?.set !== undefined && route !== 'viewer') {
      const name = params.set
      const entry = catalog.get(name) ?? (name.endsWith('.json') ? catalog.get(name.slice(0, -5)) : undefined) // /:set.json
      if (entry !== undefined) ({ id: set, kind } = entry)
    } else if (params?.id !== undefined && route !== 'viewer') {
      set = styleIds(params.id)
      if (set !== '') kind = 'render'
    }
    stats.record(route, set, kind, reply.statusCode, reply.elapsedTime / 1000)
    done()
  })

  const cluster = options.cluster === true ? clusterSnapshots(options, everything, app.log) : null
  app.route({
    method: GET_HEAD,
    url: '/metrics',
    config: { pressureHandler: () => null }, // answered under pressure too: that is when it is wanted
    handler: async (request, reply) => {
      const answer = cluster === null ? everything() : await cluster.aggregate()
      reply.header('cache-control', 'no-store').type(answer.contentType)
      const text = Buffer.from(await answer.metrics())
      if (text.length < SMALL) return text
      // New at every scrape, so compressed per request, at the fastest level: scrapers ask every few seconds at most,
      // and the text (tens of KB with many sets) shrinks tenfold.
      varyOnCoding(reply)
      const coding = documentCoding(request.headers['accept-encoding'])
      if (coding === 'identity') return text
      reply.header('content-encoding', coding)
      return encode(text, coding, true)
    },
  })
  app.addHook('onClose', async () => { await cluster?.close() })
}

/**
 * Under a pm2 cluster (config.js sets `metrics.cluster` from pm2's environment, or `metrics.cluster: true`) each
 * worker writes its metrics as JSON to a folder the workers of this app share, every few seconds and at each scrape;
 * a scrape sums the files of the workers alive (prom-client's AggregatorRegistry.aggregate: counters and gauges summed,
 * what averages averaged). Why not prom-client's AggregatorRegistry.clusterMetrics: it asks the workers through Node's
 * cluster primary, and under pm2 the primary is pm2's own daemon, which does not answer it. The folder must be this
 * user's alone (other users could plant files in it, or links to write through): otherwise each worker answers alone.
 *
 * Counters and histograms must never go down (Prometheus reads a drop as a reset, and rate() then counts the other
 * workers' whole totals again), so what a worker counted outlives it: a gone worker's last counters and histograms are
 * folded into retired.json (its gauges just stop counting), which every scrape adds. A snapshot is folded once: under
 * a lock, and retired.json names each snapshot it holds (pid and time written), which a scrape then skips. A worker
 * alive whose snapshot is stale (blocked, or its pid reused) adds its counters only.
 */
function clusterSnapshots ({ dir, intervalMs = 5000 }, registry, log) {
  const own = join(dir, `${process.pid}.json`)
  const retiredFile = join(dir, 'retired.json')
  const lockFile = join(dir, 'retired.lock')
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 })
    for (const folder of [dirname(dir), dir]) {
      const info = lstatSync(folder)
      if (!info.isDirectory() || info.uid !== process.getuid() || (info.mode & 0o022) !== 0) throw new Error(`${folder} is not this user's own folder`)
    }
  } catch (err) {
    log.warn({ err: err.message }, 'metrics of the cluster cannot be shared: each worker answers /metrics for itself')
    return null
  }
  let closed = false
  async function write () {
    const json = JSON.stringify({ pid: process.pid, at: Date.now(), metrics: await registry().getMetricsAsJSON() })
    if (closed) return // retired meanwhile: a file written now would be counted again
    writeFileSync(own + '.part', json, { mode: 0o600 })
    renameSync(own + '.part', own) // whole files only: a reader never sees half of one
  }
  const writing = () => write().catch((err) => log.warn({ err: err.message }, 'writing cluster metrics failed'))
  const timer = setInterval(writing, intervalMs).unref()
  writing()

  const readRetired = () => {
    try {
      return JSON.parse(readFileSync(retiredFile, 'utf8'))
    } catch (err) {
      if (err.code !== 'ENOENT') log.warn({ err: err.message }, 'the retired workers\' metrics cannot be read')
      return { folded: {}, metrics: [] }
    }
  }
  const isFolded = (retired, snapshot) => retired.folded[snapshot.pid]?.at === snapshot.at

  /** Folds the snapshots of workers gone into retired.json, each once, and removes their files. */
  function retire (snapshots) {
    if (!lock()) return // another worker is folding: these stay counted from their files until the next scrape
    try {
      const retired = readRetired()
      const now = Date.now()
      const folding = snapshots.filter((snapshot) => !isFolded(retired, snapshot))
      if (folding.length > 0) {
        retired.metrics = sumWorkers([retired.metrics, ...folding.map((snapshot) => cumulative(snapshot.metrics))])
          .getMetricsAsArray().map((metric) => metric.get())
        for (const { pid, at } of folding) retired.folded[pid] = { at, foldedAt: now }
      }
      // A fold is remembered while a scrape may still have read that worker's file (read before retired.json)
      for (const [pid, { foldedAt }] of Object.entries(retired.folded)) {
        if (now - foldedAt > FOLDED_KEPT_MS && !existsSync(join(dir, `${pid}.json`))) delete retired.folded[pid]
      }
      writeFileSync(retiredFile + '.part', JSON.stringify(retired), { mode: 0o600 })
      renameSync(retiredFile + '.part', retiredFile)
      for (const { pid } of snapshots) rmSync(join(dir, `${pid}.json`), { force: true })
    } finally {
      rmSync(lockFile, { force: true })
    }
  }
  function lock () {
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        closeSync(openSync(lockFile, 'wx', 0o600))
        return true
      } catch (err) {
        if (err.code !== 'EEXIST') throw err
        // Held for milliseconds (all synchronous): one this old is left by a worker killed while folding
        const age = Date.now() - (statSync(lockFile, { throwIfNoEntry: false })?.mtimeMs ?? Date.now())
        if (age < LOCK_STALE_MS) return false
        rmSync(lockFile, { force: true })
      }
    }
    return false
  }

  return {
    async aggregate () {
      await write()
      const live = []
      const counted = [] // counters and histograms only: workers gone, or not heard from lately
      const gone = []
      const snapshots = []
      // The workers' files before retired.json: a file folded meanwhile is then named in it (and skipped), or gone
      for (const name of readdirSync(dir)) {
        if (!/^\d+\.json$/.test(name)) continue
        try {
          snapshots.push(JSON.parse(readFileSync(join(dir, name), 'utf8')))
        } catch {} // folded and removed since listed, or not JSON: nothing to count
      }
      const retired = readRetired()
      for (const snapshot of snapshots) {
        if (isFolded(retired, snapshot)) continue
        if (!alive(snapshot.pid)) {
          gone.push(snapshot)
          counted.push(cumulative(snapshot.metrics))
        } else if (Date.now() - snapshot.at < intervalMs * 3) live.push(snapshot.metrics)
        else counted.push(cumulative(snapshot.metrics))
      }
      if (gone.length > 0) {
        try {
          retire(gone)
        } catch (err) {
          log.warn({ err: err.message }, 'folding the metrics of workers gone failed')
        }
      }
      const aggregated = sumWorkers([...live, ...counted, retired.metrics])
      const workers = new client.Gauge({ name: 'tilecannon_cluster_workers', help: 'Workers whose metrics this answer sums.', registers: [aggregated] })
      workers.set(live.length)
      return aggregated
    },
    /** This worker leaves: its last figures are folded for the workers that stay (left to them when the lock is busy). */
    async close () {
      clearInterval(timer)
      try {
        const metrics = await registry().getMetricsAsJSON()
        closed = true
        const snapshot = { pid: process.pid, at: Date.now(), metrics }
        writeFileSync(own + '.part', JSON.stringify(snapshot), { mode: 0o600 })
        renameSync(own + '.part', own)
        retire([snapshot])
      } catch (err) {
        closed = true
        log.warn({ err: err.message }, 'folding this worker\'s metrics failed: the workers that stay fold them')
      }
    },
  }
}

const FOLDED_KEPT_MS = 60_000
const LOCK_STALE_MS = 10_000

// A float sum depends on its order: a worker leaving moves its figures from the live sum ((a + b) + R) into
// retired.json's (b + (R + a)), which can differ in the last bit, and a seconds counter that went down by 1e-18 is a
// reset to Prometheus (seen in CI). So counters in seconds and histograms' sums are added as whole microseconds,
// exactly (integers below 2^53: 285 years of seconds), and any order gives the same total.
const MICROS = 1e6
const fractional = (metric, sample) =>
  metric.type === 'histogram' ? sample.metricName?.endsWith('_sum') === true : metric.type === 'counter' && metric.name.includes('_seconds')
const rescaled = (metrics, scale) => metrics.map((metric) => metric.type !== 'counter' && metric.type !== 'histogram' ? metric
  : { ...metric, values: metric.values.map((sample) => fractional(metric, sample) ? { ...sample, value: scale(sample.value) } : sample) })

/**
 * The workers' metrics (arrays of prom-client's metric JSON) summed as prom-client's AggregatorRegistry.aggregate
 * does, counters and histograms exactly (above). Returns the registry.
 */
export function sumWorkers (lists) {
  const exact = client.AggregatorRegistry.aggregate(lists.map((metrics) => rescaled(metrics, (value) => Math.round(value * MICROS))))
  return client.AggregatorRegistry.aggregate([rescaled(exact.getMetricsAsArray().map((metric) => metric.get()), (value) => value / MICROS)])
}

/** What a worker counted that must outlive it: its counters and histograms (gauges say how things are, not were). */
function cumulative (metrics) {
  return metrics.filter((metric) => metric.type === 'counter' || metric.type === 'histogram')
}

/** Whether a process of that pid runs (EPERM: it does, another user's). */
function alive (pid) {
  if (pid === process.pid) return true
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return err.code === 'EPERM'
  }
}

export default fp(metricsPlugin, { name: 'tile-cannon-metrics', fastify: '5.x' })

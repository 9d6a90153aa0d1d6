#!/usr/bin/env node
// The soak: minutes of autocannon load on one `node server.js` serving a temp folder of generated sets while sets are
// replaced, removed and added on a schedule (as deploys do: a new file written beside, then renamed over). Every
// --interval seconds it prints what clients saw (errors, unexpected non-2xx, p99) and the server's RSS; at the end a
// summary, which passes when no request failed unexpectedly, RSS ended at most 10 % above where it settled after
// warm-up, and the server exited 0 on SIGTERM. Not part of `npm test` (it runs for minutes). See bench/README.md.
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, unlinkSync } from 'node:fs'
import os from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { gzipSync } from 'node:zlib'
import { accountedLoad } from './load.js'
import { freePort } from './servers.js'
import { makeMvt, pyramid, writeMbtiles, writePmtiles } from '../test/helpers/data.js'

const USAGE = `Usage: node bench/soak.js [options]

  --duration S      seconds of load (default 600)
  --connections N   connections of the steady load over the sets that stay (default 4); each set that comes and
                    goes has one connection of its own besides
  --interval S      seconds between report lines (default 10)
  --every S         seconds between changes to the sets (default 5)
  --warmup S        seconds before RSS is taken as settled (default 150: after V8's first major collections)
  -h, --help`

const SERVER = join(dirname(fileURLToPath(import.meta.url)), '..', 'server.js')
const WATCH_DEBOUNCE_MS = 300 // the server's default (lib/config.js)
// How long after a file is added or removed the server may still answer as before: two debounces (the watcher
// coalesces events, then waits for the file to stop changing; lib/catalog/watch.js) and a margin for a busy machine.
const TRANSITION_MS = 2 * WATCH_DEBOUNCE_MS + 1000
const COORDS = pyramid(0, 6, 16) // 853 tiles a set, z0-6
const ABSENT = [[6, 40, 40], [5, 30, 1]] // inside the sets' zoom range, with no tile: 204 answers
const VERSIONS = 4 // file versions per changing set, written once, copied in turn

function parse (argv) {
  const { values } = parseArgs({
    args: argv,
    options: {
      duration: { type: 'string', default: '600' },
      connections: { type: 'string', default: '4' },
      interval: { type: 'string', default: '10' },
      every: { type: 'string', default: '5' },
      warmup: { type: 'string', default: '150' },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
  })
  if (values.help) return null
  const num = (name, min) => {
    const n = Number(values[name])
    if (!Number.isFinite(n) || n < min) throw new Error(`--${name} must be a number ≥ ${min}`)
    return n
  }
  const o = { duration: num('duration', 10), connections: num('connections', 1), interval: num('interval', 1), every: num('every', 1), warmup: num('warmup', 0) }
  if (o.warmup >= o.duration) throw new Error('--warmup must be shorter than --duration')
  return o
}

// The sets. `steady` are served throughout (two of them replaced in place on the schedule): every answer on them must
// be 2xx. `churn` sets are removed and added back: 404 (unknown set) is expected while one is absent.
const SETS = {
  steady: [
    { id: 'base-mb', kind: 'mbtiles' },
    { id: 'base-pm', kind: 'pmtiles' },
    { id: 'swap-mb', kind: 'mbtiles', replaced: true },
    { id: 'swap-pm', kind: 'pmtiles', replaced: true },
  ],
  churn: [
    { id: 'churn-mb', kind: 'mbtiles', presentAtStart: true },
    { id: 'churn-pm', kind: 'pmtiles', presentAtStart: false },
  ],
}
const fileName = (set) => `${set.id}.${set.kind}`

function writeSet (path, set, version) {
  const tiles = COORDS.map(([z, x, y]) => ({ z, x, y, data: gzipSync(makeMvt(z, x, y, { set: set.id, version })) }))
  if (set.kind === 'mbtiles') writeMbtiles(path, { tiles, metadata: { format: 'pbf', minzoom: '0', maxzoom: '6' } })
  else writePmtiles(path, { tiles })
}

/** VmRSS of a process in MiB (Linux /proc), or null once it is gone. */
function rssMiB (pid) {
  try {
    const kb = Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1])
    return Number.isFinite(kb) ? kb / 1024 : null
  } catch {
    return null
  }
}

/** The p-th percentile of latencies in ms, a Float64Array (sorted in place, numerically). */
function percentile (values, p) {
  if (values.length === 0) return NaN
  values.sort()
  return values[Math.min(values.length - 1, Math.floor((p / 100) * values.length))]
}

const median = (xs) => (xs.length === 0 ? NaN : [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)])
const load = () => os.loadavg().map((l) => l.toFixed(2)).join(', ')
const fmt = (n) => Math.round(n).toLocaleString('en')
const json = (o) => JSON.stringify(o)

async function main () {
  const opts = parse(process.argv.slice(2))
  if (opts === null) return console.log(USAGE)
  const loadBefore = load()
  const root = mkdtempSync(join(os.tmpdir(), 'tile-cannon-soak-'))
  const data = join(root, 'tiles')
  const staging = join(root, 'staging') // versions of the changing sets, outside the served folder
  for (const dir of [data, staging]) mkdirSync(dir)
  for (const set of SETS.steady) writeSet(join(data, fileName(set)), set, 0)
  for (const set of [...SETS.steady.filter((s) => s.replaced), ...SETS.churn]) {
    for (let v = 1; v <= VERSIONS; v++) writeSet(join(staging, `${set.id}.v${v}`), set, v)
    if (set.presentAtStart) copyFileSync(join(staging, `${set.id}.v1`), join(data, fileName(set)))
  }

  const port = await freePort()
  const base = `http://127.0.0.1:${port}`
  const server = spawn(process.execPath, [SERVER, '--port', String(port), '--host', '127.0.0.1', '--log-level', 'warn', data], { stdio: ['ignore', 'inherit', 'inherit'] })
  let serverExit = null
  const exited = once(server, 'exit').then(([code, signal]) => { serverExit = { code, signal, at: Date.now() } })
  const cleanup = () => { if (serverExit === null) server.kill('SIGKILL'); rmSync(root, { recursive: true, force: true }) }
  process.once('SIGINT', () => { cleanup(); process.exit(130) })
  for (let i = 0; ; i++) {
    try { if ((await fetch(`${base}/health`)).status === 200) break } catch {}
    if (serverExit !== null || i > 300) { cleanup(); throw new Error('the server did not start') }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }

  // Per interval: answers, latencies, errors, non-2xx by kind.
  let slot = null
  const newSlot = () => ({ answered: 0, latencies: [], errors: {}, unexpected: {}, expected404: 0, servedAbsent: 0, events: [] })
  slot = newSlot()
  const totals = { answered: 0, unexpected: {}, expected404: 0, servedAbsent: 0, latencies: [], p99s: [], errors: {} }
  const count = (o, k) => { o[k] = (o[k] ?? 0) + 1 }
  const onError = (code) => { count(slot.errors, code); count(totals.errors, code) }
  const record = (latencyMs) => {
    slot.answered++
    totals.answered++
    slot.latencies.push(latencyMs)
  }
  const unexpected = (status) => { count(slot.unexpected, status); count(totals.unexpected, status) }

  const paths = (sets) => sets.flatMap((set) => [...COORDS, ...ABSENT].map(([z, x, y]) => `/${set.id}/${z}/${x}/${y}`))
  const options = (sets, connections) => {
    const list = paths(sets)
    let next = 0
    return {
      url: base,
      connections,
      duration: opts.duration,
      headers: { 'accept-encoding': 'gzip' },
      requests: [{ setupRequest: (req) => ({ ...req, path: list[next++ % list.length] }) }],
    }
  }
  // The steady sets: anything but 2xx is unexpected.
  const steady = accountedLoad(options(SETS.steady, opts.connections), {
    onAnswer (c, status, headers, at, latencyMs) {
      record(latencyMs)
      if (status < 200 || status >= 300) unexpected(status)
    },
    onError,
  })
  // Each churn set on a connection of its own, so every answer is known to be about that set.
  const history = new Map(SETS.churn.map((set) => [set.id, [{ at: 0, present: set.presentAtStart }]]))
  const churn = SETS.churn.map((set) => accountedLoad(options([set], 1), {
    onAnswer (c, status, headers, at, latencyMs) {
      record(latencyMs)
      const events = history.get(set.id)
      const last = events[events.length - 1]
      const settled = at - last.at >= TRANSITION_MS
      if (status === 404) {
        // Expected when the set is absent, or while the server may not have seen it come back yet.
        if (settled && last.present) unexpected(404)
        else { slot.expected404++; totals.expected404++ }
      } else if (status >= 200 && status < 300) {
        if (settled && !last.present) { slot.servedAbsent++; totals.servedAbsent++ } // still served after its removal
      } else {
        unexpected(status)
      }
    },
    onError,
  }))

  // The schedule: every --every seconds, the next of: replace swap-mb, add or remove churn-mb, replace swap-pm, add or
  // remove churn-pm. Files are written beside (a name the server does not serve) and renamed into place.
  const changing = [SETS.steady[2], SETS.churn[0], SETS.steady[3], SETS.churn[1]]
  const versionOf = new Map()
  let tick = 0
  const change = () => {
    const set = changing[tick++ % changing.length]
    const target = join(data, fileName(set))
    const v = ((versionOf.get(set.id) ?? 1) % VERSIONS) + 1
    if (set.replaced) {
      copyFileSync(join(staging, `${set.id}.v${v}`), `${target}.tmp`)
      renameSync(`${target}.tmp`, target)
      versionOf.set(set.id, v)
      slot.events.push(`replaced ${set.id}`)
    } else {
      const events = history.get(set.id)
      if (events[events.length - 1].present) {
        unlinkSync(target)
        events.push({ at: Date.now(), present: false })
        slot.events.push(`removed ${set.id}`)
      } else {
        copyFileSync(join(staging, `${set.id}.v${v}`), `${target}.tmp`)
        renameSync(`${target}.tmp`, target)
        versionOf.set(set.id, v)
        events.push({ at: Date.now(), present: true })
        slot.events.push(`added ${set.id}`)
      }
    }
  }
  const started = Date.now()
  const changer = setInterval(change, opts.every * 1000)
  const rss = [] // { t, mib }
  console.log(`soak: ${opts.duration} s against node server.js (pid ${server.pid}) on ${base}, ${opts.connections} connections over ` +
    `${SETS.steady.map((s) => s.id).join(', ')} and one each over ${SETS.churn.map((s) => s.id).join(', ')}; a set change every ${opts.every} s; ` +
    `${os.cpus().length} cores, load ${loadBefore}`)
  const reporter = setInterval(async () => {
    const t = Math.round((Date.now() - started) / 1000)
    const mib = rssMiB(server.pid)
    const current = slot
    slot = newSlot()
    // The tile cache as /health reports it: byte-bounded, it is the part of RSS that grows until it is full.
    const cache = await fetch(`${base}/health`).then((r) => r.json()).then((h) => h.cache).catch(() => null)
    rss.push({ t, mib })
    const p99 = percentile(Float64Array.from(current.latencies), 99)
    totals.p99s.push(p99)
    const sample = current.latencies.length > 2000 ? current.latencies.filter((_, i) => i % Math.ceil(current.latencies.length / 2000) === 0) : current.latencies
    totals.latencies.push(...sample) // a thinned sample per interval, for an overall p99 without keeping every figure
    console.log(`[${String(t).padStart(4)} s] answered ${fmt(current.answered)} (${fmt(current.answered / opts.interval)}/s)  errors ${json(current.errors)}  ` +
      `unexpected non-2xx ${json(current.unexpected)}  expected 404 ${fmt(current.expected404)}  served after removal ${current.servedAbsent}  ` +
      `p99 ${p99.toFixed(1)} ms  RSS ${mib?.toFixed(1)} MiB  cache ${cache ? `${fmt(cache.entries)} tiles ${(cache.bytes / 2 ** 20).toFixed(1)} MiB` : '?'}  load ${load()}${current.events.length ? `  (${current.events.join(', ')})` : ''}`)
  }, opts.interval * 1000)

  const [steadyRun, ...churnRuns] = await Promise.all([steady.done, ...churn.map((c) => c.done)])
  clearInterval(changer)
  clearInterval(reporter)
  const rssEnd = rssMiB(server.pid)
  const signalledAt = Date.now()
  server.kill('SIGTERM')
  await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 15_000))])
  const loadAfter = load()
  cleanup()

  // RSS: the median of the samples in a window just after warm-up, against the median of the last window. V8 lets its
  // heap grow between major collections (a sawtooth of a minute or two here): windows of two minutes and a median,
  // so no single sample on a peak or in a trough decides.
  const windowS = Math.round(Math.min(120, (opts.duration - opts.warmup) / 3))
  const settledSamples = rss.filter((s) => s.t >= opts.warmup && s.t < opts.warmup + windowS).map((s) => s.mib)
  const endSamples = rss.filter((s) => s.t > opts.duration - windowS).map((s) => s.mib)
  if (endSamples.length === 0 && rssEnd !== null) endSamples.push(rssEnd)
  const rssSettled = median(settledSamples)
  const rssFinal = median(endSamples)
  const growth = (rssFinal - rssSettled) / rssSettled
  const lost = steadyRun.failures.lost + churnRuns.reduce((a, r) => a + r.failures.lost, 0)
  const stuck = steadyRun.failures.stuck + churnRuns.reduce((a, r) => a + r.failures.stuck, 0)
  const errorCount = Object.values(totals.errors).reduce((a, n) => a + n, 0)
  const unexpectedCount = Object.values(totals.unexpected).reduce((a, n) => a + n, 0)
  const rssOk = growth <= 0.10 // a leak shows as growth; ending lower than it settled is no failure
  const requestsOk = errorCount + unexpectedCount + lost + stuck + totals.servedAbsent === 0
  const exitOk = serverExit?.code === 0
  console.log(`
soak summary (${opts.duration} s, ${opts.connections} + ${SETS.churn.length} connections, ${tick} set changes: ${SETS.steady.filter((s) => s.replaced).length} sets replaced and ${SETS.churn.length} removed and added back in turn)
  machine: ${os.cpus().length} cores (${os.cpus()[0]?.model}), shared; load average ${loadBefore} before, ${loadAfter} after
  answered: ${fmt(totals.answered)} (${fmt(totals.answered / opts.duration)}/s), of which expected 404 (sets absent) ${fmt(totals.expected404)}
  errors: ${json(totals.errors)}; lost ${lost}; stuck ${stuck}
  unexpected non-2xx: ${json(totals.unexpected)}; answered 2xx for a removed set: ${totals.servedAbsent}
  p99 latency: ${percentile(Float64Array.from(totals.latencies), 99).toFixed(1)} ms overall (sampled), per interval ${Math.min(...totals.p99s).toFixed(1)}-${Math.max(...totals.p99s).toFixed(1)} ms
  RSS: ${rssSettled.toFixed(1)} MiB settled after warm-up (median of ${opts.warmup}-${opts.warmup + windowS} s), ${rssFinal.toFixed(1)} MiB at the end (median of the last ${windowS} s), ` +
    `${growth >= 0 ? '+' : ''}${(growth * 100).toFixed(1)} %; min ${Math.min(...rss.map((s) => s.mib)).toFixed(1)}, max ${Math.max(...rss.map((s) => s.mib)).toFixed(1)} MiB
  server on SIGTERM: ${serverExit ? `exit ${serverExit.code ?? serverExit.signal} after ${serverExit.at - signalledAt} ms` : 'still running after 15 s (killed)'}
  ${requestsOk ? 'PASS' : 'FAIL'} requests, ${rssOk ? 'PASS' : 'FAIL'} RSS at most 10 % above where it settled, ${exitOk ? 'PASS' : 'FAIL'} clean exit`)
  process.exitCode = requestsOk && rssOk && exitOk ? 0 : 1
}

main().catch((err) => {
  console.error(`soak: ${err.message}`)
  process.exitCode = 2
})

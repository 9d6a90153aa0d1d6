// /metrics under a cluster (metrics.cluster: true, as under pm2): what the workers counted, summed by any worker's
// scrape, never goes down when a worker leaves (Prometheus would read it as a counter reset).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { ROOT } from './helpers/app.js'
import { tempDir, vectorTiles, writeMbtiles, pyramid } from './helpers/data.js'
import { freePort } from '../bench/servers.js'

const SERVER = join(ROOT, 'server.js')
const INTERVAL_MS = 200 // how often each worker writes its metrics for the others' scrapes
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** The samples of counters and histograms in Prometheus text: `name{labels}` → value. */
function cumulativeSamples (text) {
  const cumulative = new Set()
  const samples = new Map()
  for (const line of text.split('\n')) {
    const type = /^# TYPE (\S+) (counter|histogram)$/.exec(line)
    if (type !== null) cumulative.add(type[1])
    if (line === '' || line.startsWith('#')) continue
    const series = line.slice(0, line.lastIndexOf(' '))
    const name = series.split('{')[0]
    if (cumulative.has(name) || cumulative.has(name.replace(/_(bucket|sum|count)$/, ''))) samples.set(series, Number(line.slice(series.length + 1)))
  }
  return samples
}

const tiles = (text) => Number(/^tilecannon_requests_total\{route="tile",set="roads",status="2xx"\} (\d+)$/m.exec(text)?.[1] ?? 0)
const workersCounted = (text) => Number(/^tilecannon_cluster_workers (\d+)$/m.exec(text)?.[1])

async function startWorkers (t, count) {
  const dir = tempDir(t)
  writeMbtiles(join(dir, 'roads.mbtiles'), { tiles: vectorTiles(pyramid(0, 2)) })
  const configFile = join(tempDir(t), 'tc.json')
  writeFileSync(configFile, JSON.stringify({ metrics: { cluster: true, dir: join(tempDir(t), 'metrics'), intervalMs: INTERVAL_MS }, watch: false, paths: [dir] }))
  const workers = []
  for (let i = 0; i < count; i++) {
    const port = await freePort()
    const child = spawn(process.execPath, [SERVER, '--config', configFile, '--host', '127.0.0.1', '--port', String(port), '--log-format', 'json'], { stdio: 'ignore' })
    t.after(() => child.kill('SIGKILL'))
    workers.push({ child, base: `http://127.0.0.1:${port}` })
  }
  for (const { base } of workers) {
    for (let i = 0; i < 100; i++) {
      try { if ((await fetch(`${base}/health`)).ok) break } catch {}
      await sleep(100)
    }
  }
  return workers
}

const scrape = async (worker) => (await fetch(`${worker.base}/metrics`)).text()

/** Scrapes `worker` until every worker's figures are in: `expected` tiles from `workers` workers. */
async function settled (worker, expected, workers) {
  const deadline = Date.now() + 5000
  let text
  do {
    await sleep(INTERVAL_MS / 2)
    text = await scrape(worker)
  } while ((tiles(text) !== expected || workersCounted(text) !== workers) && Date.now() < deadline)
  assert.equal(workersCounted(text), workers)
  assert.equal(tiles(text), expected)
  return text
}

function assertNoCounterWentDown (before, after, why) {
  const was = cumulativeSamples(before)
  const is = cumulativeSamples(after)
  assert.ok(was.size > 50, 'counters and histograms to compare')
  const down = [...was].filter(([series, value]) => !(is.get(series) >= value)).map(([series, value]) => `${series}: ${value} → ${is.get(series)}`)
  assert.deepEqual(down, [], why)
}

test('under a cluster, no counter or histogram of a scrape goes down when a worker dies or stops, and none is counted twice', async (t) => {
  const [survivor, stopped, killed] = await startWorkers(t, 3)
  for (let i = 0; i < 2; i++) await fetch(`${survivor.base}/roads/0/0/0`)
  for (let i = 0; i < 3; i++) await fetch(`${stopped.base}/roads/0/0/0`)
  for (let i = 0; i < 4; i++) await fetch(`${killed.base}/roads/0/0/0`)
  const before = await settled(survivor, 9, 3)

  // Killed (a crash): the workers that stay fold its last figures, once however many of them notice, at once.
  killed.child.kill('SIGKILL')
  await once(killed.child, 'exit')
  const scrapes = await Promise.all([survivor, stopped, survivor, stopped].map(scrape))
  for (const text of scrapes) {
    assert.equal(workersCounted(text), 2, 'its gauges no longer count')
    assert.equal(tiles(text), 9, 'the requests it answered still do, once')
    assertNoCounterWentDown(before, text, 'a worker killed')
  }

  // Stopped (a pm2 reload or restart): it leaves its last figures behind as it closes.
  const beforeStop = await settled(survivor, 9, 2)
  stopped.child.kill('SIGTERM')
  await once(stopped.child, 'exit')
  const afterStop = await scrape(survivor)
  assert.equal(workersCounted(afterStop), 1)
  assert.equal(tiles(afterStop), 9)
  assertNoCounterWentDown(beforeStop, afterStop, 'a worker stopped')
  await sleep(INTERVAL_MS * 4) // the survivor has written its figures again; the others' files are folded and gone
  const later = await scrape(survivor)
  assert.equal(tiles(later), 9)
  assertNoCounterWentDown(afterStop, later, 'later scrapes')
})

test('a worker\'s seconds moving from the live sum into the retired one keep the total exactly: no 1-ulp drop', async () => {
  // The regrouping a worker's leaving makes: (a + b) + R while both run, b + (R + a) after. In floating point
  // (0.01 + 0.01) + 0.06 is 0.08 and 0.01 + (0.06 + 0.01) is 0.07999999999999999: a counter reset to Prometheus.
  const { sumWorkers } = await import('../lib/metrics/index.js')
  const worker = (seconds, requests) => [
    { name: 'x_cpu_seconds_total', help: 'h', type: 'counter', aggregator: 'sum', values: [{ labels: {}, value: seconds }] },
    { name: 'x_seconds', help: 'h', type: 'histogram', aggregator: 'sum', values: [{ labels: { le: '+Inf' }, value: requests, metricName: 'x_seconds_bucket' }, { labels: {}, value: seconds, metricName: 'x_seconds_sum' }, { labels: {}, value: requests, metricName: 'x_seconds_count' }] },
  ]
  const values = async (registry) => Object.fromEntries((await registry.getMetricsAsJSON()).flatMap((m) => m.values.map((v) => [v.metricName ?? m.name, v.value])))
  const [leaving, staying, retired] = [worker(0.01, 3), worker(0.01, 5), worker(0.06, 7)]
  const before = await values(sumWorkers([leaving, staying, retired]))
  const folded = sumWorkers([retired, leaving]).getMetricsAsArray().map((metric) => metric.get())
  const after = await values(sumWorkers([staying, folded]))
  assert.deepEqual(after, before)
  assert.deepEqual(before, { x_cpu_seconds_total: 0.08, x_seconds_bucket: 15, x_seconds_sum: 0.08, x_seconds_count: 15 })
})

// Request counts and latency buckets, kept as plain numbers on the request path and turned into Prometheus metrics
// only when /metrics is scraped (lib/metrics/index.js).
//
// Why not prom-client's Counter.inc and Histogram.observe per request: measured on this machine, a labelled inc costs
// ~220 ns and an observe on a bound child ~400 ns (each hashes its labels), ~3 % of a warm tile's ~20 µs of CPU.
// Here: lookups in nested Maps by strings that already exist (see RequestStats), a count and a bucket search.

/** Upper bounds of the latency buckets, in seconds: warm tiles answer in tens of µs, renders in tens of ms. */
export const LATENCY_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

/** Counts of one latency series: one per bucket and +Inf, their sum and count. */
export class Latencies {
  constructor () {
    this.buckets = new Float64Array(LATENCY_BUCKETS.length + 1)
    this.sum = 0
    this.count = 0
  }

  observe (seconds) {
    let i = 0
    while (i < LATENCY_BUCKETS.length && seconds > LATENCY_BUCKETS[i]) i++
    this.buckets[i]++
    this.sum += seconds
    this.count++
  }
}

export class RequestStats {
  constructor () {
    // Nested maps rather than one keyed by the labels joined: a joined key is a new string per request, flattened and
    // hashed each time (~0.4 µs of a warm tile's ~13); the route, set id and kind strings are the same every time.
    this.requests = new Map() // route → set → counts by status class (index: status / 100)
    this.latency = new Map() // route → kind → Latencies (kind: the set's source kind, '' for routes without one)
  }

  /**
   * One answered request: `route` its kind ('tile', 'tilejson', …), `set` the set's id ('' when none or unknown:
   * ids of sets that do not exist would make unbounded label values), `kind` its source kind, `status` the HTTP status.
   */
  record (route, set, kind, status, seconds) {
    if (kind === 'composite') set = '' // each combination of sets would be a series of its own
    let sets = this.requests.get(route)
    if (sets === undefined) this.requests.set(route, sets = new Map())
    let counts = sets.get(set)
    if (counts === undefined) sets.set(set, counts = new Float64Array(CLASSES.length))
    counts[(status / 100) | 0]++
    let kinds = this.latency.get(route)
    if (kinds === undefined) this.latency.set(route, kinds = new Map())
    let latencies = kinds.get(kind)
    if (latencies === undefined) kinds.set(kind, latencies = new Latencies())
    latencies.observe(seconds)
  }

  /** The counts as prom-client metric values: [{ labels: { route, set, status }, value }]. */
  requestValues () {
    const values = []
    for (const [route, sets] of this.requests) {
      for (const [set, counts] of sets) {
        counts.forEach((value, i) => { if (value > 0) values.push({ labels: { route, set, status: CLASSES[i] }, value }) })
      }
    }
    return values
  }

  /** The latencies as the values of a prom-client histogram. */
  latencyValues (name) {
    const series = new Map()
    for (const [route, kinds] of this.latency) for (const [kind, l] of kinds) series.set({ route, kind }, l)
    return histogramValues(name, series, (labels) => labels)
  }
}

/**
 * Latencies as the values of a prom-client histogram (name_bucket with le, name_sum, name_count): `series` maps a
 * key to its Latencies, `labelsOf(key)` gives that series' labels.
 */
export function histogramValues (name, series, labelsOf) {
  const values = []
  for (const [key, l] of series) {
    const labels = labelsOf(key)
    let cumulative = 0
    for (let i = 0; i <= LATENCY_BUCKETS.length; i++) {
      cumulative += l.buckets[i]
      const le = i < LATENCY_BUCKETS.length ? LATENCY_BUCKETS[i] : '+Inf'
      values.push({ metricName: `${name}_bucket`, labels: { ...labels, le }, value: cumulative })
    }
    values.push({ metricName: `${name}_sum`, labels, value: l.sum })
    values.push({ metricName: `${name}_count`, labels, value: l.count })
  }
  return values
}

const CLASSES = ['0xx', '1xx', '2xx', '3xx', '4xx', '5xx']

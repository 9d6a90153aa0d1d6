// The connections tile queries run on: `count` clients in pg's pipeline mode, each query sent at once on the one with
// the fewest queries in flight. Under load several queries wait on each connection's socket instead of in a pool's
// queue, so the database backend reads, and tile-cannon writes and reads, several at a time: fewer wake-ups on both
// sides. Zurich z14 tiles, 50 clients, server and database on 2 shared cores: 4,000 -> 5,300 req/s, 137 -> 105 us of
// server CPU and 300 -> 233 us of database CPU per tile, against a pool of as many connections (bench/README.md).
// A lane that fails (the database restarted, a network cut) fails the queries in flight on it and is opened again
// for the next one.
import pg from 'pg'

// A connection answers its queries in order, so one slow query (a low-zoom tile of a big table) holds up every query
// sent behind it. A lane that has answered nothing for this long while it has queries in flight is passed over while
// another is not.
const STALLED_MS = 20

/**
 * `{ query(config) → Promise<Result>, prepare(configs) → Promise, close() }` over `count` pipelined connections made
 * with the pg Client options `clientOptions`. `onLost(err)` hears a lane's connection fail (once per failure),
 * `onConnect()` one connect.
 */
export function createLanes (clientOptions, count, { onLost = () => {}, onConnect = () => {} } = {}) {
  const lanes = Array.from({ length: count }, () => null)
  let closed = false

  function open (i) {
    const client = new pg.Client({ ...clientOptions, pipeline: true })
    const lane = { client, inFlight: 0, progressAt: 0, ready: false, dead: false, connecting: null }
    const fail = (err) => {
      if (lane.dead) return
      lane.dead = true
      if (lanes[i] === lane) lanes[i] = null
      if (err && !closed) onLost(err)
      client.end().catch(() => {})
    }
    client.on('error', fail)
    client.on('end', () => fail(null))
    lane.connecting = client.connect().then(() => {
      lane.ready = true
      onConnect()
    }, (err) => {
      fail(null)
      throw err
    })
    lanes[i] = lane
    return lane
  }

  /**
   * The lane with the fewest queries in flight among those not stalled, opened if it is not. When every lane is
   * stalled (a busy machine or database: tiles taking longer than STALLED_MS each), the one that answered last: a lane
   * behind a slow query has answered nothing for longest, and fewest in flight would send the next tiles behind it.
   */
  function pick (now) {
    let best = null
    let bestStalled = true
    for (let i = 0; i < lanes.length; i++) {
      const lane = lanes[i]
      if (lane === null) return open(i) // an unopened (or lost) lane has nothing in flight: the least loaded
      const stalled = lane.inFlight > 0 && now - lane.progressAt > STALLED_MS
      const better = best === null || (bestStalled && !stalled) ||
        (stalled === bestStalled && (stalled ? lane.progressAt > best.progressAt : lane.inFlight < best.inFlight))
      if (better) {
        best = lane
        bestStalled = stalled
      }
    }
    return best
  }

  async function query (config) {
    if (closed) throw new Error('the database connections are closed')
    const now = Date.now()
    const lane = pick(now)
    if (lane.inFlight++ === 0) lane.progressAt = now
    try {
      if (!lane.ready) await lane.connecting
      return await lane.client.query(config)
    } finally {
      lane.inFlight--
      lane.progressAt = Date.now()
    }
  }

  return {
    query,
    /** Opens every lane and runs `configs` (a far-away tile of each statement) on each: prepared before real tiles. */
    async prepare (configs) {
      await Promise.all(lanes.map(async (_, i) => {
        const lane = lanes[i] ?? open(i)
        await lane.connecting
        await Promise.all(configs.map((c) => lane.client.query(c).catch(() => {})))
      }))
    },
    async close () {
      closed = true
      await Promise.all(lanes.map((lane) => lane?.client.end().catch(() => {})))
    },
  }
}

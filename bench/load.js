// autocannon load with every request accounted for, for the fault tests (test/pm2.test.js) and the soak
// (bench/soak.js). Two things autocannon does not do, done here:
// - It ignores `Connection: close`: it writes its next request on a connection the server said it would close, and
//   that request is lost. Browsers, undici, curl and nginx open a new connection instead (RFC 9112 §9.6: a client
//   that receives `close` must send no further request on that connection); each connection here does the same, so
//   a failure counted here is one a real client would see.
// - Its figures miss requests that fail silently (a connection closed under a request is re-opened and the request
//   never answered nor counted), and its `resets` counts restarts of its request list, not connection resets. Here
//   each connection (an autocannon "client") counts what it sent, what was answered and what failed with an error.
import autocannon from 'autocannon'

/**
 * Starts autocannon with `options` (its own; `setupClient` is taken). `done` resolves when it ends (its duration, or
 * `instance.stop()`) with `{ result, failures, closesHonoured }`, `result` being autocannon's own, and `failures`:
 * - `errors`: socket errors by code (ECONNRESET, ECONNREFUSED, EPIPE…; `timeout` for autocannon's timeouts);
 * - `non2xx`: answers by status, for statuses outside 2xx;
 * - `lost`: requests sent on a connection that closed without answering them and without an error;
 * - `stuck`: requests unanswered for longer than `stuckMs` when the load stopped;
 * - `total`: all of those together: what a client would have seen fail.
 * `onAnswer(connection, status, headers, at, latencyMs)`, when given, sees every answer: `connection` is the index of
 * the autocannon client (one connection at a time, on one server process until it reconnects), `headers` a
 * lower-cased object. `onError(code, at)` sees every socket error and timeout as it happens.
 * @returns {{ instance: object, done: Promise<{ result: object, failures: object, closesHonoured: number }> }}
 */
export function accountedLoad (options, { onAnswer = null, onError = null, stuckMs = 2000 } = {}) {
  const connections = []
  const errors = {}
  let closesHonoured = 0
  const instance = autocannon({
    ...options,
    setupClient (client) {
      // Every request a client sends ends as an answer, an error, or neither (lost); one is always outstanding.
      const c = { sent: 0, answered: 0, failed: 0, lastSentAt: 0, headers: null, closeAsked: false }
      const index = connections.push(c) - 1
      client.on('request', () => { c.sent++; c.lastSentAt = Date.now() })
      client.on('headers', (h) => {
        c.headers = h
        c.closeAsked = closeRequested(h.headers)
      })
      honourClose(client, c, () => { closesHonoured++ })
      client.on('response', (status, bytes, latencyMs) => {
        c.answered++
        if (onAnswer !== null) onAnswer(index, status, headerObject(c.headers?.headers), Date.now(), latencyMs)
      })
      const failed = (code) => {
        c.failed++
        errors[code] = (errors[code] ?? 0) + 1
        if (onError !== null) onError(code, Date.now())
      }
      client.on('connError', (err) => failed(err.code ?? err.message))
      client.on('timeout', () => failed('timeout'))
    },
  })
  const done = instance.then((result) => {
    const stoppedAt = Date.now()
    let lost = 0
    let stuck = 0
    for (const c of connections) {
      const outstanding = c.sent - c.answered - c.failed
      lost += Math.max(0, outstanding - 1)
      if (outstanding >= 1 && stoppedAt - c.lastSentAt > stuckMs) stuck++
    }
    const non2xx = {}
    for (const [status, { count }] of Object.entries(result.statusCodeStats ?? {})) if (status < 200 || status >= 300) non2xx[status] = count
    const errorCount = Object.values(errors).reduce((a, n) => a + n, 0)
    const non2xxCount = Object.values(non2xx).reduce((a, n) => a + n, 0)
    return { result, closesHonoured, failures: { errors, non2xx, lost, stuck, total: errorCount + non2xxCount + lost + stuck } }
  })
  return { instance, done }
}

/**
 * After an answer that says `Connection: close`, the client's next request goes on a new connection. autocannon 9
 * sends it from `_doRequest` right after the answer: that one call instead drops the connection and opens another,
 * whose own first request is the next one (so each connection still has one request outstanding).
 */
function honourClose (client, c, counted) {
  if (typeof client._doRequest !== 'function' || typeof client._destroyConnection !== 'function' || typeof client._connect !== 'function') {
    throw new Error('bench/load.js: this autocannon has no _doRequest/_destroyConnection/_connect (written against autocannon 9)')
  }
  const doRequest = client._doRequest
  client._doRequest = function (...args) {
    if (!c.closeAsked || this.destroyed) return doRequest.apply(this, args)
    c.closeAsked = false
    counted()
    this._destroyConnection()
    this._connect()
  }
}

function closeRequested (raw) {
  if (!Array.isArray(raw)) return false
  for (let i = 0; i + 1 < raw.length; i += 2) if (/^connection$/i.test(raw[i]) && /\bclose\b/i.test(raw[i + 1])) return true
  return false
}

/** autocannon's raw header list ([name, value, name, value…]) as an object with lower-cased names. */
function headerObject (raw) {
  const out = {}
  if (!Array.isArray(raw)) return out
  for (let i = 0; i + 1 < raw.length; i += 2) out[String(raw[i]).toLowerCase()] = String(raw[i + 1])
  return out
}

/** One line for a report: "12,345 answered, 0 failed (errors {}, non-2xx {}, lost 0, stuck 0); 3 Connection: close honoured". */
export function describeLoad ({ result, failures, closesHonoured }) {
  return `${result.requests.total.toLocaleString('en')} answered, ${failures.total} failed (errors ${JSON.stringify(failures.errors)}, ` +
    `non-2xx ${JSON.stringify(failures.non2xx)}, lost ${failures.lost}, stuck ${failures.stuck}); ${closesHonoured} Connection: close honoured`
}

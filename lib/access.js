// Optional access control, off by default: API keys (config `apiKeys`, env TILE_CANNON_API_KEYS). With keys set, a
// request must carry one, as an `X-API-Key` header or `?key=`; otherwise 401 in the errors' JSON shape, the key never
// echoed, and a warning once a minute per address and reason (missing, not accepted) with how many went unlogged. Open whatever the keys: the probes (/health, /ready, /metrics), CORS preflights (browsers
// send no custom header in them) and the viewer's static code (/viewer/assets/: MapLibre GL JS loads its worker from
// there without a key; it holds no data).
//
// The key a client was let in with is carried into every link built for it (`request.linkKey`, lib/urls.js `keyed`),
// so a MapLibre client given `?key=` on its first URL (a TileJSON, a style) keeps it on every request after. While
// keys are on, `key` is taken out of the parsed query: never a set's option, never part of a tile's cache key or ETag.
//
// The tile front (routes/tiles.js) answers before Fastify's hooks run: it checks the header itself (`access.keys`)
// and leaves anything else (no header, `?key=`) to Fastify, which runs this hook.
import fp from 'fastify-plugin'
import { Unauthorized } from './errors.js'
import { addVary } from './urls.js'

const OPEN = new Set(['/health', '/ready', '/metrics', '/health/', '/ready/', '/metrics/'])
const ASSETS = '/viewer/assets/'
// A 401 is about this request only: no shared cache may keep it for a URL that others ask with a key in a header.
const REFUSED_HEADERS = { 'www-authenticate': 'X-API-Key', 'cache-control': 'no-store' }
// A client without its key (a scanner, a misconfigured app) repeats at its request rate: one line a minute for it.
const REFUSAL_LOG_EVERY_MS = 60_000
const REFUSALS_KEPT = 10_000 // addresses and reasons remembered; past it the one logged longest ago is forgotten

/** config.apiKeys → Map key → its query parameter (`key=…`, made once), or null when access is open. */
export function keyMap (apiKeys) {
  if (!Array.isArray(apiKeys) || apiKeys.length === 0) return null
  return new Map(apiKeys.map((key) => [key, `key=${encodeURIComponent(key)}`]))
}

function refused (message) {
  const err = new Unauthorized(message)
  err.headers = REFUSED_HEADERS
  return err
}

async function accessPlugin (app, config) {
  const keys = keyMap(config.apiKeys)
  // A Map lookup, not a constant-time comparison: the lookup hashes the whole string and compares only on a hash hit,
  // which tells a timing attacker next to nothing, and costs the tile front no hashing of its own.
  app.decorate('access', { keys })
  app.decorateRequest('linkKey', '')
  if (keys === null) return

  const refusals = new Map() // `${reason} ${address}` → { at: when last logged, repeats: refusals since, not logged }
  const logRefusal = (request, path, reason) => {
    const key = `${reason} ${request.ip}`
    const now = Date.now()
    const last = refusals.get(key)
    if (last !== undefined && now - last.at < REFUSAL_LOG_EVERY_MS) {
      last.repeats++
      return
    }
    refusals.delete(key) // set again below: the Map's first key is then the one logged longest ago
    if (refusals.size >= REFUSALS_KEPT) refusals.delete(refusals.keys().next().value)
    refusals.set(key, { at: now, repeats: 0 })
    const repeats = last?.repeats ? { repeats: last.repeats } : {}
    // The path (not the query: it may hold the key), never the key itself.
    request.log.warn({ method: request.method, path: path.slice(0, 200), ip: request.ip, ...repeats }, reason)
  }

  app.addHook('onRequest', (request, reply, done) => {
    const url = request.url
    const q = url.indexOf('?')
    const path = q === -1 ? url : url.slice(0, q)
    if (request.method === 'OPTIONS' || OPEN.has(path) || path.startsWith(ASSETS)) return done()
    const header = request.headers['x-api-key']
    let linkKey = keys.get(header)
    const query = request.query
    const inQuery = query?.key
    if (inQuery !== undefined) {
      if (linkKey === undefined && typeof inQuery === 'string') linkKey = keys.get(inQuery)
      delete query.key
    }
    if (linkKey !== undefined) {
      request.linkKey = linkKey
      return done()
    }
    const given = header !== undefined || inQuery !== undefined
    logRefusal(request, path, given ? 'API key not accepted' : 'API key missing')
    addVary(reply, 'X-API-Key') // after CORS's Origin, when it varies on it
    done(refused(given
      ? 'this API key is not accepted'
      : 'an API key is required: send it in the X-API-Key header or as ?key='))
  })
}

export default fp(accessPlugin, { name: 'tile-cannon-access', fastify: '5.x' })

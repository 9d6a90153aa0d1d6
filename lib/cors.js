// CORS for a read-only GET/HEAD API. Ours rather than @fastify/cors, for two measured reasons: the tile route writes a
// header block made once per cached answer, CORS included (the plugin's per-request hook built an options object and
// set headers one by one: ~1 % of a warm tile's CPU); and its preflight answer carried `Content-Length: 0` on a 204,
// which RFC 9110 (8.6) forbids.
//
// config.cors: '*' (any origin; the default), false (no CORS headers), or a list of origins (the request's Origin is
// echoed when listed, with Vary: Origin, since the answer then depends on it).

const METHODS = 'GET, HEAD'
const MAX_AGE = '86400'

/** What CORS adds to an answer, for the tile route's precomputed headers and for the hook. */
export function corsPolicy (cors) {
  if (cors === false) return { fixed: {}, varies: false, allow: () => null }
  if (cors === '*') return { fixed: { 'access-control-allow-origin': '*' }, varies: false, allow: () => '*' }
  const origins = new Set(Array.isArray(cors) ? cors : [cors])
  return { fixed: {}, varies: true, allow: (origin) => (origin !== undefined && origins.has(origin) ? origin : null) }
}

/**
 * Adds CORS to the app: the headers on every answer (one header for '*'), and preflights (OPTIONS with Origin and
 * Access-Control-Request-Method) answered with a bodiless 204. The tile route writes the same headers itself in the
 * block it sends (see routes/tiles.js).
 */
export function registerCors (app, policy) {
  if (!policy.varies && policy.allow(undefined) === null) return // CORS off
  app.addHook('onRequest', (request, reply, done) => {
    const allowed = policy.allow(request.headers.origin)
    if (allowed !== null) reply.header('access-control-allow-origin', allowed)
    if (policy.varies) reply.header('vary', 'Origin')
    done()
  })
  app.options('*', (request, reply) => {
    const method = request.headers['access-control-request-method']
    if (request.headers.origin === undefined || method === undefined) {
      return reply.code(400).send({ statusCode: 400, error: 'Bad Request', message: 'not a CORS preflight (Origin and Access-Control-Request-Method are needed)' })
    }
    reply.header('access-control-allow-methods', METHODS)
    reply.header('access-control-max-age', MAX_AGE)
    const wanted = request.headers['access-control-request-headers']
    if (wanted !== undefined) reply.header('access-control-allow-headers', wanted) // any header: the API only reads
    reply.header('vary', policy.varies ? 'Origin, Access-Control-Request-Headers' : 'Access-Control-Request-Headers')
    reply.code(204).send() // no body, and so (Fastify) no Content-Length
  })
}

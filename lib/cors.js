// CORS for a read-only GET/HEAD API. Ours rather than @fastify/cors, for two measured reasons: the tile route writes a
// header block made once per cached answer, CORS included (the plugin's per-request hook built an options object and
// set headers one by one: ~1 % of a warm tile's CPU); and its preflight answer carried `Content-Length: 0` on a 204,
// which RFC 9110 (8.6) forbids.
//
// config.cors: '*' (any origin; the default), false (no CORS headers), or a list of origins (the request's Origin is
// echoed when listed, with Vary: Origin, since the answer then depends on it).

const METHODS = 'GET, HEAD'
const MAX_AGE = '86400'
// What a script of another origin may read beyond the CORS-safelisted headers (Content-Type, Cache-Control, …):
// the CRS of features (OGC API – Features Part 2 tells clients to rely on Content-Crs), the ETag to revalidate
// with, and Retry-After on a 503.
export const EXPOSED = 'Content-Crs, ETag, Retry-After'

/** What CORS adds to an answer, for the tile route's precomputed headers and for the hook. */
export function corsPolicy (cors) {
  if (cors === false) return { fixed: {}, varies: false, allow: () => null }
  if (cors === '*') return { fixed: { 'access-control-allow-origin': '*', 'access-control-expose-headers': EXPOSED }, varies: false, allow: () => '*' }
  const origins = new Set(Array.isArray(cors) ? cors : [cors])
  // Exposed on every answer (inert without an allowed origin): the tile route's precomputed block holds it.
  return { fixed: { 'access-control-expose-headers': EXPOSED }, varies: true, allow: (origin) => (origin !== undefined && origins.has(origin) ? origin : null) }
}

/**
 * Adds CORS to the app: the headers on every answer (one header for '*'). The tile route writes the same headers
 * itself in the block it sends (see routes/tiles.js). Returns the preflight answerer for the OPTIONS route
 * (lib/methods.js), or null when CORS is off.
 */
export function registerCors (app, policy) {
  if (!policy.varies && policy.allow(undefined) === null) return null // CORS off
  app.addHook('onRequest', (request, reply, done) => {
    const allowed = policy.allow(request.headers.origin)
    if (allowed !== null) reply.headers(policy.fixed).header('access-control-allow-origin', allowed)
    if (policy.varies) reply.header('vary', 'Origin')
    done()
  })
  return preflight
}

/**
 * A preflight (OPTIONS with Origin and Access-Control-Request-Method) answered with a bodiless 204: true when it was
 * one, false for a plain OPTIONS (answered with Allow by lib/methods.js).
 */
function preflight (request, reply) {
  const method = request.headers['access-control-request-method']
  if (request.headers.origin === undefined || method === undefined) return false
  reply.header('access-control-allow-methods', METHODS)
  reply.header('access-control-max-age', MAX_AGE)
  const wanted = request.headers['access-control-request-headers']
  if (wanted !== undefined) reply.header('access-control-allow-headers', wanted) // any header: the API only reads
  const vary = reply.getHeader('vary') // 'Origin' when the answer depends on it (the onRequest hook)
  reply.header('vary', vary === undefined ? 'Access-Control-Request-Headers' : `${vary}, Access-Control-Request-Headers`)
  reply.code(204).send() // no body, and so (Fastify) no Content-Length
  return true
}

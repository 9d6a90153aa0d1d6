// 405 Method Not Allowed, with the Allow header RFC 9110 (§15.5.6) asks for, where a request's path is served but not
// its method (a POST or DELETE on a tile, say); 404 stays for paths nothing serves. Fastify answers both with its
// not-found handler, so the GET and HEAD routes are kept in a router of their own (find-my-way, the one Fastify uses,
// with the app's options) and looked up there, on that path only: the served requests never see it. OPTIONS is
// served on every path (RFC 9110 §9.3.7): a CORS preflight, or the Allow of the path (`OPTIONS *`: the server's).
import FindMyWay from 'find-my-way'

const READ = ['GET', 'HEAD']
const SERVED = [...READ, 'OPTIONS']

/** Records the app's GET and HEAD routes (call before any is added); returns `allowedFor(request)`: the methods the request's path has, or null. */
export function methodsOf (app, routerOptions) {
  const routes = FindMyWay(routerOptions)
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) if (READ.includes(method)) routes.on(method, route.url, () => {})
  })
  return (request) => {
    if (READ.includes(request.method)) return null // a GET or HEAD here is not found, whatever its path
    const at = request.url.indexOf('?')
    const path = at < 0 ? request.url : request.url.slice(0, at)
    const allowed = READ.filter((method) => routes.find(method, path) !== null)
    return allowed.length > 0 ? [...allowed, 'OPTIONS'] : null
  }
}

/**
 * OPTIONS on any path: a CORS preflight answered by `preflight` (lib/cors.js; null when CORS is off), else 200 with
 * the path's Allow and no content (Content-Length: 0, as RFC 9110 §9.3.7 asks), 404 where nothing is served.
 */
export function registerOptions (app, allowedFor, preflight) {
  app.options('*', (request, reply) => {
    if (preflight !== null && preflight(request, reply)) return
    const allowed = request.url === '*' ? SERVED : allowedFor(request)
    if (allowed === null) return reply.code(404).send({ statusCode: 404, error: 'Not Found', message: 'no such route' })
    reply.header('allow', allowed.join(', '))
    reply.header('content-length', '0')
    reply.code(200).send()
  })
}

const ABSOLUTE_FORM = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//
const BAD_TARGET = JSON.stringify({ statusCode: 400, error: 'Bad Request', message: 'the request target is not a path (* is for OPTIONS only)' })

/**
 * Whether a request's target has a form RFC 9112 (§3.2) gives it: a path (origin-form), a URL (absolute-form), or `*`
 * for OPTIONS only; answers 400 itself when not (`GET *` was the home page: the router reads any first character as
 * a `/`). Called before Fastify's handler, after the tile front: a path costs one character's test.
 */
export function refusedTarget (req, res) {
  const url = req.url
  if (url.charCodeAt(0) === 47 /* / */) return false
  if (url === '*' ? req.method === 'OPTIONS' : ABSOLUTE_FORM.test(url)) return false
  res.writeHead(400, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(BAD_TARGET) })
  res.end(BAD_TARGET)
  return true
}

// 405 Method Not Allowed, with the Allow header RFC 9110 (§15.5.6) asks for, where a request's path is served but not
// its method (a POST or DELETE on a tile, say); 404 stays for paths nothing serves. Fastify answers both with its
// not-found handler, so the GET and HEAD routes are kept in a router of their own (find-my-way, the one Fastify uses,
// with the app's options) and looked up there, on that path only: the served requests never see it.
import FindMyWay from 'find-my-way'

const READ = ['GET', 'HEAD']

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
    return allowed.length > 0 ? allowed : null
  }
}

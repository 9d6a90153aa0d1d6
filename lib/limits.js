// Limits on what a request may ask, answered with a clear 4xx before any route works on it (config `limits`):
// a URL longer than `maxUrlLength` (8 KiB) or a query string longer than `maxQueryLength` (4 KiB) is a 414. Node
// itself refuses a request line and headers past 16 KiB (431), and the router a path parameter past 512 characters
// (414); composites past `maxCompositeParts` are a 400 (lib/resolve.js). The tile front (routes/tiles.js) takes no
// query string and checks the URL length itself.
import fp from 'fastify-plugin'
import { BadRequest, UriTooLong } from './errors.js'
import { decodedOr } from './urls.js'

export const LIMIT_DEFAULTS = Object.freeze({ maxUrlLength: 8192, maxQueryLength: 4096, maxCompositeParts: 16 })

async function limitsPlugin (app, config) {
  const { maxUrlLength, maxQueryLength } = { ...LIMIT_DEFAULTS, ...config.limits }
  const shortest = Math.min(maxUrlLength, maxQueryLength)
  app.addHook('onRequest', (request, reply, done) => {
    const url = request.url
    // A query string with a %-escape that is no UTF-8 (`?name=%FF`): the parser would keep it as the text `%FF`, and
    // a filter would look for that. A 400, as such a path is (the router's).
    const q = url.indexOf('?')
    if (q !== -1 && url.indexOf('%', q) !== -1 && decodedOr(url.slice(q + 1), null) === null) return done(new BadRequest('the query string has a malformed %-escape: a % and two hex digits, spelling UTF-8'))
    if (url.length <= shortest) return done() // nearly every request: one comparison
    let problem = null
    if (url.length > maxUrlLength) problem = `a URL is at most ${maxUrlLength} characters`
    else {
      if (q !== -1 && url.length - q - 1 > maxQueryLength) problem = `a query string is at most ${maxQueryLength} characters`
    }
    if (problem === null) return done()
    request.log.info({ method: request.method, length: url.length }, 'URL too long')
    done(new UriTooLong(problem))
  })
}

export default fp(limitsPlugin, { name: 'tile-cannon-limits', fastify: '5.x' })

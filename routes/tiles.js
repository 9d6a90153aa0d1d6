// GET/HEAD /:set/:z/:x/:y[@2x][.ext] — the hot path: resolve (lib/resolve.js) → pipeline (lib/pipeline.js) → answer
// (routes/tile-answer.js). For stored tiles the extension is accepted and ignored (the bytes decide the type), except
// `.geojson` and `.mlt`, which ask for a variant of a vector tile (lib/variants); sets that render to order (rasters)
// take it, the scale and their query options as the request. Errors are thrown as their type (lib/errors.js) and
// answered by the app's error handler.
import { resolveTile } from '../lib/resolve.js'
import { GET_HEAD } from './http.js'
import { tileWriter } from './tile-answer.js'

// No params schema: resolveTile checks every character of z, x and y itself (digits only: a validator's coercion would
// let ' 3', '1e0' or '0x1' through, each a new CDN cache key), and the router caps a parameter at 512 characters.
// Fastify's compiled validator cost ~1 % of a warm tile's CPU for checks made twice.

export default async function tileRoutes (app) {
  const { catalog, pipeline } = app
  const writeTile = tileWriter(pipeline)
  const logLookup = app.hasRequestDecorator('tileLookup') // the access log says whether the cache had the tile

  // Not an async function: a cached tile is answered without a promise or a microtask (~2 % of a warm tile's CPU).
  // Errors thrown here, or rejected by the promises returned, are answered by the app's error handler.
  function handler (request, reply) {
    const tile = resolveTile(catalog, request.params, request.query)
    // A read the tile front started and left to this route (see tileFront): joined, not looked up (and counted) again.
    const record = request.raw.tileRead ?? pipeline.record(tile.entry, tile.z, tile.x, tile.y, tile.query, tile.rendering, tile.variant)
    if (logLookup) request.tileLookup = pipeline.lastLookup
    if (record instanceof Promise) return record.then((loaded) => writeTile(request.raw, reply.raw, tile.entry, loaded, reply))
    return writeTile(request.raw, reply.raw, tile.entry, record, reply)
  }
  app.route({ method: GET_HEAD, url: '/:set/:z/:x/:y', handler })
  app.route({ method: GET_HEAD, url: '/data/:set/:z/:x/:y', handler }) // tileserver-gl's form, for clients written against it
}

const NO_QUERY = Object.freeze({})
const noop = () => {}

/**
 * The tile front: the tile route's common case answered before Fastify sees the request. A GET or HEAD of
 * `/set/z/x/y[.ext]` (or `/data/set/…`) with no query string and nothing percent-encoded, whose tile is cached or read
 * synchronously (MBTiles, local PMTiles; a `.mlt` or `.geojson` variant once cached), is answered here by the same
 * functions the route uses (resolveTile, pipeline.record, the tile writer), so the answer is the route's byte for
 * byte. Anything else goes to Fastify (`false`): other routes, errors (the route meets the same error and its handler
 * answers it), reads still under way (the route joins the same read: the pipeline shares reads in flight; a variant
 * being made is one), and answers to transcode.
 *
 * Why: Fastify's request and reply objects, routing and hooks cost ~5 µs of the ~23 µs a warm tile took on one core,
 * and with it a warm tile costs what a bare node:http server answering from a Map does (bench/README.md).
 * A request answered here does not pass Fastify's hooks: a plugin that must see every request turns the front off.
 */
export function tileFront ({ catalog, pipeline, requestStats, isUnderPressure, access, config }) {
  const writeTile = tileWriter(pipeline)
  // What Fastify's hooks would check (lib/access.js, lib/limits.js): a request failing it goes to Fastify, which answers.
  const keys = access?.keys ?? null // API keys: only the header is checked here (`?key=` never reaches the front)
  const maxUrlLength = config?.limits?.maxUrlLength ?? Infinity
  // lib/metrics: what the front answers, Fastify's onResponse hook never sees.
  const count = requestStats == null
    ? noop
    : (entry, res, started) => requestStats.record('tile', entry.id, entry.kind, res.statusCode, (performance.now() - started) / 1000)
  const pressed = isUnderPressure ?? (() => false) // shedding load (lib/app.js): Fastify answers the 503

  /** (req, res, fallback) → true when answered (or being answered), false to leave the request to Fastify (`fallback`). */
  return function front (req, res, fallback) {
    const method = req.method
    if (method !== 'GET' && method !== 'HEAD') return false
    if (pressed()) return false
    const url = req.url
    if (url.indexOf('?') !== -1 || url.indexOf('%') !== -1 || url.length > maxUrlLength) return false
    if (keys !== null && !keys.has(req.headers['x-api-key'])) return false
    let from = 1 // after the leading slash
    if (url.startsWith('/data/')) from = 6
    const a = url.indexOf('/', from)
    const b = url.indexOf('/', a + 1)
    const c = url.indexOf('/', b + 1)
    if (a === -1 || b === -1 || c === -1 || url.indexOf('/', c + 1) !== -1) return false
    const started = count === noop ? 0 : performance.now()
    const params = { set: url.slice(from, a), z: url.slice(a + 1, b), x: url.slice(b + 1, c), y: url.slice(c + 1) }
    let tile, record
    try {
      tile = resolveTile(catalog, params, NO_QUERY)
      record = pipeline.record(tile.entry, tile.z, tile.x, tile.y, tile.query, tile.rendering, tile.variant)
    } catch {
      return false
    }
    // A read under way: handed to the route, running now, which answers when it is done (its own handler handles a
    // failure; this copy is only kept from being reported as unhandled).
    if (record instanceof Promise) {
      record.catch(noop)
      req.tileRead = record
      return false
    }
    let written
    try {
      written = writeTile(req, res, tile.entry, record)
    } catch {
      return false
    }
    if (written === undefined) {
      count(tile.entry, res, started)
      return true
    }
    // Transcoding (a tile over lib/encoding.js's inline size): answered when done; a failure goes to the route, which
    // meets it again and answers it (and is counted there).
    written.then(() => count(tile.entry, res, started), () => { if (!res.headersSent) fallback(req, res) })
    return true
  }
}

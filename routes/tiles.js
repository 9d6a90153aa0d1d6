// GET/HEAD /:set/:z/:x/:y[@2x][.ext] — the hot path: resolve (lib/resolve.js) → pipeline (lib/pipeline.js) → answer.
// For stored tiles the extension is accepted and ignored (the bytes decide the type); sets that render to order
// (rasters) take it, the scale and their query options as the request. Errors are thrown as their type (lib/errors.js)
// and answered by the app's error handler.
import { acceptMask } from '../lib/encoding.js'
import { NotFound, sendError } from '../lib/errors.js'
import { resolveTile } from '../lib/resolve.js'
import { ABSENT, etagMatches } from '../lib/pipeline.js'
import { GET_HEAD } from './http.js'

// No params schema: resolveTile checks every character of z, x and y itself (digits only: a validator's coercion would
// let ' 3', '1e0' or '0x1' through, each a new CDN cache key), and the router caps a parameter at 512 characters.
// Fastify's compiled validator cost ~1 % of a warm tile's CPU for checks made twice.

const NO_TILE = new NotFound('no tile at these coordinates') // answered, not thrown: the hot 404 of sparse sets

export default async function tileRoutes (app) {
  const { catalog, pipeline } = app
  const cors = pipeline.cors

  // Not an async function: a cached tile is answered without a promise or a microtask (~2 % of a warm tile's CPU).
  // Errors thrown here, or rejected by the promises returned, are answered by the app's error handler.
  app.route({ method: GET_HEAD, url: '/:set/:z/:x/:y', handler (request, reply) {
    const tile = resolveTile(catalog, request.params, request.query)
    const record = pipeline.record(tile.entry, tile.z, tile.x, tile.y, tile.query, tile.rendering)
    if (record instanceof Promise) return record.then((loaded) => answerRecord(request, reply, tile.entry, loaded))
    return answerRecord(request, reply, tile.entry, record)
  } })

  /** Answers a record; a promise only when it must be transcoded first, else undefined (the answer is sent). */
  function answerRecord (request, reply, entry, record) {
    if (record === ABSENT) {
      reply.header('cache-control', entry.cacheControl)
      if (entry.missingStatus === 204) reply.code(204).send()
      else sendError(reply, NO_TILE)
      return
    }
    const answer = pipeline.encoded(record, acceptMask(request.headers['accept-encoding']), entry)
    if (answer instanceof Promise) return answer.then((encoded) => send(request, reply, encoded))
    send(request, reply, answer)
  }

  function send (request, reply, answer) {
    const inm = request.headers['if-none-match']
    if (inm !== undefined && etagMatches(inm, answer.etag)) {
      // A 304 carries the validators and freshness of the 200 it stands for, not its Content-Type or -Encoding.
      if (answer.vary !== '') reply.header('vary', answer.vary)
      reply.code(304).header('etag', answer.etag).header('cache-control', answer.cacheControl).send()
      return
    }
    // The warm path: the answer's header block, made once per cached answer (CORS included), written as it is. Fastify's
    // send (header objects merged per request, onSend hooks, length computed) cost ~6 % of a warm tile's CPU; its
    // onResponse hooks still run.
    reply.hijack()
    reply.raw.writeHead(200, cors.varies ? withOrigin(answer.head, cors.allow(request.headers.origin)) : answer.head)
    reply.raw.end(answer.body)
  }
}

/** A listed Origin's header block (config cors: a list of origins): the precomputed one, plus the origin allowed. */
const withOrigin = (head, allowed) => (allowed === null ? head : { ...head, 'access-control-allow-origin': allowed })

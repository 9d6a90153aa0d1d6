// Answering a tile record, for every route that serves tiles through the pipeline (sets, rendered styles): 204/404 for
// an absent tile, 304 for a matching If-None-Match, else the encoded answer's precomputed header block and body.
import { acceptMask } from '../lib/encoding.js'
import { NotFound, sendError } from '../lib/errors.js'
import { ABSENT, etagMatches } from '../lib/pipeline.js'

const NO_TILE = new NotFound('no tile at these coordinates') // answered, not thrown: the hot 404 of sparse sets

/** (request, reply, entry, record) → undefined once answered, or a promise when the record must be transcoded first. */
export function tileAnswerer (pipeline) {
  const cors = pipeline.cors

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

  return answerRecord
}

/** A listed Origin's header block (config cors: a list of origins): the precomputed one, plus the origin allowed. */
const withOrigin = (head, allowed) => (allowed === null ? head : { ...head, 'access-control-allow-origin': allowed })

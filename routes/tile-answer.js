// Writing a tile record as the HTTP answer, for every route that serves tiles through the pipeline (sets, rendered
// styles) and for the tile front (routes/tiles.js): straight onto Node's response, each answer's header block made once
// (CORS included) and written with one writeHead. Fastify's reply (header objects merged per request, onSend hooks,
// length computed) cost ~6 % of a warm tile's CPU. 204/404 for an absent tile, 304 for a matching If-None-Match, 412
// for an If-Match that does not match.
import { acceptMask } from '../lib/encoding.js'
import { ABSENT, etagMatches, notModifiedHead, strongEtagMatches } from '../lib/pipeline.js'

// The hot 404 of sparse raster sets: the body the error handler would send for it (lib/errors.js sendError).
const NO_TILE = Buffer.from(JSON.stringify({ statusCode: 404, error: 'Not Found', message: 'no tile at these coordinates' }))
const PRECONDITION_FAILED = Buffer.from(JSON.stringify({ statusCode: 412, error: 'Precondition Failed', message: 'If-Match does not match the tile' }))

/**
 * (req, res, entry, record, reply) → undefined once written, or a promise when the record must be transcoded first (it
 * writes when done, or rejects with the failure for the caller to answer). `req` and `res` are Node's; `reply` is
 * Fastify's when the request came through it: hijacked just before writing, so a failure before that is still
 * answered by its error handler (and its onResponse hooks still run).
 */
export function tileWriter (pipeline) {
  const cors = pipeline.cors
  const absentHeads = new Map() // status + Cache-Control → the header block of an absent tile (sets have few values)
  const failedHead = { 'content-type': 'application/json; charset=utf-8', 'content-length': String(PRECONDITION_FAILED.length), ...cors.fixed }
  if (cors.varies) failedHead.vary = 'Origin'

  function write (req, res, entry, record, reply) {
    if (record === ABSENT) {
      reply?.hijack()
      // If-Match (RFC 9110 13.1.1), even `*`, is false when there is no tile.
      if (req.headers['if-match'] !== undefined) return writePreconditionFailed(req, res)
      return writeAbsent(req, res, entry)
    }
    const answer = pipeline.encoded(record, acceptMask(req.headers['accept-encoding']), entry)
    if (answer instanceof Promise) return answer.then((encoded) => writeAnswer(req, res, encoded, reply))
    writeAnswer(req, res, answer, reply)
  }

  function writeAnswer (req, res, answer, reply) {
    reply?.hijack()
    // If-Match first (RFC 9110 13.2.2), compared strongly with the answer's ETag: a client updating what it holds
    // (rare on tiles, so only its presence is checked on the hot path).
    const im = req.headers['if-match']
    if (im !== undefined && !strongEtagMatches(im, answer.etag)) return writePreconditionFailed(req, res)
    const inm = req.headers['if-none-match']
    if (inm !== undefined && etagMatches(inm, answer.etag)) {
      // A 304 carries the validators and freshness of the 200 it stands for, not its Content-Type or -Encoding.
      res.writeHead(304, withCors(req, notModifiedHead(answer)))
      res.end()
      return
    }
    res.writeHead(200, withCors(req, answer.head))
    res.end(answer.body)
  }

  function writeAbsent (req, res, entry) {
    const status = entry.missingStatus
    const name = status + entry.cacheControl
    let head = absentHeads.get(name)
    if (head === undefined) {
      head = { 'cache-control': entry.cacheControl, ...cors.fixed }
      if (cors.varies) head.vary = 'Origin'
      if (status !== 204) Object.assign(head, { 'content-type': 'application/json; charset=utf-8', 'content-length': String(NO_TILE.length) })
      if (absentHeads.size > 100) absentHeads.clear()
      absentHeads.set(name, head)
    }
    res.writeHead(status, withCors(req, head))
    res.end(status === 204 ? undefined : NO_TILE)
  }

  function writePreconditionFailed (req, res) {
    res.writeHead(412, withCors(req, failedHead))
    res.end(PRECONDITION_FAILED)
  }

  /** A listed Origin's header block (config cors: a list of origins): the precomputed one, plus the origin allowed. */
  function withCors (req, head) {
    if (!cors.varies) return head
    const allowed = cors.allow(req.headers.origin)
    return allowed === null ? head : { ...head, 'access-control-allow-origin': allowed }
  }

  return write
}

// Error types and the HTTP answer of each, mapped once: in `errorHandler` (the app's error handler). The resolver
// (lib/resolve.js), the pipeline (lib/pipeline.js) and the sources throw these; routes never pick a status by where an
// error was caught.
//
//   BadRequest    400  the request is wrong: a coordinate off the grid, an option the set cannot honour
//   NotFound      404  nothing there: no such set, a zoom outside the set's range, no @2x of it, an absent raster tile
//   Unavailable   503  the set cannot answer now: unavailable (corrupt, being written), its backend down, busy or slow;
//                      with Retry-After
//   Unauthorized  401  no API key, or one not accepted (lib/access.js)
//   UriTooLong    414  a URL or query string past its limit (lib/limits.js)
//   anything else 500  'internal error': a bug. Logged once with its stack; the body never shows its message or stack.
//
// Bodies keep Fastify's shape, {statusCode, error, message}; messages name the set, never a path or a stack.
import { STATUS_CODES } from 'node:http'
import createError from '@fastify/error'
import { loggedUrl } from './urls.js'

// No stack traces: these are answers, not bugs, and some are frequent (the 404s of a sparse raster set).
export const BadRequest = createError('TC_BAD_REQUEST', '%s', 400, Error, false)
export const NotFound = createError('TC_NOT_FOUND', '%s', 404, Error, false)
export const Unavailable = createError('TC_UNAVAILABLE', '%s', 503, Error, false)
// Refused before any route runs (lib/access.js, lib/limits.js).
export const Unauthorized = createError('TC_UNAUTHORIZED', '%s', 401, Error, false)
export const UriTooLong = createError('TC_URI_TOO_LONG', '%s', 414, Error, false)

/** Seconds a client is asked to wait after a 503 (an Unavailable may say otherwise with `retryAfter`). */
export const RETRY_AFTER_S = 10
const MAX_LOGGED_REASONS = 50 // distinct failures logged per set: a set failing in endless new ways cannot flood logs

/**
 * The app's error handler. An error may carry `headers` for its answer (a 404 outside a set's zoom range has the
 * set's Cache-Control). Errors of Fastify's own (FST_*, schema validation) keep their 4xx.
 */
export function errorHandler (err, request, reply) {
  let status = 500
  if (err instanceof BadRequest || err instanceof NotFound || err instanceof Unavailable || err instanceof Unauthorized || err instanceof UriTooLong) status = err.statusCode
  else if (err?.validation !== undefined) status = 400
  else if (typeof err?.code === 'string' && err.code.startsWith('FST_') && err.statusCode >= 400 && err.statusCode < 500) status = err.statusCode

  if (status === 500) {
    request.log.error({ err, url: loggedUrl(request) }, 'request failed')
    return reply.code(500).send({ statusCode: 500, error: STATUS_CODES[500], message: 'internal error' })
  }
  return sendError(reply, err, status)
}

/**
 * Answers with an error of a known type (or of Fastify's) without throwing it. The error handler's own last step; also
 * for a route's expected and frequent answer (an absent raster tile): thrown, it took the trip through a rejected
 * promise and Fastify's error path, and a server answered about a quarter fewer of them a second (autocannon, 2 cores).
 */
export function sendError (reply, err, status = err.statusCode) {
  if (err.headers !== undefined) reply.headers(err.headers)
  if (status === 503) reply.header('retry-after', String(err.retryAfter ?? RETRY_AFTER_S))
  return reply.code(status).send({ statusCode: status, error: STATUS_CODES[status], message: err.message })
}

/**
 * What a set's read failure becomes: an error that is already an answer (a source saying "bad option" or "no such
 * tile") stays one; the backend failing (see isBackendFailure) becomes a 503 naming the set, and is logged the first
 * time the set fails that way (`logged`: what was read, 'tile read failed' or 'features read failed'); anything else
 * is a bug and goes on as it is (500, logged with its stack).
 */
export function readFailure (entry, err, log, what = 'this tile', logged = 'tile read failed') {
  if (err instanceof BadRequest || err instanceof NotFound) return err
  if (!(err instanceof Unavailable) && !isBackendFailure(err)) return err
  const reason = String(err.message || err.name || err) // some errors (DataCloneError) have no message
  if (log !== undefined && !entry.errors.has(reason) && entry.errors.size < MAX_LOGGED_REASONS) {
    entry.errors.add(reason)
    log.error({ set: entry.id, reason }, logged)
  }
  if (err.told === true) return err // a reason made to be shown (see toldUnavailable)
  return new Unavailable(`tileset '${entry.id}' could not read ${what}`, { cause: err })
}

/** A 503 whose message is the answer as it is (a renderer's "busy", an engine's reason): no path, no stack in it. */
export const toldUnavailable = (message, retryAfter) => Object.assign(new Unavailable(message), { told: true, retryAfter })

// How the backend failing shows in the errors of the libraries under the sources. A source that knows throws
// Unavailable; these are recognised by code, or by message where a library gives none (and errors from a worker
// thread arrive with their message only, their code lost on the way).
const SYSTEM_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'ETIMEDOUT', 'EHOSTUNREACH', 'EHOSTDOWN', 'ENETUNREACH', 'ENETDOWN',
  'ENOTFOUND', 'EAI_AGAIN', 'EPIPE', // network
  'ENOENT', 'EIO', 'EBADF', 'ESTALE', 'ENXIO', 'ENODEV', 'EACCES', 'EPERM', 'EBUSY', 'EAGAIN', 'EMFILE', 'ENFILE', // files
])
const OTHER_CODES = new RegExp([
  '^UND_ERR_', // undici (fetch): connect and socket failures, timeouts
  '^SQLITE_(BUSY|LOCKED|IOERR|CORRUPT|CANTOPEN|NOTADB|FULL|PROTOCOL|NOMEM|INTERRUPT)', // better-sqlite3: the file, not the SQL
  '^Z_|^ERR__ERROR_FORMAT_|^ZSTD_error', // zlib, brotli, zstd: stored bytes that do not decode (a damaged file)
].join('|'))
// PostgreSQL errors (pg's DatabaseError, which has a severity) by SQLSTATE class (PostgreSQL's appendix A). Only the
// statement being wrong is a bug of ours: what our SQL and our connections can cause, a syntax or access-rule
// violation (42: a syntax error, a type mismatch, an ambiguous name), a prepared statement, cursor or transaction in a
// state we did not expect (26, 24, 34, 25, 0B, 2D, 3B). Every other class is the database or the data failing, 503:
// connection (08), authentication (28), resources (53, 54), objects locked or busy (55), operator intervention (57:
// 57014 is the statement timeout, 57P01 a shutdown), system (58, XX, F0), serialization and deadlocks (40), the
// database or a schema gone (3D, 3F), a foreign table's server (HV), snapshots (72); what a view or a tile function
// raises in itself (PL/pgSQL's RAISE and ASSERT, P0; routine errors 2F, 38, 39; a feature not supported, 0A;
// cardinality, constraints, triggers: 09, 20, 21, 23, 27, 44; codes of its own); and data that cannot be read (22,
// data exceptions: a view casting a value that does not fit, a division by zero in it). Where a request's own values
// reach the SQL, their data exceptions are the client's and answered 400 before this (a function's query:
// postgis/sources.js; features' filters and ids: features/items.js); the server binds nothing else but numbers it has
// checked. In class 42, the role refused (42501: a grant revoked since discovery) and a table, column or function
// dropped since discovery (42P01, 42703, 42883) are the database's too.
const OUR_STATEMENT = /^(42|26|24|34|25|0B|2D|3B)/
const REFUSED_OR_DROPPED = new Set(['42501', '42P01', '42703', '42883'])
const isDatabaseFailure = (code) => !OUR_STATEMENT.test(code) || REFUSED_OR_DROPPED.has(code)

/** A PostgreSQL data exception (SQLSTATE class 22): a value that does not fit, a bad cast, a division by zero. */
export const isDataException = (err) => typeof err?.severity === 'string' && typeof err.code === 'string' && err.code.startsWith('22')
const MESSAGES = new RegExp([
  // pg and pg-pool
  '^Connection terminated', '^timeout exceeded when trying to connect$', '^Query read timeout$', '^timeout expired$',
  '^Client has encountered a connection error', '^Client was closed', '^Cannot use a pool after calling end',
  // pmtiles over HTTP (a bad status; an archive replaced or a server without ranges)
  '^Bad response code: \\d+$', '^Server returned ',
  // geotiff over HTTP (remote COGs; from the raster worker)
  '^Error fetching data\\.$', '^Server responded with full file$', '^Request failed$',
  // piscina (the raster worker pool): busy, or a worker lost
  '^Task queue is at limit$', '^No task queue available', '^Terminating worker thread$',
  // a system error's message, when its code did not survive the trip from a worker thread
  `\\b(${[...SYSTEM_CODES].join('|')})\\b`,
].join('|'))

/**
 * Is `err` (from a source's getTile, or the decoding of its bytes) its backend failing (503 for that set) rather
 * than a bug (500)? TypeError, ReferenceError, RangeError and anything not recognised are bugs; `cause` is followed
 * (fetch's TypeError "fetch failed" has the network error as its cause).
 */
export function isBackendFailure (err) {
  for (let e = err, depth = 0; e !== null && typeof e === 'object' && depth < 5; e = e.cause, depth++) {
    if (e instanceof Unavailable) return true
    const code = e.code
    if (typeof code === 'string') {
      if (SYSTEM_CODES.has(code) || OTHER_CODES.test(code)) return true
      if (typeof e.severity === 'string' && isDatabaseFailure(code)) return true
    }
    if (e.name === 'TimeoutError' || e.name === 'AbortError') return true
    if (e.name === 'Error' && typeof e.message === 'string' && MESSAGES.test(e.message)) return true
  }
  return false
}

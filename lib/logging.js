// The logger (pino): lines a person reads on a terminal (pino-pretty), JSON lines otherwise or with
// `--log-format json` (what pm2's log files and log shippers want); and the access log of `--log-requests`, one JSON
// line per request with what an operator asks of a tile request: set, z/x/y, status, bytes, time and cache hit.
import pino from 'pino'
import pretty from 'pino-pretty'
import fp from 'fastify-plugin'
import { loggedUrl } from './urls.js'

/** Whether the logs on `stream` are lines for a person (pino-pretty) rather than JSON lines. */
export function humanLogs (config, stream = process.stdout) {
  const format = config.logFormat ?? 'auto'
  return format === 'pretty' || (format === 'auto' && stream.isTTY === true)
}

/**
 * What server.js has Fastify's "Server listening at …" lines be (listenTextResolver), so that the logger drops them:
 * one a network interface (three on a machine with two), beside tile-cannon's own line that says it once, with the sets.
 */
export const UNSAID = Symbol('not logged')
const hooks = { logMethod (args, method) { if (args[0] !== UNSAID) method.apply(this, args) } }

/** The app's logger for `config` (logLevel, logFormat: 'auto' | 'pretty' | 'json'). */
export function makeLogger (config, stream = process.stdout) {
  if (!humanLogs(config, stream)) return pino({ level: config.logLevel, hooks }, stream)
  // Synchronous and in this thread (no transport worker): start-up and warnings are few; access logs belong in JSON.
  // singleLine: a record's fields on its own line (`[14:02:11] INFO: request {"reqId":…}`), not one line per field.
  return pino({ level: config.logLevel, hooks }, pretty({ destination: stream, sync: true, colorize: stream.isTTY === true, translateTime: 'HH:MM:ss', ignore: 'pid,hostname', singleLine: true }))
}

// Routes whose `set` is a TileJSON's name: `/roads.json` is the set roads (lib/resolve.js resolveTileJson).
const TILEJSON_ROUTES = new Set(['/:set', '/data/:set'])

/** The id of the set a request names (its name as given when there is no such set). */
function setOf (catalog, request) {
  let name = request.params.set
  if (TILEJSON_ROUTES.has(request.routeOptions.url) && name.endsWith('.json') && catalog.get(name) === undefined) name = name.slice(0, -5)
  return catalog.get(name)?.id ?? name
}

/**
 * One line per request (config `logRequests`), after it is answered. Registered before every other plugin: its
 * onRequest hook runs even for a request another one refuses (a 401, a 503 under pressure), whose bytes count too.
 */
async function accessLog (app) {
  app.decorateRequest('tileLookup', null) // 'hit' | 'joined' | 'miss', set by the tile route (lib/pipeline.js lastLookup)
  app.addHook('onRequest', (request, reply, done) => {
    request.raw.bytesBefore = request.raw.socket?.bytesWritten ?? 0
    done()
  })
  app.addHook('onResponse', (request, reply, done) => {
    const { params } = request
    // (reqId: bound to request.log by Fastify already; twice, it was a JSON key twice in the line)
    const line = { method: request.method, url: loggedUrl(request), status: reply.statusCode }
    if (params?.set !== undefined) {
      line.set = setOf(app.catalog, request)
      if (params.z !== undefined) Object.assign(line, { z: Number(params.z), x: Number(params.x), y: Number.parseInt(params.y, 10) })
    }
    // Bytes sent on the connection for this answer, headers included (as nginx's $bytes_sent).
    const written = request.raw.socket?.bytesWritten ?? 0
    line.bytes = written - (request.raw.bytesBefore ?? written)
    line.ms = Math.round(reply.elapsedTime * 100) / 100
    if (request.tileLookup !== null) line.cache = request.tileLookup
    request.log.info(line, 'request')
    done()
  })
}

export const accessLogPlugin = fp(accessLog, { name: 'tile-cannon-access-log', fastify: '5.x' })

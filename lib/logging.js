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

/** The app's logger for `config` (logLevel, logFormat: 'auto' | 'pretty' | 'json'). */
export function makeLogger (config, stream = process.stdout) {
  if (!humanLogs(config, stream)) return pino({ level: config.logLevel }, stream)
  // Synchronous and in this thread (no transport worker): start-up and warnings are few; access logs belong in JSON.
  return pino({ level: config.logLevel }, pretty({ destination: stream, sync: true, colorize: stream.isTTY === true, translateTime: 'HH:MM:ss', ignore: 'pid,hostname' }))
}

/** One line per request (config `logRequests`), after it is answered. */
async function accessLog (app) {
  app.decorateRequest('tileLookup', null) // 'hit' | 'joined' | 'miss', set by the tile route (lib/pipeline.js lastLookup)
  app.addHook('onRequest', (request, reply, done) => {
    request.raw.bytesBefore = request.raw.socket?.bytesWritten ?? 0
    done()
  })
  app.addHook('onResponse', (request, reply, done) => {
    const { params } = request
    const line = { reqId: request.id, method: request.method, url: loggedUrl(request), status: reply.statusCode }
    if (params?.set !== undefined) {
      line.set = app.catalog.get(params.set)?.id ?? params.set
      if (params.z !== undefined) Object.assign(line, { z: Number(params.z), x: Number(params.x), y: Number.parseInt(params.y, 10) })
    }
    // Bytes sent on the connection for this answer, headers included (as nginx's $bytes_sent).
    line.bytes = (request.raw.socket?.bytesWritten ?? 0) - request.raw.bytesBefore
    line.ms = Math.round(reply.elapsedTime * 100) / 100
    if (request.tileLookup !== null) line.cache = request.tileLookup
    request.log.info(line, 'request')
    done()
  })
}

export const accessLogPlugin = fp(accessLog, { name: 'tile-cannon-access-log', fastify: '5.x' })

// Features out of PostgreSQL into the response as they arrive: the FeatureCollection is its opening text, the rows'
// Feature texts joined by commas, and a closing text with numberReturned, numberMatched and links. A page that is
// complete within BUFFERED characters (most: 200 features are 30-60 KiB) is answered in one piece, with its length;
// a larger one is streamed, in chunks of CHUNK characters, and memory stays flat whatever its size: when the response
// (or its compressor) is full, the database connection is not read until it drains.
import { PassThrough } from 'node:stream'
import { promisify } from 'node:util'
import zlib from 'node:zlib'
import { BadRequest, isDataException, readFailure } from '../errors.js'
import { TextRows } from './row-stream.js'

const BUFFERED = 512 * 1024
const CHUNK = 16384
const HIGH_WATER = 65536
// JSON compresses well at low effort; the defaults (gzip 6, brotli 11) cost far more CPU for little.
const GZIP = { level: 4 }
const BROTLI = { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 4, [zlib.constants.BROTLI_PARAM_MODE]: zlib.constants.BROTLI_MODE_TEXT } }
const gzip = promisify(zlib.gzip)
const brotli = promisify(zlib.brotliCompress)
const noop = () => {}

/** Where a streamed answer's bytes go first: a compressor for the coding chosen, or a pass-through. */
function bodyStream (coding) {
  if (coding === 'gzip') return zlib.createGzip({ ...GZIP, highWaterMark: HIGH_WATER })
  if (coding === 'br') return zlib.createBrotliCompress({ ...BROTLI, highWaterMark: HIGH_WATER })
  return new PassThrough({ highWaterMark: HIGH_WATER })
}

/** A whole answer's bytes in `coding` (compressed on libuv's pool, off the event loop). */
export function encodeWhole (text, coding) {
  const bytes = Buffer.from(text)
  if (coding === 'gzip') return gzip(bytes, GZIP)
  if (coding === 'br') return brotli(bytes, BROTLI)
  return Promise.resolve(bytes)
}

/**
 * What a failed query becomes: a value PostgreSQL could not take as its column's type (SQLSTATE class 22: a date
 * that is no date, an integer out of range) is the client's mistake, 400; the database down, busy or slow is 503 for
 * that set (lib/errors.js readFailure); anything else is a bug (500).
 */
export function queryFailure (entry, err, log, clientValues) {
  // A data exception is the client's where it sent values PostgreSQL casts (filters, a feature id); else the data's.
  if (clientValues && isDataException(err)) return new BadRequest(`a value does not fit its property: ${String(err.message).split('\n')[0]}`)
  return readFailure(entry, err, log, 'these features', 'features read failed')
}

/**
 * Runs a statement on a connection of `pool`: the answer is `prefix`, the rows (at most `limit`: one more says there
 * is a next page) and `suffix(returned, more)` (may be a promise). Resolves with `{ text }` (the whole answer) when it
 * is complete within BUFFERED characters, else with `{ stream }` (the answer so far and the rest as it comes, in
 * `coding`) once it is past them; rejects with the query's error if it failed before (the caller answers the error
 * instead). After that, a failure cuts the stream short (destroys it); the client going away (the stream closed
 * early) ends the query: its connection is closed, which stops the backend.
 */
export function answerRows ({ pool, statement, values, limit, prefix, suffix, coding }) {
  return new Promise((resolve, reject) => {
    let settled = false
    let failed = false
    let out = null // the stream, once the answer is past BUFFERED
    let client = null
    let rows = null
    let parts = []
    let size = 0
    let count = 0
    let more = false
    let first = true

    // A database error leaves the connection usable (pg reads on to ReadyForQuery); a lost one, or a query cut off
    // by us, is closed.
    const release = (err) => {
      if (client === null) return
      const c = client
      client = null
      c.release(err && typeof err.severity !== 'string' ? err : undefined)
    }
    const fail = (err) => {
      if (failed) return
      failed = true
      release(err)
      if (settled) out?.destroy(err)
      else {
        settled = true
        reject(err)
      }
    }
    const joined = () => {
      if (parts.length === 0) return '' // nothing since the last write: no separator (`},]` was invalid JSON)
      const text = (first ? '' : ',') + parts.join(',')
      first = false
      parts = []
      size = 0
      return text
    }
    const write = (text) => {
      if (!out.write(text)) rows?.pause()
    }
    /** Past BUFFERED: the answer becomes a stream, handed over now with what there is so far. */
    const startStream = () => {
      out = bodyStream(coding)
      out.on('drain', () => rows?.resume())
      out.on('close', () => {
        if (rows === null || !rows.done) fail(new Error('the client went away'))
      })
      out.on('error', noop) // what destroyed it is answered above; Fastify sees the stream close early
      write(prefix + joined())
      settled = true
      resolve({ stream: out })
    }
    const sink = {
      row (text) {
        if (++count > limit) {
          more = true
          return
        }
        parts.push(text)
        size += text.length
        if (out === null ? size >= BUFFERED : size >= CHUNK) {
          if (out === null) startStream()
          else write(joined())
        }
      },
      end () {
        release()
        Promise.resolve(suffix(Math.min(count, limit), more)).then((end) => {
          if (failed) return
          if (out !== null) {
            out.end(joined() + end)
            return
          }
          settled = true
          resolve({ text: prefix + joined() + end })
        }, fail)
      },
      error: fail,
    }
    pool.connect().then((c) => {
      if (failed) return c.release()
      client = c
      rows = new TextRows(statement.name, statement.text, values, sink)
      c.query(rows)
    }, fail)
  })
}

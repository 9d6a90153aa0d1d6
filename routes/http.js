// HTTP details the routes share.
import { createHash } from 'node:crypto'
import { etagMatches } from '../lib/pipeline.js'
import { SMALL, codedEtag, compressible, documentCoding, documents, varyOnCoding } from '../lib/compression.js'

/**
 * Every route answers GET and HEAD, declared together rather than through Fastify's exposeHeadRoutes: its automatic
 * HEAD route sets `Content-Length: 0` on bodiless answers (204, 304), which RFC 9110 forbids.
 */
export const GET_HEAD = ['GET', 'HEAD']

// An HTTP-date in any of its three forms (RFC 9110 §5.6.7, which a recipient must all read): IMF-fixdate, and the
// obsolete RFC 850 and asctime forms.
const DAY = '(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)'
const MONTH = '(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)'
const TIME = String.raw`\d{2}:\d{2}:\d{2}`
const HTTP_DATE = new RegExp(String.raw`^(?:${DAY}, \d{2} ${MONTH} \d{4} ${TIME} GMT` + // IMF-fixdate
  String.raw`|(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day, \d{2}-${MONTH}-\d{2} ${TIME} GMT` + // RFC 850
  String.raw`|${DAY} ${MONTH} [ \d]\d ${TIME} \d{4})$`) // asctime

/** An HTTP-date's time (ms), or NaN for a value that is not one (`Date.parse` reads far more, ISO dates, `0`…). */
export function parseHttpDate (value) {
  if (typeof value !== 'string' || !HTTP_DATE.test(value)) return NaN
  return Date.parse(value.endsWith(' GMT') ? value : `${value} GMT`) // asctime's is GMT too, without saying so
}

/** Text made safe for HTML, in elements and in quoted attributes (the home page, the viewer's pages). */
export const escapeHtml = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)

/**
 * onSend hook for metadata answers (TileJSON, /list, /catalog, /meta, the index page, styles, sprites, fonts): a Cache-Control, a strong
 * ETag from the body, and 304 to a matching If-None-Match, so a CDN can revalidate instead of guessing freshness.
 * A text answer (JSON, HTML, glyph PBF…) of SMALL bytes or more is negotiated: brotli or gzip when the client takes
 * it, made once per content (hash) and coding and kept (lib/compression.js), with `Vary: Accept-Encoding` and an ETag
 * per coding. (Not for tiles: they carry their validators and codings from the pipeline.)
 */
export function metadataValidators (cacheControl) {
  return function validators (request, reply, payload, done) {
    // Strings (serialised JSON, HTML) and Buffers (sprites, glyphs); not streams.
    if (reply.statusCode !== 200 || (typeof payload !== 'string' && !Buffer.isBuffer(payload))) return done(null, payload)
    const hash = createHash('sha1').update(payload).digest('base64url').slice(0, 27)
    // An answer coded already (the OGC API documents, lib/features) has the ETag of the bytes sent.
    const negotiated = !reply.hasHeader('content-encoding') && compressible(reply.getHeader('content-type')) &&
      (typeof payload === 'string' ? Buffer.byteLength(payload) : payload.length) >= SMALL
    const coding = negotiated ? documentCoding(request.headers['accept-encoding']) : 'identity'
    if (negotiated) varyOnCoding(reply)
    const etag = codedEtag(`"${hash}"`, coding)
    reply.header('etag', etag)
    reply.header('cache-control', cacheControl)
    const inm = request.headers['if-none-match']
    if (inm !== undefined && etagMatches(inm, etag)) {
      reply.code(304)
      reply.removeHeader('content-type') // a 304 describes the 200 it stands for; it has no content of its own
      return done(null, null)
    }
    if (coding === 'identity') return done(null, payload)
    const send = (answer) => {
      if (answer.coding !== 'identity') reply.header('content-encoding', answer.coding)
      done(null, answer.bytes)
    }
    const answer = documents.get(hash, coding, () => Buffer.from(payload))
    if (answer instanceof Promise) answer.then(send, (err) => done(err))
    else send(answer)
  }
}

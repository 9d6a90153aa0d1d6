// HTTP details the routes share.
import { createHash } from 'node:crypto'
import { etagMatches } from '../lib/pipeline.js'

/**
 * Every route answers GET and HEAD, declared together rather than through Fastify's exposeHeadRoutes: its automatic
 * HEAD route sets `Content-Length: 0` on bodiless answers (204, 304), which RFC 9110 forbids.
 */
export const GET_HEAD = ['GET', 'HEAD']

/** Text made safe for HTML, in elements and in quoted attributes (the home page, the viewer's pages). */
export const escapeHtml = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)

/**
 * onSend hook for metadata answers (TileJSON, /list, /catalog, /meta, the index page, styles, sprites, fonts): a Cache-Control, a strong
 * ETag from the body, and 304 to a matching If-None-Match, so a CDN can revalidate instead of guessing freshness.
 * (Not for tiles: they carry their validators from the pipeline.)
 */
export function metadataValidators (cacheControl) {
  return function validators (request, reply, payload, done) {
    // Strings (serialised JSON, HTML) and Buffers (sprites, glyphs); not streams.
    if (reply.statusCode !== 200 || (typeof payload !== 'string' && !Buffer.isBuffer(payload))) return done(null, payload)
    const etag = `"${createHash('sha1').update(payload).digest('base64url').slice(0, 27)}"`
    reply.header('etag', etag)
    reply.header('cache-control', cacheControl)
    const inm = request.headers['if-none-match']
    if (inm !== undefined && etagMatches(inm, etag)) {
      reply.code(304)
      reply.removeHeader('content-type') // a 304 describes the 200 it stands for; it has no content of its own
      return done(null, null)
    }
    done(null, payload)
  }
}

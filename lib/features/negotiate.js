// Which representation an answer takes: `f` when given (json, html; geojson for features), else the Accept header,
// where HTML wins only when it is asked for explicitly above every JSON type (a browser); `*/*` gets JSON.
import { BadRequest } from '../errors.js'
import { acceptMask, chooseEncoding } from '../encoding.js'

const JSON_TYPES = new Set(['application/json', 'application/geo+json', 'application/schema+json', 'application/*'])

// Clients send few distinct Accept headers: parsed once each.
const memo = new Map()

/** Accept → { html, json, geojson }: the q of each, 0 when not named. */
function acceptQ (header = '') {
  let q = memo.get(header)
  if (q !== undefined) return q
  q = { html: 0, json: 0, geojson: 0 }
  for (const part of String(header).split(',')) {
    const [type, ...params] = part.trim().toLowerCase().split(';')
    const qp = params.map((p) => p.trim()).find((p) => p.startsWith('q='))
    const value = qp === undefined ? 1 : Number(qp.slice(2)) || 0
    if (type === 'text/html') q.html = Math.max(q.html, value)
    else if (type === 'application/geo+json') q.geojson = Math.max(q.geojson, value)
    else if (JSON_TYPES.has(type)) q.json = Math.max(q.json, value)
  }
  if (memo.size > 500) memo.clear()
  memo.set(header, q)
  return q
}

/**
 * The format of an answer among `allowed` (the first is the default): 'json', 'geojson' or 'html'. `f=` decides;
 * else Accept: html over any JSON when preferred; for features, `application/json` alone asked gets 'json'.
 */
export function chooseFormat (request, allowed) {
  const f = request.query.f
  if (f !== undefined) {
    if (typeof f !== 'string' || !allowed.includes(f)) throw new BadRequest(`f is one of ${allowed.join(', ')}`)
    return f
  }
  if (allowed.includes('html') && prefersHtml(request)) return 'html'
  const q = acceptQ(request.headers.accept)
  if (allowed[0] === 'geojson' && q.json > q.geojson) return 'json'
  return allowed[0]
}

/** Whether a client asks for HTML above every JSON type (a browser), by its Accept header. */
export function prefersHtml (request) {
  const q = acceptQ(request.headers.accept)
  return q.html > 0 && q.html > Math.max(q.json, q.geojson)
}

/**
 * The content coding of a compressible answer: the one the client's q-values rank highest; on a tie, or without
 * q-values, gzip (at the levels of lib/features/items.js, cheaper on JSON), else brotli, else none.
 */
export function chooseCoding (request) {
  // Negotiated as a tile stored in gzip is (lib/encoding.js): that coding first on a tie, then brotli, then gzip.
  return chooseEncoding('gzip', true, acceptMask(request.headers['accept-encoding']))
}

// The viewer, as a plugin: /viewer/:set and /viewer/styles/:id, full-window MapLibre GL JS maps of a set (an inspect
// style for vector tiles, controls for raster options) or a style (beside its server-rendered tiles). MapLibre GL JS
// comes from the npm dependency and is served from here (/viewer/assets/), never a CDN: the viewer works offline. The
// page gets what it needs as JSON in the page and then asks the same TileJSON and tile routes as any client.
// `viewer: false` (--no-viewer) leaves all of it out.
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import fastifyStatic from '@fastify/static'
import fp from 'fastify-plugin'
import { NotFound, errorHandler, sendError } from '../errors.js'
import { addVary, keyed, tileJsonUrl } from '../urls.js'
import { CodedDocuments, SMALL, codedEtag, compressible, documentCoding, varyOnCoding } from '../compression.js'
import { etagMatches } from '../pipeline.js'
import { isDrawable, isVector } from '../tiletype.js'
import { tileJsonFormat } from '../resolve.js'
import { setsOf } from '../style/rewrite.js'
import { unionBounds } from '../tilemath.js'
import { GET_HEAD, escapeHtml as escape, parseHttpDate } from '../../routes/http.js'
import { prefersHtml } from '../features/negotiate.js'

const PUBLIC = join(dirname(fileURLToPath(import.meta.url)), 'public')
const MAPLIBRE = join(dirname(createRequire(import.meta.url).resolve('maplibre-gl/package.json')), 'dist')
export const ASSETS = '/viewer/assets'
const ASSET_REFUSALS = { 412: 'the file does not meet the request\'s preconditions', 416: 'the range asked for is not in the file' }

// JSON inside <script>: `<` escaped, so no value can close the element.
const scriptJson = (value) => JSON.stringify(value).replace(/</g, '\\u003c')

/**
 * A viewer page: the map, the panel the script fills, and `view` (what the script needs). `home`: the home page's URL.
 * Assets need no API key (lib/access.js), so their URLs are the same for everyone.
 */
function page (base, home, title, view) {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escape(title)} · tile-cannon</title><link rel="icon" href="data:,">
<link rel="stylesheet" href="${escape(base)}${ASSETS}/maplibre-gl.css">
<link rel="stylesheet" href="${escape(base)}${ASSETS}/viewer.css">
</head><body>
<div id="maps"><div id="map"></div></div>
<aside id="panel"><h1><a href="${escape(home)}" title="all sets and styles">tile-cannon</a> · ${escape(title)}</h1><div id="controls"></div><div id="legend"></div></aside>
<div id="status" aria-live="polite"></div>
<script type="application/json" id="view">${scriptJson(view)}</script>
<script type="module" src="${escape(base)}${ASSETS}/viewer.js"></script>
</body></html>`
}

// The assets' coded forms, made at the first request for each file version and coding (a few files, 1.5 MB of them
// compressed): shared by every app of the process, keyed by file and @fastify/send's ETag (size and time).
const assetCodings = new CodedDocuments()
const ASSET_PATH = Symbol('asset path')

/**
 * onSend of the assets: a text asset (JavaScript, CSS) in brotli or gzip when the client takes it, from
 * assetCodings, with an ETag of that coding (and a 304 for it) and `Vary: Accept-Encoding`; images and ranges as
 * @fastify/static sends them.
 */
async function codedAsset (request, reply, payload) {
  const path = reply.raw[ASSET_PATH]
  const etag = reply.getHeader('etag')
  const inm = request[HELD_INM]
  if (reply.statusCode !== 200 || path === undefined || typeof etag !== 'string' || reply.hasHeader('content-encoding') ||
    !compressible(reply.getHeader('content-type')) || !(Number(reply.getHeader('content-length')) >= SMALL)) {
    return inm !== undefined && reply.statusCode === 200 && typeof etag === 'string' && etagMatches(inm, etag) ? notModified(reply, payload) : payload
  }
  varyOnCoding(reply)
  const coding = documentCoding(request.headers['accept-encoding'])
  if (coding === 'identity') return payload
  const coded = codedEtag(etag, coding)
  reply.header('etag', coded)
  reply.removeHeader('accept-ranges') // ranges are of the file as it is, not of its coded form
  if (inm !== undefined && etagMatches(inm, coded)) return notModified(reply, payload)
  payload?.destroy?.() // the file's stream, not read
  // Read once per file version and coding (a few ms for MapLibre GL JS's megabyte), then served from memory.
  const { bytes, coding: sent } = await assetCodings.get(`${path}\n${etag}`, coding, () => readFileSync(path))
  if (sent !== 'identity') reply.header('content-encoding', sent)
  reply.header('content-length', bytes.length)
  return bytes
}

const HELD_INM = Symbol('If-None-Match held from @fastify/send')

/**
 * onRequest of the assets: a client taking br or gzip has its If-None-Match held back from @fastify/send, which would
 * answer 304 to the identity file's ETag where the answer is the coded file; codedAsset compares it with the ETag
 * of what it sends.
 */
function holdIfNoneMatch (request, reply, done) {
  const inm = request.headers['if-none-match']
  if (inm !== undefined && documentCoding(request.headers['accept-encoding']) !== 'identity') {
    request[HELD_INM] = inm
    delete request.raw.headers['if-none-match']
  }
  done()
}

/**
 * onRequest of the assets, before holdIfNoneMatch: If-Modified-Since reaches @fastify/send only where RFC 9110 §13.1.3
 * lets it count. Not beside If-None-Match (send ignores it then, but no longer once holdIfNoneMatch took that away);
 * not a value that is no HTTP-date (send takes whatever Date.parse reads); not a date later than now (invalid in RFC
 * 2616 §14.25: no Last-Modified of ours is, and a 304 to it would hide every change until then). asctime's form is
 * passed as IMF-fixdate, which send reads as GMT (it read asctime's in the server's time zone).
 */
function checkIfModifiedSince (request, reply, done) {
  const headers = request.raw.headers
  const ims = headers['if-modified-since']
  if (ims !== undefined) {
    const since = parseHttpDate(ims)
    if (headers['if-none-match'] !== undefined || !(since <= Date.now())) delete headers['if-modified-since']
    else headers['if-modified-since'] = new Date(since).toUTCString()
  }
  done()
}

function notModified (reply, payload) {
  payload?.destroy?.()
  reply.code(304)
  reply.removeHeader('content-type') // a 304 describes the 200 it stands for; it has no content of its own
  reply.removeHeader('content-length')
  return null
}

async function viewerPlugin (app, config) {
  if (config.viewer === false) return
  const { catalog, styles, renderer, links } = app
  // The viewer's own script and style, and MapLibre GL JS's files (its module loads its worker from beside itself).
  // With ETag and Last-Modified (@fastify/static) and max-age 0: each page load revalidates (304), so the script an
  // upgrade brings is used at once.
  await app.register(async function assets (scope) {
    // What @fastify/send refuses (`..`, a NUL byte: 400/403 http-errors) is a file that is not there, not a bug (500).
    // A file that is there answers its conditions (RFC 9110): 412 for a failed If-Match or If-Unmodified-Since, 416
    // with `Content-Range: bytes */<size>` (send's header) for a range past its end.
    scope.setErrorHandler((err, request, reply) => {
      if (err.statusCode === 412 || err.statusCode === 416) return sendError(reply, { message: ASSET_REFUSALS[err.statusCode], headers: err.headers }, err.statusCode)
      if (err.statusCode >= 400 && err.statusCode < 500) return sendError(reply, new NotFound('no such file'))
      return errorHandler(err, request, reply)
    })
    scope.addHook('onRequest', checkIfModifiedSince)
    scope.addHook('onRequest', holdIfNoneMatch)
    scope.addHook('onSend', codedAsset)
    await scope.register(fastifyStatic, {
      root: [PUBLIC, MAPLIBRE], prefix: `${ASSETS}/`, decorateReply: false, index: false, maxAge: 0,
      setHeaders: (res, path) => { res[ASSET_PATH] = path }, // the file sent, for codedAsset
    })
  })

  const html = (reply, text) => {
    reply.type('text/html; charset=utf-8')
    reply.header('cache-control', 'no-cache') // the page names the set's current state; assets carry their own validators
    return text
  }

  // What is not there (no such set or style, one that cannot be served or drawn) is a 404 page for a browser, saying
  // why with a link home; JSON (as every other 404) for other clients. Every answer says it varies by Accept, so a
  // shared cache keeps the two apart (RFC 9110 §12.5.5).
  const orNotFoundPage = (handler) => async (request, reply) => {
    addVary(reply, 'Accept')
    try {
      return await handler(request, reply)
    } catch (err) {
      if (!(err instanceof NotFound) || !prefersHtml(request)) throw err
      const home = keyed(request, `${links(request, reply)}/`)
      reply.code(404)
      return html(reply, `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>not found · tile-cannon</title><link rel="icon" href="data:,"></head>
<body style="font:15px/1.45 system-ui,sans-serif;margin:1em"><h1>not found</h1><p>${escape(err.message)}</p>
<p><a href="${escape(home)}">all sets and styles</a></p></body></html>`)
    }
  }

  app.route({
    method: GET_HEAD,
    url: '/viewer/:set',
    handler: orNotFoundPage(async (request, reply) => {
      const entry = catalog.get(request.params.set)
      if (entry === undefined) throw new NotFound(`no set '${request.params.set}'`)
      if (entry.source === null) throw new NotFound(`set '${entry.id}' cannot be served: ${entry.reason}`)
      if (!isDrawable(entry.source.format)) throw new NotFound(`set '${entry.id}' has ${entry.source.format ?? 'unknown'} tiles, which a map cannot draw`)
      const base = links(request, reply)
      const { source } = entry
      // ?encoding=mlt: an MVT set drawn from its tiles made into MLT (its TileJSON asked the same way).
      const vector = isVector(source.format)
      const format = vector ? tileJsonFormat(entry, request.query) : source.format
      const asMlt = format === 'mlt' && source.format === 'pbf'
      return html(reply, page(base, keyed(request, `${base}/`), entry.id, {
        type: vector ? 'vector' : 'raster',
        id: entry.id,
        kind: entry.kind,
        format: format ?? null,
        tilejson: keyed(request, tileJsonUrl(base, entry.id) + (asMlt ? '?encoding=mlt' : '')),
        options: source.options ?? [],
        // A set across the antimeridian: its own box (west above east), where TileJSON's is the world's width.
        extent: source.extent ?? null,
        // The viewer's switch between a vector set's own tiles and their MLT variant.
        encodings: source.format === 'pbf' ? { mvt: keyed(request, `${base}/viewer/${encodeURIComponent(entry.id)}`), mlt: keyed(request, `${base}/viewer/${encodeURIComponent(entry.id)}?encoding=mlt`) } : null,
      }))
    }),
  })

  /** The bounds of the sets a style draws (TileJSON's, merged), or null. */
  function setsBounds (style) {
    const all = setsOf(style, (name) => catalog.get(name)).map((e) => e.source.tilejson.bounds).filter(Array.isArray)
    return all.length === 0 ? null : unionBounds(all)
  }

  app.route({
    method: GET_HEAD,
    url: '/viewer/styles/:id',
    handler: orNotFoundPage(async (request, reply) => {
      const style = styles.served(request.params.id)
      const base = links(request, reply)
      const id = encodeURIComponent(style.id)
      return html(reply, page(base, keyed(request, `${base}/`), style.name, {
        type: 'style',
        id: style.id,
        style: keyed(request, `${base}/styles/${id}/style.json`),
        // The same map drawn by the server (MapLibre Native), to compare: only where rendering runs.
        rendered: renderer.available ? keyed(request, `${base}/styles/${id}.json`) : null,
        renderedWhyNot: renderer.available ? null : renderer.reason,
        // A style that says where to look is shown there; else where its sets have data.
        fit: Array.isArray(style.json.center) && Number.isFinite(style.json.zoom) ? null : setsBounds(style),
      }))
    }),
  })
}

export default fp(viewerPlugin, { name: 'tile-cannon-viewer', fastify: '5.x', dependencies: ['tile-cannon-styles', 'tile-cannon-render'] })

// Rendered raster tiles of a style (MapLibre Native, lib/style/render): /styles/:id[/256]/:z/:x/:y[@2x|@3x].png|jpg|webp
// in 256 px, /styles/:id/512/:z/:x/:y… in 512 px, and their TileJSON at /styles/[256/|512/]:id.json; static images at
// /styles/:id/static/:view/:size (lib/style/static.js). Through the pipeline: cached,
// ETag, 304, encodings, as any set's tiles; 503 with the reason when no engine runs.
import { BadRequest, Unavailable } from '../lib/errors.js'
import { resolveTile } from '../lib/resolve.js'
import { shortLifeOf } from '../lib/pipeline.js'
import { STATIC_DEFAULTS, engineRequest, parseOverlays, parseStatic, withOverlays } from '../lib/style/static.js'
import { GET_HEAD, metadataValidators } from './http.js'
import { keyed } from '../lib/urls.js'
import { tileWriter } from './tile-answer.js'

export default async function renderRoutes (app) {
  const { styles, renderer, pipeline, links, metadataValidators: onSend } = app
  const writeTile = tileWriter(pipeline)

  const styleOf = (id) => {
    const style = styles.served(id)
    if (!renderer.available) throw new Unavailable(`style '${id}' cannot be rendered: ${renderer.reason}`)
    return style
  }

  const tileHandler = (size) => function handler (request, reply) {
    const style = styleOf(request.params.id)
    const entry = renderer.tileEntry(style, size)
    const tile = resolveTile({ get: () => entry }, { set: style.id, z: request.params.z, x: request.params.x, y: request.params.y }, request.query)
    const record = pipeline.record(entry, tile.z, tile.x, tile.y, undefined, tile.rendering)
    if (record instanceof Promise) return record.then((loaded) => writeTile(request.raw, reply.raw, entry, loaded, reply))
    return writeTile(request.raw, reply.raw, entry, record, reply)
  }
  // tileserver-gl's forms: the size in the path is optional, 256 px without it.
  for (const [url, size] of [['/styles/:id/:z/:x/:y', 256], ['/styles/:id/256/:z/:x/:y', 256], ['/styles/:id/512/:z/:x/:y', 512]]) {
    app.route({ method: GET_HEAD, url, handler: tileHandler(size) })
  }

  // The raster TileJSON of a style, for Leaflet, QGIS and anything that takes XYZ rasters; its tiles in the form asked
  // for (/styles/512/:id.json: /styles/:id/512/{z}/{x}/{y}.png), as tileserver-gl's.
  const tileJsonHandler = (size, path) => async function handler (request, reply) {
    const style = styles.served(request.params.id)
    const tj = renderer.tileEntry(style, size).source.tilejson
    return { ...tj, id: style.id, tiles: [keyed(request, `${links(request, reply)}/styles/${encodeURIComponent(style.id)}${path}/{z}/{x}/{y}.png`)], tileSize: size }
  }
  for (const [url, size, path] of [['/styles/:id.json', 256, ''], ['/styles/256/:id.json', 256, '/256'], ['/styles/512/:id.json', 512, '/512']]) {
    app.route({ method: GET_HEAD, url, onSend, handler: tileJsonHandler(size, path) })
  }

  // Static images: a centre and zoom (zoom of 256 px web maps, as tileserver-gl: the engine draws one lower), a bbox
  // (with `padding`, a share of the smaller side), or `auto` (the overlays' bbox). Not cached (each view is its own);
  // an ETag, and the tiles' Cache-Control (an image drawn without a remote source that failed: its short lifetime).
  const limits = { ...STATIC_DEFAULTS, ...app.config.render }
  const shortLives = new WeakMap() // reply → the lifetime of its incomplete image (ms)
  app.route({
    method: GET_HEAD,
    url: '/styles/:id/static/:view/:size',
    onSend: [metadataValidators(app.config.cacheControl), (request, reply, payload, done) => {
      const ms = shortLives.get(reply)
      if (ms !== undefined) reply.header('cache-control', `public, max-age=${Math.floor(ms / 1000)}`)
      done(null, payload)
    }],
    handler: async (request, reply) => {
      // The request is checked before the engine is asked for: a wrong one is a 400 (not to be retried), even while
      // rendering is down (503, worth retrying).
      styles.served(request.params.id)
      const view = parseStatic(request.params.view, request.params.size, limits)
      const overlays = parseOverlays(request.query, limits)
      const padding = request.query.padding === undefined ? 0.1 : Number(request.query.padding)
      if (!(padding >= 0 && padding < 0.5)) throw new BadRequest('padding is a share of the image, 0 to 0.5')
      const op = engineRequest(view, overlays, padding)
      const style = styleOf(request.params.id)
      const icons = overlays.markers.filter((m) => m.icon !== null).map((m) => m.icon)
      const sprite = icons.length > 0 ? await renderer.markers.sheet(icons) : undefined
      const overlay = overlays.paths.length + overlays.markers.length > 0 ? withOverlays(renderer.renderStyleObject(style), overlays, sprite, op.shrink) : undefined
      const bytes = await renderer.renderView(style, op, view.format, overlay)
      if (shortLifeOf(bytes) !== undefined) shortLives.set(reply, shortLifeOf(bytes))
      reply.type(IMAGE_TYPES[view.format])
      return bytes
    },
  })
}

const IMAGE_TYPES = { png: 'image/png', jpg: 'image/jpeg', webp: 'image/webp' }

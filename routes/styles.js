// Styles as tileserver-gl serves them: /styles.json, /styles/:id/style.json (rewritten for this server, lib/style/
// rewrite.js) and the sprites a style keeps beside it: /styles/:id/sprite[@2x].json|png, and for a style with several
// sprites (`sprite: [{id, url}]`) /styles/:id/sprite/:spriteId[@2x].json|png; and the GeoJSON files its sources name
// by a relative path: /styles/:id/files/<path> (those files only; a fixed segment, so no path of a file is ever taken
// for a rendered tile's /styles/:id/:z/:x/:y or a sprite's route).
import { BadRequest, NotFound } from '../lib/errors.js'
import { FILE_MEDIA_TYPES, rewriteStyle } from '../lib/style/rewrite.js'
import { GET_HEAD } from './http.js'
import { keyed, ownBasesOf } from '../lib/urls.js'

export default async function styleRoutes (app) {
  const { styles, sprites, catalog, links, metadataValidators: onSend } = app
  const warned = new Set()
  const ownBases = ownBasesOf(app.config, app.server)

  app.route({
    method: GET_HEAD,
    url: '/styles.json',
    onSend,
    handler: async (request, reply) => {
      const base = links(request, reply)
      return styles.list().map((s) => ({ version: 8, name: s.name, id: s.id, url: keyed(request, `${base}/styles/${encodeURIComponent(s.id)}/style.json`) }))
    },
  })

  app.route({
    method: GET_HEAD,
    url: '/styles/:id/style.json',
    onSend,
    handler: async (request, reply) => {
      const style = styles.served(request.params.id)
      const findSet = (name) => catalog.get(name)?.id
      // A style naming a set this server lacks is served (the rest of the map draws); said once per style revision.
      const missing = (source, url) => {
        const key = `${style.id}\n${style.revision}\n${source}`
        if (warned.has(key) || warned.size > 10_000) return
        warned.add(key)
        request.log.warn({ style: style.id, source, url }, 'style source names no set here')
      }
      // URLs naming this server absolutely are the client's too: at its base, with its key.
      return rewriteStyle(style, links(request, reply), findSet, missing, (url) => keyed(request, url), ownBases(), (id) => styles.get(id))
    },
  })

  async function sendSprite (reply, style, spriteId, suffix) {
    const { bytes, type } = await sprites.read(style, spriteId, suffix)
    reply.type(type)
    return bytes
  }

  /** A file the style's sources name (GeoJSON `data`, an image, a video), by its path from the style's folder; undefined for none. */
  async function sendData (reply, id, path) {
    const style = styles.served(id)
    if (!style.dataFiles.has(path)) return undefined // the URL the style was given is its path, encoded (dataUrlOf)
    const bytes = await styles.readData(style.id, path)
    reply.type(FILE_MEDIA_TYPES[path.slice(path.lastIndexOf('.') + 1).toLowerCase()])
    return bytes
  }

  app.route({
    method: GET_HEAD,
    url: '/styles/:id/:file',
    onSend,
    handler: async (request, reply) => {
      const { id, file } = request.params
      if (!file.startsWith('sprite')) throw new NotFound('no such route')
      return sendSprite(reply, styles.served(id), undefined, file.slice('sprite'.length))
    },
  })

  // A file beside the style (`points.geojson`, `data/geo/points.geojson`, an image source's `overlay.png`).
  app.route({
    method: GET_HEAD,
    url: '/styles/:id/files/*',
    onSend,
    handler: async (request, reply) => {
      const data = await sendData(reply, request.params.id, request.params['*'])
      if (data === undefined) throw new NotFound('no such route')
      return data
    },
  })

  app.route({
    method: GET_HEAD,
    url: '/styles/:id/sprite/:file',
    onSend,
    handler: async (request, reply) => {
      const { id, file } = request.params
      const at = file.search(/(@[23]x)?\.(json|png)$/)
      if (at <= 0) throw new BadRequest('a sprite file is NAME[@2x].json or .png')
      return sendSprite(reply, styles.served(id), file.slice(0, at), file.slice(at))
    },
  })
}

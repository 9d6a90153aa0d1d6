// /list: the set ids. /catalog: what each set is. (/health and /ready: routes/health.js.)
import { GET_HEAD } from './http.js'
import { keyed, tileJsonUrl } from '../lib/urls.js'

export default async function listRoutes (app) {
  const { catalog, links, metadataValidators: onSend } = app

  app.route({ method: GET_HEAD, url: '/list', onSend, handler: async () => catalog.available().map((entry) => entry.id) })

  app.route({
    method: GET_HEAD,
    url: '/catalog',
    onSend,
    handler: async (request, reply) => {
      const base = links(request, reply)
      return catalog.available().map(({ id, kind, source }) => ({
        id,
        kind,
        format: source.format ?? null,
        name: source.tilejson.name,
        minzoom: source.tilejson.minzoom,
        maxzoom: source.tilejson.maxzoom,
        bounds: source.tilejson.bounds,
        tilejson: keyed(request, tileJsonUrl(base, id)),
      }))
    },
  })
}

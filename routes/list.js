// /list: the set ids. /catalog: what each set is. /health: 200 once the catalog is loaded.
import { GET_HEAD } from './http.js'
import { tileJsonUrl } from '../lib/urls.js'

export default async function listRoutes (app) {
  const { catalog, tileCache, links, metadataValidators: onSend } = app

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
        tilejson: tileJsonUrl(base, id),
      }))
    },
  })

  app.route({
    method: GET_HEAD,
    url: '/health',
    handler: async (request, reply) => {
      reply.header('cache-control', 'no-store') // the state of this process now, never a cached copy
      if (!catalog.loaded) return reply.code(503).send({ status: 'loading' })
      return { status: 'ok', sets: catalog.available().length, unavailable: catalog.unavailable(), cache: tileCache.stats }
    },
  })
}

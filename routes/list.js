// /list: the set ids. /catalog: what each set is. /health: 200 once the catalog is loaded.
import { baseUrl } from './meta.js'

export default async function listRoutes (app) {
  const { catalog, config, tileCache } = app

  app.get('/list', async () => catalog.available().map((entry) => entry.id))

  app.get('/catalog', async (request) => {
    const base = baseUrl(request, config.publicUrl)
    return catalog.available().map(({ id, kind, source }) => ({
      id,
      kind,
      format: source.format ?? null,
      name: source.tilejson.name,
      minzoom: source.tilejson.minzoom,
      maxzoom: source.tilejson.maxzoom,
      bounds: source.tilejson.bounds,
      tilejson: `${base}/${encodeURIComponent(id)}.json`,
    }))
  })

  app.get('/health', async (request, reply) => {
    if (!catalog.loaded) return reply.code(503).send({ status: 'loading' })
    return { status: 'ok', sets: catalog.available().length, unavailable: catalog.unavailable(), cache: tileCache.stats }
  })
}

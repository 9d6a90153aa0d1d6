// buildApp(config) → a Fastify instance with the catalog loaded and every route registered. Tests use it with inject().
import { STATUS_CODES } from 'node:http'
import Fastify, { LogController } from 'fastify'
import cors from '@fastify/cors'
import { TileCache } from './cache.js'
import { Catalog } from './catalog.js'
import { TileService } from './tiles.js'
import tileRoutes from '../routes/tiles.js'
import metaRoutes from '../routes/meta.js'
import listRoutes from '../routes/list.js'
import indexRoutes from '../routes/index.js'

export async function buildApp (config, { loggerInstance } = {}) {
  const app = Fastify({
    ...(loggerInstance ? { loggerInstance } : { logger: { level: config.logLevel } }),
    logController: new LogController({ disableRequestLogging: !config.logRequests }),
    exposeHeadRoutes: true,
    return503OnClosing: false, // requests already on a connection are served while closing: a pm2 reload drops none
    forceCloseConnections: 'idle',
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 512 },
    // A malformed URL (bad percent-encoding) gets our JSON shape too.
    frameworkErrors: (err, request, reply) => {
      const status = err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 400
      reply.code(status).send({ statusCode: status, error: STATUS_CODES[status], message: 'malformed request' })
    },
  })

  const tileCache = new TileCache(Math.floor(config.cacheMB * 1024 * 1024))
  const catalog = new Catalog({ config, log: app.log, cache: tileCache })
  app.decorate('config', config)
  app.decorate('tileCache', tileCache)
  app.decorate('catalog', catalog)
  app.decorate('tiles', new TileService({ catalog, cache: tileCache }))
  app.addHook('onClose', () => catalog.close())

  app.setErrorHandler((err, request, reply) => {
    if (err.validation) {
      return reply.code(400).send({ statusCode: 400, error: 'Bad Request', message: err.message })
    }
    const status = err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 500
    if (status === 500) request.log.error({ err }, 'request failed')
    return reply.code(status).send({ statusCode: status, error: STATUS_CODES[status], message: status === 500 ? 'internal error' : err.message })
  })
  app.setNotFoundHandler((request, reply) => {
    reply.code(404).send({ statusCode: 404, error: 'Not Found', message: 'no such route' })
  })

  if (config.cors !== false) {
    await app.register(cors, { origin: config.cors === '*' ? '*' : config.cors, methods: ['GET', 'HEAD'], maxAge: 86400 })
  }
  await app.register(tileRoutes)
  await app.register(metaRoutes)
  await app.register(listRoutes)
  await app.register(indexRoutes)

  await catalog.load()
  if (config.watch) catalog.watch()
  return app
}

// buildApp(config) → a Fastify instance with the catalog loaded and every route registered. Tests use it with inject().
import { STATUS_CODES, createServer } from 'node:http'
import Fastify, { LogController } from 'fastify'
import { corsPolicy, registerCors } from './cors.js'
import { TileCache } from './cache.js'
import { Catalog } from './catalog/index.js'
import rasterPool from './raster/pool.js'
import stylePlugin from './style/index.js'
import renderPlugin from './style/render/index.js'
import { TilePipeline } from './pipeline.js'
import { errorHandler } from './errors.js'
import { linkMaker, trustFunction } from './urls.js'
import { metadataValidators } from '../routes/http.js'
import tileRoutes, { tileFront } from '../routes/tiles.js'
import metaRoutes from '../routes/meta.js'
import listRoutes from '../routes/list.js'
import indexRoutes from '../routes/index.js'
import styleRoutes from '../routes/styles.js'
import fontRoutes from '../routes/fonts.js'
import renderRoutes from '../routes/render.js'
import viewerPlugin from './viewer/index.js'

export async function buildApp (config, { loggerInstance } = {}) {
  let front = null // the tile front (routes/tiles.js), once the routes exist: no request arrives before listen()
  const app = Fastify({
    serverFactory: (handler) => serverWithFront(handler, () => front),
    ...(loggerInstance ? { loggerInstance } : { logger: { level: config.logLevel } }),
    logController: new LogController({ disableRequestLogging: !config.logRequests }),
    // Fastify makes a pino child logger per request (its bindings serialised each time): ~2 % of a warm tile's CPU.
    // Without request logging, the app's logger serves: only errors are logged per request, and those say their URL.
    ...(config.logRequests ? {} : { childLoggerFactory: (logger) => logger }),
    exposeHeadRoutes: false, // routes declare GET and HEAD themselves (routes/http.js says why)
    // X-Forwarded-* only from configured proxies (lib/urls.js); Fastify applies it to request.protocol and .host.
    trustProxy: trustFunction(config.trustProxy) ?? false,
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
  // Resources the sets share, each a plugin that owns it (decorator + onClose); registered before the catalog uses them.
  await app.register(rasterPool, config.raster)
  const catalog = new Catalog({ config, log: app.log, cache: tileCache, services: { rasterPool: app.rasterPool } })
  app.decorate('config', config)
  app.decorate('tileCache', tileCache)
  app.decorate('catalog', catalog)
  const cors = corsPolicy(config.cors)
  app.decorate('pipeline', new TilePipeline({ catalog, cache: tileCache, log: app.log, cors }))
  app.decorate('links', linkMaker(config))
  app.decorate('metadataValidators', metadataValidators(config.metadataCacheControl))
  app.addHook('onClose', () => catalog.close())

  app.setErrorHandler(errorHandler) // each error type its status (lib/errors.js)
  app.setNotFoundHandler((request, reply) => {
    reply.code(404).send({ statusCode: 404, error: 'Not Found', message: 'no such route' })
  })

  registerCors(app, cors) // lib/cors.js
  await app.register(tileRoutes)
  await app.register(metaRoutes)
  await app.register(listRoutes)
  await app.register(stylePlugin, config)
  await app.register(styleRoutes)
  await app.register(fontRoutes)
  await app.register(renderPlugin, config)
  await app.register(renderRoutes)
  await app.register(indexRoutes) // the home page shows sets, styles and rendered previews
  await app.register(viewerPlugin, config)

  // Tiles answered before Fastify (routes/tiles.js tileFront), unless every request is to be logged by it.
  if (!config.logRequests) front = tileFront(app)

  await catalog.load()
  if (config.watch) catalog.watch()
  return app
}

/** Node's HTTP server as Fastify makes it (its default timeouts), with the tile front before Fastify's handler. */
function serverWithFront (handler, front) {
  const server = createServer((req, res) => {
    const tiles = front()
    if (tiles === null || !tiles(req, res, handler)) handler(req, res)
  })
  server.keepAliveTimeout = 72_000
  server.requestTimeout = 0
  server.setTimeout(0)
  return server
}

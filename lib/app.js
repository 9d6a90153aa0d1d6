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
import { closingConnections } from './closing.js'
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
import featuresPlugin from './features/index.js'
import variantsPlugin from './variants/index.js'
import limitsPlugin from './limits.js'
import accessPlugin from './access.js'
import healthRoutes from '../routes/health.js'
import metricsPlugin from './metrics/index.js'
import sheddingPlugin from './shedding.js'
import sharedCachePlugin from './shared-cache.js'
import tileDirPlugin from './tile-dir/index.js'
import { accessLogPlugin, makeLogger } from './logging.js'
import { methodsOf, refusedTarget, registerOptions } from './methods.js'
import { useProxyFromEnv } from './outbound-proxy.js'
import { ConfigError } from './config.js'

const ROUTER_OPTIONS = { ignoreTrailingSlash: true, maxParamLength: 512 }

/** buildApp's `signal` aborted during start-up: it closed what it had opened (server.js exits 0, never listening). */
export class StartupStopped extends Error {
  constructor () { super('start-up stopped') }
}

export async function buildApp (config, { loggerInstance, signal } = {}) {
  // Before anything fetches: http_proxy, https_proxy and no_proxy, as curl and GDAL follow them (lib/outbound-proxy.js).
  const proxy = await useProxyFromEnv().catch((err) => { throw new ConfigError(err.message) })
  let front = null // the tile front (routes/tiles.js), once the routes exist: no request arrives before listen()
  const app = Fastify({
    serverFactory: (handler) => serverWithFront(handler, () => front),
    loggerInstance: loggerInstance ?? makeLogger(config), // pretty on a terminal, JSON otherwise (lib/logging.js)
    // Requests are logged by the access log (lib/logging.js): one line each, with the tile's set, z/x/y and cache hit.
    logController: new LogController({ disableRequestLogging: true }),
    // Fastify makes a pino child logger per request (its bindings serialised each time): ~2 % of a warm tile's CPU.
    // Without request logging, the app's logger serves: only errors are logged per request, and those say their URL.
    ...(config.logRequests ? {} : { childLoggerFactory: (logger) => logger }),
    exposeHeadRoutes: false, // routes declare GET and HEAD themselves (routes/http.js says why)
    // X-Forwarded-* only from configured proxies (lib/urls.js); Fastify applies it to request.protocol and .host.
    trustProxy: trustFunction(config.trustProxy) ?? false,
    return503OnClosing: false, // requests already on a connection are served while closing: a pm2 reload drops none
    forceCloseConnections: 'idle',
    // Starting plugins that wait for child processes (the renderer's engine loads MapLibre Native) can take longer
    // than Fastify's default 10 s on a busy machine; a plugin timed out would leave its children running unowned.
    pluginTimeout: 120_000,
    routerOptions: ROUTER_OPTIONS,
    // A malformed URL (bad percent-encoding) gets our JSON shape too.
    frameworkErrors: (err, request, reply) => {
      const status = err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 400
      // The router refuses a path segment past maxParamLength (414); anything else here is a URL that does not decode.
      const message = err.code === 'FST_ERR_MAX_PARAM_LENGTH' ? 'a path segment is at most 512 characters' : 'malformed request'
      reply.code(status).send({ statusCode: status, error: STATUS_CODES[status], message })
    },
  })

  if (proxy !== null) app.log.info(proxy.description)

  const tileCache = new TileCache(Math.floor(config.cacheMB * 1024 * 1024))
  // Resources the sets share, each a plugin that owns it (decorator + onClose); registered before the catalog uses them.
  await app.register(rasterPool, { ...config.raster, s3: config.s3 }) // s3: the workers read remote COGs
  const catalog = new Catalog({ config, log: app.log, cache: tileCache, services: { rasterPool: app.rasterPool } })
  app.decorate('config', config)
  app.decorate('tileCache', tileCache)
  app.decorate('catalog', catalog)
  const cors = corsPolicy(config.cors)
  app.decorate('pipeline', new TilePipeline({ catalog, cache: tileCache, log: app.log, cors }))
  app.decorate('links', linkMaker(config))
  app.decorate('metadataValidators', metadataValidators(config.metadataCacheControl))
  app.addHook('onClose', () => catalog.close())
  // Closing never waits on a client's open connection (lib/closing.js).
  const closing = closingConnections(app.server)
  app.decorate('connections', closing) // server.js drains them on a signal, before close()
  app.addHook('preClose', (done) => {
    closing.start()
    done()
  })
  app.addHook('onClose', (instance, done) => {
    closing.stop()
    done()
  })

  app.setErrorHandler(errorHandler) // each error type its status (lib/errors.js)
  const allowedFor = methodsOf(app, ROUTER_OPTIONS) // before the routes: it records them (lib/methods.js)
  app.setNotFoundHandler((request, reply) => {
    const allowed = allowedFor(request)
    if (allowed !== null) {
      reply.header('allow', allowed.join(', '))
      return reply.code(405).send({ statusCode: 405, error: 'Method Not Allowed', message: `${request.method} is not served here: ${allowed.slice(0, -1).join(', ')} and ${allowed.at(-1)} are` })
    }
    reply.code(404).send({ statusCode: 404, error: 'Not Found', message: 'no such route' })
  })

  if (config.logRequests) await app.register(accessLogPlugin) // first: every answer is logged, refused ones too
  registerOptions(app, allowedFor, registerCors(app, cors)) // CORS (lib/cors.js), and OPTIONS on every path
  await app.register(sheddingPlugin, config) // first: a refused request costs nothing more
  await app.register(limitsPlugin, config) // 414 past the URL and query limits (lib/limits.js)
  await app.register(accessPlugin, config) // API keys, when configured; links carry them (lib/access.js)
  await app.register(sharedCachePlugin, config) // Redis, when configured: replicas share made tiles
  await app.register(healthRoutes)
  if (config.metrics.enabled !== false) await app.register(metricsPlugin, config)
  await app.register(variantsPlugin) // .mlt and .geojson of vector tiles, made on a worker pool (lib/variants)
  await app.register(tileRoutes)
  await app.register(metaRoutes)
  await app.register(listRoutes)
  await app.register(stylePlugin, config)
  await app.register(styleRoutes)
  await app.register(fontRoutes)
  await app.register(renderPlugin, config)
  await app.register(renderRoutes)
  await app.register(tileDirPlugin, config) // --tile-dir: tiles written through for nginx (lib/tile-dir)
  await app.register(indexRoutes) // the home page shows sets, styles and rendered previews
  await app.register(viewerPlugin, config)
  await app.register(featuresPlugin, config) // OGC API – Features over the PostGIS tables and views (lib/features)

  // Tiles answered before Fastify (routes/tiles.js tileFront), unless every request is to be logged by it.
  if (!config.logRequests) front = tileFront(app)

  await loadUnlessStopped(app, catalog, signal)
  catalog.warnUnmatchedOptions((id) => app.styles?.get(id) !== undefined)
  if (app.hasDecorator('tileDir')) await app.tileDir.open() // what is on disk, checked against the sets just opened
  if (config.watch) catalog.watch()
  return app
}

/**
 * Loads the catalog, or stops at `signal` (SIGTERM during start-up): opens waiting out a remote store's timeout are
 * left to fail unheard, and the app is closed (sets, pools, renderer children) before StartupStopped is thrown.
 */
async function loadUnlessStopped (app, catalog, signal) {
  if (signal === undefined) return catalog.load()
  const load = signal.aborted ? null : catalog.load()
  if (load !== null) {
    const stopped = new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }))
    if (!await Promise.race([load.then(() => false), stopped.then(() => true)])) return
    load.catch(() => {}) // (its failure after the stop is of no interest)
  }
  await app.close()
  throw new StartupStopped()
}

/** Node's HTTP server as Fastify makes it (its default timeouts), with the tile front before Fastify's handler. */
function serverWithFront (handler, front) {
  const server = createServer((req, res) => {
    const tiles = front()
    if (tiles === null || !tiles(req, res, handler)) {
      if (!refusedTarget(req, res)) handler(req, res) // `GET *` and the like (lib/methods.js)
    }
  })
  server.keepAliveTimeout = 72_000
  server.requestTimeout = 0
  server.setTimeout(0)
  return server
}

// The raster worker pool (piscina) as a Fastify plugin: it decorates `app.rasterPool` and destroys the pool when the
// app closes. The threads start with the first COG set that opens (a server without one starts none) and stop with the
// last one to close; they are sized from the validated config (raster.threads, raster.blockCacheMB).
import fp from 'fastify-plugin'
import { Piscina } from 'piscina'

/**
 * A pool started on demand: `acquire()` (a COG set opening) returns the running piscina pool, starting it if need be;
 * `release()` (that set closing) stops it once no set uses it; `close()` stops it for good.
 * @param {{ threads: number, blockCacheMB: number, s3?: object }} raster config.raster, and config.s3 for remote COGs
 */
export function createRasterPool ({ threads, blockCacheMB, s3 = {} }, log) {
  let pool = null
  let users = 0
  let closed = false

  function start () {
    const started = new Piscina({
      filename: new URL('./worker.cjs', import.meta.url).href, // worker.cjs says why
      minThreads: threads,
      maxThreads: threads,
      idleTimeout: 60000,
      concurrentTasksPerWorker: 2, // a remote block read waits on the network: let another tile run meanwhile
      // geotiff.js imports web-worker, which in any worker thread reads workerData.mod; an object without it keeps
      // that module inert. Decoded blocks: raster.blockCacheMB per worker (by default 5 % of the machine's memory in
      // all, GDAL's default block cache, at least 64 MiB per worker; lib/config.js).
      // config.s3 (object storage settings and credentials): each worker reads remote COGs itself.
      workerData: { blockCacheBytes: Math.floor(blockCacheMB * 2 ** 20), s3 },
    })
    // A worker that dies is replaced by piscina and its task fails (503 for that tile); never an uncaught error.
    started.on('error', (err) => log?.error({ err: err.message }, 'raster worker failed'))
    return started
  }

  // Resolves once every pool stopped so far has no thread left (close() also waits for one the last set stopped).
  let stopped = Promise.resolve()
  function stop () {
    if (pool !== null) {
      const p = pool
      pool = null
      stopped = Promise.all([stopped, p.destroy()]).then(() => {})
    }
    return stopped
  }

  return {
    threads, // the configured size
    /** The running piscina pool, or null (no COG set open, or closed). */
    get piscina () { return pool },
    acquire () {
      if (closed) throw new Error('the raster worker pool is closed')
      pool ??= start()
      users++
      return pool
    },
    async release () {
      if (users > 0) users--
      if (users === 0) await stop()
    },
    async close () {
      closed = true
      users = 0
      await stop()
    },
  }
}

/** Registered with config.raster (and config.s3) as its options: `app.register(rasterPool, { ...config.raster, s3 })`. */
export default fp(async function rasterPool (app, raster) {
  const pool = createRasterPool(raster, app.log)
  app.decorate('rasterPool', pool)
  app.addHook('onClose', () => pool.close())
}, { name: 'raster-pool', fastify: '5.x' })

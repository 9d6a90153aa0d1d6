// The raster worker pool (piscina) as a Fastify plugin: it decorates `app.rasterPool` and destroys the pool when the
// app closes. The threads start with the first COG set that opens (a server without one starts none) and stop with the
// last one to close; they are sized from the validated config (raster.threads, raster.blockCacheMB).
import { BroadcastChannel } from 'node:worker_threads'
import fp from 'fastify-plugin'
import { Piscina } from 'piscina'
import { Unavailable } from '../errors.js'

// The safety net under the decoders (a bug in one, or a file that makes one loop or grow without end): a task that runs
// past TASK_TIME_LIMIT_MS fails (503) and its worker is replaced; a worker whose JavaScript heap grows past
// HEAP_LIMIT_MB is ended, not the whole process. Measured on 2 shared cores, the costliest legitimate tiles (@2x, cubic,
// 32 mosaic parts of 2048 px each at their lowest zoom, median or terrain-RGB) took 3-5 s and kept under 32 MB of heap
// (decoded blocks and tiles are typed arrays, outside it); a remote read gives up by itself after 20 s
// (lib/remote/reader.js).
const TASK_TIME_LIMIT_MS = 60_000
const HEAP_LIMIT_MB = 256

let pools = 0 // numbers each pool's retirement channel: a process may run several pools (tests do)

/**
 * A pool started on demand: `acquire(key)` (a COG set opening the dataset of workers' key `key`) returns the running
 * pool's `{ run(task) }`, starting it if need be; `release(key)` (that set closing) tells every worker to close that
 * dataset once no open set holds its key, and stops the pool once no set uses it; `close()` stops it for good. A
 * mosaic holds each of its parts' keys through the same count (`hold(key)`, `unhold(key)`): a file that a COG set and a
 * mosaic both read stays open in the workers while either still does.
 * @param {{ threads: number, blockCacheMB: number, s3?: object, taskTimeLimitMs?: number, heapLimitMB?: number, replacedCloseMs?: number }} raster
 *   config.raster, and config.s3 for remote COGs (the limits and replacedCloseMs, worker.js: tests only)
 */
export function createRasterPool ({ threads, blockCacheMB, s3 = {}, taskTimeLimitMs = TASK_TIME_LIMIT_MS, heapLimitMB = HEAP_LIMIT_MB, replacedCloseMs }, log) {
  let pool = null
  let runner = null
  let users = 0
  let closed = false
  const holders = new Map() // workers' dataset key → the open sets holding it
  // Retired keys told to every worker at once (piscina runs a task on one worker only): worker.js closes the dataset.
  const retireChannel = `tile-cannon-raster-retired-${process.pid}-${++pools}`
  const retirements = new BroadcastChannel(retireChannel)
  retirements.unref()

  /** Another holder of workers' key `key`: a COG set, or a mosaic (which acquired the pool) for each part's key. */
  function hold (key) {
    if (!closed) holders.set(key, (holders.get(key) ?? 0) + 1)
  }

  /** A holder of `key` let go: the last one tells every worker to close that dataset. */
  function unhold (key) {
    if (!holders.has(key)) return
    const left = holders.get(key) - 1
    if (left > 0) holders.set(key, left)
    else {
      holders.delete(key)
      retirements.postMessage({ retired: key })
    }
  }

  function start () {
    const started = new Piscina({
      filename: new URL('./worker.cjs', import.meta.url).href, // worker.cjs says why
      minThreads: threads,
      maxThreads: threads,
      idleTimeout: 60000,
      concurrentTasksPerWorker: 2, // a remote block read waits on the network: let another tile run meanwhile
      // An idle worker waits on its event loop, not blocked in Atomics.wait: it hears of retired datasets, and its
      // timers (a replaced file's close, the idle close) fire, so a quiet server lets go of deleted files.
      atomics: 'disabled',
      // geotiff.js imports web-worker, which in any worker thread reads workerData.mod; an object without it keeps
      // that module inert. Decoded blocks: raster.blockCacheMB per worker (by default 5 % of the machine's memory in
      // all, GDAL's default block cache, at least 64 MiB per worker; lib/config.js).
      // config.s3 (object storage settings and credentials): each worker reads remote COGs itself.
      workerData: { blockCacheBytes: Math.floor(blockCacheMB * 2 ** 20), s3, replacedCloseMs, retireChannel },
      resourceLimits: { maxOldGenerationSizeMb: heapLimitMB },
    })
    // A worker that dies is replaced by piscina and its task fails (503 for that tile); never an uncaught error.
    started.on('error', (err) => log?.error({ err: err.message }, 'raster worker failed'))
    return started
  }

  /**
   * Runs tasks on `piscina` within the time limit, counted from when a worker starts the task (worker.js says so), not
   * from when it was queued: a busy server's queue must not cut a tile. Past it, piscina ends the worker (and any
   * other task on it) and starts another.
   */
  function timed (piscina) {
    const running = new Map() // task number → its AbortController
    let numbered = 0
    piscina.on('message', (message) => {
      const controller = running.get(message?.rasterTaskStarted)
      if (controller !== undefined) controller.timer = setTimeout(() => controller.abort(), taskTimeLimitMs)
    })
    return {
      run (task) {
        const number = ++numbered
        const controller = new AbortController()
        running.set(number, controller)
        return piscina.run({ ...task, taskNumber: number }, { signal: controller.signal }).then((result) => {
          clearTimeout(controller.timer)
          running.delete(number)
          return result
        }, (err) => {
          clearTimeout(controller.timer)
          running.delete(number)
          throw lost(err, controller.signal.aborted)
        })
      },
    }
  }

  /**
   * A task's failure as the set's unavailability where its worker was ended under it; anything else as it is (a worker
   * ended by another task on it, or by the pool closing, fails with 'Terminating worker thread': a 503 already).
   */
  function lost (err, timedOut) {
    if (timedOut) return new Unavailable(`a raster task ran past ${taskTimeLimitMs / 1000} s and was stopped (its worker replaced)`)
    if (err?.code === 'ERR_WORKER_OUT_OF_MEMORY') return new Unavailable(`a raster worker's heap passed ${heapLimitMB} MB under this task: stopped and replaced`)
    if (/^worker exited with code/.test(err?.message)) return new Unavailable('the raster worker under this task exited: replaced')
    return err
  }

  // Resolves once every pool stopped so far has no thread left (close() also waits for one the last set stopped).
  let stopped = Promise.resolve()
  function stop () {
    if (pool !== null) {
      const p = pool
      pool = null
      runner = null
      stopped = Promise.all([stopped, p.destroy()]).then(() => {})
    }
    return stopped
  }

  return {
    threads, // the configured size
    /** The running piscina pool, or null (no COG set open, or closed). */
    get piscina () { return pool },
    acquire (key) {
      if (closed) throw new Error('the raster worker pool is closed')
      if (pool === null) {
        pool = start()
        runner = timed(pool)
      }
      users++
      if (key !== undefined) hold(key)
      return runner
    },
    async release (key) {
      if (key !== undefined) unhold(key)
      if (users > 0) users--
      if (users === 0) await stop()
    },
    hold,
    unhold,
    async close () {
      closed = true
      users = 0
      holders.clear()
      retirements.close()
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

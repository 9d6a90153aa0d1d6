// Variants of stored vector tiles, as a plugin: `.mlt` (MapLibre Tiles, made by @maplibre/mlt) and `.geojson` of a set
// whose tiles are MVT (and `.geojson` of one whose tiles are MLT). The pipeline (lib/pipeline.js) caches each variant
// as one more record of the tile; this makes the bytes: small tiles on the event loop, large ones in a small worker pool
// of its own (started with the first large tile, its threads ending when idle, destroyed when the app closes).
import { availableParallelism } from 'node:os'
import fp from 'fastify-plugin'
import { Piscina } from 'piscina'
import { decodeStored, transcodeLoaded } from './transcode.js'
import { toldUnavailable } from '../errors.js'

// Tiles up to this many bytes of decoded MVT are made on the event loop, larger ones in a worker. Measured with
// bench/variants.js (2 cores, Node 20; the main thread's CPU per tile): handing a tile to a worker and taking the
// answer back costs the event loop 0.05-0.1 ms whatever its size; making it there costs 0.05-0.1 ms at 500 B,
// 0.2-0.25 ms at 2 KB, 0.35-1.4 ms at 8 KB and 200-600 ms for the largest fixture tile. Below ~1 KB inline is the
// cheaper (and most tiles of a set are that small); above it the worker spares the event loop more than it costs it.
// A stored tile larger than that, compressed or not, goes to the worker as it is: it cannot be smaller decoded.
export const INLINE_RAW_BYTES = 1024

const MAX_QUEUED = 256 // large tiles waiting for a thread; more are answered 503

export class VariantMaker {
  constructor ({ threads = Math.max(1, Math.min(4, availableParallelism() - 1)), log } = {}) {
    this.threads = threads
    this.log = log
    this.pool = null
    this.closed = false
  }

  /**
   * `variant` ('mlt' | 'geojson') of a tile stored as `format` ('pbf' | 'mlt') in `encoding` → Promise<Buffer>
   * (rejects with the reason when the stored bytes do not decode as such a tile).
   */
  async make (variant, format, stored, encoding, z, x, y) {
    if (stored.length <= INLINE_RAW_BYTES) {
      const raw = decodeStored(stored, encoding)
      if (raw.length <= INLINE_RAW_BYTES) return asBuffer(await transcodeLoaded(variant, format, raw, z, x, y))
    }
    // A view of a larger buffer (a block read from an archive) would be cloned whole: send only its bytes.
    const sent = stored.byteOffset === 0 && stored.byteLength === stored.buffer.byteLength ? stored : new Uint8Array(stored)
    let made
    try {
      made = await this.worker().run({ variant, format, stored: sent, encoding, z, x, y })
    } catch (err) {
      // A burst of large tiles past what the threads can take soon: refused at once rather than queued for ever.
      if (this.pool?.queueSize >= MAX_QUEUED) throw toldUnavailable('too many tiles waiting to be made into MLT or GeoJSON: try again shortly', 1)
      throw err
    }
    return asBuffer(made)
  }

  worker () {
    if (this.closed) throw new Error('the variants worker pool is closed')
    if (this.pool === null) {
      this.pool = new Piscina({
        filename: new URL('./worker.cjs', import.meta.url).href, // worker.cjs says why
        minThreads: 0,
        maxThreads: this.threads,
        idleTimeout: 30_000, // threads end when no large tile came for a while: most servers rarely make one
        maxQueue: MAX_QUEUED,
      })
      this.pool.on('error', (err) => this.log?.error({ err: err.message }, 'variants worker failed'))
    }
    return this.pool
  }

  async close () {
    this.closed = true
    const pool = this.pool
    this.pool = null
    await pool?.destroy()
  }
}

const asBuffer = (bytes) => (Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength))

/**
 * The maker of variants as a resource plugin: decorated as `variants` and set as the pipeline's (pipeline.variants, which every caller of the pipeline reaches); its
 * pool closes with the app.
 */
export default fp(async function variantsPlugin (app) {
  const maker = new VariantMaker({ log: app.log })
  app.decorate('variants', maker)
  app.pipeline.variants = maker
  app.addHook('onClose', async () => {
    app.pipeline.variants = null
    await maker.close()
  })
}, { name: 'tile-cannon-variants', fastify: '5.x' })

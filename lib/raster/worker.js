// Raster worker (piscina): every byte of COG decoding, reprojection, resampling and encoding happens here, never on
// the server's event loop. Each worker keeps its own open datasets and decoded-block cache.
import * as threads from 'node:worker_threads'
import { move, workerData } from 'piscina'
import sharp from 'sharp'
import { LRUCache } from 'lru-cache'
import { closeDataset, openDataset, describeDataset, RasterError } from './dataset.js'
import { Unavailable } from '../errors.js'
import { locate, valuesAt } from './sample.js'
import { converterFor, gatherNearest, lookupFor } from './direct.js'
import { toPixels, encode, rampOf } from './render.js'
import { mosaicPixels } from './mosaic.js'
import { useProxyFromEnv } from '../outbound-proxy.js'

await useProxyFromEnv() // remote COGs through the environment's proxy: this thread's fetch is its own

sharp.concurrency(1) // one thread per worker: the pool already spreads tiles over the cores
sharp.cache(false)

const REMOTE = { s3: workerData?.s3 } // remote COGs: the object storage settings (config.s3)
// Open datasets, keyed by what a file is (rendered-set.js localKey: its path, size, time and inode, and its sidecars'),
// so that every set reading an unchanged file (a COG set and the mosaics over it) shares one open file and its decoded
// blocks. One is closed when the main thread says its key is retired (the last set holding it, a COG set or a mosaic
// reading it as a part, closed: replaced, reloaded or removed; pool.js unhold), when idle for 10 minutes (a deleted
// file's space is freed), and when the previous one of a path opened under a new key (a replaced file or sidecar while
// the old set still serves, so its key is still held), REPLACED_CLOSE_MS later (workerData.replacedCloseMs: tests
// only). None is closed while a task uses it: a read of a closed descriptor fails (EBADF), or reads whatever file
// reused its number.
const REPLACED_CLOSE_MS = workerData?.replacedCloseMs ?? 30_000
const latest = new Map() // path or URL → key of the newest dataset
// 256: a mosaic's tile may read a few dozen parts, and its neighbours mostly the same ones.
const datasets = new LRUCache({
  max: 256,
  ttl: 10 * 60_000,
  updateAgeOnGet: true,
  ttlAutopurge: true,
  dispose: (entry) => {
    entry.dropped = true
    if (entry.users === 0) closeEntry(entry)
  },
})

const closeEntry = (entry) => { entry.pending.then(closeDataset, () => {}) }

/** The dataset of `key` let go (closed once no task holds it): its sets are closed. */
function retire (key) {
  for (const [where, newest] of latest) if (newest === key) latest.delete(where)
  datasets.delete(key)
}

if (workerData?.retireChannel !== undefined) {
  const retirements = new threads.BroadcastChannel(workerData.retireChannel)
  retirements.onmessage = ({ data }) => retire(data.retired)
  retirements.unref() // (piscina's port keeps the worker alive)
}

/**
 * The dataset of `src` (a promise), held for the task whose `held` set is given until releaseAll(held): dropped from
 * `datasets` meanwhile (replaced, evicted, idle), it is closed only once no task holds it.
 */
function dataset (src, held) {
  let entry = datasets.get(src.key)
  if (entry === undefined) {
    entry = { pending: openDataset(src, REMOTE), users: 0, dropped: false }
    const opened = entry
    entry.pending.catch(() => { if (datasets.peek(src.key) === opened) datasets.delete(src.key) })
    datasets.set(src.key, entry)
    const where = src.path ?? src.url
    const previous = latest.get(where)
    if (previous !== undefined && previous !== src.key) setTimeout(() => datasets.delete(previous), REPLACED_CLOSE_MS).unref()
    latest.set(where, src.key)
  }
  if (!held.has(entry)) {
    held.add(entry)
    entry.users++
  }
  return entry.pending
}

/** A task's datasets let go: one dropped while the task used it is closed now, if no other task holds it. */
function releaseAll (held) {
  for (const entry of held) {
    entry.users--
    if (entry.users === 0 && entry.dropped) closeEntry(entry)
  }
}

export default async function run (task) {
  // The pool's clock for this task starts now (lib/raster/pool.js: its time limit), not while it was queued.
  if (task.taskNumber !== undefined) threads.parentPort?.postMessage({ rasterTaskStarted: task.taskNumber })
  const held = new Set() // the datasets this task reads
  try {
    if (task.op === 'describe') return await describe(task.src, held)
    if (task.op === 'tile') return await tile(task, held)
    if (task.op === 'mosaic') return await mosaic(task, held)
    if (task.op === 'empty') {
      const n = 256 * task.scale
      return transferable(await encode(new Uint8Array(n * n), new Uint8Array(n * n), n, 1, task.format, false))
    }
    throw new Error(`unknown raster task ${task.op}`)
  } catch (err) {
    // An error's class does not cross back to the main thread, only its message. A RasterError (the file cannot give
    // this tile: unreadable blocks, too large a read) is returned as a value, so the set answers 503 for it; anything
    // else is a bug and goes back thrown (500).
    if (err instanceof RasterError) {
      if (task.op === 'describe') throw new Error(err.message) // the set's reason, shown as it opens
      return { failed: err.message }
    }
    // A remote COG that cannot be read now, or that changed since the set opened it (`replaced`: re-open the set).
    if (err instanceof Unavailable) {
      if (task.op === 'describe') throw new Error(err.message)
      return { failed: err.message, replaced: err.replaced === true, flipped: err.flipped === true }
    }
    throw err
  } finally {
    releaseAll(held)
  }
}

/**
 * What the main thread needs of a file: /meta's description, its WGS84 bounds, GDAL's suggested warp output, and what
 * the log should say of its CRS (read without its datum grid: dataset.js withoutGrid), since a worker has no logger,
 * its .aux.xml as read and the sidecars found beside it (a remote file's are then handed to the other workers, not
 * looked for again by each), and a remote file's version: its ETag (else Last-Modified), or without either the hash
 * of its first bytes (`identity`).
 */
async function describe (src, held) {
  const ds = await dataset(src, held)
  return { meta: describeDataset(ds), lonLatBounds: ds.lonLatBounds, warp: ds.warp, version: ds.reader?.version ?? null, identity: ds.reader?.identity ?? null, crsNote: ds.crs.note ?? null, statsNote: ds.statsNote ?? null, aux: ds.aux, auxNote: ds.auxNote, sidecars: ds.sidecars }
}

/** Drawn pixels encoded as the rendering asks: terrain-RGB lossless, a colormap's indices through its ramp. */
async function encodeTile (colour, opacity, n, channels, format, options) {
  return transferable(await encode(colour, opacity, n, channels, format, options.encoding !== null, rampOf(channels, options)))
}

/** Bytes to hand back to the main thread: moved, not copied, when they own their buffer. */
function transferable (bytes) {
  const out = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  // sharp's output lives in libvips memory, which Node marks untransferable: Node 20 quietly copied such a buffer when
  // it was moved, Node 22+ throw a DataCloneError. Those go back copied (Node 20 has no isMarkedAsUntransferable).
  if (threads.isMarkedAsUntransferable?.(out.buffer)) return out
  return out.byteOffset === 0 && out.byteLength === out.buffer.byteLength ? move(out) : out
}

// Per-tile arrays (several MB at 512 px) are reused rather than left to the GC, kept per tile size: two tiles may be
// in flight per worker, and a mosaic's tile holds one per part it reads at once (mosaic.js).
const spares = new Map() // n → scratches
const MAX_SPARES = 10 // per size: two mosaic tiles in flight (concurrentTasksPerWorker), each a batch of 4 parts and its output

/** Per-tile arrays for an n × n tile, from the spares or new; give them back with giveScratch. */
function takeScratch (n) {
  const s = spares.get(n)?.pop()
  if (s !== undefined) return s
  const count = n * n
  return {
    n,
    colLine: new Float64Array(n),
    rowLine: new Float64Array(n),
    alpha: new Float32Array(count),
    values: new Float32Array(count * 3),
    colour: new Uint8Array(count * 3),
    opacity: new Uint8Array(count),
  }
}

function giveScratch (scratch) {
  let list = spares.get(scratch.n)
  if (list === undefined) spares.set(scratch.n, (list = []))
  if (list.length < MAX_SPARES) list.push(scratch)
}

/** One tile: encoded bytes, or null where the raster has no valid pixel. */
async function tile (task, held) {
  const n = 256 * task.scale
  const scratch = takeScratch(n)
  try {
    return await render(task, n, scratch, held)
  } finally {
    giveScratch(scratch)
  }
}

async function render ({ src, z, x, y, format, options }, n, scratch, held) {
  const ds = await dataset(src, held)
  const at = await locate(ds, z, x, y, n, options, scratch)
  if (at === null) return null
  const { colour, opacity } = scratch
  const channels = pixelsAt(ds, at, options, scratch, colour, opacity)
  if (channels === 0) return null
  return encodeTile(colour, opacity, n, channels, format, options)
}

/**
 * A located tile of `ds` drawn into `colour` and `opacity`: integer samples with nearest straight from the blocks
 * (direct.js), anything else as values through toPixels. The colour channels, or 0 when no pixel is visible. A COG's
 * tile and each part of a mosaic's `first` are drawn here.
 */
function pixelsAt (ds, at, options, scratch, colour, opacity) {
  // Integers: lookup tables; floats and 32-bit integers: a converter (not for band math, which needs the values).
  const lut = at.resampling === 'nearest' ? lookupFor(ds, options) ?? converterFor(ds, options) : null
  if (lut !== null) return gatherNearest(at.level, at.table, at.grid, lut, options.nodata, at.rule, colour, opacity) ? lut.channels : 0
  const tile = valuesAt(at, options, scratch)
  if (tile === null) return 0
  return drawValues(tile, at.n, options, ds.palette, colour, opacity)
}

/** Values ({ values, alpha, nb }) drawn into `colour` and `opacity`: the channels, or 0 when no pixel is visible. */
function drawValues (tile, n, options, palette, colour, opacity) {
  const channels = toPixels(tile.values, tile.alpha, n * n, tile.nb, {
    rescale: options.rescale,
    colormap: options.colormap,
    palette: options.palette ? palette : null,
    encoding: options.encoding,
  }, colour, opacity)
  return opacity.some((a) => a > 0) ? channels : 0
}

const MOSAIC_ENGINE = { takeScratch, giveScratch, pixelsAt, drawValues }

// Notes on CRSs read without their datum grid (dataset.js) that this worker has passed to the main thread's log. A COG
// set's comes back with its description; a mosaic's parts are mostly opened by tiles, whose answers carry them.
const toldNotes = new Set()

/** The notes of the parts a mosaic's tile read (task.crsNotes) that this worker has not passed on yet. */
function untoldNotes (task) {
  const notes = [...(task.crsNotes ?? [])].filter((note) => !toldNotes.has(note))
  for (const note of notes) toldNotes.add(note)
  return notes
}

/**
 * A mosaic's tile: its parts read and combined (mosaic.js), encoded as a COG's tile is; null where none has data. Where
 * parts were left out (their data type) or a part's CRS note is new, { tile, leftOut: [[part, reason], …], crsNotes }
 * so that the main thread logs them.
 */
async function mosaic (task, held) {
  const n = 256 * task.scale
  const out = takeScratch(n)
  try {
    const channels = await mosaicPixels(task, n, out, { ...MOSAIC_ENGINE, dataset: (src) => dataset(src, held) })
    const crsNotes = untoldNotes(task)
    if (task.leftOut === undefined && crsNotes.length === 0) return channels === 0 ? null : await encodeTile(out.colour, out.opacity, n, channels, task.format, task.options)
    // Copied, not moved: piscina moves a result marked as movable, not one inside an object.
    const { options } = task
    const tile = channels === 0 ? null : await encode(out.colour, out.opacity, n, channels, task.format, options.encoding !== null, rampOf(channels, options))
    return { tile, leftOut: [...(task.leftOut ?? [])], crsNotes }
  } finally {
    giveScratch(out)
  }
}

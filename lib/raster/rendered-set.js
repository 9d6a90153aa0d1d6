// What every set rendered by the raster workers (COGs, mosaics) shares on the main thread: its encodings and scales,
// the workers' bytes as a Buffer, the transparent tile answered where the raster has no data (option emptyTiles), and
// the log's note on a CRS read without its datum grid.

/** The contract's fields of a rendered raster set (lib/sources/contract.js). */
export const RENDERED_SET = Object.freeze({
  format: 'png',
  hints: Object.freeze({ format: 'png' }),
  formats: Object.freeze(['png', 'webp', 'jpg']),
  formatAliases: Object.freeze({ jpeg: 'jpg' }),
  scales: Object.freeze([1, 2]),
  takesQuery: true,
})

/** A worker's bytes (a Uint8Array, maybe moved) as a Buffer over the same memory. */
export const asBuffer = (bytes) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)

/** `(scale, format) → Promise<Buffer>`: transparent tiles, rendered once per scale and format by `workers`. */
export function emptyTiles (workers) {
  const empties = new Map()
  return (scale, format) => {
    const key = scale + format
    if (!empties.has(key)) {
      const pending = workers.run({ op: 'empty', scale, format }).then(asBuffer)
      pending.catch(() => empties.delete(key)) // a failure is not kept: the next request tries again
      empties.set(key, pending)
    }
    return empties.get(key)
  }
}

// What has been said of a CRS read without its datum grid (lib/raster/epsg.js withoutGrid's note): once per process,
// whichever set (a COG, a mosaic's part, a STAC item's declared grid) meets it first, not once per file.
const saidOfCrs = new Set()

/** Logs `note` (a warning, naming set `id`) unless it has been said already; null or undefined: nothing to say. */
export function sayCrsNote (note, log, id) {
  if (!note || saidOfCrs.has(note)) return
  saidOfCrs.add(note)
  log?.warn({ set: id }, note)
}

/**
 * The workers' key of a local file (`file`: its stat, null when it could not be read): what the file is, its path, size,
 * time, device and inode, so that the sets reading an unchanged file (a COG set and the mosaics over it) share its open
 * dataset and decoded blocks in each worker (lib/raster/worker.js), and a replaced file is opened afresh. A file that
 * cannot be stat'ed is keyed by `openedAt`, the set's opening (the worker then says why it cannot be read).
 */
export const localKey = (path, file, openedAt) => file ? `${path}#${file.size}/${file.mtimeMs}/${file.dev}/${file.ino}` : `${path}#${openedAt}`

// What every set rendered by the raster workers (COGs, mosaics) shares on the main thread: its encodings and scales,
// the workers' bytes as a Buffer, the transparent tile answered where the raster has no data (option emptyTiles), and
// the log's note on a CRS read without its datum grid.
import { lstatSync } from 'node:fs'
import { lstat } from 'node:fs/promises'

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
 * time, device and inode, and what its sidecars are (`sidecars`: sidecarStamp's), so that the sets reading an unchanged
 * file (a COG set and the mosaics over it) share its open dataset and decoded blocks in each worker
 * (lib/raster/worker.js), and a replaced file, or one whose .msk, .ovr or .aux.xml was added, rewritten or deleted, is
 * opened afresh by every worker alike. A file that cannot be stat'ed is keyed by `openedAt`, the set's opening (the
 * worker then says why it cannot be read).
 */
export const localKey = (path, file, openedAt, sidecars = '') => file ? `${path}#${file.size}/${file.mtimeMs}/${file.dev}/${file.ino}${sidecars === '' ? '' : `+${sidecars}`}` : `${path}#${openedAt}`

// What GDAL keeps beside a local GeoTIFF and the workers read as they open it (lib/raster/dataset.js): its mask, the
// mask's overviews, its overviews, its PAM (nodata, statistics). Each is read only when it is a file of its own, not a
// link. (.msk.ovr before .ovr: cog.js companionOf takes the first ending a name has.)
export const SIDECAR_ENDINGS = Object.freeze(['.msk', '.msk.ovr', '.ovr', '.aux.xml'])

/** The sidecars' identity from their lstats (null: none), in SIDECAR_ENDINGS' order: '' when there are none. */
const stampOf = (infos) => infos.map((info, i) => info?.isFile() ? `${SIDECAR_ENDINGS[i]}:${info.size}/${info.mtimeMs}/${info.ino}` : '').filter((s) => s !== '').join(',')

/** What the sidecars beside local file `path` are (size, time, inode of each there), '' when it has none. */
export const sidecarStamp = async (path) => stampOf(await Promise.all(SIDECAR_ENDINGS.map((ending) => lstat(path + ending).catch(() => null))))

/** sidecarStamp, synchronously: the watcher's companionStamp (lib/sources/cog.js). */
export function sidecarStampSync (path) {
  return stampOf(SIDECAR_ENDINGS.map((ending) => {
    try { return lstatSync(path + ending, { throwIfNoEntry: false }) ?? null } catch { return null }
  }))
}

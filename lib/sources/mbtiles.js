// MBTiles (SQLite) source: one read-only better-sqlite3 handle and one prepared statement per file, kept open.
import { existsSync, openSync, readSync, closeSync, statSync } from 'node:fs'
import { basename } from 'node:path'
import Database from 'better-sqlite3'
import { flipY } from '../tilemath.js'
import { describeTile, isVector } from '../tiletype.js'
import { buildTileJson, describedBy, layersOfTile, normalizeFormat, numberList } from './tilejson.js'
import { loadMlt } from '../variants/mlt.js'

// SQLite URI file names (`file:…?immutable=1`, see openDatabase) are off in better-sqlite3's build unless this is set
// when its native addon loads, at the process's first `new Database` (which comes after every module has loaded).
// Absolute paths, which the catalog always gives, mean the same either way.
process.env.SQLITE_USE_URI ??= '1'

export const kind = 'mbtiles'
export const title = 'MBTiles'
export const extensions = ['.mbtiles']

// SQLite writes a `-journal` (rollback) or `-wal` (write-ahead log) beside a database it is writing; `-shm` goes with
// the WAL. A change to any of them is a change to the file. A `-journal` means a writer is at work. A `-wal` does not
// by itself: WAL-mode readers make one too, and a read-only connection cannot remove it when it closes (every later
// start, and every other replica, would have refused the file); and a WAL reader sees whole transactions only. So a
// `-wal` counts as a writer while it has content and changed in the last WAL_QUIET_MS.
const COMPANIONS = ['-journal', '-wal', '-shm']
export const WAL_QUIET_MS = 2000

/** A writer is at work on the file: open it later (it would be read half-written, or hold the writer up). */
export function writing (path) {
  if (existsSync(path + '-journal')) return true
  const wal = statSync(path + '-wal', { throwIfNoEntry: false })
  return wal !== undefined && wal.size > 0 && Date.now() - wal.mtimeMs < WAL_QUIET_MS
}

/**
 * What the `-wal` holds beyond the main file: its size and mtime while it has content, '' when it is empty or absent.
 * A commit in WAL mode changes only the `-wal`; the main file changes at a checkpoint, which SQLite runs only every
 * 1000 pages while a reader (this server) holds the file open. The watcher re-opens the set when this changes.
 */
export function companionStamp (path) {
  const wal = statSync(path + '-wal', { throwIfNoEntry: false })
  return wal === undefined || wal.size === 0 ? '' : `${wal.size}-${wal.mtimeMs}`
}

/** 'roads.mbtiles-wal' → 'roads.mbtiles': the watcher re-checks the tileset when its companions change. */
export const companionOf = (name) => {
  const suffix = COMPANIONS.find((s) => name.endsWith(s))
  return suffix === undefined ? null : name.slice(0, -suffix.length)
}

// Where tiles live, per schema: the spec's `tiles` table or view, or the tables of well-known schemas without the view
// (TileMill/mbutil map+images, planetiler tiles_shallow+tiles_data, martin tiles_with_hash).
const SCHEMAS = [
  { needs: ['tiles'], from: 'tiles', prefix: '', data: 'tile_data' },
  { needs: ['map', 'images'], from: 'map JOIN images ON images.tile_id = map.tile_id', prefix: 'map.', data: 'images.tile_data' },
  { needs: ['tiles_shallow', 'tiles_data'], from: 'tiles_shallow JOIN tiles_data ON tiles_data.tile_data_id = tiles_shallow.tile_data_id', prefix: 'tiles_shallow.', data: 'tiles_data.tile_data' },
  { needs: ['tiles_with_hash'], from: 'tiles_with_hash', prefix: '', data: 'tile_data' },
]

const utf8 = new TextDecoder('utf-8', { fatal: true })

/** A BLOB value as the text it holds; undefined unless that is UTF-8 (/:set/meta would show a Buffer's JSON shape). */
function blobText (value) {
  try {
    return utf8.decode(value)
  } catch {
    return undefined
  }
}

function readMetadata (db, objects) {
  if (!objects.has('metadata')) return {}
  const metadata = {}
  for (const { name, value } of db.prepare('SELECT name, value FROM metadata').all()) {
    if (typeof name !== 'string') continue
    const kept = Buffer.isBuffer(value) ? blobText(value) : value
    if (kept !== undefined) metadata[name] = kept
  }
  if (typeof metadata.json === 'string') {
    try {
      metadata.json = JSON.parse(metadata.json)
    } catch {
      // Kept as the string it is: the file's own business.
    }
  }
  return metadata
}

// Base tables of the well-known schemas: where `tiles` is a view over one of them, its (zoom_level, …) index is there.
const BASE_TABLES = ['tiles_shallow', 'tiles_with_hash', 'map']

/**
 * [min, max] zoom of the stored tiles, or null when the file has none or finding out would mean scanning every row
 * (a `tiles` view over unindexed tables). Two statements: SQLite walks an index for a lone MIN or MAX, not for both.
 */
function presentZooms (db, tablesOnly) {
  const table = tablesOnly.has('tiles') ? 'tiles' : BASE_TABLES.find((t) => tablesOnly.has(t)) ?? 'tiles'
  const min = `SELECT MIN(zoom_level) FROM ${table}`
  const plan = db.prepare(`EXPLAIN QUERY PLAN ${min}`).all().map((r) => r.detail).join(' ')
  if (!/\bINDEX\b/.test(plan)) {
    // No index: one scan is still fine for a small file; a large one keeps its metadata's word.
    const pages = db.pragma('page_count', { simple: true })
    if (pages > 25_000) return null
  }
  const low = db.prepare(min).pluck().get()
  const high = db.prepare(`SELECT MAX(zoom_level) FROM ${table}`).pluck().get()
  return Number.isInteger(low) && Number.isInteger(high) ? [low, high] : null
}

/** Opens an MBTiles file. Throws with a human reason when the file is not a usable MBTiles. */
export async function open (spec, context = {}) {
  let db
  try {
    db = openDatabase(spec.path)
  } catch (err) {
    throw new Error(reason(err, spec.path))
  }
  try {
    const wal = db.immutable || db.pragma('journal_mode', { simple: true }) === 'wal'
    const objects = new Set(db.prepare("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')").pluck().all())
    const schema = SCHEMAS.find((s) => s.needs.every((name) => objects.has(name)))
    if (schema === undefined) throw new Error('no tiles table: not an MBTiles file')
    const { from, prefix: p, data } = schema
    const metadata = readMetadata(db, objects)
    const tileStatement = db.prepare(`SELECT ${data} FROM ${from} WHERE ${p}zoom_level = ? AND ${p}tile_column = ? AND ${p}tile_row = ?`).pluck()
    // Reads a tile now, so a corrupt file fails here rather than on a request; it also tells the format when the
    // metadata does not.
    const sample = db.prepare(`SELECT ${data} FROM ${from} WHERE length(${data}) > 0 LIMIT 1`).pluck().get()

    // The metadata's zoom range is a claim; the tiles are the truth (a file saying z0-14 may hold only z13, and
    // clients would then ask z14 and get nothing instead of overzooming z13). Narrowed to the zooms present.
    const present = presentZooms(db, new Set(db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").pluck().all()))
    const claimed = [Number.parseInt(metadata.minzoom, 10), Number.parseInt(metadata.maxzoom, 10)]
    let minzoom = Number.isInteger(claimed[0]) ? claimed[0] : present?.[0] ?? 0
    let maxzoom = Number.isInteger(claimed[1]) ? claimed[1] : present?.[1] ?? minzoom
    if (present !== null) {
      minzoom = Math.max(minzoom, present[0])
      maxzoom = Math.min(maxzoom, present[1])
      if (minzoom > maxzoom) [minzoom, maxzoom] = present // claims that miss the tiles entirely
    }
    const json = typeof metadata.json === 'object' && metadata.json !== null ? metadata.json : {}
    const compression = metadata.compression === 'gzip' ? 'gzip' : metadata.compression === 'brotli' || metadata.compression === 'br' ? 'br' : undefined
    // The tiles are the truth here too: a metadata `format` they contradict (gzipped MVT said to be png, a second
    // `format` row) would label every tile wrong and refuse .geojson. The declared one decides only what bytes cannot
    // say (MLT, a format with no magic number): only bytes that are sure (an image's signature, protobuf) overrule it,
    // never a guess ('json' from a first '{' or '[', 'bin').
    const declared = normalizeFormat(metadata.format)
    const sniffed = Buffer.isBuffer(sample) && sample.length > 0 ? describeTile(sample, { format: declared, compression }).format : undefined
    const sure = sniffed !== undefined && sniffed !== 'bin' && sniffed !== 'json'
    const format = sure || declared === undefined ? sniffed : declared
    if (declared !== undefined && format !== declared) {
      context.log?.warn({ set: spec.id, format, declared }, `the metadata says format '${declared}' but the tiles are '${format}': served as '${format}'`)
    }

    const bounds = numberList(metadata.bounds, 4)
    let closed = false
    return {
      id: spec.id,
      kind,
      format,
      hints: { format, compression },
      metadata,
      extent: bounds?.[0] > bounds?.[2] ? bounds : undefined, // (TileJSON's are widened to the world's width)
      tilejson: buildTileJson({
        ...describedBy(metadata, spec.id),
        minzoom,
        maxzoom,
        bounds,
        center: numberList(metadata.center, 3) ?? numberList(metadata.center, 2),
        vectorLayers: json.vector_layers ?? (isVector(format) && Buffer.isBuffer(sample) ? layersOfTile(sample, compression, format === 'mlt' ? await loadMlt() : undefined) : undefined),
        format,
      }),
      // Synchronous, as better-sqlite3 is: the pipeline answers a cold tile in the same tick (lib/pipeline.js record).
      getTile (z, x, y) {
        const data = tileStatement.get(z, x, flipY(z, y))
        if (typeof data === 'string') return Buffer.from(data) // some writers store JSON tiles in a TEXT column
        return data ?? null // a NULL tile_data row is a missing tile
      },
      /**
       * Called by the catalog once the file has been quiet for a while: from then on the handle holds its shared lock.
       * In the default mode every query takes and drops the lock and probes for a journal (7 syscalls): 7.6 µs a tile
       * read against 1.3 µs (bench/README.md). Other readers are unaffected; a writer can no longer commit in place,
       * which is why this waits until the file has settled. Not for WAL files, where SQLite refuses it read-only.
       */
      settle () {
        if (closed || wal) return
        db.pragma('locking_mode = EXCLUSIVE')
        tileStatement.get(0, 0, 0) // takes the lock now
      },
      close () {
        if (!closed) db.close()
        closed = true
      },
    }
  } catch (err) {
    db.close()
    throw new Error(reason(err, spec.path))
  }
}

/**
 * The file's read-only handle. A WAL-mode file needs its `-shm` beside it, which SQLite cannot make on a read-only
 * volume (a `:ro` Docker mount): such a file whose `-wal` holds nothing is read as immutable (no locks, no `-shm`), its
 * main file being all of it. One whose `-wal` holds changes cannot be read there without them: refused with the way out.
 */
function openDatabase (path) {
  const db = new Database(path, { readonly: true, fileMustExist: true })
  try {
    db.pragma('schema_version') // the first read: where SQLite finds it cannot make the -shm
    return db
  } catch (err) {
    db.close()
    if (err.code !== 'SQLITE_CANTOPEN' || !walMode(path)) throw err
    if ((statSync(path + '-wal', { throwIfNoEntry: false })?.size ?? 0) > 0) {
      throw new Error(`a WAL-mode file with changes in its -wal, where SQLite cannot make its -shm (a read-only folder): checkpoint it where it was written (sqlite3 ${basename(path)} 'PRAGMA wal_checkpoint(TRUNCATE)'), or make it a rollback-mode file ('PRAGMA journal_mode=DELETE')`)
    }
    const uri = 'file:' + path.split('/').map(encodeURIComponent).join('/') + '?immutable=1'
    return Object.assign(new Database(uri, { readonly: true, fileMustExist: true }), { immutable: true })
  }
}

/** Whether the file's header says WAL mode (its read and write versions are 2). */
function walMode (path) {
  const header = Buffer.alloc(20)
  let fd = null
  try {
    fd = openSync(path, 'r')
    return readSync(fd, header, 0, 20, 0) === 20 && header[18] === 2 && header[19] === 2
  } catch {
    return false
  } finally {
    if (fd !== null) closeSync(fd)
  }
}

// SQLite's messages are clear; keep them, never the absolute path.
function reason (err, path) {
  const message = String(err.message ?? err).replaceAll(path, basename(path))
  if (err.code === 'SQLITE_NOTADB') return 'not an SQLite database'
  if (err.code === 'SQLITE_CORRUPT') return 'corrupt SQLite file: database disk image is malformed'
  if (err.code === 'SQLITE_CANTOPEN') {
    // SQLite says only 'unable to open database file': the system's reason, in the words a PMTiles or COG gets
    // ("EACCES: permission denied, open 'a.mbtiles'").
    try {
      closeSync(openSync(path, 'r'))
    } catch (cause) {
      return cause.message.replaceAll(path, basename(path))
    }
  }
  return message
}

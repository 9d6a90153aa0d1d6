// MBTiles (SQLite) source: one read-only better-sqlite3 handle and one prepared statement per file, kept open.
import { basename } from 'node:path'
import Database from 'better-sqlite3'
import { flipY } from '../tile.js'
import { buildTileJson, normalizeFormat, numberList } from './tilejson.js'

export const kind = 'mbtiles'
export const extensions = ['.mbtiles']

// The tile query per schema: the spec's `tiles` table or view, or the tables of well-known schemas without the view.
function tileQuery (objects) {
  if (objects.has('tiles')) return 'SELECT tile_data FROM tiles WHERE zoom_level = ? AND tile_column = ? AND tile_row = ?'
  if (objects.has('map') && objects.has('images')) {
    return 'SELECT images.tile_data FROM map JOIN images ON images.tile_id = map.tile_id ' +
      'WHERE map.zoom_level = ? AND map.tile_column = ? AND map.tile_row = ?'
  }
  if (objects.has('tiles_shallow') && objects.has('tiles_data')) {
    return 'SELECT tiles_data.tile_data FROM tiles_shallow JOIN tiles_data ON tiles_data.tile_data_id = tiles_shallow.tile_data_id ' +
      'WHERE tiles_shallow.zoom_level = ? AND tiles_shallow.tile_column = ? AND tiles_shallow.tile_row = ?'
  }
  if (objects.has('tiles_with_hash')) {
    return 'SELECT tile_data FROM tiles_with_hash WHERE zoom_level = ? AND tile_column = ? AND tile_row = ?'
  }
  return null
}

function readMetadata (db, objects) {
  if (!objects.has('metadata')) return {}
  const metadata = {}
  for (const { name, value } of db.prepare('SELECT name, value FROM metadata').all()) {
    if (typeof name === 'string') metadata[name] = value
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

/** Opens an MBTiles file. Throws with a human reason when the file is not a usable MBTiles. */
export async function open (spec) {
  const db = new Database(spec.path, { readonly: true, fileMustExist: true })
  try {
    const objects = new Set(db.prepare("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')").pluck().all())
    const sql = tileQuery(objects)
    if (sql === null) throw new Error('no tiles table: not an MBTiles file')
    const metadata = readMetadata(db, objects)
    const tileStatement = db.prepare(sql).pluck()
    tileStatement.get(0, 0, 0) // reads the first pages now, so a corrupt file fails here rather than on a request

    let minzoom = Number.parseInt(metadata.minzoom, 10)
    let maxzoom = Number.parseInt(metadata.maxzoom, 10)
    if (!Number.isInteger(minzoom) || !Number.isInteger(maxzoom)) {
      const table = sql.match(/FROM (\w+)/)[1] // startup only
      const range = db.prepare(`SELECT MIN(zoom_level) AS min, MAX(zoom_level) AS max FROM ${table}`).get()
      if (!Number.isInteger(minzoom)) minzoom = range.min ?? 0
      if (!Number.isInteger(maxzoom)) maxzoom = range.max ?? minzoom
    }
    const json = typeof metadata.json === 'object' && metadata.json !== null ? metadata.json : {}
    const format = normalizeFormat(metadata.format)
    const compression = metadata.compression === 'gzip' ? 'gzip' : metadata.compression === 'brotli' || metadata.compression === 'br' ? 'br' : undefined

    let closed = false
    return {
      id: spec.id,
      kind,
      format,
      hints: { format, compression },
      metadata,
      tilejson: buildTileJson({
        name: metadata.name ?? spec.id,
        description: metadata.description,
        attribution: metadata.attribution,
        version: metadata.version,
        minzoom,
        maxzoom,
        bounds: numberList(metadata.bounds, 4),
        center: numberList(metadata.center, 3) ?? numberList(metadata.center, 2),
        vectorLayers: json.vector_layers,
        format,
      }),
      async getTile (z, x, y) {
        const data = tileStatement.get(z, x, flipY(z, y))
        return data ?? null // a NULL tile_data row is a missing tile
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

// SQLite's messages are clear; keep them, never the absolute path.
function reason (err, path) {
  const message = String(err.message ?? err).replaceAll(path, basename(path))
  if (err.code === 'SQLITE_NOTADB') return 'not an SQLite database'
  if (err.code === 'SQLITE_CORRUPT') return 'corrupt SQLite file: database disk image is malformed'
  return message
}

// An export written to an MBTiles file: the flat schema (tiles + metadata, each with its unique index), tiles in TMS
// rows, written in transactions of many tiles (one commit per tile would cost a journal write and fsync each). The
// progress record is a metadata row written in the same transaction as the tiles it counts, so a file stopped at any
// moment says exactly what it holds; between transactions it is a complete MBTiles file any reader can open.
import { existsSync, rmSync } from 'node:fs'
import Database from 'better-sqlite3'
import { UsageError } from './errors.js'
import { mbtilesMetadata } from './metadata.js'
import { progressRecord, resumePoint } from './resume.js'
import { flipY } from '../tilemath.js'

export const PROGRESS_ROW = 'tile-cannon:export'
const COMPANIONS = ['-journal', '-wal', '-shm']

const SCHEMA = `
  CREATE TABLE metadata (name TEXT, value TEXT);
  CREATE UNIQUE INDEX name ON metadata (name);
  CREATE TABLE tiles (zoom_level INTEGER, tile_column INTEGER, tile_row INTEGER, tile_data BLOB);
  CREATE UNIQUE INDEX tile_index ON tiles (zoom_level, tile_column, tile_row);`

export class MbtilesOutput {
  /**
   * Opens `path` for the job: a new file, or the file of an earlier run of the same job, continued (`start`: where it
   * stopped). Throws a UsageError for a file it may not continue (see resume.js), unless `force` (then it starts over).
   */
  constructor (path, { job, total, description, force }) {
    this.path = path
    this.job = job
    this.total = total
    this.start = { done: 0, reached: 0 }
    this.resumed = false
    if (force) for (const suffix of ['', ...COMPANIONS]) rmSync(path + suffix, { force: true })
    const db = new Database(path) // (rolls back a transaction a killed run left in its journal)
    try {
      let objects
      try {
        objects = db.prepare("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')").pluck().all()
      } catch (err) {
        if (err.code === 'SQLITE_NOTADB') throw new UsageError(`${path} exists and is not an MBTiles file: --force replaces it`)
        throw err
      }
      if (objects.length > 0) {
        const text = objects.includes('metadata') && objects.includes('tiles') ? db.prepare('SELECT value FROM metadata WHERE name = ?').pluck().get(PROGRESS_ROW) : undefined
        this.start = resumePoint(text, job, total, path)
        this.resumed = true
      }
      db.transaction(() => {
        if (!this.resumed) db.exec(SCHEMA)
        // The description again when resuming: the set's attribution or layers may have been edited since.
        const put = db.prepare('INSERT OR REPLACE INTO metadata (name, value) VALUES (?, ?)')
        for (const [name, value] of mbtilesMetadata(description)) put.run(name, value)
        if (!this.resumed) put.run(PROGRESS_ROW, JSON.stringify(progressRecord(job, total, 0, 0)))
      })()
    } catch (err) {
      db.close()
      throw err
    }
    this.db = db
    this.insert = db.prepare('INSERT OR REPLACE INTO tiles (zoom_level, tile_column, tile_row, tile_data) VALUES (?, ?, ?, ?)')
    this.lookup = db.prepare('SELECT 1 FROM tiles WHERE zoom_level = ? AND tile_column = ? AND tile_row = ?').pluck()
    this.saveProgress = db.prepare('UPDATE metadata SET value = ? WHERE name = ?')
    this.open = true
  }

  /** Is the tile in the file already (written by an earlier run)? */
  has (z, x, y) {
    return this.lookup.get(z, x, flipY(z, y)) !== undefined
  }

  /** Adds a tile to the transaction under way (one is begun when none is). */
  put (z, x, y, bytes) {
    if (!this.open) return
    try {
      if (!this.db.inTransaction) this.db.exec('BEGIN')
      this.insert.run(z, x, flipY(z, y), bytes)
    } catch (err) {
      // SQLite may have rolled the whole transaction back (a full disk): the record must not count its tiles.
      this.broken = true
      throw err
    }
  }

  /** Records `done`/`reached` and commits them with the tiles since the last checkpoint. */
  checkpoint (done, reached) {
    if (!this.open || this.broken) return
    if (!this.db.inTransaction) this.db.exec('BEGIN')
    this.saveProgress.run(JSON.stringify(progressRecord(this.job, this.total, done, reached)), PROGRESS_ROW)
    this.db.exec('COMMIT')
  }

  /** The tiles in the file. */
  count () {
    return this.db.prepare('SELECT count(*) FROM tiles').pluck().get()
  }

  /** Closes the file; a transaction still open (an I/O error in it) is rolled back. Idempotent. */
  close () {
    if (!this.open) return
    this.open = false
    if (this.db.inTransaction) this.db.exec('ROLLBACK')
    this.db.close()
  }
}

/** The job an existing MBTiles export recorded, or null (no file, not an export). */
export function recordedJob (path) {
  if (!existsSync(path)) return null
  let db
  try {
    db = new Database(path, { readonly: true, fileMustExist: true })
    return JSON.parse(db.prepare('SELECT value FROM metadata WHERE name = ?').pluck().get(PROGRESS_ROW) ?? 'null')?.job ?? null
  } catch {
    return null
  } finally {
    db?.close()
  }
}

/** `--out` names an MBTiles file (else a folder). */
export const isMbtilesPath = (path) => /\.mbtiles$/i.test(path)

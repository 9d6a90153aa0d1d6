// An export written to a folder: `{z}/{x}/{y}.{ext}` as nginx, S3 or any static host serves them, with tiles.json
// (TileJSON 3.0.0, tiles URL relative to it) and the progress record in `.tile-cannon-export.json`. Every file is
// written under a temporary name and renamed into place, so a reader (or a resumed run) never sees half a tile.
import { existsSync, readFileSync, readdirSync, renameSync, rmSync, statSync, writeFileSync, mkdirSync } from 'node:fs'
import { mkdir, rename, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { UsageError } from './errors.js'
import { folderTileJson } from './metadata.js'
import { progressRecord, resumePoint } from './resume.js'

export const PROGRESS_FILE = '.tile-cannon-export.json'
const TILEJSON_FILE = 'tiles.json'
const ZOOM_DIR = /^\d{1,2}$/

/** The job an existing folder export recorded, or null. */
export function recordedJob (dir) {
  try {
    return JSON.parse(readFileSync(join(dir, PROGRESS_FILE), 'utf8'))?.job ?? null
  } catch {
    return null
  }
}

export class FolderOutput {
  /**
   * Opens folder `dir` for the job: a new or empty folder, or the folder of an earlier run of the same job, continued
   * (`start`). Throws a UsageError for a folder it may not continue (see resume.js), unless `force`: then what an
   * export writes there (zoom folders, tiles.json, the record) is removed first, and nothing else.
   */
  constructor (dir, { job, total, description, force }) {
    this.dir = dir
    this.job = job
    this.total = total
    this.ext = job.format
    this.start = { done: 0, reached: 0 }
    this.resumed = false
    this.made = new Set() // folders known to exist
    const record = join(dir, PROGRESS_FILE)
    if (existsSync(dir)) {
      if (!statSync(dir).isDirectory()) throw new UsageError(`${dir} exists and is not a folder (an MBTiles output is named *.mbtiles)`)
      // --force over an earlier export: what it wrote goes (zoom folders, tiles.json, the record), nothing else. Over a
      // folder of something else: nothing is deleted, the export writes beside what is there.
      if (force && existsSync(record)) {
        for (const name of readdirSync(dir)) {
          if (ZOOM_DIR.test(name) || name === TILEJSON_FILE || name === PROGRESS_FILE) rmSync(join(dir, name), { recursive: true, force: true })
        }
      }
      if (existsSync(record)) {
        this.start = resumePoint(readFileSync(record, 'utf8'), job, total, dir)
        this.resumed = true
      } else if (!force && readdirSync(dir).length > 0) {
        throw new UsageError(`${dir} exists, is not empty and was not written by tile-cannon export: choose an empty or new folder, or --force to write into it`)
      }
    }
    mkdirSync(dir, { recursive: true })
    writeAtomically(join(dir, TILEJSON_FILE), JSON.stringify(folderTileJson(description, this.ext), null, 2) + '\n')
    if (!this.resumed) this.checkpoint(0, 0)
    this.open = true
  }

  has (z, x, y) {
    return existsSync(join(this.dir, String(z), String(x), `${y}.${this.ext}`))
  }

  /** Writes a tile file (a promise). */
  async put (z, x, y, bytes) {
    const folder = join(this.dir, String(z), String(x))
    if (!this.made.has(folder)) {
      await mkdir(folder, { recursive: true })
      this.made.add(folder)
    }
    const file = join(folder, `${y}.${this.ext}`)
    const temporary = `${file}.${process.pid}.tmp`
    await writeFile(temporary, bytes)
    await rename(temporary, file)
  }

  /** Records `done`/`reached` (synchronously: also from a second Ctrl-C, just before exiting). */
  checkpoint (done, reached) {
    writeAtomically(join(this.dir, PROGRESS_FILE), JSON.stringify(progressRecord(this.job, this.total, done, reached), null, 2) + '\n')
  }

  count () {
    return undefined // (counting a folder's files would cost a walk of all of them)
  }

  close () {
    this.open = false
  }
}

function writeAtomically (file, text) {
  const temporary = `${file}.${process.pid}.tmp`
  writeFileSync(temporary, text)
  renameSync(temporary, file)
}

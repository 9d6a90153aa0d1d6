// Files change while served: a new file is opened, a replaced one re-opened (reads under way on the old handle finish
// first), a deleted one dropped. Bursts of events are debounced, a file still being written is left until it stops,
// and a source that can go faster once its file has stopped changing (`settle`) is told when that is. A folder served
// as one set (`mosaic: true`) is re-opened when a file in it changes.
import { statSync, watch } from 'node:fs'
import { stat } from 'node:fs/promises'
import { basename, dirname, join, resolve } from 'node:path'
import { KINDS, kindForFile } from '../sources/index.js'
import { claimed, isUrl, specOf } from './discover.js'

const sameFile = (a, b) => a.mtimeMs === b.mtimeMs && a.size === b.size && a.ino === b.ino
export const isWriting = (path) => kindForFile(path)?.writing?.(path) ?? false
/** The mark of a file's companions (an SQLite `-wal`) that changes with its data while the file does not, or null. */
export const companionStamp = (path) => kindForFile(path)?.companionStamp?.(path) ?? null
const WRITING_RECHECK_MS = 1000 // how often a file being written is looked at again
/** The tileset file a changed name stands for: itself, or the file it is a companion of (an SQLite `-wal`). */
const tilesetName = (name) => {
  for (const kind of KINDS) {
    const of = kind.companionOf?.(name)
    if (of) return of
  }
  return name
}

export class FileWatcher {
  /** `open(path, id)`: (re-)opens a file as the set `id` (the catalog's openSpec). */
  constructor ({ config, log, registry, open }) {
    this.config = config
    this.log = log
    this.registry = registry
    this.open = open
    this.watchers = []
    this.timers = new Map()
    this.closed = false
  }

  /** Re-checks one file after a change: opens it if new, re-opens it if replaced, drops it if gone. */
  async refresh (path, { force = false } = {}) {
    if (this.closed) return
    const known = this.registry.byPath.get(path)
    let info = null
    try {
      info = await stat(path)
    } catch {}
    // A folder that is one set (a mosaic of its files): re-opened, whatever changed in it (its own stat may not say).
    const folderSet = known !== undefined && info?.isDirectory() === true
    if (info === null || (!info.isFile() && !folderSet)) {
      if (known) this.registry.remove(known)
      return
    }
    if (folderSet) {
      await this.open(path, known.id)
      return
    }
    // A new file of a kind that shares its extension with other documents (.json): only one the kind claims.
    if (!known && !(await claimed(specOf(path), this.log))) return
    // A WAL-mode MBTiles committed to in place changes only its -wal until a checkpoint: that change counts too.
    if (known && !force && known.file && sameFile(known.file, info) && known.companionStamp === companionStamp(path) && known.source !== null) return
    // SQLite keeps readers consistent while another process writes in place; re-read when it is done. The writer's
    // last change may be followed by no event (a WAL that just goes quiet): looked at again until it has stopped.
    if (!force && isWriting(path)) {
      this.schedule(path, WRITING_RECHECK_MS)
      if (known && known.source !== null) return
    }
    // A writer may pause between commits (its journal gone meanwhile): open only what has stopped changing for a
    // debounce. A file last changed that long ago (ctime: a rename counts, and no tool sets it back) has stopped
    // already: a finished file renamed into place, as deploys do, is served one debounce after the rename.
    const unchangedMs = Date.now() - Math.max(info.mtimeMs, info.ctimeMs)
    if (!force && unchangedMs < this.config.watchDebounceMs) {
      await new Promise((resolve) => setTimeout(resolve, this.config.watchDebounceMs - unchangedMs))
      let again = null
      try { again = await stat(path) } catch {}
      if (again === null || !sameFile(again, info)) {
        this.schedule(path)
        return
      }
    }
    await this.open(path, known?.id)
  }

  /**
   * Tells a source its file has settled once the file has not changed for `settleMs` (at once for a file that old
   * already): MBTiles then keeps its lock, which is faster but refuses writers (see mbtiles.js).
   */
  settleLater (entry) {
    const settle = () => {
      try { entry.source.settle() } catch (err) { this.log.warn({ set: entry.id, err: err.message }, 'settling failed') }
    }
    const wait = entry.file.mtimeMs + this.config.settleMs - Date.now()
    if (wait <= 0) return settle()
    entry.settleTimer = setTimeout(async () => {
      if (entry.retired || this.closed) return
      let now = null
      try { now = await stat(entry.path) } catch {}
      if (now === null || !sameFile(now, entry.file) || isWriting(entry.path)) return // the watcher re-opens it
      settle()
    }, wait)
    entry.settleTimer.unref()
  }

  /** Watches the served folders (and the folders of served files, and folders served as one set) for changes. */
  watch () {
    const folders = new Map() // folder → names to watch (null: every tileset file)
    const sets = Object.values(this.config.sets).filter((s) => s.path)
    const mosaics = new Set(sets.filter((s) => s.mosaic && isFolder(resolve(s.path))).map((s) => resolve(s.path)))
    const configured = sets.map((s) => s.path).filter((p) => !mosaics.has(resolve(p)))
    for (const item of [...this.config.paths, ...configured]) {
      if (isUrl(item)) continue
      const path = resolve(item)
      if (isFolder(path)) folders.set(path, null)
      else if (folders.get(dirname(path)) !== null) {
        const names = folders.get(dirname(path)) ?? new Set()
        names.add(basename(path))
        folders.set(dirname(path), names)
      }
    }
    for (const folder of new Set([...folders.keys(), ...mosaics])) {
      const names = folders.get(folder) // undefined: only a folder served as one set
      try {
        const watcher = watch(folder, { persistent: false }, (event, filename) => {
          if (!filename) return
          const target = tilesetName(filename)
          if (!kindForFile(target)) return
          if (mosaics.has(folder)) this.schedule(folder)
          if (names === undefined || (names && !names.has(target))) return
          this.schedule(join(folder, target))
        })
        watcher.on('error', (err) => this.log.warn({ err: err.message }, 'watching a folder failed'))
        this.watchers.push(watcher)
      } catch (err) {
        this.log.warn({ err: err.message }, 'cannot watch a folder: changes need SIGHUP')
      }
    }
  }

  /** Debounces bursts of events (a copy in progress fires many) into one re-check per file. */
  schedule (path, delayMs = this.config.watchDebounceMs) {
    if (this.closed) return
    clearTimeout(this.timers.get(path))
    this.timers.set(path, setTimeout(() => {
      this.timers.delete(path)
      this.refresh(path).catch((err) => this.log.error({ err: err.message }, 'reloading a tileset failed'))
    }, delayMs).unref())
  }

  close () {
    this.closed = true
    for (const w of this.watchers) w.close()
    for (const t of this.timers.values()) clearTimeout(t)
    this.watchers = []
  }
}

function isFolder (path) {
  try {
    return statSync(path).isDirectory()
  } catch {
    return false
  }
}


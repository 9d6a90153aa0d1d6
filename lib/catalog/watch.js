// Files change while served: a new file is opened, a replaced one re-opened (reads under way on the old handle finish
// first), a deleted one dropped. Bursts of events are debounced, a file still being written is left until it stops,
// and a source that can go faster once its file has stopped changing (`settle`) is told when that is. A folder served
// as one set (`mosaic: true`) is re-opened when a file in it changes.
import { lstatSync, readlinkSync, statSync, watch } from 'node:fs'
import { readdir, stat } from 'node:fs/promises'
import { basename, dirname, join, resolve } from 'node:path'
import { KINDS, kindForFile } from '../sources/index.js'
import { claimed, isMissing, isUrl, specOf } from './discover.js'

const sameFile = (a, b) => a.mtimeMs === b.mtimeMs && a.size === b.size && a.ino === b.ino
export const isWriting = (path) => kindForFile(path)?.writing?.(path) ?? false
/** The mark of a file's companions (an SQLite `-wal`) that changes with its data while the file does not, or null. */
export const companionStamp = (path) => kindForFile(path)?.companionStamp?.(path) ?? null
const WRITING_RECHECK_MS = 1000 // how often a file being written is looked at again
// How often a served folder that cannot be listed is tried again when nothing in it says so (a remount fires no event).
const UNLISTED_RECHECK_MS = 10_000
/** The tileset file a changed name stands for: itself, or the file it is a companion of (an SQLite `-wal`). */
const tilesetName = (name) => {
  for (const kind of KINDS) {
    const of = kind.companionOf?.(name)
    if (of) return of
  }
  return name
}

export class FileWatcher {
  /**
   * `open(path, id, configuredId, slots)`: (re-)opens a file as the set `id` (the catalog's openSpec); a file new to it
   * as the set it is configured as (`sets.<id>.path`), if it is one, else under its file name; `slots`: a reload's.
   */
  constructor ({ config, log, registry, open }) {
    this.config = config
    this.log = log
    this.registry = registry
    this.open = open
    this.watchers = []
    this.folders = new Map() // folder watched → what in it is served (watchFolder)
    this.pending = new Map() // path given, not there yet → its watch (awaitPath)
    this.configuredIds = new Map() // sets.<id>.path → id: the set's id whenever its file appears
    this.mosaics = new Set() // folders configured as one set (`mosaic: true`)
    this.unlisted = new Map() // served folder that could not be listed → { path: as given, timer: its next listing }
    this.broken = new Set() // links in served folders whose target is missing, said once while so
    this.timers = new Map()
    this.watching = false
    this.closed = false
  }

  /**
   * Re-checks one file after a change: opens it if new, re-opens it if replaced, drops it if gone. `slots`: those of
   * the reload asking (bounding its opens at once), else none.
   */
  async refresh (path, { force = false, slots = null } = {}) {
    if (this.closed) return
    const known = this.registry.byPath.get(path)
    let info = null
    try {
      info = await stat(path)
    } catch (err) {
      // Its folder cannot be searched now (EACCES: a permissions slip, see setUnlisted): kept, served from its handle.
      if (known && !isMissing(err)) return
    }
    // A folder that is one set (a mosaic of its files): (re-)opened, whatever changed in it (its own stat may not say).
    const folderSet = info?.isDirectory() === true && (known !== undefined || this.mosaics.has(path))
    if (info === null || (!info.isFile() && !folderSet)) {
      if (known) this.registry.remove(known)
      if (info === null && linkTarget(path) !== null) this.brokenLink({ path: dirname(path), name: basename(path), link: path })
      return
    }
    this.broken.delete(path)
    if (folderSet) {
      await this.open(path, known?.id, this.configuredIds.get(path), slots)
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
    await this.open(path, known?.id, this.configuredIds.get(path), slots)
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

  /**
   * Watches the served folders (and the folders of served files, and folders served as one set) for changes, and a
   * path given that is not there yet (a volume mounted late, a file still to be copied) for it to appear.
   */
  watch () {
    this.watching = true
    const sets = Object.entries(this.config.sets).filter(([, s]) => s.path)
    this.configuredIds = new Map(sets.map(([id, s]) => [resolve(s.path), id]))
    this.mosaics = new Set(sets.filter(([, s]) => s.mosaic).map(([, s]) => resolve(s.path)))
    for (const item of [...this.config.paths, ...sets.map(([, s]) => s.path)]) {
      // A folder that cannot be listed cannot be watched either: followed once it lists (listAgain).
      if (!isUrl(item) && !this.unlisted.has(resolve(item))) this.follow(resolve(item))
    }
    for (const folder of this.unlisted.keys()) this.listLater(folder)
    for (const link of this.broken) this.awaitPath(link)
  }

  /**
   * The served folders that could not be listed at a discovery ({ path: as given, folder: absolute }): the sets found in
   * them before are kept, served from their open handles, as the folder will likely be back (a mount glitch, a
   * permissions slip). Each is said once while it stays so (`say` false: said already, with the other paths given at
   * start-up), and listed again at the next reload; with watching on also at an event in it (its mode changed back),
   * and every UNLISTED_RECHECK_MS. A folder not among them any more lists again.
   */
  setUnlisted (folders, { say = true } = {}) {
    const now = new Set(folders.map(({ folder }) => folder))
    for (const [folder, { path }] of this.unlisted) if (!now.has(folder)) this.listed(folder, path)
    for (const { path, folder, why } of folders) {
      if (this.unlisted.has(folder)) continue
      this.unlisted.set(folder, { path, timer: null })
      if (say) this.log.error({ path }, `${why}: its sets are kept as they were until it can be listed`)
      if (this.watching) this.listLater(folder)
    }
  }

  /**
   * Is this set's file in a served folder that cannot be listed now, or a file served that cannot be reached (a folder
   * above it cannot be searched)? A reload keeps it.
   */
  underUnlisted (entry) {
    return entry.path !== null && (this.unlisted.has(dirname(entry.path)) || this.unlisted.has(entry.path))
  }

  /** Lists a folder that could not be listed again in `delayMs` (once, whatever asks meanwhile). */
  listLater (folder, delayMs = UNLISTED_RECHECK_MS) {
    const unlisted = this.unlisted.get(folder)
    if (unlisted === undefined || this.closed) return
    clearTimeout(unlisted.timer)
    unlisted.timer = setTimeout(() => this.listAgain(folder).catch((err) => this.log.error({ err: err.message }, 'listing a folder again failed')), delayMs).unref()
  }

  async listAgain (folder) {
    let names
    try {
      names = await readdir(folder)
    } catch (err) {
      if (err.code !== 'ENOTDIR') return this.listLater(folder)
      names = null // a file served, reached again
    }
    const unlisted = this.unlisted.get(folder)
    if (unlisted === undefined || this.closed) return
    this.listed(folder, unlisted.path)
    if (names === null) return this.schedule(folder, 0)
    // A folder configured as one set (`sets.<id>.path`, `mosaic: true`) that could not be reached: that set, re-opened.
    if (this.mosaics.has(folder)) return this.refresh(folder)
    // New files opened, replaced ones re-opened, those gone dropped, as the watch would have seen them.
    const known = [...this.registry.byPath.keys()].filter((path) => dirname(path) === folder)
    for (const path of new Set([...names.filter((name) => kindForFile(name)).map((name) => join(folder, name)), ...known])) this.schedule(path, 0)
  }

  listed (folder, path) {
    clearTimeout(this.unlisted.get(folder)?.timer)
    this.unlisted.delete(folder)
    this.log.info({ path }, 'the folder can be listed again: its files are served as they are now')
    if (this.watching) this.follow(folder) // its watch, if it could not be made while the folder could not be listed
  }

  /**
   * A link in a served folder whose target does not exist (yet) ({ path: the folder, name, link }): said once while it
   * stays so, and with watching on its target is waited for (awaitPath), the link's set served once it is there.
   */
  brokenLink ({ path, name, link }) {
    if (this.broken.has(link)) return
    this.broken.add(link)
    this.log.warn({ path, file: name }, `the link's target does not exist (yet): ${this.config.watch ? 'it is watched, and the set is served once it is there' : 'the set is served at SIGHUP once it is there'}`)
    if (this.watching) this.awaitPath(link)
  }

  /** The broken links a discovery found: each new one said (and waited for), those fixed or gone forgotten. */
  setBroken (links) {
    const now = new Set(links.map(({ link }) => link))
    for (const link of this.broken) {
      if (now.has(link)) continue
      this.broken.delete(link)
      const waiting = this.pending.get(link)
      if (waiting !== undefined) {
        waiting.watcher.close()
        clearTimeout(waiting.timer)
        this.pending.delete(link)
      }
    }
    for (const link of links) this.brokenLink(link)
  }

  /** Watches what a path given is now: a folder's files, a file in its folder, a folder served as one set; or for it to be. */
  follow (path) {
    let info = null
    try { info = statSync(path) } catch {}
    if (info === null) return this.awaitPath(path)
    if (info.isDirectory() && this.mosaics.has(path)) this.watchFolder(path).mosaic = true
    else if (info.isDirectory()) this.watchFolder(path).names = null
    else this.watchFolder(dirname(path)).names?.add(basename(path))
  }

  /** The watch of a folder (made once): `names` null for every tileset file in it, `mosaic` to re-open the folder itself. */
  watchFolder (folder) {
    const known = this.folders.get(folder)
    if (known !== undefined) return known
    const watched = { names: new Set(), mosaic: false }
    this.folders.set(folder, watched)
    try {
      const watcher = watch(folder, { persistent: false }, (event, filename) => {
        if (!filename) return
        if (this.unlisted.has(folder)) this.listLater(folder, this.config.watchDebounceMs) // its mode changed back?
        const target = tilesetName(filename)
        if (!kindForFile(target)) return
        if (watched.mosaic) this.schedule(folder)
        if (watched.names === null || watched.names.has(target)) this.schedule(join(folder, target))
      })
      watcher.on('error', (err) => this.log.warn({ err: err.message }, 'watching a folder failed'))
      this.watchers.push(watcher)
    } catch (err) {
      this.folders.delete(folder) // made again when followed again (a folder that lists again)
      this.log.warn({ err: err.message }, 'cannot watch a folder: changes need SIGHUP')
    }
    return watched
  }

  /**
   * Waits for a path given that does not exist: one watch of the nearest folder above it that does, for the one name
   * in it on the way to the path (nothing else there is looked at), moved down as folders on the way appear, and ended
   * once the path is there. A burst of events (a copy) is one look, `watchDebounceMs` after the last.
   */
  awaitPath (path) {
    if (this.pending.has(path)) return
    // A link that leads nowhere (yet) is there once its target is: that is waited for, wherever it is.
    const wanted = linkTarget(path) ?? path
    let above = dirname(wanted)
    let next = basename(wanted)
    while (!isFolder(above) && dirname(above) !== above) {
      next = basename(above)
      above = dirname(above)
    }
    const waiting = { watcher: null, timer: null }
    const look = () => {
      clearTimeout(waiting.timer)
      waiting.timer = setTimeout(() => this.arrived(path).catch((err) => this.log.error({ err: err.message }, 'serving a path that appeared failed')), this.config.watchDebounceMs).unref()
    }
    try {
      waiting.watcher = watch(above, { persistent: false }, (event, filename) => { if (!filename || filename === next) look() })
      waiting.watcher.on('error', (err) => this.log.warn({ err: err.message }, 'watching for a missing path failed: it needs SIGHUP once there'))
    } catch (err) {
      this.log.warn({ err: err.message }, 'cannot watch for a missing path: it needs SIGHUP once there')
      return
    }
    this.pending.set(path, waiting)
    // It may have appeared between the look that found it missing and the watch.
    if (isPresent(join(above, next))) look()
  }

  /** A path waited for may be there: watched and served as if there at start-up, or waited for from nearer. */
  async arrived (path) {
    const waiting = this.pending.get(path)
    if (waiting === undefined || this.closed) return
    waiting.watcher.close()
    this.pending.delete(path)
    if (!isPresent(path)) return this.awaitPath(path) // a folder on the way to it, or gone again
    this.log.info({ path }, 'path found: serving it')
    this.follow(path)
    if (!this.configuredIds.has(path) && isFolder(path)) { // a served folder: each tileset file in it, as the watch sees new ones
      for (const name of (await readdir(path)).sort()) if (kindForFile(name)) this.schedule(join(path, name), 0)
      return
    }
    await this.refresh(path)
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
    for (const { watcher, timer } of this.pending.values()) { watcher.close(); clearTimeout(timer) }
    for (const { timer } of this.unlisted.values()) clearTimeout(timer)
    this.watchers = []
    this.pending.clear()
  }
}

function isPresent (path) {
  try {
    statSync(path)
    return true
  } catch {
    return false
  }
}

/** Where a link leads (absolute), or null for a path that is not a link. */
function linkTarget (path) {
  try {
    return lstatSync(path).isSymbolicLink() ? resolve(dirname(path), readlinkSync(path)) : null
  } catch {
    return null
  }
}

function isFolder (path) {
  try {
    return statSync(path).isDirectory()
  } catch {
    return false
  }
}


// The tile directory: tiles written to DIR/<place>/<z>/<x>/<y>[@Nx].<ext> for nginx to serve (a place is a set's id,
// or styles/<id>[/512] for a rendered style: the URL path, so nginx maps URLs to files with no lookup). What is in a
// file's name tells nginx how to answer (lib/tile-dir/nginx.js):
//   <y>.<ext>.gz   gzip bytes of a compressible tile (vector): gzip_static sends them, gunzip decodes for the rest
//   <y>.<ext>      an image, or a tile too small to gain from gzip
//   <y>.<ext>.none a tile the set does not have, answered 204;  <y>.<ext>.404: likewise, answered 404
// Each place holds a `.revision` file: the revision of the data its tiles were made from. A place whose data changed
// (a replaced file, a purge, a changed style) is moved aside in one rename, so nginx never serves a tile the server
// would no longer serve, and deleted in the background.
//
// Writes are off the request's path: queued, a few at a time, each to a temporary name then renamed (nginx never sees
// half a tile). The bytes on disk are bounded, oldest written removed first; tiles with a lifetime (PostGIS) are
// removed when it ends. The index of what is on disk is this process's: rebuilt from the files at start.
import { randomUUID } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, writeFileSync } from 'node:fs'
import { mkdir, readdir, rename, rm, stat, unlink, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { ConfigError } from '../config.js'

const MARKER = '.revision'
const TRASH = '.trash'
const SUFFIXES = ['', '.gz', '.none', '.404'] // the forms one tile may take on disk (at most one at a time)
const MAX_QUEUED = 2000 // writes waiting; more are dropped (counted): the tile is written again when made again
const WRITERS = 4 // writes under way at once
const SWEEP_MS = 1000 // how often tiles past their lifetime are looked for

export class TileDirectory {
  /**
   * `revisionOf(place)` → the revision of the data a place's tiles would be made from now, or null when nothing is
   * served there any more (its folder goes). `ttlOf(place)` → how long its tiles live (undefined: until it changes).
   */
  constructor ({ dir, maxBytes, log, revisionOf, ttlOf }) {
    this.dir = dir
    this.maxBytes = maxBytes
    this.log = log
    this.revisionOf = revisionOf
    this.ttlOf = ttlOf
    this.places = new Map() // place → { revision, generation, ttlMs, files: Map(tile path → { suffix, size, at }), dirs }
    this.bytes = 0
    this.queue = []
    this.writing = 0
    this.preparing = 0 // tiles being encoded for writing (see prepared)
    this.idleWaiters = []
    this.temporaries = 0
    this.stats = { written: 0, dropped: 0, failed: 0, evicted: 0, expired: 0, purged: 0 }
    this.opened = false
    this.closed = false
    this.sweeper = null
    this.walked = Promise.resolve() // the index of what was on disk at start, built (see open)
  }

  /**
   * Creates the folder, empties the trash, and checks each place on disk against its data: kept, or moved aside. The
   * kept places' files are indexed in the background (`walked`): a large folder does not hold up the start.
   */
  async open () {
    try {
      mkdirSync(join(this.dir, TRASH), { recursive: true })
    } catch (err) {
      const why = { EACCES: 'permission denied', EPERM: 'permission denied', ENOTDIR: 'a part of its path is a file', EROFS: 'a read-only file system', ENOSPC: 'no space left' }[err.code] ?? err.code ?? err.message
      throw new ConfigError(`cannot use ${this.dir} as the tile directory (tileDir.dir): ${why}`)
    }
    this.emptyTrash()
    const kept = []
    for (const place of this.placesOnDisk()) {
      const revision = this.revisionOf(place)
      const marker = readMarker(this.dir, place)
      // Tiles with a lifetime (PostGIS) are not kept across a restart: how long the server was down is not known.
      // No marker: a folder holding only another place (styles/<id> with tiles of styles/<id>/512 only).
      if (revision === null || (marker !== null && marker !== revision) || this.ttlOf(place) !== undefined) this.moveAside(place)
      else kept.push(this.placeOf(place, revision))
    }
    this.opened = true
    this.sweeper = setInterval(() => this.sweep(), SWEEP_MS).unref()
    this.walked = (async () => { for (const known of kept) await this.index(known) })()
      .catch((err) => this.log.warn({ err: err.message }, 'tile directory: cannot read what is on disk'))
  }

  /** Place folders on disk: top-level folders, and styles/<id> and styles/<id>/512 (rendered styles). */
  placesOnDisk () {
    const found = []
    const folders = (path) => {
      try {
        return readdirSync(path, { withFileTypes: true }).filter((d) => d.isDirectory() && !d.name.startsWith('.')).map((d) => d.name)
      } catch {
        return []
      }
    }
    for (const name of folders(this.dir)) {
      if (name !== 'styles') {
        found.push(name)
        continue
      }
      for (const id of folders(join(this.dir, 'styles'))) {
        found.push(`styles/${id}`)
        if (existsSync(join(this.dir, 'styles', id, '512'))) found.push(`styles/${id}/512`)
      }
    }
    return found
  }

  /** Indexes the tiles of a place found on disk at start, the oldest first (tiles written since are already there). */
  async index (known) {
    const found = []
    await walkTiles(join(this.dir, known.place), '', found)
    if (this.places.get(known.place) !== known) return // moved aside meanwhile
    found.sort((a, b) => a.at - b.at)
    const written = new Map(known.files)
    known.files.clear()
    for (const tile of found) {
      if (written.has(tile.path)) continue
      known.files.set(tile.path, { suffix: tile.suffix, size: tile.size, at: tile.at })
      this.bytes += tile.size
    }
    for (const [path, file] of written) known.files.set(path, file)
    this.sweep()
    this.evict()
  }

  placeOf (place, revision) {
    let known = this.places.get(place)
    if (known === undefined) {
      known = { place, revision, generation: 0, ttlMs: this.ttlOf(place), files: new Map(), dirs: new Set(), marked: false }
      this.places.set(place, known)
    }
    return known
  }

  /**
   * Checks every place against its data now (a set replaced, removed or reloaded; a style changed), moving aside
   * those whose data changed: synchronous, so nginx stops serving them before the server answers anew.
   */
  refresh () {
    if (!this.opened || this.closed) return
    const places = new Set([...this.places.keys(), ...this.placesOnDisk()])
    for (const place of places) {
      const revision = this.revisionOf(place)
      const known = this.places.get(place)
      if (revision === null) this.moveAside(place)
      else if (known !== undefined) { if (known.revision !== revision) this.moveAside(place) }
      else if ((readMarker(this.dir, place) ?? revision) !== revision) this.moveAside(place) // another process's
    }
  }

  /** Forgets a place's tiles now (its data was said to have changed: a NOTIFY purge, a reload of a database). */
  purge (place) {
    if (!this.opened || this.closed) return
    if (this.places.has(place) || existsSync(join(this.dir, place))) this.moveAside(place)
  }

  /** Moves a place's folder aside in one rename (nginx stops finding its tiles at once), deleted in the background. */
  moveAside (place) {
    // Its index goes, and those of places inside it (styles/<id>/512 is in styles/<id>).
    for (const [name, known] of this.places) {
      if (name !== place && !name.startsWith(place + '/')) continue
      for (const file of known.files.values()) this.bytes -= file.size
      this.places.delete(name)
    }
    // A name no earlier move can have taken: a folder left in the trash (an rm that failed while a write landed in
    // it, a process killed mid-way; in a container the pid is the same at every start) makes the rename ENOTEMPTY,
    // and nginx would go on serving the changed data's tiles.
    const target = join(this.dir, TRASH, `${place.replaceAll('/', '_')}.${randomUUID()}`)
    try {
      renameSync(join(this.dir, place), target)
      this.stats.purged++
      this.log.info({ place }, 'tile directory: tiles of changed data moved aside')
    } catch (err) {
      if (err.code !== 'ENOENT') this.log.warn({ place, err: err.code ?? err.message }, 'tile directory: cannot move tiles aside')
      return
    }
    rm(target, { recursive: true, force: true, maxRetries: 3 }).catch(() => {}) // retried: a late write may land in it
  }

  emptyTrash () {
    for (const name of readdirSync(join(this.dir, TRASH))) rm(join(this.dir, TRASH, name), { recursive: true, force: true }).catch(() => {})
  }

  /**
   * Queues a tile for writing: `bytes` (null for an absent tile) under `path` (<z>/<x>/<y>[@Nx].<ext>) in `place`, as
   * `suffix` says (see the top of this file), made from data of `revision`. Dropped when the queue is full or the
   * place's data changes meanwhile.
   */
  write (place, revision, path, suffix, bytes) {
    if (!this.opened || this.closed) return
    let known = this.places.get(place)
    if (known === undefined || known.revision !== revision) {
      if (this.revisionOf(place) !== revision) return // made from data no longer served (a read that ended late)
      // Its data changed and no event said so yet; or a place new to this process, maybe another's of other data.
      const marker = readMarker(this.dir, place)
      if (known !== undefined || (marker !== null && marker !== revision)) this.moveAside(place)
      known = this.placeOf(place, revision)
    }
    if (known.files.get(path)?.suffix === suffix) return // there already (written by this process)
    if (this.queue.length >= MAX_QUEUED) {
      this.stats.dropped++
      return
    }
    this.queue.push({ place, known, generation: known.generation, path, suffix, bytes })
    this.pump()
  }

  /** Counts a tile being encoded before it is written (`encoding`, a promise), so that idle() waits for it too. */
  prepared (encoding) {
    this.preparing++
    encoding.finally(() => {
      this.preparing--
      this.settled()
    })
  }

  settled () {
    if (this.writing === 0 && this.queue.length === 0 && this.preparing === 0) for (const resolve of this.idleWaiters.splice(0)) resolve()
  }

  pump () {
    while (this.writing < WRITERS && this.queue.length > 0) {
      const job = this.queue.shift()
      this.writing++
      this.writeTile(job)
        .catch((err) => {
          this.stats.failed++
          if (this.stats.failed === 1 || this.stats.failed % 1000 === 0) this.log.warn({ err: err.code ?? err.message, failed: this.stats.failed }, 'tile directory: writes failing')
        })
        .finally(() => {
          this.writing--
          this.pump()
          this.settled()
        })
    }
  }

  async writeTile ({ place, known, generation, path, suffix, bytes }) {
    const current = () => this.places.get(place) === known && known.generation === generation && !this.closed
    if (!current()) return
    const folder = join(this.dir, place)
    const final = join(folder, path + suffix)
    const temporary = `${final}.${process.pid}.${++this.temporaries}.tmp`
    const slash = path.lastIndexOf('/')
    const sub = path.slice(0, slash)
    for (let attempt = 0; ; attempt++) {
      try {
        if (!known.marked) {
          writeMarker(this.dir, place, known.revision)
          known.marked = true
        }
        if (!known.dirs.has(sub)) {
          await mkdir(join(folder, sub), { recursive: true })
          if (known.dirs.size > 100_000) known.dirs.clear()
          known.dirs.add(sub)
        }
        await writeFile(temporary, bytes ?? EMPTY)
        // The place's data may have changed while the bytes were written: they must not land in its new folder.
        if (!current()) return unlink(temporary).catch(() => {})
        await rename(temporary, final)
        break
      } catch (err) {
        if (!current()) return unlink(temporary).catch(() => {}) // moved aside meanwhile: nothing to write any more
        // Another process moved the folder aside (its data changed): made again, once.
        if (err.code !== 'ENOENT' || attempt > 0) throw err
        known.dirs.clear()
        known.marked = false
      }
    }
    if (!current()) return // moved aside just after: the file went with the folder
    const previous = known.files.get(path)
    if (previous !== undefined) {
      this.bytes -= previous.size
      known.files.delete(path) // re-inserted last: the newest
    }
    const size = (bytes?.length ?? 0) + 512 // a file costs a block of the disk, roughly, even empty
    known.files.set(path, { suffix, size, at: Date.now() })
    this.bytes += size
    this.stats.written++
    // One form of a tile at a time (another process may have written another), or nginx could pick the wrong one.
    for (const other of SUFFIXES) if (other !== suffix) await unlink(join(folder, path + other)).catch(() => {})
    this.evict()
  }

  /** Removes the oldest written tiles, across places, while the directory holds more than its bound. */
  evict () {
    if (this.bytes <= this.maxBytes) return
    const target = this.maxBytes * 0.98 // some room, so that eviction does not run on every write
    // At most 64 files a call: unlinks share libuv's threads with gzip and image encoding; the next writes go on.
    for (let removed = 0; this.bytes > target && removed < 64; removed++) {
      let oldest = null
      let oldestAt = Infinity
      for (const known of this.places.values()) {
        const first = known.files.values().next().value
        if (first !== undefined && first.at < oldestAt) {
          oldest = known
          oldestAt = first.at
        }
      }
      if (oldest === null) return
      this.removeFirst(oldest)
      this.stats.evicted++
    }
  }

  /** Removes tiles past their place's lifetime (the oldest are first in each place's index). */
  sweep () {
    const now = Date.now()
    for (const known of this.places.values()) {
      if (known.ttlMs === undefined) continue
      for (const file of known.files.values()) {
        if (file.at + known.ttlMs > now) break
        this.removeFirst(known)
        this.stats.expired++
      }
    }
  }

  removeFirst (known) {
    const [path, file] = known.files.entries().next().value
    known.files.delete(path)
    this.bytes -= file.size
    unlink(join(this.dir, known.place, path + file.suffix)).catch(() => {})
  }

  /** Resolves when no write is queued or under way (tests, export, shutdown). */
  idle () {
    if (this.writing === 0 && this.queue.length === 0 && this.preparing === 0) return Promise.resolve()
    return new Promise((resolve) => this.idleWaiters.push(resolve))
  }

  get state () {
    let files = 0
    for (const known of this.places.values()) files += known.files.size
    return { places: this.places.size, files, bytes: this.bytes, maxBytes: this.maxBytes, queued: this.queue.length, ...this.stats }
  }

  async close () {
    clearInterval(this.sweeper)
    await this.walked
    await this.idle()
    this.closed = true
  }
}

const EMPTY = Buffer.alloc(0)

function readMarker (dir, place) {
  try {
    return readFileSync(join(dir, place, MARKER), 'utf8')
  } catch {
    return null
  }
}

/** The marker, written whole (another process may read it at any moment). */
function writeMarker (dir, place, revision) {
  mkdirSync(join(dir, place), { recursive: true })
  const temporary = join(dir, place, `${MARKER}.${process.pid}.tmp`)
  writeFileSync(temporary, revision)
  renameSync(temporary, join(dir, place, MARKER))
}

const TILE_NAME = /^(\d+(?:@\dx)?\.[a-z0-9]+)(\.gz|\.none|\.404)?$/

/** Tile files under <z>/<x>/ of a place, with their size and time (temporary files of a crash are removed). */
async function walkTiles (root, prefix, found, depth = 0) {
  let entries
  try {
    entries = await readdir(join(root, prefix), { withFileTypes: true })
  } catch {
    return
  }
  for (const d of entries) {
    const rel = prefix === '' ? d.name : `${prefix}/${d.name}`
    if (d.isDirectory() && depth < 2 && /^\d+$/.test(d.name)) await walkTiles(root, rel, found, depth + 1)
    else if (d.isFile() && depth === 2) {
      if (d.name.endsWith('.tmp')) {
        await unlink(join(root, rel)).catch(() => {})
        continue
      }
      const m = TILE_NAME.exec(d.name)
      if (m === null) continue
      const info = await stat(join(root, rel)).catch(() => null)
      if (info !== null) found.push({ path: `${prefix}/${m[1]}`, suffix: m[2] ?? '', size: info.size + 512, at: info.mtimeMs })
    }
  }
}


// The tilesets: found in folders, files and URLs; each gets an id (the file name without extension) and aliases
// (the file name with it). Folders are watched: a new file is opened, a replaced one re-opened (in-flight reads on the
// old handle finish first), a deleted one dropped. A file that cannot be served is kept as "unavailable" with its
// reason, so its URL answers 503 instead of 404 and the rest keep serving.
import { existsSync, statSync, watch } from 'node:fs'
import { readdir, stat } from 'node:fs/promises'
import { basename, dirname, extname, join, resolve } from 'node:path'
import * as mbtiles from './sources/mbtiles.js'
import * as pmtiles from './sources/pmtiles.js'
import * as demo from './sources/demo.js'
import { isVector } from './tiletype.js'

const FILE_KINDS = [mbtiles, pmtiles]
const SIDECARS = ['-journal', '-wal']
const isUrl = (s) => /^[a-z][a-z0-9+.-]*:\/\//i.test(s)

const kindForFile = (name) => FILE_KINDS.find((k) => k.extensions.includes(extname(name).toLowerCase()))
const kindForUrl = (url) => FILE_KINDS.find((k) => k.matchesUrl?.(url))
const stemOf = (name) => basename(name, extname(name))
const sameFile = (a, b) => a.mtimeMs === b.mtimeMs && a.size === b.size && a.ino === b.ino

export class Catalog {
  constructor ({ config, log, cache }) {
    this.config = config
    this.log = log
    this.cache = cache
    this.entries = new Map() // id → entry, in the order found
    this.aliases = new Map() // every name a URL may use → entry
    this.byPath = new Map() // absolute file path → entry
    this.watchers = []
    this.timers = new Map()
    this.generation = 0
    this.loaded = false
    this.closed = false
  }

  /** The set a URL names: its id or file name, or undefined. */
  get (name) {
    return this.aliases.get(name)
  }

  /** Sets that serve tiles, in the order found. */
  available () {
    const list = []
    for (const entry of this.entries.values()) if (entry.source !== null) list.push(entry)
    return list
  }

  unavailable () {
    const list = []
    for (const entry of this.entries.values()) if (entry.source === null) list.push({ id: entry.id, reason: entry.reason })
    return list
  }

  async load () {
    for (const spec of await this.discover()) await this.openSpec(spec)
    this.loaded = true
  }

  /** What the configured paths hold now: { path } or { url } specs, plus configured sets. */
  async discover () {
    const specs = []
    const { paths, sets } = this.config
    for (const [id, options] of Object.entries(sets)) {
      if (options.url) specs.push({ id, url: options.url })
      else if (options.path) specs.push({ id, path: resolve(options.path) })
    }
    for (const item of paths) {
      if (isUrl(item)) {
        specs.push({ url: item })
        continue
      }
      const path = resolve(item)
      let info
      try {
        info = await stat(path)
      } catch {
        this.log.error({ path: item }, 'path not found: nothing served from it')
        continue
      }
      if (info.isDirectory()) {
        const names = (await readdir(path)).sort()
        for (const name of names) {
          const file = join(path, name)
          if (kindForFile(name) && !specs.some((s) => s.path === file)) specs.push({ path: file, folder: path })
        }
      } else if (kindForFile(path)) {
        if (!specs.some((s) => s.path === path)) specs.push({ path })
      } else {
        this.log.error({ path: item }, 'not a tileset file (.mbtiles or .pmtiles): skipped')
      }
    }
    if (specs.length === 0 && this.config.demo) specs.push({ id: 'countries', demo: true })
    return specs
  }

  newId (spec) {
    if (spec.id) return spec.id
    const name = spec.path ? basename(spec.path) : basename(new URL(spec.url).pathname) || 'remote'
    const stem = stemOf(name)
    if (!this.entries.has(stem)) return stem
    if (!this.entries.has(name)) return name
    let n = 2
    while (this.entries.has(`${stem}-${n}`)) n++
    return `${stem}-${n}`
  }

  /** Opens what a spec names and registers it (as unavailable, with the reason, if it cannot be opened). */
  async openSpec (spec, id = this.newId(spec)) {
    const kind = spec.demo ? demo : spec.url ? kindForUrl(spec.url) : kindForFile(spec.path)
    const options = this.config.sets[id] ?? {}
    const entry = {
      id,
      kind: kind?.kind ?? 'unknown',
      path: spec.path ?? null,
      url: spec.url ?? null,
      file: null,
      source: null,
      reason: null,
      key: `${id}#${++this.generation}/`,
      options,
      active: 0,
      retired: false,
      errors: new Set(),
      sniffed: {}, // what compressed tiles of this set hold (see describeTile)
    }
    if (spec.path) {
      try {
        entry.file = await stat(spec.path)
      } catch {
        return null // gone between listing and opening
      }
    }
    if (!kind) {
      entry.reason = 'no source kind serves this URL'
    } else if (spec.path && SIDECARS.some((s) => existsSync(spec.path + s))) {
      entry.reason = 'still being written (a -journal or -wal file is beside it)'
    } else {
      try {
        entry.source = await kind.open({ ...options, ...spec, id }, { log: this.log })
      } catch (err) {
        entry.reason = err.message
      }
    }
    if (entry.source !== null) {
      const format = entry.source.format
      entry.missingStatus = options.missingStatus ?? (isVector(format) ? 204 : 404)
      entry.cacheControl = options.cacheControl ?? this.config.cacheControl
      this.log.info({ set: id, kind: entry.kind, format, minzoom: entry.source.tilejson.minzoom, maxzoom: entry.source.tilejson.maxzoom }, 'serving')
    } else {
      this.log.warn({ set: id, reason: entry.reason }, 'tileset unavailable')
    }
    this.register(entry)
    return entry
  }

  register (entry) {
    const previous = this.entries.get(entry.id)
    this.entries.set(entry.id, entry)
    this.aliases.set(entry.id, entry)
    const name = entry.path ? basename(entry.path) : entry.url ? basename(new URL(entry.url).pathname) : null
    if (name && name !== entry.id && (!this.aliases.has(name) || this.aliases.get(name) === previous)) this.aliases.set(name, entry)
    if (entry.path) this.byPath.set(entry.path, entry)
    if (previous && previous !== entry) this.retire(previous)
  }

  remove (entry) {
    if (this.entries.get(entry.id) === entry) this.entries.delete(entry.id)
    for (const [alias, e] of this.aliases) if (e === entry) this.aliases.delete(alias)
    if (entry.path && this.byPath.get(entry.path) === entry) this.byPath.delete(entry.path)
    this.log.info({ set: entry.id }, 'tileset removed')
    this.retire(entry)
  }

  /** Stops an entry from being found; its handle closes once the reads under way on it are done. */
  retire (entry) {
    entry.retired = true
    this.cache.purge(entry.key)
    if (entry.active === 0) this.closeSource(entry)
  }

  closeSource (entry) {
    const source = entry.source
    if (source === null) return
    Promise.resolve()
      .then(() => source.close())
      .catch((err) => this.log.warn({ set: entry.id, err: err.message }, 'closing tileset failed'))
  }

  /** Reads a stored tile, keeping the entry's handle open until the read is done. */
  async readTile (entry, z, x, y) {
    entry.active++
    try {
      return await entry.source.getTile(z, x, y)
    } finally {
      if (--entry.active === 0 && entry.retired) this.closeSource(entry)
    }
  }

  /** Re-checks one file after a change: opens it if new, re-opens it if replaced, drops it if gone. */
  async refreshFile (path, { force = false } = {}) {
    if (this.closed) return
    const known = this.byPath.get(path)
    let info = null
    try {
      info = await stat(path)
    } catch {}
    if (info === null || !info.isFile()) {
      if (known) this.remove(known)
      return
    }
    if (known && !force && known.file && sameFile(known.file, info) && known.source !== null) return
    // SQLite keeps readers consistent while another process writes in place; re-read when it is done.
    if (known && known.source !== null && !force && SIDECARS.some((s) => existsSync(path + s))) return
    await this.openSpec({ path, folder: known?.folder }, known?.id)
  }

  /** Full reload (SIGHUP): every set re-opened, new files found, missing ones dropped. */
  async reload () {
    const specs = await this.discover()
    const seen = new Set()
    for (const spec of specs) {
      if (spec.path) {
        seen.add(spec.path)
        const known = this.byPath.get(spec.path)
        if (known) await this.refreshFile(spec.path, { force: true })
        else await this.openSpec(spec)
      } else {
        const known = [...this.entries.values()].find((e) => (spec.url && e.url === spec.url) || (spec.demo && e.kind === 'demo'))
        seen.add(known)
        await this.openSpec(spec, known?.id)
      }
    }
    for (const entry of [...this.entries.values()]) {
      if (entry.path ? !seen.has(entry.path) : !seen.has(entry) && !entry.retired && entry.kind !== 'demo') this.remove(entry)
    }
    this.log.info({ sets: this.available().length, unavailable: this.unavailable().length }, 'catalog reloaded')
  }

  /** Watches the served folders (and the folders of served files) for changes. */
  watch () {
    const folders = new Map() // folder → names to watch (null: every tileset file)
    for (const item of this.config.paths) {
      if (isUrl(item)) continue
      const path = resolve(item)
      if (this.isFolder(path)) folders.set(path, null)
      else if (!folders.has(dirname(path)) || folders.get(dirname(path)) !== null) {
        const names = folders.get(dirname(path)) ?? new Set()
        names.add(basename(path))
        folders.set(dirname(path), names)
      }
    }
    for (const [folder, names] of folders) {
      try {
        const watcher = watch(folder, { persistent: false }, (event, filename) => {
          if (!filename) return
          const target = SIDECARS.concat('-shm').reduce((n, s) => (n.endsWith(s) ? n.slice(0, -s.length) : n), filename)
          if (!kindForFile(target) || (names && !names.has(target))) return
          this.schedule(join(folder, target))
        })
        watcher.on('error', (err) => this.log.warn({ err: err.message }, 'watching a folder failed'))
        this.watchers.push(watcher)
      } catch (err) {
        this.log.warn({ err: err.message }, 'cannot watch a folder: changes need SIGHUP')
      }
    }
  }

  isFolder (path) {
    try {
      return statSync(path).isDirectory()
    } catch {
      return false
    }
  }

  /** Debounces bursts of events (a copy in progress fires many) into one re-check per file. */
  schedule (path) {
    clearTimeout(this.timers.get(path))
    this.timers.set(path, setTimeout(() => {
      this.timers.delete(path)
      this.refreshFile(path).catch((err) => this.log.error({ err: err.message }, 'reloading a tileset failed'))
    }, this.config.watchDebounceMs).unref())
  }

  async close () {
    this.closed = true
    for (const w of this.watchers) w.close()
    for (const t of this.timers.values()) clearTimeout(t)
    this.watchers = []
    for (const entry of this.entries.values()) this.retire(entry)
    this.entries.clear()
    this.aliases.clear()
    this.byPath.clear()
  }
}

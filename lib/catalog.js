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
import * as postgis from './sources/postgis.js'
import * as cog from './sources/cog.js'
import { compose, layerNames } from './sources/composite.js'
import { isVector } from './tiletype.js'

const FILE_KINDS = [mbtiles, pmtiles, cog]
const SIDECARS = ['-journal', '-wal']
const isUrl = (s) => /^[a-z][a-z0-9+.-]*:\/\//i.test(s)

const kindForFile = (name) => FILE_KINDS.find((k) => k.extensions.includes(extname(name).toLowerCase()))
const URL_KINDS = [pmtiles, cog, postgis]
const kindForUrl = (url) => URL_KINDS.find((k) => k.matchesUrl(url))
/** A database URL fit for logs: no password. */
const redact = (url) => { try { const u = new URL(url); if (u.password) u.password = '***'; return u.toString() } catch { return 'postgres' } }
const MAX_COMPOSITES = 100
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
    this.providers = new Map() // database URL → postgis provider (one pool, many sets)
    this.composites = new Map() // "a,b" → composite entry, built on first request
    this.generation = 0
    this.loaded = false
    this.closed = false
  }

  /** The set a URL names: its id or file name, a composite "a,b" of composable sets, or undefined. */
  get (name) {
    const entry = this.aliases.get(name)
    if (entry !== undefined || name.indexOf(',') === -1) return entry
    return this.composite(name)
  }

  composite (name) {
    const known = this.composites.get(name)
    if (known !== undefined && !known.parts.some((p) => p.retired)) return known
    const ids = name.split(',')
    if (ids.length > 16 || new Set(ids).size !== ids.length) return undefined
    const parts = ids.map((id) => this.aliases.get(id))
    if (parts.some((p) => p === undefined || p.source === null || !p.source.composable)) return undefined
    if (layerNames(parts) === null) return undefined
    if (this.composites.size >= MAX_COMPOSITES) this.composites.clear()
    // As fresh as its most perishable part.
    const ttls = parts.filter((p) => p.ttlMs !== undefined).map((p) => p.ttlMs / 1000)
    const entry = this.makeEntry({ id: name, kind: 'composite', ttlS: ttls.length ? Math.min(...ttls) : undefined }, compose(name, parts))
    entry.parts = parts
    this.composites.set(name, entry)
    return entry
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
    this.startRediscovery()
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
          if (kindForFile(name) && !specs.some((s) => s.path === file)) specs.push({ path: file })
        }
      } else if (kindForFile(path)) {
        if (!specs.some((s) => s.path === path)) specs.push({ path })
      } else {
        this.log.error({ path: item }, 'not a tileset file (.mbtiles, .pmtiles, .tif or .tiff): skipped')
      }
    }
    const database = this.config.postgres.url
    if (database && !specs.some((s) => s.url === database)) specs.push({ url: database })
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

  /**
   * An entry: a set as the routes see it, with its per-set options and bookkeeping. `source` null: unavailable.
   * Tiles of a source whose data may change unseen (`source.cacheTtlS`, e.g. PostGIS) are cached that long, or as the
   * set's `cacheTtlS` says, with a Cache-Control to match; other sets' tiles live until their file changes.
   */
  makeEntry ({ id, kind, path = null, url = null, group = null, reason = null, ttlS }, source = null) {
    const options = this.config.sets[id] ?? {}
    const entry = {
      id,
      kind,
      path,
      url,
      group,
      file: null,
      source,
      reason,
      key: `${id}#${++this.generation}/`,
      options,
      ttlMs: undefined, // how long a cached tile lives; undefined: until the set is reloaded; 0: not cached
      active: 0,
      retired: false,
      errors: new Set(),
      sniffed: {}, // what compressed tiles of this set hold (see describeTile)
    }
    if (source !== null) {
      const ttl = options.cacheTtlS ?? ttlS ?? source.cacheTtlS
      entry.ttlMs = ttl === undefined ? undefined : ttl * 1000
      entry.missingStatus = options.missingStatus ?? (isVector(source.format) ? 204 : 404)
      entry.cacheControl = options.cacheControl ??
        (ttl === undefined ? this.config.cacheControl : ttl > 0 ? `public, max-age=${Math.floor(ttl)}` : 'no-cache')
    }
    return entry
  }

  /**
   * Forgets an entry's cached tiles in O(1): a new key prefix makes them unreachable, and they age out of the LRU. A
   * read under way stores under the old prefix, so it cannot bring stale data back. Composites built on it follow.
   */
  expire (entry) {
    entry.key = `${entry.id}#${++this.generation}/`
    for (const c of this.composites.values()) if (c.parts.includes(entry)) c.key = `${c.id}#${++this.generation}/`
  }

  /**
   * A NOTIFY from a database: the payload names sets by id, `schema.table` or `table` (a function by its name); ''
   * names every set of that database. Names it does not know are ignored.
   */
  notified (url, message) {
    const payload = message.trim()
    let hits = 0
    for (const entry of this.entries.values()) {
      if (entry.group !== url || entry.source === null) continue
      const md = entry.source.metadata
      const name = md.table ?? md.function
      if (payload === '' || payload === entry.id || payload === name || payload === `${md.schema}.${name}`) {
        this.expire(entry)
        hits++
      }
    }
    if (hits === 0) this.log.debug({ payload: payload.slice(0, 200) }, 'NOTIFY names no set: ignored')
  }

  /** Opens what a spec names and registers it (as unavailable, with the reason, if it cannot be opened). */
  async openSpec (spec, id = this.newId(spec)) {
    const kind = spec.demo ? demo : spec.url ? kindForUrl(spec.url) : kindForFile(spec.path)
    if (kind === postgis) return this.openDatabase(spec.url)
    let file = null
    if (spec.path) {
      try {
        file = await stat(spec.path)
      } catch {
        return null // gone between listing and opening
      }
    }
    let source = null
    let reason = null
    // A -wal beside a file we already have open may be our own reader's: only a file new to us is judged by it.
    const ours = spec.path && this.byPath.get(spec.path)?.source
    if (!kind) {
      reason = 'no source kind serves this URL'
    } else if (file !== null && !file.isFile()) {
      reason = 'not a regular file'
    } else if (spec.path && !ours && SIDECARS.some((s) => existsSync(spec.path + s))) {
      reason = 'still being written (a -journal or -wal file is beside it)'
    } else {
      try {
        source = await kind.open({ ...this.config.sets[id], ...spec, id }, { log: this.log, raster: this.config.raster })
      } catch (err) {
        // Reasons reach 503 bodies and /health: name the file, never the folder it is in.
        reason = spec.path ? String(err.message).replaceAll(dirname(spec.path) + '/', '') : String(err.message)
      }
    }
    if (this.closed) { // the catalog closed while this file was opening
      await source?.close()
      return null
    }
    const entry = this.makeEntry({ id, kind: kind?.kind ?? 'unknown', path: spec.path, url: spec.url, reason }, source)
    entry.file = file
    if (source?.settle && file !== null) this.settleLater(entry)
    if (source !== null) {
      this.log.info({ set: id, kind: entry.kind, format: source.format, minzoom: source.tilejson.minzoom, maxzoom: source.tilejson.maxzoom }, 'serving')
    } else {
      this.log.warn({ set: id, reason }, 'tileset unavailable')
    }
    this.register(entry)
    return entry
  }

  /**
   * (Re-)discovers the sets of a database and registers them as one group. While the database cannot be reached,
   * discovery is retried in the background; sets found earlier keep their entries (their tiles answer 503 until the
   * pool reconnects, which it does on its own).
   */
  async openDatabase (url) {
    let provider = this.providers.get(url)
    if (provider === undefined) {
      provider = postgis.createProvider(url, this.config.postgres, { log: this.log })
      this.providers.set(url, provider)
      provider.listen((payload) => this.notified(url, payload))
    }
    let found
    try {
      found = await provider.discover()
    } catch (err) {
      if (!provider.retry) this.log.warn({ database: redact(url), err: err.message }, 'postgres unreachable: sets will appear when it answers')
      this.retryDatabase(url, provider)
      return null
    }
    clearTimeout(provider.retry)
    provider.retry = null
    const ids = new Set()
    for (const { id, source, reason = null } of found) {
      const previous = this.entries.get(id)
      const finalId = previous && previous.group !== url ? `${new URL(url).pathname.slice(1) || 'postgres'}.${id}` : id
      ids.add(finalId)
      // Unchanged since the last discovery: keep the entry, and with it its cached tiles.
      const same = previous && previous.group === url && (source === null
        ? previous.source === null && previous.reason === reason
        : previous.source?.sql === source.sql && JSON.stringify(previous.source.tilejson) === JSON.stringify(source.tilejson))
      if (same) continue
      // Skipped tables (no SRID, a geometry type MVT cannot hold) are unavailable sets, with the reason, like bad files.
      if (source === null) this.log.warn({ set: finalId, reason }, 'postgres table unavailable')
      this.register(this.makeEntry({ id: finalId, kind: postgis.kind, group: url, reason }, source))
    }
    for (const entry of [...this.entries.values()]) if (entry.group === url && !ids.has(entry.id)) this.remove(entry)
    this.log.info({ database: redact(url), sets: ids.size }, 'postgres sets discovered')
    return null
  }

  retryDatabase (url, provider) {
    if (this.closed) return
    clearTimeout(provider.retry)
    provider.retry = setTimeout(() => this.openDatabase(url).catch(() => {}), this.config.postgres.retryMs ?? 5000)
    provider.retry.unref()
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
    clearTimeout(entry.settleTimer)
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

  /**
   * Tells a source its file has settled once the file has not changed for `settleMs` (at once for a file that old
   * already): MBTiles then keeps its lock, which is faster but refuses writers (see mbtiles.js).
   */
  settleLater (entry) {
    const wait = entry.file.mtimeMs + this.config.settleMs - Date.now()
    const settle = async () => {
      if (entry.retired || this.closed) return
      let now = null
      try { now = await stat(entry.path) } catch {}
      if (now === null || !sameFile(now, entry.file) || SIDECARS.some((s) => existsSync(entry.path + s))) return // the watcher re-opens it
      try { entry.source.settle() } catch (err) { this.log.warn({ set: entry.id, err: err.message }, 'settling failed') }
    }
    if (wait <= 0) {
      try { entry.source.settle() } catch (err) { this.log.warn({ set: entry.id, err: err.message }, 'settling failed') }
    } else {
      entry.settleTimer = setTimeout(settle, wait)
      entry.settleTimer.unref()
    }
  }

  /** Reads a stored tile, keeping the entry's handle open until the read is done. */
  async readTile (entry, z, x, y, query, variant) {
    entry.active++
    try {
      return await entry.source.getTile(z, x, y, query, variant)
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
    if (!force) {
      // A writer may pause between commits (its journal gone meanwhile): open only what has stopped changing.
      await new Promise((resolve) => setTimeout(resolve, this.config.watchDebounceMs))
      let again = null
      try { again = await stat(path) } catch {}
      if (again === null || !sameFile(again, info)) {
        this.schedule(path)
        return
      }
    }
    await this.openSpec({ path }, known?.id)
  }

  /** Full reload (SIGHUP): every set re-opened, new files found, missing ones dropped, database tiles purged. */
  async reload () {
    const specs = await this.discover()
    const seen = new Set()
    for (const spec of specs) {
      if (spec.path) {
        seen.add(spec.path)
        const known = this.byPath.get(spec.path)
        if (known) await this.refreshFile(spec.path, { force: true })
        else await this.openSpec(spec)
      } else if (this.providers.has(spec.url) || (spec.url && kindForUrl(spec.url) === postgis)) {
        seen.add(spec.url)
        await this.openDatabase(spec.url)
        // Kept sets (same shape) may hold other rows now: SIGHUP drops their cached tiles too.
        for (const entry of this.entries.values()) if (entry.group === spec.url) this.expire(entry)
      } else {
        const known = [...this.entries.values()].find((e) => (spec.url && e.url === spec.url) || (spec.demo && e.kind === 'demo'))
        seen.add(spec.url ?? 'demo')
        await this.openSpec(spec, known?.id ?? spec.id)
      }
    }
    for (const entry of [...this.entries.values()]) {
      const kept = entry.path ? seen.has(entry.path) : entry.group ? seen.has(entry.group) : entry.url ? seen.has(entry.url) : seen.has('demo')
      if (!kept) this.remove(entry)
    }
    this.log.info({ sets: this.available().length, unavailable: this.unavailable().length }, 'catalog reloaded')
  }

  /** Watches the served folders (and the folders of served files) for changes. */
  watch () {
    const folders = new Map() // folder → names to watch (null: every tileset file)
    const configured = Object.values(this.config.sets).filter((s) => s.path).map((s) => s.path)
    for (const item of [...this.config.paths, ...configured]) {
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

  /** Re-discovers every database on an interval (config postgres.discoverIntervalS; 0: only on SIGHUP). */
  startRediscovery () {
    const seconds = this.config.postgres.discoverIntervalS ?? 0
    if (seconds <= 0 || this.providers.size === 0) return
    this.rediscovery = setInterval(() => {
      for (const url of this.providers.keys()) this.openDatabase(url).catch(() => {})
    }, seconds * 1000)
    this.rediscovery.unref()
  }

  async close () {
    this.closed = true
    for (const w of this.watchers) w.close()
    for (const t of this.timers.values()) clearTimeout(t)
    clearInterval(this.rediscovery)
    this.watchers = []
    for (const entry of this.entries.values()) this.retire(entry)
    this.entries.clear()
    this.aliases.clear()
    this.byPath.clear()
    this.composites.clear()
    for (const provider of this.providers.values()) {
      clearTimeout(provider.retry)
      await provider.close().catch(() => {})
    }
    this.providers.clear()
  }
}

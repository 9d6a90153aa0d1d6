// The tilesets: found in folders, files, URLs and databases; each gets an id (the file name without extension) and
// aliases (the file name with it). A set that cannot be served is kept as "unavailable" with its reason, so its URL
// answers 503 instead of 404 and the rest keep serving. The parts: registry.js (entries and ids), discover.js (what
// the config names), watch.js (files that change), groups.js (sets found together, in a database), remote.js (remote
// sets: retried, re-opened when their object changes).
import { stat } from 'node:fs/promises'
import { dirname } from 'node:path'
import { contractProblems } from '../sources/contract.js'
import { ConfigError } from '../config.js'
import { Registry } from './registry.js'
import { dataFolders, discoverSpecs, isPrefixUrl, namedCount, pathSpec, prefixOf } from './discover.js'
import { FileWatcher, companionStamp, isWriting } from './watch.js'
import { Groups } from './groups.js'
import { Slots } from './slots.js'
import { REMOTE_DEFAULTS, RemoteSets } from './remote.js'

// PostgreSQL: an undefined table, column or function (SQLSTATE 42P01, 42703, 42883): the schema changed since discovery.
const SCHEMA_CHANGED = new Set(['42P01', '42703', '42883'])

// Sets opened at once by a load or a reload (a folder of 1,000 files is not opened all at once): a remote store that
// does not answer makes its sets wait out their timeout, and those behind them open meanwhile.
const OPEN_AT_ONCE = 8

export class Catalog {
  /** `services`: what sources may use beyond their spec (plugins' resources: the raster pool, …). */
  constructor ({ config, log, cache, services = {} }) {
    this.config = config
    this.log = log
    this.context = {
      log,
      raster: config.raster,
      s3: config.s3, // object storage settings (remote sources, lib/remote)
      remote: { ...REMOTE_DEFAULTS, ...config.remote },
      replaced: (id, source, why, localFile) => this.remote.replaced(id, source, why, localFile), // a source's object changed: re-open it
      dataFolders: () => dataFolders(config), // where a set naming other files (a mosaic's parts) may read them
      features: config.features, // OGC API – Features: a database reads its collections' extents only when it is on
      ...services,
    }
    this.registry = new Registry({ config, log, cache })
    this.groups = new Groups({ config, log, registry: this.registry, context: this.context })
    this.files = new FileWatcher({ config, log, registry: this.registry, open: (path, id, configuredId, slots) => this.openSpec({ ...pathSpec(config, path, id ?? configuredId), id: configuredId }, id, null, slots) })
    this.remote = new RemoteSets({ config, log, registry: this.registry, open: (spec, id, turn, slots) => this.openSpec(spec, id, turn, slots), reopenFile: (path) => this.files.refresh(path, { force: true }) })
    this.openingNew = new Map() // file path or URL → the open of a set new to us, until it registers (openSpec)
    this.reloading = null // the reload running
    this.reloadAfter = null // the one asked meanwhile, to run after it
    this.loaded = false
    this.closed = false
    this.unavailableSaid = new Map() // set id → the reason it was last logged unavailable for
  }

  get (name) { return this.registry.get(name) }
  get maxCompositeParts () { return this.registry.maxParts }
  compositeProblem (name) { return this.registry.compositeProblem(name) }
  available () { return this.registry.available() }
  unavailable () { return this.registry.unavailable() }
  /** The places in `paths` of bucket prefixes that could not be listed (at start-up or the last reload) and still cannot. */
  unlistedPaths () {
    return this.remote.unlisted.map((prefix) => this.config.paths.findIndex((item) => isPrefixUrl(item) && prefixOf(item) === prefix))
  }
  /** An entry outside the catalog (a rendered style): the pipeline serves it like a set; /list never shows it. */
  detachedEntry (spec, source) { return this.registry.makeEntry(spec, source) }

  readTile (entry, z, x, y, query, rendering) {
    // Files: as they were. A composite is in no group, but its parts may be (readFailed).
    if (entry.group === null && entry.parts === undefined) return this.registry.readTile(entry, z, x, y, query, rendering)
    let read
    try {
      read = this.registry.readTile(entry, z, x, y, query, rendering)
    } catch (err) {
      this.readFailed(entry, err)
      throw err
    }
    return read instanceof Promise ? read.catch((err) => { this.readFailed(entry, err); throw err }) : read
  }

  /**
   * A read of `entry` failed with `err` (tiles, features): when the set's place says the table, column or function
   * it was discovered with is gone (dropped, altered, renamed), the place is discovered again now, rather than at the
   * next interval (5 minutes by default): its sets answer as they are, a dropped table 404, not 503 until then.
   */
  readFailed (entry, err) {
    // A composite's read fails in one of its parts (the error says which, lib/sources/composite.js): judged as that
    // part's own failure, so a composite over a dropped table gets its database discovered again as the table would.
    if (entry.parts !== undefined) {
      if (err?.compositePart !== undefined && err.compositePart.parts === undefined) this.readFailed(err.compositePart, err)
      return
    }
    // Tables and views only: a function's own SQL may name what is not there on every call, a fault of its own.
    if (entry.group == null || entry.source?.metadata?.table === undefined) return
    if (SCHEMA_CHANGED.has(err?.code) && typeof err.severity === 'string') this.groups.rediscoverSoon(entry.group)
  }
  get entries () { return this.registry.entries }
  /** url → the group of sets found there (a database). */
  get providers () { return new Map([...this.groups.groups].map(([url, known]) => [url, known.group])) }

  async load () {
    const unlisted = []
    const missing = []
    const unserved = []
    const broken = []
    const specs = await discoverSpecs(this.config, this.log, unlisted, missing, unserved, broken)
    // Nothing named exists, or can be served: a typo, a volume not mounted, a config file given without --config. Said
    // as a bad flag is (one line, exit 2), never served as an empty (or demo) catalog that calls itself ready.
    if (missing.length > 0 && unserved.length === 0 && missing.length === namedCount(this.config)) {
      throw new ConfigError(`${missing.length === 1 ? 'the path given does not exist' : 'none of the paths given exists'}: ${missing.join(', ')}`)
    }
    if (unserved.length > 0 && missing.length + unserved.length === namedCount(this.config)) {
      const each = [...missing.map((path) => `${path} (does not exist)`), ...unserved.map(({ path, why }) => `${path} (${why})`)]
      throw new ConfigError(`nothing given can be served: ${each.join(', ')}`)
    }
    this.sayMissing(missing, unserved)
    this.files.setUnlisted(unserved.filter((u) => u.folder), { say: false })
    this.files.setBroken(broken)
    await this.openInOrder(specs, (spec, turn, slots) => this.openSpec(spec, undefined, turn, slots))
    this.remote.setUnlisted(unlisted)
    this.groups.startRediscovery()
    this.loaded = true
  }

  /** Paths given that do not exist or serve nothing: each logged at start-up and at each reload, while the rest is served. */
  sayMissing (missing, unserved) {
    for (const path of missing) this.log.error({ path }, 'path not found: nothing served from it')
    for (const { path, why } of unserved) this.log.error({ path }, `${why}: nothing served from it`)
  }

  /**
   * Says which `sets.<id>` option blocks (no path or URL of their own) name nothing served: no set, and no style
   * (`isStyle(id)`: a style's rendered tiles take its id's options). They would apply to nothing, unsaid.
   */
  warnUnmatchedOptions (isStyle) {
    const unmatched = Object.entries(this.config.sets).filter(([id, o]) => !o.path && !o.url && this.registry.entries.get(id) === undefined && !isStyle(id))
    if (unmatched.length > 0) {
      this.log.warn({ sets: unmatched.map(([id]) => id) }, "configured options name no set or style served (yet): a set's id is its file name without the extension, or the id it is configured under")
    }
  }

  /**
   * Opens what a spec names and registers it (as unavailable, with the reason, if it cannot be opened). `turn`: a
   * promise to wait for before registering (the set found before it being registered, so sets opened at once are
   * listed in the order found). `slots`: the load's or reload's (openInOrder), which bound its opens at once; none for
   * an open of its own (a retry, the watcher's, a changed object's), which must not wait behind hung remote sets.
   */
  async openSpec (spec, id, turn = null, slots = null) {
    const { kind } = spec
    if (kind?.openGroup) return this.groups.open(spec.url, kind)
    if (id !== undefined) return this.openAndRegister(spec, id, turn, slots)
    // A file or object new to us already opening (two reloads at once, the watcher or a prefix listed again during a
    // reload): that open is this one, else it would claim a second id (`f-2`) and the file be served twice.
    const place = spec.path ?? spec.url
    const pending = place === undefined ? undefined : this.openingNew.get(place)
    if (pending !== undefined) return pending
    id = this.registry.newId(spec)
    const opening = this.openAndRegister(spec, id, turn, slots).finally(() => {
      this.registry.unclaim(id) // (registered, or not served after all)
      if (place !== undefined) this.openingNew.delete(place)
    })
    if (place !== undefined) this.openingNew.set(place, opening)
    return opening
  }

  async openAndRegister (spec, id, turn, slots) {
    const { kind } = spec
    let file = null
    let companions = null
    let source = null
    let reason = null
    const open = async () => {
      if (spec.path) {
        try {
          file = await stat(spec.path)
        } catch {
          return true // gone between listing and opening
        }
        // Before the open: a commit between the two is then seen as a change still to read, never as one read already.
        companions = companionStamp(spec.path)
      }
      // A writer's files beside a file we already have open may be our own reader's: only a file new to us is judged.
      const ours = spec.path && this.registry.byPath.get(spec.path)?.source
      if (!kind) {
        reason = 'no source kind serves this URL'
      } else if (file !== null && !file.isFile() && !(file.isDirectory() && kind.opensFolders)) {
        reason = 'not a regular file'
      } else if (spec.path && !ours && isWriting(spec.path)) {
        reason = 'still being written (a -journal, or a -wal changing, beside it)'
      } else {
        try {
          const { kind: _, ...rest } = spec
          source = await kind.open({ ...this.config.sets[id], ...rest, id }, this.context)
          const problems = contractProblems(source)
          if (problems.length > 0) {
            await source?.close?.()
            source = null
            reason = `the ${kind.kind} source broke its contract: ${problems.join('; ')}`
            this.log.error({ set: id, problems }, 'source contract broken (a bug in lib/sources)')
          }
        } catch (err) {
          // Reasons reach 503 bodies and /health: name the file, never the folder it is in.
          reason = spec.path ? String(err.message).replaceAll(dirname(spec.path) + '/', '') : String(err.message)
        }
      }
      return false
    }
    const gone = await (slots === null ? open() : slots.run(open))
    if (gone) return null
    await turn
    if (this.closed) { // the catalog closed while this file was opening
      await source?.close()
      return null
    }
    const entry = this.registry.makeEntry({ id, kind: kind?.kind ?? 'unknown', path: spec.path, url: spec.url, reason }, source)
    entry.file = file
    entry.companionStamp = companions
    if (source?.settle && file !== null) this.files.settleLater(entry)
    if (source !== null) {
      this.unavailableSaid.delete(id)
      this.log.info({ set: id, kind: entry.kind, format: source.format, minzoom: source.tilejson.minzoom, maxzoom: source.tilejson.maxzoom }, 'serving')
    } else if (this.unavailableSaid.get(id) !== reason) {
      // Once per set and reason: a remote set is tried again every retryMs, and an outage would log each try.
      this.unavailableSaid.set(id, reason)
      this.log.warn({ set: id, reason }, 'tileset unavailable')
    }
    this.registry.register(entry)
    this.remote.opened(entry, spec)
    return entry
  }

  /**
   * Runs `open(spec, turn, slots)` for every spec at once (opening itself bounded by `slots`, this batch's own, so
   * retries and the watcher's opens meanwhile never wait for them): a remote store that does not answer holds up its
   * own sets, not every one after them. Ids are handed out in the order found (openSpec takes its id before it waits
   * for anything) and sets registered in that order (`turn`), so which file is `a` and which `a-2`, and the order
   * /list shows, are as when they opened one after another. A database (a group) finds its sets' ids as it registers
   * them: it waits for those found before it, and those after it wait for it.
   */
  async openInOrder (specs, open) {
    const slots = new Slots(OPEN_AT_ONCE)
    let turn = Promise.resolve()
    let under = [] // opening now
    for (const spec of specs) {
      if (spec.kind?.openGroup) {
        await Promise.all(under)
        under = [open(spec, turn, slots)]
        await under[0]
        continue
      }
      const opening = open(spec, turn, slots)
      turn = opening.then(() => {}, () => {})
      under.push(opening)
    }
    await Promise.all(under)
  }

  /** Re-checks one file after a change (the watcher's work; also for tests and tools). */
  refreshFile (path, options) { return this.files.refresh(path, options) }

  watch () { this.files.watch() }

  /**
   * Full reload (SIGHUP): every set re-opened, new files found, missing ones dropped, made tiles purged. One at a time:
   * those asked while one runs (SIGHUPs in a row) make one more after it, which finds whatever they were sent for.
   */
  reload () {
    if (this.reloading === null) {
      this.reloading = this.reloadNow().finally(() => { this.reloading = null })
      return this.reloading
    }
    this.reloadAfter ??= this.reloading.catch(() => {}).then(() => {
      this.reloadAfter = null
      return this.reload()
    })
    return this.reloadAfter
  }

  async reloadNow () {
    const { registry } = this
    const seen = new Set()
    const unlisted = []
    const missing = []
    const unserved = []
    const broken = []
    const specs = await discoverSpecs(this.config, this.log, unlisted, missing, unserved, broken)
    // A served folder that cannot be listed now is said once while it stays so (setUnlisted), not at each reload.
    this.sayMissing(missing, unserved.filter((u) => !u.folder))
    this.files.setUnlisted(unserved.filter((u) => u.folder))
    this.files.setBroken(broken)
    await this.openInOrder(specs, async (spec, turn, slots) => {
      if (spec.path) {
        seen.add(spec.path)
        if (registry.byPath.has(spec.path)) await this.files.refresh(spec.path, { force: true, slots })
        else await this.openSpec(spec, undefined, turn, slots)
      } else if (spec.kind?.openGroup) {
        seen.add(spec.url)
        await this.groups.open(spec.url, spec.kind)
        // Kept sets (same shape) may hold other rows now: their cached tiles go too.
        this.groups.expireAll(spec.url)
      } else {
        const key = spec.url ?? spec.kind?.kind
        const known = [...registry.entries.values()].find((e) => (spec.url ? e.url === spec.url : e.kind === key))
        seen.add(key)
        await this.openSpec(spec, known?.id ?? (spec.id && registry.entries.has(spec.id) ? spec.id : undefined), turn, slots)
      }
    })
    this.remote.setUnlisted(unlisted)
    for (const entry of [...registry.entries.values()]) {
      // Sets of a bucket prefix or a folder that could not be listed now are kept: a blip of the store or of a mount, a
      // permissions slip, drops nothing (their open handles serve on).
      const kept = seen.has(entry.path ?? entry.group ?? entry.url ?? entry.kind) || this.remote.underUnlisted(entry) || this.files.underUnlisted(entry)
      if (!kept) registry.remove(entry)
    }
    this.log.info({ sets: this.available().length, unavailable: this.unavailable().length }, 'catalog reloaded')
  }

  async close () {
    this.closed = true
    this.files.close()
    this.remote.close()
    this.registry.clear()
    await this.groups.close()
  }
}

// The sets being served: entries by id, the other names a URL may use (a file's full name), and by file path. An entry
// outlives neither a reload nor a removal: it is retired, and its handle closes once the reads under way finish.
import { createHash } from 'node:crypto'
import { basename, dirname } from 'node:path'
import { compose, layerConflict } from '../sources/composite.js'
import { isVector } from '../tiletype.js'
import { LIMIT_DEFAULTS } from '../limits.js'
import { isS3Url, parseS3Url } from '../remote/s3.js'

/**
 * Top-level route names a set id would shadow or be shadowed by (today's and those the planned subsystems take). A
 * set whose id is one of them is served under another id, with a warning.
 */
export const RESERVED = new Set(['list', 'catalog', 'health', 'ready', 'metrics', 'styles', 'fonts', 'sprites', 'data',
  'viewer', 'static', 'collections', 'conformance', 'api', 'ogc', 'favicon.ico', 'robots.txt',
  '.', '..']) // a table named `..` would make URLs that clients resolve away
const MAX_COMPOSITES = 100

export class Registry {
  constructor ({ config, log, cache }) {
    this.config = config
    this.log = log
    this.cache = cache
    this.entries = new Map() // id → entry, in the order found
    this.aliases = new Map() // every name a URL may use → entry
    this.byPath = new Map() // absolute file path → entry
    this.composites = new Map() // "a,b" → composite entry, built on first request
    // Ids and file names handed out by newId to sets still opening (name → id): sets open several at once, and each
    // must get the id (and the file-name alias) it would have got opening in turn.
    this.claimed = new Map()
    this.maxParts = config.limits?.maxCompositeParts ?? LIMIT_DEFAULTS.maxCompositeParts // sets in one composite
    this.generation = 0
    this.onChange = null // (event, entry): 'register', 'remove', 'expire' (lib/tile-dir follows the sets' data)
  }

  /** The set a URL names: its id or file name, a composite "a,b" of composable sets, or undefined. */
  get (name) {
    const entry = this.aliases.get(name)
    if (entry !== undefined || name.indexOf(',') === -1) return entry
    return this.composite(name)
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

  /**
   * An id not in use and not reserved: `wanted`, else the first free of `alternatives` (a file's full name), else
   * `wanted-2`, `wanted-3`… A reserved id is said in a warning, since its set answers under another URL. A name a set's
   * file has is in use too: /roads.mbtiles keeps naming the file `roads` was found as, not one of that name found later.
   */
  uniqueId (wanted, alternatives = []) {
    const free = (id) => !this.entries.has(id) && !this.aliases.has(id) && !this.claimed.has(id) && !RESERVED.has(id)
    const id = [wanted, ...alternatives].find(free) ?? (() => {
      let n = 2
      while (!free(`${wanted}-${n}`)) n++
      return `${wanted}-${n}`
    })()
    if (RESERVED.has(wanted)) this.log.warn({ set: id, reserved: wanted }, `'${wanted}' is a reserved name (/${wanted}): the set is served as '${id}'`)
    return id
  }

  /**
   * The id of a set from a spec: the configured one, else the file or URL name without its extension. The id, and
   * the name it will be found by (its alias), are claimed until the set is registered or `unclaim`ed.
   */
  newId (spec) {
    if (spec.id) return this.claim(this.uniqueId(spec.id))
    const name = nameOf(spec) || 'remote'
    const dot = name.lastIndexOf('.')
    const stem = dot > 0 ? name.slice(0, dot) : name
    const id = this.claim(this.uniqueId(stem, [name]))
    const first = id === stem || id === name || RESERVED.has(stem) ? undefined : this.aliases.get(name)?.id ?? this.claimed.get(name)
    if (first !== undefined) {
      // A file of the same name in another folder (or at another URL): served, under an id of its own, said once here.
      this.log.warn({ set: id, file: name, first, folder: spec.path ? dirname(spec.path) : undefined },
        `'${name}' is the name of a file served already (set '${first}'): this one is served as '${id}', and /${name} stays '${first}'`)
    }
    if (name !== id && !RESERVED.has(name) && !this.aliases.has(name) && !this.claimed.has(name)) this.claimed.set(name, id)
    return id
  }

  claim (id) {
    this.claimed.set(id, id)
    return id
  }

  /** Gives back what newId claimed for `id` (its set was registered, or will not be). */
  unclaim (id) {
    for (const [name, owner] of this.claimed) if (owner === id) this.claimed.delete(name)
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
      companionStamp: null, // what its file's companions held when opened (a -wal's commits, watch.js)
      source,
      reason,
      key: this.newKey(id),
      options,
      ttlMs: undefined, // how long a cached tile lives; undefined: until the set is reloaded; 0: not cached
      active: 0,
      retired: false,
      errors: new Set(),
      sniffed: {}, // what compressed tiles of this set hold (see describeTile)
      expiredAt: 0, // when its data was last said to have changed (expire): shared tiles made before are stale
      sharedPrefix: undefined, // its keys in the shared cache (lib/shared-cache.js)
      parts: undefined, // a composite's part entries (composite()); in the literal so every entry has one shape
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

  newKey (id) { return `${id}#${++this.generation}/` }

  register (entry) {
    const previous = this.entries.get(entry.id)
    this.entries.set(entry.id, entry)
    this.aliases.set(entry.id, entry)
    const name = nameOf(entry)
    const claimant = name ? this.claimed.get(name) : undefined // (a set opening now, found before this one)
    this.unclaim(entry.id)
    if (name && name !== entry.id && !RESERVED.has(name) && (claimant === undefined || claimant === entry.id) &&
      (!this.aliases.has(name) || this.aliases.get(name) === previous)) this.aliases.set(name, entry)
    if (entry.path) this.byPath.set(entry.path, entry)
    if (previous && previous !== entry) this.retire(previous)
    this.onChange?.('register', entry)
  }

  remove (entry) {
    if (this.entries.get(entry.id) === entry) this.entries.delete(entry.id)
    for (const [alias, e] of this.aliases) if (e === entry) this.aliases.delete(alias)
    if (entry.path && this.byPath.get(entry.path) === entry) this.byPath.delete(entry.path)
    this.log.info({ set: entry.id }, 'tileset removed')
    this.retire(entry)
    this.onChange?.('remove', entry)
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
   * Forgets an entry's cached tiles in O(1): a new key prefix makes them unreachable, and they age out of the LRU. A
   * read under way stores under the old prefix, so it cannot bring stale data back. Composites built on it follow.
   */
  expire (entry) {
    entry.key = this.newKey(entry.id)
    entry.expiredAt = Date.now()
    for (const c of this.composites.values()) if (c.parts.includes(entry)) c.key = this.newKey(c.id)
    this.onChange?.('expire', entry)
  }

  /**
   * Reads a stored tile, keeping the entry's handle open until the read is done: the bytes (or null) when the source
   * read them synchronously, else a promise of them. Throws (or rejects) what the source threw.
   */
  readTile (entry, z, x, y, query, rendering) {
    entry.active++
    let result
    try {
      result = entry.source.getTile(z, x, y, query, rendering)
    } catch (err) {
      this.release(entry)
      throw err
    }
    if (result instanceof Promise) return result.finally(() => this.release(entry))
    this.release(entry)
    return result
  }

  release (entry) {
    if (--entry.active === 0 && entry.retired) this.closeSource(entry)
  }

  composite (name) {
    const known = this.composites.get(name)
    if (known !== undefined && !known.parts.some((p) => p.retired)) return known
    const ids = name.split(',')
    if (ids.length > this.maxParts || new Set(ids).size !== ids.length) return undefined
    const parts = ids.map((id) => this.aliases.get(id))
    if (parts.some((p) => p === undefined || p.source === null || !p.source.composable)) return undefined
    if (layerConflict(parts) !== null) return undefined // compositeProblem says why
    if (this.composites.size >= MAX_COMPOSITES) this.composites.clear()
    // As fresh as its most perishable part.
    const ttls = parts.filter((p) => p.ttlMs !== undefined).map((p) => p.ttlMs / 1000)
    const entry = this.makeEntry({ id: name, kind: 'composite', ttlS: ttls.length ? Math.min(...ttls) : undefined }, compose(name, parts))
    entry.parts = parts
    this.composites.set(name, entry)
    return entry
  }

  /**
   * Why `name`, a composite of sets that are served, cannot be served (one cannot take part in a composite, or two of
   * them have a layer of one name), or null.
   */
  compositeProblem (name) {
    const parts = name.split(',').map((id) => this.aliases.get(id))
    if (parts.some((p) => p === undefined || p.source === null)) return null
    const alone = parts.find((p) => !p.source.composable)
    if (alone !== undefined) return `'${alone.id}' cannot be part of a composite: only PostGIS tables and functions (tiles made as raw MVT) can`
    const conflict = layerConflict(parts)
    return conflict === null ? null : `composite '${name}' cannot be served: ${conflict}`
  }

  /** Retires every entry (the catalog is closing). */
  clear () {
    for (const entry of this.entries.values()) this.retire(entry)
    this.entries.clear()
    this.aliases.clear()
    this.byPath.clear()
    this.composites.clear()
  }
}

/**
 * The file name of a set's file or remote object (what a URL may name it by), or null: an S3 object's as its key is
 * (`s3://b/with space.pmtiles`, `a#b.pmtiles`), a URL's last path segment decoded (`with%20space.pmtiles`), so either
 * is named as a file of that name is.
 */
function nameOf ({ path, url }) {
  if (path) return basename(path)
  if (!url) return null
  if (isS3Url(url)) return parseS3Url(url).key.split('/').pop()
  const segment = basename(new URL(url).pathname)
  try {
    const name = decodeURIComponent(segment)
    return name.includes('/') ? segment : name // (an encoded slash: as written, or no route would reach it)
  } catch {
    return segment // (a stray %: as written)
  }
}

/**
 * What identifies the data a set serves, the same on every replica that serves the same data (a shared cache's keys
 * hold it): the source's own `revision`, else a hash of what a database set is made of (its SQL), else the file's size
 * and modification time (and its -wal's, while that holds commits), else a hash of its URL.
 */
export function dataRevision (entry) {
  const source = entry.source
  if (typeof source?.revision === 'string') return source.revision
  const hash = (text) => createHash('sha1').update(text).digest('base64url').slice(0, 12)
  if (typeof source?.signature === 'string') return hash(source.signature)
  if (entry.file !== null) return `${entry.file.size}-${Math.round(entry.file.mtimeMs)}${entry.companionStamp ? `+${entry.companionStamp}` : ''}`
  return entry.url === null ? '' : hash(entry.url) // hashed: a URL may hold a signature
}

// Sets found together in one place (a database): discovered as a group, retried in the background while the place
// cannot be reached, re-discovered on an interval and on reload, purged when the place says its data changed.
// Which kinds do this is the kinds' business (`openGroup` in lib/sources/contract.js).

const REDISCOVER_MS = 5000 // rediscoverSoon: at most this often

/** A URL fit for logs: no password. */
const redact = (url) => { try { const u = new URL(url); if (u.password) u.password = '***'; return u.toString() } catch { return 'a database' } }

export class Groups {
  /** `registry`: where the group's sets are registered; `context`: the services sources get. */
  constructor ({ config, log, registry, context }) {
    this.config = config
    this.log = log
    this.registry = registry
    this.context = context
    this.groups = new Map() // url → { kind, group, retry }
    this.closed = false
  }

  /** The kind's options: its section of the config (`postgres`). */
  options (kind) { return this.config[kind.configSection] ?? {} }

  /**
   * (Re-)discovers the sets at `url` and registers them. While the place cannot be reached, discovery is retried in
   * the background; sets found earlier keep their entries (their tiles answer 503 until the place answers again).
   */
  async open (url, kind) {
    let known = this.groups.get(url)
    if (known === undefined) {
      known = { kind, group: kind.openGroup(url, this.options(kind), this.context), retry: null }
      this.groups.set(url, known)
      known.group.listen?.((payload) => this.changed(url, payload))
    }
    let found
    try {
      found = await known.group.discover()
    } catch (err) {
      if (!known.retry) this.log.warn({ place: redact(url), err: err.message }, `${kind.title} unreachable: its sets will appear when it answers`)
      this.holdConfigured(url, known)
      this.retryLater(url, known)
      return
    }
    clearTimeout(known.retry)
    known.retry = null
    const ids = new Set()
    const servedAs = new Map() // the group's id of a set → the id it is served under (another when taken or reserved)
    const { registry } = this
    for (const { id, source, reason = null } of found) {
      // The entry of an earlier discovery under the id it was given then, so a set that had to take another id (its
      // own taken or reserved, e.g. a table named `list`) keeps that one, not a new one at each discovery.
      // (Not one another set of this discovery took already: a set whose own id is another's alternative.)
      const previous = registry.entries.get((known.servedAs ?? known.held)?.get(id) ?? id)
      const reused = previous?.group === url && !ids.has(previous.id)
      const finalId = reused ? previous.id : registry.uniqueId(id, [`${new URL(url).pathname.slice(1) || kind.kind}.${id}`])
      ids.add(finalId)
      servedAs.set(id, finalId)
      // Unchanged since the last discovery: keep the entry, and with it its cached tiles.
      const same = reused && (source === null
        ? previous.source === null && previous.reason === reason
        : previous.source !== null && previous.source.signature === source.signature &&
          JSON.stringify(previous.source.tilejson) === JSON.stringify(source.tilejson))
      if (same) continue
      if (source === null) this.log.warn({ set: finalId, reason }, `${kind.title} set unavailable`)
      registry.register(registry.makeEntry({ id: finalId, kind: kind.kind, group: url, reason }, source))
    }
    known.servedAs = servedAs
    known.held = undefined
    for (const entry of [...registry.entries.values()]) if (entry.group === url && !ids.has(entry.id)) registry.remove(entry)
    this.log.info({ place: redact(url), sets: ids.size }, `${kind.title} sets discovered`)
  }

  /**
   * Before the place has ever answered: the sets its config names (`configured()`, a database's `postgres.tables`)
   * are known to exist, so they are registered as unavailable (503 with Retry-After, listed in /health) rather than
   * left unknown (404: a client or CDN told the set does not exist). The first discovery replaces them.
   */
  holdConfigured (url, known) {
    if (known.servedAs !== undefined) return // discovered once: its sets keep their entries
    const servedAs = known.held ?? (known.held = new Map())
    for (const id of known.group.configured?.() ?? []) {
      if (servedAs.has(id)) continue
      const finalId = this.registry.uniqueId(id, [`${new URL(url).pathname.slice(1) || known.kind.kind}.${id}`])
      servedAs.set(id, finalId)
      this.registry.register(this.registry.makeEntry({ id: finalId, kind: known.kind.kind, group: url, reason: `${known.kind.title} cannot be reached yet` }))
    }
  }

  /**
   * Re-discovers `url` soon (its sets met a table or column that is gone): once, however many reads failed meanwhile,
   * and at most every REDISCOVER_MS, so a set that keeps failing cannot make every request a discovery.
   */
  rediscoverSoon (url) {
    const known = this.groups.get(url)
    if (known === undefined || this.closed || known.soon || Date.now() - (known.soonAt ?? 0) < REDISCOVER_MS) return
    known.soon = setTimeout(() => {
      this.log.info({ place: redact(url) }, 'a table, column or function was dropped or changed: discovering again')
      this.open(url, known.kind).catch(() => {}).finally(() => {
        known.soon = null // (none other starts while this one runs)
        known.soonAt = Date.now() // the next, REDISCOVER_MS after this one ended
      })
    }, 200)
    known.soon.unref()
  }

  retryLater (url, known) {
    if (this.closed) return
    clearTimeout(known.retry)
    known.retry = setTimeout(() => this.open(url, known.kind).catch(() => {}), this.options(known.kind).retryMs ?? 5000)
    known.retry.unref()
  }

  has (url) { return this.groups.has(url) }

  /** Drops the cached tiles of every set of a group (its data may have changed: SIGHUP). */
  expireAll (url) {
    for (const entry of this.registry.entries.values()) if (entry.group === url) this.registry.expire(entry)
  }

  /** A change notice from a group: the payload names sets (the kind says how), '' all of them. */
  changed (url, message) {
    const { group } = this.groups.get(url) ?? {}
    const payload = message.trim()
    let hits = 0
    for (const entry of this.registry.entries.values()) {
      if (entry.group !== url || entry.source === null) continue
      if (payload === '' || payload === entry.id || group?.names?.(entry, payload)) {
        this.registry.expire(entry)
        hits++
      }
    }
    if (hits === 0) this.log.debug({ payload: payload.slice(0, 200) }, 'change notice names no set: ignored')
  }

  /** Re-discovers every group on an interval (`discoverIntervalS` in the kind's options; 0: only on reload). */
  startRediscovery () {
    for (const [url, known] of this.groups) {
      const seconds = this.options(known.kind).discoverIntervalS ?? 0
      if (seconds <= 0 || known.interval) continue
      known.interval = setInterval(() => this.open(url, known.kind).catch(() => {}), seconds * 1000)
      known.interval.unref()
    }
  }

  async close () {
    this.closed = true
    for (const known of this.groups.values()) {
      clearTimeout(known.retry)
      clearTimeout(known.soon)
      clearInterval(known.interval)
      await known.group.close().catch(() => {})
    }
    this.groups.clear()
  }
}

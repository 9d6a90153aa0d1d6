// Sets read from a remote place (https://, s3://), which may fail and change without the server being told: one that
// could not be opened is tried again every `remote.retryMs`; one whose object changed (its ETag, seen by
// lib/remote/reader.js) is re-opened, which drops its cached tiles; a bucket prefix that could not be listed is listed
// again, and the sets found there are opened.
import { prefixSpecs, specOf } from './discover.js'

export const REMOTE_DEFAULTS = { retryMs: 10_000, revalidateMs: 60_000 }

export class RemoteSets {
  /** `open(spec, id)`: (re-)opens a set and registers it (the catalog's openSpec). */
  constructor ({ config, log, registry, open, reopenFile }) {
    this.config = config
    this.log = log
    this.registry = registry
    this.open = open
    this.reopenFile = reopenFile // (path): re-opens a set of a local file whose remote parts changed (a mosaic)
    this.retryMs = config.remote?.retryMs ?? REMOTE_DEFAULTS.retryMs
    this.timers = new Set()
    this.reopening = new Set() // ids being re-opened because their object changed
    this.unlisted = [] // prefixes (s3://bucket/prefix/) that could not be listed
    this.closed = false
  }

  later (fn) {
    if (this.closed) return
    const timer = setTimeout(() => {
      this.timers.delete(timer)
      if (!this.closed) fn().catch((err) => this.log.error({ err: err.message }, 'remote retry failed'))
    }, this.retryMs)
    timer.unref()
    this.timers.add(timer)
  }

  /** A set was registered: a remote one that could not be opened is tried again later, while it stays in place. */
  opened (entry, spec) {
    if (entry.url === null || entry.source !== null || spec.kind === undefined) return
    this.later(async () => {
      if (this.registry.entries.get(entry.id) === entry) await this.open(spec, entry.id)
    })
  }

  /**
   * A source says its remote object changed: its set is re-opened (once, however often it is told). A set of a local
   * file may read remote objects too (a mosaic's parts): it is re-opened as a changed file is. `localFile`: what changed
   * is a local file the set reads (a mosaic's part), not a remote object.
   */
  replaced (id, source, why, localFile = false) {
    const entry = this.registry.entries.get(id)
    const local = entry?.url === null && entry.path !== null && this.reopenFile !== undefined
    if (this.closed || entry?.source !== source || (entry.url === null && !local) || this.reopening.has(id)) return
    this.reopening.add(id)
    this.log.warn({ set: id, reason: why }, `${localFile ? 'a file it reads' : 'remote object'} changed: re-opening the set`)
    const reopened = local ? this.reopenFile(entry.path) : this.open(specOf(entry.url), id)
    reopened
      .catch((err) => this.log.error({ set: id, err: err.message }, 're-opening failed'))
      .finally(() => this.reopening.delete(id))
  }

  /** Prefixes a discovery could not list: listed again later (the sets already found there are kept meanwhile). */
  setUnlisted (prefixes) {
    const retrying = this.unlisted.length > 0
    this.unlisted = prefixes
    if (prefixes.length > 0 && !retrying) this.later(() => this.listAgain())
  }

  async listAgain () {
    const still = []
    for (const prefix of this.unlisted) {
      let specs
      try {
        specs = await prefixSpecs(prefix, this.config)
      } catch {
        still.push(prefix)
        continue
      }
      const known = new Set([...this.registry.entries.values()].map((e) => e.url))
      for (const spec of specs) if (!known.has(spec.url)) await this.open(spec)
    }
    this.unlisted = still
    if (still.length > 0) this.later(() => this.listAgain())
  }

  /** Is this entry's object under a prefix that could not be listed (a reload must keep it)? */
  underUnlisted (entry) {
    return entry.url !== null && this.unlisted.some((prefix) => entry.url.startsWith(prefix))
  }

  close () {
    this.closed = true
    for (const timer of this.timers) clearTimeout(timer)
    this.timers.clear()
  }
}

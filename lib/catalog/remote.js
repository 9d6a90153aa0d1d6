// Sets read from a remote place (https://, s3://), which may fail and change without the server being told: one that
// could not be opened is tried again every `remote.retryMs`; one whose object changed (its ETag, seen by
// lib/remote/reader.js) is re-opened, which drops its cached tiles; a bucket prefix that could not be listed is listed
// again, and the sets found there are opened.
import { prefixSpecs, specOf } from './discover.js'
import { Slots } from './slots.js'

// Prefixes listed again at once, and sets found there opened at once: as at start-up (discover.js, index.js).
const LIST_AT_ONCE = 8

export const REMOTE_DEFAULTS = { retryMs: 10_000, revalidateMs: 60_000 }

export class RemoteSets {
  /** `open(spec, id, turn, slots)`: (re-)opens a set and registers it (the catalog's openSpec). */
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
    this.relisting = false // their listing again is due or running (listLater)
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

  /**
   * Prefixes a discovery could not list: listed again later (the sets already found there are kept meanwhile). What a
   * reload stores while a listing again runs stands: that run drops only the prefixes it listed.
   */
  setUnlisted (prefixes) {
    this.unlisted = prefixes
    this.listLater()
  }

  /** Lists the unlisted prefixes again in retryMs (once, whatever asks meanwhile). */
  listLater () {
    if (this.relisting || this.unlisted.length === 0) return
    this.relisting = true
    this.later(() => this.listAgain())
  }

  /**
   * Lists every unlisted prefix at once (8 at a time, as discovery does): one whose store does not answer waits out its
   * timeout while the others list. Each is taken in order, and the new sets found opened (8 at a time) in that order,
   * so ids are handed out as at start-up.
   */
  async listAgain () {
    try {
      const prefixes = this.unlisted
      const slots = new Slots(LIST_AT_ONCE)
      const listings = prefixes.map((prefix) => {
        const listing = slots.run(() => prefixSpecs(prefix, this.config))
        listing.catch(() => {}) // (judged when its turn comes)
        return listing
      })
      const listed = new Set()
      const opens = new Slots(LIST_AT_ONCE)
      const opening = []
      let turn = Promise.resolve()
      for (const [index, prefix] of prefixes.entries()) {
        let specs
        try {
          specs = await listings[index]
        } catch {
          continue
        }
        listed.add(prefix)
        const known = new Set([...this.registry.entries.values()].map((e) => e.url))
        for (const spec of specs) {
          if (known.has(spec.url)) continue
          const open = this.open(spec, undefined, turn, opens)
          turn = open.then(() => {}, () => {})
          opening.push(open)
        }
      }
      // A reload meanwhile may have stored other prefixes (setUnlisted): they stay, to be listed again.
      this.unlisted = this.unlisted.filter((prefix) => !listed.has(prefix))
      await Promise.all(opening)
    } finally {
      this.relisting = false
      this.listLater()
    }
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

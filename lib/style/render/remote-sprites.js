// A style's sprite on another server (`"sprite": "https://…"`), fetched by the parent for the renderer children
// (style.js gives them its tc://remote-sprite/ URL), so that a sprite that cannot be had (offline, a firewall, a
// server down) draws the map without its icons, as a missing local sprite does, instead of failing every render in
// the engine. What was fetched is kept a while; a failure is remembered for a minute, so renders do not each wait
// on a dead host.
import { LRUCache } from 'lru-cache'

const KEPT_MS = 10 * 60_000
const FAILURE_KEPT_MS = 60_000
const TIMEOUT_MS = 10_000
const MAX_BYTES = 16 * 2 ** 20 // a sprite sheet is a few hundred KiB at @2x

export class RemoteSprites {
  constructor (log) {
    this.log = log
    this.files = new LRUCache({ max: 64, ttl: KEPT_MS }) // URL → promise of its bytes, or null
  }

  /** The sprite file `suffix` ('@2x.png', '.json') of the sprite at `base` (the style's URL): its bytes, or null. */
  read (base, suffix) {
    // The suffix goes before the query string, as the engine puts it (`sprite@2x.json?key=…`).
    const q = base.indexOf('?')
    const url = q === -1 ? base + suffix : base.slice(0, q) + suffix + base.slice(q)
    let file = this.files.get(url)
    if (file === undefined) {
      file = this.fetch(url)
      this.files.set(url, file)
    }
    return file
  }

  async fetch (url) {
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(TIMEOUT_MS), redirect: 'follow' })
      if (!res.ok) throw new Error(`HTTP ${res.status}`)
      const bytes = Buffer.from(await res.arrayBuffer())
      if (bytes.length > MAX_BYTES) throw new Error(`larger than ${MAX_BYTES} bytes`)
      return bytes
    } catch (err) {
      // Logged without its query string, where keys to the sprite's server live.
      this.log.warn({ sprite: url.split('?')[0], reason: err.cause?.message ?? err.message }, 'a remote sprite cannot be had: drawn without its icons')
      this.files.set(url, Promise.resolve(null), { ttl: FAILURE_KEPT_MS })
      return null
    }
  }
}

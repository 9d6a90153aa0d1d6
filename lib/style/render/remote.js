// A style's remote resources (`tiles` and TileJSON `url`s on another server, a GeoJSON `data` URL, an image source's
// `url`, a `pmtiles://https://…` archive, a sprite) as the engine draws them: asked of this server (`tc://remote/…`),
// which fetches them, rather than fetched by the engine, which fails the whole render on any error (one unreachable
// host made every tile of the style a 503). A remote resource that cannot be read is drawn empty, as MapLibre GL JS and
// tileserver-gl draw it, and the renders that draw it are told they are incomplete (lib/style/render/index.js keeps
// such tiles briefly, never shared or on disk): a remote tile that failed makes only the rendered tiles over it
// incomplete (failedSince), anything else a source draws everywhere (its TileJSON, a GeoJSON file…) every render.
import { PMTiles, ResolvedValueCache } from 'pmtiles'
import { networkReason } from '../../remote/reader.js'
import { decompressInternal } from '../../sources/pmtiles.js'
import { hostOf, urlForLogs, withBasicAuth } from '../../urls.js'
import { EMPTY_TILES } from './style.js'
import { draws, placeOf, sourceDrawing, tilePlace } from './remote-places.js'
import { outboundFetch } from '../../outbound-proxy.js'

const REMOTE = /^https?:\/\//i
const REMOTE_PMTILES = /^pmtiles:\/\/(https?:\/\/.*)$/i // the pmtiles protocol's form of a remote archive
// A remote tile's engine URL (role `tile`, or `pmtile` for a tile of a remote archive) starts with its place
// (remote-places.js); a TileJSON's or an archive's with how the engine draws its source's tiles (`<drawing>/`), which
// the tiles it lists are given.
const TILE_PLACE = /^([^/]*)\/([^/]*)\/([^/]*)\/([^/]*)\/(.*)$/
const DRAWN_AS = /^([^/,]*,[01])\/(.*)$/
const TILES_KEPT = 1024 // remote tiles that failed, kept per style; past it, every render of the style counts them
const PREFIX = 'tc://remote/'
const EMPTY_DATA = Buffer.from('{"type":"FeatureCollection","features":[]}')
const MAX_BYTES = 64 * 2 ** 20 // as a GeoJSON file of a style (lib/style/styles.js)
// An image or a sprite sheet that cannot be read is drawn as this (a 1×1 transparent PNG), and a sprite's JSON as no
// icons: the engine fails a render on an empty image or sprite, not on one showing nothing.
const CLEAR_PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVQImWNgYGBgAAAABQABh6FO1AAAAABJRU5ErkJggg==', 'base64')
const NO_ICONS = Buffer.from('{}')
const ARCHIVES_KEPT = 64 // remote PMTiles archives whose header and directories are kept (one per source drawn)
// A tile server's answers that there is no tile there for us: none (404, 204), or one refused (beyond the zooms, area
// or plan of a provider, a key it does not take), which asking again does not change. Drawn empty, as MapLibre GL JS
// draws them, and the render is complete: only a host that cannot be reached, a timeout, a 5xx or a 429 is a failure
// (one tile refused beyond a provider's zooms kept every tile of the style out of the caches).
const NO_TILE = new Set([204, 404])
const REFUSED_TILE = new Set([400, 401, 403, 410])
/** What becomes of the tiles drawn without a remote source, as its failure's warning says it when serving. */
export const SERVED_INCOMPLETE = 'the rendered tiles that draw it kept only briefly, until it can'

/**
 * The engine's URL of a remote resource of style `styleId`: `role` is `tile` (a tile URL after its place), `tilejson`
 * (after its source's drawing), `data` (GeoJSON), `image`, `sprite` (the engine adds `@2x.json`… before its query, as
 * for any sprite URL), `pmtiles` (an archive after its source's drawing, whose TileJSON this server makes) or `pmtile`
 * (a tile of one: its place and the archive's URL).
 */
const remoteUrl = (styleId, role, url) => `${PREFIX}${encodeURIComponent(styleId)}/${role}/${url}`

/**
 * Points the remote URLs of the sources and sprites of `json` (a style as the engine draws it,
 * lib/style/render/style.js) at this server, in place. (A video source's `urls` are not: MapLibre Native draws no
 * video, and never asks for them.)
 */
export function remoteThroughServer (json, styleId) {
  for (const source of Object.values(json.sources ?? {})) {
    if (source === null || typeof source !== 'object') continue
    if (Array.isArray(source.tiles)) source.tiles = source.tiles.map((t) => (typeof t === 'string' && REMOTE.test(t) ? remoteUrl(styleId, 'tile', `${tilePlace(sourceDrawing(source), source)}/${t}`) : t))
    if (typeof source.url === 'string' && source.type !== 'video') {
      const archive = REMOTE_PMTILES.exec(source.url)
      if (archive !== null) source.url = remoteUrl(styleId, 'pmtiles', `${sourceDrawing(source)}/${archive[1]}`)
      else if (source.type === 'image' && REMOTE.test(source.url)) source.url = remoteUrl(styleId, 'image', source.url)
      else if (REMOTE.test(source.url)) source.url = remoteUrl(styleId, 'tilejson', `${sourceDrawing(source)}/${source.url}`)
    }
    if (source.type === 'geojson' && typeof source.data === 'string' && REMOTE.test(source.data)) source.data = remoteUrl(styleId, 'data', source.data)
  }
  if (typeof json.sprite === 'string' && REMOTE.test(json.sprite)) json.sprite = remoteUrl(styleId, 'sprite', json.sprite)
  else if (Array.isArray(json.sprite)) json.sprite = json.sprite.map((s) => (typeof s?.url === 'string' && REMOTE.test(s.url) ? { ...s, url: remoteUrl(styleId, 'sprite', s.url) } : s))
  return json
}

/** Fetches the remote resources the engine asks for (`answer`), and remembers which styles had one fail, and where (`failedSince`). */
export class RemoteResources {
  /**
   * `timeoutMs`: a fetch's time, well below the child's wait for the answer (TILE_CANNON_FETCH_TIMEOUT_S); `restMs`: a
   * host that could not be reached is not asked again for this long (its resources fail at once, rather than each
   * render waiting for it), and a host's failures are logged anew at most this often. `incompleteTiles`: what becomes
   * of the tiles drawn without a resource that failed, as its warning says (an export says what it does with them).
   */
  constructor ({ log, timeoutMs, restMs, incompleteTiles = SERVED_INCOMPLETE }) {
    this.log = log
    this.incompleteTiles = incompleteTiles
    this.timeoutMs = timeoutMs
    this.restMs = restMs
    // host → { restUntil, reason, unreachable, loggedAt }: a host that failed, logged once (loggedAt, 0 until then).
    // Forgotten when it answers again, its return logged, so its next outage is logged too; not before `restMs`
    // after the warning, so a host failing one request in a few says so at most that often, not at each failure.
    this.hosts = new Map()
    // Aborted when the app closes: fetches in flight end at once, not after their timeout (a shutdown waited for them).
    this.closing = new AbortController()
    this.failed = new Map() // style id → { at, host, reason }: when a remote resource of it last failed, where and why
    // style id → when a remote resource of it that a render may draw anywhere last failed (not a tile: a TileJSON, a
    // GeoJSON file, an image, a sprite, an archive's header), or a tile whose place is not kept (TILES_KEPT).
    this.everywhere = new Map()
    // style id → Map(a tile's place → { at, ...placeOf }): its remote tiles that failed, when last (in that order)
    this.tilesFailed = new Map()
    this.refusing = new Set() // `${host} ${status}`: a host refusing tiles, logged once (a key it no longer takes)
    this.archives = new Map() // a remote PMTiles archive's URL → its reader (PMTiles), read again at each TileJSON
  }

  /** The app closes: fetches in flight are aborted, and none is made again. */
  close () { this.closing.abort() }

  /** Is `url` (tc://…) one of these? */
  static owns (url) { return url.startsWith(PREFIX) }

  /** When a remote resource of style `styleId` last failed (Date.now()), or 0. */
  lastFailure (styleId) { return this.failed.get(styleId)?.at ?? 0 }

  /**
   * Did a remote resource a render of style `styleId` draws fail at `since` (Date.now()) or later? `tile` ({ z, x, y,
   * size }, as the engine draws it): only a remote tile it draws (draws), or a resource drawn anywhere; without it (a
   * static image, whose view may be anywhere) any failure counts. The engine keeps what it loaded for as long as a
   * registration of the style lives, a tile that failed too (empty): `since` is when that registration was first drawn.
   */
  failedSince (styleId, since, tile) {
    if (this.lastFailure(styleId) < since) return false // (as a rule: nothing failed since)
    if (tile === undefined || (this.everywhere.get(styleId) ?? 0) >= since) return true
    const tiles = this.tilesFailed.get(styleId)
    if (tiles === undefined) return false
    for (const failed of tiles.values()) if (failed.at >= since && draws(tile, failed)) return true
    return false
  }

  /** The host (no user or password) and reason of the latest failure of a remote resource of `styleId`, or null. */
  lastFailureOf (styleId) {
    const failed = this.failed.get(styleId)
    return failed === undefined ? null : { host: failed.host, reason: failed.reason }
  }

  /** The answer to the child (pool.js fetchResource) for a `tc://remote/…` URL: never a failure of the render. */
  async answer (tcUrl) {
    const rest = tcUrl.slice(PREFIX.length)
    const first = rest.indexOf('/')
    const second = rest.indexOf('/', first + 1)
    const styleId = decodeURIComponent(rest.slice(0, first))
    const role = rest.slice(first + 1, second)
    let url = rest.slice(second + 1)
    let place = null // a remote tile's (TILE_PLACE)
    let zxy // a remote archive's tile, as the engine asks for it
    let drawing = sourceDrawing({}) // how the engine draws a TileJSON's or an archive's tiles
    if (role === 'tile' || role === 'pmtile') {
      const m = TILE_PLACE.exec(url)
      if (m !== null) {
        place = placeOf(m[1], m[2], m[3], m[4])
        zxy = [m[2], m[3], m[4]].map(Number)
        url = m[5]
      }
    } else if (role === 'tilejson' || role === 'pmtiles') {
      const m = DRAWN_AS.exec(url)
      if (m !== null) {
        drawing = m[1]
        url = m[2]
      }
    }
    let got
    if (role === 'pmtiles' || role === 'pmtile') {
      got = await this.fromArchive(url, zxy)
    } else {
      got = await this.fetch(url, role === 'tile')
    }
    if (this.closing.signal.aborted) return { status: 'empty' } // the app closes: no render is waited for
    if (got.tileJson !== undefined) return { status: 'ok', body: Buffer.from(JSON.stringify({ ...got.tileJson, tiles: [remoteUrl(styleId, 'pmtile', `${tilePlace(drawing, got.tileJson)}/${url}`)] })) }
    if (got.bytes !== undefined) {
      if (role !== 'tilejson') return { status: 'ok', body: got.bytes }
      try {
        return { status: 'ok', body: Buffer.from(JSON.stringify(this.tileJson(JSON.parse(got.bytes.toString('utf8')), styleId, url, drawing))) }
      } catch (err) {
        got.failure = `not a TileJSON: ${err.message}`
      }
    }
    if (got.refused !== undefined) this.refusedTile(styleId, url, got.refused)
    if (got.failure === undefined) return { status: 'empty' } // no such tile there: nothing to draw, nothing missing
    this.failure(styleId, url, got.failure, place)
    // Drawn empty: a tile, a TileJSON whose tiles are all empty, a GeoJSON without features, an image showing nothing,
    // a sprite without icons.
    if (role === 'tilejson' || role === 'pmtiles') return { status: 'ok', body: Buffer.from(JSON.stringify({ tilejson: '3.0.0', tiles: EMPTY_TILES })) }
    if (role === 'data') return { status: 'ok', body: EMPTY_DATA }
    if (role === 'image') return { status: 'ok', body: CLEAR_PNG }
    if (role === 'sprite') return { status: 'ok', body: /\.json$/i.test(url.replace(/[?#].*$/, '')) ? NO_ICONS : CLEAR_PNG }
    return { status: 'empty' }
  }

  /**
   * A remote PMTiles archive, read by ranges through `fetch` (so as every remote resource: Basic auth, resting hosts,
   * aborted on close): its TileJSON ({ tileJson }) without `zxy`, else the tile's bytes, decompressed ({ bytes }, or
   * {} where it has none); { failure } when it cannot be read. The header and directories are kept per archive
   * (pmtiles' cache keeps no failure) and read afresh at each TileJSON, that is each registration of the style.
   */
  async fromArchive (url, zxy) {
    let archive = this.archives.get(url)
    if (archive === undefined || zxy === undefined) {
      const source = {
        getKey: () => url,
        getBytes: async (offset, length) => {
          const got = await this.fetch(url, false, [offset, length])
          if (got.bytes === undefined) throw Object.assign(new Error(got.failure), { failure: got.failure })
          return { data: got.bytes.buffer.slice(got.bytes.byteOffset, got.bytes.byteOffset + got.bytes.length) }
        },
      }
      archive = new PMTiles(source, new ResolvedValueCache(64, false, decompressInternal), decompressInternal)
      this.archives.delete(url)
      this.archives.set(url, archive)
      if (this.archives.size > ARCHIVES_KEPT) this.archives.delete(this.archives.keys().next().value)
    }
    try {
      if (zxy === undefined) {
        const h = await archive.getHeader()
        const bounds = h.minLon < h.maxLon && h.minLat < h.maxLat ? [h.minLon, h.minLat, h.maxLon, h.maxLat] : undefined
        return { tileJson: { tilejson: '3.0.0', minzoom: h.minZoom, maxzoom: h.maxZoom, bounds } }
      }
      const tile = await archive.getZxy(...zxy)
      return tile === undefined ? {} : { bytes: Buffer.from(tile.data) }
    } catch (err) {
      // Said in a few words: a network or HTTP failure as fetch says it, else what is wrong with the archive.
      return { failure: err.failure ?? `not a PMTiles archive it can read (${String(err.message).slice(0, 100)})` }
    }
  }

  /**
   * A remote TileJSON with its tiles asked of this server too (relative tile URLs read against its own URL), each with
   * its place (remote-places.js: `drawing` is its source's in the style; the zooms, scheme and bounds the TileJSON's, as
   * the engine takes them).
   */
  tileJson (tj, styleId, url, drawing) {
    if (tj === null || typeof tj !== 'object' || !Array.isArray(tj.tiles)) throw new Error('no tiles')
    const tiles = tj.tiles.filter((t) => typeof t === 'string').map((t) => {
      // new URL() escapes the braces of {z}/{x}/{y}, which the engine must see as they are.
      const absolute = REMOTE.test(t) ? t : new URL(t, url).href.replace(/%7B/gi, '{').replace(/%7D/gi, '}')
      return REMOTE.test(absolute) ? remoteUrl(styleId, 'tile', `${tilePlace(drawing, tj)}/${absolute}`) : null
    }).filter((t) => t !== null)
    return { ...tj, tiles: tiles.length > 0 ? tiles : EMPTY_TILES }
  }

  /**
   * { bytes } | { failure: why } | {} (404 or 204: a tile the server does not have) | { refused: status } (a tile it
   * refuses: REFUSED_TILE). `tile`: those are no tile there; a TileJSON or a GeoJSON file answering them is missing.
   * `range`: [offset, length], the bytes asked for (an archive's; a server sending the whole file is read so too).
   */
  async fetch (url, tile, range) {
    const host = hostOf(url) ?? ''
    const resting = this.hosts.get(host)
    if (resting?.unreachable && Date.now() < resting.restUntil) return { failure: resting.reason }
    let res
    try {
      const { url: bare, headers } = withBasicAuth(url) // `user:pass@` sent as a browser sends it
      if (range !== undefined) headers.range = `bytes=${range[0]}-${range[0] + range[1] - 1}`
      res = await outboundFetch(bare, { headers, signal: AbortSignal.any([this.closing.signal, AbortSignal.timeout(this.timeoutMs)]) })
    } catch (err) {
      // The host cannot be reached (a name that does not resolve, a refused connection, a timeout): rested. Said in
      // a few words, never the error's message, which may hold the URL and its password.
      const reason = err.name === 'TimeoutError' ? `no answer in ${this.timeoutMs / 1000} s` : networkReason(err)
      const state = this.hosts.get(host) // as it is now: other fetches failed meanwhile (and were logged)
      const restUntil = Date.now() + this.restMs
      if (state?.unreachable) Object.assign(state, { restUntil, reason })
      else this.hosts.set(host, { restUntil, reason, unreachable: true, loggedAt: 0 })
      return { failure: reason }
    }
    try {
      if (tile && NO_TILE.has(res.status)) return {}
      if (tile && REFUSED_TILE.has(res.status)) return { refused: res.status }
      if (!res.ok) return { failure: `HTTP ${res.status}` }
      if (Number(res.headers.get('content-length')) > MAX_BYTES) return { failure: `larger than ${MAX_BYTES / 2 ** 20} MiB` }
      let bytes = Buffer.from(await res.arrayBuffer())
      if (bytes.length > MAX_BYTES) return { failure: `larger than ${MAX_BYTES / 2 ** 20} MiB` }
      if (range !== undefined && res.status !== 206) bytes = bytes.subarray(range[0], range[0] + range[1]) // the whole file
      const state = this.hosts.get(host)
      if (state !== undefined && Date.now() - state.loggedAt >= this.restMs) {
        this.hosts.delete(host)
        if (state.loggedAt > 0) this.log.info({ host }, 'a remote host of a style answers again')
      }
      return { bytes }
    } catch (err) {
      return { failure: networkReason(err) }
    } finally {
      res.body?.cancel().catch(() => {})
    }
  }

  /** A remote tile of `styleId` was refused (`status`): drawn empty, the render complete; logged once per host and status. */
  refusedTile (styleId, url, status) {
    const host = hostOf(url) ?? ''
    if (this.refusing.has(`${host} ${status}`)) return
    this.refusing.add(`${host} ${status}`)
    this.log.warn({ host, style: styleId, url: urlForLogs(url), reason: `HTTP ${status}` }, 'a remote tile server refuses tiles of a style: drawn empty, as tiles it does not have')
  }

  /**
   * A remote resource of `styleId` failed: the style's renders that draw it are incomplete from now (`place`: a remote
   * tile's, those over it; null: all of them); logged once per host.
   */
  failure (styleId, url, reason, place) {
    const host = hostOf(url) ?? ''
    const at = Date.now()
    this.failed.set(styleId, { at, host, reason })
    let tiles = this.tilesFailed.get(styleId)
    if (place === null || (tiles?.size ?? 0) >= TILES_KEPT) {
      // A resource drawn anywhere, or more tiles than are kept (an outage over a large area): every render of the style
      // counts it from now, which holds the tiles kept before too.
      this.everywhere.set(styleId, at)
      this.tilesFailed.delete(styleId)
    }
    if (place !== null) {
      if (!this.tilesFailed.has(styleId)) this.tilesFailed.set(styleId, tiles = new Map())
      const key = `${place.tileSize},${place.margin},${place.minzoom},${place.maxzoom},${place.bounds}/${place.z}/${place.x}/${place.y}`
      tiles.delete(key) // (kept in the order of their last failure)
      tiles.set(key, { at, ...place })
    }
    let state = this.hosts.get(host)
    if (state === undefined) this.hosts.set(host, state = { restUntil: 0, reason, unreachable: false, loggedAt: 0 })
    if (state.loggedAt > 0) return
    state.loggedAt = Date.now()
    this.log.warn({ host, style: styleId, url: urlForLogs(url), reason }, `a remote source of a style cannot be read: drawn empty, and ${this.incompleteTiles}`)
  }
}

// The style a renderer child draws: its sets, glyphs and sprites given as `tc://` URLs, which the child asks the parent
// for (lib/style/render/index.js answers them from the pipeline), never over loopback HTTP.
import { searchOf, setFor, setNameOf, spritePathOf } from '../rewrite.js'

// Sources and URLs the engine must never open itself: local files (`file:`, and `mbtiles://` / `pmtiles://` paths
// naming no set here) are read only through the catalog, never around it.
const LOCAL = /^(file|mbtiles|pmtiles):/i
const EMPTY_TILES = ['tc://empty/{z}/{x}/{y}'] // a source with no tiles: every tile answers empty
// A tile URL of this server written from its root (`/roads/{z}/{x}/{y}.pbf`, `/data/roads/…`): the set, and options.
const ROOTED = /^\/(?:data\/)?([^/?#]+)\/\{z\}\/\{x\}\/\{y\}(?:\.\w+)?(\?[^#]*)?$/

// A set's tiles as the child asks the parent for them, with its cache key: a replaced or purged set is new to the
// engine too (it keeps tiles it loaded). `search`: the set's options, `?…` or ''.
const tilesOf = (entry, search) => `tc://tiles/${encodeURIComponent(entry.id)}/${encodeURIComponent(entry.key)}/{z}/{x}/{y}${search}`

/**
 * `findSet(name)` → the entry a source name means (or undefined); `hasFonts`: glyphs come from the fonts folder (a
 * remote `glyphs` too, as tileserver-gl does: a renderer offline or behind a firewall still draws labels).
 * Returns { json, used }: the style to draw, and the entries of the sets it draws (their tiles make its tiles).
 */
export function renderStyle (style, findSet, hasFonts) {
  const json = structuredClone(style.json)
  const used = []
  for (const source of Object.values(json.sources)) {
    if (source === null || typeof source !== 'object') continue
    if (Array.isArray(source.tiles) && source.tiles.some((t) => LOCAL.test(t) || ROOTED.test(t))) {
      source.tiles = source.tiles.flatMap((t) => {
        if (LOCAL.test(t)) return []
        const m = ROOTED.exec(t) // this server's own tile URL, written from its root: its set, drawn from here
        if (m === null) return [t]
        const entry = setFor(m[1], findSet)
        if (entry === undefined || entry.source === null) return []
        used.push(entry)
        return [tilesOf(entry, m[2] ?? '')]
      })
      if (source.tiles.length === 0) source.tiles = EMPTY_TILES
    }
    if (typeof source.url !== 'string') continue
    const entry = setFor(source.url, findSet)
    if (entry === undefined || entry.source === null) {
      // A set missing or unavailable is drawn as empty (the rest of the map still is), as is a local file the
      // catalog does not serve; a remote URL stays the engine's to fetch.
      if (setNameOf(source.url) !== null || LOCAL.test(source.url)) {
        delete source.url
        source.tiles = EMPTY_TILES
      }
      continue
    }
    used.push(entry)
    const tj = entry.source.tilejson
    const search = searchOf(source.url) // the set's options (a raster-dem's `?encoding=mapbox`)
    delete source.url
    source.tiles = [tilesOf(entry, search)]
    source.minzoom = tj.minzoom
    source.maxzoom = tj.maxzoom
    if (Array.isArray(tj.bounds)) source.bounds = tj.bounds
    if (source.type === 'raster' || source.type === 'raster-dem') source.tileSize ??= 256
  }
  if (hasFonts || (typeof json.glyphs === 'string' && !/^[a-z][a-z0-9+.-]*:/i.test(json.glyphs))) json.glyphs = 'tc://fonts/{fontstack}/{range}.pbf'
  // The one sprite is `_`; a sprite of a list is its id after `~` (an id may be `_` too).
  if (spritePathOf(style) !== null) json.sprite = `tc://sprites/${encodeURIComponent(style.id)}/_`
  else if (Array.isArray(json.sprite)) {
    json.sprite = json.sprite.map((s) => (spritePathOf(style, s?.id) !== null ? { ...s, url: `tc://sprites/${encodeURIComponent(style.id)}/~${encodeURIComponent(s.id)}` } : s))
  }
  return { json, used }
}

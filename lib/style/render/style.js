// The style a renderer child draws: its sets, glyphs and sprites given as `tc://` URLs, which the child asks the parent
// for (lib/style/render/index.js answers them from the pipeline), never over loopback HTTP.
import { dataPathOf, isRooted, namesSetTiles, namesSprite, OWN_SPRITE, OWN_TILES, ownPath, ownSetUrl, rootedPath, searchOf, setFor, setNameOf, spritePathOf } from '../rewrite.js'
import { decodedOr } from '../../urls.js'

// Sources and URLs the engine must never open itself: local files (`file:`, MapLibre Native's `asset:`, and
// `mbtiles://` / `pmtiles://` paths naming no set here) are read only through the catalog, never around it. A remote
// archive (`pmtiles://https://…`) is not one: the server reads it for the engine (remote.js).
const LOCAL = /^(file|asset|mbtiles|pmtiles):(?!\/\/https?:\/\/)/i
/** A source's tiles when it has none to draw: every tile answers empty (lib/style/render/index.js). */
export const EMPTY_TILES = ['tc://empty/{z}/{x}/{y}']
const EMPTY_DATA = { type: 'FeatureCollection', features: [] }
// A GeoJSON file of a style on this server named absolutely (`http://localhost:3000/styles/city/files/points.geojson`).
const OWN_DATA = /^\/styles\/([^/?#]+)\/files\/([^?#]+)(?:\?.*)?$/

// A set's tiles as the child asks the parent for them, with its cache key: a replaced or purged set is new to the
// engine too (it keeps tiles it loaded). `search`: the set's options, `?…` or ''.
const tilesOf = (entry, search) => `tc://tiles/${encodeURIComponent(entry.id)}/${encodeURIComponent(entry.key)}/{z}/{x}/{y}${search}`

/**
 * `findSet(name)` → the entry a source name means (or undefined); `fonts`: the fonts folder's revision (FontCatalog),
 * null without one; with one, glyphs come from it (a remote `glyphs` too, as tileserver-gl does: a renderer offline or
 * behind a firewall still draws labels); `own`: the bases this server is known by (lib/urls.js ownBases), whose URLs
 * are drawn from here as the relative forms are, not fetched by the engine over loopback HTTP (which API keys would
 * refuse, and which costs a request and a socket); `findStyle(id)`: a style of the catalog, whose sprite or files
 * another style may name by this server's URL. Every file drawn from here is named with its revision (the fonts', a
 * sprite's, a GeoJSON file's): the engine keeps what it loaded by URL, and a changed file must be a new style to draw.
 * Returns { json, used, attribution }: the style to draw, the entries of the sets it draws (their tiles make its
 * tiles), and the credits of what it draws (attributionOf).
 */
export function renderStyle (style, findSet, { fonts = null, own = [], findStyle = () => undefined } = {}) {
  const json = structuredClone(style.json)
  const used = []
  const here = (url) => ownPath(url, own)
  // The path on this server a URL names: absolute at one of its bases, or from its root (behind a path prefix, the
  // prefix's too when that names a set's tiles or a style's sprite here: rootedPath); null for any other.
  const servesTiles = namesSetTiles(findSet)
  const servesSprite = namesSprite((id) => (id === style.id ? style : findStyle(id)))
  const ownPathOf = (url, serves) => (isRooted(url) ? rootedPath(url, own, serves) : here(url))
  const starts = [] // each source's id, and where the entries of the sets it draws begin in `used`
  for (const [key, source] of Object.entries(json.sources)) {
    if (source === null || typeof source !== 'object') continue
    starts.push({ key, from: used.length })
    if (Array.isArray(source.tiles) && source.tiles.some((t) => LOCAL.test(t) || ownPathOf(t, servesTiles) !== null)) {
      source.tiles = source.tiles.flatMap((t) => {
        if (LOCAL.test(t)) return []
        const m = OWN_TILES.exec(ownPathOf(t, servesTiles) ?? '') // this server's own tile URL, from its root or absolute: its set, drawn from here
        if (m === null) return [t]
        const entry = setFor(m[1], findSet)
        if (entry === undefined || entry.source === null) return []
        used.push(entry)
        return [tilesOf(entry, m[2] ?? '')]
      })
      if (source.tiles.length === 0) source.tiles = EMPTY_TILES
    }
    if (source.type === 'geojson' && typeof source.data === 'string') source.data = geoJsonData(style, source.data, here, findStyle)
    if (source.type === 'image' && typeof source.url === 'string') {
      source.url = geoJsonData(style, source.url, here, findStyle, 'image')
      // Drawn as nothing: the engine fails a render on an empty image, not on an empty raster tile.
      if (source.url === null) Object.assign(source, { type: 'raster', url: undefined, coordinates: undefined, tiles: EMPTY_TILES, tileSize: 256 })
    }
    if (typeof source.url !== 'string' || source.type === 'image') continue // an image's url names no set
    const url = ownSetUrl(here(source.url)) ?? source.url // this server's TileJSON URL of a set: the set
    const entry = setFor(url, findSet)
    if (entry === undefined || entry.source === null) {
      // A set missing or unavailable is drawn as empty (the rest of the map still is), as is a local file the
      // catalog does not serve; a remote URL stays the engine's to fetch.
      if (setNameOf(url) !== null || LOCAL.test(url)) {
        delete source.url
        source.tiles = EMPTY_TILES
      }
      continue
    }
    used.push(entry)
    const tj = entry.source.tilejson
    const search = searchOf(url) // the set's options (a raster-dem's `?encoding=mapbox`)
    delete source.url
    source.tiles = [tilesOf(entry, search)]
    source.minzoom = tj.minzoom
    source.maxzoom = tj.maxzoom
    if (Array.isArray(tj.bounds)) source.bounds = tj.bounds
    if (source.type === 'raster' || source.type === 'raster-dem') source.tileSize ??= 256
  }
  const ownFonts = here(json.glyphs)?.startsWith('/fonts/') === true
  if (fonts !== null || ownFonts || (typeof json.glyphs === 'string' && (LOCAL.test(json.glyphs) || !/^[a-z][a-z0-9+.-]*:/i.test(json.glyphs)))) json.glyphs = `tc://fonts/{fontstack}/{range}.pbf?r=${fonts ?? 'none'}`
  // The one sprite is `_`; a sprite of a list is its id after `~` (an id may be `_` too). A sprite route of this server,
  // named absolutely or from its root (`/styles/city/sprite`), is that style's sprite (fetchResource finds the style,
  // or draws without it). A path from the root naming no sprite route (`/elsewhere/sprite`) is drawn as a relative
  // sprite naming no files is: the style's own sprite `name`, which it lacks, so the render fails saying so (the
  // engine, given the path, failed every render with 'URL using bad/illegal format').
  // Its files' state in its query (the engine puts `@2x.json` before it; the parent reads no query of a sprite URL).
  const spriteOf = (styleId, name) => `tc://sprites/${encodeURIComponent(styleId)}/${name}?r=${(styleId === style.id ? style : findStyle(styleId))?.spriteRevision ?? 'missing'}`
  const ownSprite = (url, name) => {
    const m = OWN_SPRITE.exec(ownPathOf(url, servesSprite) ?? '')
    if (m === null) return isRooted(url) ? spriteOf(style.id, name) : null
    return spriteOf(decodedOr(m[1]), m[2] === undefined ? '_' : `~${encodeURIComponent(decodedOr(m[2]))}`)
  }
  if (spritePathOf(style) !== null) json.sprite = spriteOf(style.id, '_')
  else if (typeof json.sprite === 'string') json.sprite = ownSprite(json.sprite, '_') ?? json.sprite
  else if (Array.isArray(json.sprite)) {
    json.sprite = json.sprite.map((s) => {
      const name = `~${encodeURIComponent(s?.id)}`
      if (spritePathOf(style, s?.id) !== null) return { ...s, url: spriteOf(style.id, name) }
      const own = s && ownSprite(s.url, name)
      return own ? { ...s, url: own } : s
    }).filter((s) => !LOCAL.test(s?.url)) // a local file named around the styles folder: drawn without its icons
  }
  if (typeof json.sprite === 'string' && LOCAL.test(json.sprite)) delete json.sprite
  return { json, used, attribution: attributionOf(style.json, starts.map(({ key, from }, i) => [key, used.slice(from, starts[i + 1]?.from)])) }
}

/**
 * The credits of what a style draws, as one TileJSON `attribution` (tileserver-gl's form: ' | ' between them), or
 * undefined: of each source a layer draws, its own `attribution` in the style, else those of the sets it draws (as
 * MapLibre GL JS, which shows a source's attribution from the style over its TileJSON's, and only of sources a layer
 * uses). A credit given twice (two sources of one provider) is given once.
 */
function attributionOf (json, drawnBy) {
  const drawn = new Set((json.layers ?? []).map((layer) => layer?.source))
  const credits = new Set()
  for (const [key, entries] of drawnBy) {
    if (!drawn.has(key)) continue
    const own = json.sources[key]?.attribution
    const texts = typeof own === 'string' && own.trim() !== '' ? [own] : entries.map((e) => e.source.tilejson.attribution)
    for (const text of texts) if (typeof text === 'string' && text.trim() !== '') credits.add(text.trim())
  }
  return credits.size === 0 ? undefined : [...credits].join(' | ')
}

/**
 * A GeoJSON source's `data` URL (an image source's `url`: `type` 'image') as the engine asks for it. A file beside
 * the style (relative, as MapLibre GL JS reads it against the style's URL; or this server's URL of it) is read by the
 * parent from the styles or data folders (tc://data/<style>/<its revision>/<path>: a changed file is a new URL, so the
 * engine never draws the old one), never by the engine, which took `points.geojson` for a host name; a path leaving
 * the style's folder, or a local file named around the catalog (`file:`), is drawn as empty (an image: null, which
 * renderStyle makes an empty raster source). A remote URL stays the engine's to fetch.
 */
function geoJsonData (style, data, here, findStyle, type = 'geojson') {
  const empty = type === 'geojson' ? EMPTY_DATA : null // an image drawn as nothing (see renderStyle)
  let styleId = style.id
  let path = dataPathOf(data, type)
  const own = OWN_DATA.exec(here(data) ?? '')
  if (own !== null) {
    styleId = decodedOr(own[1])
    path = dataPathOf(own[2], type)
  }
  if (path === null) return LOCAL.test(data) || (own === null && !/^[a-z][a-z0-9+.-]*:/i.test(data)) ? empty : data
  // Another style's file (named by this server's URL of it): that style knows its revision, and the parent reads it as
  // that style names it.
  const revision = (styleId === style.id ? style : findStyle(styleId))?.dataFiles?.get(path)?.revision ?? 'missing'
  if (revision === 'outside') return empty // a link leading out of the folders: drawn as a path leaving them is
  return `tc://data/${encodeURIComponent(styleId)}/${revision}/${encodeURIComponent(path)}`
}

// A style as this server answers it: sources that name one of its sets point at the set's TileJSON here, and a sprite
// or glyphs given as a relative path point at this server's sprite and font routes. URLs are built from the request's
// base (lib/urls.js), so proxies and path prefixes work as they do for TileJSON. Remote URLs are left as they are, but
// for those naming this server itself (ownPath), which are made the client's as the relative forms are.
import { posix } from 'node:path'
import { decodedOr, hostOf, withoutKey } from '../urls.js'

const SCHEMES = /^(mbtiles|pmtiles):\/\/(.*)$/i
const REMOTE = /^[a-z][a-z0-9+.-]*:/i // any scheme: http(s), mapbox://, pmtiles://https://…, data:
const EXTENSION = /\.(mbtiles|pmtiles|json)$/i

/**
 * The set a source URL names, as tileserver-gl styles write it: `mbtiles://name`, `mbtiles://{name}`,
 * `pmtiles://name.pmtiles`, `{name}`, a bare set id, or a relative path ending in the set's name: the name, without
 * braces, percent-decoded; null for a remote URL (including `pmtiles://https://…`, the pmtiles protocol's own form).
 */
export function setNameOf (url) {
  if (typeof url !== 'string' || url === '') return null
  let name = url
  const scheme = SCHEMES.exec(url)
  if (scheme !== null) name = scheme[2]
  if (REMOTE.test(name) || name.startsWith('//')) return null
  name = name.replace(/[?#].*$/, '').replace(/^\{(.*)\}$/, '$1')
  name = name.slice(name.lastIndexOf('/') + 1)
  name = decodedOr(name)
  return name || null
}

/** A source URL's query string, `?` included ('' without one): a raster set's options (`dem.json?encoding=mapbox`). */
export const searchOf = (url) => {
  const at = url.indexOf('?')
  return at < 0 ? '' : url.slice(at).replace(/#.*$/, '')
}

/**
 * What `findSet(name)` gives for the set a source URL names (see setNameOf), or undefined: the file's full name first
 * (`x.pmtiles` is the PMTiles file where an `x.mbtiles` beside it is the set `x`), then without its extension.
 */
export function setFor (url, findSet) {
  const name = setNameOf(url)
  if (name === null) return undefined
  const found = findSet(name)
  if (found !== undefined || !EXTENSION.test(name)) return found
  const stem = name.replace(EXTENSION, '')
  return stem === '' ? undefined : findSet(stem)
}

/** The sets a style's sources name that `findSet(name)` knows and can serve (entries with a source), in source order. */
export function setsOf (style, findSet) {
  const entries = []
  for (const source of Object.values(style.json.sources ?? {})) {
    const entry = setFor(source?.url, findSet)
    if (entry?.source != null) entries.push(entry)
  }
  return entries
}

// A URL naming this server absolutely: `http://localhost:3000/roads.json` in a style written for it, or saved from its
// own answer. "This server" is only a base links are built for (the request's, the public URL, the allowed hosts, the
// loopback names at its port: lib/urls.js ownBases), never a host taken on trust, and what such a URL names is only
// ever looked up among the sets, fonts, sprites and files the server serves anyway.
const ABSOLUTE = /^(https?):\/\/([^/?#]*)(.*)$/i

/** The host of a scheme and authority (lib/urls.js hostOf); null with user info (never this server's links). */
const hostIn = (scheme, authority) => (authority.includes('@') ? null : hostOf(`${scheme}://${authority}`))

/**
 * The path (with its query) that `url` names on this server when it starts with one of `bases` (the scheme aside:
 * http and https of one host are one server behind a proxy; `//host/…` is read at the base's scheme), else null. The query loses its `key`: the client's own
 * key is added to every link it is given, and a key written into a style is no one's to hand on.
 */
export function ownPath (url, bases) {
  if (typeof url !== 'string') return null
  for (const base of bases) {
    const b = ABSOLUTE.exec(base)
    if (b === null) continue
    // A protocol-relative URL (`//localhost:3000/roads.json`) has the scheme of the page that reads it: the base's.
    const m = ABSOLUTE.exec(url.startsWith('//') ? `${b[1]}:${url}` : url)
    if (m === null) return null
    const host = hostIn(m[1], m[2])
    if (host === null || host === '') return null
    if (hostIn(b[1], b[2]) !== host) continue
    const prefix = b[3].replace(/\/+$/, '')
    const rest = m[3]
    if (!rest.startsWith(prefix) || (rest.length > prefix.length && !'/?#'.includes(rest[prefix.length]))) continue
    const path = rest.slice(prefix.length).replace(/#.*$/, '')
    const at = path.indexOf('?')
    const pathname = at < 0 ? path : path.slice(0, at) // '' for the base itself
    return `${pathname.startsWith('/') ? pathname : '/' + pathname}${at < 0 ? '' : withoutKey(path.slice(at))}`
  }
  return null
}

// This server's TileJSON URLs, as ownPath gives them: /roads.json, /roads, /data/roads.json, with the set's options.
const OWN_TILEJSON = /^\/(?:data\/)?[^/?#]+(?:\?.*)?$/
/** The part of an own path that names a set (setFor takes it), or null when it is another route of this server. */
export const ownSetUrl = (path) => (path !== null && OWN_TILEJSON.test(path) ? path : null)

// tileserver-gl's placeholder for the style's own folder: `{styleJsonFolder}/sprites/x` is `sprites/x` here.
const FOLDER = /^\{styleJsonFolder\}\/?/
const local = (url) => (typeof url === 'string' ? url.replace(FOLDER, '') : url)
/** A URL from this server's root (`/styles/city/sprite`), not protocol-relative (`//host/…`). */
export const isRooted = (url) => typeof url === 'string' && url.startsWith('/') && !url.startsWith('//')

// This server's routes a path from its root may name: a set's tiles (`/roads/{z}/{x}/{y}.pbf`, `/data/roads/…`: the
// set, and its options) and a style's sprite (`/styles/city/sprite`, `/styles/city/sprite/:spriteId`).
export const OWN_TILES = /^\/(?:data\/)?([^/?#]+)\/\{z\}\/\{x\}\/\{y\}(?:\.\w+)?(\?[^#]*)?$/
export const OWN_SPRITE = /^\/styles\/([^/?#]+)\/sprite(?:\/([^/?#]+))?(?:\?.*)?$/
/** Whether a path is the tiles of a set `findSet(name)` knows (rootedPath's `serves` for tiles). */
export const namesSetTiles = (findSet) => (path) => {
  const m = OWN_TILES.exec(path)
  return m !== null && setFor(m[1], findSet) !== undefined
}
/** Whether a path is the sprite of a style `findStyle(id)` knows (rootedPath's `serves` for a sprite). */
export const namesSprite = (findStyle) => (path) => {
  const m = OWN_SPRITE.exec(path)
  return m !== null && findStyle(decodedOr(m[1])) !== undefined
}

/**
 * The path on this server that a URL written from the root names. Behind a path prefix (`--public-url
 * http://host/tiles`), a path under the prefix may be read as a browser at that host reads it, from the host's root
 * (`/tiles/styles/city/sprite` is `/styles/city/sprite`, its `key` dropped as ownPath drops it), or from this server's
 * own root (`/tiles/{z}/{x}/{y}.png`, the tiles of a set named `tiles`): the first is taken when it names something
 * this server serves (`serves(path)`), else the path is from this server's own root, as any other is.
 */
export function rootedPath (url, bases, serves) {
  for (const base of bases) {
    const b = ABSOLUTE.exec(base)
    if (b === null || b[3].replace(/\/+$/, '') === '') continue // no prefix: the host's root is the server's
    const path = ownPath(`${b[1]}://${b[2]}${url}`, [base])
    if (path !== null && serves(path)) return path
  }
  return url
}
const isRelative = (url) => typeof url === 'string' && url !== '' && !REMOTE.test(local(url)) && !url.startsWith('//') && !local(url).startsWith('/')

/**
 * The file a source's relative URL names (a GeoJSON `data`: `points.geojson`, `data/points.geojson`,
 * `{styleJsonFolder}/…`; an image's `url`, a video's `urls`: `type`, see FILE_TYPES), as a path inside the style's
 * folder, percent-decoded and normalized ('a/../b.geojson' is 'b.geojson'); null for anything else: a URL, a path from
 * the root, one leaving the style's folder (`../../etc/passwd`), or a file whose extension is not one of its type's
 * (.geojson or .json for GeoJSON). The client gets it as `/styles/<id>/files/<path>` (dataUrlOf), and the renderer
 * reads the same file.
 */
export function dataPathOf (data, type = 'geojson') {
  if (!isRelative(data)) return null
  const path = posix.normalize(decodedOr(local(data).replace(/[?#].*$/, '')))
  if (path === '..' || path.startsWith('../') || path.startsWith('/') || path.includes('\0') || !FILE_TYPES[type].test(path)) return null
  return path
}

// The files a style's sources may name beside it, by source type: a GeoJSON source's `data`, an image source's `url`,
// a video source's `urls`.
const FILE_TYPES = {
  geojson: /[^/]\.(geo)?json$/i,
  image: /[^/]\.(png|jpe?g|webp|gif)$/i,
  video: /[^/]\.(mp4|webm|ogv|mov)$/i,
}
export const FILE_MEDIA_TYPES = {
  geojson: 'application/geo+json',
  json: 'application/json; charset=utf-8',
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  webp: 'image/webp',
  gif: 'image/gif',
  mp4: 'video/mp4',
  webm: 'video/webm',
  ogv: 'video/ogg',
  mov: 'video/quicktime',
}

/** The URLs a source names files by, as [field, url, type]: a GeoJSON's `data`, an image's `url`, each of a video's `urls`. */
export function fileUrlsOf (source) {
  if (source?.type === 'geojson' && typeof source.data === 'string') return [['data', source.data, 'geojson']]
  if (source?.type === 'image' && typeof source.url === 'string') return [['url', source.url, 'image']]
  if (source?.type === 'video' && Array.isArray(source.urls)) return source.urls.filter((u) => typeof u === 'string').map((u) => ['urls', u, 'video'])
  return []
}

/** The URL path (after `/styles/<id>/files/`) of a style's file: dataPathOf's path, encoded. */
export const dataUrlOf = (path) => path.split('/').map(encodeURIComponent).join('/')

/**
 * The style `style` answers with at `base`. `findSet(name)` → the id of the set a name means, or undefined; `missing`
 * is told of each source that names no set here (the style is served anyway: MapLibre shows the rest). `link` finishes
 * each URL made here (the client's API key, lib/urls.js `keyed`). `findStyle(id)`: a style of the catalog, whose sprite a
 * path from the root may name behind a path prefix (rootedPath).
 */
export function rewriteStyle (style, base, findSet, missing, link = (url) => url, own = [], findStyle = () => undefined) {
  const json = structuredClone(style.json)
  const styleUrl = `${base}/styles/${encodeURIComponent(style.id)}`
  // This server named absolutely, at the client's base or at another it is known by: the client's URL, with its key.
  const bases = [base, ...own]
  const here = (url) => ownPath(url, bases)
  const rebased = (url) => {
    const path = here(url)
    return path === null ? url : link(`${base}${path}`)
  }
  // Behind a path prefix, what a path from the root may name (rootedPath): a set's tiles, a style's sprite.
  const servesTiles = namesSetTiles(findSet)
  const servesSprite = namesSprite((id) => (id === style.id ? style : findStyle(id)))
  for (const [key, source] of Object.entries(json.sources)) {
    if (source === null || typeof source !== 'object') continue
    // Tile URLs written from this server's root (`/roads/{z}/{x}/{y}.pbf`): made absolute, so a path prefix and keys apply.
    if (Array.isArray(source.tiles)) source.tiles = source.tiles.map((t) => (isRooted(t) ? link(`${base}${rootedPath(t, bases, servesTiles)}`) : rebased(t)))
    // A file beside the style (GeoJSON `data`, an image's `url`, a video's `urls`): MapLibre GL JS would resolve it
    // against the style's URL, and get it without a key; given absolute, under /files/. One leaving the style's folder
    // is not served, and left as written.
    const file = (url, type) => {
      const path = dataPathOf(url, type)
      if (path !== null) return link(`${styleUrl}/files/${dataUrlOf(path)}`)
      if (isRelative(url)) missing(key, url)
      return rebased(url)
    }
    if (source.type === 'geojson' && typeof source.data === 'string') source.data = file(source.data, 'geojson')
    if (source.type === 'video' && Array.isArray(source.urls)) source.urls = source.urls.map((u) => (typeof u === 'string' ? file(u, 'video') : u))
    if (source.type === 'image' && typeof source.url === 'string') source.url = file(source.url, 'image')
    if (typeof source.url !== 'string' || source.type === 'image') continue // an image's url names no set
    const ownUrl = here(source.url)
    if (ownUrl !== null && ownSetUrl(ownUrl) === null) { // another route of this server (a style's raster TileJSON)
      source.url = link(`${base}${ownUrl}`)
      continue
    }
    const url = ownUrl ?? source.url
    if (setNameOf(url) === null) continue
    const id = setFor(url, findSet)
    if (id === undefined) missing(key, source.url)
    else source.url = link(`${base}/${encodeURIComponent(id)}.json${searchOf(url)}`) // options kept: `?encoding=mapbox`
  }
  // MapLibre puts `@2x.json` before a sprite URL's query string, and fills a glyphs URL's placeholders around it. A
  // relative sprite's query (`sprite?v=2`, a cache-buster) is kept for clients, but for a key written into it.
  const query = (url) => (searchOf(url) === '' ? '' : withoutKey(searchOf(url)))
  // A sprite written from this server's root (`/styles/city/sprite`, or `/tiles/styles/city/sprite` behind the prefix
  // /tiles) is made absolute at the client's base, as tile URLs are (MapLibre GL JS refuses a sprite URL that is not
  // absolute), its key dropped as an absolute one's is.
  const sprite = (url) => rebased(isRooted(url) ? `${base}${rootedPath(url, bases, servesSprite)}` : url)
  if (isRelative(json.sprite)) json.sprite = link(`${styleUrl}/sprite${query(json.sprite)}`)
  else if (typeof json.sprite === 'string') json.sprite = sprite(json.sprite)
  else if (Array.isArray(json.sprite)) {
    json.sprite = json.sprite.map((s) => (s && isRelative(s.url) ? { ...s, url: link(`${styleUrl}/sprite/${encodeURIComponent(s.id)}${query(s.url)}`) } : s && typeof s.url === 'string' ? { ...s, url: sprite(s.url) } : s))
  }
  // Glyphs from the root (`/fonts/{fontstack}/{range}.pbf`, `/tiles/fonts/…` behind a prefix, any path) are this
  // server's fonts, as relative ones are.
  if (isRelative(json.glyphs) || isRooted(json.glyphs)) json.glyphs = link(`${base}/fonts/{fontstack}/{range}.pbf`)
  else if (typeof json.glyphs === 'string') json.glyphs = rebased(json.glyphs)
  return json
}

/**
 * The relative path of a style's sprite `spriteId` (undefined: the single `sprite` string), without its query
 * (`sprite?v=2` is the files sprite.json, sprite@2x.png…, as MapLibre puts the suffix before the query), or null when
 * the style has no such sprite of its own (a remote one is fetched by clients from where it is).
 */
export function spritePathOf (style, spriteId) {
  const sprite = style.json.sprite
  const pathOf = (url) => local(url).replace(/[?#].*$/, '') || null
  if (spriteId === undefined) return isRelative(sprite) ? pathOf(sprite) : null
  if (!Array.isArray(sprite)) return null
  const found = sprite.find((s) => s && s.id === spriteId)
  return found && isRelative(found.url) ? pathOf(found.url) : null
}

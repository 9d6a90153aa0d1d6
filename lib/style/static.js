// Static map images, tileserver-gl's API: what a request asks for (a centre and zoom, a bounding box, or `auto` to fit
// the overlays; a size; a scale) and its overlays (`path=`, `marker=`), which the engine draws itself: they become
// GeoJSON sources and layers added to the style for that render, not a second drawing library.
import { createHash } from 'node:crypto'
import { Color } from '@maplibre/maplibre-gl-style-spec'
import { BadRequest } from '../errors.js'
import { MARKER_SPRITE_ID } from './markers.js'

const NUMBER = '-?\\d+(?:\\.\\d+)?'
const CENTER = new RegExp(`^(${NUMBER}),(${NUMBER}),(${NUMBER})(?:@(${NUMBER})(?:,(${NUMBER}))?)?$`)
const BBOX = new RegExp(`^(${NUMBER}),(${NUMBER}),(${NUMBER}),(${NUMBER})$`)
const SIZE = /^(\d{1,5})x(\d{1,5})(?:@([23])x)?\.(png|jpg|jpeg|webp)$/

/**
 * A CSS colour as MapLibre reads one (its style spec's parser: names in any case, #rgb[a], #rrggbb[aa], rgb[a](),
 * hsl[a]()), written as the engine is sure to read it (`rgba(r,g,b,a)`); null for anything else, which the engine
 * would quietly draw in its default colour.
 */
const colour = (text) => (typeof text === 'string' && text.length <= 64 ? Color.parse(text)?.toString() ?? null : null)

/**
 * The latitude where Web Mercator's square world ends. MapLibre Native refuses a centre or a bbox beyond it (a failed
 * render); tileserver-gl takes |lat| up to 85.06 and its engine clamps the centre there, so a view is clamped too.
 */
const MAX_LAT = Math.atan(Math.sinh(Math.PI)) * 180 / Math.PI
const onMap = (lat) => Math.max(-MAX_LAT, Math.min(MAX_LAT, lat))

/** Limits of a static image (config `render`): 400 beyond them. */
export const STATIC_DEFAULTS = { maxSize: 2048, maxOverlays: 100, maxPathPoints: 10_000 }

/**
 * The view of `/styles/:id/static/:view/:size`: { op: 'view', lon, lat, zoom, bearing, pitch } or
 * { op: 'bounds', bbox } or { op: 'auto' }, with width, height, ratio and format; BadRequest for anything else.
 */
export function parseStatic (view, size, limits) {
  const s = SIZE.exec(size)
  if (s === null) throw new BadRequest(`'${size}' is not a size: WIDTHxHEIGHT[@2x|@3x].png|jpg|webp`)
  const width = Number(s[1])
  const height = Number(s[2])
  const ratio = s[3] ? Number(s[3]) : 1
  // The pixels drawn, scale included (as tileserver-gl counts them): 2048x2048@3x is a 6144 px image.
  if (width < 1 || height < 1 || width * ratio > limits.maxSize || height * ratio > limits.maxSize) {
    throw new BadRequest(`an image is 1 to ${limits.maxSize} pixels on each side, its @2x or @3x scale included`)
  }
  const out = { width, height, ratio, format: s[4] === 'jpeg' ? 'jpg' : s[4] }
  if (view === 'auto') return { ...out, op: 'auto' }
  const c = CENTER.exec(view)
  if (c !== null) {
    const [lon, lat, zoom, bearing = 0, pitch = 0] = c.slice(1).map((v) => (v === undefined ? undefined : Number(v)))
    if (![lon, lat, zoom, bearing, pitch].every(Number.isFinite)) throw new BadRequest('numbers too long to be coordinates')
    if (Math.abs(lon) > 180 || Math.abs(lat) > 85.06 || zoom < 0 || zoom > 22) throw new BadRequest('lon -180..180, lat -85..85, zoom 0..22')
    if (pitch < 0 || pitch > 60) throw new BadRequest('pitch is 0 to 60 degrees')
    return { ...out, op: 'view', lon, lat: onMap(lat), zoom, bearing: bearing ?? 0, pitch: pitch ?? 0 }
  }
  const b = BBOX.exec(view)
  if (b !== null) {
    const bbox = b.slice(1).map(Number)
    if (!bbox.every(Number.isFinite) || !validBbox(bbox)) throw new BadRequest('a bbox is minlon,minlat,maxlon,maxlat within -180..180, -85..85')
    return { ...out, op: 'bounds', bbox: [bbox[0], onMap(bbox[1]), bbox[2], onMap(bbox[3])] }
  }
  throw new BadRequest(`'${view}' is not a view: lon,lat,zoom[@bearing[,pitch]], minx,miny,maxx,maxy or auto`)
}

const validBbox = ([a, b, c, d]) => a >= -180 && c <= 180 && b >= -85.06 && d <= 85.06 && a < c && b < d

/**
 * What the engine is asked to draw for a static image (`view` from parseStatic, `overlays` from parseOverlays, `padding`
 * a share of the smaller side): { op: 'view', lon, lat, zoom, … } in the engine's zoom (512 px tiles: one less than a
 * 256 px web map's, as tileserver-gl draws it) or { op: 'bounds', bbox, padding, … }, within the engine's world, and
 * `shrink`: the engine has no zoom below 0, so a view smaller than its zoom 0 (a web map's zoom under 1, a bbox of most
 * of the world in a small image) is drawn `shrink` times larger and scaled down, as a 256 px tile of z0 is (render/).
 */
export function engineRequest (view, overlays, padding) {
  const size = { width: view.width, height: view.height, ratio: view.ratio }
  if (view.op === 'view') {
    const shrink = view.zoom < 1 ? 2 : 1
    // Not drawn at the engine's zoom 0 instead, which is a web map's 1: a map at twice the scale asked, with nothing to
    // tell it from the right one. Reached only where render.maxSize is raised past MAX_DRAWN / 2.
    if (Math.max(view.width, view.height) * view.ratio * shrink > MAX_DRAWN) {
      throw new BadRequest(`an image below zoom 1 is at most ${MAX_DRAWN / shrink} pixels on each side, its @2x or @3x scale included (it is drawn twice as large): ask a smaller image or zoom 1 or more`)
    }
    return { op: 'view', lon: view.lon, lat: view.lat, zoom: view.zoom - 1 + Math.log2(shrink), bearing: view.bearing, pitch: view.pitch, ...scaled(size, shrink), shrink }
  }
  const bbox = view.op === 'bounds' ? view.bbox.slice() : overlays.bbox?.slice()
  if (bbox === undefined || bbox === null) throw new BadRequest('auto fits the overlays: give a path or a marker')
  bbox[1] = onMap(bbox[1])
  bbox[3] = onMap(bbox[3])
  if (bbox[0] === bbox[2] && bbox[1] === bbox[3]) return { op: 'view', lon: bbox[0], lat: bbox[1], zoom: 15, ...size, shrink: 1 } // a single point: a street-level view of it
  // A path along a parallel or a meridian has no height or width: the engine wants a box (≈ 10 m of one), on the map.
  if (bbox[1] === bbox[3]) [bbox[1], bbox[3]] = [Math.max(-MAX_LAT, bbox[1] - 1e-4), Math.min(MAX_LAT, bbox[3] + 1e-4)]
  if (bbox[0] === bbox[2]) [bbox[0], bbox[2]] = [Math.max(-180, bbox[0] - 1e-4), Math.min(180, bbox[2] + 1e-4)]
  const pad = padding * Math.min(view.width, view.height)
  // The engine's fit (512 px a world at its zoom 0): below 0, drawn larger by the next power of two (rounding aside: the
  // world in 256 px is drawn in 512), within MAX_DRAWN.
  const fit = Math.min((view.width - 2 * pad) / (spanX(bbox) * 512), (view.height - 2 * pad) / (spanY(bbox) * 512))
  let shrink = 1
  while (shrink * fit < 1 - 1e-9 && Math.max(view.width, view.height) * view.ratio * shrink * 2 <= MAX_DRAWN) shrink *= 2
  return { op: 'bounds', bbox, padding: pad * shrink, ...scaled(size, shrink), shrink }
}

/** The largest side, in pixels, the engine draws for an image it scales down (a 256 px image of the world: 512). */
const MAX_DRAWN = 4096
const scaled = ({ width, height, ratio }, shrink) => ({ width: width * shrink, height: height * shrink, ratio })
const mercY = (lat) => (1 - Math.log(Math.tan(Math.PI / 4 + (lat * Math.PI) / 360)) / Math.PI) / 2
/** A bbox's width and height, as shares of Web Mercator's world. */
const spanX = ([minx, , maxx]) => (maxx - minx) / 360
const spanY = ([, miny, , maxy]) => mercY(miny) - mercY(maxy)

/**
 * Overlays from the query: `path` (repeatable) as `lon,lat|lon,lat…` or `enc:` and an encoded polyline, drawn with `stroke`,
 * `width` and `fill` (query-wide, or per path as `stroke:red|width:3|fill:#0f08|…points…`); `marker` (repeatable) as
 * `lon,lat`, then an icon (tileserver-gl's `|pin.png|scale:2|offset:0,-4`) or a dot (`|color:…|size:…`). `latlng=1|true`
 * (tileserver-gl's) gives their points as `lat,lon` (an encoded polyline is lat/lon anyway). Returns { paths, markers,
 * bbox } (bbox null: none).
 */
export function parseOverlays (query, limits) {
  const list = (v) => (v === undefined ? [] : Array.isArray(v) ? v : [v])
  const point = pointReader(query.latlng)
  const base = { stroke: query.stroke ?? 'rgba(0,64,255,0.85)', width: query.width ?? '3', fill: query.fill ?? null }
  const paths = list(query.path).map((p) => parsePath(String(p), base, limits, point))
  const markers = list(query.marker).map((m) => parseMarker(String(m), point))
  if (paths.length + markers.length > limits.maxOverlays) throw new BadRequest(`at most ${limits.maxOverlays} overlays`)
  const points = [...paths.flatMap((p) => p.coordinates), ...markers.map((m) => m.coordinates)]
  const bbox = points.length === 0
    ? null
    : [Math.min(...points.map((p) => p[0])), Math.min(...points.map((p) => p[1])), Math.max(...points.map((p) => p[0])), Math.max(...points.map((p) => p[1]))]
  return { paths, markers, bbox }
}

function parsePath (text, base, limits, point) {
  const style = { ...base }
  const coords = []
  // An encoded polyline comes last, after `enc:` (it may hold '|' itself); options and lon,lat points are '|'-separated.
  const enc = text.indexOf('enc:')
  for (const part of (enc === -1 ? text : text.slice(0, enc)).split('|')) {
    const option = /^(stroke|width|fill):(.+)$/.exec(part)
    if (option !== null) style[option[1]] = option[2]
    else if (part !== '') coords.push(point(part))
  }
  if (enc !== -1) coords.push(...decodePolyline(text.slice(enc + 4)))
  if (coords.length < 2) throw new BadRequest('a path needs two points or more')
  if (coords.length > limits.maxPathPoints) throw new BadRequest(`a path has at most ${limits.maxPathPoints} points`)
  const width = Number(style.width)
  if (!(width > 0 && width <= 50)) throw new BadRequest('a path width is more than 0 and at most 50 pixels')
  const [stroke, fill] = ['stroke', 'fill'].map((key) => {
    if (style[key] === null) return null
    const value = colour(style[key])
    if (value === null) throw new BadRequest(`'${style[key]}' is not a colour`)
    return value
  })
  return { coordinates: coords, stroke, width, fill }
}

function parseMarker (text, point) {
  const [where, ...options] = text.split('|')
  const marker = { coordinates: point(where), color: '#d62728', size: 8, icon: null, scale: 1, offset: [0, 0] }
  for (const o of options) {
    const m = /^(color|size|scale|offset):(.+)$/.exec(o)
    if (m === null) {
      // tileserver-gl's form: the icon (a file in the icons folder, or a URL) comes first; without one, a dot
      if (o !== '') marker.icon ??= o
      continue
    }
    const value = m[2]
    const color = m[1] === 'color' ? colour(value) : null
    if (color !== null) marker.color = color
    else if (m[1] === 'size' && Number(value) > 0 && Number(value) <= 50) marker.size = Number(value)
    else if (m[1] === 'scale' && Number(value) > 0 && Number(value) <= 10) marker.scale = Number(value)
    else if (m[1] === 'offset' && /^-?\d+(\.\d+)?,-?\d+(\.\d+)?$/.test(value)) marker.offset = value.split(',').map(Number)
    else throw new BadRequest(`marker option '${o}': color:COLOUR, size:1-50, scale:0-10 or offset:X,Y`)
  }
  return marker
}

/** How the overlays' points are written, by `latlng` (as tileserver-gl reads it: 1 or true): text → [lon, lat]. */
function pointReader (latlng) {
  if (latlng === undefined || latlng === '0' || latlng === 'false') return lonLat
  if (latlng === '1' || latlng === 'true') return latLon
  throw new BadRequest('latlng is 1 or true (points are lat,lon), 0 or false')
}

function lonLat (text) {
  const [lon, lat] = text.split(',').map(Number)
  if (!(Math.abs(lon) <= 180 && Math.abs(lat) <= 85.06)) throw new BadRequest(`'${text}' is not lon,lat`)
  return [lon, lat]
}

function latLon (text) {
  const [lat, lon] = text.split(',').map(Number)
  if (!(Math.abs(lon) <= 180 && Math.abs(lat) <= 85.06)) throw new BadRequest(`'${text}' is not lat,lon (latlng is given)`)
  return [lon, lat]
}

/**
 * Google's encoded polyline (precision 5), as lat/lon pairs → [lon, lat]. Written here: the one package for it
 * (@mapbox/polyline) brings 57 more for its command-line tool.
 */
export function decodePolyline (text) {
  const out = []
  let lat = 0
  let lon = 0
  for (let i = 0; i < text.length;) {
    const deltas = []
    for (let k = 0; k < 2; k++) {
      let result = 0
      let shift = 0
      let byte
      do {
        if (i >= text.length) throw new BadRequest('not an encoded polyline')
        byte = text.charCodeAt(i++) - 63
        if (byte < 0 || byte > 63) throw new BadRequest('not an encoded polyline')
        result |= (byte & 0x1f) << shift
        shift += 5
      } while (byte >= 0x20 && shift < 35)
      deltas.push(result & 1 ? ~(result >> 1) : result >> 1)
    }
    lat += deltas[0]
    lon += deltas[1]
    out.push([lon / 1e5, lat / 1e5])
  }
  for (const [x, y] of out) if (Math.abs(x) > 180 || Math.abs(y) > 85.06) throw new BadRequest('an encoded polyline off the map (lon -180..180, lat -85..85)')
  return out
}

/**
 * The style with the overlays added on top: a GeoJSON source each for paths and markers, and fill, line, circle (dots)
 * and symbol (icons) layers drawing them. `sprite` ({ url, images }, lib/style/markers.js): the sheet of the markers'
 * icons, added as the style's second sprite. `shrink` (engineRequest's): the image is drawn that many times larger and
 * scaled down, so the overlays' pixels (widths, radii, icon sizes) are drawn as many times larger to keep their size.
 * `key`: a short hash naming this combination (shrink included), so the engine can keep it.
 */
export function withOverlays (styleJson, { paths, markers }, sprite, shrink = 1) {
  // The drawn style is shared (parsed once per drawing): only its sources, layers and sprite change here, on copies.
  const style = { ...styleJson, sources: { ...styleJson.sources }, layers: [...styleJson.layers] }
  const feature = (geometry, properties) => ({ type: 'Feature', geometry, properties })
  if (paths.length > 0) {
    style.sources['tc-overlay-paths'] = {
      type: 'geojson',
      data: {
        type: 'FeatureCollection',
        features: paths.map((p) => feature(
          p.fill !== null ? { type: 'Polygon', coordinates: [[...p.coordinates, p.coordinates[0]]] } : { type: 'LineString', coordinates: p.coordinates },
          { stroke: p.stroke, width: p.width * shrink, fill: p.fill ?? 'rgba(0,0,0,0)' })),
      },
    }
    style.layers.push(
      { id: 'tc-overlay-fill', type: 'fill', source: 'tc-overlay-paths', filter: ['==', ['geometry-type'], 'Polygon'], paint: { 'fill-color': ['get', 'fill'] } },
      { id: 'tc-overlay-line', type: 'line', source: 'tc-overlay-paths', layout: { 'line-join': 'round', 'line-cap': 'round' }, paint: { 'line-color': ['get', 'stroke'], 'line-width': ['get', 'width'] } },
    )
  }
  if (markers.length > 0) {
    style.sources['tc-overlay-markers'] = {
      type: 'geojson',
      data: {
        type: 'FeatureCollection',
        features: markers.map((m) => feature({ type: 'Point', coordinates: m.coordinates }, m.icon === null
          ? { color: m.color, size: m.size * shrink }
          // icon-offset is in units of the icon's size (so it grows with shrink too); tileserver-gl's offset is in pixels
          : { icon: sprite.images.get(m.icon), scale: m.scale * shrink, offset: [m.offset[0] / m.scale, m.offset[1] / m.scale] })),
      },
    }
    style.layers.push({ id: 'tc-overlay-markers', type: 'circle', source: 'tc-overlay-markers', filter: ['!', ['has', 'icon']], paint: { 'circle-color': ['get', 'color'], 'circle-radius': ['get', 'size'], 'circle-stroke-color': '#ffffff', 'circle-stroke-width': 2 * shrink } })
    if (sprite !== undefined) {
      const sheet = { id: MARKER_SPRITE_ID, url: sprite.url }
      // One sprite becomes the `default` of two: the style's own icons keep their unprefixed names.
      style.sprite = typeof style.sprite === 'string' ? [{ id: 'default', url: style.sprite }, sheet] : [...(Array.isArray(style.sprite) ? style.sprite : []), sheet]
      style.layers.push({
        id: 'tc-overlay-icons',
        type: 'symbol',
        source: 'tc-overlay-markers',
        filter: ['has', 'icon'],
        // As tileserver-gl draws them: the icon's bottom centre on the point, every marker shown.
        layout: { 'icon-image': ['get', 'icon'], 'icon-size': ['get', 'scale'], 'icon-offset': ['get', 'offset'], 'icon-anchor': 'bottom', 'icon-allow-overlap': true, 'icon-ignore-placement': true },
      })
    }
  }
  const json = JSON.stringify(style)
  return { json, key: createHash('sha1').update(json).digest('base64url').slice(0, 16) }
}

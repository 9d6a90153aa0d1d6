// tile-cannon's viewer (lib/viewer/index.js serves it): a set drawn with an inspect style (vector) or as a raster
// with its options as controls, or a style beside the server's own rendering of it. Everything it shows comes from the
// same TileJSON and tile URLs any client uses. `window.viewer` tells tests (and the curious) what state it is in.
import * as maplibregl from './maplibre-gl.mjs'

const view = JSON.parse(document.getElementById('view').textContent)
const controls = document.getElementById('controls')
const legend = document.getElementById('legend')
const status = document.getElementById('status')
const viewer = window.viewer = { view, idle: false, errors: [] }
const sharedView = location.hash.length > 1 // a link with a view in it (#zoom/lat/lon): kept, not refitted

const el = (tag, props = {}, ...children) => {
  const node = Object.assign(document.createElement(tag), props)
  node.append(...children)
  return node
}
const say = (message) => { viewer.errors.push(message); controls.append(el('p', { className: 'error', textContent: message })) }

// A colour per layer, far from its neighbours' (hues a golden angle apart, in vector_layers' order).
const colourOf = (i) => `hsl(${Math.round(i * 137.508) % 360}, 70%, 45%)`

/** The x, y of the tile of zoom z holding lon/lat (Web Mercator, latitudes beyond its ±85.05° on the edge rows). */
function tileAt (lon, lat, z) {
  const n = 2 ** z
  const r = Math.max(-85.0511, Math.min(85.0511, lat)) * Math.PI / 180
  const x = Math.floor((lon + 180) / 360 * n)
  const y = Math.floor((1 - Math.log(Math.tan(r) + 1 / Math.cos(r)) / Math.PI) / 2 * n)
  return [Math.min(n - 1, Math.max(0, x)), Math.min(n - 1, Math.max(0, y))]
}

/**
 * Zoom, cursor position and the tile under it, in the status line: the tile MapLibre asks for there, in the set's own
 * tile size (raster sources round the zoom, vector sources floor it).
 */
function showStatus (map, tileSize, zooms, raster = false) {
  let lngLat = null
  const render = () => {
    const z = map.getZoom()
    let text = `zoom ${z.toFixed(2)}`
    if (lngLat !== null) {
      const { lng, lat } = lngLat.wrap()
      // MapLibre's zoom counts 512 px tiles; a 256 px tile set is one level deeper.
      const deeper = z + Math.log2(512 / tileSize)
      let tz = raster ? Math.round(deeper) : Math.floor(deeper)
      if (zooms) tz = Math.max(zooms[0], Math.min(zooms[1], tz))
      const [x, y] = tileAt(lng, lat, tz)
      text += ` · ${lng.toFixed(5)}, ${lat.toFixed(5)} · tile ${tz}/${x}/${y}`
    }
    status.textContent = text
  }
  map.on('mousemove', (e) => { lngLat = e.lngLat; render() })
  map.on('zoom', render)
  render()
}

function newMap (container, style, extra = {}) {
  const map = new maplibregl.Map({ container, style, hash: extra.hash ?? false, attributionControl: { compact: true }, ...extra })
  map.addControl(new maplibregl.NavigationControl(), 'top-right')
  map.on('error', (e) => { viewer.errors.push(e.error?.message ?? String(e.error)) })
  return map
}

/**
 * Fit the map to TileJSON bounds unless the URL's hash already says where to look. Never further out than the set's
 * minzoom (in MapLibre's zoom, which counts 512 px tiles: one less for 256 px ones): MapLibre asks no tile of a source
 * below it, and a set of z13 only, fitted to its bounds at z11, was a blank map. There the view is the TileJSON's
 * center (on the data), else the bounds' middle, at that zoom.
 */
function fit (map, tj, tileSize = 512) {
  if (sharedView) return
  const b = tj.bounds
  const least = Math.max(0, (tj.minzoom ?? 0) - Math.log2(512 / tileSize))
  // Clear of the panel where the window is wide enough to have it beside the data.
  const panel = document.getElementById('panel').offsetWidth
  const padding = { top: 20, bottom: 30, left: window.innerWidth > 2.5 * panel ? panel + 30 : 20, right: 20 }
  const bounded = Array.isArray(b) && b[2] - b[0] < 359
  if (bounded) map.fitBounds([[b[0], b[1]], [b[2], b[3]]], { padding, animate: false, maxZoom: tj.maxzoom })
  else if (Array.isArray(tj.center)) map.jumpTo({ center: [tj.center[0], tj.center[1]], zoom: Math.max(least, tj.center[2] - 1) })
  if (map.getZoom() >= least) return
  const center = Array.isArray(tj.center) ? [tj.center[0], tj.center[1]] : bounded ? [(b[0] + b[2]) / 2, (b[1] + b[3]) / 2] : map.getCenter()
  map.jumpTo({ center, zoom: least })
  // In the middle of what the panel leaves in view, as fitBounds puts the bounds.
  if (bounded) map.panBy([(padding.right - padding.left) / 2, (padding.bottom - padding.top) / 2], { animate: false })
}

/**
 * The set going away while the page is open (its file removed, its database down): its tiles answer 404 or 503, which
 * MapLibre draws as nothing (a vector tile's 404 is no error to it), a blank map. So as the map moves (at most every
 * 5 s) and after its errors (every second), the TileJSON is asked again (a 304 while nothing changed); a failure is
 * said in the panel, and the note goes once it answers again.
 */
function watchSet (map) {
  const note = el('p', { className: 'error', hidden: true })
  controls.prepend(note)
  let last = Date.now() // (the TileJSON was just read)
  const ask = async (gap) => {
    if (Date.now() - last < gap) return
    last = Date.now()
    let problem = null
    try {
      const res = await fetch(view.tilejson, { cache: 'no-cache' })
      if (!res.ok) problem = `${res.status}: ${(await res.json().catch(() => null))?.message ?? res.statusText}`
    } catch { problem = 'the server does not answer' }
    note.hidden = problem === null
    note.textContent = problem === null ? '' : `this set cannot be shown now (${problem}); its tiles fail`
    if (problem !== null) viewer.errors.push(note.textContent)
  }
  map.on('moveend', () => ask(5000))
  map.on('error', () => ask(1000)) // (a sparse raster's absent tiles are errors too: not a request each)
}

function watchIdle (map) {
  map.once('idle', () => { viewer.idle = true })
}

// Vector sets: every layer of vector_layers in its own colour, as fills, lines and points; a legend to hide layers;
// a popup of the properties of what is clicked.
function vectorStyle (tj) {
  const layers = [{ id: 'background', type: 'background', paint: { 'background-color': '#f4f4f0' } }]
  const byLayer = new Map()
  for (const [i, { id }] of (tj.vector_layers ?? []).entries()) {
    const colour = colourOf(i)
    const ids = [`${id} fill`, `${id} line`, `${id} point`]
    byLayer.set(id, { colour, ids })
    const common = { source: 'set', 'source-layer': id }
    layers.push(
      { ...common, id: ids[0], type: 'fill', filter: ['match', ['geometry-type'], ['Polygon', 'MultiPolygon'], true, false], paint: { 'fill-color': colour, 'fill-opacity': 0.25 } },
      { ...common, id: ids[1], type: 'line', filter: ['match', ['geometry-type'], ['Point', 'MultiPoint'], false, true], paint: { 'line-color': colour, 'line-width': 1.5 } },
      { ...common, id: ids[2], type: 'circle', filter: ['match', ['geometry-type'], ['Point', 'MultiPoint'], true, false], paint: { 'circle-color': colour, 'circle-radius': 4, 'circle-stroke-color': '#fff', 'circle-stroke-width': 1 } },
    )
  }
  const source = { type: 'vector', url: view.tilejson }
  if (view.format === 'mlt') source.encoding = 'mlt'
  return { style: { version: 8, sources: { set: source }, layers }, byLayer }
}

function escapeHtml (s) {
  return String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)
}

// An MVT set's tiles as they are or made into MLT by the server (`?encoding=mlt`): a link to the other, same view.
function encodingSwitch () {
  const mlt = view.format === 'mlt'
  const other = el('a', { href: mlt ? view.encodings.mvt : view.encodings.mlt, textContent: mlt ? 'MVT (stored)' : 'MLT (made by the server)' })
  other.addEventListener('click', () => { other.href += location.hash })
  controls.append(el('p', { className: 'control' }, `tiles: ${mlt ? 'MLT' : 'MVT'} · show `, other))
}

function showVector (tj) {
  const { style, byLayer } = vectorStyle(tj)
  const map = viewer.map = newMap('map', style, { hash: true })
  fit(map, tj)
  watchIdle(map)
  watchSet(map)
  showStatus(map, 512, [tj.minzoom, tj.maxzoom])
  if (view.encodings) encodingSwitch()
  if (byLayer.size === 0) say('this set lists no vector_layers in its TileJSON: there is nothing to draw by layer')
  legend.append(el('h2', { textContent: 'layers' }))
  for (const [name, { colour, ids }] of byLayer) {
    const box = el('input', { type: 'checkbox', checked: true })
    box.addEventListener('change', () => { for (const id of ids) map.setLayoutProperty(id, 'visibility', box.checked ? 'visible' : 'none') })
    const swatch = el('span', { className: 'swatch' })
    swatch.style.background = colour
    legend.append(el('label', { className: 'layer' }, box, swatch, name))
  }
  const drawn = [...byLayer.values()].flatMap((l) => l.ids)
  const popup = new maplibregl.Popup({ maxWidth: '360px' })
  map.on('click', (e) => {
    const box = [[e.point.x - 4, e.point.y - 4], [e.point.x + 4, e.point.y + 4]]
    const features = map.queryRenderedFeatures(box, { layers: drawn }).slice(0, 5)
    if (features.length === 0) { popup.remove(); return }
    const html = features.map((f) => {
      const rows = Object.entries(f.properties).map(([k, v]) => `<tr><th>${escapeHtml(k)}</th><td>${escapeHtml(v)}</td></tr>`).join('')
      return `<h3>${escapeHtml(f.sourceLayer)}${f.id !== undefined ? ` #${escapeHtml(f.id)}` : ''}</h3><table>${rows || '<tr><td>no properties</td></tr>'}</table>`
    }).join('')
    popup.setLngLat(e.lngLat).setHTML(`<div class="properties">${html}</div>`).addTo(map)
  })
  map.on('mousemove', (e) => {
    const box = [[e.point.x - 4, e.point.y - 4], [e.point.x + 4, e.point.y + 4]]
    map.getCanvas().style.cursor = map.queryRenderedFeatures(box, { layers: drawn }).length ? 'pointer' : ''
  })
}

// Raster sets: the tiles with an opacity slider; the options the set takes (a COG's bands, rescale, colormap, terrain
// encodings, resampling) as controls that rewrite the tile URL. A terrain encoding is drawn as a hillshade.
function showRaster (tj) {
  const tileSize = tj.tileSize ?? 256
  const [tiles] = tj.tiles
  const map = viewer.map = newMap('map', { version: 8, sources: {}, layers: [{ id: 'background', type: 'background', paint: { 'background-color': '#f4f4f0' } }] }, { hash: true })
  fit(map, tj, tileSize)
  watchSet(map)
  showStatus(map, tileSize, [tj.minzoom, tj.maxzoom], true)
  let opacity = 1
  const values = {}
  const demOption = view.options.find((o) => o.dem)
  const note = el('p', { className: 'note' })

  const urlOf = () => {
    const query = new URLSearchParams(Object.entries(values).filter(([, v]) => v !== ''))
    // The TileJSON's URL may have a query already (an API key, options): the controls' options are added to it.
    return query.size ? `${tiles}${tiles.includes('?') ? '&' : '?'}${query}` : tiles
  }
  // The bounds of the set's source: a set across the antimeridian (its extent west above east) is two sources, one
  // each side. Given TileJSON's bounds, the world's width, MapLibre asked for every tile along the set's latitudes,
  // and those outside the raster answer 404 (a raster's absent tile): an error in the console for each.
  const e = view.extent
  const parts = Array.isArray(e) && e[0] > e[2] ? [[e[0], e[1], 180, e[3]], [-180, e[1], e[2], e[3]]] : [Array.isArray(tj.bounds) ? tj.bounds : undefined]
  const ids = parts.map((_, i) => (i === 0 ? 'set' : `set-${i + 1}`))
  const draw = () => {
    for (const id of ids) {
      if (map.getLayer(id)) map.removeLayer(id)
      if (map.getSource(id)) map.removeSource(id)
    }
    const url = urlOf()
    const dem = demOption !== undefined && values[demOption.name]
    for (const [i, id] of ids.entries()) {
      const source = { tiles: [url], tileSize, minzoom: tj.minzoom, maxzoom: tj.maxzoom, bounds: parts[i] }
      if (dem) {
        map.addSource(id, { ...source, type: 'raster-dem', encoding: values[demOption.name] })
        map.addLayer({ id, type: 'hillshade', source: id })
      } else {
        map.addSource(id, { ...source, type: 'raster' })
        map.addLayer({ id, type: 'raster', source: id, paint: { 'raster-opacity': opacity } })
      }
    }
    if (Object.values(values).some((v) => v !== '')) check(url)
    viewer.idle = false
    map.once('idle', () => { viewer.idle = true })
  }
  // A bad combination of options (colormap on 3 bands…) answers 400: shown here rather than as a blank map.
  const check = async (url) => {
    const [lon, lat, z] = Array.isArray(tj.center) ? tj.center : [0, 0, tj.minzoom]
    const [x, y] = tileAt(lon, lat, z)
    try {
      const res = await fetch(url.replace('{z}', z).replace('{x}', x).replace('{y}', y))
      const message = res.status === 400 ? (await res.json()).message : ''
      if (url === urlOf()) note.textContent = message // an answer to options since changed says nothing
    } catch {}
  }

  const slider = el('input', { type: 'range', min: 0, max: 1, step: 0.05, value: 1 })
  slider.addEventListener('input', () => {
    opacity = Number(slider.value)
    for (const id of ids) if (map.getLayer(id)?.type === 'raster') map.setPaintProperty(id, 'raster-opacity', opacity)
  })
  controls.append(el('label', { className: 'control' }, 'opacity ', slider))
  for (const option of view.options) {
    let input
    if (option.type === 'choice') {
      input = el('select', { name: option.name }, el('option', { value: '', textContent: option.default ? `default (${option.default})` : 'none' }),
        ...option.values.map((v) => el('option', { value: v, textContent: v })))
    } else if (option.type === 'bands') {
      const choices = Array.from({ length: option.count }, (_, i) => String(i + 1))
      if (option.count >= 3) choices.push('1,2,3')
      input = el('select', { name: option.name }, el('option', { value: '', textContent: `default (${option.default})` }),
        ...choices.filter((c) => c !== option.default).map((v) => el('option', { value: v, textContent: v })))
    } else {
      input = el('input', { name: option.name, type: 'text', placeholder: option.default ?? option.example ?? 'min,max', size: 14 })
    }
    input.addEventListener('change', () => { values[option.name] = input.value; draw() })
    controls.append(el('label', { className: 'control' }, `${option.name} `, input))
  }
  controls.append(note)
  map.on('load', draw)
}

// Styles: the style as MapLibre GL JS draws it, and a toggle to put the server's rendering of it (MapLibre Native,
// its raster TileJSON) beside it, both maps moving together.
function showStyle () {
  const map = viewer.map = newMap('map', view.style, { hash: true })
  if (view.fit !== null) fit(map, { bounds: view.fit, maxzoom: 18 })
  watchIdle(map)
  showStatus(map, 512)
  if (view.rendered === null) {
    controls.append(el('p', { className: 'note', textContent: `server-rendered tiles: ${view.renderedWhyNot}` }))
    return
  }
  const box = el('input', { type: 'checkbox', name: 'compare' })
  controls.append(el('label', { className: 'control' }, box, ' beside the server-rendered tiles'))
  let other = null
  box.addEventListener('change', () => {
    document.body.classList.toggle('compare', box.checked)
    if (box.checked && other === null) {
      const pane = el('div', { id: 'rendered' })
      document.getElementById('maps').append(pane)
      other = viewer.rendered = newMap(pane, {
        version: 8,
        sources: { rendered: { type: 'raster', url: view.rendered, tileSize: 256 } },
        layers: [{ id: 'rendered', type: 'raster', source: 'rendered' }],
      }, { center: map.getCenter(), zoom: map.getZoom(), bearing: map.getBearing(), pitch: map.getPitch() })
      // Each map follows the other; `moving` stops the echo.
      let moving = false
      const follow = (from, to) => from.on('move', () => {
        if (moving) return
        moving = true
        to.jumpTo({ center: from.getCenter(), zoom: from.getZoom(), bearing: from.getBearing(), pitch: from.getPitch() })
        moving = false
      })
      follow(map, other)
      follow(other, map)
      viewer.renderedIdle = false
      other.once('idle', () => { viewer.renderedIdle = true })
    }
    map.resize()
    other?.resize()
  })
}

async function main () {
  if (view.type === 'style') return showStyle()
  const res = await fetch(view.tilejson)
  if (!res.ok) return say(`TileJSON: ${res.status}`)
  const tj = await res.json()
  viewer.tilejson = tj
  return view.type === 'vector' ? showVector(tj) : showRaster(tj)
}

main().catch((err) => say(err.message))

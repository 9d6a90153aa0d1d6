// The HTML of the API, for browsers (Accept: text/html, or f=html): each document's links and content, and for
// features a page that fetches the same URL as GeoJSON and shows it on a MapLibre map (the viewer's copy, served by
// lib/viewer; none with --no-viewer) above a table of the properties.
import { escapeHtml as escape } from '../../routes/http.js'

const scriptJson = (value) => JSON.stringify(value).replace(/</g, '\\u003c')
// The page itself never scrolls sideways (a phone's 375 px too): a table scrolls in its own box (.scroll), a long
// value wraps within its cell, a long name or link anywhere.
const STYLE = 'body{font:14px/1.4 system-ui,sans-serif;margin:1em;color:#222;overflow-wrap:anywhere}a{color:#06c}table{border-collapse:collapse}' +
  'td,th{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top;overflow-wrap:break-word}th{white-space:nowrap}td{max-width:30em}' +
  '.scroll{overflow-x:auto;max-width:100%}pre{background:#f6f6f6;padding:1em;overflow:auto}' +
  '#map{height:60vh;margin:1em 0;border:1px solid #ccc}@media (min-width:700px){body{margin:1em 2em}}'

function page (title, body, head = '') {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escape(title)} · tile-cannon</title><link rel="icon" href="data:,"><style>${STYLE}</style>${head}</head>
<body><h1>${escape(title)}</h1>${body}</body></html>`
}

const linkList = (links) => `<ul>${links.filter((l) => l.type !== 'text/html' || l.rel !== 'alternate')
  .map((l) => `<li><a href="${escape(l.href)}">${escape(l.title ?? l.rel)}</a> <small>(${escape(l.rel)}, ${escape(l.type ?? '')})</small></li>`).join('')}</ul>`

/** A JSON document as a page: its description, links, collections when it lists them, and the rest as JSON. */
export function documentPage (title, doc) {
  const { links = [], collections, description, ...rest } = doc
  let body = description ? `<p>${escape(description)}</p>` : ''
  body += linkList(links)
  if (Array.isArray(collections)) {
    body += `<div class="scroll"><table><tr><th>collection</th><th>title</th><th>features</th></tr>${collections.map((c) => {
      const href = (rel, type) => c.links.find((l) => l.rel === rel && l.type === type)?.href ?? ''
      return `<tr><td><a href="${escape(href('self', 'application/json').replace('f=json', 'f=html'))}">${escape(c.id)}</a></td><td>${escape(c.title ?? '')}</td>` +
        `<td><a href="${escape(href('items', 'text/html'))}">map</a></td></tr>`
    }).join('')}</table></div>`
  } else if (Object.keys(rest).length > 0) {
    body += `<pre>${escape(JSON.stringify(rest, null, 2))}</pre>`
  }
  return page(title, body)
}

/**
 * The API definition (OpenAPI 3.0) as a page (/req/oas30/oas-definition-1 asks for one in HTML): each path, its
 * operations and their parameters (references to components resolved), and a link to the JSON (`jsonHref`).
 */
export function apiPage (api, jsonHref) {
  const parameterOf = (p) => (p.$ref === undefined ? p : api.components.parameters[p.$ref.split('/').pop()])
  const schemaText = (schema = {}) => schema.enum ? `one of ${schema.enum.join(', ')}` : [schema.type, schema.format, schema.items?.type && `of ${schema.items.type}`].filter(Boolean).join(' ')
  let body = `<p>${escape(api.info.description ?? '')}</p><p>OpenAPI ${escape(api.openapi)} · server ${escape(api.servers[0]?.url ?? '')} · ` +
    `<a href="${escape(jsonHref)}">this definition as JSON</a></p>`
  for (const [path, operations] of Object.entries(api.paths)) {
    for (const [method, op] of Object.entries(operations)) {
      body += `<h2>${escape(method.toUpperCase())} ${escape(path)}</h2><p>${escape(op.summary ?? '')}</p>`
      const parameters = (op.parameters ?? []).map(parameterOf).filter(Boolean)
      if (parameters.length > 0) {
        body += `<div class="scroll"><table><tr><th>parameter</th><th>in</th><th>required</th><th>type</th><th>description</th></tr>${parameters.map((p) =>
          `<tr><td>${escape(p.name)}</td><td>${escape(p.in)}</td><td>${p.required ? 'yes' : 'no'}</td><td>${escape(schemaText(p.schema))}</td><td>${escape(p.description ?? '')}</td></tr>`).join('')}</table></div>`
      }
      body += `<p>answers: ${Object.entries(op.responses ?? {}).map(([status, r]) => `${escape(status)} ${escape(r.description ?? r.$ref?.split('/').pop() ?? '')}`).join('; ')}</p>`
    }
  }
  return page(api.info.title, body)
}

// The features page's script: the same query as GeoJSON (in the page, or fetched), drawn and listed; next/prev from
// the answer's links. Integers past 2^53 (int8 keys and values) are kept as written, where the browser lets a
// reviver see a number's text: JSON.parse would round them, and the table would show another feature's id.
const FEATURES_SCRIPT = `
const view = JSON.parse(document.getElementById('view').textContent)
const maplibregl = view.assets === null ? null : await import(view.assets + '/maplibre-gl.mjs').catch(() => null)
const status = document.getElementById('status')
const exact = (key, value, context) => typeof value === 'number' && !Number.isSafeInteger(value) && /^-?\\d+$/.test(context?.source ?? '') ? context.source : value
const parse = (text) => JSON.parse(text, exact)
const inline = document.getElementById('features')
const fc = inline !== null
  ? parse(inline.textContent)
  : await fetch(view.json, { headers: { accept: 'application/geo+json' } }).then(async (r) => { const body = parse(await r.text()); if (!r.ok) throw new Error(body.message); return body }).catch((err) => { status.textContent = err.message; return null })
if (fc !== null) {
  const features = fc.type === 'Feature' ? [fc] : fc.features
  status.textContent = fc.type === 'Feature' ? '' : \`\${fc.numberReturned} features\${fc.numberMatched === undefined ? '' : ' of ' + fc.numberMatched}\`
  const nav = document.getElementById('nav')
  for (const l of fc.links ?? []) if (['next', 'prev', 'collection'].includes(l.rel)) {
    const a = document.createElement('a')
    a.href = l.rel === 'collection' ? l.href : l.href.replace(/([?&])f=[^&]*/, '$1f=html')
    a.textContent = l.rel
    nav.append(a, ' ')
  }
  const keys = [...new Set(features.flatMap((f) => Object.keys(f.properties ?? {})))]
  const table = document.getElementById('table')
  const row = (cells, tag) => { const tr = table.insertRow(); for (const c of cells) { const td = document.createElement(tag); td.textContent = c === null || typeof c !== 'object' ? String(c ?? '') : JSON.stringify(c); tr.append(td) } }
  row(['id', ...keys], 'th')
  for (const f of features) row([f.id ?? '', ...keys.map((k) => f.properties?.[k])], 'td')
  if (maplibregl !== null && features.length > 0) {
    // The box of every position, by a loop: Math.min(...xs) over a large page (700 lines of 200 vertices) threw
    // "Maximum call stack size exceeded", and the map was neither drawn nor fitted.
    let w = Infinity, s = Infinity, e = -Infinity, n = -Infinity
    const walk = (c) => { if (typeof c[0] === 'number') { w = Math.min(w, c[0]); s = Math.min(s, c[1]); e = Math.max(e, c[0]); n = Math.max(n, c[1]) } else c.forEach(walk) }
    for (const f of features) if (f.geometry) walk(f.geometry.type === 'GeometryCollection' ? f.geometry.geometries.map((g) => g.coordinates) : f.geometry.coordinates)
    const map = new maplibregl.Map({ container: 'map', style: { version: 8, sources: { f: { type: 'geojson', data: { type: 'FeatureCollection', features } } }, layers: [
      { id: 'fill', type: 'fill', source: 'f', filter: ['==', ['geometry-type'], 'Polygon'], paint: { 'fill-color': '#06c', 'fill-opacity': 0.3 } },
      { id: 'line', type: 'line', source: 'f', paint: { 'line-color': '#06c', 'line-width': 2 } },
      { id: 'point', type: 'circle', source: 'f', filter: ['==', ['geometry-type'], 'Point'], paint: { 'circle-color': '#06c', 'circle-radius': 4 } }] } })
    if (w <= e) map.fitBounds([[w, s], [e, n]], { padding: 30, maxZoom: 16, duration: 0 })
    window.featuresMap = map // (for tests)
  }
}`

/**
 * A page of features (or one feature): `json` is the URL of the same answer as GeoJSON (without crs: the map is
 * CRS84), `assets` the viewer's asset URL base (MapLibre GL JS), or null for a table only; `inline`, that answer's
 * text when the page carries it (else the page fetches it).
 */
export function featuresPage (title, json, assets, inline = null) {
  const head = assets === null ? '' : `<link rel="stylesheet" href="${escape(assets)}/maplibre-gl.css">`
  // In JSON a `<` is only ever inside a string, where \u003c says the same: no `</script>` can end the data early.
  const data = inline === null ? '' : `<script type="application/json" id="features">${inline.replace(/</g, '\\u003c')}</script>`
  const body = `<p id="nav"></p><p id="status">loading…</p>${assets === null ? '' : '<div id="map"></div>'}<div class="scroll"><table id="table"></table></div>${data}
<script type="application/json" id="view">${scriptJson({ json, assets })}</script>
<script type="module">${FEATURES_SCRIPT}</script>`
  return page(title, body, head)
}

// GET / — what this server serves, for people: every set and style with a small preview and its links (TileJSON,
// meta, the viewer), the sets and styles that cannot be served with the reason, the version and the cache's figures.
// Plain HTML and a little CSS; previews are images the server makes anyway (a raster set's tile, a style rendered),
// a vector set's bounds drawn on a graticule.
import { readFileSync } from 'node:fs'
import { GET_HEAD, escapeHtml as escape } from './http.js'
import { keyed, tileJsonUrl, tileUrl } from '../lib/urls.js'
import { lonLatToTile } from '../lib/tilemath.js'
import { isDrawable, isVector } from '../lib/tiletype.js'
import { setsOf } from '../lib/style/rewrite.js'

const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'))
const round = (n) => Math.round(n * 1000) / 1000
const mib = (bytes) => `${(bytes / 2 ** 20).toFixed(1)} MiB`
const PREVIEW = { width: 240, height: 150 }

/** A set's bounds as a rectangle on a lon/lat graticule (an SVG, no request). */
function boundsPreview (bounds) {
  const { width: w, height: h } = PREVIEW
  const [west, south, east, north] = Array.isArray(bounds) ? bounds : [-180, -85, 180, 85]
  const px = (lon) => ((lon + 180) / 360) * w
  const py = (lat) => ((90 - lat) / 180) * h
  const lines = []
  for (let lon = -150; lon < 180; lon += 30) lines.push(`M${px(lon).toFixed(1)} 0V${h}`)
  for (let lat = -60; lat < 90; lat += 30) lines.push(`M0 ${py(lat).toFixed(1)}H${w}`)
  // At least 4 px, so a city's bounds still show where it is.
  const x = Math.min(px(west), px(east) - 4)
  const y = Math.min(py(north), py(south) - 4)
  return `<svg class="preview" viewBox="0 0 ${w} ${h}" role="img" aria-label="bounds ${escape(bounds?.join(', ') ?? 'unknown')}">` +
    `<rect width="${w}" height="${h}" fill="#dde8f0"/><path d="${lines.join('')}" stroke="#fff" stroke-width="1"/>` +
    `<rect x="${x.toFixed(1)}" y="${y.toFixed(1)}" width="${Math.max(4, px(east) - px(west)).toFixed(1)}" height="${Math.max(4, py(south) - py(north)).toFixed(1)}" fill="rgba(214,39,40,.35)" stroke="#d62728"/></svg>`
}

/**
 * A raster set's tile at its lowest zoom, where its centre is; a sparse set may lack that tile, and then the image
 * gives way to the bounds preview (kept in a template beside it) rather than showing a broken image.
 */
function tilePreview (href, entry) {
  const tj = entry.source.tilejson
  const [lon, lat] = Array.isArray(tj.center) ? tj.center : [0, 0]
  const z = tj.minzoom
  const [x, y] = lonLatToTile(lon, lat, z)
  const path = tileUrl('', entry).replace('{z}', z).replace('{x}', x).replace('{y}', y)
  return `<img class="preview" loading="lazy" alt="tile ${z}/${x}/${y}" src="${href(path)}" onerror="this.replaceWith(this.nextElementSibling.content.cloneNode(true))">` +
    `<template>${boundsPreview(tj.bounds)}</template>`
}

export default async function indexRoutes (app) {
  const { catalog, styles, renderer, tileCache, links, config } = app
  const viewer = config.viewer !== false

  /** Where a style looks first: its own centre and zoom, else its first set's, else the world. */
  function styleView (style) {
    const { center, zoom } = style.json
    if (Array.isArray(center) && Number.isFinite(center[0]) && Number.isFinite(center[1]) && Number.isFinite(zoom)) return [center[0], center[1], zoom + 1] // GL zoom → 256 px zoom
    const first = setsOf(style, (name) => catalog.get(name)).map((e) => e.source.tilejson.center).find(Array.isArray)
    if (first !== undefined) return first
    return [0, 0, 1]
  }

  const setCard = (href, entry) => {
    const { id, kind, source } = entry
    const tj = source.tilejson
    const sid = encodeURIComponent(id)
    const drawable = isDrawable(source.format)
    const link = viewer && drawable // a set of JSON tiles has no map to show
    const title = link ? `<a href="${href(`/viewer/${sid}`)}">${escape(id)}</a>` : escape(id)
    const preview = drawable && !isVector(source.format) ? tilePreview(href, entry) : boundsPreview(tj.bounds)
    return `<li class="card">${link ? `<a href="${href(`/viewer/${sid}`)}" tabindex="-1">${preview}</a>` : preview}
<h3>${title}</h3><p>${escape(kind)} · ${escape(source.format ?? '?')} · z${tj.minzoom}–${tj.maxzoom}</p>
<p class="bounds">${Array.isArray(tj.bounds) ? tj.bounds.map(round).join(', ') : 'no bounds'}</p>
<p><a href="${href(tileJsonUrl('', id))}">TileJSON</a> · <a href="${href(`/${sid}/meta`)}">meta</a>${link ? ` · <a href="${href(`/viewer/${sid}`)}">view</a>` : ''}</p></li>`
  }

  const styleCard = (href, style) => {
    const sid = encodeURIComponent(style.id)
    const [lon, lat, zoom] = styleView(style)
    // A view the static route takes, whatever the style says: latitude within Web Mercator's, longitude wrapped.
    const view = [((lon + 540) % 360) - 180, Math.max(-85, Math.min(85, lat)), Math.max(0, Math.min(22, zoom))].map(round)
    const preview = renderer.available
      ? `<img class="preview" loading="lazy" alt="${escape(style.name)}" src="${href(`/styles/${sid}/static/${view.join(',')}/${PREVIEW.width}x${PREVIEW.height}.png`)}">`
      : `<div class="preview none">${escape(style.name)}</div>`
    return `<li class="card">${viewer ? `<a href="${href(`/viewer/styles/${sid}`)}" tabindex="-1">${preview}</a>` : preview}
<h3>${viewer ? `<a href="${href(`/viewer/styles/${sid}`)}">${escape(style.name)}</a>` : escape(style.name)}</h3><p>style ${escape(style.id)}</p>
<p><a href="${href(`/styles/${sid}/style.json`)}">style.json</a>${renderer.available ? ` · <a href="${href(`/styles/${sid}.json`)}">raster TileJSON</a>` : ''}${viewer ? ` · <a href="${href(`/viewer/styles/${sid}`)}">view</a>` : ''}</p></li>`
  }

  app.route({
    method: GET_HEAD,
    url: '/',
    onSend: app.metadataValidators,
    handler: async (request, reply) => {
      const base = links(request, reply)
      const href = (path) => escape(keyed(request, base + path)) // each link, with the client's API key (lib/urls.js)
      const sets = catalog.available()
      const down = catalog.unavailable()
      const styleList = styles.list()
      const broken = [...styles.broken].map(([id, reason]) => ({ id, reason }))
      const cache = tileCache.stats
      const problems = [...down.map((d) => `<li>set <b>${escape(d.id)}</b>: ${escape(d.reason)}</li>`),
        ...broken.map((d) => `<li>style <b>${escape(d.id)}</b>: ${escape(d.reason)}</li>`)]
      reply.type('text/html; charset=utf-8')
      return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>tile-cannon</title><link rel="icon" href="data:,">
<style>
body{font:15px/1.45 system-ui,sans-serif;margin:0 auto;padding:1em;max-width:1200px;color:#222}
h1{margin:.2em 0}h2{margin:1.2em 0 .4em;font-size:1.2em}a{color:#0b5cad}
.cards{list-style:none;padding:0;display:grid;grid-template-columns:repeat(auto-fill,minmax(250px,1fr));gap:14px}
.card{border:1px solid #ddd;border-radius:6px;padding:5px;overflow:hidden}.card h3{margin:.3em 0 .1em;font-size:1em;word-break:break-all}.card p{margin:.1em 0;font-size:.9em;color:#444}
.preview{display:block;width:100%;aspect-ratio:${PREVIEW.width}/${PREVIEW.height};object-fit:cover;background:#eee;border-radius:4px}
.none{display:flex;align-items:center;justify-content:center;color:#777}.bounds{font-family:ui-monospace,monospace;font-size:.8em!important}
.problems li{color:#8a1f11}footer{margin-top:2em;color:#555;font-size:.9em}
</style></head><body>
<h1>tile-cannon</h1>
<p>${sets.length} set${sets.length === 1 ? '' : 's'}${styles.dir !== null ? `, ${styleList.length} style${styleList.length === 1 ? '' : 's'}` : ''}.${renderer.available ? '' : styles.dir !== null ? ` Rendering: ${escape(renderer.reason)}.` : ''}</p>
<h2>Sets</h2>${sets.length ? `<ul class="cards">${sets.map((e) => setCard(href, e)).join('\n')}</ul>` : '<p>none</p>'}
${styleList.length ? `<h2>Styles</h2><ul class="cards">${styleList.map((s) => styleCard(href, s)).join('\n')}</ul>` : ''}
${problems.length ? `<h2>Not served</h2><ul class="problems">${problems.join('')}</ul>` : ''}
<footer>tile-cannon ${escape(version)} · tile cache ${cache.entries} tiles, ${mib(cache.bytes)} of ${mib(cache.maxBytes)} ·
<a href="${href('/catalog')}">/catalog</a> · <a href="${href('/list')}">/list</a> · <a href="${href('/health')}">/health</a>${styles.dir !== null ? ` · <a href="${href('/styles.json')}">/styles.json</a> · <a href="${href('/fonts.json')}">/fonts.json</a>` : ''}</footer>
</body></html>`
    },
  })
}

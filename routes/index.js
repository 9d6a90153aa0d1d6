// GET / — a small page listing the sets with their TileJSON, so `npm start` shows what is served.
import { GET_HEAD } from './http.js'
import { tileJsonUrl } from '../lib/urls.js'

const escape = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)

export default async function indexRoutes (app) {
  const { catalog, links, metadataValidators: onSend } = app
  app.route({
    method: GET_HEAD,
    url: '/',
    onSend,
    handler: async (request, reply) => {
      const base = links(request, reply)
      const rows = catalog.available().map(({ id, kind, source }) => {
        return `<tr><td>${escape(id)}</td><td>${escape(kind)}</td><td>${escape(source.format ?? '')}</td>` +
          `<td>${source.tilejson.minzoom}–${source.tilejson.maxzoom}</td><td><a href="${escape(tileJsonUrl(base, id))}">TileJSON</a></td>` +
          `<td><a href="${escape(base)}/${encodeURIComponent(id)}/meta">meta</a></td></tr>`
      }).join('\n')
      const down = catalog.unavailable().map(({ id, reason }) => `<li>${escape(id)}: ${escape(reason)}</li>`).join('')
      reply.type('text/html; charset=utf-8')
      return `<!doctype html><meta charset="utf-8"><title>tile-cannon</title>
<style>body{font:15px system-ui,sans-serif;margin:2em}td,th{padding:.2em .8em;text-align:left}</style>
<h1>tile-cannon</h1><table><tr><th>set</th><th>kind</th><th>format</th><th>zoom</th><th></th><th></th></tr>
${rows}</table>${down ? `<h2>Unavailable</h2><ul>${down}</ul>` : ''}
<p><a href="${escape(base)}/catalog">/catalog</a> · <a href="${escape(base)}/list">/list</a> · <a href="${escape(base)}/health">/health</a></p>`
    },
  })
}

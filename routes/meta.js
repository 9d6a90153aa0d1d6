// TileJSON (/:set.json, also /:set and tileserver-gl's /data/:set.json) and raw metadata (/:set/meta). Errors (unknown or unavailable set, bad options)
// are thrown by lib/resolve.js and answered by the app's error handler.
import { resolveSet, resolveTileJson, takesQuery, tileJsonFormat } from '../lib/resolve.js'
import { keyed, tileUrl, withoutKey, withoutParam } from '../lib/urls.js'
import { GET_HEAD } from './http.js'

const schema = { params: { type: 'object', properties: { set: { type: 'string', minLength: 1, maxLength: 512 } }, required: ['set'] } }

/**
 * The query string a TileJSON request carries, passed on to tile URLs of sets that take options (as titiler does);
 * without the API key while keys are on (the link gets the one accepted, lib/urls.js `keyed`).
 */
const searchOf = (request) => {
  const i = request.url.indexOf('?')
  if (i === -1) return ''
  return request.linkKey ? withoutKey(request.url.slice(i)) : request.url.slice(i)
}

export default async function metaRoutes (app) {
  const { catalog, links, metadataValidators: onSend } = app

  // A vector set's TileJSON says which format its tiles are in (`?encoding=mlt`: MLT, made of MVT sets' tiles), as
  // `encoding` too, which MapLibre GL JS reads from TileJSON to decode them.
  const tileJson = async (request, reply) => {
    const entry = resolveTileJson(catalog, request.params.set, request.query)
    const format = tileJsonFormat(entry, request.query)
    let search = takesQuery(entry.source) ? searchOf(request) : ''
    if (format !== undefined && search !== '') search = withoutParam(search, 'encoding') // ours, not the set's
    const tiles = [keyed(request, tileUrl(links(request, reply), entry, search, format))]
    if (format === 'mlt') return { ...entry.source.tilejson, format, encoding: 'mlt', id: entry.id, tiles }
    return { ...entry.source.tilejson, id: entry.id, tiles }
  }
  app.route({ method: GET_HEAD, url: '/:set', schema, onSend, handler: tileJson })
  app.route({ method: GET_HEAD, url: '/data/:set', schema, onSend, handler: tileJson }) // tileserver-gl's /data/:set.json

  app.route({ method: GET_HEAD, url: '/:set/meta', schema, onSend, handler: async (request) => resolveSet(catalog, request.params.set).source.metadata })
}

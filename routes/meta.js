// TileJSON (/:set.json, also /:set) and raw metadata (/:set/meta).
import { badRequest, notFound, unavailable } from './errors.js'
import { GET_HEAD } from './http.js'
import { tileUrl } from '../lib/urls.js'

const schema = { params: { type: 'object', properties: { set: { type: 'string', minLength: 1, maxLength: 512 } }, required: ['set'] } }

/** The query string a TileJSON request carries, passed on to tile URLs of sets that take options (as titiler does). */
const searchOf = (request) => {
  const i = request.url.indexOf('?')
  return i === -1 ? '' : request.url.slice(i)
}

export default async function metaRoutes (app) {
  const { catalog, links, metadataValidators: onSend } = app

  function lookup (name, reply) {
    const entry = catalog.get(name)
    if (entry === undefined) return notFound(reply, `no tileset '${name}'`)
    if (entry.source === null) return unavailable(reply, entry)
    return entry
  }

  const tilejson = async (request, reply) => {
    const name = request.params.set
    const entry = lookup(name.endsWith('.json') && !catalog.get(name) ? name.slice(0, -5) : name, reply)
    if (entry === reply) return reply
    let search = ''
    if (entry.source.parseQuery !== undefined || entry.source.takesQuery) {
      try {
        entry.source.parseQuery?.(request.query)
      } catch (err) {
        return badRequest(reply, err.message)
      }
      search = searchOf(request)
    }
    return { ...entry.source.tilejson, id: entry.id, tiles: [tileUrl(links(request, reply), entry, search)] }
  }
  app.route({ method: GET_HEAD, url: '/:set', schema, onSend, handler: tilejson })

  app.route({
    method: GET_HEAD,
    url: '/:set/meta',
    schema,
    onSend,
    handler: async (request, reply) => {
      const entry = lookup(request.params.set, reply)
      if (entry === reply) return reply
      return entry.source.metadata
    },
  })
}

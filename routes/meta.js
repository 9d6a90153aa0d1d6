// TileJSON (/:set.json, also /:set) and raw metadata (/:set/meta).
import { badRequest, notFound, unavailable } from './errors.js'

const EXTENSIONS = { pbf: 'pbf', mlt: 'mlt', png: 'png', jpg: 'jpg', webp: 'webp', gif: 'gif', avif: 'avif', json: 'json' }
const HOST = /^[A-Za-z0-9.\-:[\]_]+$/
const PREFIX = /^(\/[A-Za-z0-9._~\-%]+)*\/?$/
const setParams = { type: 'object', properties: { set: { type: 'string', minLength: 1, maxLength: 512 } }, required: ['set'] }

const first = (value) => (typeof value === 'string' ? value.split(',')[0].trim() : undefined)

/** Base URL for links: the configured public URL, or what the request (and a proxy's X-Forwarded-*) says. */
export function baseUrl (request, publicUrl) {
  if (publicUrl) return publicUrl
  const proto = first(request.headers['x-forwarded-proto'])
  const host = first(request.headers['x-forwarded-host']) ?? request.headers.host
  const prefix = first(request.headers['x-forwarded-prefix']) ?? ''
  return `${proto === 'https' || proto === 'http' ? proto : request.protocol}://` +
    `${host && HOST.test(host) ? host : 'localhost'}${PREFIX.test(prefix) ? prefix.replace(/\/$/, '') : ''}`
}

export function tileUrl (base, entry, search = '') {
  const ext = EXTENSIONS[entry.source.format]
  return `${base}/${encodeURIComponent(entry.id)}/{z}/{x}/{y}${ext ? '.' + ext : ''}${search}`
}

/** The query string a TileJSON request carries, passed on to tile URLs of sets that take options (as titiler does). */
const searchOf = (request) => {
  const i = request.url.indexOf('?')
  return i === -1 ? '' : request.url.slice(i)
}

export default async function metaRoutes (app) {
  const { catalog, config } = app

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
    return { ...entry.source.tilejson, id: entry.id, tiles: [tileUrl(baseUrl(request, config.publicUrl), entry, search)] }
  }
  app.get('/:set', { schema: { params: setParams } }, tilejson)

  app.get('/:set/meta', { schema: { params: setParams } }, async (request, reply) => {
    const entry = lookup(request.params.set, reply)
    if (entry === reply) return reply
    return entry.source.metadata
  })
}

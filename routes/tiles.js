// GET/HEAD /:set/:z/:x/:y[@2x][.ext] — the hot path. For stored tiles the extension is accepted and ignored (the bytes
// decide the type); sets that render to order (rasters) take it, the scale and their query options as the request.
import { acceptMask } from '../lib/encoding.js'
import { ABSENT, etagMatches } from '../lib/tiles.js'
import { MAX_ZOOM, inGrid, parseTileY } from '../lib/tile.js'
import { unavailable, notFound, badRequest } from './errors.js'
import { GET_HEAD } from './http.js'
import { addVary } from '../lib/urls.js'

const schema = {
  params: {
    type: 'object',
    properties: {
      set: { type: 'string', minLength: 1, maxLength: 512 },
      // Digits only: a validator's coercion would let ' 3', '1e0' or '0x1' through, each a new CDN cache key.
      z: { type: 'string', pattern: '^[0-9]{1,2}$' },
      x: { type: 'string', pattern: '^[0-9]{1,10}$' },
      y: { type: 'string', pattern: '^[0-9]{1,10}(@[1-4]x)?(\\.[A-Za-z0-9]{1,8})?$' },
    },
    required: ['set', 'z', 'x', 'y'],
  },
}

const ONE = [1]

export default async function tileRoutes (app) {
  const { catalog, tiles } = app

  app.route({ method: GET_HEAD, url: '/:set/:z/:x/:y', schema, handler: async (request, reply) => {
    const { set } = request.params
    const z = Number(request.params.z)
    const x = Number(request.params.x)
    if (z > MAX_ZOOM) return badRequest(reply, `zoom ${z} is above ${MAX_ZOOM}`)
    const entry = catalog.get(set)
    if (entry === undefined) return notFound(reply, `no tileset '${set}'`)
    if (entry.source === null) return unavailable(reply, entry)
    const { source } = entry
    const { y, scale, ext } = parseTileY(request.params.y)
    if (!(source.scales ?? ONE).includes(scale)) return notFound(reply, `${entry.id} has no @${scale}x tiles`)
    if (!inGrid(z, x, y)) return badRequest(reply, `tile ${z}/${x}/${y} is outside the 2^${z} grid`)
    // Sets that make tiles to order may serve past the range they advertise (`servedZooms`, e.g. COG over/underzoom).
    const { minzoom, maxzoom } = source.servedZooms ?? source.tilejson
    if (z < minzoom || z > maxzoom) {
      reply.header('cache-control', entry.cacheControl) // as lasting as an absent tile inside the range
      return notFound(reply, `zoom ${z} is outside ${entry.id}'s range ${minzoom}-${maxzoom}`)
    }
    let rendering // what a set that renders to order (rasters) is asked for
    if (source.formats !== undefined) {
      const format = ext === '' ? source.formats[0] : source.formatAliases?.[ext.toLowerCase()] ?? ext.toLowerCase()
      if (!source.formats.includes(format)) return badRequest(reply, `.${ext} is not a format of ${entry.id} (${source.formats.join(', ')})`)
      rendering = { scale, format }
    }
    let query
    if (source.parseQuery !== undefined) {
      try {
        query = source.parseQuery(request.query, rendering)
      } catch (err) {
        return badRequest(reply, err.message)
      }
    } else if (source.takesQuery) {
      query = request.query
    }

    let record
    try {
      record = tiles.record(entry, z, x, y, query, rendering) // cached: no promise
      if (record instanceof Promise) record = await record
    } catch (err) {
      return unavailable(reply, entry, err, request.log)
    }
    if (record === ABSENT) {
      reply.header('cache-control', entry.cacheControl)
      return entry.missingStatus === 204 ? reply.code(204).send() : notFound(reply, 'no tile at these coordinates')
    }
    let variant
    try {
      variant = tiles.variant(record, acceptMask(request.headers['accept-encoding']))
      if (variant instanceof Promise) variant = await variant
    } catch (err) {
      return unavailable(reply, entry, err, request.log)
    }
    if (variant.vary) addVary(reply, 'Accept-Encoding')
    const inm = request.headers['if-none-match']
    if (inm !== undefined && etagMatches(inm, variant.etag)) {
      // A 304 carries the validators and freshness of the 200 it stands for, not its Content-Type or -Encoding.
      return reply.code(304).header('etag', variant.etag).header('cache-control', variant.headers['cache-control']).send()
    }
    reply.headers(variant.headers)
    return reply.send(variant.body)
  } })
}

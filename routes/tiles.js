// GET/HEAD /:set/:z/:x/:y[@2x][.ext] — the hot path: resolve (lib/resolve.js) → pipeline (lib/pipeline.js) → answer.
// For stored tiles the extension is accepted and ignored (the bytes decide the type); sets that render to order
// (rasters) take it, the scale and their query options as the request. Errors are thrown as their type (lib/errors.js)
// and answered by the app's error handler.
import { acceptMask } from '../lib/encoding.js'
import { NotFound, sendError } from '../lib/errors.js'
import { resolveTile } from '../lib/resolve.js'
import { ABSENT, etagMatches } from '../lib/pipeline.js'
import { addVary } from '../lib/urls.js'
import { GET_HEAD } from './http.js'

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

const NO_TILE = new NotFound('no tile at these coordinates') // answered, not thrown: the hot 404 of sparse sets

export default async function tileRoutes (app) {
  const { catalog, pipeline } = app

  app.route({ method: GET_HEAD, url: '/:set/:z/:x/:y', schema, handler: async (request, reply) => {
    const tile = resolveTile(catalog, request.params, request.query)
    const { entry } = tile
    let record = pipeline.record(entry, tile.z, tile.x, tile.y, tile.query, tile.rendering)
    if (record instanceof Promise) record = await record // cached: no promise, no await
    if (record === ABSENT) {
      reply.header('cache-control', entry.cacheControl)
      return entry.missingStatus === 204 ? reply.code(204).send() : sendError(reply, NO_TILE)
    }
    let answer = pipeline.encoded(record, acceptMask(request.headers['accept-encoding']), entry)
    if (answer instanceof Promise) answer = await answer
    if (answer.vary) addVary(reply, 'Accept-Encoding')
    const inm = request.headers['if-none-match']
    if (inm !== undefined && etagMatches(inm, answer.etag)) {
      // A 304 carries the validators and freshness of the 200 it stands for, not its Content-Type or -Encoding.
      return reply.code(304).header('etag', answer.etag).header('cache-control', answer.headers['cache-control']).send()
    }
    reply.headers(answer.headers)
    return reply.send(answer.body)
  } })
}

// GET/HEAD /:set/:z/:x/:y[@2x][.ext] — the hot path: resolve (lib/resolve.js) → pipeline (lib/pipeline.js) → answer.
// For stored tiles the extension is accepted and ignored (the bytes decide the type); sets that render to order
// (rasters) take it, the scale and their query options as the request. Errors are thrown as their type (lib/errors.js)
// and answered by the app's error handler.
import { resolveTile } from '../lib/resolve.js'
import { GET_HEAD } from './http.js'
import { tileAnswerer } from './tile-answer.js'

// No params schema: resolveTile checks every character of z, x and y itself (digits only: a validator's coercion would
// let ' 3', '1e0' or '0x1' through, each a new CDN cache key), and the router caps a parameter at 512 characters.
// Fastify's compiled validator cost ~1 % of a warm tile's CPU for checks made twice.

export default async function tileRoutes (app) {
  const { catalog, pipeline } = app
  const answerRecord = tileAnswerer(pipeline)

  // Not an async function: a cached tile is answered without a promise or a microtask (~2 % of a warm tile's CPU).
  // Errors thrown here, or rejected by the promises returned, are answered by the app's error handler.
  function handler (request, reply) {
    const tile = resolveTile(catalog, request.params, request.query)
    const record = pipeline.record(tile.entry, tile.z, tile.x, tile.y, tile.query, tile.rendering)
    if (record instanceof Promise) return record.then((loaded) => answerRecord(request, reply, tile.entry, loaded))
    return answerRecord(request, reply, tile.entry, record)
  }
  app.route({ method: GET_HEAD, url: '/:set/:z/:x/:y', handler })
  app.route({ method: GET_HEAD, url: '/data/:set/:z/:x/:y', handler }) // tileserver-gl's form, for clients written against it
}

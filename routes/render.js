// Rendered raster tiles of a style (MapLibre Native, lib/style/render): /styles/:id/:z/:x/:y[@2x|@3x].png|jpg|webp in
// 256 px, /styles/:id/512/:z/:x/:y… in 512 px, and their TileJSON at /styles/:id.json. Through the pipeline: cached,
// ETag, 304, encodings, as any set's tiles; 503 with the reason when no engine runs.
import { NotFound, Unavailable } from '../lib/errors.js'
import { resolveTile } from '../lib/resolve.js'
import { GET_HEAD } from './http.js'
import { tileAnswerer } from './tile-answer.js'

export default async function renderRoutes (app) {
  const { styles, renderer, pipeline, links, metadataValidators: onSend } = app
  const answerRecord = tileAnswerer(pipeline)

  const styleOf = (id) => {
    const style = styles.get(id)
    if (style === undefined) throw new NotFound(`no style '${id}'`)
    if (!renderer.available) throw new Unavailable(`style '${id}' cannot be rendered: ${renderer.reason}`)
    return style
  }

  const tileHandler = (size) => function handler (request, reply) {
    const style = styleOf(request.params.id)
    const entry = renderer.tileEntry(style, size)
    const tile = resolveTile({ get: () => entry }, { set: style.id, z: request.params.z, x: request.params.x, y: request.params.y }, request.query)
    const record = pipeline.record(entry, tile.z, tile.x, tile.y, undefined, tile.rendering)
    if (record instanceof Promise) return record.then((loaded) => answerRecord(request, reply, entry, loaded))
    return answerRecord(request, reply, entry, record)
  }
  app.route({ method: GET_HEAD, url: '/styles/:id/:z/:x/:y', handler: tileHandler(256) })
  app.route({ method: GET_HEAD, url: '/styles/:id/512/:z/:x/:y', handler: tileHandler(512) })

  // The raster TileJSON of a style, for Leaflet, QGIS and anything that takes XYZ rasters.
  app.route({
    method: GET_HEAD,
    url: '/styles/:id.json',
    onSend,
    handler: async (request, reply) => {
      const style = styles.get(request.params.id)
      if (style === undefined) throw new NotFound(`no style '${request.params.id}'`)
      const tj = renderer.tileEntry(style, 256).source.tilejson
      return { ...tj, id: style.id, tiles: [`${links(request, reply)}/styles/${encodeURIComponent(style.id)}/{z}/{x}/{y}.png`], tileSize: 256 }
    },
  })
}

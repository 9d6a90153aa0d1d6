// A composite set (/a,b/z/x/y): the layers of several sets in one tile. MVT layers are a repeated protobuf field, so
// raw tiles concatenate into one valid tile; only sets that return raw MVT (`composable`) can take part.
import { promisify } from 'node:util'
import { gunzip as gunzipCallback } from 'node:zlib'
import { buildTileJson } from './tilejson.js'
import { unionBounds } from '../tilemath.js'

const gunzip = promisify(gunzipCallback)
const isGzip = (b) => b.length > 2 && b[0] === 0x1f && b[1] === 0x8b

/** Layer names of the parts, or null when two parts would put the same layer in one tile (the MVT spec forbids it). */
export function layerNames (parts) {
  const names = parts.flatMap((p) => (p.source.tilejson.vector_layers ?? []).map((l) => l.id))
  return new Set(names).size === names.length ? names : null
}

export function compose (id, parts) {
  const tjs = parts.map((p) => p.source.tilejson)
  const bounds = unionBounds(tjs.map((t) => t.bounds))
  return {
    id,
    kind: 'composite',
    format: 'pbf',
    hints: { format: 'pbf' },
    composable: false,
    takesQuery: parts.some((p) => p.source.takesQuery),
    metadata: { parts: parts.map((p) => p.id) },
    tilejson: buildTileJson({
      name: id,
      minzoom: Math.min(...tjs.map((t) => t.minzoom)),
      maxzoom: Math.max(...tjs.map((t) => t.maxzoom)),
      bounds,
      vectorLayers: tjs.flatMap((t) => t.vector_layers ?? []),
      format: 'pbf',
    }),
    async getTile (z, x, y, query) {
      // Each part answers only inside its own zoom range; a function may return gzip, which must not be concatenated.
      const inRange = parts.filter((p) => z >= p.source.tilejson.minzoom && z <= p.source.tilejson.maxzoom)
      const tiles = await Promise.all(inRange.map(async (p) => {
        const tile = await p.source.getTile(z, x, y, query)
        return tile !== null && isGzip(tile) ? gunzip(tile) : tile
      }))
      const present = tiles.filter((t) => t !== null && t.length > 0)
      return present.length === 0 ? null : present.length === 1 ? present[0] : Buffer.concat(present)
    },
    close () {},
  }
}

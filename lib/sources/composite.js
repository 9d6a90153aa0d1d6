// A composite set (/a,b/z/x/y): the layers of several sets in one tile. MVT layers are a repeated protobuf field, so
// raw tiles concatenate into one valid tile; only sets that return raw MVT (`composable`) can take part. A tile holds a
// layer name once (MVT spec 4.1): clients keep one of two layers of a name and lose the other's features without a
// word, so parts that would put a layer of one name in a tile are refused with a 400 saying which (martin concatenates
// them as they come; merging the two would need every feature's tags rewritten, and renaming would break the
// `source-layer` of every style written against the sets).
import { promisify } from 'node:util'
import { gunzip as gunzipCallback } from 'node:zlib'
import { PbfReader } from 'pbf'
import { BadRequest } from '../errors.js'
import { buildTileJson } from './tilejson.js'
import { unionBounds } from '../tilemath.js'

const gunzip = promisify(gunzipCallback)
const isGzip = (b) => b.length > 2 && b[0] === 0x1f && b[1] === 0x8b

const sameLayer = (name, parts) => `the sets ${parts.map((id) => `'${id}'`).join(' and ')} both have a layer '${name}', and a tile holds a layer name once: compose sets whose layers are named apart`

/**
 * Why parts cannot be composed, from the layers their TileJSON declares (tables, functions whose comment lists
 * `vector_layers`), or null. Functions that declare none are checked tile by tile (compose's getTile).
 */
export function layerConflict (parts) {
  const owner = new Map()
  for (const p of parts) {
    for (const layer of p.source.tilejson.vector_layers ?? []) {
      const conflict = claim(owner, layer.id, p.id)
      if (conflict !== null) return conflict
    }
  }
  return null
}

/** Records that part `id` has layer `name` (owner: name → part): why it cannot, when another part has it, or null. */
function claim (owner, name, id) {
  const first = owner.get(name)
  if (first !== undefined && first !== id) return sameLayer(name, [first, id])
  owner.set(name, id)
  return null
}

/** The layer names of a raw MVT tile, in order; null when it is not one (its bytes are served as they are). */
function layerNamesOf (tile) {
  const names = []
  try {
    new PbfReader(tile).readFields((tag, _, pbf) => {
      if (tag !== 3) return
      const end = pbf.readVarint() + pbf.pos
      let name = ''
      while (pbf.pos < end) {
        const key = pbf.readVarint()
        if (key === 10) name = pbf.readString() // field 1, length-delimited: the layer's name
        else pbf.skip(key)
      }
      names.push(name)
    }, null)
  } catch {
    return null
  }
  return names
}

export function compose (id, parts) {
  const tjs = parts.map((p) => p.source.tilejson)
  // Parts that declare their layers were checked once (layerConflict, before composing); only the tiles of those that
  // declare none (functions without a comment listing them) are read for their layer names.
  const declares = (p) => p.source.tilejson.vector_layers?.length > 0
  const declared = new Map()
  for (const p of parts.filter(declares)) for (const layer of p.source.tilejson.vector_layers) declared.set(layer.id, p.id)
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
        let tile
        try {
          tile = await p.source.getTile(z, x, y, query)
        } catch (err) {
          // Which part failed, for the catalog: a part whose table is gone has its database discovered again. Not
          // enumerable: a logged error (pino copies its own enumerable fields) would carry the whole entry, its
          // database URL and password with it.
          if (err !== null && typeof err === 'object' && err.compositePart === undefined) {
            Object.defineProperty(err, 'compositePart', { value: p, enumerable: false, configurable: true })
          }
          throw err
        }
        return tile !== null && isGzip(tile) ? gunzip(tile) : tile
      }))
      const present = []
      let owner = null // layer name → the part that has it: the declared ones, and what undeclared parts' tiles hold
      tiles.forEach((t, i) => {
        if (t === null || t.length === 0) return
        present.push(t)
        if (declares(inRange[i])) return
        owner ??= new Map(declared)
        for (const name of layerNamesOf(t) ?? []) {
          const conflict = claim(owner, name, inRange[i].id)
          if (conflict !== null) throw new BadRequest(`composite '${id}' cannot be served: ${conflict}`)
        }
      })
      return present.length === 0 ? null : present.length === 1 ? present[0] : Buffer.concat(present)
    },
    close () {},
  }
}

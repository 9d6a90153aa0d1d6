// Finding tiles that exist at a zoom: spiral out from the set's center inside its bounds, keeping those answered 200.
import { lonLatToTile, tileRange, WORLD_BOUNDS } from '../lib/tilemath.js'

export const fill = (template, z, x, y) => template.replace('{z}', z).replace('{x}', x).replace('{y}', y)

/** Tiles of ring r around (cx, cy), clipped to the range. */
function * ring (cx, cy, r, [minX, minY, maxX, maxY]) {
  for (let x = cx - r; x <= cx + r; x++) {
    for (let y = cy - r; y <= cy + r; y++) {
      if (Math.max(Math.abs(x - cx), Math.abs(y - cy)) !== r) continue
      if (x >= minX && x <= maxX && y >= minY && y <= maxY) yield [x, y]
    }
  }
}

/**
 * Up to `want` tiles at zoom z that the server at `template` answers with 200, probing at most `budget`.
 * @returns {Promise<Array<[number, number, number]>>}
 */
export async function findTiles (template, tilejson, z, { want = 500, budget = 4000, headers = {} } = {}) {
  const bounds = Array.isArray(tilejson.bounds) ? tilejson.bounds : WORLD_BOUNDS
  const range = tileRange(bounds, z)
  const center = Array.isArray(tilejson.center) ? tilejson.center : [(bounds[0] + bounds[2]) / 2, (bounds[1] + bounds[3]) / 2]
  let [cx, cy] = lonLatToTile(center[0], center[1], z)
  cx = Math.min(Math.max(cx, range[0]), range[2])
  cy = Math.min(Math.max(cy, range[1]), range[3])
  const maxRing = Math.max(cx - range[0], range[2] - cx, cy - range[1], range[3] - cy)
  const found = []
  let probed = 0
  let batch = []
  const flush = async () => {
    const results = await Promise.all(batch.map(async ([x, y]) => {
      const res = await fetch(fill(template, z, x, y), { headers })
      await res.arrayBuffer()
      return res.status === 200 ? [z, x, y] : null
    }))
    for (const r of results) if (r && found.length < want) found.push(r)
    batch = []
  }
  for (let r = 0; r <= maxRing && found.length < want && probed < budget; r++) {
    for (const xy of ring(cx, cy, r, range)) {
      batch.push(xy)
      probed++
      if (batch.length === 32) await flush()
      if (found.length >= want || probed >= budget) break
    }
  }
  if (batch.length) await flush()
  return found
}

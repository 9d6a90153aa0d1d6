// Finding tiles that exist at a zoom: spiral out from the set's center inside its bounds, keeping those answered 200
// with a tile.
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

// A request unanswered this long means a server that is not serving (undici's own wait is 5 minutes).
const TIMEOUT_MS = 5000
// Failures that say nothing listens there, as opposed to one request's connection reset.
const UNREACHABLE = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL'])

/** A server that cannot be reached, or that does not answer in time: the URL asked and why. */
export class UnreachableError extends Error {}

/**
 * One tile asked of a server as the bench's client asks it (the same headers, redirects not followed: a 3xx is not a
 * tile, and wrk counts it a success): null when the answer is a tile, else why not, as a short word ('302', '404',
 * 'empty', 'text/html', 'ECONNRESET'). A server that cannot be reached or does not answer in `timeoutMs` throws
 * UnreachableError.
 */
export async function askTile (url, { headers = {}, timeoutMs = TIMEOUT_MS } = {}) {
  let res
  let body
  try {
    res = await fetch(url, { headers, redirect: 'manual', signal: AbortSignal.timeout(timeoutMs) })
    body = Buffer.from(await res.arrayBuffer())
  } catch (err) {
    if (err.name === 'TimeoutError') throw new UnreachableError(`${url} did not answer in ${timeoutMs / 1000} s`)
    const code = err.cause?.code ?? err.cause?.message ?? err.message
    if (UNREACHABLE.has(code)) throw new UnreachableError(`cannot reach ${url}: ${code}`)
    return code
  }
  if (res.status !== 200) return String(res.status)
  if (body.length === 0) return 'empty'
  // An error page or an app's index.html answered for any path is not a tile, whatever its status.
  const type = (res.headers.get('content-type') ?? '').split(';')[0].trim().toLowerCase()
  if (type === 'text/html' || /^\s*<(!doctype html|html)\b/i.test(body.subarray(0, 64).toString('latin1'))) return 'text/html'
  return null
}

/** What `refused` (why → count) holds, for a message: "302 ×64, text/html ×2". */
export const describeRefused = (refused) => [...refused].map(([why, n]) => `${why} ×${n}`).join(', ')

/**
 * Up to `want` tiles at zoom z that the server at `template` answers with a tile (see askTile), probing at most
 * `budget`. Why the others were not tiles is counted in `refused` (a Map), when given. A server that cannot be
 * reached or does not answer in `timeoutMs` throws UnreachableError.
 * @returns {Promise<Array<[number, number, number]>>}
 */
export async function findTiles (template, tilejson, z, { want = 500, budget = 4000, headers = {}, timeoutMs = TIMEOUT_MS, refused = new Map() } = {}) {
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
      const why = await askTile(fill(template, z, x, y), { headers, timeoutMs })
      if (why === null) return [z, x, y]
      refused.set(why, (refused.get(why) ?? 0) + 1)
      return null
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

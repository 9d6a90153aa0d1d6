// Reading one tile of an export through the routes' own path: resolveTile (lib/resolve.js) with the URL a client would
// ask (`/set/z/x/y@2x.webp`, no query string), then the pipeline's record and its encoding for a client whose
// Accept-Encoding is `gzip` or none. The bytes written are the bytes a client of the server gets, but for a tile drawn
// without part of what it shows (a rendered tile whose remote source could not be read), which the server keeps only
// briefly: an archive would keep it for good, so it is not written (IncompleteTile) and the run asks for it again.
import { acceptMask } from '../encoding.js'
import { ABSENT, shortLifeOf } from '../pipeline.js'
import { resolveTile } from '../resolve.js'

/** A tile made without part of what it shows: `missing` is { host, reason } of what failed (no user or password), or null. */
export class IncompleteTile extends Error {
  constructor (missing) {
    super(missing === null ? 'drawn without a remote source that could not be read' : `drawn without remote source ${missing.host} (${missing.reason})`)
    this.missing = missing
  }
}

const NO_QUERY = Object.freeze({}) // as the tile front passes a URL without a query string (routes/tiles.js)

/**
 * (app, target, job) → read(z, x, y): the tile's bytes, null when the set has none there, or a promise of either
 * (rejected with the source's failure, or with an IncompleteTile).
 */
export function tileReader (app, target, job) {
  const { pipeline } = app
  const mask = acceptMask(job.encoding === 'gzip' ? 'gzip' : '')
  // The last path segment as a client writes it: the scale when not 1, the format for sets that render to order.
  const suffix = (job.scale === 1 ? '' : `@${job.scale}x`) + (target.source.formats === undefined ? '' : `.${job.format}`)
  const body = (answer) => answer.body
  const encode = (record, entry) => {
    if (record === ABSENT) return null
    if (shortLifeOf(record.stored) !== undefined) throw new IncompleteTile(target.missingFrom?.() ?? null)
    const answer = pipeline.encoded(record, mask, entry, true) // stored for good: compressed well
    return answer instanceof Promise ? answer.then(body) : answer.body
  }
  return function read (z, x, y) {
    const tile = resolveTile(target.lookup, { set: target.id, z: String(z), x: String(x), y: y + suffix }, NO_QUERY)
    const record = pipeline.record(tile.entry, tile.z, tile.x, tile.y, tile.query, tile.rendering)
    if (record instanceof Promise) return record.then((loaded) => encode(loaded, tile.entry))
    return encode(record, tile.entry)
  }
}

// What a request asks of a set, by one set of rules for every caller: the tile and TileJSON routes, and the renderer,
// the exporter and the GeoJSON output to come. The set, the tile, its scale and format, the set's options; or the
// typed error (lib/errors.js) that answers the request instead.
import { BadRequest, NotFound, Unavailable } from './errors.js'
import { MAX_ZOOM, inGrid } from './tilemath.js'

const ONE = [1]

/** The set `name` names, able to serve: NotFound when there is none, Unavailable (with the reason) when it cannot. */
export function resolveSet (catalog, name) {
  const entry = catalog.get(name)
  if (entry === undefined) {
    const max = catalog.maxCompositeParts
    if (max !== undefined && name.split(',', max + 1).length > max) throw new BadRequest(`a composite names at most ${max} sets`)
    const problem = name.includes(',') ? catalog.compositeProblem?.(name) : null
    if (problem) throw new BadRequest(problem)
    throw new NotFound(`no tileset '${name}'`)
  }
  if (entry.source === null) throw new Unavailable(`tileset '${entry.id}' is unavailable: ${entry.reason}`)
  return entry
}

/**
 * The set of a TileJSON URL, `/roads.json` or `/roads` (a set whose own name ends in `.json` is found by it first),
 * with the query options its tile URLs will carry checked as the tiles' are (BadRequest).
 */
export function resolveTileJson (catalog, name, query) {
  const entry = resolveSet(catalog, name.endsWith('.json') && catalog.get(name) === undefined ? name.slice(0, -5) : name)
  entry.source.parseQuery?.(query)
  return entry
}

/**
 * The format a vector set's TileJSON asks tiles in, from its `encoding` query parameter (MapLibre GL JS's name for
 * a vector source's tile format): 'mlt' for `?encoding=mlt` (MVT sets' tiles as `.mlt` variants, MLT sets' own), else
 * the set's own format. BadRequest for another value, and for `mvt` of an MLT set (no MVT is made of MLT).
 * Undefined for sets that are not vector sets: a COG's `encoding` is one of its own options (checked by the set); a set
 * that takes no options is told it has none (BadRequest), not answered as if it were not there.
 */
export function tileJsonFormat (entry, query) {
  const format = entry.source.format
  if (format !== 'pbf' && format !== 'mlt') {
    if (query?.encoding !== undefined && !takesQuery(entry.source)) throw new BadRequest(`${entry.id} has ${format ?? 'no vector'} tiles: encoding ('mvt' or 'mlt') is an option of vector sets`)
    return undefined
  }
  const asked = query?.encoding
  if (asked === undefined || asked === (format === 'pbf' ? 'mvt' : 'mlt')) return format
  if (asked === 'mlt') return 'mlt'
  throw new BadRequest(format === 'pbf' ? "encoding is 'mvt' (the default) or 'mlt'" : `${entry.id} has MLT tiles: encoding is 'mlt'`)
}

/** Does a set take options from the query string (its tile URLs then carry the TileJSON request's)? */
export const takesQuery = (source) => source.parseQuery !== undefined || source.takesQuery === true

/**
 * A tile URL's parameters ({ set, z, x, y } as strings: `y` may end in `@2x` and an extension) and query → what the
 * pipeline needs: { entry, z, x, y, query, rendering, variant }. `rendering` ({ scale, format }) only for sets that
 * render to order; `query` only for sets that take options (parsed and validated when the set says how); `variant`
 * ('geojson' | 'mlt') only when a vector set's tile is asked in a format other than its own (lib/variants).
 *
 * The hot path: no allocation but the result (and `rendering` where there is one); errors are thrown only for requests
 * that get one. The order of the checks decides which of several problems a request is told about.
 */
export function resolveTile (catalog, params, query) {
  const z = digits(params.z, 2)
  const x = digits(params.x, 10)
  if (z === -1 || x === -1) throw badAddress(params)
  if (z > MAX_ZOOM) throw new BadRequest(`zoom ${z} is above ${MAX_ZOOM}`)
  const entry = resolveSet(catalog, params.set)
  const source = entry.source

  // y[@Nx][.ext], parsed in place.
  const segment = params.y
  if (typeof segment !== 'string') throw badAddress(params)
  const end = segment.length
  let i = 0
  let y = 0
  for (let c; i < end && (c = segment.charCodeAt(i) - 48) >= 0 && c <= 9; i++) y = y * 10 + c
  if (i === 0 || i > 10) throw badAddress(params)
  let scale = 1
  if (i < end && segment.charCodeAt(i) === 64) { // @
    scale = segment.charCodeAt(i + 1) - 48
    if (!(scale >= 1 && scale <= 4) || segment.charCodeAt(i + 2) !== 120) throw badAddress(params) // x
    i += 3
  }
  const extStart = i + 1 // the extension, when there is one: segment.slice(extStart)
  if (i < end && (segment.charCodeAt(i) !== 46 || end - extStart < 1 || end - extStart > 8 || !alphanumeric(segment, extStart))) {
    throw badAddress(params)
  }

  if (!(source.scales ?? ONE).includes(scale)) throw new NotFound(`${entry.id} has no @${scale}x tiles`)
  if (!inGrid(z, x, y)) throw new BadRequest(`tile ${z}/${x}/${y} is outside the 2^${z} grid`)
  // Sets that make tiles to order may serve past the range they advertise (`servedZooms`, e.g. COG over/underzoom).
  const { minzoom, maxzoom } = source.servedZooms ?? source.tilejson
  if (z < minzoom || z > maxzoom) {
    const err = new NotFound(`zoom ${z} is outside ${entry.id}'s range ${minzoom}-${maxzoom}`)
    err.headers = { 'cache-control': entry.cacheControl } // as lasting as an absent tile inside the range
    throw err
  }
  // Stored tiles ignore the extension (the bytes decide the type), but for `.geojson` and `.mlt`, which ask for a variant
  // of a vector tile; sets that render to order take it as the format.
  let rendering
  let variant
  if (source.formats !== undefined) {
    const ext = i < end ? segment.slice(extStart).toLowerCase() : ''
    const format = ext === '' ? source.formats[0] : source.formatAliases?.[ext] ?? ext
    if (!source.formats.includes(format)) throw new BadRequest(`.${segment.slice(extStart)} is not a format of ${entry.id} (${source.formats.join(', ')})`)
    rendering = { scale, format }
  } else if (i < end) {
    // The hot path: `.pbf` and the rest are told from the two variants by their first letter and length.
    const first = segment.charCodeAt(extStart) | 32 // lower case
    const length = end - extStart
    if ((first === 109 && length === 3) || (first === 103 && length === 7)) variant = variantOf(entry, segment.slice(extStart).toLowerCase()) // m, g
  }
  let options
  if (source.parseQuery !== undefined) options = source.parseQuery(query, rendering) // throws BadRequest
  else if (source.takesQuery) options = query
  return { entry, z, x, y, query: options, rendering, variant }
}

/**
 * The variant an extension asks of a set with stored tiles: 'geojson' of MVT and MLT sets, 'mlt' of MVT sets (an MLT
 * set's `.mlt` is its own tiles: no variant); undefined for other extensions (ignored, as ever). BadRequest for a
 * variant of a set whose tiles are not vector tiles.
 */
function variantOf (entry, ext) {
  if (ext !== 'geojson' && ext !== 'mlt') return undefined
  const format = entry.source.format
  if (format === 'pbf') return ext
  if (format === 'mlt') return ext === 'mlt' ? undefined : ext
  throw new BadRequest(`.${ext} is made of vector tiles, and ${entry.id} has ${format ?? 'unknown'} tiles`)
}

/** A string of 1 to `max` ASCII digits as a number; -1 for anything else (' 3', '1e0', '0x1', '-1', '1.5'). */
function digits (s, max) {
  if (typeof s !== 'string' || s.length === 0 || s.length > max) return -1
  let n = 0
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i) - 48
    if (c < 0 || c > 9) return -1
    n = n * 10 + c
  }
  return n
}

function alphanumeric (s, from) {
  for (let i = from; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (!((c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122))) return false
  }
  return true
}

const badAddress = ({ z, x, y }) => new BadRequest(`'${z}/${x}/${y}' is not a tile address`)

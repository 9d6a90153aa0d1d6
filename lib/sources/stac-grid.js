// The grid a STAC item says its data has, for its zoom range without opening its file: the projection extension's
// proj:shape, proj:transform and an EPSG code (proj:code, or proj:epsg of the extension's 1.x), on the asset or the
// item, as rio-tiler's STACReader reads them; else the common `gsd` over the item's bbox. A collection may have
// thousands of items; opening each when the set opens would read every one of their headers first.
import proj4 from 'proj4'
import { WORLD_BOUNDS, mercatorX, mercatorY } from '../tilemath.js'
import { maximumOverviewLevel } from '../raster/zooms.js'
import { angularFactor, eastingFirst, epsgProj, withoutGrid } from '../raster/epsg.js'

const STEPS = 20 // points along each edge, as GDAL's suggested warp output takes at least
const toLonLat = new Map() // PROJ string → proj4 converter to WGS84 (null: none)

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v)
const clampLat = (lat) => Math.min(Math.max(lat, WORLD_BOUNDS[1]), WORLD_BOUNDS[3])

/**
 * An EPSG code's converter to longitude/latitude for a grid centred on `centre` (in the code's units), read as
 * dataset.js reads a file's code (lib/raster/epsg.js: a datum grid replaced by the Helmert shift for that place,
 * grads read as grads): { forward([x, y]), note (what the log says of a replaced grid, or null) }; or null.
 */
function converter (code, centre) {
  const proj = epsgProj(code)
  if (proj === null) return null
  const [fx, fy] = angularFactor(code)
  const usable = withoutGrid(eastingFirst(proj), code, centre, [fx, fy])
  if (!toLonLat.has(usable.proj)) {
    let conversion = null
    try { conversion = proj4(usable.proj, 'EPSG:4326') } catch {}
    toLonLat.set(usable.proj, conversion)
  }
  const conversion = toLonLat.get(usable.proj)
  return conversion === null ? null : { forward: ([x, y]) => conversion.forward([x * fx, y * fy]), note: usable.note }
}

/** The EPSG code of `fields` (proj:code 'EPSG:32633', or proj:epsg 32633); undefined when none. */
function epsgOf (fields) {
  const code = fields['proj:code']
  if (typeof code === 'string') {
    const m = /^EPSG:(\d+)$/i.exec(code.trim())
    return m ? Number(m[1]) : undefined
  }
  return Number.isInteger(fields['proj:epsg']) ? fields['proj:epsg'] : undefined
}

/**
 * What zoomRange (lib/raster/zooms.js) takes of a file, as the item declares it: { meta: { width, height, overviews },
 * warp: { resolution, width, height }, note? (its CRS read without its datum grid, as the workers say it of a file:
 * for the log) }, or null when the item says nothing usable. Overviews are taken to go down to
 * 256 px, as a COG's do; the warp is GDAL's suggested output into Web Mercator (its edges sampled), as footprint.js
 * works it out of an open file.
 */
export function declaredGrid (item, assetName) {
  const asset = isObject(item.assets?.[assetName]) ? item.assets[assetName] : {}
  const properties = isObject(item.properties) ? item.properties : {}
  const field = (name) => asset[name] ?? properties[name]
  return projectedGrid(field('proj:shape'), field('proj:transform'), epsgOf(asset) ?? epsgOf(properties)) ??
    gsdGrid(field('gsd'), item.bbox)
}

function withOverviews (width, height, warp) {
  const level = maximumOverviewLevel(width, height)
  const overviews = level === 0 ? [] : [[Math.ceil(width / 2 ** level), Math.ceil(height / 2 ** level)]]
  return { meta: { width, height, overviews }, warp }
}

function projectedGrid (shape, transform, code) {
  if (!Array.isArray(shape) || shape.length !== 2 || !Array.isArray(transform) || (transform.length !== 6 && transform.length !== 9)) return null
  const [height, width] = shape
  const [a, b, c, d, e, f] = transform
  if (!(Number.isInteger(width) && width > 0 && Number.isInteger(height) && height > 0)) return null
  if (![a, c, e, f].every(Number.isFinite) || b !== 0 || d !== 0 || !(a > 0) || !(e < 0)) return null // north up only
  const conversion = code === undefined ? null : converter(code, [c + (a * width) / 2, f + (e * height) / 2])
  if (conversion === null) return null
  const centre = lonLatAt(conversion, c + (a * width) / 2, f + (e * height) / 2)
  if (centre === null) return null
  const toMercator = (col, row) => {
    const p = lonLatAt(conversion, c + a * col, f + e * row)
    if (p === null) return null
    let lon = p[0] // unwrapped round the centre: an item across the antimeridian stays one span
    while (lon - centre[0] > 180) lon -= 360
    while (lon - centre[0] < -180) lon += 360
    return [mercatorX(lon), mercatorY(clampLat(p[1]))]
  }
  let minX = Infinity; let minY = Infinity; let maxX = -Infinity; let maxY = -Infinity
  for (let i = 0; i <= STEPS; i++) {
    const t = i / STEPS
    for (const p of [toMercator(t * width, 0), toMercator(t * width, height), toMercator(0, t * height), toMercator(width, t * height)]) {
      if (p === null) continue
      minX = Math.min(minX, p[0]); maxX = Math.max(maxX, p[0]); minY = Math.min(minY, p[1]); maxY = Math.max(maxY, p[1])
    }
  }
  if (!(minX < maxX) || !(minY < maxY)) return null
  const tl = toMercator(0, 0); const br = toMercator(width, height)
  let dx = tl !== null && br !== null ? br[0] - tl[0] : 0
  let dy = tl !== null && br !== null ? br[1] - tl[1] : 0
  if (dx === 0 || dy === 0) { dx = maxX - minX; dy = maxY - minY }
  const resolution = Math.hypot(dx, dy) / Math.hypot(width, height)
  const grid = withOverviews(width, height, { resolution, width: Math.floor((maxX - minX) / resolution + 0.5), height: Math.floor((maxY - minY) / resolution + 0.5) })
  if (conversion.note !== null) grid.note = conversion.note
  return grid
}

function lonLatAt (conversion, x, y) {
  try {
    const p = conversion.forward([x, y])
    return Number.isFinite(p[0]) && Number.isFinite(p[1]) && Math.abs(p[1]) <= 90.0001 ? p : null
  } catch {
    return null
  }
}

/** A ground sample distance in metres over the bbox: Mercator's pixel there is gsd / cos(latitude). */
function gsdGrid (gsd, bbox) {
  if (!(typeof gsd === 'number' && gsd > 0) || !Array.isArray(bbox) || (bbox.length !== 4 && bbox.length !== 6) || !bbox.every(Number.isFinite)) return null
  const [w, s, e, n] = bbox.length === 4 ? bbox : [bbox[0], bbox[1], bbox[3], bbox[4]]
  const east = e < w ? e + 360 : e // across the antimeridian
  const south = clampLat(s); const north = clampLat(n)
  if (!(south < north)) return null
  const resolution = gsd / Math.cos((((south + north) / 2) * Math.PI) / 180)
  const width = Math.max(1, Math.round((mercatorX(east) - mercatorX(w)) / resolution))
  const height = Math.max(1, Math.round((mercatorY(north) - mercatorY(south)) / resolution))
  return withOverviews(width, height, { resolution, width, height })
}

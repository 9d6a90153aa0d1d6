// Where a raster lies on the Web Mercator map, worked out once when a file is opened: its WGS84 bounds (TileJSON,
// and which tiles touch it) and GDAL's suggested warp output into EPSG:3857 (the resolution and size rio-tiler derives
// the zoom range from, and gdalwarp's mean scale for choosing overviews).
import proj4 from 'proj4'
import { RasterError } from './errors.js'
import { WORLD_BOUNDS, latOf, lonOf, mercatorX, mercatorY } from '../tilemath.js'

const GRID = 32 // bounds: the raster sampled on a 33 × 33 grid of points…
const BISECT = 20 // …and, where a point has no longitude/latitude (off the disk of a satellite view), the edge found

/**
 * { lonLatBounds, warp: { resolution, width, height } } of an opened dataset. Bounds come from the points that
 * transform: a full-disk satellite image has corners in space, so the disk's edge is found between grid points.
 * Longitudes are unwrapped round the centre's (west may exceed 180 across the antimeridian), latitudes clamped to
 * the Mercator world.
 */
export function footprint (ds) {
  const lonLat = pixelToLonLat(ds)
  const centre = lonLat(ds.width / 2, ds.height / 2)
  const points = []
  const push = (p) => { if (p !== null) points.push(p) }
  const row = []
  for (let j = 0; j <= GRID; j++) {
    for (let i = 0; i <= GRID; i++) {
      const x = (i / GRID) * ds.width; const y = (j / GRID) * ds.height
      const p = lonLat(x, y)
      push(p)
      // Between a point that transforms and one that does not, the last one that does (the limb), across and down.
      if (i > 0 && (p === null) !== (row[i - 1] === null)) push(edgeBetween(lonLat, [x - ds.width / GRID, y], [x, y], p === null))
      if (j > 0 && (p === null) !== (row[i] === null)) push(edgeBetween(lonLat, [x, y - ds.height / GRID], [x, y], p === null))
      row[i] = p
    }
  }
  if (points.length === 0) throw new RasterError('unsupported CRS: no point of the raster maps to longitude/latitude')
  const unwrap = unwrapper(centre !== null ? centre[0] : points[0][0])
  let west = Infinity; let east = -Infinity; let south = Infinity; let north = -Infinity
  for (const [lon0, lat] of points) {
    const lon = unwrap(lon0)
    west = Math.min(west, lon); east = Math.max(east, lon)
    south = Math.min(south, lat); north = Math.max(north, lat)
  }
  // The whole world round: all of it, whichever meridian the raster starts at (a grid laid out 0..360 or -179..181
  // covers west of Greenwich, or west of -179, with its part past 180°; the tiles there read it).
  if ((east - west) > 359.9) { west = -180; east = 180 }
  // A raster holding a pole reaches every longitude there, however few of them the sample above happened to cross.
  const [southPole, northPole] = polesInside(ds)
  if (southPole || northPole) { west = -180; east = 180 }
  if (southPole) south = -90
  if (northPole) north = 90
  // Past ±85.05° there is no Web Mercator map (a raster wholly beyond it keeps an empty band at the edge).
  south = Math.min(Math.max(south, WORLD_BOUNDS[1]), WORLD_BOUNDS[3]); north = Math.max(Math.min(north, WORLD_BOUNDS[3]), south)
  return { lonLatBounds: [west, south, east, north], warp: suggestedWarp(ds, lonLat, unwrap) }
}

/** Pixel (column, row; corners at integers) → [lon, lat], or null where it has none. */
function pixelToLonLat ({ crs, transform: [ox, rx, oy, ry] }) {
  const inverse = crs.mercator
    ? (x, y) => [lonOf(x), latOf(y)]
    : crs.geographic
      ? (x, y) => [x, y]
      : (() => {
          const { forward } = proj4(crs.proj, 'EPSG:4326')
          const [fx, fy] = crs.factor
          return (x, y) => { try { return forward([x * fx, y * fy]) } catch { return [NaN, NaN] } }
        })()
  return (px, py) => {
    const [lon, lat] = inverse(ox + px * rx, oy - py * ry)
    return Number.isFinite(lon) && Number.isFinite(lat) && Math.abs(lat) <= 90.0001 ? [lon, lat] : null
  }
}

/**
 * [south, north]: whether each pole lies inside the raster. Only where the CRS draws the pole as one point (polar
 * stereographic, a Lambert azimuthal, a transverse Mercator); a cylindrical projection draws it as a line, and the
 * raster's edges already tell which longitudes it reaches there.
 */
function polesInside ({ crs, transform: [ox, rx, oy, ry], width, height }) {
  if (crs.mercator || crs.geographic) return [false, false]
  let forward
  try { forward = proj4('EPSG:4326', crs.proj).forward } catch { return [false, false] }
  const [fx, fy] = crs.factor
  return [-90, 90].map((lat) => {
    const at = []
    for (const lon of [0, 90, 180, -90]) {
      let p = null
      try { p = forward([lon, lat]) } catch {}
      if (p === null || !Number.isFinite(p[0]) || !Number.isFinite(p[1])) return false
      at.push([(p[0] / fx - ox) / rx, (oy - p[1] / fy) / ry]) // pixel column and row
    }
    const [[col, row]] = at
    if (at.some(([c, r]) => Math.abs(c - col) > 0.01 || Math.abs(r - row) > 0.01)) return false // a line, not a point
    return col >= 0 && col <= width && row >= 0 && row <= height
  })
}

/** Longitude → the same meridian within 180° of `mid`: a raster across the antimeridian stays one span. */
const unwrapper = (mid) => (lon) => {
  while (lon - mid > 180) lon -= 360
  while (lon - mid < -180) lon += 360
  return lon
}

/** Bisection between pixel points a and b (one with a longitude/latitude, one without): the last one with. */
function edgeBetween (lonLat, a, b, bFails, iterations = BISECT) {
  let good = bFails ? a : b; let bad = bFails ? b : a
  let found = null
  for (let k = 0; k < iterations; k++) {
    const mid = [(good[0] + bad[0]) / 2, (good[1] + bad[1]) / 2]
    const p = lonLat(mid[0], mid[1])
    if (p === null) bad = mid
    else { good = mid; found = p }
  }
  return found
}

/**
 * GDAL's suggested warp output into EPSG:3857 (GDALSuggestedWarpOutput2, which rasterio's calculate_default_transform
 * and so rio-tiler use): the raster's edges sampled (min(w, h) / 50 steps, 20 to 100), or, when an edge point has no
 * image, a grid of them with the edge of the valid area found along each row; a square pixel whose diagonal count
 * matches the source's, measured from the top-left to the bottom-right corner (or across the bounding box when one of
 * them fails); the size that covers the box. A Mercator file is its own warp output, as rio-tiler takes it.
 * Two departures, both where GDAL's answer is an artefact: latitudes past the Mercator world are clamped (GDAL maps
 * the pole to y ≈ 2.4e8 m, making a world raster's pixels 8× too big), and longitudes unwrapped (GDAL's output for a
 * raster across the antimeridian spans the whole world's width).
 */
function suggestedWarp (ds, lonLat, unwrap) {
  const { width: w, height: h } = ds
  if (ds.crs.mercator) return { resolution: Math.max(ds.transform[1], ds.transform[3]), width: w, height: h }
  const toMercator = (px, py) => {
    const p = lonLat(px, py)
    return p === null ? null : [mercatorX(unwrap(p[0])), mercatorY(p[1])]
  }
  const steps = Math.min(100, Math.max(20, Math.floor(Math.min(w, h) / 50 + 0.5)))
  const at = (i) => (i === steps ? 1 : i / steps)
  let minX = Infinity; let minY = Infinity; let maxX = -Infinity; let maxY = -Infinity
  const add = (p) => {
    if (p === null) return
    minX = Math.min(minX, p[0]); maxX = Math.max(maxX, p[0]); minY = Math.min(minY, p[1]); maxY = Math.max(maxY, p[1])
  }
  const edges = []
  for (let i = 0; i <= steps; i++) edges.push(toMercator(at(i) * w, 0), toMercator(at(i) * w, h), toMercator(0, at(i) * h), toMercator(w, at(i) * h))
  if (edges.every((p) => p !== null)) edges.forEach(add)
  else {
    for (let j = 0; j <= steps; j++) {
      let previous = null
      for (let i = 0; i <= steps; i++) {
        const p = toMercator(at(i) * w, at(j) * h)
        if (i > 0 && (p === null) !== (previous === null)) {
          add(edgeBetween(toMercator, [at(i - 1) * w, at(j) * h], [at(i) * w, at(j) * h], p === null, 16)) // GDAL's 16 halvings
        }
        add(p)
        previous = p
      }
    }
  }
  if (!(minX < maxX) || !(minY < maxY)) throw new RasterError('unsupported CRS: the raster has no extent in Web Mercator')
  const tl = toMercator(0, 0); const br = toMercator(w, h)
  let dx = tl !== null && br !== null ? br[0] - tl[0] : 0
  let dy = tl !== null && br !== null ? br[1] - tl[1] : 0
  if (dx === 0 || dy === 0) { dx = maxX - minX; dy = maxY - minY }
  const resolution = Math.hypot(dx, dy) / Math.hypot(w, h)
  return { resolution, width: Math.floor((maxX - minX) / resolution + 0.5), height: Math.floor((maxY - minY) / resolution + 0.5) }
}

// z/x/y validation, the TMS flip and tile ↔ lon/lat math (spherical Mercator, XYZ scheme).

export const MAX_ZOOM = 30
export const WORLD_BOUNDS = [-180, -85.05112877980659, 180, 85.05112877980659]

// 2^z by zoom: `2 ** z` with a variable z is a call to V8's pow on every tile request (~0.5 % of a cold tile's CPU).
const SIDE = Array.from({ length: MAX_ZOOM + 1 }, (_, z) => 2 ** z)

/** True when x and y are inside the 2^z grid (z ≤ MAX_ZOOM). */
export const inGrid = (z, x, y) => x < SIDE[z] && y < SIDE[z]

/** XYZ row ↔ TMS row (MBTiles stores TMS; z ≤ MAX_ZOOM). */
export const flipY = (z, y) => SIDE[z] - 1 - y

/** The bounds [w, s, e, n] covering all of `list` (non-empty). */
export const unionBounds = (list) => list.reduce((a, b) => [Math.min(a[0], b[0]), Math.min(a[1], b[1]), Math.max(a[2], b[2]), Math.max(a[3], b[3])])

export function lonLatToTile (lon, lat, z) {
  const n = 2 ** z
  const clampedLat = Math.max(Math.min(lat, WORLD_BOUNDS[3]), WORLD_BOUNDS[1])
  const x = Math.floor(((lon + 180) / 360) * n)
  const rad = (clampedLat * Math.PI) / 180
  const y = Math.floor(((1 - Math.log(Math.tan(rad) + 1 / Math.cos(rad)) / Math.PI) / 2) * n)
  return [Math.min(Math.max(x, 0), n - 1), Math.min(Math.max(y, 0), n - 1)]
}

export function tileToLonLat (z, x, y) {
  const n = 2 ** z
  const lon = (x / n) * 360 - 180
  const lat = (Math.atan(Math.sinh(Math.PI * (1 - (2 * y) / n))) * 180) / Math.PI
  return [lon, lat]
}

// Web Mercator metres (EPSG:3857) ↔ lon/lat, by formula.
const EARTH_RADIUS = 6378137
const HALF_WORLD = Math.PI * EARTH_RADIUS // metres from the origin to the antimeridian
export const mercatorX = (lon) => (lon * HALF_WORLD) / 180
export const mercatorY = (lat) => Math.log(Math.tan(((90 + Math.max(WORLD_BOUNDS[1], Math.min(WORLD_BOUNDS[3], lat))) * Math.PI) / 360)) * EARTH_RADIUS
export const lonOf = (x) => (x / HALF_WORLD) * 180
export const latOf = (y) => (Math.atan(Math.sinh(y / EARTH_RADIUS)) * 180) / Math.PI

/** Mercator extent of tile z/x/y: [minX, minY, maxX, maxY]. */
export function tileExtent (z, x, y) {
  const size = (2 * HALF_WORLD) / 2 ** z
  const minX = -HALF_WORLD + x * size
  const maxY = HALF_WORLD - y * size
  return [minX, maxY - size, minX + size, maxY]
}

/** [west, south, east, north] of a tile. */
export function tileBounds (z, x, y) {
  const [w, n] = tileToLonLat(z, x, y)
  const [e, s] = tileToLonLat(z, x + 1, y + 1)
  return [w, s, e, n]
}

/** The tile range [minX, minY, maxX, maxY] that covers bounds at zoom z. */
export function tileRange (bounds, z) {
  const [minX, minY] = lonLatToTile(bounds[0], bounds[3], z)
  const [maxX, maxY] = lonLatToTile(bounds[2], bounds[1], z)
  return [minX, minY, maxX, maxY]
}

// Where a remote tile of a style is, and which rendered tiles draw it: a remote tile that cannot be read makes only
// those incomplete (remote.js failedSince), not every tile of its style. A remote tile's engine URL starts with its
// place, `<tileSize>,<margin>,<minzoom>,<maxzoom>,<xyz|tms>[,W,S,E,N]/{z}/{x}/{y}/`: how the engine draws its source
// (below), and the tile's zoom, column and row as the engine fills them in for the remote URL after it.

const MERCATOR_LAT = 85.0511287798

/**
 * How MapLibre Native draws a source's tiles, as `<tileSize>,<margin>`: the tile size it reads them at (a raster or DEM
 * source's tileSize, 512 by default; a vector source's is always 512, whatever the style says: measured, mapli 0.4.1),
 * and the neighbours it reads beside each tile (a DEM's hillshade takes its edges from them).
 */
export function sourceDrawing (source) {
  const tileSize = source.type !== 'vector' && Number.isFinite(source.tileSize) && source.tileSize > 0 ? source.tileSize : 512
  return `${tileSize},${source.type === 'raster-dem' ? 1 : 0}`
}

/** The place prefix of the tiles of a source drawn as `drawing` (sourceDrawing) with these zooms, scheme and bounds. */
export function tilePlace (drawing, { minzoom, maxzoom, scheme, bounds }) {
  const zoom = (z, otherwise) => (Number.isInteger(z) && z >= 0 && z <= 30 ? z : otherwise)
  // Bounds across the antimeridian or of another shape: none (every tile of the source may be drawn).
  const box = Array.isArray(bounds) && bounds.length === 4 && bounds.every(Number.isFinite) && bounds[0] < bounds[2] && bounds[1] < bounds[3] ? `,${bounds.join(',')}` : ''
  return `${drawing},${zoom(minzoom, 0)},${zoom(maxzoom, 22)},${scheme === 'tms' ? 'tms' : 'xyz'}${box}/{z}/{x}/{y}`
}

/**
 * A place's text (before the first '/') and the z, x, y the engine filled in → { z, x, y (XYZ rows), tileSize, margin,
 * minzoom, maxzoom, bounds }, or null when it is not one (its failure then counts for every render of the style).
 */
export function placeOf (text, z, x, y) {
  const [size, margin, min, max, scheme, ...box] = text.split(',')
  const numbers = [size, margin, min, max, z, x, y].map(Number)
  const bounds = box.length === 4 ? box.map(Number) : null
  if (!numbers.every(Number.isFinite) || !(numbers[0] > 0) || (bounds !== null && !bounds.every(Number.isFinite))) return null
  const [tileSize, , minzoom, maxzoom, zoom, column, row] = numbers
  if (!Number.isInteger(zoom) || zoom > 30 || !(column >= 0 && column < 2 ** zoom) || !(row >= 0 && row < 2 ** zoom)) return null
  return { z: zoom, x: column, y: scheme === 'tms' ? 2 ** zoom - 1 - row : row, tileSize, margin: numbers[1], minzoom, maxzoom, bounds }
}

/**
 * Does the engine draw remote tile `f` (placeOf) in a render of `tile` ({ z, x, y, size }: as the engine is asked to
 * draw it, `size` 256 or 512 px)? MapLibre Native covers the view with a source's tiles of one zoom (coveringZoomLevel:
 * the map's zoom, one below z for a 256 px tile, plus log2(512 / tileSize); within the source's zooms, overzoomed past
 * its maxzoom) within its bounds, and where one of those is missing draws what it has of its ancestors (measured: a
 * tile answering 404 under a parent that answers shows the parent) or of its descendants. So `f` is drawn when it holds,
 * is, or lies in one of those tiles (with its neighbours, `margin`); a tile beside them, or one the engine only fetched
 * for a part of the map outside the render (a parent of tiles out of its bounds), is not. A zoom between two counts both.
 */
export function draws ({ z, x, y, size }, f) {
  const covering = (size === 256 ? z - 1 : z) + Math.log2(512 / f.tileSize)
  for (const zoom of new Set([Math.floor(covering), Math.ceil(covering)])) {
    const at = Math.min(Math.max(zoom, f.minzoom), f.maxzoom)
    const last = 2 ** at - 1
    let [x0, y0, x1, y1] = rangeAt(z, x, y, at)
    x0 = Math.max(0, x0 - f.margin)
    y0 = Math.max(0, y0 - f.margin)
    x1 = Math.min(last, x1 + f.margin)
    y1 = Math.min(last, y1 + f.margin)
    if (f.bounds !== null) {
      const [bx0, by0, bx1, by1] = boundsRange(f.bounds, at, f.maxzoom)
      ;[x0, y0, x1, y1] = [Math.max(x0, bx0), Math.max(y0, by0), Math.min(x1, bx1), Math.min(y1, by1)]
    }
    if (x0 > x1 || y0 > y1) continue // none of the source's tiles there
    const [fx0, fy0, fx1, fy1] = rangeAt(f.z, f.x, f.y, at)
    if (fx0 <= x1 && fx1 >= x0 && fy0 <= y1 && fy1 >= y0) return true
  }
  return false
}

/** Tile z/x/y at zoom `at`, as columns and rows [x0, y0, x1, y1]: its descendants there, or its ancestor. */
function rangeAt (z, x, y, at) {
  if (at >= z) {
    const d = 2 ** (at - z)
    return [x * d, y * d, (x + 1) * d - 1, (y + 1) * d - 1]
  }
  const d = 2 ** (z - at)
  return [Math.floor(x / d), Math.floor(y / d), Math.floor(x / d), Math.floor(y / d)]
}

/**
 * The tiles of zoom `at` a source of bounds [W, S, E, N] and zooms up to `maxzoom` has, as columns and rows [x0, y0,
 * x1, y1], as MapLibre Native counts them (TileRange: the bounds' tiles at `maxzoom`, a tile touching the east or south
 * edge in, the west or north one out, then the parents of those at `at`; measured: a source bounded to the north half
 * is asked for the row south of the equator).
 */
function boundsRange ([w, s, e, n], at, maxzoom) {
  const scale = 2 ** maxzoom
  const column = (lon) => ((lon + 180) / 360) * scale
  const row = (lat) => {
    const sin = Math.sin((Math.min(Math.max(lat, -MERCATOR_LAT), MERCATOR_LAT) * Math.PI) / 180)
    return Math.min(Math.max((0.5 - Math.log((1 + sin) / (1 - sin)) / (4 * Math.PI)) * scale, 0), scale)
  }
  const d = 2 ** (maxzoom - at)
  return [Math.floor(column(w)), Math.floor(row(n)), Math.ceil(column(e)), Math.ceil(row(s))].map((v) => Math.floor(v / d))
}

// EPSG codes as proj4 can use them, for a file's CRS (dataset.js, in the raster workers) and a STAC item's declared
// grid (lib/sources/stac-grid.js, on the main thread) alike, so that both place a raster in the same spot: the
// definition epsg-index gives, its datum grid replaced as PROJ and GDAL replace a missing grid, and the angular unit of
// a geographic code.
import { createRequire } from 'node:module'
import proj4 from 'proj4'
import { GRID_DATUM_SHIFTS } from './datum-shifts.js'

const require = createRequire(import.meta.url)

/** epsg-index's record of a code (one small JSON per code, read when first asked for), or null. */
function record (code) {
  if (!Number.isInteger(code) || code < 1024 || code >= 32767) return null
  try {
    return require(`epsg-index/s/${code}.json`)
  } catch {
    return null
  }
}

/**
 * The PROJ string of an EPSG code, or null. It carries the datum shift (+towgs84) that a string rebuilt from GeoKeys
 * lacks: without it CH1903+ lands 100 m off. (Some give the shift only as a grid file, +nadgrids: see withoutGrid.)
 */
export function epsgProj (code) {
  return record(code)?.proj4?.replace('+type=crs', '') ?? null
}

/**
 * A PROJ string without its datum grid (+nadgrids), which proj4 cannot find (it has no grid files unless given one;
 * without it every point failed, each printing a line to stdout): { proj, note }. As PROJ does without the grid: EPSG's
 * Helmert transformation for the datum, the most accurate one whose area holds the raster's centre (datum-shifts.js),
 * else no datum shift at all (a ballpark). `code`: the EPSG code, or null; `centre`: the raster's centre in the CRS's
 * own units, which `factor` turns into the PROJ string's. `note` says which, for the log; null when there was no grid.
 */
export function withoutGrid (proj, code, centre, [fx, fy]) {
  const grids = /\+nadgrids=("[^"]*"|\S+)\s*/.exec(proj)
  if (grids === null || grids[1] === '@null') return { proj, note: null } // @null: an explicit "no shift"
  const bare = proj.replace(grids[0], '').trim()
  const grid = grids[1].replace(/"/g, '')
  const crs = code === null ? 'this CRS' : `EPSG:${code}`
  const datum = /DATUM\["([^"]+)"/.exec(record(code)?.wkt ?? '')?.[1] ?? null
  let lon = NaN; let lat = NaN
  try { [lon, lat] = proj4(bare, 'EPSG:4326').forward([centre[0] * fx, centre[1] * fy]) } catch {}
  const shift = (GRID_DATUM_SHIFTS[datum] ?? []).find(([, , [w, s, e, n]]) => lon >= w && lon <= e && lat >= s && lat <= n)
  if (shift !== undefined) {
    const [transformation, accuracy, , towgs84] = shift
    return {
      proj: `${bare} +towgs84=${towgs84.join(',')}`,
      note: `${crs} is used without its datum grid ${grid}: EPSG's Helmert transformation EPSG:${transformation} stands in, as in PROJ and GDAL without the grid (accurate to about ${accuracy} m; the grid to centimetres)`,
    }
  }
  return {
    proj: bare,
    note: `${crs} is used without its datum grid ${grid}, and EPSG has no other transformation of its datum for this place: no datum shift at all (a ballpark, as in PROJ without the grid), so the raster may lie off by up to a few hundred metres`,
  }
}

/**
 * What to say of a registered code placed with no datum shift at all though its datum is not WGS 84's (a ballpark):
 * epsg-index defines it with neither +towgs84 nor a grid (EPSG has several transformations for it, or none), so proj4
 * takes its coordinates as WGS 84's. A datum on the GRS 80 or WGS 84 ellipsoid (SIRGAS 2000, GDA94, JGD2000, the
 * realizations of WGS 84) is within a metre or two of WGS 84, as PROJ's null transformations take it: nothing to say.
 * A classical datum (Pulkovo, Xian 1980, NTF, Tokyo 1892, …) lies tens to hundreds of metres off. Null: nothing to say.
 */
export function ballparkNote (proj, code) {
  if (code === null || /\+(towgs84|nadgrids|datum)=/.test(proj)) return null
  if (/\+ellps=(GRS80|WGS84)\b/.test(proj)) return null
  const name = record(code)?.name
  return `EPSG:${code}${name ? ` (${name})` : ''} is used with no datum shift to WGS 84 (its definition gives none, and none is guessed): a ballpark, so the raster may lie off by tens to hundreds of metres, as far as its datum is from WGS 84`
}

/**
 * [x, y] factors from a geographic CRS's coordinates to degrees, by its EPSG code's definition (as GDAL reads a
 * registered code, whatever a file's GeogAngularUnitsGeoKey says): NTF (Paris), EPSG:4807, and its kin are in grads;
 * every other code in epsg-index (projected ones too: their unit is a length) is in degrees.
 */
export function angularFactor (code) {
  return record(code)?.unit === 'grad' ? [0.9, 0.9] : [1, 1]
}

/** A PROJ string with GeoTIFF's (and a STAC transform's) axis order, x = easting or longitude: any +axis dropped. */
export const eastingFirst = (proj) => proj.replace(/\+axis=\w+\s*/g, '').trim()

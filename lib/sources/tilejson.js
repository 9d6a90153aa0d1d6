// Shared helpers that turn a kind's raw metadata into the TileJSON 3.0.0 fields of the source contract.
import { WORLD_BOUNDS } from '../tile.js'

const FORMAT_ALIASES = { jpeg: 'jpg', mvt: 'pbf', 'application/x-protobuf': 'pbf', 'application/vnd.maplibre-vector-tile': 'mlt' }

export const normalizeFormat = (format) => {
  if (typeof format !== 'string' || format === '') return undefined
  const f = format.toLowerCase()
  return FORMAT_ALIASES[f] ?? f
}

const finite = (list, length) => Array.isArray(list) && list.length === length && list.every(Number.isFinite)

/** Numbers from "a,b,c" or an array; undefined unless there are exactly `length` finite ones. */
export function numberList (value, length) {
  const list = Array.isArray(value) ? value.map(Number) : typeof value === 'string' ? value.split(',').map(Number) : null
  return finite(list, length) ? list : undefined
}

/** The descriptive TileJSON fields an archive's metadata may hold (MBTiles metadata table, PMTiles JSON). */
export const describedBy = (meta, id) => ({ name: meta.name ?? id, description: meta.description, attribution: meta.attribution, version: meta.version })

/**
 * TileJSON fields (all but `tiles`) from what a kind knows. Missing bounds fall back to the world, a missing center
 * to the middle of the bounds.
 */
export function buildTileJson ({ name, description, attribution, version, minzoom, maxzoom, bounds, center, vectorLayers, format, extra }) {
  const b = bounds ?? WORLD_BOUNDS
  const min = Number.isInteger(minzoom) ? minzoom : 0
  const max = Number.isInteger(maxzoom) ? maxzoom : Math.max(min, 14)
  // No center given: the middle of the bounds, at the zoom where they fill about one tile.
  const fit = Math.floor(Math.log2(360 / Math.max(b[2] - b[0], 1e-9)))
  const c = center ?? [(b[0] + b[2]) / 2, (b[1] + b[3]) / 2, Math.min(Math.max(fit, min), max)]
  const tilejson = {
    tilejson: '3.0.0',
    name,
    description,
    attribution,
    version,
    scheme: 'xyz',
    minzoom: min,
    maxzoom: max,
    bounds: b,
    center: [c[0], c[1], Math.min(Math.max(Math.round(c[2] ?? min), min), max)],
    format,
    ...extra,
  }
  if (Array.isArray(vectorLayers)) tilejson.vector_layers = vectorLayers
  for (const key of Object.keys(tilejson)) if (tilejson[key] === undefined) delete tilejson[key]
  return tilejson
}

// Shared helpers that turn a kind's raw metadata into the TileJSON 3.0.0 fields of the source contract.
import { brotliDecompressSync, gunzipSync, inflateSync } from 'node:zlib'
import { VectorTile } from '@mapbox/vector-tile'
import { PbfReader } from 'pbf'
import { WORLD_BOUNDS } from '../tilemath.js'
import { isVector, sniffEncoding } from '../tiletype.js'

const FORMAT_ALIASES = { jpeg: 'jpg', mvt: 'pbf', 'application/x-protobuf': 'pbf', 'application/vnd.maplibre-vector-tile': 'mlt' }

export const normalizeFormat = (format) => {
  if (typeof format !== 'string' || format === '') return undefined
  const f = format.toLowerCase()
  return FORMAT_ALIASES[f] ?? f
}

const finite = (list, length) => Array.isArray(list) && list.length === length && list.every(Number.isFinite)

/** Numbers from "a,b,c" or an array; undefined unless there are exactly `length` finite ones. */
export function numberList (value, length) {
  // "a,b,c,d" as the MBTiles spec writes it; "[a,b,c,d]" (JSON) as some writers do.
  const list = Array.isArray(value) ? value.map(Number) : typeof value === 'string' ? value.trim().replace(/^\[(.*)\]$/, '$1').split(',').map(Number) : null
  return finite(list, length) ? list : undefined
}

const text = (value) => (typeof value === 'string' ? value : typeof value === 'number' ? String(value) : undefined)

/**
 * A version as TileJSON 3.0.0 wants it (semver): "2" → "2.0.0", "3.3" → "3.3.0", "1.0.0-beta" kept; anything else
 * (a date, a word) left out rather than failing clients that validate.
 */
export function semver (value) {
  const v = text(value)?.trim()
  if (v === undefined) return undefined
  if (/^\d+\.\d+\.\d+([-+][0-9A-Za-z.-]+)?$/.test(v)) return v
  const m = /^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?$/.exec(v)
  return m ? `${Number(m[1])}.${Number(m[2] ?? 0)}.${Number(m[3] ?? 0)}` : undefined
}

/** The descriptive TileJSON fields an archive's metadata may hold (MBTiles metadata table, PMTiles JSON). */
export const describedBy = (meta, id) => ({
  name: text(meta.name) ?? id,
  description: text(meta.description),
  attribution: text(meta.attribution),
  version: semver(meta.version),
})

const clamp = (v, lo, hi) => Math.min(Math.max(v, lo), hi)
const clampZoom = (z) => clamp(Math.round(z), 0, 30)

/**
 * vector_layers as the spec describes them (id and fields required, fields of strings), with each layer's zoom range
 * inside the set's: a file may claim layers down to z0 while its tiles start at z13.
 */
function vectorLayersOf (layers, min, max) {
  if (!Array.isArray(layers)) return undefined
  const out = []
  for (const layer of layers) {
    if (layer === null || typeof layer !== 'object' || typeof layer.id !== 'string') continue
    const fields = {}
    if (layer.fields !== null && typeof layer.fields === 'object') {
      for (const [k, v] of Object.entries(layer.fields)) fields[k] = typeof v === 'string' ? v : String(v)
    }
    const described = { ...layer, fields }
    if (Number.isFinite(layer.minzoom)) described.minzoom = clamp(Math.round(layer.minzoom), min, max)
    else delete described.minzoom
    if (Number.isFinite(layer.maxzoom)) described.maxzoom = clamp(Math.round(layer.maxzoom), described.minzoom ?? min, max)
    else delete described.maxzoom
    if (layer.description !== undefined && typeof layer.description !== 'string') delete described.description
    out.push(described)
  }
  return out
}

const FIELD_TYPES = { number: 'Number', bigint: 'Number', boolean: 'Boolean', string: 'String' } // (MLT's int64 are BigInt)
const DECODERS = { gzip: gunzipSync, deflate: inflateSync, br: brotliDecompressSync }

/**
 * vector_layers read off one MVT tile, for a vector file whose metadata lists none (TileJSON requires them, and a
 * style author needs the layer names); off an MLT tile when `mlt` (@maplibre/mlt, lib/variants/mlt.js loadMlt) is
 * given. Fields are the keys of the layer's first features. Undefined if unreadable.
 */
export function layersOfTile (stored, compression, mlt) {
  try {
    const encoding = sniffEncoding(stored, compression, mlt === undefined ? undefined : 'mlt')
    const raw = encoding === 'identity' ? stored : DECODERS[encoding]?.(stored)
    if (raw === undefined) return undefined
    if (mlt !== undefined) {
      return mlt.decodeTile(new Uint8Array(raw.buffer, raw.byteOffset, raw.byteLength)).map((table) => {
        const fields = {}
        for (const { properties } of table.getFeatures().slice(0, 50)) {
          for (const [k, v] of Object.entries(properties)) fields[k] ??= FIELD_TYPES[typeof v] ?? 'String'
        }
        return { id: table.name, fields }
      })
    }
    const tile = new VectorTile(new PbfReader(raw))
    return Object.values(tile.layers).map((layer) => {
      const fields = {}
      for (let i = 0; i < Math.min(layer.length, 50); i++) {
        for (const [k, v] of Object.entries(layer.feature(i).properties)) fields[k] ??= FIELD_TYPES[typeof v] ?? 'String'
      }
      return { id: layer.name, fields }
    })
  } catch {
    return undefined
  }
}

/**
 * Bounds as TileJSON 3.0.0 allows them: ones across the antimeridian (west above east, as MBTiles metadata, STAC and
 * export boxes write them) widened to the world's width. The spec says bounds must not wrap, and MapLibre's
 * TileBounds.contains() takes west < east: wrapping bounds there match no tile, and a map asks for none.
 */
export const unwrappedBounds = (b) => (b[0] > b[2] ? [-180, b[1], 180, b[3]] : b)

/** A longitude past ±180 brought back onto the globe: 190 → -170, -200 → 160. */
const wrapLongitude = (lon) => (lon >= -180 && lon <= 180 ? lon : ((((lon + 180) % 360) + 360) % 360) - 180)

/**
 * Bounds as a writer must have meant them, in the ranges TileJSON wants: south above north swapped (MapLibre's
 * TileBounds would contain no tile, and a map ask for none, as for bounds that wrap), latitudes clamped to where Web
 * Mercator tiles end (±85.0511°, the world's bounds), longitudes past ±180 brought back (a box 360° wide or more is the
 * world's width; 170…190 is across the antimeridian, 170…-170). West above east is kept: across the antimeridian.
 */
function repairedBounds ([west, south, east, north]) {
  if (south > north) [south, north] = [north, south]
  south = clamp(south, WORLD_BOUNDS[1], WORLD_BOUNDS[3])
  north = clamp(north, WORLD_BOUNDS[1], WORLD_BOUNDS[3])
  if (east - west >= 360) return [-180, south, 180, north]
  return [wrapLongitude(west), south, wrapLongitude(east), north]
}

/**
 * TileJSON fields (all but `tiles`) from what a kind knows, valid against the TileJSON 3.0.0 schema whatever the
 * metadata said: zooms inside 0-30 and ordered, bounds on the globe and ordered (repairedBounds) that do not wrap
 * (unwrappedBounds), the center inside the bounds and the zoom range (a missing one, or one off the globe, is the
 * middle of the bounds, at the zoom where they fill about one tile), layer zooms inside the set's, a semver version.
 */
export function buildTileJson ({ name, description, attribution, version, minzoom, maxzoom, bounds, center, vectorLayers, format, extra }) {
  const b = bounds === undefined ? WORLD_BOUNDS : repairedBounds(bounds)
  const min = Number.isInteger(minzoom) ? clampZoom(minzoom) : 0
  const max = Number.isInteger(maxzoom) ? Math.max(min, clampZoom(maxzoom)) : Math.max(min, 14)
  // Bounds across the antimeridian (west > east, as TileJSON writes them): their width goes through 180°, and so does
  // their middle (176…-178: 179).
  const across = b[0] > b[2]
  const width = across ? b[2] + 360 - b[0] : b[2] - b[0]
  const fit = Math.floor(Math.log2(360 / Math.max(width, 1e-9)))
  const east = b[0] + width / 2 // past 180 for bounds across the antimeridian
  const middle = east > 180 ? east - 360 : east
  // A center off the globe (latitude 100) says nothing of where the data is: the middle of the bounds instead. A
  // longitude past ±180 is brought back as the bounds' are (185 → -175); one outside the bounds moved to their edge.
  const c = center !== undefined && Math.abs(center[1]) <= 90 ? [wrapLongitude(center[0]), center[1], center[2]] : [middle, (b[1] + b[3]) / 2, fit]
  const lon = across ? (c[0] >= b[0] || c[0] <= b[2] ? c[0] : middle) : clamp(c[0], b[0], b[2])
  const lat = clamp(c[1], b[1], b[3])
  const tilejson = {
    tilejson: '3.0.0',
    name,
    description,
    attribution,
    version: semver(version),
    scheme: 'xyz',
    minzoom: min,
    maxzoom: max,
    bounds: unwrappedBounds(b), // (the center above is worked out on the bounds as given: on the data itself)
    center: [lon, lat, clamp(Math.round(Number.isFinite(c[2]) ? c[2] : min), min, max)],
    format,
    ...extra,
  }
  // Vector sets always list their layers (TileJSON 3.0.0 requires the key), if only as [] when nothing tells them.
  const layers = vectorLayersOf(vectorLayers, min, max) ?? (isVector(format) ? [] : undefined)
  if (layers !== undefined) tilejson.vector_layers = layers
  for (const key of Object.keys(tilejson)) if (tilejson[key] === undefined) delete tilejson[key]
  return tilejson
}

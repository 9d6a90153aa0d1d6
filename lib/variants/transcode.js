// A stored vector tile made into another format: MVT → MLT (the official encoder, @maplibre/mlt), MVT or MLT → GeoJSON
// in WGS84. Pure functions of the bytes and the tile's address, run on the event loop for small tiles and in a variants
// worker for large ones (lib/variants/index.js); the same bytes either way.
import zlib from 'node:zlib'
import { VectorTile, classifyRings } from '@mapbox/vector-tile'
import { PbfReader } from 'pbf'
import { loadMlt } from './mlt.js'

/** The property that names a GeoJSON feature's layer (mapbox/vt2geojson's name; a property of the data's own wins). */
export const LAYER_KEY = 'vt_layer'

export const VARIANTS = {
  geojson: { format: 'geojson', contentType: 'application/geo+json', encoding: 'identity' },
  mlt: { format: 'mlt', contentType: 'application/vnd.maplibre-vector-tile', encoding: 'identity' },
}

const DECODE = { gzip: zlib.gunzipSync, deflate: zlib.inflateSync, br: zlib.brotliDecompressSync, zstd: zlib.zstdDecompressSync }

/** Stored bytes without their Content-Encoding. */
export function decodeStored (stored, encoding) {
  if (encoding === 'identity') return stored
  const decode = DECODE[encoding]
  if (decode === undefined) throw new Error(`tiles in ${encoding} cannot be decoded on this Node version`)
  return decode(stored)
}

/**
 * `variant` ('mlt' | 'geojson') of a raw tile of `format` ('pbf' | 'mlt') at z/x/y → Uint8Array. MLT needs the
 * encoder loaded in this thread (`mlt`: what `await loadMlt()` gave; null when neither side is MLT).
 */
export function transcode (variant, format, raw, z, x, y, mlt) {
  if (variant === 'mlt' && format === 'pbf') return mvtToMlt(new VectorTile(new PbfReader(raw)), mlt)
  if (variant === 'geojson' && format === 'pbf') return utf8(JSON.stringify(mvtToGeoJson(new VectorTile(new PbfReader(raw)), z, x, y)))
  if (variant === 'geojson' && format === 'mlt') return utf8(JSON.stringify(mltToGeoJson(mlt.decodeTile(raw), z, x, y)))
  throw new Error(`no ${variant} of ${format} tiles`)
}

/** Whether `transcode(variant, format, …)` needs @maplibre/mlt. */
export const needsMlt = (variant, format) => variant === 'mlt' || format === 'mlt'

/** The same, with the encoder loaded when needed (a worker's first task, or the event loop's first MLT tile). */
export async function transcodeLoaded (variant, format, raw, z, x, y) {
  return transcode(variant, format, raw, z, x, y, needsMlt(variant, format) ? await loadMlt() : null)
}

const utf8 = (text) => Buffer.from(text, 'utf8')

// MVT → MLT: each layer a feature table, encoded on its own with its own column types (an MLT tile is its layers one
// after the other); geometries as GeoJSON nests them, in tile units, rings without their closing point; polygons split
// by winding as the MVT spec says (classifyRings: zero-area rings dropped, as MapLibre does).
function mvtToMlt (tile, mlt) {
  const encoded = []
  for (const name of Object.keys(tile.layers)) {
    const layer = tile.layers[name]
    const features = []
    for (let i = 0; i < layer.length; i++) {
      const feature = layer.feature(i)
      const out = { geometry: tileGeometry(feature.type, feature.loadGeometry()), properties: feature.properties }
      if (feature.id !== undefined) out.id = feature.id
      features.push(out)
    }
    encoded.push(mlt.encodeTile([{ name, extent: layer.extent, features }], { propertyTypes: columnTypes(features) }))
  }
  return encoded.length === 1 ? encoded[0] : Buffer.concat(encoded)
}

const xy = (p) => [p.x, p.y]
/** A ring without its closing point(s): some encoders write the first point again before MVT's ClosePath too. */
const openRing = (ring) => {
  let n = ring.length
  while (n > 1 && ring[0].x === ring[n - 1].x && ring[0].y === ring[n - 1].y) n--
  return ring.slice(0, n).map(xy)
}

function tileGeometry (type, lines) {
  if (type === 1) {
    const points = lines.map((line) => xy(line[0]))
    return points.length === 1 ? { type: 'Point', coordinates: points[0] } : { type: 'MultiPoint', coordinates: points }
  }
  if (type === 2) {
    return lines.length === 1 ? { type: 'LineString', coordinates: lines[0].map(xy) } : { type: 'MultiLineString', coordinates: lines.map((l) => l.map(xy)) }
  }
  if (type === 3) {
    const polygons = classifyRings(lines).map((rings) => rings.map(openRing))
    return polygons.length === 1 ? { type: 'Polygon', coordinates: polygons[0] } : { type: 'MultiPolygon', coordinates: polygons }
  }
  throw new Error(`a feature of unknown geometry type ${type}`)
}

/**
 * Column types the encoder cannot infer well. A column whose values mix types (a number here, a string there: MVT
 * allows it) is a nested (MAP) column, which holds any scalar; integers past 32 bits are doubles (exact up to 2^53),
 * since int64 columns decode as BigInt, which MapLibre's expressions do not take.
 */
function columnTypes (features) {
  const seen = new Map() // name → 'string' | 'boolean' | 'int' | 'number' | 'mixed'
  for (const { properties } of features) {
    for (const name in properties) {
      const v = properties[name]
      const kind = typeof v === 'number' ? (Number.isSafeInteger(v) && v >= -0x80000000 && v <= 0x7fffffff ? 'int' : 'number') : typeof v
      const was = seen.get(name)
      if (was === undefined || was === kind) seen.set(name, kind)
      else if ((was === 'int' || was === 'number') && (kind === 'int' || kind === 'number')) seen.set(name, 'number')
      else seen.set(name, 'mixed')
    }
  }
  const types = {}
  for (const [name, kind] of seen) {
    if (kind === 'mixed') types[name] = 'map'
    else if (kind === 'number') types[name] = 'double'
  }
  return types
}

// GeoJSON: coordinates rounded to what the tile can say (its grid unit at this zoom, with two more digits for the
// latitude's shrinking unit away from the equator), which also keeps the text short.
function rounder (z, extent) {
  const digits = Math.max(0, Math.ceil(Math.log10(2 ** z * extent / 360))) + 2
  const f = 10 ** digits
  return (v) => Math.round(v * f) / f
}

function roundCoordinates (coords, round) {
  if (typeof coords[0] === 'number') {
    coords[0] = round(coords[0])
    coords[1] = round(coords[1])
    return
  }
  for (const c of coords) roundCoordinates(c, round)
}

function mvtToGeoJson (tile, z, x, y) {
  const features = []
  for (const name of Object.keys(tile.layers)) {
    const layer = tile.layers[name]
    const round = rounder(z, layer.extent)
    for (let i = 0; i < layer.length; i++) {
      const feature = layer.feature(i).toGeoJSON(x, y, z)
      roundCoordinates(feature.geometry.coordinates, round)
      if (!(LAYER_KEY in feature.properties)) feature.properties[LAYER_KEY] = name
      features.push(feature)
    }
  }
  return { type: 'FeatureCollection', features }
}

// MLT → GeoJSON: the decoded features' geometries are MVT-like lists of points in tile units; projected as
// @mapbox/vector-tile's toGeoJSON projects them.
const MLT_TYPES = ['Point', 'LineString', 'Polygon', 'MultiPoint', 'MultiLineString', 'MultiPolygon']

function mltToGeoJson (tables, z, x, y) {
  const features = []
  for (const table of tables) {
    const extent = table.extent
    const size = extent * 2 ** z
    const x0 = extent * x
    const y0 = extent * y
    const round = rounder(z, extent)
    const project = (p) => [
      round((p.x + x0) * 360 / size - 180),
      round(360 / Math.PI * Math.atan(Math.exp((1 - (p.y + y0) * 2 / size) * Math.PI)) - 90),
    ]
    for (const f of table.getFeatures()) {
      const type = MLT_TYPES[f.geometry.type]
      const lines = f.geometry.coordinates
      let coordinates
      if (type === 'Point') coordinates = project(lines[0][0])
      else if (type === 'MultiPoint') coordinates = lines.map((l) => project(l[0]))
      else if (type === 'LineString') coordinates = lines[0].map(project)
      else if (type === 'MultiLineString' || type === 'Polygon') coordinates = lines.map((l) => l.map(project))
      else coordinates = classifyRings(lines).map((rings) => rings.map((l) => l.map(project)))
      const properties = {}
      for (const key in f.properties) properties[key] = jsonValue(f.properties[key])
      if (!(LAYER_KEY in properties)) properties[LAYER_KEY] = table.name
      const feature = { type: 'Feature', geometry: { type, coordinates }, properties }
      if (f.id !== undefined) feature.id = jsonValue(f.id)
      features.push(feature)
    }
  }
  return { type: 'FeatureCollection', features }
}

/** MLT's 64-bit integers decode as BigInt, which JSON cannot hold: a number when exact, else its digits. */
function jsonValue (v) {
  if (typeof v !== 'bigint') return v
  return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : String(v)
}

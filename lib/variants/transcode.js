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
  if (variant === 'mlt' && format === 'pbf') return mvtToMlt(new VectorTile(new PbfReader(raw)), raw, mlt)
  if (variant === 'geojson' && format === 'pbf') return utf8(geoJsonText(mvtToGeoJson(new VectorTile(new PbfReader(raw)), raw, z, x, y)))
  // (ids as they are: by default decodeTile reads 64-bit ids as doubles)
  if (variant === 'geojson' && format === 'mlt') return utf8(geoJsonText(mltToGeoJson(mlt.decodeTile(raw, undefined, false), z, x, y)))
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
// by winding as the MVT spec says (classifyRings: zero-area rings dropped, as MapLibre does). Layers without features,
// which @mapbox/vector-tile leaves out, are tables without features after the others: a tile whose only layer was
// empty was an MLT of no bytes, answered 204 as if the set had no tile there.
function mvtToMlt (tile, raw, mlt) {
  const encoded = []
  let exact = null // the tile's 64-bit integers, read once if a feature needs them
  for (const name of Object.keys(tile.layers)) {
    const layer = tile.layers[name]
    const features = []
    for (let i = 0; i < layer.length; i++) {
      const feature = layer.feature(i)
      if (!KNOWN_TYPES.has(feature.type)) continue
      const out = { geometry: tileGeometry(feature.type, feature.loadGeometry()), properties: feature.properties }
      if (feature.id !== undefined) out.id = feature.id
      if (mayBeInexact(out.id) || hasInexact(out.properties)) {
        exact ??= exactIntegers(raw)
        exactFeature(out, exact.get(name), i)
      }
      features.push(out)
    }
    encoded.push(mlt.encodeTile([{ name, extent: layer.extent, features }], { propertyTypes: columnTypes(features) }))
  }
  for (const empty of featurelessLayers(raw, tile)) encoded.push(mlt.encodeTile([{ ...empty, features: [] }]))
  return encoded.length === 1 ? encoded[0] : Buffer.concat(encoded)
}

/**
 * The layers of a raw MVT that have no feature and no namesake in `tile` (its VectorTile): [{ name, extent }], in the
 * tile's order. Only their names and extents are read; everything else is skipped.
 */
function featurelessLayers (raw, tile) {
  const pbf = new PbfReader(raw)
  const found = []
  while (pbf.pos < pbf.length) {
    const tag = pbf.readVarint()
    if (tag !== 26) { // (field 3, a layer)
      pbf.skip(tag)
      continue
    }
    const end = pbf.readVarint() + pbf.pos
    let name = ''
    let extent = 4096
    let features = 0
    while (pbf.pos < end) {
      const field = pbf.readVarint()
      if (field === 10) name = pbf.readString()
      else if (field === 40) extent = pbf.readVarint()
      else {
        if (field === 18) features++
        pbf.skip(field)
      }
    }
    if (features === 0 && !(name in tile.layers) && !found.some((layer) => layer.name === name)) found.push({ name, extent })
  }
  return found
}

// Features of geometry type UNKNOWN (0), which the MVT spec allows and lets decoders ignore (4.3.5), are left out of
// both variants, the tile's other features kept: toGeoJSON throws on them, and the whole tile was a 503.
const KNOWN_TYPES = new Set([1, 2, 3]) // point, line, polygon

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

// What a column's values are (columnTypes), as bits.
const STRING = 1
const BOOLEAN = 2
const OTHER = 4 // (no MVT value; held by a nested column)
const INT32 = 8
const WIDE = 16 // a number past 32 bits or with a fraction
const FRACTION = 32
const INT64 = 64 // a BigInt (past 2^53: exactFeature's)
const UINT64 = 128 // a BigInt past int64
const NEGATIVE = 256
const INT64_MAX = 2n ** 63n - 1n

function valueBits (v) {
  if (typeof v === 'number') {
    // (an integer in a double past 2^63 is a fraction here: an int64 column cannot hold it)
    if (Number.isInteger(v) && v > -(2 ** 63) && v < 2 ** 63) return (v >= -0x80000000 && v <= 0x7fffffff ? INT32 : WIDE) | (v < 0 ? NEGATIVE : 0)
    return WIDE | FRACTION | (v < 0 ? NEGATIVE : 0)
  }
  if (typeof v === 'string') return STRING
  if (typeof v === 'boolean') return BOOLEAN
  if (typeof v === 'bigint') return (v > INT64_MAX ? UINT64 : INT64) | (v < 0n ? NEGATIVE : 0)
  return OTHER
}

/**
 * Column types the encoder cannot infer well. A column whose values mix types (a number here, a string there: MVT
 * allows it) is a nested (MAP) column, which holds any scalar; integers past 32 bits are doubles (exact up to 2^53),
 * since int64 columns decode as BigInt, which MapLibre's expressions do not take. A column holding an integer past
 * 2^53 (exactFeature's BigInt) is int64, or uint64 for one past 2^63, so it is written exactly; nested if it holds a
 * fraction too, or both a negative value and one past 2^63.
 */
function columnTypes (features) {
  const seen = new Map() // name → its values' bits
  for (const { properties } of features) {
    for (const name in properties) seen.set(name, (seen.get(name) ?? 0) | valueBits(properties[name]))
  }
  // No prototype: the encoder reads propertyTypes[name], and a column named toString or constructor would find
  // Object.prototype's member there as its type (a tile MLT decoders cannot read).
  const types = Object.create(null)
  for (const [name, bits] of seen) {
    const numeric = bits & (INT32 | WIDE | INT64 | UINT64)
    const kinds = (bits & STRING ? 1 : 0) + (bits & BOOLEAN ? 1 : 0) + (numeric ? 1 : 0)
    if (kinds > 1 || bits & OTHER) types[name] = 'map'
    else if (bits & UINT64) types[name] = bits & (FRACTION | NEGATIVE) ? 'map' : 'uint64'
    else if (bits & INT64) types[name] = bits & FRACTION ? 'map' : 'int64'
    else if (bits & WIDE) types[name] = 'double'
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

// RFC 7946's right-hand rule (3.1.6): exterior rings counterclockwise, holes clockwise. MVT's exteriors run clockwise
// on screen, which they still do in longitude and latitude (north up either way), and toGeoJSON keeps whichever way
// a tile's rings run. Each ring is turned by the sign of its area in the output's own coordinates (after rounding), so a
// tile of either winding comes out right; a ring of no area is left as it is.
function ringArea (ring) {
  let twice = 0
  for (let i = 0, j = ring.length - 1; i < ring.length; j = i++) twice += (ring[j][0] - ring[i][0]) * (ring[j][1] + ring[i][1])
  return twice // (twice the area, > 0 counterclockwise with y up)
}

function rightHandRings (rings) {
  for (let r = 0; r < rings.length; r++) {
    const area = ringArea(rings[r])
    if (r === 0 ? area < 0 : area > 0) rings[r].reverse()
  }
}

function rightHandRule (geometry) {
  if (geometry.type === 'Polygon') rightHandRings(geometry.coordinates)
  else if (geometry.type === 'MultiPolygon') for (const polygon of geometry.coordinates) rightHandRings(polygon)
}

function mvtToGeoJson (tile, raw, z, x, y) {
  const features = []
  let exact = null // the tile's 64-bit integers, read once if a feature needs them
  for (const name of Object.keys(tile.layers)) {
    const layer = tile.layers[name]
    const round = rounder(z, layer.extent)
    for (let i = 0; i < layer.length; i++) {
      const read = layer.feature(i)
      if (!KNOWN_TYPES.has(read.type)) continue
      const feature = read.toGeoJSON(x, y, z)
      roundCoordinates(feature.geometry.coordinates, round)
      if (read.type === 3) rightHandRule(feature.geometry)
      if (mayBeInexact(feature.id) || hasInexact(feature.properties)) {
        exact ??= exactIntegers(raw)
        if (exactFeature(feature, exact.get(name), i)) BIG.add(feature)
      }
      if (!(LAYER_KEY in feature.properties)) feature.properties[LAYER_KEY] = name
      features.push(feature)
    }
  }
  return { type: 'FeatureCollection', features }
}

// 64-bit integers (OSM-derived ids, 64-bit values) exactly, in both variants. @mapbox/vector-tile reads every varint as
// a JS number, which rounds those past 2^53 (…993 becomes …992), so a client would get another feature's id; and a
// sint's zigzag varint past 2^53 loses its last bit, its sign, so -(2^52 + 1) comes out as 2^52 + 1, a safe integer.
// An integer it gave of magnitude 2^52 or more may be either; only a feature holding one pays for reading the tile's
// varints again here as BigInt. What they are is kept: a number where it fits, else a BigInt.
const mayBeInexact = (v) => typeof v === 'number' && (v >= 2 ** 52 || v <= -(2 ** 52)) && Number.isInteger(v)
const hasInexact = (properties) => {
  for (const key in properties) if (mayBeInexact(properties[key])) return true
  return false
}
const BIG = new WeakSet() // features holding a BigInt, which geoJsonText writes as a number literal

/**
 * `feature` ({ id, properties } of feature `i` of its layer, as @mapbox/vector-tile read them) with its id and integer
 * values as `layer` (exactIntegers) has them. Whether one is a BigInt.
 */
function exactFeature (feature, layer, i) {
  const read = layer?.features[i]
  if (read === undefined) return false
  let big = false
  if (mayBeInexact(feature.id) && read.id !== undefined) {
    feature.id = jsonValue(read.id)
    big = typeof feature.id === 'bigint'
  }
  const values = new Map() // a key's last value wins, as it does in @mapbox/vector-tile
  for (let t = 0; t + 1 < read.tags.length; t += 2) values.set(layer.keys[read.tags[t]], layer.values[read.tags[t + 1]])
  for (const [key, value] of values) {
    if (typeof value !== 'bigint' || !mayBeInexact(feature.properties[key])) continue
    feature.properties[key] = jsonValue(value)
    if (typeof feature.properties[key] === 'bigint') big = true
  }
  return big
}

/** The varint at `pos` of `buf` as a BigInt: [value, position after it]. */
function varint64 (buf, pos) {
  let value = 0n
  let shift = 0n
  let b
  do {
    if (pos >= buf.length) throw new Error('a varint runs past the end of the tile')
    b = buf[pos++]
    value |= BigInt(b & 0x7f) << shift
    shift += 7n
  } while (b >= 0x80)
  return [value, pos]
}

/** Calls `field(number, wireType, pos)` for each field of the message in buf[pos, end); `field` returns the next position. */
function eachField (buf, pos, end, field) {
  while (pos < end) {
    const [key, at] = varint64(buf, pos)
    const wire = Number(key & 7n)
    const number = Number(key >> 3n)
    if (wire === 0) pos = field(number, wire, at) ?? varint64(buf, at)[1]
    else if (wire === 2) {
      const [length, start] = varint64(buf, at)
      pos = start + Number(length)
      field(number, wire, start, pos)
    } else if (wire === 1) pos = at + 8
    else if (wire === 5) pos = at + 4
    else throw new Error(`wire type ${wire} in a vector tile`)
  }
}

/**
 * A tile's layers (by name, the last of a name with features, as @mapbox/vector-tile keeps them) as
 * { keys, values (BigInt for int, uint and sint values, else null), features: [{ id (BigInt), tags }] }.
 */
function exactIntegers (buf) {
  const layers = new Map()
  eachField(buf, 0, buf.length, (n, wire, start, end) => {
    if (n !== 3 || wire !== 2) return
    const layer = { name: '', keys: [], values: [], features: [] }
    eachField(buf, start, end, (ln, lw, ls, le) => {
      if (lw !== 2) return
      if (ln === 1) layer.name = Buffer.from(buf.buffer, buf.byteOffset + ls, le - ls).toString('utf8')
      else if (ln === 3) layer.keys.push(Buffer.from(buf.buffer, buf.byteOffset + ls, le - ls).toString('utf8'))
      else if (ln === 4) {
        let value = null
        eachField(buf, ls, le, (vn, vw, vs) => {
          if (vw !== 0) return
          const [v, next] = varint64(buf, vs)
          // int64 (4): two's complement; uint64 (5); sint64 (6): zigzag; a bool (7) is no integer
          value = vn === 4 ? BigInt.asIntN(64, v) : vn === 5 ? v : vn === 6 ? (v >> 1n) ^ -(v & 1n) : null
          return next
        })
        layer.values.push(value)
      } else if (ln === 2) {
        const feature = { id: undefined, tags: [] }
        eachField(buf, ls, le, (fn, fw, fs, fe) => {
          if (fn === 1 && fw === 0) {
            const [id, next] = varint64(buf, fs)
            feature.id = id
            return next
          }
          if (fn === 2 && fw === 2) for (let p = fs; p < fe;) { const [tag, next] = varint64(buf, p); feature.tags.push(Number(tag)); p = next }
        })
        layer.features.push(feature)
      }
    })
    if (layer.features.length > 0) layers.set(layer.name, layer)
  })
  return layers
}

/**
 * A FeatureCollection as JSON text. JSON.stringify refuses BigInt, and JSON (RFC 8259) allows integers of any size as
 * number literals: features holding one (BIG) are written here, each BigInt as its digits; the rest as JSON.stringify
 * writes them.
 */
function geoJsonText (collection) {
  if (!collection.features.some((f) => BIG.has(f))) return JSON.stringify(collection)
  const value = (v) => (typeof v === 'bigint' ? v.toString() : JSON.stringify(v))
  const object = (o) => `{${Object.keys(o).filter((k) => o[k] !== undefined).map((k) => `${JSON.stringify(k)}:${value(o[k])}`).join(',')}}`
  const feature = (f) => {
    if (!BIG.has(f)) return JSON.stringify(f)
    return `{${Object.keys(f).filter((k) => f[k] !== undefined).map((k) => `${JSON.stringify(k)}:${k === 'properties' ? object(f[k]) : value(f[k])}`).join(',')}}`
  }
  return `{"type":"FeatureCollection","features":[${collection.features.map(feature).join(',')}]}`
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
    // The table's columns read as getFeatures() reads them, but into objects without a prototype: getFeatures()
    // writes properties[name] into a plain object, where a column named __proto__ is lost.
    const geometries = table.geometryVector.getGeometries()
    const columns = table.propertyVectors.filter((column) => column)
    for (let i = 0; i < table.numFeatures; i++) {
      const type = MLT_TYPES[table.geometryVector.geometryType(i)]
      const lines = geometries[i]
      let coordinates
      if (type === 'Point') coordinates = project(lines[0][0])
      else if (type === 'MultiPoint') coordinates = lines.map((l) => project(l[0]))
      else if (type === 'LineString') coordinates = lines[0].map(project)
      else if (type === 'MultiLineString' || type === 'Polygon') coordinates = lines.map((l) => l.map(project))
      else coordinates = classifyRings(lines).map((rings) => rings.map((l) => l.map(project)))
      const properties = Object.create(null)
      let big = false
      for (const column of columns) {
        const value = column.getValue(i)
        if (value === null) continue
        const json = jsonValue(value)
        properties[column.name] = json
        if (typeof json === 'bigint') big = true
      }
      if (!(LAYER_KEY in properties)) properties[LAYER_KEY] = table.name
      const feature = { type: 'Feature', geometry: { type, coordinates }, properties }
      rightHandRule(feature.geometry)
      const id = table.idVector?.getValue(i) ?? null
      // (a 64-bit id column is uint64, read into a BigInt64Array: 2^64 - 1 comes out as -1n)
      if (id !== null) feature.id = jsonValue(typeof id === 'bigint' ? BigInt.asUintN(64, id) : id)
      if (big || typeof feature.id === 'bigint') BIG.add(feature)
      features.push(feature)
    }
  }
  return { type: 'FeatureCollection', features }
}

const MIN_SAFE_BIGINT = BigInt(Number.MIN_SAFE_INTEGER)
const MAX_SAFE_BIGINT = BigInt(Number.MAX_SAFE_INTEGER)

/**
 * A 64-bit integer read as BigInt (MLT's, or a tile's varint read again by exactIntegers): a number when it fits, else
 * kept, for geoJsonText to write exactly.
 */
function jsonValue (v) {
  if (typeof v !== 'bigint') return v
  return v >= MIN_SAFE_BIGINT && v <= MAX_SAFE_BIGINT ? Number(v) : v
}

// GeoJSON files (RFC 7946: WGS84 lon/lat) as vector tiles: read and indexed once when opened (geojson-vt), each tile
// cut from the index on request and encoded as MVT, one layer named after the set. For the small to medium files people
// keep as GeoJSON; a big one belongs in PostGIS, MBTiles or PMTiles.
import { readFile, stat } from 'node:fs/promises'
import GeoJSONVT from 'geojson-vt'
import vtpbf from 'vt-pbf'
import { buildTileJson } from './tilejson.js'

export const kind = 'geojson'
export const title = 'GeoJSON'
export const extensions = ['.geojson']

// geojson-vt holds several times the file in memory, and cuts tiles on the event loop (fast for files of this size;
// the tile cache keeps each cut to once): bigger data belongs in PostGIS, MBTiles or PMTiles.
const MAX_BYTES = 64 * 2 ** 20
const MAX_ZOOM = 14 // geojson-vt keeps detail to here; past it clients overzoom
const FIELD_TYPES = { number: 'Number', boolean: 'Boolean', string: 'String' }

/** A Feature, a bare geometry or a FeatureCollection → a FeatureCollection; throws with a reason otherwise. */
function asCollection (data) {
  if (data?.type === 'FeatureCollection' && Array.isArray(data.features)) return data
  if (data?.type === 'Feature') return { type: 'FeatureCollection', features: [data] }
  if (typeof data?.type === 'string' && (Array.isArray(data.coordinates) || Array.isArray(data.geometries))) {
    return { type: 'FeatureCollection', features: [{ type: 'Feature', geometry: data, properties: {} }] }
  }
  throw new Error('not GeoJSON: no FeatureCollection, Feature or geometry at the top')
}

/** [west, south, east, north] of every coordinate, or undefined for no coordinates. */
function boundsOf (collection) {
  const b = [Infinity, Infinity, -Infinity, -Infinity]
  const visit = (c) => {
    if (typeof c[0] === 'number') {
      if (c[0] < b[0]) b[0] = c[0]
      if (c[1] < b[1]) b[1] = c[1]
      if (c[0] > b[2]) b[2] = c[0]
      if (c[1] > b[3]) b[3] = c[1]
    } else for (const inner of c) visit(inner)
  }
  const geometry = (g) => {
    if (!g) return
    if (g.type === 'GeometryCollection') g.geometries?.forEach(geometry)
    else if (Array.isArray(g.coordinates)) visit(g.coordinates)
  }
  for (const f of collection.features) geometry(f?.geometry)
  if (!(b[0] <= b[2] && b[1] <= b[3])) return undefined
  return [Math.max(-180, b[0]), Math.max(-85.0511287798, b[1]), Math.min(180, b[2]), Math.min(85.0511287798, b[3])]
}

/** The properties the features carry, with their types (the first type seen wins). */
function fieldsOf (collection) {
  const fields = {}
  for (const f of collection.features) {
    for (const [k, v] of Object.entries(f?.properties ?? {})) fields[k] ??= FIELD_TYPES[typeof v] ?? 'String'
  }
  return fields
}

/**
 * A source made of features in memory (also the demo's). `layer` names the MVT layer; `describe` carries the TileJSON
 * name, description and attribution, and `metadata` what /meta shows.
 */
export function featureSource ({ id, kind: sourceKind = kind, collection, layer = id, maxzoom = MAX_ZOOM, describe = {}, metadata = {}, center }) {
  const index = new GeoJSONVT(collection, { maxZoom: maxzoom, indexMaxZoom: Math.min(5, maxzoom), buffer: 64, extent: 4096 })
  return {
    id,
    kind: sourceKind,
    format: 'pbf',
    hints: { format: 'pbf' },
    metadata,
    tilejson: buildTileJson({
      name: id,
      ...describe,
      minzoom: 0,
      maxzoom,
      bounds: boundsOf(collection),
      center,
      vectorLayers: [{ id: layer, fields: fieldsOf(collection), minzoom: 0, maxzoom }],
      format: 'pbf',
    }),
    async getTile (z, x, y) {
      const tile = index.getTile(z, x, y)
      if (tile === null || tile.features.length === 0) return null
      const pbf = vtpbf.fromGeojsonVt({ [layer]: tile }, { version: 2 })
      return Buffer.from(pbf.buffer, pbf.byteOffset, pbf.byteLength)
    },
    close () {},
  }
}

export async function open (spec) {
  const { size } = await stat(spec.path)
  if (size > MAX_BYTES) throw new Error(`GeoJSON file too large to tile in memory (${Math.round(size / 2 ** 20)} MiB; at most ${MAX_BYTES / 2 ** 20}): load it into PostGIS or convert it to PMTiles`)
  let data
  try {
    data = JSON.parse((await readFile(spec.path, 'utf8')).replace(/^\uFEFF/, '')) // a byte order mark, as Windows tools write: RFC 8259 lets parsers ignore it
  } catch (err) {
    throw new Error(`not valid JSON: ${String(err.message).split('\n')[0]}`)
  }
  const collection = asCollection(data)
  return featureSource({ id: spec.id, collection, metadata: { features: collection.features.length, bytes: size, name: data.name } })
}

// What an export says about itself: the MBTiles metadata rows (MBTiles 1.3) and the folder's tiles.json (TileJSON
// 3.0.0), both from one description made of the set's TileJSON and the job.
import { isVector } from '../tiletype.js'
import { unwrappedBounds } from '../sources/tilejson.js'

const clamp = (v, lo, hi) => Math.min(Math.max(v, lo), hi)

/** (set's TileJSON, job) → { name, description, attribution, version, format, bounds, center, minzoom, maxzoom, type, vectorLayers } */
export function describeExport (tilejson, job) {
  const [minzoom, maxzoom] = job.zooms
  const [w, s, e, n] = job.bbox
  const c = tilejson.center
  // The set's centre when it lies in the exported area, else the area's middle.
  // (An area across the antimeridian has west above east: its middle is past 180 before it is wrapped.)
  const across = w > e
  const inside = Array.isArray(c) && (across ? c[0] >= w || c[0] <= e : c[0] >= w && c[0] <= e) && c[1] >= s && c[1] <= n
  const middle = across ? ((w + e + 360) / 2 + 180) % 360 - 180 : (w + e) / 2
  const center = inside ? [c[0], c[1], clamp(Math.round(c[2] ?? minzoom), minzoom, maxzoom)] : [middle, (s + n) / 2, minzoom]
  const vector = isVector(job.format)
  return {
    name: tilejson.name ?? job.set,
    description: tilejson.description,
    attribution: tilejson.attribution,
    version: tilejson.version,
    format: job.format,
    bounds: unwrappedBounds(job.bbox), // a box across the antimeridian: the world's width (TileJSON's bounds never wrap)
    center,
    minzoom,
    maxzoom,
    type: vector ? 'overlay' : 'baselayer',
    // Each layer's zooms within the export's: a layer said to reach z22 has none past the export's last zoom.
    vectorLayers: vector
      ? (tilejson.vector_layers ?? []).map((layer) => {
          const lo = clamp(layer.minzoom ?? minzoom, minzoom, maxzoom)
          return { ...layer, minzoom: lo, maxzoom: clamp(layer.maxzoom ?? maxzoom, lo, maxzoom) }
        })
      : undefined,
  }
}

/** The MBTiles metadata rows, [name, value] (values as text, as the spec has them). */
export function mbtilesMetadata (d) {
  const rows = [
    ['name', d.name],
    ['format', d.format],
    ['bounds', d.bounds.join(',')],
    ['center', d.center.join(',')],
    ['minzoom', String(d.minzoom)],
    ['maxzoom', String(d.maxzoom)],
    ['type', d.type],
  ]
  for (const key of ['description', 'attribution', 'version']) if (typeof d[key] === 'string') rows.push([key, d[key]])
  if (d.vectorLayers !== undefined) rows.push(['json', JSON.stringify({ vector_layers: d.vectorLayers })])
  return rows
}

/** tiles.json of a folder export: TileJSON 3.0.0 whose tiles URL is relative to the file, `{z}/{x}/{y}.ext`. */
export function folderTileJson (d, ext) {
  const tj = { tilejson: '3.0.0', name: d.name }
  for (const key of ['description', 'attribution', 'version']) if (typeof d[key] === 'string') tj[key] = d[key]
  Object.assign(tj, { scheme: 'xyz', tiles: [`{z}/{x}/{y}.${ext}`], minzoom: d.minzoom, maxzoom: d.maxzoom, bounds: d.bounds, center: d.center, format: d.format })
  if (d.vectorLayers !== undefined) tj.vector_layers = d.vectorLayers
  return tj
}

// What a style asks that the engine cannot draw as asked, found before it is drawn: a source naming a set of the other
// kind (failing every render of the style with "invalid tag exception", naming nothing), and expressions the bundled
// MapLibre Native does not know (the layers using them vanish without a word).
import { isImage, isVector } from '../../tiletype.js'
import { EMPTY_TILES } from './style.js'

const SET_TILES = /^tc:\/\/tiles\/([^/]+)\//

/**
 * Expressions of the style spec each engine drops a layer for, found by drawing a layer with each of the spec's
 * expressions with mapli 0.4.1 (they are also the ones its library holds no name of). The native child
 * (@maplibre/maplibre-gl-native) could not be run here: not checked, so nothing is said for it.
 */
const UNSUPPORTED_EXPRESSIONS = {
  mapli: ['global-state', 'interpolate-hcl', 'interpolate-lab', 'semiliteral'],
}

/**
 * The sources of `rendered` (render/style.js renderStyle: { json, used }) that name a set of the other kind: a vector
 * source over image tiles, a raster or raster-dem one over vector tiles. They are drawn empty, in place (and their sets
 * no longer counted as drawn, unless another source draws them), as a set that is missing is: the rest of the map is
 * what a user wants to see, and MapLibre GL JS draws it too. Returns [{ source, set, format, type }].
 */
export function sourcesOfOtherKind (rendered) {
  const found = []
  const byId = new Map(rendered.used.map((e) => [e.id, e]))
  for (const [name, source] of Object.entries(rendered.json.sources ?? {})) {
    if (source === null || typeof source !== 'object' || !Array.isArray(source.tiles)) continue
    const kept = source.tiles.filter((url) => {
      const m = SET_TILES.exec(url)
      const entry = m === null ? undefined : byId.get(decodeURIComponent(m[1]))
      const format = entry?.source?.format
      const other = source.type === 'vector' ? isImage(format) : (source.type === 'raster' || source.type === 'raster-dem') && isVector(format)
      if (other) found.push({ source: name, set: entry.id, format, type: source.type })
      return !other
    })
    if (kept.length < source.tiles.length) source.tiles = kept.length > 0 ? kept : EMPTY_TILES
  }
  if (found.length > 0) {
    const drawn = JSON.stringify(rendered.json.sources)
    rendered.used = rendered.used.filter((e) => drawn.includes(`tc://tiles/${encodeURIComponent(e.id)}/`))
  }
  return found
}

/** The layers of `json` using an expression `backend` does not support: [{ layer, expression }]. */
export function unsupportedLayers (json, backend) {
  const names = UNSUPPORTED_EXPRESSIONS[backend]
  if (names === undefined) return []
  const found = []
  for (const layer of json.layers ?? []) {
    const used = new Set()
    for (const part of [layer?.filter, layer?.layout, layer?.paint]) collect(part, names, used)
    for (const expression of used) found.push({ layer: layer.id, expression })
  }
  return found
}

/** Adds the names of `names` that `value` uses as an expression to `used` (a `literal`'s value and `match` labels are data). */
function collect (value, names, used) {
  if (Array.isArray(value)) {
    if (value[0] === 'literal') return
    if (typeof value[0] === 'string' && names.includes(value[0])) used.add(value[0])
    const match = value[0] === 'match'
    value.forEach((item, i) => { if (!(match && i >= 2 && i % 2 === 0 && i < value.length - 1)) collect(item, names, used) })
  } else if (value !== null && typeof value === 'object') {
    for (const item of Object.values(value)) collect(item, names, used)
  }
}

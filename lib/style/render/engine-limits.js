// What a style asks that the engine cannot draw as asked, found before it is drawn: a source naming a set of the other
// kind (failing every render of the style with "invalid tag exception", naming nothing).
import { isVector } from '../../tiletype.js'

const IMAGES = new Set(['png', 'jpg', 'webp'])
const EMPTY_TILES = ['tc://empty/{z}/{x}/{y}']
const SET_TILES = /^tc:\/\/tiles\/([^/]+)\//

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
      const other = source.type === 'vector' ? IMAGES.has(format) : (source.type === 'raster' || source.type === 'raster-dem') && isVector(format)
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

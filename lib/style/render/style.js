// The style a renderer child draws: its sets, glyphs and sprites given as `tc://` URLs, which the child asks the parent
// for (lib/style/render/index.js answers them from the pipeline), never over loopback HTTP.
import { setNameOf, spritePathOf } from '../rewrite.js'

/**
 * `findSet(name)` → the entry a source name means (or undefined); `hasFonts`: glyphs come from the fonts folder (a
 * remote `glyphs` too, as tileserver-gl does: a renderer offline or behind a firewall still draws labels).
 * Returns { json, used }: the style to draw, and the entries of the sets it draws (their tiles make its tiles).
 */
export function renderStyle (style, findSet, hasFonts) {
  const json = structuredClone(style.json)
  const used = []
  for (const source of Object.values(json.sources)) {
    if (source === null || typeof source !== 'object' || typeof source.url !== 'string') continue
    const name = setNameOf(source.url)
    const entry = name === null ? undefined : findSet(name)
    if (entry === undefined || entry.source === null) continue // unknown or unavailable: drawn without it
    used.push(entry)
    const tj = entry.source.tilejson
    delete source.url
    // The set's cache key in the URL: a replaced or purged set is new to the engine too (it keeps tiles it loaded).
    source.tiles = [`tc://tiles/${encodeURIComponent(entry.id)}/${encodeURIComponent(entry.key)}/{z}/{x}/{y}`]
    source.minzoom = tj.minzoom
    source.maxzoom = tj.maxzoom
    if (Array.isArray(tj.bounds)) source.bounds = tj.bounds
    if (source.type === 'raster' || source.type === 'raster-dem') source.tileSize ??= 256
  }
  if (hasFonts || (typeof json.glyphs === 'string' && !/^[a-z][a-z0-9+.-]*:/i.test(json.glyphs))) json.glyphs = 'tc://fonts/{fontstack}/{range}.pbf'
  if (spritePathOf(style) !== null) json.sprite = `tc://sprites/${encodeURIComponent(style.id)}/_`
  else if (Array.isArray(json.sprite)) {
    json.sprite = json.sprite.map((s) => (spritePathOf(style, s?.id) !== null ? { ...s, url: `tc://sprites/${encodeURIComponent(style.id)}/${encodeURIComponent(s.id)}` } : s))
  }
  return { json, used }
}

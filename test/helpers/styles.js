// OSM Liberty (../shared/fixtures) as a user would keep it in a styles folder: its sprites beside it, its vector
// source pointing at koh-samui served here, its remote raster relief left out (this machine has no internet).
import { cpSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { FIXTURES } from './app.js'

/** Writes `styles`/liberty/style.json (+ sprites) and returns the style as written. */
export function writeLiberty (styles) {
  cpSync(join(FIXTURES, 'styles', 'osm-liberty'), join(styles, 'liberty'), { recursive: true })
  const file = join(styles, 'liberty', 'style.json')
  const liberty = JSON.parse(readFileSync(file, 'utf8'))
  liberty.sprite = 'sprites/osm-liberty'
  liberty.glyphs = '{fontstack}/{range}.pbf'
  liberty.sources.openmaptiles.url = 'mbtiles://koh-samui_thailand'
  delete liberty.sources.natural_earth_shaded_relief
  liberty.layers = liberty.layers.filter((l) => l.source !== 'natural_earth_shaded_relief')
  writeFileSync(file, JSON.stringify(liberty))
  return liberty
}

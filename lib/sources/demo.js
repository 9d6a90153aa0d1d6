// The built-in demo: world countries (Natural Earth 1:50m via the world-atlas package) as vector tiles, cut on demand
// by geojson-vt (through the GeoJSON kind). Lets `npm start` show something with no data and no download.
import { createRequire } from 'node:module'
import { feature } from 'topojson-client'
import { featureSource } from './geojson.js'

export const kind = 'demo'
export const title = 'the built-in demo'
export const fallback = true // served when nothing else is
const require = createRequire(import.meta.url)

export async function open (spec) {
  const topology = require('world-atlas/countries-50m.json')
  const countries = feature(topology, topology.objects.countries)
  for (const f of countries.features) {
    f.properties = { name: f.properties.name, iso_n3: f.id ?? null }
    const polygons = f.geometry?.type === 'Polygon' ? [f.geometry.coordinates] : f.geometry?.type === 'MultiPolygon' ? f.geometry.coordinates : []
    for (const polygon of polygons) polygon.forEach(unwrapRing)
  }
  const attribution = 'Made with Natural Earth (public domain), via world-atlas'
  return featureSource({
    id: spec.id,
    kind,
    collection: countries,
    layer: 'countries',
    maxzoom: 8,
    center: [0, 20, 1],
    describe: { name: 'World countries (demo)', description: 'Natural Earth 1:50m countries, built in, for trying tile-cannon without data', attribution },
    metadata: { name: 'World countries (demo)', attribution, source: 'world-atlas countries-50m' },
  })
}

/**
 * world-atlas keeps a ring that crosses the antimeridian whole, jumping from 180 to -180 (d3 draws on the sphere);
 * on a flat map that jump is a band across the world. Made continuous past ±180 instead, geojson-vt cuts it at the
 * antimeridian and wraps the part beyond. A ring round a pole (Antarctica) ends a world away from where it starts:
 * left as it is.
 */
function unwrapRing (ring) {
  const lons = ring.map((p) => p[0])
  for (let i = 1; i < lons.length; i++) {
    while (lons[i] - lons[i - 1] > 180) lons[i] -= 360
    while (lons[i] - lons[i - 1] < -180) lons[i] += 360
  }
  if (Math.abs(lons[lons.length - 1] - lons[0]) > 1e-9) return
  ring.forEach((p, i) => { p[0] = lons[i] })
}

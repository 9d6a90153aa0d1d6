// The built-in demo: world countries (Natural Earth 1:50m via the world-atlas package) as vector tiles, cut on demand
// by geojson-vt. Lets `npm start` show something with no data and no download.
import { createRequire } from 'node:module'
import GeoJSONVT from 'geojson-vt'
import { feature } from 'topojson-client'
import vtpbf from 'vt-pbf'
import { buildTileJson } from './tilejson.js'

export const kind = 'demo'
const require = createRequire(import.meta.url)
const MAX_ZOOM = 8
const LAYER = 'countries'

export async function open (spec) {
  const topology = require('world-atlas/countries-50m.json')
  const countries = feature(topology, topology.objects.countries)
  for (const f of countries.features) f.properties = { name: f.properties.name, iso_n3: f.id ?? null }
  const index = new GeoJSONVT(countries, { maxZoom: MAX_ZOOM, indexMaxZoom: 4, buffer: 64, extent: 4096 })
  const attribution = 'Made with Natural Earth (public domain), via world-atlas'
  return {
    id: spec.id,
    kind,
    format: 'pbf',
    hints: { format: 'pbf' },
    metadata: { name: 'World countries (demo)', attribution, source: 'world-atlas countries-50m' },
    tilejson: buildTileJson({
      name: 'World countries (demo)',
      description: 'Natural Earth 1:50m countries, built in, for trying tile-cannon without data',
      attribution,
      minzoom: 0,
      maxzoom: MAX_ZOOM,
      center: [0, 20, 1],
      vectorLayers: [{ id: LAYER, fields: { name: 'String', iso_n3: 'String' }, minzoom: 0, maxzoom: MAX_ZOOM }],
      format: 'pbf',
    }),
    async getTile (z, x, y) {
      const tile = index.getTile(z, x, y)
      if (tile === null || tile.features.length === 0) return null
      const pbf = vtpbf.fromGeojsonVt({ [LAYER]: tile }, { version: 2 })
      return Buffer.from(pbf.buffer, pbf.byteOffset, pbf.byteLength)
    },
    close () {},
  }
}

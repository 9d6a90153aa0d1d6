// Rasters that wrap round the world or reach past its edges, against gdalwarp: a global grid laid out 0..360 (GFS,
// ERA5, CMIP exports), one laid out -179..181, a regional grid across the antimeridian written 170..190, and a polar
// stereographic raster holding the South Pole. Each tile is compared with the one GDAL cuts from the same file
// (`gdalwarp -t_srs EPSG:3857 -te <tile bounds> -ts 256 256`), as test/cog.test.js does.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { makeApp, needs } from './helpers/app.js'
import { tempDir } from './helpers/data.js'
import { HAVE_GDAL, NO_GDAL, makeCog, matchesGdal, pattern } from './helpers/gdal-tiles.js'
import { lonLatToTile } from '../lib/tilemath.js'

test('a global grid laid out 0..360 or -179..181 is served whole: world bounds, tiles west of Greenwich from its part past 180°', async (t) => {
  if (!needs(t, HAVE_GDAL, NO_GDAL)) return
  const dir = tempDir(t)
  const files = {
    world_0_360: makeCog(dir, 'world_0_360', { width: 720, height: 360, srs: 'EPSG:4326', ullr: [0, 90, 360, -90] }, pattern),
    world_shifted: makeCog(dir, 'world_shifted', { width: 720, height: 356, srs: 'EPSG:4326', ullr: [-179, 89, 181, -89] }, pattern),
  }
  const app = await makeApp(t, { paths: Object.values(files), cacheMB: 0 })
  for (const id of Object.keys(files)) {
    const { bounds } = (await app.inject(`/${id}.json`)).json()
    assert.deepEqual([bounds[0], bounds[2]], [-180, 180], `${id}: bounds ${bounds}`)
  }
  // The whole world at z0, and west of Greenwich (read from 180..360); then tiles ending at Greenwich, the grid's own
  // edge, where GDAL too finds both ends of the grid: against the level they need.
  for (const tile of [[0, 0, 0], [2, 0, 1], [3, 2, 4], [2, 0, 2], [4, 9, 6]]) await matchesGdal(app, dir, 'world_0_360', files.world_0_360, tile)
  for (const tile of [[1, 0, 0], [2, 1, 2], [3, 3, 3], [5, 15, 17]]) await matchesGdal(app, dir, 'world_0_360', files.world_0_360, tile, { ovr: 'NONE' })
  // The strip -180..-179, read from 180..181; tiles across -179, where the grid's two ends meet (upsampled: the full
  // resolution is GDAL's answer too, once it reads the level the tile needs).
  for (const lonLat of [[-179.5, 10], [-179, 40], [-179, -60]]) {
    for (const z of [3, 5]) await matchesGdal(app, dir, 'world_shifted', files.world_shifted, [z, ...lonLatToTile(...lonLat, z)], { ovr: 'NONE' })
  }
  await matchesGdal(app, dir, 'world_shifted', files.world_shifted, [3, 4, 3])
})

test('a grid across the antimeridian, laid out 170..190 or -190..-170, keeps every column on both sides', async (t) => {
  if (!needs(t, HAVE_GDAL, NO_GDAL)) return
  const dir = tempDir(t)
  const size = { width: 1600, height: 1280, srs: 'EPSG:4326' }
  const east = makeCog(dir, 'am_east', { ...size, ullr: [170, -10, 190, -26] }, pattern)
  const west = makeCog(dir, 'am_west', { ...size, ullr: [-190, -10, -170, -26] }, pattern)
  const app = await makeApp(t, { paths: [east, west], cacheMB: 0 })
  // Tiles at the east edge (-170), where 1-4 columns were lost, and at the west edge (170) and the antimeridian; GDAL's
  // reference is the grid written on the side the tile is on (the same pixels), so gdalwarp need not wrap either.
  const atEastEdge = [[5, 0, 16], [6, 1, 33], [7, 3, 67], [9, 14, 270], [10, 28, 540]]
  const atWestEdge = [[5, 31, 16], [7, 124, 67], [9, 497, 270]]
  const across = [[4, 0, 8], [4, 15, 8], [6, 63, 33], [6, 0, 33]]
  for (const id of ['am_east', 'am_west']) {
    for (const tile of [...atEastEdge, ...across.filter(([, x]) => x === 0)]) await matchesGdal(app, dir, id, west, tile)
    for (const tile of [...atWestEdge, ...across.filter(([, x]) => x > 0)]) await matchesGdal(app, dir, id, east, tile)
  }
})

test('a polar raster holding a pole spans every longitude to that pole\'s Mercator edge; one beside the pole does not', async (t) => {
  if (!needs(t, HAVE_GDAL, NO_GDAL)) return
  const dir = tempDir(t)
  // Antarctic polar stereographic, 3000 × 2500 km round the South Pole at 1.25 km; and the Arctic one (NSIDC) beside
  // the North Pole, from 66°N to 81°N (the pole itself is 1000 km past its top).
  const south = makeCog(dir, 'antarctic', { width: 2400, height: 2000, srs: 'EPSG:3031', ullr: [-1500000, 1250000, 1500000, -1250000] }, pattern)
  const beside = makeCog(dir, 'arctic_beside', { width: 400, height: 400, srs: 'EPSG:3413', ullr: [-800000, -1000000, 800000, -2600000] }, pattern)
  const app = await makeApp(t, { paths: [south, beside], cacheMB: 0 })
  const { bounds } = (await app.inject('/antarctic.json')).json()
  assert.deepEqual([bounds[0], bounds[1], bounds[2]], [-180, -85.05112877980659, 180], `antarctic bounds ${bounds}`)
  // The wedge along the antimeridian that a 33 × 33 sample of the edges misses (-178°, -81° lies inside the raster).
  for (const tile of [[7, 0, 115], [8, 0, 231], [8, 2, 231], [8, 7, 231], [6, 31, 57]]) await matchesGdal(app, dir, 'antarctic', south, tile)
  const arctic = (await app.inject('/arctic_beside.json')).json()
  assert.ok(arctic.bounds[0] > -180 && arctic.bounds[2] < 180 && arctic.bounds[3] < 85, `arctic bounds ${arctic.bounds}`)
})

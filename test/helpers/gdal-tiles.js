// Tiles of a COG set against gdalwarp's from the same file, for tests on rasters made here with GDAL: a one-band 8-bit
// COG from a function of column and row, and the comparison of a tile (transparency, grey levels, lost pixels).
import assert from 'node:assert/strict'
import { execFileSync, spawnSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import sharp from 'sharp'
import { fromFile } from 'geotiff'
import { tileExtent } from '../../lib/tilemath.js'

export const HAVE_GDAL = spawnSync('gdalwarp', ['--version']).status === 0
export const NO_GDAL = 'gdal-bin (gdalwarp, gdal_translate) is not installed'

/**
 * A one-band 8-bit COG made with GDAL from f(col, row): `ullr` its corners in `srs` (an Esri ASCII grid, then
 * gdal_translate with overviews).
 */
export function makeCog (dir, name, { width, height, srs, ullr }, f) {
  const asc = join(dir, name + '.asc')
  const lines = [`ncols ${width}`, `nrows ${height}`, 'xllcorner 0', 'yllcorner 0', 'cellsize 1']
  for (let r = 0; r < height; r++) lines.push(Array.from({ length: width }, (_, c) => f(c, r)).join(' '))
  writeFileSync(asc, lines.join('\n') + '\n')
  const file = join(dir, name + '.tif')
  execFileSync('gdal_translate', ['-q', '-of', 'COG', '-a_srs', srs, '-a_ullr', ...ullr.map(String), '-ot', 'Byte',
    '-co', 'COMPRESS=DEFLATE', '-co', 'BLOCKSIZE=256', '-co', 'OVERVIEWS=AUTO', asc, file])
  return file
}

/** GDAL's tile: [band, alpha] from gdalwarp (nearest; `-ovr ovr` when given). */
export async function gdalTile (dir, file, z, x, y, ovr) {
  const out = join(dir, `ref-${z}-${x}-${y}.tif`)
  execFileSync('gdalwarp', ['-q', '-overwrite', '-t_srs', 'EPSG:3857', '-te', ...tileExtent(z, x, y).map(String),
    '-ts', '256', '256', '-r', 'near', ...(ovr === undefined ? [] : ['-ovr', ovr]), '-dstalpha', file, out])
  return (await (await fromFile(out)).getImage()).readRasters()
}

/**
 * Our tile z/x/y of `id` against GDAL's: the share of pixels where both agree on transparent vs not, the mean grey
 * difference where both are opaque, how many pixels GDAL fills that we leave empty, and how many opaque in both
 * differ by more than 10 levels (read from the wrong place, not a nearest-neighbour tie).
 */
export async function versusGdal (app, dir, id, file, [z, x, y], ovr) {
  const [band, alpha] = await gdalTile(dir, file, z, x, y, ovr)
  const gdalOpaque = alpha.filter((a) => a > 0).length
  const res = await app.inject(`/${id}/${z}/${x}/${y}.png`)
  if (res.statusCode !== 200) return { status: res.statusCode, gdalOpaque, agreement: 1 - gdalOpaque / 65536, missing: gdalOpaque, mean: 0, far: 0 }
  const rgba = await sharp(res.rawPayload).ensureAlpha().raw().toBuffer()
  let agree = 0; let both = 0; let sum = 0; let missing = 0; let far = 0
  for (let k = 0; k < 65536; k++) {
    const ours = rgba[k * 4 + 3] > 0; const theirs = alpha[k] > 0
    if (ours === theirs) agree++
    if (theirs && !ours) missing++
    if (!ours || !theirs) continue
    const d = Math.abs(rgba[k * 4] - band[k])
    both++; sum += d
    if (d > 10) far++
  }
  return { status: 200, gdalOpaque, agreement: agree / 65536, missing, mean: both ? sum / both : 0, far }
}

/**
 * Asserts tile z/x/y matches gdalwarp's: transparency on 97 % of the pixels, at most 64 left empty where GDAL has data
 * (less than a column), grey within 1.5 levels on average, at most 1 % of the pixels far off. `ovr`: gdalwarp's -ovr (NONE for a tile across the seam of a world grid, which GDAL
 * measures by the whole width it spans and so reads an overview 2-4× coarser than the tile needs).
 */
export async function matchesGdal (app, dir, id, file, tile, { agreement = 0.97, mean = 1.5, ovr } = {}) {
  const r = await versusGdal(app, dir, id, file, tile, ovr)
  const name = `${id} ${tile.join('/')}`
  assert.ok(r.status === 200 || r.gdalOpaque < 0.01 * 65536, `${name}: ${r.status} where GDAL has ${r.gdalOpaque} pixels`)
  assert.ok(r.agreement >= agreement, `${name}: transparency agrees on only ${(r.agreement * 100).toFixed(1)} % (${r.missing} pixels GDAL fills are empty)`)
  assert.ok(r.missing <= 64, `${name}: ${r.missing} pixels GDAL fills are empty (a lost column?)`)
  assert.ok(r.mean <= mean, `${name}: mean difference ${r.mean.toFixed(2)} > ${mean}`)
  assert.ok(r.far <= 0.01 * 65536, `${name}: ${r.far} pixels more than 10 levels off`)
  return r
}

// Grey that changes along both axes, so a pixel read from the wrong column or row shows.
export const pattern = (c, r) => (c * 5 + r * 3) % 200 + 20

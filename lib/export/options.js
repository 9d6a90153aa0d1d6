// The export command's own options (`--set`, `--zooms`, …), parsed and checked before any set is opened: a typo costs
// no start-up. What depends on the set (its zoom range, formats, bounds) is settled later, in job.js.
import { UsageError } from './errors.js'
import { MAX_ZOOM, WORLD_BOUNDS } from '../tilemath.js'

/** The flags export adds to the server's (lib/config.js loadConfig extraFlags). */
export const EXPORT_FLAGS = {
  set: { type: 'string' },
  zooms: { type: 'string' },
  bbox: { type: 'string' },
  out: { type: 'string' },
  concurrency: { type: 'string' },
  encoding: { type: 'string' },
  format: { type: 'string' },
  scale: { type: 'string' },
  force: { type: 'boolean' },
}

const ENCODINGS = ['gzip', 'identity']
// Extensions of files that hold tiles or rasters in a format export does not write: such an --out is a mistake, not
// the name of a folder (`--out x.pmtiles` had written a folder named so). A trailing slash says a folder is meant.
const OTHER_FORMATS = {
  pmtiles: 'PMTiles', gpkg: 'GeoPackage', sqlite: 'SQLite', sqlite3: 'SQLite', db: 'SQLite', tif: 'GeoTIFF', tiff: 'GeoTIFF',
  zip: 'zip', tar: 'tar', tgz: 'tar', gz: 'gzip', json: 'JSON', geojson: 'GeoJSON', pbf: 'vector tile', mvt: 'vector tile',
  png: 'PNG', jpg: 'JPEG', jpeg: 'JPEG', webp: 'WebP', vrt: 'GDAL VRT', kmz: 'KMZ',
}

/**
 * loadConfig's `extra` → { set, zooms: [min, max], bbox (null: the set's bounds), out, concurrency (null: by kind),
 * encoding (null: by format), format (null: the set's first), scale, force }.
 */
export function parseExportOptions (extra) {
  for (const name of ['set', 'zooms', 'out']) {
    if (extra[name] === undefined || extra[name] === '') throw new UsageError(`--${name} is required`)
  }
  checkOut(extra.out)
  const options = {
    set: extra.set,
    zooms: parseZooms(extra.zooms),
    bbox: extra.bbox === undefined ? null : parseBbox(extra.bbox),
    out: extra.out,
    concurrency: extra.concurrency === undefined ? null : parseInteger('--concurrency', extra.concurrency, 1, 1024),
    encoding: null,
    format: extra.format === undefined ? null : extra.format.toLowerCase(),
    scale: extra.scale === undefined ? 1 : parseInteger('--scale', extra.scale, 1, 4),
    force: extra.force === true,
  }
  if (extra.encoding !== undefined) {
    if (!ENCODINGS.includes(extra.encoding)) throw new UsageError(`--encoding must be ${ENCODINGS.join(' or ')}, not '${extra.encoding}'`)
    options.encoding = extra.encoding
  }
  if (options.format !== null && !/^[a-z0-9]{1,8}$/.test(options.format)) throw new UsageError(`--format '${extra.format}' is not a format name (png, webp, jpg)`)
  return options
}

/** Refuses an --out whose extension names a format export does not write (UsageError). */
function checkOut (out) {
  if (/[/\\]$/.test(out)) return // a folder, said so
  const ext = /\.([a-z0-9]+)$/i.exec(out)?.[1].toLowerCase()
  const format = ext === undefined ? undefined : OTHER_FORMATS[ext]
  if (format !== undefined) {
    throw new UsageError(`--out '${out}': export does not write ${format} (.${ext}). It writes an MBTiles file (--out NAME.mbtiles) or a folder of {z}/{x}/{y} files with a tiles.json (any other name; one ending in / is always a folder)`)
  }
}

/** '0-14' or '12' → [min, max], each within 0..30. */
export function parseZooms (text) {
  const m = /^(\d{1,2})(?:-(\d{1,2}))?$/.exec(text.trim())
  if (m === null) throw new UsageError(`--zooms '${text}' is not a zoom or a range of zooms, e.g. 0-14 or 12`)
  const min = Number(m[1])
  const max = m[2] === undefined ? min : Number(m[2])
  if (max > MAX_ZOOM) throw new UsageError(`--zooms '${text}': zooms go from 0 to ${MAX_ZOOM}`)
  if (min > max) throw new UsageError(`--zooms '${text}': the first zoom is above the last`)
  return [min, max]
}

/** 'minx,miny,maxx,maxy' in degrees → [w, s, e, n], latitudes clipped to Web Mercator's ±85.0511. */
export function parseBbox (text) {
  const parts = text.split(',').map((s) => s.trim())
  const numbers = parts.map((s) => (/^[+-]?(\d+\.?\d*|\.\d+)$/.test(s) ? Number(s) : NaN))
  if (numbers.length !== 4 || numbers.some((n) => !Number.isFinite(n))) {
    throw new UsageError(`--bbox '${text}' is not minx,miny,maxx,maxy in degrees, e.g. 8.4,47.3,8.7,47.45`)
  }
  const [w, s, e, n] = numbers
  if (w < -180 || e > 180 || s < -90 || n > 90) throw new UsageError(`--bbox '${text}': longitudes go from -180 to 180, latitudes from -90 to 90`)
  // minx above maxx: a box across the antimeridian (as GeoJSON and TileJSON write it), e.g. 170,-10,-170,10.
  if (w === e || s >= n) throw new UsageError(`--bbox '${text}': minx must differ from maxx (above it: a box across the antimeridian) and miny be below maxy`)
  const clipped = clipToMercator(numbers)
  if (clipped === null) throw new UsageError(`--bbox '${text}' lies beyond Web Mercator's ±${WORLD_BOUNDS[3].toFixed(4)}° of latitude`)
  return clipped
}

/** Bounds with their latitudes inside Web Mercator's (west above east: across the antimeridian); null when nothing is left. */
export function clipToMercator ([w, s, e, n]) {
  const south = Math.max(s, WORLD_BOUNDS[1])
  const north = Math.min(n, WORLD_BOUNDS[3])
  const west = Math.min(Math.max(w, -180), 180)
  const east = Math.min(Math.max(e, -180), 180)
  return south < north && west !== east ? [west, south, east, north] : null
}

function parseInteger (flag, text, min, max) {
  const n = /^\d{1,5}$/.test(text.trim()) ? Number(text) : NaN
  if (!(n >= min && n <= max)) throw new UsageError(`${flag} must be a whole number from ${min} to ${max}, not '${text}'`)
  return n
}

// A GeoTIFF opened for tiling: its pyramid (full image + overviews, with their internal masks), its CRS as a proj4
// transform from Web Mercator, and what TileJSON and /meta report. Runs inside the raster workers (see worker.js),
// which keep datasets open.
import { createRequire } from 'node:module'
import { inflateSync } from 'node:zlib'
import { fromFile, fromUrl, addDecoder, BaseDecoder } from 'geotiff'
import geokeys from 'geotiff-geokeys-to-proj4'
import proj4 from 'proj4'
import sharp from 'sharp'
import { latOf, lonOf, mercatorX, mercatorY } from '../tile.js'

const MERCATOR_CODES = new Set([3857, 900913, 3785, 102100, 102113])
const EARTH_RADIUS = 6378137
const COMPRESSIONS = { 1: 'none', 5: 'LZW', 7: 'JPEG', 8: 'DEFLATE', 32946: 'DEFLATE', 32773: 'PackBits', 34887: 'LERC', 50000: 'ZSTD', 50001: 'WEBP' }
const DTYPES = { 1: 'uint', 2: 'int', 3: 'float' }

// GDAL writes WebP tiles (compression 50001); geotiff.js decodes WebP only in a browser, so sharp (libwebp) does it.
class WebpDecoder extends BaseDecoder {
  async decodeBlock (buffer) {
    const channels = this.parameters.samplesPerPixel
    let image = sharp(Buffer.from(buffer))
    image = channels === 4 ? image.ensureAlpha() : image.removeAlpha()
    const data = await image.raw().toBuffer()
    return data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength)
  }
}
addDecoder(50001, async () => WebpDecoder, async (fd) => ({
  tileWidth: await fd.loadValue('TileWidth'),
  tileHeight: await fd.loadValue('TileLength'),
  planarConfiguration: await fd.loadValue('PlanarConfiguration'),
  bitsPerSample: await fd.loadValue('BitsPerSample'),
  predictor: 1,
  samplesPerPixel: await fd.loadValue('SamplesPerPixel'),
}), false)

// DEFLATE tiles through Node's zlib rather than geotiff.js's pako: native inflate, about twice as fast on the blocks
// of the shared fixtures. (These decoders run in the raster workers, so a synchronous inflate blocks no requests.)
class ZlibDecoder extends BaseDecoder {
  decodeBlock (buffer) {
    const data = inflateSync(new Uint8Array(buffer))
    return data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength)
  }
}
addDecoder([8, 32946], async () => ZlibDecoder)

/** A reason a file cannot be served; its message reaches the 503 body. */
export class RasterError extends Error {}

const require = createRequire(import.meta.url)
/**
 * The PROJ string of an EPSG code, from epsg-index (one small JSON per code, read when a file is opened). It carries
 * the datum shift (+towgs84) that a string rebuilt from GeoKeys lacks: without it CH1903+ or OSGB36 land 100 m off.
 */
function epsgProj (code) {
  if (!Number.isInteger(code) || code < 1024 || code >= 32767) return null
  try {
    return require(`epsg-index/s/${code}.json`).proj4?.replace('+type=crs', '') ?? null
  } catch {
    return null
  }
}

/** The CRS of a GeoTIFF as { proj, mercator, geographic, factor }; throws RasterError when it cannot be used. */
function crsOf (image) {
  const keys = image.getGeoKeys()
  if (!keys || (!keys.ProjectedCSTypeGeoKey && !keys.GeographicTypeGeoKey)) throw new RasterError('the file declares no CRS (no GeoKeys)')
  const model = keys.GTModelTypeGeoKey
  if (model !== 1 && model !== 2) throw new RasterError('unsupported CRS: a user-defined model type that only GDAL/PROJ WKT can describe')
  if (model === 1 && MERCATOR_CODES.has(keys.ProjectedCSTypeGeoKey)) return { proj: null, mercator: true, geographic: false, factor: [1, 1] }
  // A registered code: EPSG's own definition. Otherwise (user-defined parameters): rebuilt from the GeoKeys.
  let proj = epsgProj(model === 1 ? keys.ProjectedCSTypeGeoKey : keys.GeographicTypeGeoKey)
  let factor = [1, 1]
  if (proj === null) {
    let parsed
    try {
      parsed = geokeys.toProj4(keys)
    } catch (err) {
      throw new RasterError(`unsupported CRS: ${err.message}`)
    }
    if (model === 1 && parsed.isGCS) throw new RasterError('unsupported CRS: projected, but its projection is not one proj4 knows')
    proj = parsed.proj4
    const c = parsed.coordinatesConversionParameters
    factor = [c.x || 1, c.y || 1]
  }
  // GeoTIFF rasters are always x = easting/longitude; drop any axis order PROJ would swap.
  proj = proj.replace(/\+axis=\w+\s*/g, '').trim()
  const a = Number(/\+a=([\d.e+]+)/.exec(proj)?.[1] ?? EARTH_RADIUS)
  if (Math.abs(a - EARTH_RADIUS) > 50000) throw new RasterError(`unsupported CRS: not the Earth (ellipsoid radius ${Math.round(a)} m)`)
  const geographic = /\+proj=longlat/.test(proj) && !/\+pm=[1-9a-z]/.test(proj) && !/\+towgs84=(?!0,0,0(,0,0,0,0)?\b)/.test(proj)
  try {
    proj4('EPSG:3857', proj).forward([0, 0])
  } catch (err) {
    throw new RasterError(`unsupported CRS: ${err.message}`)
  }
  return { proj, mercator: false, geographic, factor }
}

/** Affine of the full image: [originX, resX, originY, resY] (resY positive, rows go south). */
function geotransformOf (image) {
  const fd = image.fileDirectory
  const transform = fd.getValue('ModelTransformation')
  if (transform && (transform[1] !== 0 || transform[4] !== 0)) throw new RasterError('rotated or sheared rasters are not supported')
  let origin, res
  try {
    origin = image.getOrigin()
    res = image.getResolution()
  } catch {
    throw new RasterError('the file has no georeferencing (no tie point and pixel scale)')
  }
  let [ox, oy] = origin
  const rx = res[0]
  const ry = -res[1]
  if (!(rx > 0) || !(ry > 0)) throw new RasterError('unsupported georeferencing: flipped or zero pixel size')
  // PixelIsPoint: the tie point is a pixel centre. GDAL moves it to the corner; so do we.
  if (image.getGeoKeys()?.GTRasterTypeGeoKey === 2) {
    ox -= rx / 2
    oy += ry / 2
  }
  return [ox, rx, oy, ry]
}

/** Opens a GeoTIFF and reads what tiling it needs. `src` is { key, path } or { key, url }. */
export async function openDataset (src) {
  let tiff
  try {
    tiff = src.url ? await fromUrl(src.url, { blockSize: 64 * 1024, cacheSize: 512 }) : await fromFile(src.path)
  } catch (err) {
    throw new RasterError(`not a readable TIFF: ${err.message}`)
  }
  try {
    return await describe(tiff, src)
  } catch (err) {
    tiff.close?.()
    if (err instanceof RasterError) throw err
    throw new RasterError(`not a usable GeoTIFF: ${err.message}`)
  }
}

async function describe (tiff, src) {
  const count = await tiff.getImageCount()
  const images = []
  const masks = []
  for (let i = 0; i < count; i++) {
    const image = await tiff.getImage(i)
    const type = image.fileDirectory.getValue('NewSubfileType') ?? 0
    if (type & 4) masks.push(image)
    else if (i === 0 || type & 1) images.push(image)
  }
  const base = images[0]
  const fd = base.fileDirectory
  if (!fd.hasTag('TileWidth')) throw new RasterError('not a Cloud Optimized GeoTIFF: the image is stored in strips, not tiles (convert it with `gdal_translate -of COG`)')
  const crs = crsOf(base)
  const [ox, rx, oy, ry] = geotransformOf(base)
  const width = base.getWidth()
  const height = base.getHeight()
  const bands = base.getSamplesPerPixel()
  const sampleFormat = base.getSampleFormat()
  const bits = base.getBitsPerSample()
  if (!DTYPES[sampleFormat] || ![8, 16, 32, 64].includes(bits) || (sampleFormat === 3 && bits < 32)) {
    throw new RasterError(`unsupported sample type: ${bits}-bit ${DTYPES[sampleFormat] ?? 'format ' + sampleFormat}`)
  }
  const compression = fd.getValue('Compression') ?? 1
  if (!COMPRESSIONS[compression] || compression === 34887) throw new RasterError(`unsupported compression ${compression}`)
  const predictor = fd.getValue('Predictor') ?? 1
  // geotiff.js undoes the predictor on file-order bytes: wrong for big-endian samples wider than a byte.
  if (!base.littleEndian && predictor > 1 && bits > 8) throw new RasterError('unsupported: a big-endian file with a predictor (rewrite it little-endian with gdal_translate -of COG)')
  const photometric = fd.getValue('PhotometricInterpretation')
  if (photometric === 6 && compression !== 7) throw new RasterError('unsupported: YCbCr pixels outside JPEG compression')
  const extra = Array.from(fd.getValue('ExtraSamples') ?? [])
  // The alpha band, when the last extra sample is one (1: associated, 2: unassociated alpha).
  const alphaBand = extra.length > 0 && (extra[extra.length - 1] === 1 || extra[extra.length - 1] === 2) ? bands - 1 : -1
  const nodata = base.getGDALNoData()
  let palette = null
  if (photometric === 3) {
    const map = await fd.loadValue('ColorMap')
    if (map) palette = Uint16Array.from(map)
  }
  const levels = images
    .map((image) => ({
      image,
      width: image.getWidth(),
      height: image.getHeight(),
      tileWidth: image.getTileWidth(),
      tileHeight: image.getTileHeight(),
      mask: masks.find((m) => m.getWidth() === image.getWidth() && m.getHeight() === image.getHeight()) ?? null,
    }))
    .filter((l) => l.image === base || l.image.fileDirectory.hasTag('TileWidth'))
    .sort((a, b) => b.width - a.width)
  levels.forEach((level, index) => {
    level.index = index // part of its blocks' cache keys
    level.fx = width / level.width
    level.fy = height / level.height
  })

  const ds = {
    key: src.key,
    tiff,
    levels,
    width,
    height,
    bands,
    bits,
    sampleFormat,
    dtype: `${DTYPES[sampleFormat]}${bits}`,
    nodata,
    alphaBand,
    palette,
    photometric,
    compression: COMPRESSIONS[compression],
    transform: [ox, rx, oy, ry],
    crs,
  }
  ds.toSource = sourceTransform(ds)
  Object.assign(ds, footprint(ds))
  ds.stats = await statistics(ds)
  return ds
}

/**
 * Web Mercator [x, y] → source CRS, in the file's own units; null for the identity. Written for a point array so the
 * caller reuses one buffer.
 */
function sourceTransform (ds) {
  const { crs } = ds
  if (crs.mercator) return null
  if (crs.geographic) {
    // Longitudes west of the raster's edge are taken one turn east: a grid laid out over 179.5…180.5 is read at -179.7.
    const west = ds.transform[0]
    const east = west + ds.width * ds.transform[1]
    return (x, y, out) => {
      const lon = lonOf(x)
      out[0] = lon < west && lon + 360 <= east ? lon + 360 : lon // only where that lands on the raster: coordinates stay continuous
      out[1] = latOf(y)
    }
  }
  const forward = proj4('EPSG:3857', crs.proj).forward
  const [fx, fy] = crs.factor
  const point = [0, 0]
  return (x, y, out) => {
    point[0] = x
    point[1] = y
    let r
    try { r = forward(point) } catch { r = null }
    out[0] = r ? r[0] / fx : NaN
    out[1] = r ? r[1] / fy : NaN
  }
}

/**
 * Where the raster lies: WGS84 bounds (west may exceed 180 when it crosses the antimeridian), the Mercator extent,
 * and its resolution in Mercator metres — GDAL's suggested-warp-output rule (extent diagonal / pixel diagonal), which
 * also picks overviews the way gdalwarp does.
 */
function footprint (ds) {
  const { width, height, crs } = ds
  const [ox, rx, oy, ry] = ds.transform
  const toLonLat = crs.mercator
    ? (x, y) => [lonOf(x), latOf(y)]
    : crs.geographic
      ? (x, y) => [x, y]
      : (() => {
          const inverse = proj4(crs.proj, 'EPSG:4326').forward
          const [fx, fy] = crs.factor
          return (x, y) => { try { return inverse([x * fx, y * fy]) } catch { return [NaN, NaN] } }
        })()
  const points = []
  const steps = 32
  for (let i = 0; i <= steps; i++) {
    for (let j = 0; j <= steps; j++) {
      if (i !== 0 && i !== steps && j !== 0 && j !== steps && (i % 4 || j % 4)) continue // edges dense, inside sparse
      const [lon, lat] = toLonLat(ox + (i / steps) * width * rx, oy - (j / steps) * height * ry)
      if (Number.isFinite(lon) && Number.isFinite(lat) && Math.abs(lat) <= 90.0001) points.push([lon, lat])
    }
  }
  if (points.length === 0) throw new RasterError('unsupported CRS: no point of the raster maps to longitude/latitude')
  // Longitudes unwrapped around the centre's, so a raster across the antimeridian gets one contiguous span.
  const centre = toLonLat(ox + (width * rx) / 2, oy - (height * ry) / 2)
  const mid = Number.isFinite(centre[0]) ? centre[0] : points[0][0]
  let west = Infinity; let east = -Infinity; let south = Infinity; let north = -Infinity
  for (const p of points) {
    let lon = p[0]
    while (lon - mid > 180) lon -= 360
    while (lon - mid < -180) lon += 360
    west = Math.min(west, lon); east = Math.max(east, lon)
    south = Math.min(south, p[1]); north = Math.max(north, p[1])
  }
  if ((east - west) > 359.9) { west = Math.max(west, -180); east = Math.min(east, 180) } // the whole world round
  south = Math.max(south, -90); north = Math.min(north, 90)
  const mx0 = mercatorX(west); const mx1 = mercatorX(east)
  const my0 = mercatorY(south); const my1 = mercatorY(north)
  const resolution = Math.hypot(mx1 - mx0, my1 - my0) / Math.hypot(width, height)
  return { lonLatBounds: [west, south, east, north], resolution }
}

/**
 * Per-band minimum and maximum, for the default rescale of data that is not 8-bit: GDAL's stored statistics when the
 * file has them, otherwise read off the smallest overview (a window of it at most 1024 px wide).
 */
async function statistics (ds) {
  if (ds.bits === 8 && ds.sampleFormat === 1) return null
  const level = ds.levels[ds.levels.length - 1]
  const w = Math.min(level.width, 1024)
  const h = Math.min(level.height, 1024)
  const x0 = Math.floor((level.width - w) / 2)
  const y0 = Math.floor((level.height - h) / 2)
  const rasters = await level.image.readRasters({ window: [x0, y0, x0 + w, y0 + h] })
  return rasters.map((values) => {
    let min = Infinity
    let max = -Infinity
    for (let i = 0; i < values.length; i++) {
      const v = values[i]
      if (!Number.isFinite(v) || v === ds.nodata) continue // NaN and ±Inf would make the stretch useless
      if (v < min) min = v
      if (v > max) max = v
    }
    return min <= max ? [min, max] : [0, 1]
  })
}

/** What /meta tells about the file. */
export function describeDataset (ds) {
  return {
    width: ds.width,
    height: ds.height,
    bands: ds.bands,
    dtype: ds.dtype,
    crs: ds.crs.mercator ? 'EPSG:3857' : ds.crs.proj.trim(),
    nodata: ds.nodata === null ? null : Number.isNaN(ds.nodata) ? 'nan' : ds.nodata,
    alpha: ds.alphaBand >= 0,
    mask: ds.levels[0].mask !== null,
    palette: ds.palette !== null,
    compression: ds.compression,
    blockSize: [ds.levels[0].tileWidth, ds.levels[0].tileHeight],
    overviews: ds.levels.slice(1).map((l) => [l.width, l.height]),
    resolution: [ds.transform[1], ds.transform[3]],
    statistics: ds.stats,
  }
}

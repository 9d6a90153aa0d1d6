// The coordinate reference systems a collection offers (OGC API – Features Part 2), as URIs, and the `crs` and
// `bbox-crs` parameters read against them. Axis order follows the CRS: CRS84 is lon,lat; EPSG:4326 is lat,lon (its
// definition), so its output is flipped and its bbox read as minLat,minLon,maxLat,maxLon.
import { createRequire } from 'node:module'
import { BadRequest } from '../errors.js'

const require = createRequire(import.meta.url)

export const CRS84 = 'http://www.opengis.net/def/crs/OGC/1.3/CRS84'
const EPSG = 'http://www.opengis.net/def/crs/EPSG/0/'
export const epsgUri = (code) => `${EPSG}${code}`

/** SRIDs whose units are degrees without asking the database (the rest: spatial_ref_sys, see items.js). */
export const KNOWN_GEOGRAPHIC = new Set([4326, 4258, 4269, 4617, 4283, 4167, 4674, 4490])

/**
 * What a collection stored in `srid` offers: CRS84 (the default), EPSG:4326, EPSG:3857 and its own. Each
 * `{ uri, srid, latLon }`: `latLon` when its first axis is latitude.
 */
export function offeredCrs (srid) {
  const list = [{ uri: CRS84, srid: 4326, latLon: false }, { uri: epsgUri(4326), srid: 4326, latLon: true }, { uri: epsgUri(3857), srid: 3857, latLon: false }]
  if (srid !== 4326 && srid !== 3857) list.push({ uri: epsgUri(srid), srid, latLon: geographicEpsg(srid) })
  return list
}

/**
 * Whether an SRID is an EPSG geographic CRS, whose axes EPSG defines latitude first (as 4326's): EPSG:4269 answers
 * lat,lon and reads its bbox so, as Part 2 asks (PostGIS stores lon,lat). Projected CRSs are easting first here.
 */
function geographicEpsg (srid) {
  if (KNOWN_GEOGRAPHIC.has(srid)) return true
  if (!Number.isInteger(srid) || srid < 1024 || srid >= 32767) return false
  try {
    return require(`epsg-index/s/${srid}.json`).kind === 'CRS-GEOGCRS'
  } catch {
    return false
  }
}

/** The storage CRS: PostGIS keeps SRID 4326 as lon,lat, which is CRS84. */
export const storageCrs = (srid) => (srid === 4326 ? CRS84 : epsgUri(srid))

/** A CRS as a client may name it (the URI, `EPSG:n`, `urn:ogc:def:crs:EPSG::n`, `[EPSG:n]`, CRS84) → the URI. */
function canonical (value) {
  const v = value.trim().replace(/^\[(.*)\]$/, '$1')
  if (/^(OGC:)?CRS84$/i.test(v) || /^urn:ogc:def:crs:OGC:(1\.3)?:CRS84$/i.test(v) || v === 'https://www.opengis.net/def/crs/OGC/1.3/CRS84') return CRS84
  const code = /^(?:EPSG:|urn:ogc:def:crs:EPSG:[\d.]*:|https?:\/\/www\.opengis\.net\/def\/crs\/EPSG\/0\/)(\d{1,9})$/i.exec(v)?.[1]
  return code === undefined ? v : epsgUri(Number(code))
}

/** The offered CRS a parameter names (`name`: 'crs' or 'bbox-crs'); 400 naming what is offered otherwise. */
export function chooseCrs (value, offered, name) {
  const uri = canonical(value)
  const found = offered.find((c) => c.uri === uri)
  if (found === undefined) throw new BadRequest(`${name} '${value.slice(0, 100)}' is not offered: one of ${offered.map((c) => c.uri).join(', ')}`)
  return found
}

// The kinds of source, in the order they are tried. Adding a kind is a module under lib/sources/ (see contract.js)
// and one line here; the catalog, the command line's usage text and its messages all come from this list.
import { extname } from 'node:path'
import * as mbtiles from './mbtiles.js'
import * as pmtiles from './pmtiles.js'
import * as cog from './cog.js'
import * as mosaic from './mosaic.js'
import * as postgis from './postgis/index.js'
import * as geojson from './geojson.js'
import * as demo from './demo.js'

/** @type {import('./contract.js').SourceKind[]} */
export const KINDS = [mbtiles, pmtiles, cog, mosaic, postgis, geojson, demo]

export const FILE_EXTENSIONS = KINDS.flatMap((k) => k.extensions ?? [])
export const GROUP_KINDS = KINDS.filter((k) => k.openGroup)
export const FALLBACK = KINDS.find((k) => k.fallback)

export const kindForFile = (name) => {
  const ext = extname(name).toLowerCase()
  return KINDS.find((k) => k.extensions?.includes(ext))
}
export const kindForUrl = (url) => KINDS.find((k) => k.matchesUrl?.(url))

/** "an MBTiles (.mbtiles), a PMTiles (.pmtiles) or a COG (.tif, .tiff) file", for messages. */
export const fileKindsText = () => {
  const parts = KINDS.filter((k) => k.extensions).map((k) => `${k.title} (${k.extensions.join(', ')})`)
  return parts.length > 1 ? `${parts.slice(0, -1).join(', ')} or ${parts.at(-1)}` : parts[0]
}

/** The URL forms served, for the usage text; a bucket prefix (lib/catalog/discover.js) lists the files kinds read there. */
export const urlForms = () => {
  const onS3 = KINDS.flatMap((k) => (k.extensions ?? []).filter((ext) => k.matchesUrl?.(`s3://bucket/x${ext}`)))
  return [...KINDS.filter((k) => k.urlForm).map((k) => `${k.urlForm} (${k.title})`),
    `s3://bucket/prefix/ (every ${onS3.join(', ')} there, like a folder)`]
}

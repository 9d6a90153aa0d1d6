// The job an export does, settled against its set: the zooms it serves, the format and scale it renders, the coding
// stored, the area. These fields are what a resumed export must agree on (resume.js): the same job, the same tiles.
import { ExportError, UsageError } from './errors.js'
import { clipToMercator } from './options.js'
import { WORLD_BOUNDS } from '../tilemath.js'
import { isCompressible } from '../tiletype.js'
import { normalizeFormat } from '../sources/tilejson.js'

/**
 * (target, parsed options, warn) → { set, zooms, bbox, format, scale, encoding }, in this key order (it is compared
 * and stored as JSON). `warn` is told what was narrowed to fit the set.
 */
export function planJob (target, options, warn) {
  const { source, id } = target
  let format
  if (source.formats !== undefined) { // rendered to order: the format is chosen, as a URL's extension chooses it
    const wanted = options.format === null ? source.formats[0] : source.formatAliases?.[options.format] ?? options.format
    if (!source.formats.includes(wanted)) throw new UsageError(`--format ${options.format} is not a format of '${id}' (${source.formats.join(', ')})`)
    format = wanted
  } else { // stored tiles: exported as they are stored
    format = source.format
    if (format === undefined) throw new ExportError(`'${id}' does not say what format its tiles are in`)
    if (options.format !== null && normalizeFormat(options.format) !== format) {
      throw new UsageError(`--format ${options.format}: '${id}' holds ${format} tiles, exported as they are; --format chooses among the formats of sets that make tiles (COG, styles)`)
    }
  }
  // It names the files of a folder export: a set's own metadata must not be able to put them elsewhere.
  if (!/^[a-z0-9]{1,8}$/.test(format)) throw new ExportError(`'${id}' says its tiles are '${format}', which is not a file extension`)
  const scales = source.scales ?? [1]
  if (!scales.includes(options.scale)) throw new UsageError(`--scale ${options.scale}: '${id}' has ${scales.map((s) => `@${s}x`).join(', ')} tiles`)

  // Sets that make tiles to order may serve past what TileJSON advertises (COG over- and underzoom), as the routes do.
  const { minzoom, maxzoom } = source.servedZooms ?? source.tilejson
  const [from, to] = options.zooms
  const zooms = [Math.max(from, minzoom), Math.min(to, maxzoom)]
  if (zooms[0] > zooms[1]) throw new UsageError(`--zooms ${from}-${to}: '${id}' serves zooms ${minzoom}-${maxzoom} only`)
  if (zooms[0] !== from || zooms[1] !== to) warn(`zooms ${from}-${to} narrowed to ${zooms[0]}-${zooms[1]}: '${id}' serves zooms ${minzoom}-${maxzoom}`)

  // A set across the antimeridian: its own box (west above east), not TileJSON's, widened to the world's width.
  const bbox = options.bbox ?? clipToMercator(source.extent ?? source.tilejson.bounds ?? WORLD_BOUNDS) ?? [...WORLD_BOUNDS]
  // Images are never compressed again (lib/tiletype.js): only vector and JSON tiles take a coding.
  const encoding = isCompressible(format) ? options.encoding ?? 'gzip' : 'identity'
  return { set: id, zooms, bbox, format, scale: options.scale, encoding }
}

// The tile directory as a plugin (config tileDir.dir, `--tile-dir`): every tile the pipeline reads for a set that is
// written through (made tiles by default: PostGIS, COG, rendered styles; `sets.<id>.tileDir` opts a set in or out) is
// also written where nginx finds it by the URL (lib/tile-dir/directory.js), in the encoding nginx sends it in. The
// catalog and the styles tell it when a set's or a style's data changes, so nginx never serves what the server would
// no longer serve. `app.tileDir`: the directory (its state for /metrics and tests); `tile-cannon nginx` prints the
// nginx configuration that serves it (lib/tile-dir/nginx.js).
import fp from 'fastify-plugin'
import { dataRevision } from '../catalog/registry.js'
import { acceptMask } from '../encoding.js'
import { ABSENT, canonicalQuery } from '../pipeline.js'
import { TileDirectory } from './directory.js'
import { TILE_EXTENSIONS } from '../tiletype.js'

export const TILE_DIR_DEFAULTS = { maxMB: 10240, kinds: ['postgis', 'cog', 'mosaic', 'render'] }
const GZIP = acceptMask('gzip')
const IDENTITY = acceptMask('')

/**
 * Where a set's or rendered style's tiles go in the tile directory: its URL path (`roads`, `styles/basic/512`), or null
 * when they are not written: its kind is not written (or the set opts out), tiles are not kept (a lifetime of 0), it is
 * a composite (merged at once from its parts), or its name cannot be a folder nginx would map a URL to.
 */
export function tilePlace (entry, config) {
  if (entry.source === null || entry.kind === 'composite' || entry.ttlMs === 0) return null
  const kinds = config.tileDir.kinds ?? TILE_DIR_DEFAULTS.kinds
  if (entry.kind === 'render') return kinds.includes('render') ? entry.place : null
  if (!(config.sets[entry.id]?.tileDir ?? kinds.includes(entry.kind))) return null
  if (!TILE_EXTENSIONS.includes(entry.source.format)) return null
  const id = entry.id
  if (id.startsWith('.') || /[/\\\0]/.test(id)) return null
  return id
}

async function tileDirPlugin (app, config) {
  if (!config.tileDir?.dir) return
  const { catalog, pipeline, styles, renderer } = app

  /** The set or rendered style a place holds the tiles of, as served now; null when none (its tiles go). */
  function entryOf (place) {
    if (place.startsWith('styles/')) {
      const [, id, size] = place.split('/')
      const style = styles?.get(id)
      if (style === undefined || renderer === undefined || !renderer.available) return null
      const entry = renderer.tileEntry(style, size === '512' ? 512 : 256)
      return tilePlace(entry, config) === place ? entry : null
    }
    const entry = catalog.entries.get(place)
    return entry !== undefined && tilePlace(entry, config) === place ? entry : null
  }
  // An entry's data revision, once: entries are new when their data is (a purge says so itself, see below).
  const revisionOf = (entry) => (entry.tileDirRevision ??= dataRevision(entry) || entry.id)

  const directory = new TileDirectory({
    dir: config.tileDir.dir,
    maxBytes: (config.tileDir.maxMB ?? TILE_DIR_DEFAULTS.maxMB) * 2 ** 20,
    log: app.log,
    revisionOf: (place) => {
      const entry = entryOf(place)
      return entry === null ? null : revisionOf(entry)
    },
    ttlOf: (place) => entryOf(place)?.ttlMs,
  })

  // Tiles asked for with options other than the defaults are not written: nginx could not tell them apart by the URL
  // without naming a file after the query string (a path an attacker would choose). The server answers those itself.
  const defaultQueries = new WeakMap() // entry → rendering → canonical default options
  function isDefaultQuery (entry, query, rendering) {
    const source = entry.source
    if (source.parseQuery === undefined) return Object.keys(query).length === 0
    let known = defaultQueries.get(entry)
    if (known === undefined) defaultQueries.set(entry, known = new Map())
    const name = rendering === undefined ? '' : rendering.scale + rendering.format
    let canonical = known.get(name)
    if (canonical === undefined) known.set(name, canonical = canonicalQuery(source.parseQuery({}, rendering)))
    return canonicalQuery(query) === canonical
  }

  // Made from the data served now: not when it changed during the read (a purge gives the key a new prefix), the set
  // was replaced, or a rendered style's drawn sets changed (a new entry).
  const fresh = (entry, place, key) => !entry.retired && key.startsWith(entry.key) && entryOf(place) === entry

  /**
   * The pipeline's call for each tile it read or made (not for cache hits): queued for writing when the set is written.
   * A variant goes under its own extension (`<y>.mlt.gz` beside `<y>.pbf.gz`), which nginx serves as it serves stored
   * MLT; GeoJSON is not written (nginx's tile location does not match `.geojson`: tile-cannon answers it).
   */
  function keep (entry, z, x, y, query, rendering, record, key, variant) {
    if (variant !== undefined && !TILE_EXTENSIONS.includes(variant)) return
    // A variant made from a tile near the end of its lifetime would get a whole lifetime on disk: not written.
    if (variant !== undefined && entry.ttlMs !== undefined) return
    let place = entry.tileDirPlace
    if (place === undefined) place = entry.tileDirPlace = tilePlace(entry, config)
    if (place === null || !fresh(entry, place, key)) return
    if (query !== undefined && !isDefaultQuery(entry, query, rendering)) return
    const scale = rendering?.scale ?? 1
    const path = `${z}/${x}/${y}${scale === 1 ? '' : `@${scale}x`}.${variant ?? rendering?.format ?? entry.source.format}`
    const revision = revisionOf(entry)
    if (record === ABSENT) {
      directory.write(place, revision, path, entry.missingStatus === 204 ? '.none' : '.404', null)
      return
    }
    // As nginx sends it: vector tiles gzip-compressed (gzip_static; gunzip for clients without gzip), images as they are.
    const answer = pipeline.encoded(record, record.compressible ? GZIP : IDENTITY, entry, true) // on disk: compressed well
    const put = (encoded) => {
      if (fresh(entry, place, key)) directory.write(place, revision, path, encoded.head['content-encoding'] === 'gzip' ? '.gz' : '', encoded.body)
    }
    if (answer instanceof Promise) directory.prepared(answer.then(put, () => {})) // bytes that do not decode: the request was told
    else put(answer)
  }

  pipeline.tileDir = { keep }
  catalog.registry.onChange = (event, entry) => {
    if (event !== 'expire') return directory.refresh()
    // Its data was said to have changed (NOTIFY, a database reload): its tiles go, and those of styles drawing it.
    directory.purge(entry.id)
    for (const style of styles?.list() ?? []) if (renderer?.available && renderer.setsDrawn(style).includes(entry.id)) directory.purge(`styles/${style.id}`)
  }
  if (styles !== undefined) styles.onLoad = () => directory.refresh()
  app.decorate('tileDir', directory)
  app.addHook('onClose', async () => {
    pipeline.tileDir = null
    await directory.close()
  })
}

export default fp(tileDirPlugin, { name: 'tile-cannon-tile-dir', fastify: '5.x' })

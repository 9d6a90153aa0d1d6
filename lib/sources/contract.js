// The source contract: what a kind of source exports, and what a source it opens looks like. The catalog, the routes
// and the pipeline see only this; nothing outside lib/sources/<kind> names a kind. lib/sources/index.js lists the kinds.

/**
 * A kind of source: one module under lib/sources/, listed in lib/sources/index.js.
 * @typedef {object} SourceKind
 * @property {string} kind                  short name, shown in /catalog and logs ('mbtiles')
 * @property {string} title                 for people: the usage text and messages ('MBTiles')
 * @property {string[]} [extensions]        file extensions it serves, lower case with the dot ('.mbtiles')
 * @property {(url: string) => boolean} [matchesUrl]  URLs it serves (remote archives, databases)
 * @property {string} [urlForm]             how such a URL looks, for the usage text ('https://…/x.pmtiles')
 * @property {(spec: SourceSpec, context: SourceContext) => Promise<Source>} [open]  one set from one file or URL
 * @property {(url: string, options: object, context: SourceContext) => SourceGroup} [openGroup]  many sets in one
 *   place (a database): the catalog discovers, re-discovers and retries them as a group
 * @property {string} [configSection]       with openGroup: the config key holding its options ('postgres')
 * @property {(config: object) => string[]} [configuredUrls]  with openGroup: URLs the config names outside `paths`
 * @property {(path: string) => boolean} [writing]  a writer is at work on this file: open it later (default: never)
 * @property {(name: string) => string|null} [companionOf]  the tileset file a changed file name belongs to (an
 *   SQLite `-wal` beside an `.mbtiles`; a GDAL `.msk`, `.ovr` or `.aux.xml` beside a `.tif`), so the watcher re-checks
 *   it (default: none)
 * @property {(path: string) => string} [companionStamp]  a mark of the file's companions that changes when its data
 *   does while the file itself does not (a commit left in an SQLite `-wal`, a COG's sidecar added or rebuilt): the watcher re-opens the set when it
 *   changes (default: only the file's own size, mtime and inode count)
 * @property {boolean} [fallback]           opened as the demo when nothing else is served
 * @property {(path: string) => Promise<boolean>} [claims]  for an extension other documents share (.json): is this
 *   file one of its own? One not claimed is skipped like a file no kind serves (default: every file with its extensions)
 * @property {boolean} [opensFolders]       opens a folder as one set (a configured set's `mosaic: true`)
 */

/**
 * What the catalog hands `open`: the set's config options (`sets.<id>`) spread over the spec.
 * @typedef {object} SourceSpec
 * @property {string} id
 * @property {string} [path]                absolute path of a file
 * @property {string} [url]                 a URL
 */

/**
 * Services a source may use, owned by the app (plugins): `log` (pino), `raster` (config.raster), `rasterPool`, …;
 * for remote sources (lib/remote): `s3` (config.s3), `remote` (retryMs, revalidateMs), and `replaced(id, source, why, localFile)`,
 * which tells the catalog the object under an open set changed (it re-opens the set, once however often told);
 * `features` (config.features: whether OGC API – Features serves a database's tables).
 * @typedef {object} SourceContext
 */

/**
 * An open set. Everything a request needs (a prepared statement, a file descriptor, a pool) is made in `open`.
 * @typedef {object} Source
 * @property {string} id
 * @property {string} kind
 * @property {string} [format]             'pbf' | 'mlt' | 'png' | 'jpg' | 'webp' | 'avif' | 'json' | …
 * @property {{format?: string, compression?: string}} hints  what the archive declares, for what bytes cannot say
 * @property {object} tilejson             TileJSON 3.0.0 fields except `tiles` (lib/sources/tilejson.js builds them)
 * @property {object} metadata             raw metadata, for /:set/meta
 * @property {(z: number, x: number, y: number, query?: object, rendering?: Rendering) => (Buffer|null|Promise<Buffer|null>)} getTile
 *   the stored bytes as they are (maybe compressed); null: no tile there. A source whose reads are synchronous
 *   (SQLite) returns them as they are, and its tiles are answered without a promise; others return a promise
 * @property {() => (void|Promise<void>)} close  releases handles; idempotent
 *
 * Optional capabilities, each with its default when absent:
 * @property {number[]} [scales]           tile scales it renders (`@2x`): default [1]
 * @property {string[]} [formats]          encodings it renders to order, the first the default: default none (the
 *   stored format; a URL's extension is ignored)
 * @property {Object<string, string>} [formatAliases]  other spellings of those ('jpeg' → 'jpg')
 * @property {(query: object, rendering?: Rendering) => object} [parseQuery]  validated options (throws a 400 error
 *   on bad ones); the result is passed to getTile and is part of the cache key
 * @property {boolean} [takesQuery]        passes the raw query string to getTile (part of the cache key): default false
 * @property {QueryOption[]} [options]     the query options parseQuery takes, described for clients (the viewer's
 *   controls): default none
 * @property {boolean} [composable]        returns raw MVT that may be concatenated with other sets' (`/a,b/z/x/y`)
 * @property {{minzoom: number, maxzoom: number}} [servedZooms]  zooms answered, when wider than TileJSON's
 * @property {number[]} [extent]           the set's bounds across the antimeridian as they are (west above east),
 *   where TileJSON's had to widen to the world's width: what an export covers when given no --bbox. Default: TileJSON's
 * @property {number} [cacheTtlS]          how long its tiles may be cached (data that changes unseen): default for ever
 * @property {() => void} [settle]         called once the file has stopped changing (MBTiles keeps its lock then)
 * @property {() => Promise<void>} [check]  a remote source: resolves when its backend answers now, rejects with a
 *   reason fit to show (no URL, host or secret) when not; /ready calls it about once a second
 * @property {string} [revision]           what identifies the data it serves, the same on every replica (a shared
 *   cache keys made tiles with it): default the file's size and time, or the URL
 * @property {string} [signature]          sets of a group: what the set is made of (its SQL); a re-discovery that finds
 *   the same signature and TileJSON keeps the set, and its cached tiles
 */

/**
 * @typedef {object} QueryOption
 * @property {string} name                 the query parameter ('colormap_name')
 * @property {'bands'|'range'|'choice'|'text'} type  band numbers 1…count ('1' or '1,2,3'), 'min,max', one of `values`,
 *   or free text (band math)
 * @property {number} [count]              bands: how many the data has
 * @property {string[]} [values]           choice: the values taken
 * @property {string} [default]            what applies when it is not given, as it would be written
 * @property {string} [example]            text: a value to show as a hint
 * @property {boolean} [dem]               choice: the values are terrain encodings of heights (raster-dem)
 */

/**
 * @typedef {object} Rendering
 * @property {number} scale
 * @property {string} format
 */

/**
 * Sets found together in one place.
 * @typedef {object} SourceGroup
 * @property {() => Promise<Array<{id: string, source: Source|null, reason?: string}>>} discover  every set there
 *   now (source null: cannot be served, with the reason); throws when the place cannot be reached
 * @property {() => string[]} [configured]  ids of sets the config names there, known before the place answers: until
 *   it first does, they are unavailable (503), not unknown (404)
 * @property {(onChange: (payload: string) => void) => void} [listen]  change notices: a payload naming sets (by id or
 *   by what the kind calls them), '' for all
 * @property {(entry: {id: string, source: Source}, payload: string) => boolean} [names]  does a notice name this set?
 * @property {() => Promise<void>} [check]  resolves when the place answers now (a query runs), rejects with a reason
 *   fit to show when not; /ready calls it about once a second
 * @property {object} [pool]               its connection pool (pg.Pool's totalCount, idleCount, waitingCount), for
 *   /ready and /metrics
 * @property {() => Promise<void>} close
 */

const FUNCTIONS = ['getTile', 'close']
const OPTIONAL_FUNCTIONS = ['parseQuery', 'settle', 'check']
const OPTIONAL_ARRAYS = ['scales', 'formats', 'options']

/** What is wrong with an object `open` returned, as sentences (empty: it keeps the contract). */
export function contractProblems (source) {
  if (source === null || typeof source !== 'object') return ['open() did not return an object']
  const problems = []
  if (typeof source.id !== 'string' || source.id === '') problems.push('id is not a non-empty string')
  if (typeof source.kind !== 'string' || source.kind === '') problems.push('kind is not a non-empty string')
  for (const name of FUNCTIONS) if (typeof source[name] !== 'function') problems.push(`${name} is not a function`)
  for (const name of OPTIONAL_FUNCTIONS) if (source[name] !== undefined && typeof source[name] !== 'function') problems.push(`${name} is not a function`)
  for (const name of OPTIONAL_ARRAYS) if (source[name] !== undefined && (!Array.isArray(source[name]) || source[name].length === 0)) problems.push(`${name} is not a non-empty array`)
  if (source.hints === null || typeof source.hints !== 'object') problems.push('hints is not an object')
  if (source.metadata === null || typeof source.metadata !== 'object') problems.push('metadata is not an object')
  const tj = source.tilejson
  if (tj === null || typeof tj !== 'object') problems.push('tilejson is not an object')
  else if (!(Number.isInteger(tj.minzoom) && Number.isInteger(tj.maxzoom) && tj.minzoom <= tj.maxzoom)) problems.push('tilejson has no zoom range')
  const served = source.servedZooms
  if (served !== undefined && !(Number.isInteger(served.minzoom) && Number.isInteger(served.maxzoom))) problems.push('servedZooms has no zoom range')
  if (source.cacheTtlS !== undefined && !(source.cacheTtlS >= 0)) problems.push('cacheTtlS is not a number ≥ 0')
  return problems
}

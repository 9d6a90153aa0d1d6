// Configuration: defaults ← config file (JSON or YAML) ← environment (TILE_CANNON_*) ← command-line flags.
// Validated once with a JSON schema and frozen.
import { existsSync, readFileSync } from 'node:fs'
import { availableParallelism, tmpdir, totalmem } from 'node:os'
import { dirname, extname, join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import Ajv from 'ajv'
import proxyAddr from '@fastify/proxy-addr'
import YAML from 'yaml'
import { fileKindsText, urlForms } from './sources/index.js'
import { LIMIT_DEFAULTS } from './limits.js'
import { DEFAULT_FEATURE_LIMIT } from './sources/postgis/introspect.js'

export const DEFAULTS = {
  port: 3000,
  host: '0.0.0.0',
  paths: [],
  publicUrl: null,
  cacheMB: 256,
  cacheControl: 'public, max-age=3600',
  metadataCacheControl: 'public, max-age=60',
  trustProxy: false,
  allowedHosts: [], // hosts links may be built for (lib/urls.js); none: any Host (or the public URL)
  apiKeys: [], // access control (lib/access.js); none: open
  limits: { ...LIMIT_DEFAULTS }, // URL and query length, composite parts: 414 / 400 past them (lib/limits.js)
  cors: '*',
  logLevel: 'info',
  logRequests: false,
  logFormat: 'auto', // pretty on a terminal, JSON lines otherwise (pm2, log shippers)
  watch: true,
  watchDebounceMs: 300,
  settleMs: 60_000,
  demo: true,
  viewer: true, // the maps of the home page and /viewer/… (MapLibre GL JS, served from here)
  styles: null, // a folder of MapLibre styles (lib/style): ./styles when it exists
  fonts: null, // a folder of glyph PBFs, `Font Name/0-255.pbf`: ./fonts when it exists
  icons: null, // marker icons of static images, `marker=lon,lat|pin.png`: ./icons when it exists
  defaultFont: null, // the font serving unknown names (null: the first "Regular" font, else the first)
  sets: {},
  postgres: {},
  // OGC API – Features over the PostGIS tables and views (lib/features): under `prefix`, pages of `defaultLimit`
  // features, `maxLimit` at most (a larger limit is clamped), coordinates rounded to `precision` decimals, pages in
  // key order unless sorted (`orderByKey` false: in the order the database finds them, faster, not stable)
  features: { enabled: true, prefix: '/ogc', defaultLimit: 10, maxLimit: 10000, precision: { degrees: 7, metres: 2 }, orderByKey: true },
  raster: {},
  s3: {}, // object storage (lib/remote/s3.js): endpoint, region, forcePathStyle; credentials from AWS_* variables
  remote: {}, // remote archives and COGs (https://, s3://): retryMs, revalidateMs (lib/catalog/remote.js)
  render: {},
  metrics: {}, // /metrics (lib/metrics): enabled, cluster ('auto': under a pm2 cluster), dir, intervalMs
  shedding: {}, // answering 503 under pressure (@fastify/under-pressure): see the schema
  cache: {}, // the second-level tile cache replicas share (lib/shared-cache.js): redis, kinds, ttlS, …
  tileDir: {}, // a tile directory nginx serves, written through (lib/tile-dir): dir, maxMB, kinds
}

// A count of features, or false: none (`true` would be coerced to 1).
const FEATURE_LIMIT = { not: { const: true }, anyOf: [{ const: false }, { type: 'integer', minimum: 1 }] }

const schema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    port: { type: 'integer', minimum: 0, maximum: 65535 },
    host: { type: 'string', minLength: 1 },
    paths: { type: 'array', items: { type: 'string', minLength: 1 } },
    publicUrl: { type: ['string', 'null'], pattern: '^https?://' },
    cacheMB: { type: 'number', minimum: 0 },
    cacheControl: { type: 'string' },
    metadataCacheControl: { type: 'string', minLength: 1 },
    // false, true, or addresses / CIDRs / loopback|linklocal|uniquelocal (a comma-separated string or a list)
    trustProxy: {
      anyOf: [
        { type: 'boolean' },
        { type: 'array', items: { type: 'string', minLength: 1 } },
      ],
    },
    // hosts (with their port, when not the default) that links may name; a comma-separated string or a list
    allowedHosts: { type: 'array', items: { type: 'string', pattern: '^[A-Za-z0-9.\\-:[\\]_]+$' } },
    apiKeys: { type: 'array', items: { type: 'string', minLength: 1, maxLength: 256, pattern: '^[\\x21-\\x7e]+$' } },
    limits: {
      type: 'object',
      additionalProperties: false,
      properties: {
        maxUrlLength: { type: 'integer', minimum: 64 }, // characters of path and query (414 past it)
        maxQueryLength: { type: 'integer', minimum: 0 }, // characters after '?' (414 past it)
        maxCompositeParts: { type: 'integer', minimum: 1, maximum: 256 }, // sets in /a,b,c/z/x/y (400 past it)
      },
    },
    cors: {
      anyOf: [
        { type: 'boolean' },
        { type: 'string', minLength: 1 },
        { type: 'array', items: { type: 'string', minLength: 1 } },
      ],
    },
    logLevel: { enum: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] },
    logRequests: { type: 'boolean' },
    logFormat: { enum: ['auto', 'pretty', 'json'] },
    watch: { type: 'boolean' },
    watchDebounceMs: { type: 'integer', minimum: 0 },
    styles: { type: ['string', 'null'], minLength: 1 },
    fonts: { type: ['string', 'null'], minLength: 1 },
    icons: { type: ['string', 'null'], minLength: 1 },
    defaultFont: { type: ['string', 'null'], minLength: 1 },
    settleMs: { type: 'integer', minimum: 0 },
    demo: { type: 'boolean' },
    viewer: { type: 'boolean' },
    features: {
      type: 'object',
      additionalProperties: false,
      properties: {
        enabled: { type: 'boolean' },
        prefix: { type: 'string', pattern: '^(/[A-Za-z0-9._~-]+)+$' }, // no trailing slash
        defaultLimit: { type: 'integer', minimum: 1 },
        maxLimit: { type: 'integer', minimum: 1 },
        orderByKey: { type: 'boolean' },
        precision: { // decimals of output coordinates: degrees (CRS84, EPSG:4326, any geographic CRS), metres (others)
          type: 'object',
          additionalProperties: false,
          properties: { degrees: { type: 'integer', minimum: 0, maximum: 15 }, metres: { type: 'integer', minimum: 0, maximum: 15 } },
        },
      },
    },
    postgres: {
      type: 'object',
      additionalProperties: false,
      properties: {
        url: { type: 'string', pattern: '^postgres(ql)?://' },
        schemas: { type: 'array', items: { type: 'string' } },
        functions: { type: 'boolean' },
        autoPublish: { type: 'boolean' },
        poolSize: { type: 'integer', minimum: 1, maximum: 200 },
        statementTimeoutMs: { type: 'integer', minimum: 1 },
        connectTimeoutMs: { type: 'integer', minimum: 1 },
        boundsTimeoutMs: { type: 'integer', minimum: 1 },
        retryMs: { type: 'integer', minimum: 10 },
        discoverIntervalS: { type: 'number', minimum: 0 },
        extent: { type: 'integer', minimum: 256 },
        buffer: { type: 'integer', minimum: 0 },
        featureLimit: FEATURE_LIMIT, // features in a PostGIS tile (default 10000, pg_tileserv's; false: no limit)
        defaultSrid: { type: 'integer', minimum: 1 },
        cacheTtlS: { type: 'number', minimum: 0 }, // lifetime of cached tiles of this database (0: not cached)
        notifyChannel: { anyOf: [{ type: 'boolean' }, { type: 'string', maxLength: 63 }] }, // LISTEN here (true: 'tile_cannon'; false or '': off)
        tables: {
          type: 'object',
          additionalProperties: {
            type: 'object',
            additionalProperties: false,
            required: ['table'],
            properties: {
              schema: { type: 'string' },
              table: { type: 'string' },
              geometryColumn: { type: 'string' },
              srid: { type: 'integer', minimum: 1 },
              extent: { type: 'integer', minimum: 256 },
              buffer: { type: 'integer', minimum: 0 },
              minzoom: { type: 'integer', minimum: 0, maximum: 30 },
              maxzoom: { type: 'integer', minimum: 0, maximum: 30 },
              limit: FEATURE_LIMIT, // this table's featureLimit
              properties: { type: 'array', items: { type: 'string' } },
              layer: { type: 'string' },
            },
          },
        },
      },
    },
    s3: { // S3-compatible object storage, for s3://bucket/key paths and URLs
      type: 'object',
      additionalProperties: false,
      properties: {
        endpoint: { type: 'string', pattern: '^https?://[^/?#]+(/[^?#]*)?$' }, // default https://s3.<region>.amazonaws.com
        region: { type: 'string', pattern: '^[a-z0-9-]+$' }, // default us-east-1
        forcePathStyle: { type: 'boolean' }, // endpoint/bucket/key (MinIO, Ceph, moto) rather than bucket.endpoint/key
        // From the environment (AWS_ACCESS_KEY_ID, …) rather than a file; none: unsigned requests (a public bucket).
        accessKeyId: { type: 'string', minLength: 1 },
        secretAccessKey: { type: 'string', minLength: 1 },
        sessionToken: { type: 'string', minLength: 1 },
      },
    },
    remote: { // remote archives and COGs, over https:// or s3://
      type: 'object',
      additionalProperties: false,
      properties: {
        retryMs: { type: 'integer', minimum: 10 }, // a remote set that could not be opened is tried again (default 10000)
        revalidateMs: { type: 'integer', minimum: 0 }, // a read this long after the last answer checks the ETag (default 60000; 0: never)
      },
    },
    raster: { // COG sets, all of them (a set's own options win)
      type: 'object',
      additionalProperties: false,
      properties: {
        overzoom: { type: 'integer', minimum: 0, maximum: 30 }, // zoom levels served (upsampled) past maxzoom; default 4
        threads: { type: 'integer', minimum: 1 }, // raster worker threads; default one per core
        blockCacheMB: { type: 'number', exclusiveMinimum: 0 }, // decoded-block cache per worker; default in loadConfig
        mosaicMaxParts: { type: 'integer', minimum: 1, maximum: 4096 }, // parts a mosaic tile combines (not first); default 32, 400 past it
        // URL parts of MosaicJSON/STAC documents: off by default (a document must not make the server fetch what it names)
        remoteParts: { anyOf: [{ type: 'boolean' }, { type: 'array', items: { type: 'string', pattern: '^(https?|s3)://.' } }] },
      },
    },
    render: { // rendering styles with MapLibre Native (lib/style/render)
      type: 'object',
      additionalProperties: false,
      properties: {
        backend: { enum: ['auto', 'native', 'mapli', 'off'] }, // default auto: native if installed, else mapli
        python: { type: 'string', minLength: 1 }, // the Python that has mapli; default .render-venv/bin/python
        children: { type: 'integer', minimum: 1, maximum: 64 }, // renderer processes; default one per core, at most 8
        threads: { type: 'integer', minimum: 1, maximum: 64 }, // engine threads per child; default 1
        timeoutMs: { type: 'integer', minimum: 100 }, // a render longer than this answers 503 (default 30000)
        queueMax: { type: 'integer', minimum: 1 }, // renders waiting or under way before 503 + Retry-After (default 64)
        cacheTtlS: { type: 'number', minimum: 0 }, // how long rendered tiles are cached; default: until the style changes
        // tiles and images drawn while a remote source failed: their lifetime, and how often it is asked again (60)
        incompleteTtlS: { type: 'number', minimum: 1 },
        maxzoom: { type: 'integer', minimum: 0, maximum: 24 }, // default 22
        maxSize: { type: 'integer', minimum: 1, maximum: 8192 }, // a static image's width and height (default 2048)
        maxOverlays: { type: 'integer', minimum: 0 }, // paths and markers in one static image (default 100)
        maxPathPoints: { type: 'integer', minimum: 2 }, // points of one path (default 10000)
        // markers may name http(s) icon URLs, fetched by the server: true, or the URL prefixes allowed (default false)
        allowRemoteMarkerIcons: { anyOf: [{ type: 'boolean' }, { type: 'array', items: { type: 'string', pattern: '^https?://' } }] },
        maxStylesPerChild: { type: 'integer', minimum: 1 }, // styles a child registers before a fresh one replaces it (256)
      },
    },
    metrics: {
      type: 'object',
      additionalProperties: false,
      properties: {
        enabled: { type: 'boolean' }, // default true
        cluster: { anyOf: [{ type: 'boolean' }, { const: 'auto' }] }, // sum the workers' metrics (default 'auto': under pm2 cluster)
        dir: { type: 'string', minLength: 1 }, // where the workers of one app write them (default in the temp folder)
        intervalMs: { type: 'integer', minimum: 100 }, // how often each worker writes them (default 5000)
      },
    },
    shedding: { // past any of these, requests are answered 503 with Retry-After rather than queued (0: that check off)
      type: 'object',
      additionalProperties: false,
      properties: {
        maxEventLoopDelayMs: { type: 'number', minimum: 0 }, // default 1000
        maxHeapUsedMB: { type: 'number', minimum: 0 }, // default 0 (off)
        maxRssMB: { type: 'number', minimum: 0 }, // default 0 (off)
        retryAfterS: { type: 'integer', minimum: 1 }, // default 10
      },
    },
    cache: { // the shared second-level cache (Redis) for made tiles
      type: 'object',
      additionalProperties: false,
      properties: {
        redis: { type: ['string', 'null'], pattern: '^rediss?://' }, // off when not set
        kinds: { type: 'array', items: { type: 'string', minLength: 1 } }, // source kinds kept there (default postgis, cog, mosaic, render)
        ttlS: { type: 'number', exclusiveMinimum: 0 }, // at most this long (default 86400; a set's shorter lifetime wins)
        maxEntryKB: { type: 'number', exclusiveMinimum: 0 }, // larger tiles are not shared (default 512)
        timeoutMs: { type: 'integer', minimum: 1 }, // a lookup slower than this is a miss (default 50)
        prefix: { type: 'string' }, // of every key (default 'tc:')
      },
    },
    tileDir: { // made tiles written through to a folder nginx serves (lib/tile-dir)
      type: 'object',
      additionalProperties: false,
      properties: {
        dir: { type: ['string', 'null'], minLength: 1 }, // off when not set
        maxMB: { type: 'number', exclusiveMinimum: 0 }, // bound on its bytes, oldest tiles removed first (default 10240)
        kinds: { type: 'array', items: { type: 'string', minLength: 1 } }, // source kinds written (default postgis, cog, mosaic, render)
      },
    },
    sets: {
      type: 'object',
      additionalProperties: {
        type: 'object',
        additionalProperties: false,
        properties: {
          path: { type: 'string', minLength: 1 },
          url: { type: 'string', pattern: '^(https?|s3)://' },
          missingStatus: { enum: [204, 404] },
          cacheControl: { type: 'string' },
          emptyTiles: { type: 'boolean' }, // rasters: a transparent tile, not 404, where the set has no data
          overzoom: { type: 'integer', minimum: 0, maximum: 30 }, // rasters: zoom levels served past maxzoom
          cacheTtlS: { type: 'number', minimum: 0 }, // lifetime of this set's cached tiles (0: not cached)
          tileDir: { type: 'boolean' }, // written to the tile directory (default: when its kind is in tileDir.kinds)
          mosaic: { type: 'boolean' }, // a folder: one set of the COGs directly in it (lib/sources/mosaic.js)
          // a STAC set: the assets stacked as bands when the request names none (default: visual, else the first COG)
          assets: { type: 'array', items: { type: 'string', minLength: 1 }, minItems: 1, maxItems: 16, uniqueItems: true },
        },
      },
    },
  },
}

const ajv = new Ajv({ allErrors: true, coerceTypes: true, useDefaults: false })
const validate = ajv.compile(schema)

// Environment variable → config key; values are strings, coerced by the schema.
const ENV = {
  TILE_CANNON_PORT: 'port',
  TILE_CANNON_HOST: 'host',
  TILE_CANNON_PATHS: 'paths',
  TILE_CANNON_PUBLIC_URL: 'publicUrl',
  TILE_CANNON_CACHE_MB: 'cacheMB',
  TILE_CANNON_CACHE_CONTROL: 'cacheControl',
  TILE_CANNON_METADATA_CACHE_CONTROL: 'metadataCacheControl',
  TILE_CANNON_TRUST_PROXY: 'trustProxy',
  TILE_CANNON_ALLOWED_HOSTS: 'allowedHosts',
  TILE_CANNON_API_KEYS: 'apiKeys',
  TILE_CANNON_MAX_URL_LENGTH: 'limits.maxUrlLength',
  TILE_CANNON_MAX_QUERY_LENGTH: 'limits.maxQueryLength',
  TILE_CANNON_CORS: 'cors',
  TILE_CANNON_LOG_LEVEL: 'logLevel',
  TILE_CANNON_LOG_REQUESTS: 'logRequests',
  TILE_CANNON_LOG_FORMAT: 'logFormat',
  TILE_CANNON_WATCH: 'watch',
  TILE_CANNON_DEMO: 'demo',
  TILE_CANNON_VIEWER: 'viewer',
  TILE_CANNON_FEATURES: 'features.enabled',
  TILE_CANNON_STYLES: 'styles',
  TILE_CANNON_FONTS: 'fonts',
  TILE_CANNON_ICONS: 'icons',
  TILE_CANNON_DEFAULT_FONT: 'defaultFont',
  // 'section.key': a key inside a section (the raster worker pool's size, lib/raster/pool.js)
  TILE_CANNON_RASTER_THREADS: 'raster.threads',
  TILE_CANNON_COG_BLOCK_CACHE_MB: 'raster.blockCacheMB',
  TILE_CANNON_RENDER_BACKEND: 'render.backend',
  TILE_CANNON_RENDER_PYTHON: 'render.python',
  TILE_CANNON_RENDER_THREADS: 'render.threads',
  TILE_CANNON_RENDER_CHILDREN: 'render.children',
  // Object storage, under the names the AWS tools use; of two names for one key the later wins (the more specific).
  AWS_ENDPOINT_URL: 's3.endpoint',
  AWS_ENDPOINT_URL_S3: 's3.endpoint',
  AWS_DEFAULT_REGION: 's3.region',
  AWS_REGION: 's3.region',
  AWS_ACCESS_KEY_ID: 's3.accessKeyId',
  AWS_SECRET_ACCESS_KEY: 's3.secretAccessKey',
  AWS_SESSION_TOKEN: 's3.sessionToken',
  TILE_CANNON_S3_FORCE_PATH_STYLE: 's3.forcePathStyle',
  TILE_CANNON_REDIS_URL: 'cache.redis',
  TILE_CANNON_TILE_DIR: 'tileDir.dir',
  TILE_CANNON_TILE_DIR_MAX_MB: 'tileDir.maxMB',
  TILE_CANNON_METRICS: 'metrics.enabled',
  TILE_CANNON_MAX_EVENT_LOOP_DELAY_MS: 'shedding.maxEventLoopDelayMs',
  TILE_CANNON_MAX_RSS_MB: 'shedding.maxRssMB',
}
// Sections the environment sets key by key: merged key by key across the layers, so that a file's raster.overzoom
// and the environment's raster.threads both hold. Any other value, objects included, replaces the one below it.
const SECTIONS = new Set(Object.values(ENV).filter((key) => key.includes('.')).map((key) => key.split('.')[0]))

const FLAGS = {
  port: { type: 'string', short: 'p' },
  host: { type: 'string' },
  config: { type: 'string', short: 'c' },
  'public-url': { type: 'string' },
  'cache-mb': { type: 'string' },
  'cache-control': { type: 'string' },
  'metadata-cache-control': { type: 'string' },
  'trust-proxy': { type: 'string' },
  'allowed-hosts': { type: 'string' },
  cors: { type: 'string' },
  'log-level': { type: 'string' },
  'log-requests': { type: 'boolean' },
  'log-format': { type: 'string' },
  redis: { type: 'string' },
  'tile-dir': { type: 'string' },
  'tile-dir-max-mb': { type: 'string' },
  'no-metrics': { type: 'boolean' },
  'no-watch': { type: 'boolean' },
  'no-demo': { type: 'boolean' },
  'no-viewer': { type: 'boolean' },
  styles: { type: 'string' },
  fonts: { type: 'string' },
  icons: { type: 'string' },
  'default-font': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
}

export const USAGE = `Usage: tile-cannon [options] [path|url ...]

Serves every ${fileKindsText()} file in the given folders, the given files, and URLs:
${urlForms().map((u) => `  ${u}`).join('\n')}
With no path: ./tiles if it exists, else a built-in demo set (paths given that do not exist: logged; all: exit 2).
Paths also from env TILE_CANNON_PATHS (comma-separated); a PostGIS database also from env DATABASE_URL.
Object storage (s3://): env AWS_ENDPOINT_URL_S3 (or AWS_ENDPOINT_URL), AWS_REGION, AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN; TILE_CANNON_S3_FORCE_PATH_STYLE=true for MinIO-like servers.

Options:
  -p, --port N            port to listen on (default 3000; env TILE_CANNON_PORT)
      --host ADDR         address to listen on (default 0.0.0.0; env TILE_CANNON_HOST)
  -c, --config FILE       JSON or YAML config file (env TILE_CANNON_CONFIG)
      --public-url URL    base URL for TileJSON links, e.g. https://tiles.example.com (env TILE_CANNON_PUBLIC_URL)
      --cache-mb N        tile cache size in MiB, 0 turns it off (default 256; env TILE_CANNON_CACHE_MB)
      --cache-control V   Cache-Control for tiles (default "public, max-age=3600"; env TILE_CANNON_CACHE_CONTROL)
      --metadata-cache-control V  Cache-Control for TileJSON, /list, /catalog, /meta and / (default
                          "public, max-age=60"; env TILE_CANNON_METADATA_CACHE_CONTROL)
      --trust-proxy LIST  proxies whose X-Forwarded-Proto/Host/Prefix are believed: "true", or comma-separated
                          addresses, CIDRs, loopback, linklocal, uniquelocal (default: none; env TILE_CANNON_TRUST_PROXY)
      --allowed-hosts LIST  comma-separated hosts links may be built for; another Host gets the first one's links
                          (default: any; env TILE_CANNON_ALLOWED_HOSTS). API keys: env TILE_CANNON_API_KEYS
      --cors ORIGINS      "*", "false", or comma-separated origins (default "*"; env TILE_CANNON_CORS)
      --log-level LEVEL   fatal|error|warn|info|debug|trace|silent (default info; env TILE_CANNON_LOG_LEVEL)
      --log-requests      log every request, one line each (off by default: it costs throughput; env
                          TILE_CANNON_LOG_REQUESTS=true)
      --log-format F      auto|pretty|json: pretty on a terminal, JSON otherwise (default auto; env
                          TILE_CANNON_LOG_FORMAT)
      --redis URL         share made tiles (PostGIS, COG, rendered) with other replicas through Redis,
                          redis://host:6379/0 (env TILE_CANNON_REDIS_URL)
      --tile-dir DIR      write made tiles (PostGIS, COG, rendered) to DIR/{set}/{z}/{x}/{y}.{ext} for nginx to serve
                          (\`tile-cannon nginx\` prints its config; env TILE_CANNON_TILE_DIR)
      --tile-dir-max-mb N the tile directory's bound, oldest tiles removed first (default 10240; env
                          TILE_CANNON_TILE_DIR_MAX_MB)
      --no-metrics        no /metrics (env TILE_CANNON_METRICS=false)
      --no-watch          do not watch folders for new, replaced or deleted files (SIGHUP still reloads; env
                          TILE_CANNON_WATCH=false)
      --no-demo           serve nothing rather than the demo when no path is given (env TILE_CANNON_DEMO=false)
      --no-viewer         no map viewer (/viewer/…, and the home page's links to it; its previews stay) and
                          feature pages as tables only (env TILE_CANNON_VIEWER=false)
      --styles DIR        MapLibre styles, NAME/style.json or NAME.json (default ./styles if it exists; env
                          TILE_CANNON_STYLES)
      --fonts DIR         glyph PBFs as "Font Name/0-255.pbf" (default ./fonts if it exists; env TILE_CANNON_FONTS)
      --icons DIR         marker icons for static images, \`marker=lon,lat|pin.png\` (default ./icons if it exists;
                          env TILE_CANNON_ICONS)
      --default-font NAME the font serving unknown font names (default: the first "Regular" one; env
                          TILE_CANNON_DEFAULT_FONT)
  -h, --help              this help

More settings by env: TILE_CANNON_RASTER_THREADS, TILE_CANNON_COG_BLOCK_CACHE_MB (COG tiles); TILE_CANNON_RENDER_BACKEND,
_PYTHON, _CHILDREN, _THREADS (TILE_CANNON_RENDER_…: rendered styles); TILE_CANNON_MAX_URL_LENGTH, _MAX_QUERY_LENGTH;
TILE_CANNON_MAX_EVENT_LOOP_DELAY_MS, _MAX_RSS_MB (load shedding); TILE_CANNON_FEATURES=false (no OGC API – Features).
The rest are in the config file (README.md).
Other commands: \`tile-cannon export --help\` (tiles to a folder or an MBTiles file), \`tile-cannon nginx --help\`.
Precedence: flags > environment > config file > defaults.`

export class ConfigError extends Error {}

function readConfigFile (file) {
  let text
  try {
    text = readFileSync(file, 'utf8')
  } catch {
    throw new ConfigError(`cannot read config file ${file}`)
  }
  let data
  try {
    data = extname(file).toLowerCase() === '.json' ? JSON.parse(text) : YAML.parse(text)
  } catch (err) {
    throw new ConfigError(`config file ${file} is not valid ${extname(file) === '.json' ? 'JSON' : 'YAML'}: ${err.message.split('\n')[0]}`)
  }
  if (data === null || data === undefined) return {}
  if (typeof data !== 'object' || Array.isArray(data)) throw new ConfigError(`config file ${file} must hold an object`)
  // Paths in a config file are relative to the file.
  const base = dirname(resolve(file))
  const isUrl = (p) => /^[a-z][a-z0-9+.-]*:\/\//i.test(p)
  for (const key of ['styles', 'fonts', 'icons']) if (typeof data[key] === 'string') data[key] = resolve(base, data[key])
  if (typeof data.tileDir?.dir === 'string') data.tileDir.dir = resolve(base, data.tileDir.dir)
  if (Array.isArray(data.paths)) data.paths = data.paths.map((p) => (typeof p === 'string' && !isUrl(p) ? resolve(base, p) : p))
  if (data.sets && typeof data.sets === 'object') {
    for (const set of Object.values(data.sets)) if (set && typeof set.path === 'string') set.path = resolve(base, set.path)
  }
  return data
}

const LISTS = new Set(['paths', 'allowedHosts', 'apiKeys']) // comma-separated in the environment and in flags

/** The schema of a config key ('features.enabled': the `enabled` of the `features` section). */
const schemaOf = (key) => key.split('.').reduce((node, part) => node?.properties?.[part], schema)

// Variables whose key is true/false only: the spellings people write for a switch, any case. Keys that also take a
// number or a list (TILE_CANNON_TRUST_PROXY, TILE_CANNON_CORS) keep their own reading: there 1 could mean something.
const BOOLEAN_ENV = new Set(Object.keys(ENV).filter((name) => schemaOf(ENV[name])?.type === 'boolean'))
const SWITCH_WORDS = new Map([['true', true], ['1', true], ['yes', true], ['on', true], ['false', false], ['0', false], ['no', false], ['off', false]])

// Variables whose values are not repeated in an error (they end up in logs).
const SECRET_ENV = new Set(['TILE_CANNON_API_KEYS', 'AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN', 'TILE_CANNON_REDIS_URL'])

/** Sets `key` ('port', or 'tileDir.dir': the `dir` of the `tileDir` section) of a layer to a value as written (a
 * comma-separated list for the keys that are lists). */
function setKey (out, key, value) {
  const [section, inner] = key.split('.')
  if (inner !== undefined) (out[section] ??= {})[inner] = value
  else out[key] = LISTS.has(key) ? value.split(',').map((s) => s.trim()).filter(Boolean) : value
}

function fromEnv (env) {
  const out = {}
  for (const [name, key] of Object.entries(ENV)) {
    let value = env[name]
    if (value === undefined || value === '') continue
    if (BOOLEAN_ENV.has(name)) {
      value = SWITCH_WORDS.get(value.trim().toLowerCase())
      if (value === undefined) throw new ConfigError(`invalid configuration: ${name}=${JSON.stringify(env[name])} is not a switch: write true or false (1/0, yes/no, on/off also work)`)
    }
    setKey(out, key, value)
  }
  return out
}

/** The layers, each above the ones before it (SECTIONS merged key by key); copies, so the layers stay as they are. */
function mergeLayers (layers) {
  const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v)
  const out = {}
  for (const layer of layers) {
    for (const [key, value] of Object.entries(structuredClone(layer))) {
      out[key] = SECTIONS.has(key) && isObject(out[key]) && isObject(value) ? { ...out[key], ...value } : value
    }
  }
  return out
}

// Each flag that takes a value → the config key it sets ('tileDir.dir': the `dir` of the `tileDir` section). An error
// in its value names the flag (loadConfig's givenAs).
const FLAG_KEYS = {
  port: 'port',
  host: 'host',
  'public-url': 'publicUrl',
  'cache-mb': 'cacheMB',
  'cache-control': 'cacheControl',
  'metadata-cache-control': 'metadataCacheControl',
  'trust-proxy': 'trustProxy',
  'allowed-hosts': 'allowedHosts',
  cors: 'cors',
  'log-level': 'logLevel',
  'log-format': 'logFormat',
  redis: 'cache.redis',
  'tile-dir': 'tileDir.dir',
  'tile-dir-max-mb': 'tileDir.maxMB',
  styles: 'styles',
  fonts: 'fonts',
  icons: 'icons',
  'default-font': 'defaultFont',
}
const SECRET_FLAGS = new Set(['--redis']) // as TILE_CANNON_REDIS_URL: a URL may hold a password

function fromFlags (values, positionals) {
  const out = {}
  for (const [flag, key] of Object.entries(FLAG_KEYS)) {
    const value = values[flag]
    if (value === undefined) continue
    setKey(out, key, value)
  }
  if (values['log-requests']) out.logRequests = true
  if (values['no-metrics']) out.metrics = { enabled: false }
  if (values['no-watch']) out.watch = false
  if (values['no-demo']) out.demo = false
  if (values['no-viewer']) out.viewer = false
  if (positionals.length > 0) out.paths = positionals
  return out
}

/**
 * `--cache-mb -5` as `--cache-mb=-5`: parseArgs takes an argument starting with a dash for a flag of its own (and
 * refuses it as ambiguous), where no flag is a dash and a digit; the value then gets the setting's own error.
 */
function negativesJoined (argv, options) {
  const out = []
  for (let i = 0; i < argv.length; i++) {
    const name = argv[i].startsWith('--') ? argv[i].slice(2) : undefined
    if (options[name]?.type === 'string' && /^-\d/.test(argv[i + 1] ?? '')) out.push(`${argv[i]}=${argv[++i]}`)
    else out.push(argv[i])
  }
  return out
}

// "*", "false"/"true", or a comma-separated list of origins.
function normalizeCors (cors) {
  if (typeof cors !== 'string') return cors
  if (cors === 'false') return false
  if (cors === 'true' || cors === '*') return '*'
  const origins = cors.split(',').map((s) => s.trim()).filter(Boolean)
  return origins.length === 1 ? origins[0] : origins
}

// "true"/"false", or a comma-separated list of addresses, CIDRs and proxy-addr names.
function normalizeTrustProxy (value) {
  const v = value.trim()
  if (v === 'true' || v === 'false') return v === 'true'
  return v.split(',').map((s) => s.trim()).filter(Boolean)
}

/**
 * Builds the configuration from every layer. `overrides` (an object in config-file shape) sits above the flags;
 * tests and the bench use it.
 * @returns {{ config: object, help: boolean }}
 */
export function loadConfig ({ argv = [], env = {}, cwd = process.cwd(), overrides = {}, extraFlags = {} } = {}) {
  let parsed
  const options = { ...FLAGS, ...extraFlags }
  try {
    parsed = parseArgs({ args: negativesJoined(argv, options), options, allowPositionals: true, strict: true })
  } catch (err) {
    throw new ConfigError(err.message.replace(/\s*\n\s*/g, ' ')) // one line: parseArgs writes some in three
  }
  const { values, positionals } = parsed
  // A command's own flags (`tile-cannon export --zooms …`), as parsed, beside the configuration.
  const extra = Object.fromEntries(Object.keys(extraFlags).filter((k) => values[k] !== undefined).map((k) => [k, values[k]]))
  if (values.help) return { config: null, help: true, extra }
  const file = values.config ?? env.TILE_CANNON_CONFIG
  const envLayer = fromEnv(env)
  const flagsLayer = fromFlags(values, positionals)
  const layers = [DEFAULTS, file ? readConfigFile(resolve(cwd, file)) : {}, envLayer, flagsLayer, overrides]
  const merged = mergeLayers(layers)
  merged.postgres = { ...merged.postgres }
  // Set here, not in DEFAULTS: a config file's `postgres` section replaces the whole default one.
  merged.postgres.featureLimit ??= DEFAULT_FEATURE_LIMIT
  const limits = [['postgres.featureLimit', merged.postgres.featureLimit], ...Object.entries(merged.postgres.tables ?? {}).map(([id, t]) => [`postgres.tables.${id}.limit`, t?.limit])]
  for (const [key, limit] of limits) {
    // Said plainly: ajv's words for this schema are three ("must be equal to constant; must be >= 1; must match a
    // schema in anyOf").
    if (limit === true || (typeof limit === 'number' && !(Number.isInteger(limit) && limit >= 1))) {
      throw new ConfigError(`invalid configuration: ${key} is a number of features per tile (1 or more), or false for no limit, not ${JSON.stringify(limit)}`)
    }
  }
  if (!merged.postgres.url && env.DATABASE_URL) merged.postgres.url = env.DATABASE_URL
  if (typeof merged.cors === 'string') merged.cors = normalizeCors(merged.cors)
  if (typeof merged.trustProxy === 'string') merged.trustProxy = normalizeTrustProxy(merged.trustProxy)
  for (const key of ['allowedHosts', 'apiKeys']) if (typeof merged[key] === 'string') merged[key] = merged[key].split(',').map((s) => s.trim()).filter(Boolean)
  // A value is named as the user gave it: a flag by the flag (--cache-mb, not cacheMB), a variable of the environment
  // by its name and value.
  const at = (layer, key) => key.split('.').reduce((node, part) => node?.[part], layer)
  const givenAs = (where) => {
    const parts = where.split('.') // allowedHosts.1: an item of the list --allowed-hosts set
    for (let i = 1; i <= parts.length; i++) {
      const key = parts.slice(0, i).join('.')
      if (at(overrides, key) !== undefined) return undefined
      const flag = Object.keys(FLAG_KEYS).find((f) => FLAG_KEYS[f] === key && values[f] !== undefined)
      if (flag !== undefined) return { flag: `--${flag}`, value: i === parts.length ? values[flag] : at(merged, where) }
      const variable = Object.keys(ENV).findLast((n) => ENV[n] === key && env[n] !== undefined && env[n] !== '')
      if (variable !== undefined && at(flagsLayer, key) === undefined) return { variable }
    }
    return undefined
  }
  // "<where> <problem>" (the problem saying the value itself where `said`), named as given.
  const problemAt = (where, problem, said = false) => {
    const given = givenAs(where)
    if (given?.flag !== undefined) return `${given.flag} ${problem}${said || SECRET_FLAGS.has(given.flag) ? '' : `, not ${JSON.stringify(given.value)}`}`
    if (given?.variable === undefined) return `${where} ${problem}`
    const { variable } = given
    return `${SECRET_ENV.has(variable) ? variable : `${variable}=${JSON.stringify(env[variable])}`}: ${where} ${problem}`
  }
  if (!validate(merged)) {
    // An unknown key is named (ajv says only "must NOT have additional properties"): a typo is found at once.
    const problems = validate.errors.map((e) => {
      const where = e.instancePath.slice(1).replaceAll('/', '.') || 'config'
      if (e.keyword === 'additionalProperties') return `${where} has no setting ${JSON.stringify(e.params.additionalProperty)}`
      // ajv's enum message lists nothing ("must be equal to one of the allowed values"): list them.
      if (e.keyword === 'enum') return problemAt(where, `must be one of ${e.params.allowedValues.map((v) => JSON.stringify(v)).join(', ')}, not ${JSON.stringify(at(merged, where))}`, true)
      return problemAt(where, e.message)
    })
    throw new ConfigError(`invalid configuration: ${[...new Set(problems)].join('; ')}`)
  }
  if (typeof merged.cors === 'string') merged.cors = normalizeCors(merged.cors) // "false" may arrive via coercion
  if (typeof merged.publicUrl === 'string') merged.publicUrl = merged.publicUrl.replace(/\/+$/, '')
  // Each proxy as proxy-addr reads it, here: a bad one was a TypeError's stack when the app was built.
  for (const proxy of Array.isArray(merged.trustProxy) ? merged.trustProxy : []) {
    try {
      proxyAddr.compile([proxy])
    } catch (err) {
      throw new ConfigError(`invalid configuration: ${problemAt('trustProxy', `${JSON.stringify(proxy)} is not an address, a CIDR, loopback, linklocal or uniquelocal (${err.message})`, true)}`)
    }
  }
  if (Boolean(merged.s3.accessKeyId) !== Boolean(merged.s3.secretAccessKey)) {
    throw new ConfigError('invalid configuration: s3 credentials need both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY')
  }
  // The raster worker pool: one thread per core; decoded blocks 5 % of the machine's memory in all (GDAL's default
  // block cache), at least 64 MiB per worker.
  // Metrics of a cluster's workers summed (lib/metrics): 'auto' is under a pm2 cluster, which says so in the
  // environment of its workers (exec_mode, and the app's name), in a folder of this user's for this app and port.
  merged.metrics = { ...merged.metrics }
  if (merged.metrics.cluster === undefined || merged.metrics.cluster === 'auto') merged.metrics.cluster = env.exec_mode === 'cluster_mode'
  merged.metrics.dir ??= join(tmpdir(), `tile-cannon-metrics-${process.getuid?.() ?? 'user'}`, `${env.name ?? 'tile-cannon'}-${merged.port}`.replace(/[^\w.-]/g, '_'))
  merged.tileDir = { ...merged.tileDir }
  if (typeof merged.tileDir.dir === 'string') merged.tileDir.dir = resolve(cwd, merged.tileDir.dir)
  merged.raster.threads ??= availableParallelism()
  merged.raster.blockCacheMB ??= Math.max(64, totalmem() * 0.05 / merged.raster.threads / 2 ** 20)
  merged.paths = merged.paths.map((p) => (/^[a-z][a-z0-9+.-]*:\/\//i.test(p) ? p : resolve(cwd, p)))
  // Styles, fonts, icons: the folders given (relative to where they were given), else ./styles … when they exist.
  for (const key of ['styles', 'fonts', 'icons']) {
    if (typeof merged[key] === 'string') merged[key] = resolve(cwd, merged[key])
    else if (existsSync(resolve(cwd, key))) merged[key] = resolve(cwd, key)
  }
  // No path anywhere: ./tiles when it exists (else the catalog falls back to the demo).
  if (merged.paths.length === 0 && Object.keys(merged.sets).length === 0 && existsSync(resolve(cwd, 'tiles'))) {
    merged.paths = [resolve(cwd, 'tiles')]
  }
  return { config: deepFreeze(merged), help: false, extra }
}

function deepFreeze (value) {
  if (value && typeof value === 'object') {
    for (const v of Object.values(value)) deepFreeze(v)
    Object.freeze(value)
  }
  return value
}

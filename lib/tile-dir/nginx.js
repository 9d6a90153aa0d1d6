// The nginx configuration that serves the tile directory (lib/tile-dir/directory.js) in front of tile-cannon: a tile
// that is on disk is sent by nginx with tile-cannon's headers (Content-Type, Content-Encoding, Cache-Control, Vary,
// CORS); any other request, and a tile not on disk yet, goes to tile-cannon, which answers it and writes the tile.
//
// Why not `try_files $uri @tile_cannon`, the classic form: try_files looks for the file as named, and vector tiles are
// on disk gzip-compressed only (<y>.pbf.gz), which only gzip_static finds. So the static module answers, and its 404
// (no file) is handed to tile-cannon with `error_page 404 = @tile_cannon`: the same fallback, one lookup.
import { EXPOSED } from '../cors.js'
import { CONTENT_TYPES, TILE_EXTENSIONS } from '../tiletype.js'
// The body tile-cannon sends for a tile a raster set does not have (routes/tile-answer.js).
const NO_TILE = '{"statusCode":404,"error":"Not Found","message":"no tile at these coordinates"}'

/**
 * nginx's `http {}` block contents for a tile directory `dir` and tile-cannon at `upstream` (http://host:port):
 * `places` [{ place, cacheControl }] are the sets and styles whose tiles' Cache-Control is not `cacheControl` (the
 * default); `cors` as config.cors; `apiKeys`: when set, only requests carrying one in X-Api-Key are answered from
 * disk (the rest go to tile-cannon, which refuses them).
 */
export function nginxConfig ({ dir, upstream, listen = 8080, places = [], cacheControl, cors = '*', apiKeys = [] }) {
  const server = new URL(upstream)
  const quote = (s) => `"${s}"`
  // Names written into regexes: special characters in brackets, so that no backslash meets nginx's own quoting. A name
  // that cannot be written so is left out (its requests get the default, or go to tile-cannon).
  const plain = (s) => !/["\\\]^\x00-\x1f]/.test(s)
  const literal = (s) => s.replace(/[.*+?${}()|[/]/g, '[$&]')
  const lines = []
  const add = (...more) => lines.push(...more)

  add('# nginx in front of tile-cannon: tiles from its tile directory when they are there, anything else from',
    '# tile-cannon (which writes the tiles it makes there). Made by `tile-cannon nginx`; goes in the http {} block,',
    '# e.g. as /etc/nginx/conf.d/tile-cannon.conf.', '',
    'upstream tile_cannon {', `    server ${server.host};`, '    keepalive 32;', '}', '')
  add('# The Cache-Control of each set\'s tiles, as tile-cannon sends it (set by set where it is not the default).',
    'map $uri $tile_cannon_cache_control {', `    default ${quote(plain(cacheControl) ? cacheControl : 'no-cache')};`)
  for (const { place, cacheControl: value } of places) {
    if (plain(place) && plain(value)) add(`    ${quote(`~^/(data/|[.]tile-cannon-no-tile/)?${literal(place)}/[0-9]`)} ${quote(value)};`)
  }
  add('}', '')
  let origin = null
  if (cors === '*') origin = '"*"'
  else if (cors !== false) {
    add('map $http_origin $tile_cannon_origin {', '    default "";')
    for (const o of Array.isArray(cors) ? cors : [cors]) if (plain(o)) add(`    ${quote(`~^${literal(o)}$`)} $http_origin;`)
    add('}', '')
    origin = '$tile_cannon_origin'
  }
  // Vary as tile-cannon sends it: Accept-Encoding on a vector tile's 200 and 304 (not on 204 and 404), Origin with a
  // list of origins. Decided when the headers go out, when the status is known.
  const byOrigin = origin === '$tile_cannon_origin'
  add('map "$status:$uri" $tile_cannon_vary {', `    default ${quote(byOrigin ? 'Origin' : '')};`,
    `    "~^(200|304):.*[.](pbf|mlt|json)$" ${quote(byOrigin ? 'Origin, Accept-Encoding' : 'Accept-Encoding')};`, '}', '')
  if (apiKeys.length > 0) {
    add('map $http_x_api_key $tile_cannon_keyed {', '    default 0;')
    for (const key of apiKeys) if (plain(key)) add(`    ${quote(`~^${literal(key)}$`)} 1;`) // ~: compared exactly, case and all
    add('}', '')
  }
  const headers = ['        add_header Cache-Control $tile_cannon_cache_control always;', '        add_header Vary $tile_cannon_vary always;']
  // With CORS on, tile-cannon exposes these on every answer, with or without an allowed origin (lib/cors.js).
  if (origin !== null) headers.push(`        add_header Access-Control-Allow-Origin ${origin} always;`, `        add_header Access-Control-Expose-Headers ${quote(EXPOSED)} always;`)
  const proxy = ['        proxy_pass http://tile_cannon;', '        proxy_http_version 1.1;', '        proxy_set_header Connection "";',
    '        proxy_set_header Host $http_host;', '        proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;',
    '        proxy_set_header X-Forwarded-Proto $scheme;']
  const types = TILE_EXTENSIONS.map((ext) => `${CONTENT_TYPES[ext]} ${ext};`).join(' ')

  add('server {', `    listen ${listen};`, '',
    '    # A tile: /<set>/<z>/<x>/<y>.<ext>, /data/<set>/…, /styles/<style>[/512]/<z>/<x>/<y>[@2x].<ext>.',
    `    location ~ "^(?:/data|)/(?<tile_cannon_tile>[^./][^/]*/[0-9]+/[0-9]+/[0-9]+(?:@[1-4]x)?[.](?:${TILE_EXTENSIONS.join('|')})|(?<!/data/)styles/[^./][^/]*(?:/512)?/[0-9]+/[0-9]+/[0-9]+(?:@[1-4]x)?[.](?:png|jpg|webp))$" {`,
    `        alias ${dir.replace(/\/+$/, '')}/$tile_cannon_tile;`,
    // Before the `if`s: an `if` block takes the location's settings as they stand where it is written.
    '        open_file_cache off; # a cached descriptor would keep serving a tile tile-cannon has removed',
    '        log_not_found off;  # a tile not on disk yet is no error: tile-cannon answers it',
    '        gzip_static always; # <y>.pbf.gz as it is, with Content-Encoding: gzip ...',
    '        gunzip on;          # ... and decoded for a client that does not take gzip',
    '        gzip_proxied any;   # also to a client behind a proxy or CDN (Via:), as tile-cannon does',
    `        types { ${types} }`,
    '        default_type application/octet-stream;',
    ...headers,
    '        error_page 404 = @tile_cannon; # not on disk (yet): tile-cannon answers, and writes it',
    '        error_page 418 = @tile_cannon;',
    '        if ($args) { return 418; } # options (a colormap, a function\'s arguments): tile-cannon makes those')
  if (apiKeys.length > 0) add('        if ($tile_cannon_keyed = 0) { return 418; } # no key: tile-cannon refuses it')
  add('        if (-f $request_filename.none) { return 204; } # a tile the set does not have',
    '        if (-f $request_filename.404) { rewrite ^ /.tile-cannon-no-tile/$tile_cannon_tile last; }',
    '    }', '',
    '    location ^~ /.tile-cannon-no-tile/ {',
    '        internal;',
    '        types { }',
    '        default_type "application/json; charset=utf-8";',
    ...headers,
    `        return 404 '${NO_TILE}';`,
    '    }', '',
    '    location @tile_cannon {', ...proxy, '    }', '',
    '    location / {', ...proxy, '    }',
    '}')
  return lines.join('\n') + '\n'
}

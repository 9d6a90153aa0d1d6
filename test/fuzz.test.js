// Fuzz: thousands of random and hostile requests, written byte for byte on raw sockets (node:net, so nothing on the
// way normalises them), against two running servers over real sets, styles, sprites, fonts and icons: one open (a
// host allow-list, a trusted loopback proxy), one with API keys and a CORS origin list. What must hold, whatever is
// sent: no 5xx but the declared 503s (with Retry-After), the process never falls over, no file is opened (or even
// looked up) outside the data folder, node_modules or lib/, no answer shows a path, a stack, a host it was sent or a
// key that was refused, nothing but the probes and the viewer's code is served without a key, and memory comes back.
//
// Seeded: the seed is printed; FUZZ_SEED=<seed> repeats a run, FUZZ_COUNT=<n> sets the number of requests.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import fs, { copyFileSync, mkdirSync, realpathSync, writeFileSync } from 'node:fs'
import { syncBuiltinESMExports } from 'node:module'
import { connect } from 'node:net'
import { join, resolve, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import v8 from 'node:v8'
import vm from 'node:vm'
import { PbfWriter } from 'pbf'
import { FIXTURES, HAVE_FIXTURES, ROOT, makeApp } from './helpers/app.js'
import { PNG, makeMvt, pyramid, tempDir, vectorTiles, writeMbtiles, writePmtiles } from './helpers/data.js'

const SEED = Number(process.env.FUZZ_SEED ?? (Date.now() % 2 ** 31))
const COUNT = Number(process.env.FUZZ_COUNT ?? 4000)
const KEY = 'fuzz-key-1'

// ---- the fs hook: every path this thread asks the file system about, while recording (the COG workers open only
// the files the catalog hands them; SQLite opens its files natively, at start) ----

const opened = []
let recording = false
function hookFs () {
  const record = (p) => {
    if (!recording) return
    if (typeof p === 'string') opened.push(p)
    else if (Buffer.isBuffer(p)) opened.push(p.toString('latin1'))
    else if (p instanceof URL) opened.push(p.protocol === 'file:' ? fileURLToPath(p) : String(p))
  }
  const wrap = (object, names) => {
    for (const name of names) {
      const original = object[name]
      if (typeof original !== 'function') continue
      object[name] = function (path, ...rest) { record(path); return original.call(this, path, ...rest) }
    }
  }
  // Path-taking functions (those on a file descriptor or a FileHandle need a path first, through one of these).
  const names = ['open', 'readFile', 'stat', 'lstat', 'readdir', 'opendir', 'access', 'realpath', 'exists', 'readlink',
    'createReadStream', 'watch', 'statfs']
  wrap(fs, [...names, ...names.map((n) => `${n}Sync`)])
  wrap(fs.realpath, ['native'])
  wrap(fs.realpathSync, ['native'])
  wrap(fs.promises, names)
  syncBuiltinESMExports() // `import { readFile } from 'node:fs/promises'` in lib/ sees the wrapped ones
}

// ---- a seeded PRNG (mulberry32) ----

function prng (seed) {
  let a = seed >>> 0
  const next = () => {
    a = (a + 0x6D2B79F5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const int = (n) => Math.floor(next() * n)
  const pick = (list) => list[int(list.length)]
  const chance = (p) => next() < p
  return { next, int, pick, chance }
}

// ---- what is served ----

function glyphPbf (name, range, ids) {
  const w = new PbfWriter()
  w.writeMessage(1, (_, p) => {
    p.writeStringField(1, name)
    p.writeStringField(2, range)
    for (const id of ids) p.writeMessage(3, (__, g) => { g.writeVarintField(1, id); g.writeVarintField(7, 10) }, null)
  }, null)
  return Buffer.from(w.finish())
}

function writeData (dir) {
  const tiles = join(dir, 'tiles')
  mkdirSync(tiles)
  writeMbtiles(join(tiles, 'roads.mbtiles'), { tiles: vectorTiles(pyramid(0, 3, 2)), metadata: { format: 'pbf', minzoom: '0', maxzoom: '3' } })
  writePmtiles(join(tiles, 'pm.pmtiles'), { tiles: vectorTiles(pyramid(0, 2, 2)) })
  writeMbtiles(join(tiles, 'photo.mbtiles'), { tiles: [{ z: 0, x: 0, y: 0, data: PNG }, { z: 1, x: 1, y: 1, data: PNG }], metadata: { format: 'png' } })
  // Raw MVT, one tile large enough to be gzipped off the event loop (the front's asynchronous answer).
  writePmtiles(join(tiles, 'raw.pmtiles'), { tiles: [{ z: 0, x: 0, y: 0, data: makeMvt(0, 0, 0, { pad: 'tile '.repeat(4000) }) }, { z: 1, x: 0, y: 0, data: makeMvt(1, 0, 0) }], tileCompression: 'none' })
  writeFileSync(join(tiles, 'broken.mbtiles'), 'not a database at all, but long enough to look like one '.repeat(20)) // 503
  // Names a URL must encode: a space, a non-ASCII letter, a percent sign, a comma (as composites are named).
  for (const name of ['my tiles.mbtiles', 'ünï.pmtiles', '50%.mbtiles', 'a,b.mbtiles']) {
    if (name.endsWith('.pmtiles')) writePmtiles(join(tiles, name), { tiles: vectorTiles(pyramid(0, 1, 2)) })
    else writeMbtiles(join(tiles, name), { tiles: vectorTiles(pyramid(0, 1, 2)), metadata: { format: 'pbf' } })
  }
  // COGs, where the fixtures are: their options (bands, rescale, colormaps, nodata, terrain encodings) are fuzzed too.
  if (HAVE_FIXTURES) {
    copyFileSync(join(FIXTURES, 'cog', 'cog_rgb.tif'), join(tiles, 'rgb.tif'))
    copyFileSync(join(FIXTURES, 'cog', 'sparse.tiff'), join(tiles, 'sparse.tiff'))
    copyFileSync(join(FIXTURES, 'cog', 'cog_int16.tif'), join(tiles, 'int16.tif'))
  }
  writeFileSync(join(tiles, 'parks.geojson'), JSON.stringify({ type: 'FeatureCollection', features: [{ type: 'Feature', properties: { name: 'a' }, geometry: { type: 'Point', coordinates: [10, 10] } }] }))

  const styles = join(dir, 'styles')
  mkdirSync(join(styles, 'city', 'sprites'), { recursive: true })
  writeFileSync(join(styles, 'city', 'style.json'), JSON.stringify({
    version: 8,
    name: 'City',
    sources: { roads: { type: 'vector', url: 'mbtiles://roads' }, pm: { type: 'vector', url: 'pmtiles://pm.pmtiles' }, gone: { type: 'vector', url: 'mbtiles://nowhere' } },
    sprite: 'sprites/city',
    glyphs: 'fonts/{fontstack}/{range}.pbf',
    layers: [{ id: 'bg', type: 'background', paint: { 'background-color': '#fff' } }],
  }))
  writeFileSync(join(styles, 'city', 'sprites', 'city.json'), JSON.stringify({ dot: { x: 0, y: 0, width: 1, height: 1, pixelRatio: 1 } }))
  writeFileSync(join(styles, 'city', 'sprites', 'city.png'), PNG)
  writeFileSync(join(styles, 'multi.json'), JSON.stringify({ version: 8, sources: {}, sprite: [{ id: 'a', url: 'city/sprites/city' }, { id: 'b', url: '../../etc/passwd' }], layers: [] }))
  if (HAVE_FIXTURES) copyFileSync(join(FIXTURES, 'styles', 'osm-liberty-lite.json'), join(styles, 'liberty.json'))

  const fonts = join(dir, 'fonts')
  mkdirSync(join(fonts, 'Sans Regular'), { recursive: true })
  writeFileSync(join(fonts, 'Sans Regular', '0-255.pbf'), glyphPbf('Sans Regular', '0-255', [65, 66, 67]))
  const icons = join(dir, 'icons')
  mkdirSync(icons)
  writeFileSync(join(icons, 'pin.png'), PNG)
  return { tiles, styles, fonts, icons }
}

// ---- the hostile parts ----

const TRAVERSAL = [
  '..', '../..', '..%2f..%2f..%2fetc%2fpasswd', '%2e%2e', '%2e%2e%2f%2e%2e%2fetc%2fpasswd', '%2E%2E%2F', '.%2e', '%2e.',
  '%252e%252e%252f', '%252e%252e', '..%5c..%5cwindows', '..\\..\\boot.ini', '%c0%ae%c0%ae%c0%af', '%c0%af', '%e0%80%ae',
  '%c1%9c', '..%c0%af..%c0%afetc', '....//....//', '..;', '..%00', '%2e%2e%00', '/etc/passwd', '%2fetc%2fpasswd',
  'C:%5cWindows%5cwin.ini', 'file:%2f%2f%2fetc%2fpasswd', '~root', '%7e', '.', '%2e', '...', '.git', '.env',
  '..%252f..%252fpackage.json', '%u002e%u002e', '..%u2215', '%ef%bc%8f', 'node_modules', 'lib', 'package.json',
]
const NUMBERS = [
  '-1', '-0', '0', '00', '000000000000000000001', '1e3', '1e309', '0x10', '0b1', 'NaN', 'Infinity', '-Infinity', ' 1',
  '1 ', '+1', '1.5', '1.', '.5', '2147483648', '4294967296', '9007199254740993', '99999999999999999999999999999999',
  '-99999999999', '%31', '%2d1', '１', '%ef%bc%91', '1%00', '31', '30', '29', '4', '3', '2', '1', '8', '16', '65535',
]
const SEGMENTS = [
  '', '*', '%', '%%', '%zz', '%2', '%ff', '%fe%ff', '%e2%80%ae', '%c3%28', '%ed%a0%80', '%00', '%0a', '%0d%0a', '%09',
  '%20', '+', ';', ',', ',,', 'a,b', 'roads,pm', 'roads,roads', 'roads,broken', '@', '@2x', '@3x', '@9x', '@0x', '@2x.png',
  '.json', '.pbf', '.pbf.gz', '.', 'meta', 'style.json', 'sprite', 'sprite@2x.json', 'sprite.png', 'static', '512',
  '__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', 'valueOf', '%5f%5fproto%5f%5f', '{z}', '{x}',
  '$%7Bjndi:ldap://x%7D', '%3Cscript%3E', '<script>', '"', "'", '`', '%22', '%27', '%60', '%3c', '%3e', 'a%2fb', 'a%5cb',
  'x'.repeat(511), 'y'.repeat(513), 'z'.repeat(4000), '%41'.repeat(300),
]
const IDS = ['roads', 'roads.mbtiles', 'pm', 'pm.pmtiles', 'photo', 'raw', 'broken', 'parks', 'nope', 'data', 'list', 'styles',
  'my%20tiles', 'my tiles', 'my+tiles', '%C3%BCn%C3%AF', 'ünï', '50%25', '50%', 'a,b', 'a%2Cb', 'a', 'b', 'rgb', 'int16', 'sparse']
const PATHS = [
  '/roads/2/1/1.pbf', '/roads/0/0/0', '/roads.mbtiles/1/0/0.mvt', '/pm/1/1/1.pbf', '/photo/1/1/1.png', '/photo/0/0/0@2x.png',
  '/raw/0/0/0', '/raw/1/0/0', '/broken/0/0/0', '/parks/3/4/3', '/data/roads/1/0/0.pbf', '/roads,pm/0/0/0', '/roads.json',
  '/roads', '/pm.json', '/broken.json', '/data/roads.json', '/roads/meta', '/photo/meta', '/list', '/catalog', '/health',
  '/ready', '/metrics', '/', '/styles.json', '/styles/city/style.json', '/styles/multi/style.json', '/styles/city/sprite.json',
  '/styles/city/sprite@2x.png', '/styles/multi/sprite/a.json', '/styles/multi/sprite/b@2x.png', '/styles/city.json',
  '/styles/city/0/0/0.png', '/styles/city/512/1/0/0@2x.webp', '/styles/city/static/0,0,2/100x100.png',
  '/styles/city/static/auto/100x100@2x.png?marker=0,0|pin.png', '/styles/city/static/-10,-10,10,10/20000x20000.jpg',
  '/fonts.json', '/fonts/Sans Regular/0-255.pbf', '/fonts/Sans%20Regular,Nope/256-511.pbf', '/viewer/roads',
  '/viewer/photo', '/viewer/styles/city', '/viewer/assets/viewer.js', '/viewer/assets/maplibre-gl.css',
  '/viewer/assets/maplibre-gl.mjs', '/favicon.ico', '/robots.txt', '/my%20tiles/1/1/1.pbf', '/%C3%BCn%C3%AF/0/0/0',
  '/50%25/0/0/0', '/50%25.json', '/a,b/0/0/0', '/a%2Cb.json', '/viewer/50%25', '/viewer/a,b', '/rgb/14/3423/6264.png',
  '/rgb/14/3423/6264@2x.webp?bidx=1,2,3', '/rgb.json?bidx=3,2,1', '/int16/0/0/0.png?rescale=0,1000&colormap_name=viridis',
  '/int16/5/10/6.jpg?encoding=terrarium', '/int16/9/175/98@2x.png', '/int16.json?colormap_name=magma_r', '/int16/meta',
  '/viewer/int16', '/sparse/11/2036/1255.png', '/sparse/7/127/78@2x.png?nodata=0', '/data/rgb/14/3423/6264.png?resampling=bilinear',
]
const WHOLE = [
  '*', '', 'roads/0/0/0', '//roads/0/0/0', '///', '/./roads/0/0/0', '/roads/./0/0/0', '/roads//0/0/0', '/roads/0/0/0/',
  '/roads/0/0/0//', 'http://evil-abs.example/roads.json', 'https://evil-abs.example:99999/', '//evil-abs.example/roads.json',
  '/../../../../etc/passwd', '/%2e%2e/%2e%2e/%2e%2e/etc/passwd', '/viewer/assets/../../../package.json',
  '/viewer/assets/%2e%2e/%2e%2e/%2e%2e/package.json', '/viewer/assets/..%2f..%2f..%2fpackage.json',
  '/viewer/assets/%252e%252e/%252e%252e/package.json', '/viewer/assets/..%5c..%5c..%5cpackage.json',
  '/viewer/assets/%c0%ae%c0%ae/%c0%ae%c0%ae/package.json', '/viewer/assets/maplibre-gl.mjs%00.css',
  '/viewer/assets/../../../../../../etc/passwd', '/viewer/assets/%2fetc%2fpasswd', '/viewer/assets//etc/passwd',
  '/styles/city/sprite/..%2f..%2f..%2f..%2fetc%2fpasswd.json', '/styles/%2e%2e%2fcity/style.json',
  '/styles/..%2f..%2fetc/sprite.json', '/fonts/..%2f..%2f..%2fetc/0-255.pbf', '/fonts/../../etc/0-255.pbf',
  '/fonts/%2e%2e%2f%2e%2e%2fpackage.json,Sans Regular/0-255.pbf', '/fonts/Sans Regular%00/0-255.pbf',
  '/roads.mbtiles%00.json', '/roads%00/0/0/0', '/%00', '/roads/0/0/0%00.pbf', '/roads/0/0/0.pbf%00', '/data/%2e%2e/list',
  '/styles/city/static/auto/100x100.png?marker=0,0|..%2f..%2f..%2fetc%2fpasswd',
  '/styles/city/static/auto/100x100.png?marker=0,0|%2fetc%2fpasswd',
]
const QUERIES = [
  '', '?', '?&&&', '?=', '?=x', '?a', '?a=1&a=2&a=3', '?a[]=1&a[]=2', '?a[0]=1', '?__proto__[x]=1', '?__proto__=1',
  '?constructor[prototype][x]=1', '?constructor.prototype.x=1', '?toString=1', '?hasOwnProperty=1', '?valueOf=',
  '?%zz=1', '?a=%zz', '?a=%00', '?%00=1', '?a=%c0%af', '?key', '?key=', '?key=wrong-key-A', '?key=wrong-key-A&key=wrong-key-B',
  '?key[]=wrong-key-A', '?k%65y=wrong-key-A', `?key=${KEY}`, `?key=${KEY}&key=${KEY}`, `?k%65y=${KEY}`, `?key=${KEY}&bidx=1`,
  '?bidx=1&bidx=2', '?rescale=1e999,NaN', '?padding=NaN', '?padding=-1', '?padding=0.49', '?colormap_name=__proto__',
  '?path=0,0|1,1', '?path=enc:%7F%7F', '?path=' + '1,1|'.repeat(400), '?marker=0,0|pin.png|scale:1e9', '?marker=0,0|color:%23f00',
  '?stroke=javascript:alert(1)&path=0,0|1,1', '?width=1e308&path=0,0|1,1', '?' + 'a=1&'.repeat(1500), '?' + 'x'.repeat(5000),
  '?' + 'q'.repeat(9000), '?callback=alert', '?v=1#frag', '?a=1;b=2', '?a=%2e%2e%2f',
  // COG options, titiler's names
  '?bidx=0', '?bidx=99', '?bidx=-1', '?bidx=1,1,1,1', '?bidx=a', '?bidx=__proto__', '?' + 'bidx=1&'.repeat(100), '?bidx=1,2',
  '?bidx=1e400', '?bidx=1.5', '?rescale=a,b', '?rescale=1e309,1', '?rescale=5,5', '?rescale=1,0', '?rescale=0,1&rescale=0,1&rescale=0,1&rescale=0,1',
  '?rescale=-1e308,1e308', '?rescale=,', '?colormap_name=nope', '?colormap_name=viridis_r', '?colormap_name=constructor',
  '?colormap_name=viridis&bidx=1,2,3', '?nodata=nan', '?nodata=inf', '?nodata=1e999', '?nodata=x', '?nodata=-0',
  '?resampling=cubic', '?resampling=lanczos', '?resampling=__proto__', '?encoding=mapbox', '?encoding=terrarium&bidx=1,2,3',
  '?encoding=x', '?encoding=mapbox&colormap_name=viridis', '?bidx=1&rescale=0,255&colormap_name=terrain&nodata=0&resampling=bilinear',
]
const ACCEPT_ENCODINGS = [
  'gzip', 'br', 'zstd', 'deflate', 'identity', '*', 'gzip;q=0', 'gzip;q=abc', 'gzip;q=1e9', 'gzip;q=-1', '*;q=0',
  'identity;q=0, *;q=0', 'br;q=0.5, gzip;q=0.5', ';;;', ',,,', 'q=1', 'gzip, '.repeat(2000), '\t', 'GZIP', 'x-gzip',
  'gzip;q=0.0000000001', 'compress', 'br, br, br', 'gzip;level=9',
]
const IF_NONE_MATCH = ['*', 'W/"x"', '"', '""', '"abc"', 'W/', ', , ,', '"a", W/', '"' + 'e'.repeat(6000) + '"', Array.from({ length: 500 }, (_, i) => `"${i}"`).join(', '), 'W/"*"', '*, *', 'null']
const RANGES = ['bytes=0-', 'bytes=-1', 'bytes=0-0', 'bytes=5-1', 'bytes=999999999999999999999-', 'bytes=-', 'items=0-1', 'bytes=' + '0-0,'.repeat(500) + '0-0', 'bytes=abc', 'bytes=0-1,2-3,4-5']
const HOSTS = ['evil-host.example', 'EVIL-HOST.EXAMPLE', 'evil-host.example:1', 'tiles.test.evil-host.example', 'evil-host.example/../', '[::1]', '127.0.0.1:1', 'localhost', 'tiles.test', 'TILES.TEST', 'a b', 'evil-host.example\t', 'x'.repeat(300) + 'evil-host', '', '%65vil-host']
const METHODS = ['GET', 'GET', 'GET', 'GET', 'GET', 'GET', 'GET', 'GET', 'HEAD', 'HEAD', 'OPTIONS', 'POST', 'PUT', 'DELETE', 'PATCH', 'PROPFIND', 'TRACE', 'CONNECT', 'MKCOL', 'get', 'G ET', 'GARBAGE', 'SEARCH', 'QUERY', 'XYZ\u0000']

/** One hostile request: { raw: Buffer, method, target, sentKey }; `keepAlive` for one with another after it. */
function makeRequest (r, keepAlive = false) {
  let path
  const roll = r.next()
  if (roll < 0.15) path = r.pick(WHOLE)
  else if (roll < 0.25) path = `/${r.pick(IDS)}/${r.pick(NUMBERS)}/${r.pick(NUMBERS)}/${r.pick(NUMBERS)}${r.pick(['', '.pbf', '.png', '@2x.png', '.json', '@2x', '.' + 'x'.repeat(20)])}`
  else {
    path = r.pick(PATHS)
    const q = path.indexOf('?')
    let query = q === -1 ? '' : path.slice(q)
    if (q !== -1) path = path.slice(0, q)
    if (r.chance(0.6)) {
      const segments = path.split('/')
      const times = 1 + r.int(2)
      for (let i = 0; i < times; i++) {
        const at = 1 + r.int(Math.max(1, segments.length - 1))
        const token = r.pick([TRAVERSAL, NUMBERS, SEGMENTS, IDS])
        const value = r.pick(token)
        const how = r.int(4)
        if (how === 0) segments[at] = value
        else if (how === 1) segments[at] = (segments[at] ?? '') + value
        else if (how === 2) segments.splice(at, 0, value)
        else segments[at] = value + (segments[at] ?? '')
      }
      path = segments.join('/')
    }
    if (r.chance(0.35)) query = r.pick(QUERIES) + (r.chance(0.2) && query ? '&' + query.slice(1) : '')
    path += query
  }
  // Characters Node's parser refuses in a request line (space, quotes, <>, `{}|\^`, controls, non-ASCII) are
  // percent-encoded most of the time, so that most requests reach the server's own code; sent raw the rest.
  if (!r.chance(0.15)) path = path.replace(/[^\x21-\x7e]|["<>`{}|\\^]/g, (c) => encodeURIComponent(c).replace(/[!'()*]/g, (x) => `%${x.charCodeAt(0).toString(16)}`))
  if (r.chance(0.03)) path = path.replace(/%00/g, '\u0000') // a raw NUL, which Node's parser refuses
  if (r.chance(0.02)) path = path.replace(/\//g, '\\')
  if (r.chance(0.01)) path += ' HTTP/1.0'

  const method = r.pick(METHODS)
  const headers = []
  let host = 'tiles.test'
  if (r.chance(0.25)) host = r.pick(HOSTS)
  if (!r.chance(0.03)) headers.push(['Host', host])
  if (r.chance(0.02)) headers.push(['Host', 'evil-host.example']) // two Host headers: Node's 400
  if (r.chance(0.2)) headers.push(['X-Forwarded-Host', r.pick(HOSTS)])
  if (r.chance(0.1)) headers.push(['X-Forwarded-Proto', r.pick(['https', 'http', 'gopher', 'https, http', ''])])
  if (r.chance(0.1)) headers.push(['X-Forwarded-Prefix', r.pick(['/evil-prefix', '/x/../..', '//evil-prefix.example', '/%2e%2e', '/ok'])])
  if (r.chance(0.5)) headers.push(['Accept-Encoding', r.pick(ACCEPT_ENCODINGS)])
  if (r.chance(0.2)) headers.push(['If-None-Match', r.pick(IF_NONE_MATCH)])
  if (r.chance(0.1)) headers.push(['Range', r.pick(RANGES)])
  if (r.chance(0.1)) headers.push(['If-Modified-Since', r.pick(['yesterday', 'Thu, 01 Jan 1970 00:00:00 GMT', '0', 'Sat, 99 Foo 99999 99:99:99 GMT'])])
  if (r.chance(0.15)) headers.push(['Origin', r.pick(['http://a.example', 'http://b.example', 'null', '*', ''])])
  if (method === 'OPTIONS' && r.chance(0.7)) headers.push(['Access-Control-Request-Method', r.pick(['GET', 'PUT', ''])], ['Access-Control-Request-Headers', 'x-api-key'])
  if (r.chance(0.3)) {
    const key = r.pick([KEY, KEY, 'wrong-key-H', '', ' ' + KEY, KEY + ' ', KEY.toUpperCase(), `${KEY}, ${KEY}`])
    headers.push(['X-API-Key', key])
    if (r.chance(0.05)) headers.push(['X-API-Key', KEY])
  }
  if (r.chance(0.02)) headers.push(['X-Huge', 'h'.repeat(r.pick([1000, 8000, 20000]))]) // past 16 KiB: Node's 431
  if (r.chance(0.02)) for (let i = 0; i < 300; i++) headers.push([`X-Many-${i}`, 'v'])
  if (r.chance(0.02)) headers.push(['X-Bad', r.pick(['a\u0000b', 'caf\u00e9', '\u00ff\u00fe'])])
  let body = Buffer.alloc(0)
  if (['POST', 'PUT', 'PATCH', 'PROPFIND'].includes(method) || r.chance(0.03)) {
    const kind = r.int(4)
    if (kind === 0) { body = Buffer.from('{"__proto__":{"x":1}}'); headers.push(['Content-Type', 'application/json']) }
    if (kind === 1) { body = Buffer.from('{not json'); headers.push(['Content-Type', 'application/json']) }
    if (kind === 2) { body = Buffer.from('<?xml version="1.0"?><propfind/>'); headers.push(['Content-Type', 'text/xml']) }
    if (kind === 3) body = Buffer.alloc(2000, 'b')
    headers.push(['Content-Length', String(body.length)])
  }
  if (r.chance(0.01)) { headers.push(['Transfer-Encoding', 'chunked']); body = Buffer.from('zz\r\nnot a chunk\r\n0\r\n\r\n') }
  headers.push(['Connection', keepAlive ? 'keep-alive' : 'close'])
  // A key that may be good, however sent (the check below only asks that nothing is served with none at all).
  const sentKey = path.includes(KEY) || headers.some(([name, value]) => name === 'X-API-Key' && value.includes(KEY))
  const head = `${method} ${path} HTTP/1.1\r\n${headers.map(([k, v]) => `${k}: ${v}`).join('\r\n')}\r\n\r\n`
  return { raw: Buffer.concat([Buffer.from(head, 'latin1'), body]), method, target: path, sentKey }
}

/** Writes `raw` to a fresh connection; resolves with { status, headers, body } or { status: 0 } when closed unanswered. */
function send (port, raw) {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1')
    const chunks = []
    const timer = setTimeout(() => { socket.destroy(); reject(new Error('no answer in 10 s')) }, 10_000)
    socket.on('data', (c) => chunks.push(c))
    socket.on('error', () => {}) // a reset after the answer (Node closing a refused request) is an answer too
    socket.on('close', () => {
      clearTimeout(timer)
      const all = Buffer.concat(chunks)
      const end = all.indexOf('\r\n\r\n')
      if (all.length === 0 || end === -1) return resolve({ status: 0, headers: {}, body: '' })
      const lines = all.subarray(0, end).toString('latin1').split('\r\n')
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(lines[0])?.[1] ?? -1)
      const headers = {}
      for (const line of lines.slice(1)) {
        const i = line.indexOf(':')
        headers[line.slice(0, i).toLowerCase()] = line.slice(i + 1).trim()
      }
      resolve({ status, headers, body: all.subarray(end + 4).toString('latin1') })
    })
    socket.write(raw) // not end(): a half-closed socket makes Node drop an answer still being made
  })
}

const OPEN_PATHS = /^\/(health|ready|metrics)\/?(\?|$)|^\/viewer\/assets\//

test(`fuzz: ${COUNT} random and hostile requests over raw sockets`, { timeout: 120_000 }, async (t) => {
  console.log(`fuzz seed ${SEED} (FUZZ_SEED=${SEED} node --test test/fuzz.test.js repeats this run)`)
  t.diagnostic(`seed ${SEED}`)
  hookFs()
  const dir = realpathSync(tempDir(t, 'tile-cannon-fuzz-'))
  const data = writeData(dir)
  const common = { paths: [data.tiles], styles: data.styles, fonts: data.fonts, icons: data.icons, render: { backend: 'off' }, raster: { threads: 1 } }
  const open = await makeApp(t, { ...common, allowedHosts: ['tiles.test', 'localhost'], trustProxy: ['loopback'] })
  const keyed = await makeApp(t, { ...common, apiKeys: [KEY, 'second-key'], cors: ['http://a.example'] })
  await open.listen({ port: 0, host: '127.0.0.1' })
  await keyed.listen({ port: 0, host: '127.0.0.1' })
  const servers = [{ name: 'open', port: open.server.address().port, keys: false }, { name: 'keyed', port: keyed.server.address().port, keys: true }]

  let gc = globalThis.gc
  if (gc === undefined) {
    try { v8.setFlagsFromString('--expose-gc'); gc = vm.runInNewContext('gc') } catch {}
  }
  const memory = () => { gc?.(); gc?.(); return process.memoryUsage() }

  const r = prng(SEED)
  // /proc/self: the process's own figures (prom-client's process metrics, on /metrics).
  const modules = join(ROOT, 'node_modules')
  const allowed = [dir, modules, realpathSync(modules), join(ROOT, 'lib'), '/proc/self'].map((p) => p + sep)
  const leaks = [dir, ROOT, realpathSync(ROOT)]
  const problems = []
  const statuses = {}
  const warmUp = Math.floor(COUNT / 10)
  let before = null
  const started = Date.now()
  opened.length = 0
  recording = true
  const CONCURRENCY = 16
  let next = 0
  async function worker () {
    while (next < COUNT) {
      const i = next++
      if (i === warmUp) before = memory()
      let request = makeRequest(r, r.chance(0.05))
      // Now and then a second request pipelined behind the first on the same connection (the first says keep-alive).
      if (request.raw.includes('Connection: keep-alive')) {
        const second = makeRequest(r)
        request = { ...request, raw: Buffer.concat([request.raw, second.raw]), sentKey: request.sentKey || second.sentKey }
      }
      const server = r.chance(0.35) ? servers[1] : servers[0]
      let res
      try {
        res = await send(server.port, request.raw)
      } catch (err) {
        problems.push(`#${i} ${server.name} ${JSON.stringify(request.raw.toString('latin1').slice(0, 300))}: ${err.message}`)
        continue
      }
      statuses[res.status] = (statuses[res.status] ?? 0) + 1
      const said = `#${i} ${server.name} ${JSON.stringify(request.raw.toString('latin1').slice(0, 400))} → ${res.status} ${res.body.slice(0, 200)}`
      if (res.status === 0) {
        // Node drops a connection that sends CONNECT (the server has no tunnel to offer), with any request pipelined
        // before it; everything else is answered.
        if (!request.raw.includes('CONNECT ')) problems.push(`closed without an answer: ${said}`)
        continue
      }
      if (res.status >= 500 && !(res.status === 503 && res.headers['retry-after'] !== undefined)) problems.push(`5xx: ${said}`)
      for (const m of res.body.matchAll(/HTTP\/1\.1 (5\d\d) /g)) if (m[1] !== '503') problems.push(`5xx (pipelined): ${said}`)
      if (res.status < 100) problems.push(`no status line: ${said}`)
      const asset = /^\/viewer\/assets\/[\w.-]+$/.test(request.target) && res.status === 200
      if (!asset) {
        for (const leak of leaks) if (res.body.includes(leak)) problems.push(`a path in the answer: ${said}`)
        if (/\n\s+at .+:\d+:\d+/.test(res.body)) problems.push(`a stack in the answer: ${said}`)
      }
      // The open server has a host allow-list (the keyed one has none, so its links follow Host, with Vary: Host).
      if (!server.keys && /evil-host/i.test(res.body + (res.headers.location ?? ''))) problems.push(`a host it was sent is in the answer: ${said}`)
      // (Without keys, `key` is an ordinary option, passed on in a COG's tile URLs as any other.)
      if (server.keys && /wrong-key/.test(res.body)) problems.push(`a refused key is echoed: ${said}`)
      if (server.keys && res.status >= 200 && res.status < 400 && request.method !== 'OPTIONS' && !request.sentKey && !OPEN_PATHS.test(request.target)) {
        problems.push(`served without a key: ${said}`)
      }
      if (server.keys && res.status === 401 && res.headers['content-type']?.startsWith('application/json') !== true) problems.push(`a 401 not in JSON: ${said}`)
    }
  }
  await Promise.all(Array.from({ length: CONCURRENCY }, worker))
  recording = false
  const seconds = (Date.now() - started) / 1000
  const after = memory()

  t.diagnostic(`${COUNT} requests in ${seconds.toFixed(1)} s; statuses ${JSON.stringify(statuses)}`)
  t.diagnostic(`heap ${(before.heapUsed / 2 ** 20).toFixed(1)} → ${(after.heapUsed / 2 ** 20).toFixed(1)} MiB, rss ${(before.rss / 2 ** 20).toFixed(0)} → ${(after.rss / 2 ** 20).toFixed(0)} MiB (gc: ${gc !== undefined})`)
  assert.deepEqual(problems.slice(0, 30), [], `${problems.length} problems (seed ${SEED})`)

  const outside = [...new Set(opened.map((p) => resolve(ROOT, p)))].filter((p) => !allowed.some((a) => (p + sep).startsWith(a)))
  assert.deepEqual(outside, [], `paths opened outside the data folder, node_modules and lib/ (seed ${SEED})`)
  assert.ok(opened.length > 0, 'the hook saw the files the server does read (sprites, glyphs, assets)')

  // Memory back near where it was after the warm-up: the caches are bounded and tiny here, so growth is a leak.
  const slack = gc !== undefined ? 48 : 192
  assert.ok(after.heapUsed < before.heapUsed + slack * 2 ** 20, `heap grew by ${((after.heapUsed - before.heapUsed) / 2 ** 20).toFixed(1)} MiB`)
  assert.ok(after.rss < before.rss + 256 * 2 ** 20, `rss grew by ${((after.rss - before.rss) / 2 ** 20).toFixed(0)} MiB`)

  // Both servers still serve, through the front and through Fastify.
  for (const [server, extra] of [[servers[0], ''], [servers[1], `X-API-Key: ${KEY}\r\n`]]) {
    for (const path of ['/roads/2/1/1.pbf', '/roads.json', '/health']) {
      const res = await send(server.port, Buffer.from(`GET ${path} HTTP/1.1\r\nHost: tiles.test\r\n${extra}Connection: close\r\n\r\n`))
      assert.equal(res.status, 200, `${server.name} ${path} after the fuzz`)
    }
  }
  assert.ok(seconds < 60, `the fuzz took ${seconds.toFixed(1)} s`)
})

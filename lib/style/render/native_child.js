// A renderer child of tile-cannon on @maplibre/maplibre-gl-native (an optional dependency): the same frames and
// operations as mapli_child.py (pool.js is the parent's side), kept as thin as the binding allows. The calls are
// tileserver-gl's (serve_rendered.js): one Map per style, scale and mode, `load(style)`, `render(options, cb)` giving
// premultiplied RGBA, and a `request` callback through which the engine asks for tiles, glyphs and sprites: tc:// URLs
// go to the parent, which answers from its pipeline and cache; http(s) URLs are fetched here, as mapli fetches them.
import { createRequire } from 'node:module'
import sharp from 'sharp'
import { frame, frameReader } from './pool.js'
import { outboundFetch, useProxyFromEnv } from '../../outbound-proxy.js'

await useProxyFromEnv() // the engine's http(s) resources through the environment's proxy, as the parent's

const mbgl = createRequire(import.meta.url)('@maplibre/maplibre-gl-native')
const FETCH_TIMEOUT_MS = Number(process.env.TILE_CANNON_FETCH_TIMEOUT_S ?? 30) * 1000
const WORLD_PX = 512 // MapLibre Native's tiles: zoom z is 512 × 2^z px around

const styles = new Map() // style name → its JSON text (op 'style')
const maps = new Map() // name \n ratio \n mode → { map, queue: the promise of the render before }
const waiting = new Map() // fetch id → callback
let fetchIds = 0

const send = (header, payload) => process.stdout.write(frame(header, payload))

/** The engine asks for a resource: (request {url, kind}, callback(err, {data})). */
function request ({ url, kind }, callback) {
  if (url.startsWith('http://') || url.startsWith('https://')) {
    outboundFetch(url, { signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) })
      .then(async (res) => (res.ok ? callback(null, { data: Buffer.from(await res.arrayBuffer()) }) : res.status === 404 || res.status === 204 ? callback() : callback(new Error(`HTTP ${res.status}`))))
      .catch((err) => callback(err))
    return
  }
  const fid = ++fetchIds
  const timer = setTimeout(() => {
    waiting.delete(fid)
    callback(new Error('tile-cannon did not answer in time'))
  }, FETCH_TIMEOUT_MS)
  waiting.set(fid, (header, payload) => {
    clearTimeout(timer)
    if (header.status === 'ok') callback(null, { data: payload })
    else if (header.status === 'empty') callback() // no content: drawn without it
    else callback(new Error(header.message ?? 'failed'))
  })
  send({ op: 'fetch', fid, url, kind })
}

/** The Map for a style at a scale and mode, made once; renders on one Map run one after another. */
function mapFor (name, ratio, mode) {
  const key = `${name}\n${ratio}\n${mode}`
  let known = maps.get(key)
  if (known === undefined) {
    const json = styles.get(name)
    if (json === undefined) throw new Error(`style ${name} is not registered`)
    const map = new mbgl.Map({ request, ratio, mode })
    map.load(JSON.parse(json))
    known = { map, queue: Promise.resolve() }
    maps.set(key, known)
  }
  return known
}

function renderOn (entry, options) {
  const run = entry.queue.then(() => new Promise((resolve, reject) => {
    entry.map.render(options, (err, pixels) => (err ? reject(err) : resolve(pixels)))
  }))
  entry.queue = run.catch(() => {})
  return run
}

const lonOf = (mx) => mx * 360 - 180
const latOf = (my) => (Math.atan(Math.sinh(Math.PI * (1 - 2 * my))) * 180) / Math.PI
const mercX = (lon) => (lon + 180) / 360
const mercY = (lat) => (1 - Math.log(Math.tan(Math.PI / 4 + (lat * Math.PI) / 360)) / Math.PI) / 2

/** A message's view as the engine's render options: a tile (tile mode), a centre and zoom, or a box to fit. */
function viewOf (msg) {
  if (msg.op === 'tile') {
    // The engine draws 512 px tiles: a 256 px tile of zoom z is drawn at z - 1 (the parent asks z0 as a 512 px tile).
    const zoom = msg.size === 256 ? msg.z - 1 : msg.z
    const n = 2 ** msg.z
    return { mode: 'tile', options: { zoom, center: [lonOf((msg.x + 0.5) / n), latOf((msg.y + 0.5) / n)], width: msg.size, height: msg.size } }
  }
  const base = { width: msg.width, height: msg.height, bearing: msg.bearing ?? 0, pitch: msg.pitch ?? 0 }
  if (msg.op === 'view') return { mode: 'static', options: { ...base, zoom: msg.zoom, center: [msg.lon, msg.lat] } }
  if (msg.op === 'bounds') {
    const [minx, miny, maxx, maxy] = msg.bbox
    const padding = msg.padding ?? 0
    const dx = Math.abs(mercX(maxx) - mercX(minx)) || 1e-9
    const dy = Math.abs(mercY(miny) - mercY(maxy)) || 1e-9
    const fit = Math.min((msg.width - 2 * padding) / (dx * WORLD_PX), (msg.height - 2 * padding) / (dy * WORLD_PX))
    const zoom = Math.min(22, Math.max(0, Math.log2(Math.max(fit, 1e-9))))
    const center = [lonOf((mercX(minx) + mercX(maxx)) / 2), latOf((mercY(miny) + mercY(maxy)) / 2)]
    return { mode: 'static', options: { ...base, zoom, center } }
  }
  throw new Error(`unknown op ${msg.op}`)
}

async function handle (msg, payload) {
  const rid = msg.rid
  try {
    if (msg.op === 'style') {
      styles.set(msg.style, payload.toString('utf8'))
      send({ op: 'done', rid })
      return
    }
    const { mode, options } = viewOf(msg)
    const pixels = await renderOn(mapFor(msg.style, msg.ratio, mode), options)
    const width = Math.round(options.width * msg.ratio)
    const height = Math.round(options.height * msg.ratio)
    const png = await sharp(pixels, { raw: { width, height, channels: 4, premultiplied: true } }).png().toBuffer()
    send({ op: 'done', rid }, png)
  } catch (err) { // each failure is one answer; the child lives on
    send({ op: 'failed', rid, error: err.name ?? 'Error', message: String(err.message ?? err).split('\n')[0].slice(0, 500) })
  }
}

const read = frameReader((header, payload) => {
  if (header.op === 'resource') {
    const answer = waiting.get(header.fid)
    waiting.delete(header.fid)
    answer?.(header, payload)
  } else {
    handle(header, payload)
  }
})
process.stdin.on('data', read)
process.stdin.on('end', () => process.exit(0)) // the parent went away
send({ op: 'ready', engine: `maplibre-gl-native ${createRequire(import.meta.url)('@maplibre/maplibre-gl-native/package.json').version}`, pid: process.pid })

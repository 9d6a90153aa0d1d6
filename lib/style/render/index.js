// Rendering styles with MapLibre Native, as a plugin: `app.renderer`. The engine runs in child processes (pool.js),
// either a Node child on @maplibre/maplibre-gl-native (an optional dependency) or a Python child on the PyPI wheel
// mapli (`npm run setup-render`). The children ask for tiles, glyphs and sprites over their pipe (`tc://` URLs,
// style.js), answered here from the pipeline and its cache: a rendered tile sees exactly what a client would.
import { createHash } from 'node:crypto'
import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { availableParallelism } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import fp from 'fastify-plugin'
import sharp from 'sharp'
import { ABSENT, shortLived } from '../../pipeline.js'
import { toldUnavailable } from '../../errors.js'
import { dataRevision } from '../../catalog/registry.js'
import { MarkerIcons } from '../markers.js'
import { RenderPool } from './pool.js'
import { renderStyle } from './style.js'
import { RemoteResources, remoteThroughServer } from './remote.js'
import { sourcesOfOtherKind, unsupportedLayers } from './engine-limits.js'
import { ownBasesOf } from '../../urls.js'
import { buildTileJson } from '../../sources/tilejson.js'
import { childProxyEnv } from '../../outbound-proxy.js'

const HERE = dirname(fileURLToPath(import.meta.url))
/** Where `npm run setup-render` puts the Python that has mapli. */
export const DEFAULT_PYTHON = join(HERE, '..', '..', '..', '.render-venv', 'bin', 'python')
const WORLD = [-180, -85.051129, 180, 85.051129]
const SPRITE_NAME = /^(.*?)((?:@[23]x)?\.(?:json|png))$/
const RETRY_MS = 1000 // a style whose render failed is registered afresh at most this often (see drawing)
const ENGINE_REFUSED = 'the renderer could not draw this' // pool.js's message for a render the engine failed

/** The engine to start, or null, and why: { backend, command, args, env } | { backend: null, why }. */
export function chooseBackend (render) {
  const wanted = render.backend ?? 'auto'
  if (wanted === 'off') return { backend: null, why: 'rendering is turned off (render.backend: off)' }
  const tried = []
  if (wanted === 'auto' || wanted === 'native') {
    try {
      createRequire(import.meta.url).resolve('@maplibre/maplibre-gl-native')
      return { backend: 'native', command: process.execPath, args: [join(HERE, 'native_child.js')], env: {} }
    } catch {
      tried.push('native: @maplibre/maplibre-gl-native is not installed (an optional dependency whose install fetches a binary from GitHub)')
    }
  }
  if (wanted === 'auto' || wanted === 'mapli') {
    const python = render.python ?? DEFAULT_PYTHON
    if (existsSync(python)) {
      return { backend: 'mapli', command: python, args: [join(HERE, 'mapli_child.py')], env: { EGL_PLATFORM: 'surfaceless', PYTHONUNBUFFERED: '1' }, skipped: tried }
    }
    tried.push('mapli: no Python with mapli (run `npm run setup-render`, or set render.python)')
  }
  return { backend: null, why: `no renderer: ${tried.join('; ')}` }
}

async function renderPlugin (app, config) {
  const { catalog, pipeline, styles, fonts, sprites, log } = app
  const options = config.render
  const markers = new MarkerIcons({ dir: config.icons, allowRemote: options.allowRemoteMarkerIcons ?? false })
  // No styles folder, nothing to render: no engine is started (it costs ~300 MiB and a second).
  const choice = styles.dir === null ? { backend: null, why: 'no styles folder is configured (--styles)' } : chooseBackend(options)
  // A tile or image drawn while a remote source of its style could not be read (drawn empty) is kept this long, in the
  // tile cache and by clients, never shared or in a tile directory; a style with such a failure is registered afresh
  // this often, so the engine asks again for what it drew empty (it keeps the tiles it has loaded).
  const incompleteTtlMs = (options.incompleteTtlS ?? 60) * 1000
  const remote = new RemoteResources({ log, timeoutMs: (options.timeoutMs ?? 30_000) / 4, restMs: Math.min(10_000, incompleteTtlMs) })
  let pool = null
  let reason = choice.why ?? null
  let engine = null
  if (choice.backend !== null) {
    // One engine thread per child and a child per core (at most 8): measured on 2 cores, 2 children of 1 thread
    // rendered 210 OSM Liberty tiles/s where 1 child of 2 threads rendered 159 (bench/README.md).
    const children = options.children ?? Math.min(8, availableParallelism())
    const threads = options.threads ?? 1
    // Without a GPU the engine draws with Mesa's llvmpipe, which hands each draw to a rasterizer thread per core by
    // default. With an engine thread per core already, those hand-offs only add context switches: rasterizing in the
    // engine's own thread (LP_NUM_THREADS=0) rendered 255-285 OSM Liberty tiles/s where the default rendered 212-236
    // (2 cores, bench/README.md). Ignored on a GPU; an LP_NUM_THREADS in the environment wins.
    const rasterizer = process.env.LP_NUM_THREADS === undefined && children * threads >= availableParallelism() ? { LP_NUM_THREADS: '0' } : {}
    pool = new RenderPool({
      name: choice.backend,
      command: choice.command,
      args: choice.args,
      // A resource the engine waits for gives up well before the render's own timeout, which would cost the child.
      // The proxy variables as libcurl reads them (lower case): the mapli engine fetches a style's sprites itself.
      env: { ...rasterizer, ...childProxyEnv(), ...choice.env, TILE_CANNON_RENDER_THREADS: String(threads), TILE_CANNON_FETCH_TIMEOUT_S: String((options.timeoutMs ?? 30_000) / 2000) },
      size: children,
      timeoutMs: options.timeoutMs ?? 30_000,
      queueMax: options.queueMax ?? 64,
      maxStyles: options.maxStylesPerChild,
      fetchResource,
      log,
    })
    try {
      engine = await pool.start()
      log.info({ backend: choice.backend, engine, skipped: choice.skipped?.length ? choice.skipped : undefined }, 'renderer ready')
    } catch (err) {
      pool.close()
      pool = null
      reason = `the ${choice.backend} renderer cannot start: ${err.message}`
    }
  }
  if (pool === null && styles.dir !== null) log.warn({ reason }, 'rendered routes answer 503')

  /** A tc:// URL a child asks for, answered from the pipeline, the fonts and the sprites. */
  async function fetchResource (url) {
    if (RemoteResources.owns(url)) return remote.answer(url) // a remote source's (remote.js): drawn empty if it fails
    const at = url.indexOf('?')
    const [kind, ...rest] = url.slice('tc://'.length, at < 0 ? undefined : at).split('/')
    if (kind === 'tiles' && rest.length === 5) { // tc://tiles/<set>/<its cache key>/z/x/y[?options]
      const entry = catalog.get(decodeURIComponent(rest[0]))
      if (entry?.source == null) return { status: 'empty' } // a set gone or unavailable: drawn without it
      const [z, x, y] = rest.slice(2).map(Number)
      // The set's options, as a tile URL's query gives them (lib/resolve.js resolveTile); a bad one fails the render.
      const { source } = entry
      const query = at < 0 ? {} : Object.fromEntries(new URLSearchParams(url.slice(at + 1)))
      const options = source.parseQuery !== undefined ? source.parseQuery(query) : source.takesQuery && at >= 0 ? query : undefined
      const record = await pipeline.record(entry, z, x, y, options)
      if (record === ABSENT) return { status: 'empty' }
      const answer = await pipeline.encoded(record, 0, entry) // as a client without Accept-Encoding gets it
      return { status: 'ok', body: answer.body }
    }
    if (kind === 'fonts' && rest.length === 2) {
      return { status: 'ok', body: await fonts.glyphs(decodeURIComponent(rest[0]), rest[1].replace(/\.pbf$/, '')) }
    }
    if (kind === 'sprites' && rest.length === 2) {
      const style = styles.get(decodeURIComponent(rest[0]))
      const m = SPRITE_NAME.exec(decodeURIComponent(rest[1]))
      if (style === undefined || m === null) return { status: 'empty' }
      // A sprite file missing (a ratio without its files is the highest one below it that has them): the render
      // fails, answered 503 and not cached, until it is there. Drawn without its icons instead, the tile would be kept
      // (and shared, and written to a tile directory) under the style's revision, which a sprite file added later
      // does not change.
      const file = await sprites.read(style, m[1] === '_' ? undefined : m[1].replace(/^~/, ''), m[2]).catch(() => null)
      return file === null ? { status: 'missing', message: `the style's sprite cannot be read (${m[2]})` } : { status: 'ok', body: file.bytes }
    }
    if (kind === 'data' && rest.length === 3) { // tc://data/<style>/<the file's revision>/<path>: a GeoJSON file it names
      // Missing or unreadable: the render fails (503, not cached), as for a sprite, until the file is there.
      const bytes = await styles.readData(decodeURIComponent(rest[0]), decodeURIComponent(rest[2])).catch((err) => err)
      return Buffer.isBuffer(bytes) ? { status: 'ok', body: bytes } : { status: 'missing', message: bytes.message }
    }
    if (kind === 'empty') return { status: 'empty' } // a source naming no set here (render/style.js)
    if (kind === 'markers' && rest.length === 1) { // the icons of a static image's markers (lib/style/markers.js)
      const body = markers.read(rest[0])
      return body === null ? { status: 'empty' } : { status: 'ok', body }
    }
    return { status: 'missing', message: `not a resource of this server: ${url}` }
  }

  // One pipeline entry per style revision, tile size and state of the sets drawn: rendered tiles go through the tile
  // cache like any set's, so neither a changed style nor a replaced set answers with tiles made before.
  const entries = new Map()
  function tileEntry (style, size) {
    const key = `${style.id}\n${size}`
    const known = entries.get(key)
    const { sets, shared, ttlS, expiredAt } = drawnStyle(style)
    // `shared` names all it is drawn from: the style, its files' and sprites' revisions (another style's too), the fonts'.
    if (known !== undefined && known.shared === shared && known.sets === sets) return known.entry
    const source = renderedTiles(style, size)
    const entry = catalog.detachedEntry({ id: style.id, kind: 'render', ttlS: options.cacheTtlS ?? ttlS }, source)
    entry.expiredAt = expiredAt // a set it draws was told its data changed then: shared tiles made before are stale
    entry.place = size === 512 ? `styles/${style.id}/512` : `styles/${style.id}` // its tiles' URL path (lib/tile-dir)
    entries.set(key, { shared, sets, entry })
    return entry
  }

  // The style as the engine draws it ({ name, json }), made once per revision of the style, of the catalog (a set a
  // source names may come or go), of the styles folder (another style's sprite or file it names) and of the fonts;
  // `name` changes with the JSON (which names each file's revision) and the sprite files, so a child never draws an
  // older registration.
  const drawn = new Map() // style id → { revision, generation, name, json }
  let warnedFonts = false
  const ownBases = ownBasesOf(config, app.server) // the bases this server is known by (its port, once it listens)
  function drawnStyle (style) {
    const generation = catalog.registry.generation
    const own = ownBases()
    const known = drawn.get(style.id)
    if (known !== undefined && known.revision === style.revision && known.generation === generation && known.own === own && known.loads === styles.loads && known.fonts === fonts.revision) return known
    if (fonts.dir === null && !warnedFonts) {
      warnedFonts = true
      log.warn('no fonts folder: labels need the glyphs the styles name (--fonts)')
    }
    const rendered = renderStyle(style, (name) => catalog.get(name), { fonts: fonts.dir === null ? null : fonts.revision, own, findStyle: (id) => styles.get(id) })
    remoteThroughServer(rendered.json, style.id)
    withinEngineLimits(style, rendered)
    const json = JSON.stringify(rendered.json)
    // The sprite files' state too: the engine keeps the sheet it loaded at registration, whose URL a new file keeps.
    const sprite = `\0${style.spriteRevision ?? ''}`
    const name = `${style.id}@${createHash('sha1').update(json).update(sprite).digest('base64url').slice(0, 12)}`
    // What its tiles are made of: a set replaced or purged (a new cache key) makes them anew.
    const sets = rendered.used.map((e) => e.key).join('\n')
    // As fresh as its most perishable set (PostGIS tiles live `cacheTtlS`); undefined: until a set or the style changes.
    const ttls = rendered.used.filter((e) => e.ttlMs !== undefined).map((e) => e.ttlMs / 1000)
    // Its tiles' revision in a shared cache, alike on every replica: the drawn JSON with each set's cache key (a
    // counter of this process) read as the revision of the set's data.
    let portable = json
    for (const e of rendered.used) portable = portable.replaceAll(encodeURIComponent(e.key), encodeURIComponent(`${e.id}@${dataRevision(e)}`))
    const shared = createHash('sha1').update(portable).update(sprite).digest('base64url').slice(0, 12)
    const expiredAt = Math.max(0, ...rendered.used.map((e) => e.expiredAt))
    const ids = rendered.used.map((e) => e.id) // the sets it draws (lib/tile-dir forgets its tiles when one is purged)
    const tilejsons = { 256: renderedTileJson(style, rendered, options.maxzoom ?? 22, 256), 512: renderedTileJson(style, rendered, options.maxzoom ?? 22, 512) }
    const made = { revision: style.revision, generation, own, loads: styles.loads, fonts: fonts.revision, name, json, parsed: null, sets, ids, shared, expiredAt, ttlS: ttls.length ? Math.min(...ttls) : undefined, tilejsons, retries: 0, retriedAt: 0 }
    drawn.set(style.id, made)
    return made
  }

  // What the engine cannot draw as the style asks (engine-limits.js): drawn without it, and said once per revision.
  const limitsSaid = new Map() // style id → what was said of it, with its revision
  function withinEngineLimits (style, rendered) {
    const otherKind = sourcesOfOtherKind(rendered)
    const unsupported = unsupportedLayers(rendered.json, choice.backend)
    const said = JSON.stringify([style.revision, otherKind, unsupported])
    if (limitsSaid.get(style.id) === said) return
    limitsSaid.set(style.id, said)
    for (const { source, set, format, type } of otherKind) {
      log.warn({ style: style.id, source, set, format }, `a ${type} source names a set of ${format} tiles, which it cannot draw: drawn empty`)
    }
    if (unsupported.length > 0) log.warn({ style: style.id, layers: unsupported, engine }, 'layers using an expression the renderer does not support are not drawn')
  }

  /**
   * Draws with `draw(name, json)` (the name the style is registered under in the engine: its own, then `~1`, `~2`… per
   * registration afresh, and its JSON); a failure makes the next render register the style afresh. The engine loads a style's sprite (and a source's TileJSON) once per registration and
   * keeps failing once that failed: a remote sprite's server down for a moment would otherwise fail the style's renders
   * until a restart. At most once a second per style; the pool replaces a child that has taken many registrations.
   * Resolves with { png, incomplete }: incomplete when a remote resource it draws may be drawn empty in it (remote.js
   * failedSince: for a tile, `tile` ({ z, x, y, size } as the engine draws it), only a remote tile over it).
   */
  const firstDrawn = new Map() // registration name → when it was first drawn
  async function drawing (style, draw, tile) {
    const known = drawnStyle(style)
    const { retries } = known
    const name = retries === 0 ? known.name : `${known.name}~${retries}`
    if (!firstDrawn.has(name)) {
      firstDrawn.set(name, Date.now())
      if (firstDrawn.size > 4096) firstDrawn.delete(firstDrawn.keys().next().value)
    }
    try {
      const png = await draw(name, known.json)
      // A remote resource this image draws failed since this registration was first drawn: the engine may draw it empty
      // here, from what it loaded then. Incomplete; and once such a registration is a while old, the next render
      // registers the style afresh, so what failed is asked for again.
      const since = firstDrawn.get(name) ?? 0
      const incomplete = remote.failedSince(style.id, since, tile)
      if (incomplete && known.retries === retries && Date.now() - since >= incompleteTtlMs) known.retries++
      return { png, incomplete }
    } catch (err) {
      const now = Date.now()
      // The engine's refusal (pool.js), not a busy, crashed or timed-out child, which are answered otherwise; once for
      // renders that failed together.
      if (known.retries === retries && String(err.message).startsWith(ENGINE_REFUSED) && now - known.retriedAt >= RETRY_MS) {
        known.retries++
        known.retriedAt = now
      }
      throw err
    }
  }

  function renderedTiles (style, size) {
    return {
      id: style.id,
      kind: 'render',
      revision: `${drawnStyle(style).shared}.${size}`, // 256 and 512 px tiles of one z/x/y differ
      format: 'png',
      hints: { format: 'png' },
      formats: ['png', 'jpg', 'webp'],
      formatAliases: { jpeg: 'jpg' },
      scales: [1, 2, 3],
      tilejson: drawnStyle(style).tilejsons[size],
      metadata: {},
      async getTile (z, x, y, query, { scale, format }) {
        if (pool === null) throw toldUnavailable(reason)
        // The engine draws 256 px tiles one zoom lower; at z0 there is none: the 512 px world, halved.
        const halve = size === 256 && z === 0
        const drawn = { z, x, y, size: halve ? 512 : size }
        const { png, incomplete } = await drawing(style, (name, json) => pool.render({ op: 'tile', style: name, ...drawn, ratio: scale }, json), drawn)
        const bytes = await encodeImage(halve ? sharp(png).resize(256 * scale) : png, format)
        return incomplete ? shortLived(bytes, incompleteTtlMs) : bytes
      },
      close () {},
    }
  }

  /**
   * A static view ({op: 'view'|'bounds', …, shrink}) of a style, encoded as `format`; `overlay` ({json, key}: the style with
   * overlays added, lib/style/static.js) is registered with the engine under its own name.
   */
  async function renderView (style, { shrink = 1, ...request }, format, overlay) {
    if (pool === null) throw toldUnavailable(reason)
    const { png, incomplete } = await drawing(style, (name, json) => pool.render({ ...request, style: overlay === undefined ? name : `${name}+${overlay.key}` }, overlay?.json ?? json))
    // A view below the engine's zoom 0, drawn `shrink` times larger (lib/style/static.js), scaled down as a z0 tile is.
    const bytes = await encodeImage(shrink > 1 ? sharp(png).resize(Math.round(request.width * request.ratio / shrink)) : png, format)
    return incomplete ? shortLived(bytes, incompleteTtlMs) : bytes
  }

  app.decorate('renderer', {
    get available () { return pool !== null },
    get reason () { return reason },
    get engine () { return engine },
    get stats () { return pool?.stats ?? null },
    pids: () => pool?.pids() ?? [],
    tileEntry,
    renderView,
    markers,
    renderStyleJson: (style) => drawnStyle(style).json,
    /** The same, parsed once per drawing of the style: shared, never to be changed (static.js withOverlays copies what it adds to). */
    renderStyleObject: (style) => {
      const known = drawnStyle(style)
      return (known.parsed ??= JSON.parse(known.json))
    },
    setsDrawn: (style) => drawnStyle(style).ids,
    /** The host and reason of the latest remote failure of a style's (what its incomplete tiles lack), or null. */
    remoteFailure: (style) => remote.lastFailureOf(style.id),
    /**
     * The style's next render registers it afresh when a remote source of it failed since its registration was first
     * drawn, so what failed is asked for again at once rather than after `incompleteTtlS` (an export's retries).
     */
    askAgain (style) {
      const known = drawnStyle(style)
      const name = known.retries === 0 ? known.name : `${known.name}~${known.retries}`
      const failedAt = remote.lastFailure(style.id)
      if (failedAt > 0 && failedAt >= (firstDrawn.get(name) ?? 0)) known.retries++
    },
    /** How long a remote host that could not be reached is not asked again (an export's pause between retries). */
    remoteRestMs: remote.restMs,
    /** What a remote source's failure warning says becomes of the tiles drawn without it (an export's own words). */
    set incompleteTiles (words) { remote.incompleteTiles = words },
  })
  app.addHook('onClose', () => {
    remote.close()
    pool?.close()
  })
}

/**
 * The TileJSON of a style's tiles of `size` px (`rendered`: renderStyle's answer): the world's bounds (a style draws
 * everywhere), the credits of what it draws, and where a map of them looks first, as the home page's preview of the
 * style does: its own `center` and `zoom` (MapLibre's zoom of 512 px tiles, one less than that of 256 px ones), else
 * the center of the first set it draws (the middle of its bounds, at the zoom where they fill about one tile, when
 * its metadata gives none), else the world at z0. The center's zoom is the one whose tiles of that size show that
 * view: 512 px tiles one less than 256 px ones. Both sizes are served from z0 to `maxzoom`.
 */
function renderedTileJson (style, rendered, maxzoom, size) {
  const { center, zoom } = style.json
  const own = Array.isArray(center) && Number.isFinite(center[0]) && Number.isFinite(center[1]) && Number.isFinite(zoom)
  const view = own ? [center[0], center[1], zoom + 1] : rendered.used.map((e) => e.source.tilejson.center).find(Array.isArray)
  const sized = view === undefined || size === 256 ? view : [view[0], view[1], view[2] - 1]
  return buildTileJson({ name: style.name, attribution: rendered.attribution, minzoom: 0, maxzoom, bounds: WORLD, center: sized, format: 'png' })
}

/** PNG bytes (or a sharp pipeline) → the format asked for, encoded by sharp on libuv's thread pool. */
async function encodeImage (png, format) {
  const image = Buffer.isBuffer(png) ? sharp(png) : png
  if (format === 'jpg') return image.flatten({ background: '#ffffff' }).jpeg({ quality: 85, mozjpeg: false }).toBuffer()
  if (format === 'webp') return image.webp({ quality: 90 }).toBuffer()
  return Buffer.isBuffer(png) ? png : image.png().toBuffer()
}

export default fp(renderPlugin, { name: 'tile-cannon-render', fastify: '5.x', dependencies: ['tile-cannon-styles'] })

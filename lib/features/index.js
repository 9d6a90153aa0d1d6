// OGC API – Features (Part 1 Core with GeoJSON and HTML, Part 2 CRS, Part 3 queryables as query parameters) over
// the PostGIS tables and views, as a plugin: the routes (routes/features.js) under `features.prefix`, and the service
// they share, `app.features`: the options, the small documents made once per catalog state (and host, key, format,
// coding), and which SRIDs are in degrees. Collections query their set's own pool (the source's `features`
// descriptor, lib/sources/postgis/sources.js): this plugin opens no connection of its own.
import fp from 'fastify-plugin'
import featureRoutes from '../../routes/features.js'
import { KNOWN_GEOGRAPHIC } from './crs.js'
import { CodedDocuments } from '../compression.js'
import { featureExtentsVersion } from '../sources/postgis/bounds.js'

// Cached answers (hosts × documents × formats × codings) up to this size; past it, the least recently used go.
const MAX_DOC_BYTES = 16 * 1024 * 1024

export class FeatureService {
  constructor ({ catalog, options, viewer }) {
    this.catalog = catalog
    this.options = options
    this.viewer = viewer // MapLibre GL JS is served by the viewer (lib/viewer): the features pages draw with it
    this.docs = new CodedDocuments(MAX_DOC_BYTES)
    this.state = null
    this.srids = new WeakMap() // pool → srid → Promise<is it in degrees>
  }

  get prefix () { return this.options.prefix }

  /**
   * What the catalog is now: sets registered, replaced, expired (NOTIFY) or removed change it, and so does a
   * collection's extent found anew by a discovery that kept its set.
   */
  catalogState () {
    const registry = this.catalog.registry
    return `${registry.generation}:${registry.entries.size}:${featureExtentsVersion()}`
  }

  /**
   * A small answer made once per catalog state: `make()` → text, kept as the bytes of `coding` → { bytes, coding }
   * (coding 'identity' when too small to be worth it), or a promise of it while a large one is being compressed.
   * Throws what `make` throws, caching nothing.
   */
  cached (key, coding, make) {
    const state = this.catalogState()
    if (state !== this.state) {
      this.docs.clear()
      this.state = state
    }
    return this.docs.get(key, coding, () => Buffer.from(make()))
  }

  /**
   * Decimals of output coordinates in `crs`: degrees or metres; a number for the usual CRSs, else a promise of one
   * (spatial_ref_sys is asked once per SRID).
   */
  precision (c, crs) {
    const { degrees, metres } = this.options.precision
    if (KNOWN_GEOGRAPHIC.has(crs.srid)) return degrees
    if (crs.srid === 3857) return metres
    return this.inDegrees(c.d.pool, crs.srid).then((inDegrees) => (inDegrees ? degrees : metres))
  }

  inDegrees (pool, srid) {
    let known = this.srids.get(pool)
    if (known === undefined) this.srids.set(pool, (known = new Map()))
    let answer = known.get(srid)
    if (answer === undefined) {
      answer = pool.query('SELECT bool_or(proj4text LIKE \'%+proj=longlat%\') AS degrees FROM spatial_ref_sys WHERE srid = $1', [srid])
        .then((res) => res.rows[0]?.degrees === true)
      answer.catch(() => known.delete(srid)) // asked again next time: the database may be back
      known.set(srid, answer)
    }
    return answer
  }

  close () {
    this.docs.clear()
  }
}

/** The options with their defaults (config.js has them too; a config object made elsewhere may not). */
export function featureOptions (options = {}) {
  const maxLimit = options.maxLimit ?? 10_000
  return {
    enabled: options.enabled !== false,
    prefix: options.prefix ?? '/ogc',
    maxLimit,
    defaultLimit: Math.min(options.defaultLimit ?? 10, maxLimit),
    precision: { degrees: options.precision?.degrees ?? 7, metres: options.precision?.metres ?? 2 },
    orderByKey: options.orderByKey !== false, // see lib/features/sql.js orderOf
  }
}

async function featuresPlugin (app, config) {
  const options = featureOptions(config.features)
  if (!options.enabled) return
  const service = new FeatureService({ catalog: app.catalog, options, viewer: config.viewer !== false })
  app.decorate('features', service)
  app.addHook('onClose', (instance, done) => {
    service.close()
    done()
  })
  await app.register(featureRoutes, { prefix: options.prefix })
}

export default fp(featuresPlugin, { name: 'tile-cannon-features', fastify: '5.x' })

// Links in answers (TileJSON `tiles`, /catalog, the index page): from the configured public URL, or from the request.
// X-Forwarded-Proto/Host/Prefix count only when the connection comes from a trusted proxy (config `trustProxy`):
// otherwise any client could make a shared cache store links to a host of its choosing.
import proxyAddr from '@fastify/proxy-addr'

const EXTENSIONS = { pbf: 'pbf', mlt: 'mlt', png: 'png', jpg: 'jpg', webp: 'webp', gif: 'gif', avif: 'avif', json: 'json' }
const HOST = /^[A-Za-z0-9.\-:[\]_]+$/
const PREFIX = /^(\/[A-Za-z0-9._~\-%]+)*\/?$/

/**
 * config.trustProxy → (address, hop) → trusted?, as Fastify takes it: false (default), true (every peer, e.g. behind a
 * load balancer that is the only way in), or a list of addresses, CIDRs and proxy-addr's names (loopback, linklocal,
 * uniquelocal).
 */
export function trustFunction (trustProxy) {
  if (trustProxy === true) return () => true
  if (!trustProxy || trustProxy.length === 0) return null
  return proxyAddr.compile(trustProxy)
}

const last = (value) => (typeof value === 'string' ? value.slice(value.lastIndexOf(',') + 1).trim() : undefined)

/**
 * Makes base URLs for one app. `base(request, reply)` also tells shared caches (with Vary) which request headers the
 * links were built from, so one client's Host cannot reach another's answer.
 */
export function linkMaker ({ publicUrl, trustProxy }) {
  const trusted = trustFunction(trustProxy)
  const vary = trusted ? 'Host, X-Forwarded-Host, X-Forwarded-Proto, X-Forwarded-Prefix' : 'Host'
  return function base (request, reply) {
    if (publicUrl) return publicUrl
    addVary(reply, vary)
    // Fastify applies the same trust function to X-Forwarded-Proto/Host (request.protocol, request.host).
    const host = request.host
    let prefix = ''
    if (trusted !== null && trusted(request.socket.remoteAddress, 0)) {
      const p = last(request.headers['x-forwarded-prefix'])
      if (p !== undefined && PREFIX.test(p)) prefix = p.replace(/\/$/, '')
    }
    return `${request.protocol === 'https' ? 'https' : 'http'}://${host && HOST.test(host) ? host : 'localhost'}${prefix}`
  }
}

/** Adds names to the answer's Vary (CORS may have put Origin there already). */
export function addVary (reply, names) {
  const vary = reply.getHeader('vary')
  reply.header('vary', vary === undefined ? names : `${vary}, ${names}`)
}

export function tileUrl (base, entry, search = '') {
  const ext = EXTENSIONS[entry.source.format]
  return `${base}/${encodeURIComponent(entry.id)}/{z}/{x}/{y}${ext ? '.' + ext : ''}${search}`
}

export const tileJsonUrl = (base, id) => `${base}/${encodeURIComponent(id)}.json`

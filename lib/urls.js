// Links in answers (TileJSON `tiles`, /catalog, the index page): from the configured public URL, or from the request.
// X-Forwarded-Proto/Host/Prefix count only when the connection comes from a trusted proxy (config `trustProxy`):
// otherwise any client could make a shared cache store links to a host of its choosing. With `allowedHosts`, a host
// not listed is never written into an answer (its links name the first listed host instead). With API keys
// (lib/access.js), links carry the key the client gave (`keyed`).
import proxyAddr from '@fastify/proxy-addr'
import { BadRequest } from './errors.js'
import { TILE_EXTENSIONS } from './tiletype.js'

const HOST = /^[A-Za-z0-9.\-:[\]_]+$/
// What RFC 9112 (§3.2) lets a Host be: RFC 3986's host (an IP literal, or a name of its characters) and a port.
const AUTHORITY = /^(\[[0-9A-Za-z:.]+\]|[A-Za-z0-9\-._~%!$&'()*+,;=]*)(:[0-9]*)?$/
// An absolute-form request-target (`GET http://host/path`, as sent to proxies): its authority (RFC 9112 §3.2.2).
const ABSOLUTE = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/([^/?#]*)/
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

/** A database URL as a name fit to show: its database, never its host, user or password. */
export function databaseName (url) {
  try {
    return new URL(url).pathname.slice(1) || 'postgres'
  } catch {
    return 'postgres'
  }
}

const last = (value) => (typeof value === 'string' ? value.slice(value.lastIndexOf(',') + 1).trim() : undefined)

/**
 * Makes base URLs for one app. `base(request, reply)` also tells shared caches (with Vary) which request headers the
 * links were built from, so one client's Host cannot reach another's answer.
 */
export function linkMaker ({ publicUrl, trustProxy, allowedHosts = [], apiKeys = [], host: listenHost }) {
  const trusted = trustFunction(trustProxy)
  // Links carry the key of a client that sent it as a header: a shared cache must keep those answers apart.
  const keyVary = apiKeys.length > 0 ? 'X-API-Key' : null
  const vary = (trusted ? 'Host, X-Forwarded-Host, X-Forwarded-Proto, X-Forwarded-Prefix' : 'Host') + (keyVary ? `, ${keyVary}` : '')
  // Not a 400 for a host off the list: an error cached by a CDN under the real URL would deny it to everyone
  // (cache-poisoned denial of service); the first allowed host's links are what an honest client gets anyway.
  const allowed = allowedHosts.length > 0 ? new Set(allowedHosts.map((h) => h.toLowerCase())) : null
  // Without a usable host (none sent, as HTTP/1.0 may; one that cannot be written in a link), the server's own name at
  // the port the request came in on (RFC 9112 §3.3): 'localhost' alone sent clients to port 80.
  const ownName = typeof listenHost === 'string' && !['', '0.0.0.0', '::', '[::]'].includes(listenHost)
    ? (listenHost.includes(':') && !listenHost.startsWith('[') ? `[${listenHost}]` : listenHost)
    : 'localhost'
  const fallback = (request, https) => {
    if (allowed !== null) return allowedHosts[0].toLowerCase()
    const port = request.socket?.localPort
    return port === undefined || port === (https ? 443 : 80) ? ownName : `${ownName}:${port}`
  }
  return function base (request, reply) {
    if (publicUrl) {
      if (keyVary !== null) addVary(reply, keyVary)
      return publicUrl
    }
    addVary(reply, vary)
    const https = request.protocol === 'https'
    // Fastify applies the same trust function to X-Forwarded-Proto/Host (request.protocol, request.host).
    const forwarded = trusted !== null && request.headers['x-forwarded-host'] !== undefined && trusted(request.socket.remoteAddress, 0)
    let host = forwarded ? request.host : ownAuthority(request)
    if (!host || !HOST.test(host) || (allowed !== null && !allowed.has(host.toLowerCase()))) host = fallback(request, https)
    let prefix = ''
    if (trusted !== null && trusted(request.socket.remoteAddress, 0)) {
      const p = last(request.headers['x-forwarded-prefix'])
      if (p !== undefined && PREFIX.test(p)) prefix = p.replace(/\/$/, '')
    }
    return `${https ? 'https' : 'http'}://${host}${prefix}`
  }
}

/**
 * The authority a request names for itself: an absolute-form target's, else its Host. Checked here, where links are
 * made, not on every request (the tile front's): a Host sent twice or not one RFC 3986 allows (`bad host/x`) is a 400,
 * as RFC 9112 (§3.2) requires, rather than a link to a guess.
 */
function ownAuthority (request) {
  const raw = request.raw
  let hosts = 0
  for (let i = 0; i < raw.rawHeaders.length; i += 2) if (raw.rawHeaders[i].length === 4 && raw.rawHeaders[i].toLowerCase() === 'host') hosts++
  if (hosts > 1) throw new BadRequest('more than one Host header')
  const target = raw.url.charCodeAt(0) === 47 /* / */ ? null : ABSOLUTE.exec(raw.url)
  const authority = target ? target[1] : request.headers.host
  if (authority !== undefined && !AUTHORITY.test(authority)) throw new BadRequest(target ? 'the request\'s target has an invalid host' : 'invalid Host header')
  return authority
}

/**
 * The bases this server is known by without a request to say so: the public URL, the allowed hosts, and the loopback
 * names (and the configured listening address) at the port it listens on (`listening`, once it does, and the
 * configured one). A style that names one of them absolutely names this server (lib/style/rewrite.js ownPath): its
 * URLs are then only matched against set ids, fonts and the style's files, never fetched or opened as they are.
 */
export function ownBases ({ publicUrl, allowedHosts = [], host, port }, listening) {
  const bases = publicUrl ? [publicUrl] : []
  for (const h of allowedHosts) bases.push(`http://${h}`)
  const names = ['localhost', '127.0.0.1', '[::1]']
  if (typeof host === 'string' && !['0.0.0.0', '::', '[::]'].includes(host)) names.push(host.includes(':') && !host.startsWith('[') ? `[${host}]` : host)
  for (const p of new Set([port, listening])) {
    if (Number.isInteger(p) && p > 0) for (const name of names) bases.push(`http://${name}:${p}`)
  }
  return bases
}

/**
 * ownBases of an app whose Node server is `server`, made once it listens (until then without its port): asked on every
 * style and every rendered tile, where a system call (server.address) and the list each time cost ~2 µs a tile.
 */
export function ownBasesOf (config, server) {
  let known = null
  let listening = false
  return () => {
    if (listening) return known
    const port = server.address()?.port
    if (port !== undefined) {
      listening = true
      known = ownBases(config, port)
    }
    known ??= ownBases(config)
    return known
  }
}

/**
 * `url` with the API key the request was let in with (lib/access.js sets `request.linkKey`, `key=…`), so a client that
 * gave `?key=` on its first URL keeps it on every link it follows; `url` itself when keys are off.
 */
export function keyed (request, url) {
  const key = request.linkKey
  return key ? `${url}${url.includes('?') ? '&' : '?'}${key}` : url
}

/**
 * A query string (`?…`) without its API key parameters (`key`, however spelled: `k%65y` is `key` to the parser), for
 * links that pass the request's query on while keys are on: `keyed` adds the one key accepted.
 */
export const withoutKey = (search) => withoutParam(search, 'key')

/** A query string (`?…`) without the parameter `name` (however spelled), '' when nothing is left. */
export function withoutParam (search, name) {
  const rest = search.slice(1).split('&').filter((p) => paramName(p) !== name)
  return rest.length === 0 ? '' : `?${rest.join('&')}`
}

/** The request's URL for a log line: without API keys in its query while keys are on (lib/access.js). */
export function loggedUrl (request) {
  const url = request.url
  const q = url.indexOf('?')
  return q === -1 || !request.server.access?.keys ? url : url.slice(0, q) + withoutKey(url.slice(q))
}

function paramName (part) {
  const eq = part.indexOf('=')
  return decodedOr((eq === -1 ? part : part.slice(0, eq)).replace(/\+/g, ' '))
}

/**
 * A remote URL as a log line may show it: its origin and path, the values of its query replaced (`?key=…`: an API
 * key, an access token, a signature), its user and password dropped. 'a URL that cannot be parsed' when it cannot.
 */
export function urlForLogs (url) {
  try {
    const u = new URL(url)
    const names = [...u.searchParams.keys()].map((name) => `${encodeURIComponent(name)}=…`)
    return `${u.origin}${u.pathname}${names.length > 0 ? `?${names.join('&')}` : ''}`
  } catch {
    return 'a URL that cannot be parsed'
  }
}

/**
 * A URL with user info (`https://user:pass@host/…`) as fetch takes it: without it, sent as an `Authorization: Basic`
 * header, as a browser does (Node's fetch refuses a URL holding credentials). { url, headers }.
 */
export function withBasicAuth (url) {
  let u
  try {
    u = new URL(url)
  } catch {
    return { url, headers: {} }
  }
  if (u.username === '' && u.password === '') return { url, headers: {} }
  const credentials = `${decodedOr(u.username)}:${decodedOr(u.password)}`
  u.username = ''
  u.password = ''
  return { url: u.href, headers: { authorization: `Basic ${Buffer.from(credentials).toString('base64')}` } }
}

/** A URL's host as URL reads it: lower case, with its port unless the scheme's default; null when it cannot be read. */
export function hostOf (url) {
  try {
    return new URL(url).host
  } catch {
    return null
  }
}

/** `text` percent-decoded, or as it is when it cannot be (a lone %: part of a name); `fallback` for that case. */
export function decodedOr (text, fallback = text) {
  try {
    return decodeURIComponent(text)
  } catch {
    return fallback
  }
}

/** Adds names to the answer's Vary (CORS may have put Origin there already). */
export function addVary (reply, names) {
  const vary = reply.getHeader('vary')
  reply.header('vary', vary === undefined ? names : `${vary}, ${names}`)
}

/** A set's tile URL template; `format`: the tiles' (a variant's, 'mlt'), by default the set's own. */
export function tileUrl (base, entry, search = '', format = entry.source.format) {
  const ext = TILE_EXTENSIONS.includes(format) ? '.' + format : ''
  return `${base}/${encodeURIComponent(entry.id)}/{z}/{x}/{y}${ext}${search}`
}

export const tileJsonUrl = (base, id) => `${base}/${encodeURIComponent(id)}.json`

// tile-cannon's own outbound HTTP (remote PMTiles and COGs, object storage, a style's remote sources and markers)
// through the proxy the environment names, as curl, GDAL and Python follow it: http_proxy, https_proxy and no_proxy,
// or their upper-case forms (the lower-case one wins). Node's fetch reads none of them (Node 24's NODE_USE_ENV_PROXY
// aside). The dispatcher fetch uses is one per thread and per process, so each place that fetches installs it once:
// the main thread (lib/app.js), each raster worker (lib/raster/worker.js) and the Node renderer child
// (render/native_child.js). The Python renderer's MapLibre Native fetches with libcurl, which reads the variables itself:
// it is handed them as `childProxyEnv` says (libcurl ignores HTTP_PROXY in upper case). With none set, nothing is
// loaded and nothing changes.

import { isIP } from 'node:net'

const PROXY_PROTOCOLS = new Set(['http:', 'https:']) // (undici 6 speaks no SOCKS)

/** A variable's value, its lower-case name first (as curl and undici read them); '' when unset. */
const variable = (env, name) => (env[name] ?? env[name.toUpperCase()] ?? '').trim()

/** A proxy's URL as undici takes it: 'proxy:3128' is http://proxy:3128, as curl reads it. Throws on what is none. */
function proxyUrl (value, name) {
  let url
  try {
    url = new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(value) ? value : `http://${value}`)
  } catch {
    url = null
  }
  if (url === null || !PROXY_PROTOCOLS.has(url.protocol) || url.hostname === '') {
    throw new Error(`${name} ${JSON.stringify(shown(value))} is not a proxy URL tile-cannon can use (http://host:port or https://host:port)`)
  }
  return url.href
}

/** A proxy's URL fit for a log: no user name or password. */
function shown (value) {
  try {
    const url = new URL(value)
    return `${url.protocol}//${url.host}`
  } catch {
    return value.replace(/^(.*:\/\/)?[^@/]*@/, '$1') // (what does not parse: its credentials cut all the same)
  }
}

/**
 * The proxy settings in `env`: null when neither http_proxy nor https_proxy is set; else { httpProxy, httpsProxy,
 * noProxy } as EnvHttpProxyAgent takes them (an https URL goes through https_proxy, else http_proxy, as undici reads
 * them), `noProxyAsSet` and `description`, the line the log says. Throws an Error naming a value that is no proxy URL.
 */
export function proxyFromEnv (env = process.env) {
  const http = variable(env, 'http_proxy')
  const https = variable(env, 'https_proxy')
  if (http === '' && https === '') return null
  const httpProxy = http === '' ? '' : proxyUrl(http, 'http_proxy')
  const httpsProxy = https === '' ? httpProxy : proxyUrl(https, 'https_proxy')
  const noProxy = variable(env, 'no_proxy')
  const entries = noProxy.split(/[,\s]+/).filter(Boolean)
  // undici takes a bare name (corp.example) for that host alone; curl, Python and Go for it and every host under it.
  const domains = entries.flatMap((entry) => (/^[.*[]/.test(entry) || isIP(entry.replace(/:\d+$/, '')) ? [entry] : [entry, '.' + entry]))
  const through = httpProxy === httpsProxy
    ? shown(httpProxy)
    : httpProxy === '' ? `${shown(httpsProxy)} for https:// URLs (http:// ones are asked directly)` : `${shown(httpProxy)} (https:// URLs: ${shown(httpsProxy)})`
  const direct = noProxy === '*' ? 'every host (no_proxy=*)' : entries.join(', ')
  const description = `outbound HTTP goes through the proxy ${through}${direct ? `, except to ${direct}` : ''}`
  return { httpProxy, httpsProxy, noProxy: noProxy === '*' ? '*' : domains.join(','), noProxyAsSet: noProxy, description }
}

/**
 * The variables a child process that fetches with libcurl is given, so that it goes where this process goes: lower
 * case, as libcurl reads http_proxy. {} without a proxy.
 */
export function childProxyEnv (env = process.env) {
  const proxy = proxyFromEnv(env)
  if (proxy === null) return {}
  return { http_proxy: proxy.httpProxy, https_proxy: proxy.httpsProxy, no_proxy: proxy.noProxyAsSet } // (curl's rules)
}

let installed = null
let proxiedFetch = null // undici's fetch, once a proxy is installed in this thread

/**
 * fetch as every outbound request of tile-cannon makes it: Node's own, or, behind a proxy, the fetch of the undici in
 * package.json, whose global dispatcher is the proxy's. Node's own fetch is of the undici bundled with Node (6 on Node
 * 20, 8 on Node 26), and a dispatcher made by another undici is not used by it on every version (Node 26 ignored it:
 * every request went direct), so the proxied requests are made by the undici that made their dispatcher.
 */
export const outboundFetch = (input, init) => (proxiedFetch === null ? fetch(input, init) : proxiedFetch(input, init))

/**
 * Makes this thread's fetch go through the proxy of `env` (once a thread: later calls return the first's answer).
 * Resolves with proxyFromEnv's settings, or null when no proxy is set (then undici is not even loaded).
 */
export function useProxyFromEnv (env = process.env) {
  installed ??= install(env)
  return installed
}

async function install (env) {
  const proxy = proxyFromEnv(env)
  if (proxy === null) return null
  const { EnvHttpProxyAgent, setGlobalDispatcher, fetch: undiciFetch } = await import('undici')
  // EnvHttpProxyAgent warns that it is experimental, in every thread and child that makes one: its major version is
  // fixed in package.json, and a warning on every start-up about a setting the user made would only alarm.
  const warn = process.emitWarning
  process.emitWarning = (warning, options, ...rest) => (options?.code === 'UNDICI-EHPA' ? undefined : warn.call(process, warning, options, ...rest))
  try {
    setGlobalDispatcher(new EnvHttpProxyAgent({
      httpProxy: proxy.httpProxy,
      httpsProxy: proxy.httpsProxy,
      noProxy: proxy.noProxy,
      // http:// URLs are asked of the proxy in absolute form, as curl asks: not tunnelled with CONNECT, which proxies
      // commonly allow to port 443 only (Squid's default). https:// URLs are tunnelled, as everywhere.
      proxyTunnel: false,
    }))
  } finally {
    process.emitWarning = warn
  }
  proxiedFetch = undiciFetch
  return proxy
}

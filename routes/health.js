// /health: liveness, the process answers (200 whatever its backends do). /ready: readiness, for a load balancer to
// drain a replica that cannot serve: 503 until the catalog is loaded, while a backend it serves from is down (a
// database pool that cannot run a query, renderer children all dead, a remote archive that does not answer), and while
// the process sheds load. Each backend's state is in the body. Probes run at most once a second, however often asked.
import { GET_HEAD } from './http.js'
import { databaseName } from '../lib/urls.js'
import { storeDown } from '../lib/remote/reader.js'

const CHECK_TIMEOUT_MS = 2000
const CHECK_EVERY_MS = 1000

export default async function healthRoutes (app) {
  const { catalog, tileCache } = app
  // Answered under pressure too (lib/app.js, @fastify/under-pressure): /ready says so itself, /health must not lie.
  const config = { pressureHandler: () => null }

  app.route({
    method: GET_HEAD,
    url: '/health',
    config,
    handler: async (request, reply) => {
      reply.header('cache-control', 'no-store') // the state of this process now, never a cached copy
      return {
        status: catalog.loaded ? 'ok' : 'loading',
        sets: catalog.available().length,
        unavailable: catalog.unavailable(),
        cache: tileCache.stats,
      }
    },
  })

  let last = null // { at, promise } of the latest round of checks
  const checks = () => {
    if (last === null || Date.now() - last.at > CHECK_EVERY_MS) last = { at: Date.now(), promise: backendStates(app) }
    return last.promise
  }

  app.route({
    method: GET_HEAD,
    url: '/ready',
    config,
    handler: async (request, reply) => {
      reply.header('cache-control', 'no-store')
      const backends = await checks()
      const underPressure = app.isUnderPressure?.() ?? false
      const ready = catalog.loaded && !underPressure && backends.every((b) => b.state === 'up' || b.required === false)
      if (!ready) reply.code(503).header('retry-after', '5')
      return {
        status: ready ? 'ready' : 'not ready',
        catalog: { loaded: catalog.loaded, sets: catalog.available().length, unavailable: catalog.unavailable().length },
        underPressure,
        backends,
      }
    },
  })
}

/** Each backend's state: [{ name, kind, state: 'up' | 'down', reason?, required?, …details }]. */
async function backendStates ({ catalog, renderer, sharedCache }) {
  const states = []
  for (const [url, group] of catalog.providers) {
    const name = `database ${databaseName(url)}`
    states.push(withTimeout(group.check?.() ?? Promise.resolve(), `${name} did not answer`).then(
      () => ({ name, kind: 'database', state: 'up', ...poolState(group.pool) }),
      (err) => ({ name, kind: 'database', state: 'down', reason: err.message, ...poolState(group.pool) })))
  }
  // Sets read from a remote place (an archive over HTTP, object storage) that can tell whether it answers. As for a set
  // not opened (below), only a store that does not answer is required: one refusing us (401/403: credentials revoked
  // under a running service) is a config error every replica shares, shown with why but draining none.
  for (const entry of catalog.available()) {
    if (typeof entry.source.check !== 'function') continue
    const name = `set ${entry.id}`
    states.push(withTimeout(entry.source.check(), `${name} did not answer`).then(
      () => ({ name, kind: entry.kind, state: 'up' }),
      (err) => ({ name, kind: entry.kind, state: 'down', reason: err.message, ...(err.timedOut || storeDown(err.message) ? {} : { required: false }) })))
  }
  // Remote sets not open because their store did not answer: down until they open (tried again every remote.retryMs).
  // One refused for a reason of its own (no such object, not an archive) or of the config (wrong credentials) is no
  // backend down: /health lists it.
  for (const entry of catalog.entries.values()) {
    if (entry.source === null && entry.url !== null && storeDown(entry.reason)) {
      states.push({ name: `set ${entry.id}`, kind: entry.kind, state: 'down', reason: entry.reason })
    }
  }
  // A bucket prefix that cannot be listed: what it holds is not known (a reload keeps its sets as they were). Named by
  // its place in `paths`, never the bucket.
  for (const index of catalog.unlistedPaths()) {
    states.push({ name: `bucket prefix paths[${index}]`, kind: 'remote', state: 'down', reason: 'cannot be listed' })
  }
  if (renderer?.available) {
    const { children, restarts } = renderer.stats
    states.push({ name: 'renderer', kind: 'renderer', state: children > 0 ? 'up' : 'down', children, restarts })
  }
  // The shared cache is never required: without it tiles are made here, only slower.
  if (sharedCache) states.push({ name: 'redis', kind: 'cache', required: false, ...sharedCache.state })
  return Promise.all(states)
}

function withTimeout (promise, message) {
  let timer
  const timeout = new Promise((resolve, reject) => { timer = setTimeout(() => reject(Object.assign(new Error(message), { timedOut: true })), CHECK_TIMEOUT_MS) })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

const poolState = (pool) => (pool === undefined ? {} : { clients: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount })

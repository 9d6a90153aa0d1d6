// Load shedding: past an event-loop delay, heap or RSS (config `shedding`), requests are answered 503 with Retry-After
// at once instead of queueing without bound (@fastify/under-pressure measures; this says what the answer is). The
// tile front (routes/tiles.js) asks `isUnderPressure` and leaves such requests to Fastify, which refuses them here.
// /health, /ready and /metrics opt out (their route config), so an operator still sees why.
import { STATUS_CODES } from 'node:http'
import fp from 'fastify-plugin'
import underPressure from '@fastify/under-pressure'

const QUIET_MS = 10_000 // one warning per episode of pressure, not one per refused request

async function shedding (app, config) {
  const options = config.shedding ?? {}
  const retryAfter = options.retryAfterS ?? 10
  const state = { count: 0, lastAt: 0 }
  app.decorate('shedding', state)
  const body = { statusCode: 503, error: STATUS_CODES[503], message: 'the server is overloaded; retry shortly' }
  await app.register(underPressure, {
    maxEventLoopDelay: options.maxEventLoopDelayMs ?? 1000,
    maxHeapUsedBytes: (options.maxHeapUsedMB ?? 0) * 2 ** 20,
    maxRssBytes: (options.maxRssMB ?? 0) * 2 ** 20,
    retryAfter,
    pressureHandler: (request, reply, type, value) => {
      state.count++
      const now = Date.now()
      if (now - state.lastAt > QUIET_MS) request.log.warn({ type, value: Math.round(value ?? 0) }, 'under pressure: answering 503')
      state.lastAt = now
      reply.code(503).header('retry-after', String(retryAfter))
      return body
    },
  })
}

export default fp(shedding, { name: 'tile-cannon-shedding', fastify: '5.x' })

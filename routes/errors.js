// JSON error answers in Fastify's shape. Messages name the set, never a path or a stack.

export function notFound (reply, message) {
  return reply.code(404).send({ statusCode: 404, error: 'Not Found', message })
}

export function badRequest (reply, message) {
  return reply.code(400).send({ statusCode: 400, error: 'Bad Request', message })
}

/** 503 for a set whose backend cannot answer; each distinct failure of a set is logged once. */
export function unavailable (reply, entry, err, log) {
  if (err !== undefined && log !== undefined) {
    const reason = String(err.message || err.name || err) // some errors (DataCloneError) have no message
    if (!entry.errors.has(reason) && entry.errors.size < 50) {
      entry.errors.add(reason)
      log.error({ set: entry.id, reason }, 'tile read failed')
    }
  }
  const message = err === undefined ? `tileset '${entry.id}' is unavailable: ${entry.reason}` : `tileset '${entry.id}' could not read this tile`
  return reply.code(503).header('retry-after', '10').send({ statusCode: 503, error: 'Service Unavailable', message })
}

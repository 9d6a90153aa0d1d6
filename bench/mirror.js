// Reads a server's answers for a list of URLs once, as sent on the wire (bytes and headers), so a baseline can answer
// exactly the same. node:http rather than fetch(): fetch would decode gzip bodies.
import { request } from 'node:http'

const DROP = new Set(['date', 'connection', 'keep-alive', 'content-length', 'transfer-encoding'])

// A server that stops answering must not hold the bench (or the baseline's start) for ever.
const TIMEOUT_MS = 10_000

const get = (url, headers, timeoutMs) => new Promise((resolve, reject) => {
  const req = request(url, { headers }, (res) => {
    const chunks = []
    res.on('data', (c) => chunks.push(c))
    res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }))
    res.on('error', reject)
  }).on('error', (err) => reject(err.code ? new Error(`${url}: ${err.code}`) : err)) // ECONNRESET…, or the timeout's
  // Idle for timeoutMs, before the answer or within its body.
  req.setTimeout(timeoutMs, () => req.destroy(new Error(`${url} did not answer in ${timeoutMs / 1000} s`)))
  req.end()
})

/** @returns {Promise<Map<string, {status: number, head: object, body: Buffer}>>} path and query → answer */
export async function mirror (urls, headers, { timeoutMs = TIMEOUT_MS } = {}) {
  const answers = new Map()
  for (let i = 0; i < urls.length; i += 64) {
    await Promise.all(urls.slice(i, i + 64).map(async (url) => {
      const res = await get(url, headers, timeoutMs)
      const head = {}
      for (const [k, v] of Object.entries(res.headers)) if (!DROP.has(k)) head[k] = v
      // Keyed as a request line names it (the path and the query: an API key in a --server template), which is what the
      // node:http baseline looks answers up by; nginx serves files by the path alone.
      const { pathname, search } = new URL(url)
      answers.set(pathname + search, { status: res.status, head, body: res.body })
    }))
  }
  return answers
}

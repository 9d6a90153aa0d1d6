// Reads a server's answers for a list of URLs once, as sent on the wire (bytes and headers), so a baseline can answer
// exactly the same. node:http rather than fetch(): fetch would decode gzip bodies.
import { request } from 'node:http'

const DROP = new Set(['date', 'connection', 'keep-alive', 'content-length', 'transfer-encoding'])

const get = (url, headers) => new Promise((resolve, reject) => {
  request(url, { headers }, (res) => {
    const chunks = []
    res.on('data', (c) => chunks.push(c))
    res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }))
    res.on('error', reject)
  }).on('error', reject).end()
})

/** @returns {Promise<Map<string, {status: number, head: object, body: Buffer}>>} path → answer */
export async function mirror (urls, headers) {
  const answers = new Map()
  for (let i = 0; i < urls.length; i += 64) {
    await Promise.all(urls.slice(i, i + 64).map(async (url) => {
      const res = await get(url, headers)
      const head = {}
      for (const [k, v] of Object.entries(res.headers)) if (!DROP.has(k)) head[k] = v
      answers.set(new URL(url).pathname, { status: res.status, head, body: res.body })
    }))
  }
  return answers
}

// The ceiling of any single Node process: a bare node:http server answering tiles from a Map. It mirrors a reference
// server's answers (the same wire bytes and headers, read once at start with the bench's request headers), so the
// comparison is like for like. Started by bench/run.js: `node bench/baseline.js <urls.json> <port>`.
import { readFileSync } from 'node:fs'
import { createServer, request } from 'node:http'

const [listFile, port] = process.argv.slice(2)
const { urls, headers } = JSON.parse(readFileSync(listFile, 'utf8'))
const DROP = new Set(['date', 'connection', 'keep-alive', 'content-length', 'transfer-encoding'])

// node:http, not fetch(): fetch would decode gzip bodies, and the mirror must hold the bytes as sent.
const get = (url) => new Promise((resolve, reject) => {
  request(url, { headers }, (res) => {
    const chunks = []
    res.on('data', (c) => chunks.push(c))
    res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }))
    res.on('error', reject)
  }).on('error', reject).end()
})

const answers = new Map()
for (let i = 0; i < urls.length; i += 64) {
  await Promise.all(urls.slice(i, i + 64).map(async (url) => {
    const res = await get(url)
    const head = { 'content-length': res.body.length }
    for (const [k, v] of Object.entries(res.headers)) if (!DROP.has(k)) head[k] = v
    answers.set(new URL(url).pathname, { status: res.status, head, body: res.body })
  }))
}

const missing = { status: 404, head: { 'content-length': 0 }, body: Buffer.alloc(0) }
createServer((req, res) => {
  const a = answers.get(req.url) ?? missing
  res.writeHead(a.status, a.head)
  res.end(a.body)
}).listen(Number(port), '127.0.0.1', () => process.send?.('ready'))

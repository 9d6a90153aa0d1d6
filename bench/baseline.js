// The ceiling of any single Node process: a bare node:http server answering tiles from a Map. It mirrors a reference
// server's answers (see mirror.js), so the comparison is like for like.
// Started by bench/run.js: `node bench/baseline.js <urls.json> <port>`.
import { readFileSync } from 'node:fs'
import { createServer } from 'node:http'
import { mirror } from './mirror.js'

// Before anything that waits: the bench that forked it gone (even while the answers are read) is the end of it.
process.on('disconnect', () => process.exit(0))

const [listFile, port] = process.argv.slice(2)
const { urls, headers } = JSON.parse(readFileSync(listFile, 'utf8'))
let answers
try {
  answers = await mirror(urls, headers)
} catch (err) {
  // One line, which the bench shows as why the baseline did not start.
  console.error(`cannot read the answers to mirror: ${err.message}`)
  process.exit(1)
}
for (const a of answers.values()) a.head['content-length'] = a.body.length

const missing = { status: 404, head: { 'content-length': 0 }, body: Buffer.alloc(0) }
createServer((req, res) => {
  const a = answers.get(req.url) ?? missing
  res.writeHead(a.status, a.head)
  res.end(a.body)
}).listen(Number(port), '127.0.0.1', () => process.send?.('ready'))

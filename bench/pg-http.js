// The HTTP + database floor for PostGIS sets: a bare node:http server that runs each set's own tile query (the same
// SQL and pool as tile-cannon's source) per request, with no cache, no compression and no framework. Compared with
// it, tile-cannon's cache-off figures show what the server itself adds on top of the query.
// Started by bench/run.js: `node bench/pg-http.js <postgres url> <port>`.
import { createServer } from 'node:http'
import { createProvider } from '../lib/sources/postgis/index.js'

const [url, port] = process.argv.slice(2)
const provider = createProvider(url, { poolSize: 10 })
const sets = new Map((await provider.discover()).map(({ id, source }) => [encodeURIComponent(id), source]))

createServer(async (req, res) => {
  const [, id, z, x, y] = req.url.split('/')
  const source = sets.get(id)
  if (!source) {
    res.writeHead(404, { 'content-length': 0 })
    return res.end()
  }
  try {
    const tile = await source.getTile(Number(z), Number(x), Number(y))
    res.writeHead(tile?.length ? 200 : 204, { 'content-type': 'application/x-protobuf', 'content-length': tile?.length ?? 0 })
    res.end(tile)
  } catch {
    res.writeHead(503, { 'content-length': 0 })
    res.end()
  }
}).listen(Number(port), '127.0.0.1', () => process.send?.('ready'))
process.on('SIGTERM', () => provider.close().finally(() => process.exit(0)))
process.on('disconnect', () => provider.close().finally(() => process.exit(0))) // the bench that forked it is gone

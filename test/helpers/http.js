// A range-serving HTTP server for remote-source tests (PMTiles, COGs).
import { once } from 'node:events'
import { createServer } from 'node:http'

/**
 * A real HTTP server on 127.0.0.1 answering range requests for `file` (a Buffer) at /name (404 elsewhere); `down()` makes it fail,
 * `hold()` leaves every range but the file's start unanswered until `release()` (a store that stalls).
 * `piece`: at most this many bytes an answer, however many were asked for (as HTTP lets a server answer a range).
 * `nodes`: that many servers behind one name, answering in turn, each with its own ETag (as nginx makes them from
 * each copy's file time); an If-Match of another's is a 412, as each would answer.
 */
export async function rangeServer (t, file, name = 'remote.pmtiles', { piece = Infinity, nodes = 1 } = {}) {
  let answered = 0
  const ranges = []
  let up = true
  const stalls = holdable(t, { holding: false })
  const server = createServer((req, res) => {
    if (!up) { res.writeHead(500); res.end(); return }
    if (req.url.split('?')[0] !== `/${name}`) { res.writeHead(404); res.end(); return } // (a COG's .aux.xml: none)
    if (/^bytes=0-/.test(req.headers.range ?? '')) answer(req, res)
    else stalls.hold(() => answer(req, res))
  })
  function answer (req, res) {
    const m = /bytes=(\d+)-(\d+)/.exec(req.headers.range ?? '')
    if (!m) { res.writeHead(200, { 'content-length': file.length }); res.end(file); return }
    const etag = `"v1${nodes > 1 ? `-node${answered++ % nodes}` : ''}"`
    if (req.headers['if-match'] !== undefined && req.headers['if-match'] !== etag) { res.writeHead(412); res.end(); return }
    const start = Number(m[1])
    const end = Math.min(Number(m[2]), file.length - 1, start + piece - 1)
    ranges.push([start, end])
    res.writeHead(206, { 'content-range': `bytes ${start}-${end}/${file.length}`, 'content-length': end - start + 1, etag })
    res.end(file.subarray(start, end + 1))
  }
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.after(() => { stalls.release(); server.close() })
  return { url: `http://127.0.0.1:${server.address().port}/${name}`, ranges, down: () => { up = false }, hold: stalls.start, release: stalls.release }
}

/**
 * Answers a test server holds back (a store that stalls): `hold(go)` keeps `go` (what answers a request) until
 * `release()` while holding is on, and runs it at once otherwise; `release()` runs those kept and holds nothing from
 * then on, `start()` holds again, `held()` counts those kept now. `holding`: on from the start. All are released
 * when the test ends, so no request is left hanging.
 */
export function holdable (t, { holding = true } = {}) {
  let kept = holding ? [] : null
  const release = () => {
    const waiting = kept ?? []
    kept = null
    for (const go of waiting) go()
  }
  t.after(release)
  return {
    hold: (go) => { if (kept === null) go(); else kept.push(go) },
    held: () => kept?.length ?? 0,
    start: () => { kept ??= [] },
    release,
  }
}

// Closing without waiting on clients (SIGTERM, a pm2 reload, tests): once close() starts, answers say
// `Connection: close`, and every connection not carrying an answer is closed, now and every 250 ms after, until the
// server is closed. Fastify (forceCloseConnections: 'idle') closes idle keep-alive connections once, when close()
// starts; Node leaves alone a connection that has not sent a whole request yet, such as a browser's speculative
// preconnect, and with no request timeout (a tile server's connections are long-lived) close() then waited as long
// as the client kept it open.
import net from 'node:net'

/**
 * Tracks `server`'s connections (per connection, nothing per request). `drain()` (server.js, on a signal) stops
 * accepting and gives open connections a grace to end; `start()` (app.close) closes the rest.
 */
export function closingConnections (server) {
  const sockets = new Set()
  server.on('connection', (socket) => {
    sockets.add(socket)
    socket.once('close', () => sockets.delete(socket))
  })
  let reaper = null
  // `_httpMessage` is the answer a connection is carrying (Node sets it from the request's arrival to the answer's end).
  const reap = () => { for (const socket of sockets) if (!socket._httpMessage) socket.destroy() }
  // From now on every answer says `Connection: close`: its client sends the next request elsewhere instead of racing
  // a close (closing a busy keep-alive connection at once resets the requests its client has already sent on it).
  let announced = false
  const announce = () => {
    if (announced) return
    announced = true
    server.prependListener('request', (req, res) => { if (!res.headersSent) res.setHeader('connection', 'close') })
  }
  return {
    /**
     * Stops accepting (under a pm2 cluster the primary then sends new connections to the other workers) and resolves
     * when no connection is left, or after `graceMs`.
     */
    async drain (graceMs = 1000) {
      announce()
      // net.Server's close stops the listener only; http.Server's would also drop idle keep-alive connections now.
      net.Server.prototype.close.call(server)
      const until = Date.now() + graceMs
      while (sockets.size > 0 && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 25))
    },
    start () {
      announce()
      reap()
      reaper = setInterval(reap, 250).unref()
    },
    stop () { clearInterval(reaper) },
  }
}

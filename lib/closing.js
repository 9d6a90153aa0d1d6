// Closing without waiting on clients (SIGTERM, a pm2 reload, tests): once close() starts, answers say
// `Connection: close`, and every connection not carrying an answer is closed, now and every 250 ms after, until the
// server is closed. Fastify (forceCloseConnections: 'idle') closes idle keep-alive connections once, when close()
// starts; Node leaves alone a connection that has not sent a whole request yet, such as a browser's speculative
// preconnect, and with no request timeout (a tile server's connections are long-lived) close() then waited as long
// as the client kept it open.

/** Tracks `server`'s connections (per connection, nothing per request); returns what starts the closing. */
export function closingConnections (server) {
  const sockets = new Set()
  server.on('connection', (socket) => {
    sockets.add(socket)
    socket.once('close', () => sockets.delete(socket))
  })
  let reaper = null
  // `_httpMessage` is the answer a connection is carrying (Node sets it from the request's arrival to the answer's end).
  const reap = () => { for (const socket of sockets) if (!socket._httpMessage) socket.destroy() }
  return {
    start () {
      server.prependListener('request', (req, res) => { if (!res.headersSent) res.setHeader('connection', 'close') })
      reap()
      reaper = setInterval(reap, 250).unref()
    },
    stop () { clearInterval(reaper) },
  }
}

// A query whose rows (one text column each) are handed over as they arrive, never collected: a pg "submittable"
// (what pg-cursor and pg-query-stream are), written here on pg's own connection API because one extended-protocol
// round (Parse once per connection, Bind, Execute everything, Sync) is all it needs: no portal fetched in batches,
// so no extra round trips; flow control is TCP's, by pausing the socket while the reader is full (`pause`/`resume`).
//
// pg calls the handle* methods below for the messages of the active query. Exactly one of `sink.end()` and
// `sink.error(err)` is called, once.

export class TextRows {
  /** `name` '' runs unnamed (parsed each time); `values` are strings (or null). `sink`: { row(text), end(), error(err) }. */
  constructor (name, text, values, sink) {
    this.name = name
    this.text = text
    this.values = values
    this.sink = sink
    this.connection = null
    this.done = false
    this.callback = null // pg wraps it to clear its query_timeout timer: called when the query is over
  }

  submit (connection) {
    this.connection = connection
    const stream = connection.stream
    stream.cork?.()
    try {
      // As pg's own Query does: a named statement is parsed once per connection (pg records it on ParseComplete).
      if (this.name === '' || (connection.parsedStatements[this.name] === undefined && connection.submittedNamedStatements[this.name] === undefined)) {
        connection.parse({ text: this.text, name: this.name, types: [] })
        if (this.name !== '') connection.submittedNamedStatements[this.name] = this.text
      }
      connection.bind({ statement: this.name, values: this.values })
      connection.execute({ portal: '', rows: 0 })
      connection.sync()
    } finally {
      stream.uncork?.()
    }
    return null
  }

  /** Stops reading from the database until `resume()`: the backend blocks once the socket's buffers are full. */
  pause () { if (!this.done) this.connection?.stream.pause() } // once done, the connection is the pool's again
  resume () { this.connection?.stream.resume() }

  handleDataRow (msg) {
    if (!this.done) this.sink.row(msg.fields[0])
  }

  handleReadyForQuery () {
    this.finish(null)
  }

  handleError (err) {
    this.finish(err)
  }

  finish (err) {
    if (this.done) return
    this.done = true
    this.resume() // a paused socket would leave the connection dead in the pool
    this.callback?.(err)
    if (err) this.sink.error(err)
    else this.sink.end()
  }

  handleRowDescription () {}
  handleCommandComplete () {}
  handleEmptyQuery () {}
  handlePortalSuspended () {}
  handleCopyInResponse (connection) { connection.sendCopyFail('no COPY here') }
  handleCopyData () {}
}

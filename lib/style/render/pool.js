// A bounded pool of renderer child processes (MapLibre Native lives out of process: a crash costs one child, never
// the server). Each child speaks frames on stdin/stdout: a 4-byte length of what follows, a 4-byte length of the JSON
// header, the header, a binary payload. The parent asks for renders ({op: 'tile'|'view'|'bounds'|'style', rid});
// the child answers {op: 'done'|'failed', rid}, and asks for the resources MapLibre Native wants
// ({op: 'fetch', fid, url}), which `fetchResource` answers ({op: 'resource', fid, status}).
import { spawn } from 'node:child_process'
import { toldUnavailable } from '../../errors.js'

function frame (header, payload = Buffer.alloc(0)) {
  const json = Buffer.from(JSON.stringify(header))
  const head = Buffer.allocUnsafe(8)
  head.writeUInt32BE(4 + json.length + payload.length, 0)
  head.writeUInt32BE(json.length, 4)
  return Buffer.concat([head, json, payload])
}

/** Splits a byte stream into frames: calls `onFrame(header, payload)` for each. */
function frameReader (onFrame) {
  let buffered = Buffer.alloc(0)
  return (chunk) => {
    buffered = buffered.length ? Buffer.concat([buffered, chunk]) : chunk
    while (buffered.length >= 4) {
      const length = buffered.readUInt32BE(0)
      if (buffered.length < 4 + length) return
      const jsonLength = buffered.readUInt32BE(4)
      const header = JSON.parse(buffered.toString('utf8', 8, 8 + jsonLength))
      onFrame(header, buffered.subarray(8 + jsonLength, 4 + length))
      buffered = buffered.subarray(4 + length)
    }
  }
}

export class RenderPool {
  /**
   * @param {object} o
   * @param {string} o.command  the child's program; `args` its arguments, `env` its environment
   * @param {number} o.size     children
   * @param {number} o.timeoutMs  a render taking longer fails (503) and its child is replaced: it may be stuck
   * @param {number} o.queueMax   renders waiting or under way, in all; past it a render is refused (503, Retry-After)
   * @param {(url: string, kind: string) => Promise<{status: string, body?: Buffer, message?: string}>} o.fetchResource
   */
  constructor ({ command, args = [], env = {}, size = 1, timeoutMs = 30_000, queueMax = 64, fetchResource, log, name }) {
    Object.assign(this, { command, args, env, size, timeoutMs, queueMax, fetchResource, log, name })
    this.children = []
    this.pending = 0
    this.nextId = 1
    this.closing = false
    this.restarts = 0
    this.renders = 0
  }

  /** Starts the children; resolves with the engine's name once one is ready, rejects with why none can start. */
  async start () {
    const starts = Array.from({ length: this.size }, () => this.spawnChild())
    const first = await Promise.any(starts.map((c) => c.ready)).catch((err) => { throw err.errors?.[0] ?? err })
    return first
  }

  spawnChild () {
    const proc = spawn(this.command, this.args, { env: { ...process.env, ...this.env }, stdio: ['pipe', 'pipe', 'pipe'] })
    const child = { proc, inflight: new Map(), styles: new Set(), alive: false, ready: null }
    let readyResolve, readyReject
    child.ready = new Promise((resolve, reject) => { readyResolve = resolve; readyReject = reject })
    child.ready.catch(() => {})
    let stderr = ''
    proc.stderr.on('data', (d) => { stderr = (stderr + d).slice(-2000) })
    proc.stdin.on('error', () => {}) // a dead child: its exit handler answers what was in flight
    proc.stdout.on('data', frameReader((header, payload) => {
      if (header.op === 'ready') {
        child.alive = true
        readyResolve(header.engine)
      } else if (header.op === 'fatal') {
        readyReject(new Error(`${header.error}: ${header.message}`))
      } else if (header.op === 'fetch') {
        this.answerFetch(child, header)
      } else {
        const job = child.inflight.get(header.rid)
        if (job === undefined) return
        child.inflight.delete(header.rid)
        this.finish(job)
        if (header.op === 'done') job.resolve(payload)
        else job.reject(toldUnavailable(`the renderer could not draw this: ${header.message || header.error}`))
      }
    }))
    proc.on('error', (err) => readyReject(err))
    proc.on('exit', (code, signal) => {
      child.alive = false
      this.children = this.children.filter((c) => c !== child)
      readyReject(new Error(`the renderer exited (${signal ?? code}) before it was ready${stderr ? ': ' + stderr.trim().split('\n').pop() : ''}`))
      for (const job of child.inflight.values()) {
        this.finish(job)
        job.reject(toldUnavailable('the renderer stopped during this render; it is being restarted'))
      }
      child.inflight.clear()
      if (!this.closing && child.everReady) {
        this.restarts++
        this.log.warn({ renderer: this.name, exit: signal ?? code }, 'renderer child exited; restarting it')
        setTimeout(() => { if (!this.closing) this.spawnChild() }, Math.min(5000, 100 * this.restarts)).unref()
      }
    })
    child.ready.then(() => { child.everReady = true }, () => {})
    this.children.push(child)
    return child
  }

  finish (job) {
    clearTimeout(job.timer)
    this.pending--
  }

  async answerFetch (child, { fid, url, kind }) {
    let answer
    try {
      answer = await this.fetchResource(url, kind)
    } catch (err) {
      answer = { status: 'error', message: err.message }
    }
    if (!child.alive) return
    const { body, ...header } = answer
    child.proc.stdin.write(frame({ op: 'resource', fid, ...header }, body))
  }

  /**
   * A render: `request` ({op, style, …}) on the least busy child, with the style registered there first (`styleJson`,
   * its JSON text, keyed by request.style). Resolves with the PNG; rejects with Unavailable (503): the queue full, a
   * timeout, a crashed child, or the engine refusing (a bad style, a broken source: with its reason).
   */
  render (request, styleJson) {
    const ready = this.children.filter((c) => c.alive)
    if (ready.length === 0) return Promise.reject(toldUnavailable('no renderer is running; it is being restarted'))
    if (this.pending >= this.queueMax) return Promise.reject(toldUnavailable('the renderer is busy', 1))
    const child = ready.reduce((a, b) => (b.inflight.size < a.inflight.size ? b : a))
    if (!child.styles.has(request.style)) {
      child.styles.add(request.style)
      child.proc.stdin.write(frame({ op: 'style', rid: 0, style: request.style }, Buffer.from(styleJson)))
    }
    const rid = this.nextId++
    this.pending++
    this.renders++
    return new Promise((resolve, reject) => {
      const job = { resolve, reject }
      job.timer = setTimeout(() => {
        // A render past its time may never end: the child is replaced, and what it had in flight answers 503.
        this.log.warn({ renderer: this.name, op: request.op, style: request.style }, 'render timed out; replacing its renderer')
        child.proc.kill('SIGKILL')
      }, this.timeoutMs)
      child.inflight.set(rid, job)
      child.proc.stdin.write(frame({ ...request, rid }))
    })
  }

  get stats () {
    return { children: this.children.filter((c) => c.alive).length, pending: this.pending, restarts: this.restarts, renders: this.renders }
  }

  /** The process ids of the running children. */
  pids () { return this.children.filter((c) => c.alive).map((c) => c.proc.pid) }

  close () {
    this.closing = true
    for (const c of this.children) c.proc.kill('SIGKILL')
  }
}

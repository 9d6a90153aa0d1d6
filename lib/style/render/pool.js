// A bounded pool of renderer child processes (MapLibre Native lives out of process: a crash costs one child, never
// the server). Each child speaks frames on stdin/stdout: a 4-byte length of what follows, a 4-byte length of the JSON
// header, the header, a binary payload. The parent asks for renders ({op: 'tile'|'view'|'bounds'|'style', rid});
// the child answers {op: 'done'|'failed', rid}, and asks for the resources MapLibre Native wants
// ({op: 'fetch', fid, url}), which `fetchResource` answers ({op: 'resource', fid, status}).
import { spawn } from 'node:child_process'
import { toldUnavailable } from '../../errors.js'

export function frame (header, payload = Buffer.alloc(0)) {
  const json = Buffer.from(JSON.stringify(header))
  const head = Buffer.allocUnsafe(8)
  head.writeUInt32BE(4 + json.length + payload.length, 0)
  head.writeUInt32BE(json.length, 4)
  return Buffer.concat([head, json, payload])
}

/** Splits a byte stream into frames: calls `onFrame(header, payload)` for each (chunks joined once per frame). */
export function frameReader (onFrame) {
  let chunks = []
  let size = 0
  return (chunk) => {
    chunks.push(chunk)
    size += chunk.length
    while (size >= 4) {
      if (chunks[0].length < 4) chunks = [Buffer.concat(chunks, size)]
      const length = chunks[0].readUInt32BE(0)
      if (size < 4 + length) return // joined only once the whole frame is here: a large image is copied once
      let buffered = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size)
      const jsonLength = buffered.readUInt32BE(4)
      if (jsonLength > length - 4) throw new Error('frame header longer than its frame')
      const header = JSON.parse(buffered.toString('utf8', 8, 8 + jsonLength))
      onFrame(header, buffered.subarray(8 + jsonLength, 4 + length))
      buffered = buffered.subarray(4 + length)
      chunks = buffered.length ? [buffered] : []
      size = buffered.length
    }
  }
}

const MAX_STYLES_PER_CHILD = 256
const START_TIMEOUT_MS = 60_000

export class RenderPool {
  /**
   * @param {object} o
   * @param {string} o.command  the child's program; `args` its arguments, `env` its environment
   * @param {number} o.size     children
   * @param {number} o.timeoutMs  a render taking longer fails (503) and its child is replaced: it may be stuck
   * @param {number} o.queueMax   renders waiting or under way, in all; past it a render is refused (503, Retry-After)
   * @param {(url: string, kind: string) => Promise<{status: string, body?: Buffer, message?: string}>} o.fetchResource
   */
  constructor ({ command, args = [], env = {}, size = 1, timeoutMs = 30_000, queueMax = 64, maxStyles = MAX_STYLES_PER_CHILD, fetchResource, log, name }) {
    Object.assign(this, { command, args, env, size, timeoutMs, queueMax, maxStyles, fetchResource, log, name })
    this.children = []
    this.pending = 0
    this.nextId = 1
    this.closing = false
    this.restarts = 0
    this.crashes = 0 // children lost since the last render that worked
    this.renders = 0
  }

  /** Starts the children; resolves with the engine's name once one is ready, rejects with why none can start. */
  async start () {
    const starts = Array.from({ length: this.size }, () => this.spawnChild())
    let timer
    const late = new Promise((resolve, reject) => { timer = setTimeout(() => reject(new Error(`no renderer was ready after ${START_TIMEOUT_MS / 1000} s`)), START_TIMEOUT_MS) })
    try {
      const engine = await Promise.race([Promise.any(starts.map((c) => c.ready)).catch((err) => { throw err.errors?.[0] ?? err }), late])
      this.started = true
      // Children that failed while another started are replaced now.
      for (let n = this.children.length; n < this.size; n++) this.spawnChild()
      return engine
    } finally {
      clearTimeout(timer)
    }
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
    const onFrame = (header, payload) => {
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
        if (header.op === 'done') {
          this.crashes = 0 // a child that draws is healthy again: the next loss restarts at once
          job.resolve(payload)
        }
        else job.reject(toldUnavailable(`the renderer could not draw this: ${header.message || header.error}`))
        if (child.retiring && child.inflight.size === 0) this.end(child)
      }
    }
    const read = frameReader(onFrame)
    proc.stdout.on('data', (chunk) => {
      try {
        read(chunk)
      } catch (err) {
        // A child that speaks garbage is broken: it is replaced, and what it had in flight answers 503.
        this.log.error({ renderer: this.name, err: err.message }, 'renderer sent a bad frame; replacing it')
        proc.kill('SIGKILL')
      }
    })
    proc.on('error', (err) => readyReject(err))
    proc.on('exit', (code, signal) => {
      child.alive = false
      child.exited = true
      this.children = this.children.filter((c) => c !== child)
      readyReject(new Error(`the renderer exited (${signal ?? code}) before it was ready${stderr ? ': ' + stderr.trim().split('\n').pop() : ''}`))
      for (const job of child.inflight.values()) {
        this.finish(job)
        job.reject(toldUnavailable('the renderer stopped during this render; it is being restarted'))
      }
      child.inflight.clear()
      // A child lost after the pool started is replaced, with a pause that grows with the losses since the last
      // render that worked (a child that cannot start, again and again, costs a try every 5 s at most); at
      // start-up, start() reports instead.
      if (!this.closing && this.started && !child.retiring) {
        this.restarts++
        this.crashes++
        this.log.warn({ renderer: this.name, exit: signal ?? code }, 'renderer child exited; restarting it')
        setTimeout(() => { if (!this.closing) this.spawnChild() }, Math.min(5000, 100 * this.crashes)).unref()
      }
    })
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
    const alive = this.children.filter((c) => c.alive)
    const fresh = alive.filter((c) => !c.retiring)
    const ready = fresh.length > 0 ? fresh : alive // a retiring child serves until its replacement is up
    if (ready.length === 0) {
      // Between a retired child and its replacement: wait for the one starting (a crash answers 503 instead).
      const starting = this.children.find((c) => !c.alive && !c.retiring && !c.exited)
      if (starting === undefined) return Promise.reject(toldUnavailable('no renderer is running; it is being restarted'))
      return starting.ready.then(() => this.render(request, styleJson), () => { throw toldUnavailable('the renderer could not start') })
    }
    if (this.pending >= this.queueMax) return Promise.reject(toldUnavailable('the renderer is busy', 1))
    const child = ready.reduce((a, b) => (b.inflight.size < a.inflight.size ? b : a))
    if (!child.styles.has(request.style)) {
      // The engine cannot forget a style: a child that has taken many (static images with overlays register one
      // each) is replaced by a fresh one once its renders are done, so its memory stays bounded.
      if (child.styles.size >= this.maxStyles) this.retire(child)
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
        if (child.inflight.delete(rid)) { // this one says why; the others the child had answer that it stopped
          this.finish(job)
          job.reject(toldUnavailable(`the render took longer than ${this.timeoutMs / 1000} s (render.timeoutMs)`))
        }
        child.proc.kill('SIGKILL')
      }, this.timeoutMs)
      child.inflight.set(rid, job)
      child.proc.stdin.write(frame({ ...request, rid }))
    })
  }

  /** Stops giving `child` work, starts its replacement, and ends it once its renders are answered. */
  retire (child) {
    if (child.retiring || this.closing) return
    child.retiring = true
    this.spawnChild()
    if (child.inflight.size === 0) setImmediate(() => { if (child.inflight.size === 0) this.end(child) })
  }

  /** Ends a retired child: no more work from now, its exit is not a crash. */
  end (child) {
    child.alive = false
    child.proc.kill('SIGKILL')
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

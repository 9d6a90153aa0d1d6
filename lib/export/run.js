// The export loop: tiles issued in grid order with up to `concurrency` reads in flight, each written as it arrives,
// and a checkpoint (commit + progress record) every BATCH tiles or CHECKPOINT_MS. A tile whose read fails is counted
// and left for a later run; a write that fails stops the export (the output cannot be trusted to take more).
const BATCH = 500
const CHECKPOINT_MS = 1000
// Reads that answer synchronously (MBTiles) never give the event loop a turn by themselves: a signal or the progress
// line would wait for the whole export. Every YIELD_MS the loop steps aside.
const YIELD_MS = 20

/** A write to the output failed: fatal for the run. */
export class OutputFailure extends Error {}

export class ExportRun {
  /**
   * grid (grid.js), read(z, x, y) (read.js), output (mbtiles-output.js or folder-output.js), `start` ({ done,
   * reached } from the output), `onFailure(z, x, y, err)` for each tile that failed.
   */
  constructor ({ grid, read, output, concurrency, start, onFailure }) {
    this.grid = grid
    this.read = read
    this.output = output
    this.concurrency = concurrency
    this.onFailure = onFailure
    this.total = grid.total
    this.startDone = start.done
    this.reached = start.reached // tiles below it may be in the output already: looked for before being read
    this.next = start.done
    this.inFlight = new Set() // indexes being read or written
    this.lowestFailed = Infinity
    this.stats = { written: 0, absent: 0, failed: 0, present: 0 }
    this.stopping = false
    this.abandoned = false
    this.fatal = null
    this.sinceCheckpoint = 0
    this.lastCheckpoint = performance.now()
    this.lastYield = this.lastCheckpoint
    this.startedAt = this.lastCheckpoint
  }

  /** Tiles finished in this run (written, absent, failed, or found in the output). */
  get processed () {
    const s = this.stats
    return s.written + s.absent + s.failed + s.present
  }

  /** The index below which every tile is done: nothing in flight below it, and no failure (a later run retries it). */
  get done () {
    let done = Math.min(this.next, this.lowestFailed)
    for (const index of this.inFlight) if (index < done) done = index
    return done
  }

  /** Runs to the end, or until stop(); resolves when every read issued is finished. */
  start () {
    this.finished = Promise.all(Array.from({ length: this.concurrency }, () => this.lane()))
    return this.finished
  }

  /** Issues no more reads; those in flight finish. */
  stop () {
    this.stopping = true
  }

  /** Leaves the reads in flight unfinished: whatever they bring is not written (the output is being closed). */
  abandon () {
    this.stopping = true
    this.abandoned = true
  }

  /** Commits what is written with the progress record. */
  checkpoint () {
    this.sinceCheckpoint = 0
    this.lastCheckpoint = performance.now()
    try {
      this.output.checkpoint(this.done, Math.max(this.reached, this.next))
    } catch (err) {
      this.fail(err)
    }
  }

  fail (err) {
    this.fatal ??= new OutputFailure(err.message, { cause: err })
    this.stopping = true
  }

  async lane () {
    const { grid, output, stats, inFlight } = this
    while (!this.stopping && this.next < this.total) {
      const index = this.next++
      const [z, x, y] = grid.at(index)
      if (index < this.reached && output.has(z, x, y)) {
        stats.present++
      } else {
        inFlight.add(index)
        let bytes
        try {
          bytes = this.read(z, x, y)
          if (bytes instanceof Promise) bytes = await bytes
        } catch (err) {
          if (this.abandoned) return
          inFlight.delete(index)
          stats.failed++
          if (index < this.lowestFailed) this.lowestFailed = index
          this.onFailure(z, x, y, err)
          bytes = undefined
        }
        if (this.abandoned) return
        if (bytes === null) {
          stats.absent++
        } else if (bytes !== undefined) {
          try {
            const writing = output.put(z, x, y, bytes)
            if (writing instanceof Promise) await writing
          } catch (err) {
            this.fail(err)
            return
          }
          if (this.abandoned) return
          stats.written++
        }
        inFlight.delete(index)
      }
      const now = performance.now()
      if (++this.sinceCheckpoint >= BATCH || now - this.lastCheckpoint >= CHECKPOINT_MS) this.checkpoint()
      if (now - this.lastYield >= YIELD_MS) {
        this.lastYield = now
        await new Promise(setImmediate)
      }
    }
  }
}

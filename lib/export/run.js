// The export loop: tiles issued in grid order with up to `concurrency` reads in flight, each written as it arrives,
// and a checkpoint (commit + progress record) every BATCH tiles or CHECKPOINT_MS. A tile whose read fails is counted
// and left for a later run; a write that fails stops the export (the output cannot be trusted to take more). A tile
// read incomplete (read.js IncompleteTile: a remote source of a style could not be read) is not written: it is read
// again after the others, up to RETRIES times a pause apart (the source may be down for a moment), then left for a
// later run as a failed one is.
import { IncompleteTile } from './read.js'

export const RETRIES = 3
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
   * reached } from the output), `onFailure(z, x, y, err)` for each tile that failed, `onIncomplete(z, x, y, err)` for
   * each tile read incomplete; before each retry of those, a pause of `retryPauseMs` and `askAgain()`.
   */
  constructor ({ grid, read, output, concurrency, start, onFailure, onIncomplete = () => {}, retryPauseMs = 0, askAgain = () => {} }) {
    this.grid = grid
    this.read = read
    this.output = output
    this.concurrency = concurrency
    this.onFailure = onFailure
    this.onIncomplete = onIncomplete
    this.retryPauseMs = retryPauseMs
    this.askAgain = askAgain
    this.total = grid.total
    this.startDone = start.done
    this.reached = start.reached // tiles below it may be in the output already: looked for before being read
    this.next = start.done
    this.inFlight = new Set() // indexes being read or written
    this.lowestFailed = Infinity
    this.incomplete = new Map() // index → what it lacks (IncompleteTile's `missing`): read incomplete, not written (yet)
    this.lowestIncomplete = Infinity
    this.retries = 0 // rounds of reading the incomplete tiles again
    this.wakeUp = null // ends a pause between those rounds (stop())
    this.stats = { written: 0, absent: 0, failed: 0, present: 0, incomplete: 0 }
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
    return s.written + s.absent + s.failed + s.present + s.incomplete
  }

  /**
   * The index below which every tile is done: nothing in flight below it, and no failure or incomplete tile (a later
   * run retries it).
   */
  get done () {
    let done = Math.min(this.next, this.lowestFailed, this.lowestIncomplete)
    for (const index of this.inFlight) if (index < done) done = index
    return done
  }

  /** Runs to the end, or until stop(); resolves when every read issued is finished. */
  start () {
    this.finished = this.run()
    return this.finished
  }

  /** The grid's tiles, then the incomplete ones again, up to RETRIES times while some are. */
  async run () {
    await this.lanes(() => (this.next < this.total ? this.next++ : undefined), false)
    while (this.incomplete.size > 0 && this.retries < RETRIES && !this.stopping) {
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, this.retryPauseMs)
        this.wakeUp = () => { clearTimeout(timer); resolve() }
      })
      this.wakeUp = null
      if (this.stopping) break
      this.retries++
      this.askAgain()
      const again = [...this.incomplete.keys()].sort((a, b) => a - b)
      let i = 0
      await this.lanes(() => (i < again.length ? again[i++] : undefined), true)
      this.lowestIncomplete = Infinity
      for (const index of this.incomplete.keys()) if (index < this.lowestIncomplete) this.lowestIncomplete = index
      this.checkpoint()
    }
  }

  /** Reads the tiles `take()` gives (undefined: no more) with `concurrency` reads at once. */
  lanes (take, retrying) {
    return Promise.all(Array.from({ length: this.concurrency }, () => this.lane(take, retrying)))
  }

  /** Issues no more reads; those in flight finish. */
  stop () {
    this.stopping = true
    this.wakeUp?.()
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

  /** Reads and writes the tiles `take()` gives; `retrying`: tiles read incomplete before, known not to be written. */
  async lane (take, retrying) {
    const { grid, output, stats, inFlight, incomplete } = this
    let index
    while (!this.stopping && (index = take()) !== undefined) {
      const [z, x, y] = grid.at(index)
      if (!retrying && index < this.reached && output.has(z, x, y)) {
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
          if (err instanceof IncompleteTile) {
            if (!incomplete.has(index)) stats.incomplete++
            incomplete.set(index, err.missing)
            if (index < this.lowestIncomplete) this.lowestIncomplete = index
            this.onIncomplete(z, x, y, err)
          } else {
            if (incomplete.delete(index)) stats.incomplete--
            stats.failed++
            if (index < this.lowestFailed) this.lowestFailed = index
            this.onFailure(z, x, y, err)
          }
          bytes = undefined
        }
        if (this.abandoned) return
        if (bytes !== undefined && incomplete.delete(index)) stats.incomplete-- // complete this time
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

// A bound on how many of some slow things (opens, bucket listings) run at once: a store that does not answer makes its
// own wait out their timeout, and those behind them start meanwhile.

/** Runs at most `limit` of the functions given at once; the others wait, in the order given. */
export class Slots {
  constructor (limit) {
    this.free = limit
    this.waiting = []
  }

  async run (fn) {
    if (this.free > 0) this.free--
    else await new Promise((resolve) => this.waiting.push(resolve))
    try {
      return await fn()
    } finally {
      const next = this.waiting.shift()
      if (next === undefined) this.free++
      else next()
    }
  }
}

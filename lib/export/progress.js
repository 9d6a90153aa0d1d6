// Telling a person how an export goes, on stderr: on a terminal one line redrawn in place (a bar, tiles done of all,
// per cent, tiles/s, time left, failures); in a log (CI, nohup, pm2) a plain line every few seconds instead, since
// redrawn lines would pile up there; and one summary line at the end either way.
const REDRAW_MS = 250
const LINE_MS = 5000
const BAR = 24

export class ProgressReport {
  constructor (run, { stream = process.stderr, label }) {
    this.run = run
    this.stream = stream
    this.label = label
    this.tty = stream.isTTY === true
    this.drawn = false
    this.timer = null
  }

  start () {
    this.timer = setInterval(() => (this.tty ? this.redraw() : this.stream.write(this.line() + '\n')), this.tty ? REDRAW_MS : LINE_MS)
    this.timer.unref()
    if (this.tty) this.redraw()
  }

  /** A message between progress lines (a failure, the signal received). */
  note (text) {
    if (this.drawn) this.stream.write('\r\x1b[K')
    this.stream.write(text + '\n')
    this.drawn = false
    if (this.tty && this.timer !== null) this.redraw()
  }

  stop () {
    clearInterval(this.timer)
    this.timer = null
    if (this.tty) {
      this.redraw()
      this.stream.write('\n')
      this.drawn = false
    }
  }

  redraw () {
    const done = this.run.startDone + this.run.processed
    const filled = Math.round((BAR * done) / Math.max(1, this.run.total))
    this.stream.write(`\r[${'#'.repeat(filled)}${'-'.repeat(BAR - filled)}] ${this.line()}\x1b[K`)
    this.drawn = true
  }

  /** '1200/5000 tiles 24.0% · 310 tiles/s · eta 12s · 0 failed' */
  line () {
    const { run } = this
    const done = run.startDone + run.processed
    const seconds = (performance.now() - run.startedAt) / 1000
    const rate = run.processed / Math.max(seconds, 1e-3)
    const left = run.total - done
    const eta = rate > 0 ? duration(left / rate) : '?'
    const percent = run.total === 0 ? 100 : (100 * done) / run.total
    const incomplete = run.stats.incomplete > 0 ? ` · ${run.stats.incomplete} incomplete` : ''
    return `${this.label}: ${done}/${run.total} tiles ${percent.toFixed(1)}% · ${Math.round(rate)} tiles/s · eta ${eta} · ${run.stats.failed} failed${incomplete}`
  }
}

/** The closing line: what this run did and how fast. */
export function summaryLine (run, { outcome, out }) {
  const s = run.stats
  const seconds = (performance.now() - run.startedAt) / 1000
  const rate = run.processed / Math.max(seconds, 1e-3)
  const parts = [`${s.written} tiles written`, `${s.absent} absent`, `${s.failed} failed`]
  if (s.incomplete > 0) parts.push(`${s.incomplete} left out incomplete`)
  if (s.present > 0) parts.push(`${s.present} already there`)
  return `export ${outcome}: ${parts.join(', ')} in ${seconds.toFixed(1)} s (${Math.round(rate)} tiles/s) → ${out}`
}

function duration (seconds) {
  if (!Number.isFinite(seconds)) return '?'
  if (seconds < 60) return `${Math.ceil(seconds)}s`
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m${String(Math.round(seconds % 60)).padStart(2, '0')}s`
  return `${Math.floor(seconds / 3600)}h${String(Math.round((seconds % 3600) / 60)).padStart(2, '0')}m`
}

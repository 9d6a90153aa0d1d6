// `tile-cannon export …`: the tiles of one set (or a style, rendered) over a zoom range and an area, written to an
// MBTiles file or a folder of z/x/y files. The app is built as for serving (every path, flag and config file works)
// and each tile is read through the routes' own path (read.js), so an export holds exactly what the server answers.
// Exit codes: 0 done, every tile the set has written; 1 tiles missing from the output that should be there (a tile
// whose read failed, or one left out incomplete: a style's remote source could not be read; the rest is written and
// the next run retries them), or the output could not be written, or the set cannot be read, 2 a usage mistake or an
// output that is another job's, 130 interrupted.
import { setTimeout as delay } from 'node:timers/promises'
import { buildApp } from '../app.js'
import { makeLogger } from '../logging.js'
import { ConfigError, loadConfig } from '../config.js'
import { ExportError, UsageError } from './errors.js'
import { EXPORT_FLAGS, parseExportOptions } from './options.js'
import { exportTarget } from './target.js'
import { planJob } from './job.js'
import { TileGrid } from './grid.js'
import { tileReader } from './read.js'
import { describeExport } from './metadata.js'
import { MbtilesOutput, isMbtilesPath, recordedJob as recordedMbtilesJob } from './mbtiles-output.js'
import { FolderOutput, recordedJob as recordedFolderJob } from './folder-output.js'
import { ExportRun, RETRIES } from './run.js'
import { ProgressReport, summaryLine } from './progress.js'

export const EXPORT_USAGE = `Usage: tile-cannon export [path|url ...] [serving options] --set ID --zooms Z[-Z] --out FILE.mbtiles|DIR [options]

Writes the tiles of one set (or of a style, rendered to raster tiles) to an MBTiles file or to a folder of
{z}/{x}/{y}.{ext} files with a tiles.json, exactly as the server would answer them. An output left unfinished
(Ctrl-C, a crash) is continued by running the same command again.

  --set ID            the set (as in its URL) or style to export
  --zooms A-B | Z     zoom levels, 0 to 30 (narrowed to those the set serves)
  --out PATH          FILE.mbtiles, or a folder (DIR/, or a name without a tile format's extension:
                      .pmtiles, .gpkg, .zip, … are refused, as export does not write them)
  --bbox W,S,E,N      area in degrees (default: the set's bounds)
  --concurrency N     tiles read at once (default 4 for PostGIS, COG and styles, 16 for files)
  --encoding E        gzip|identity for vector tiles (default gzip, as MBTiles and tippecanoe store them);
                      images are stored as they are
  --format F          png|webp|jpg for sets that make raster tiles (COG, styles; default their first, png)
  --scale N           1 or 2 (@2x tiles of sets that make them; default 1)
  --force             start over when the output holds another export (or is not one)
  --log-level LEVEL   default warn for export
  -h, --help          this help

Every path and serving option of \`tile-cannon --help\` works here too (folders, files, postgres:// URLs, --config).
Exit codes: 0 done; 1 tiles missing from the output (failed, or left out incomplete: the rest is written, and the same
command retries them), the output not writable or the set unreadable; 2 a usage mistake; 130 interrupted.
Examples:
  tile-cannon export postgres://user@host/db --set roads --zooms 0-14 --out roads.mbtiles
  tile-cannon export ./tiles --set city --zooms 10-16 --bbox 8.45,47.32,8.62,47.43 --out city/ --format webp`

const GRACE_MS = 10_000 // after a signal, how long the tiles in flight may take before they are dropped
const SHOWN_FAILURES = 5

/** argv (the arguments after `export`) → exit code. */
export async function main (argv) {
  const say = (text) => process.stderr.write(`tile-cannon export: ${text}\n`)
  let config, options
  try {
    // Export is a batch job: no folder watching, no demo set standing in for a mistyped path, no /metrics, no writing
    // through to a tile directory; warnings only, unless a log level is asked for.
    const logLevelGiven = argv.some((a) => a === '--log-level' || a.startsWith('--log-level=')) || Boolean(process.env.TILE_CANNON_LOG_LEVEL)
    // Nor a tile cache or a shared one: each tile is read once (a cache only costs memory and time here).
    const overrides = { watch: false, demo: false, metrics: { enabled: false }, tileDir: { dir: null }, cacheMB: 0, cache: { redis: null }, ...(logLevelGiven ? {} : { logLevel: 'warn' }) }
    const loaded = loadConfig({ argv: bboxJoined(argv), env: process.env, extraFlags: EXPORT_FLAGS, overrides })
    if (loaded.help) {
      process.stdout.write(EXPORT_USAGE + '\n')
      return 0
    }
    config = loaded.config
    options = parseExportOptions(loaded.extra)
  } catch (err) {
    if (!(err instanceof ConfigError) && !(err instanceof UsageError)) throw err
    say(`${err.message} (see tile-cannon export --help)`) // one line, as the server's: the usage is 30
    return 2
  }

  let app
  try {
    app = await buildApp(config, { loggerInstance: makeLogger(config, process.stderr) }) // as its progress: stdout stays clean
  } catch (err) {
    // A setting that cannot be used as it is (no path given exists) is a usage mistake, as when serving.
    say(err instanceof ConfigError ? err.message : `cannot start: ${err.message}`)
    return err instanceof ConfigError ? 2 : 1
  }
  try {
    return await exportTiles(app, options, say)
  } finally {
    await app.close()
  }
}

async function exportTiles (app, options, say) {
  let target, job, grid
  try {
    target = exportTarget(app, options.set)
    job = planJob(target, options, say)
    // No --bbox: the set's bounds, which a database may estimate differently from one run to the next (ANALYZE). A run
    // continuing an export of the same set keeps the box it recorded.
    const recorded = options.bbox === null && !options.force ? (isMbtilesPath(options.out) ? recordedMbtilesJob : recordedFolderJob)(options.out) : null
    if (recorded?.set === job.set && Array.isArray(recorded.bbox) && recorded.bbox.length === 4 && recorded.bbox.every(Number.isFinite)) job.bbox = recorded.bbox
    grid = new TileGrid(job.zooms, job.bbox)
  } catch (err) {
    if (err instanceof UsageError) {
      say(err.message)
      return 2
    }
    if (err instanceof ExportError) {
      say(err.message)
      return 1
    }
    throw err
  }

  const out = options.out
  let output
  try {
    const Output = isMbtilesPath(out) ? MbtilesOutput : FolderOutput
    output = new Output(out, { job, total: grid.total, description: describeExport(target.source.tilejson, job), force: options.force })
  } catch (err) {
    if (err instanceof UsageError) {
      say(err.message)
      return 2
    }
    say(`cannot write ${out}: ${err.message}`)
    return 1
  }

  const what = `'${target.id}' z${job.zooms[0]}-${job.zooms[1]}${job.scale === 1 ? '' : ` @${job.scale}x`} as ${job.encoding === 'gzip' ? 'gzip ' : ''}${job.format}`
  if (output.resumed) {
    if (output.start.done >= grid.total) {
      say(`${out} already holds the whole export of ${what} (${grid.total} tiles): nothing to do`)
      output.close()
      return 0
    }
    say(`resuming ${out}: ${output.start.done} of ${grid.total} tiles of ${what} were done`)
  } else {
    say(`exporting ${what}, ${grid.total} tiles (${grid.describe()}) → ${out}`)
  }

  let failuresShown = 0
  let incompleteShown = false
  const run = new ExportRun({
    grid,
    read: tileReader(app, target, job),
    output,
    concurrency: options.concurrency ?? (target.makes ? 4 : 16),
    start: output.start,
    onFailure (z, x, y, err) {
      if (failuresShown < SHOWN_FAILURES) progress.note(`tile ${z}/${x}/${y} failed: ${reasonOf(err)}`)
      else if (failuresShown === SHOWN_FAILURES) progress.note('(further failures are counted, not shown)')
      failuresShown++
    },
    onIncomplete (z, x, y, err) {
      if (incompleteShown) return // (the progress line counts them)
      incompleteShown = true
      progress.note(`tile ${z}/${x}/${y} ${err.message}: not written; such tiles are read again at the end`)
    },
    retryPauseMs: target.retryPauseMs,
    askAgain () {
      progress.note(`reading the ${run.incomplete.size} incomplete tiles again (${run.retries} of ${RETRIES})`)
      target.askAgain?.()
    },
  })
  const progress = new ProgressReport(run, { label: target.id })

  // Ctrl-C: no more reads; those in flight finish (or are dropped after GRACE_MS); what is written is committed with
  // the progress record; the output closes. A second signal does the saving at once and exits.
  let signalled = null
  let wake
  const interrupted = new Promise((resolve) => { wake = resolve })
  const onSignal = (signal) => {
    if (signalled !== null) {
      run.abandon()
      if (run.fatal === null) run.checkpoint()
      output.close()
      process.stderr.write(`\n${signal} again: progress saved, stopping now\n`)
      process.exit(130)
    }
    signalled = signal
    run.stop()
    progress.note(`${signal}: finishing the ${run.inFlight.size} tiles in flight and saving progress (${signal} again stops at once)`)
    wake()
  }
  process.on('SIGINT', onSignal)
  process.on('SIGTERM', onSignal)
  progress.start()
  try {
    const finished = run.start()
    finished.catch(() => {}) // (a lane failing after the grace period, when nothing waits for it any more)
    await Promise.race([finished, interrupted.then(() => Promise.race([finished, delay(GRACE_MS, undefined, { ref: false })]))])
  } catch (err) {
    run.fail(err) // a bug or an output that failed outside a write (looking a tile up): the run cannot go on
  } finally {
    run.abandon() // reads still in flight after the grace period write nothing
    progress.stop()
    process.off('SIGINT', onSignal)
    process.off('SIGTERM', onSignal)
  }
  if (run.fatal === null) run.checkpoint() // after a failed write, the record stays at its last checkpoint
  let held
  try {
    held = run.fatal === null ? output.count() : undefined
  } catch {} // (only said in the summary)
  output.close()

  const done = run.done
  const outcome = run.fatal !== null ? 'failed' : done >= grid.total ? 'complete' : signalled !== null ? 'interrupted' : 'incomplete'
  say(summaryLine(run, { outcome, out }) + (held === undefined ? '' : `; ${out} holds ${held} tiles`))
  if (run.stats.failed > 0) say(`${run.stats.failed} tiles failed: run the same command again to retry them`)
  if (run.stats.incomplete > 0) say(incompleteLine(run))
  if (run.fatal !== null) {
    say(`writing ${out} failed: ${reasonOf(run.fatal)}; what was committed before stays, and a run of the same command continues from there`)
    return 1
  }
  if (signalled !== null && done < grid.total) {
    say(`stopped at tile ${done} of ${grid.total}: run the same command again to continue`)
    return 130
  }
  // Tiles failed or left out incomplete: the output lacks tiles the set has, which a script (CI) must be told; what
  // could be written is, and a re-run fills the rest.
  return run.stats.failed + run.stats.incomplete > 0 ? 1 : 0
}

/** What the tiles left out incomplete lack (each remote host once, as the log names it: no user, password or query). */
function incompleteLine (run) {
  const missing = new Set()
  for (const lacks of run.incomplete.values()) if (lacks !== null) missing.add(`${lacks.host} (${lacks.reason})`)
  const what = missing.size === 0 ? 'a remote source that could not be read' : `remote source ${[...missing].join(', ')}, which could not be read`
  const tries = run.retries === 0 ? '' : ` (read again ${run.retries} times)`
  return `${run.stats.incomplete} tiles left out: drawn without ${what}${tries}; run the same command again to fill them`
}

/**
 * `--bbox -109.8,38.3,…` as `--bbox=-109.8,38.3,…`: a box west of Greenwich starts with a minus, which the argument
 * parser would otherwise refuse as the start of another option.
 */
function bboxJoined (argv) {
  const out = []
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--bbox' && /^-[\d.]/.test(argv[i + 1] ?? '')) out.push(`--bbox=${argv[++i]}`)
    else out.push(argv[i])
  }
  return out
}

/** An error's message with its cause's (the pipeline wraps a backend's failure in one naming the set). */
function reasonOf (err) {
  const message = String(err?.message ?? err)
  const cause = err?.cause?.message
  return cause && !message.includes(cause) ? `${message}: ${cause}` : message
}

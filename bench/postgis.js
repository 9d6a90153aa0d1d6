#!/usr/bin/env node
// Reproduces the PostGIS table of bench/README.md with nothing installed but PostgreSQL + PostGIS: starts a throwaway
// cluster (or uses DATABASE_URL), loads the 50,000 Zurich points, and runs bench/run.js on them with both ceilings.
//   node bench/postgis.js [--db-cpus 1 --bench-cpus 0] [extra bench/run.js options, e.g. --duration 8]
// --db-cpus pins the throwaway cluster to those cores and --bench-cpus the bench (its client, tile-cannon and the
// floors) to the others (taskset lists), as when the database runs on its own machine: the ceiling is then the
// database's, and the ratio says whether the server keeps it busy. Without them everything shares every core.
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { startPostgis } from '../test/helpers/postgres.js'
import { loadZurichPoints } from './zurich-points.js'
import { UsageError, cpuOption, refuse } from './args.js'
import { parse } from './run.js'

const SCRIPT = 'bench/postgis.js'
const here = dirname(fileURLToPath(import.meta.url))
// Every point in every tile, as martin and the pg floor answer (tile-cannon's default is 10000 a tile: a z10 tile
// here holds up to about 17,000): the same work for every server.
const CONFIG = { postgres: { featureLimit: false } }
const RUN_ARGS = ['--format', 'postgres', '--set', 'zurich_points', '--zooms', '10-14', '--cache', 'on,off', '--pg-ceiling', '--markdown']

const USAGE = `Usage: node bench/postgis.js [--db-cpus LIST --bench-cpus LIST] [bench/run.js options]

Starts a throwaway PostgreSQL with PostGIS (or uses DATABASE_URL), loads the 50,000 Zurich points and runs
bench/run.js on them: ${RUN_ARGS.join(' ')},
every point of a tile (postgres.featureLimit false).

  --db-cpus LIST       pin the throwaway PostgreSQL to these cores (a taskset list, e.g. 1)
  --bench-cpus LIST    pin the bench (its client, tile-cannon and the floors) to these (e.g. 0)
  -h, --help

Every other option is bench/run.js's, checked before anything starts and passed on (--zooms and --cache replace the
above), e.g. --duration 8 --warmup 2 --header "Accept-Encoding: identity" (node bench/run.js --help lists them).
--data, --config, --set and --format are this script's to give.`

/** --db-cpus and --bench-cpus out of `args` (as `--x V` or `--x=V`); the rest are bench/run.js's, in their order. */
function splitArgs (args) {
  const own = {}
  const rest = []
  for (let i = 0; i < args.length; i++) {
    const m = /^--(db-cpus|bench-cpus)(?:=(.*))?$/.exec(args[i])
    if (m === null) {
      rest.push(args[i])
      continue
    }
    const value = m[2] ?? args[++i]
    if (value === undefined) throw new UsageError(`--${m[1]} wants a core list like 1 or 0,2-3`)
    own[m[1]] = value
  }
  return { dbCpus: cpuOption('db-cpus', own['db-cpus']), benchCpus: cpuOption('bench-cpus', own['bench-cpus']), rest }
}

const args = process.argv.slice(2)
if (args.includes('-h') || args.includes('--help')) {
  console.log(USAGE)
  process.exit(0)
}
let dbCpus, benchCpus, rest
try {
  ({ dbCpus, benchCpus, rest } = splitArgs(args))
  const extra = parse(rest)
  const ours = ['data', 'config', 'set', 'format'].filter((name) => [].concat(extra[name] ?? []).length > 0)
  if (ours.length) throw new UsageError(`${ours.map((name) => `--${name}`).join(', ')}: bench/postgis.js gives the data, config, set and format itself`)
  parse(['--data', 'postgres://127.0.0.1/zurich', '--config', 'config.json', ...RUN_ARGS, ...rest]) // the run's whole command line
} catch (err) {
  // bench/run.js's parse throws its own UsageErrors and parseArgs's errors (an unknown option): each is one line.
  refuse(SCRIPT, err.code?.startsWith('ERR_PARSE_ARGS') ? `${err.message} (see --help)` : err.message)
}
if (process.env.DATABASE_URL && dbCpus !== undefined) console.error(`${SCRIPT}: --db-cpus pins only the throwaway cluster; DATABASE_URL is used as it is`)

// What a run leaves is taken away however it ends: the database (or its database in DATABASE_URL's cluster) and the
// config's folder, at the end, on an error and on SIGINT/SIGTERM (passed on to bench/run.js, which stops its servers).
const starting = startPostgis({ cpus: dbCpus })
let configDir = null
let bench = null
let finishing = null
function finish (code) {
  finishing ??= (async () => {
    if (bench !== null && bench.exitCode === null && bench.signalCode === null) await once(bench, 'exit')
    const db = await starting.catch(() => null)
    await db?.stop().catch(() => {})
    if (configDir !== null) rmSync(configDir, { recursive: true, force: true })
    process.exit(code)
  })()
  return finishing
}
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    // Passed on, as one sent to this process alone would not reach run.js; once only, so that a further Ctrl-C (which
    // the terminal sends run.js itself) is not doubled.
    if (finishing === null) bench?.kill(signal)
    finish(128 + os.constants.signals[signal])
  })
}

try {
  const db = await starting
  if (db === null) {
    console.error(`${SCRIPT}: PostgreSQL with PostGIS is not installed (Debian: postgresql postgresql-15-postgis-3) and DATABASE_URL is not set`)
    await finish(2)
  }
  configDir = mkdtempSync(join(os.tmpdir(), 'tc-pg-bench-'))
  const config = join(configDir, 'config.json')
  writeFileSync(config, JSON.stringify(CONFIG))
  await loadZurichPoints(db.url)
  if (finishing === null) {
    const argv = [process.execPath, join(here, 'run.js'), '--data', db.url, '--config', config, ...RUN_ARGS, ...rest]
    if (benchCpus !== undefined) argv.unshift('taskset', '-c', benchCpus)
    bench = spawn(argv[0], argv.slice(1), { stdio: 'inherit' })
    const [code] = await once(bench, 'exit')
    await finish(code ?? 1)
  }
} catch (err) {
  // Stopped by a signal while starting or loading: the database went away under it, nothing to say.
  if (finishing === null) console.error(`${SCRIPT}: ${err.message}`)
  await finish(1)
}

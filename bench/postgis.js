#!/usr/bin/env node
// Reproduces the PostGIS table of bench/README.md with nothing installed but PostgreSQL + PostGIS: starts a throwaway
// cluster (or uses DATABASE_URL), loads the 50,000 Zurich points, and runs bench/run.js on them with both ceilings.
//   node bench/postgis.js [--db-cpus 1 --bench-cpus 0] [extra bench/run.js options, e.g. --duration 8]
// --db-cpus pins the throwaway cluster to those cores and --bench-cpus the bench (its client, tile-cannon and the
// floors) to the others (taskset lists), as when the database runs on its own machine: the ceiling is then the
// database's, and the ratio says whether the server keeps it busy. Without them everything shares every core.
import { spawnSync } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { startPostgis } from '../test/helpers/postgres.js'
import { loadZurichPoints } from './zurich-points.js'

const here = dirname(fileURLToPath(import.meta.url))
const args = process.argv.slice(2)
const take = (flag) => {
  const i = args.indexOf(flag)
  return i === -1 ? undefined : args.splice(i, 2)[1]
}
const dbCpus = take('--db-cpus')
const benchCpus = take('--bench-cpus')
if (process.env.DATABASE_URL && dbCpus !== undefined) console.error('bench/postgis.js: --db-cpus pins only the throwaway cluster; DATABASE_URL is used as it is')
const db = await startPostgis({ cpus: dbCpus })
if (db === null) {
  console.error('bench/postgis.js: PostgreSQL with PostGIS is not installed (Debian: postgresql postgresql-15-postgis-3) and DATABASE_URL is not set')
  process.exit(2)
}
let status = 1
try {
  await loadZurichPoints(db.url)
  // Every point in every tile, as martin and the pg floor answer (tile-cannon's default is 10000 a tile: a z10 tile
  // here holds up to about 17,000): the same work for every server.
  const config = join(mkdtempSync(join(tmpdir(), 'tc-pg-bench-')), 'config.json')
  writeFileSync(config, JSON.stringify({ postgres: { featureLimit: false } }))
  const bench = [process.execPath, join(here, 'run.js'), '--data', db.url, '--config', config, '--format', 'postgres', '--set', 'zurich_points', '--zooms', '10-14', '--cache', 'on,off', '--pg-ceiling', '--markdown', ...args]
  if (benchCpus !== undefined) bench.unshift('taskset', '-c', benchCpus)
  status = spawnSync(bench[0], bench.slice(1), { stdio: 'inherit' }).status ?? 1
} finally {
  await db.stop()
}
process.exit(status)

#!/usr/bin/env node
// Reproduces the PostGIS table of bench/README.md with nothing installed but PostgreSQL + PostGIS: starts a throwaway
// cluster (or uses DATABASE_URL), loads the 50,000 Zurich points, and runs bench/run.js on them with both ceilings.
//   node bench/postgis.js [extra bench/run.js options, e.g. --duration 8 --header "Accept-Encoding: identity"]
import { spawnSync } from 'node:child_process'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { startPostgis } from '../test/helpers/postgres.js'
import { loadZurichPoints } from './zurich-points.js'

const here = dirname(fileURLToPath(import.meta.url))
const db = await startPostgis()
if (db === null) {
  console.error('bench/postgis.js: PostgreSQL with PostGIS is not installed (Debian: postgresql postgresql-15-postgis-3) and DATABASE_URL is not set')
  process.exit(2)
}
let status = 1
try {
  await loadZurichPoints(db.url)
  const args = ['--data', db.url, '--format', 'postgres', '--set', 'zurich_points', '--zooms', '10-14', '--cache', 'on,off', '--pg-ceiling', '--markdown', ...process.argv.slice(2)]
  status = spawnSync(process.execPath, [join(here, 'run.js'), ...args], { stdio: 'inherit' }).status ?? 1
} finally {
  await db.stop()
}
process.exit(status)

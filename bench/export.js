#!/usr/bin/env node
// How fast `tile-cannon export` writes a city at z0-14, run as users run it (a child process per export, to MBTiles):
// (a) a PostGIS table, the 50,000 Zurich points (bench/zurich-points.js) over their box, on a throwaway cluster (or
// DATABASE_URL); (b) a COG, the shared fixture image_web_z5_z11.tif (Web Mercator imagery, z5-11; z12-14 upsampled
// from it) over a box of the same size round Moab, Utah. Prints each command, the tiles (written, absent, failed),
// the export's own tiles/s (its summary line: reading and writing, not start-up) and the wall time with start-up,
// and the machine's load before and after.
//   node bench/export.js [--zooms 0-14] [--concurrency 4[,8,…]] [--cases postgis,cog] [--keep DIR]
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import os from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { fileURLToPath } from 'node:url'
import { FIXTURES, HAVE_FIXTURES } from '../test/helpers/app.js'
import { tempDir } from '../test/helpers/data.js'
import { startPostgis } from '../test/helpers/postgres.js'
import { loadZurichPoints } from './zurich-points.js'

const SERVER = fileURLToPath(new URL('../server.js', import.meta.url))
const { values } = parseArgs({
  options: {
    zooms: { type: 'string', default: '0-14' },
    concurrency: { type: 'string' }, // a list: each case is run once per value (default: the export's own default)
    cases: { type: 'string', default: 'postgis,cog' },
    keep: { type: 'string' }, // write the outputs here (default: a temporary folder, removed)
  },
})
const cases = new Set(values.cases.split(','))
const concurrencies = values.concurrency === undefined ? [null] : values.concurrency.split(',').map(Number)
const dir = values.keep ?? tempDir()
const load = () => os.loadavg().map((l) => l.toFixed(2)).join(' ')

/** One export: { command, written, absent, failed, rate (the export's own), wall (s, with start-up) }. */
async function runExport (args) {
  const command = ['node', 'server.js', 'export', ...args]
  const started = performance.now()
  const child = spawn(process.execPath, [SERVER, 'export', ...args], { stdio: ['ignore', 'ignore', 'pipe'] })
  let stderr = ''
  child.stderr.on('data', (d) => { stderr += d })
  const [code] = await once(child, 'exit')
  const wall = (performance.now() - started) / 1000
  const m = /export complete: (\d+) tiles written, (\d+) absent, (\d+) failed in ([\d.]+) s \((\d+) tiles\/s\)/.exec(stderr)
  if (code !== 0 || m === null) throw new Error(`${command.join(' ')} exited ${code}:\n${stderr}`)
  return { command: command.join(' '), written: Number(m[1]), absent: Number(m[2]), failed: Number(m[3]), seconds: Number(m[4]), rate: Number(m[5]), wall }
}

const rows = []
const loadBefore = load()
let db = null
try {
  if (cases.has('postgis')) {
    db = await startPostgis()
    if (db === null) console.error('bench/export.js: PostgreSQL with PostGIS is not installed and DATABASE_URL is not set: no PostGIS case')
    else await loadZurichPoints(db.url)
  }
  const plan = []
  if (db !== null) plan.push({ name: 'PostGIS zurich_points', args: [db.url, '--set', 'zurich_points', '--bbox', '8.24,47.17,8.84,47.57'] })
  if (cases.has('cog')) {
    if (HAVE_FIXTURES) plan.push({ name: 'COG image_web_z5_z11', args: [join(FIXTURES, 'cog', 'image_web_z5_z11.tif'), '--set', 'image_web_z5_z11', '--bbox', '-109.85,38.37,-109.25,38.77'] })
    else console.error('bench/export.js: the shared fixtures (../shared/fixtures) are not present: no COG case')
  }
  for (const { name, args } of plan) {
    for (const concurrency of concurrencies) {
      const out = join(dir, `${name.replace(/\W+/g, '_')}-${concurrency ?? 'default'}.mbtiles`)
      const extra = concurrency === null ? [] : ['--concurrency', String(concurrency)]
      const result = await runExport([...args, '--zooms', values.zooms, '--out', out, '--force', ...extra])
      console.log(`$ ${result.command.replace(/postgres:\/\/[^ ]+/, 'postgres://…')}`)
      console.log(`  ${result.written} written, ${result.absent} absent, ${result.failed} failed; ${result.rate} tiles/s (export), ${result.wall.toFixed(1)} s with start-up`)
      rows.push({ name, concurrency: concurrency ?? 'default', ...result })
    }
  }
} finally {
  await db?.stop()
}

console.log('\n| source | zooms | concurrency | tiles (written + absent) | export tiles/s | wall s (with start-up) |')
console.log('|---|---|---|---|---|---|')
for (const r of rows) console.log(`| ${r.name} | ${values.zooms} | ${r.concurrency} | ${r.written + r.absent} (${r.written} + ${r.absent}) | ${r.rate} | ${r.wall.toFixed(1)} |`)
console.log(`\nmachine: ${os.cpus()[0]?.model ?? 'unknown'}, ${os.cpus().length} cores, load before ${loadBefore}, after ${load()}, Node ${process.version}`)

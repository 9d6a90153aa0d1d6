// bench/postgis.js: --help and a mistake in the command line are answered at once (one line, exit 2), before a
// database is started, and a run leaves no folder and no database behind, however it ends.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import os from 'node:os'
import { readdirSync } from 'node:fs'
import { needs } from './helpers/app.js'
import { HAVE_POSTGRES, NO_POSTGRES, assertRefused, envIn, leftovers, processesUsing, runIn, script, tmpDir } from './helpers/bench-scripts.js'

test('bench/postgis.js: --help is its own usage, at once; a bad option is one line and exit 2; no database started', (t) => {
  const tmp = tmpDir(t)
  const help = runIn(tmp, 'postgis.js', ['--help'])
  assert.equal(help.status, 0, help.stderr)
  assert.equal(help.stderr, '')
  // Its own usage with its own options, and run.js's named as what they are (not run.js's usage, after a database).
  assert.match(help.stdout, /^Usage: node bench\/postgis\.js/)
  assert.match(help.stdout, /--db-cpus LIST/)
  assert.match(help.stdout, /--bench-cpus LIST/)
  assert.match(help.stdout, /Every other option is bench\/run\.js's/)
  assertRefused(assert, tmp, 'postgis.js', [
    [['--duration', 'abc'], 'bench/postgis.js: --duration must be a number ≥ 0.1'],
    [['--bogus'], "bench/postgis.js: Unknown option '--bogus' (see --help)"],
    [['--db-cpus', '99'], `bench/postgis.js: --db-cpus 99: this machine has cores 0-${os.cpus().length - 1}`],
    [['--bench-cpus'], 'bench/postgis.js: --bench-cpus wants a core list like 1 or 0,2-3'],
    [['--data', 'postgres://elsewhere/db'], 'bench/postgis.js: --data: bench/postgis.js gives the data, config, set and format itself'],
  ])
  // No throwaway cluster (its folder is made in TMPDIR), no config folder.
  assert.deepEqual(readdirSync(tmp), [])
})

test('bench/postgis.js leaves no folder and no database behind: at the end of a run that failed, and on SIGTERM', async (t) => {
  if (!needs(t, HAVE_POSTGRES, NO_POSTGRES)) return
  const tmp = tmpDir(t)
  // run.js finds no tile at z30 once the database, the config and the servers are up: exit 1, its one line.
  const failed = runIn(tmp, 'postgis.js', ['--zooms', '30', '--duration', '0.5'], 120_000)
  assert.equal(failed.status, 1, failed.stderr)
  assert.match(failed.stderr, /bench: zurich_points has no tiles at z30 \(within its bounds\): pick other --zooms\n$/)
  assert.deepEqual(leftovers(tmp), [])

  // SIGTERM to bench/postgis.js alone (as a service manager or `kill` sends it) while run.js measures.
  const child = spawn(process.execPath, [script('postgis.js'), '--zooms', '10', '--cache', 'off', '--duration', '30', '--warmup', '0', '--tiles', '5', '--connections', '2'],
    { env: envIn(tmp), stdio: ['ignore', 'ignore', 'pipe'] })
  let stderr = ''
  const measuring = new Promise((resolve) => child.stderr.on('data', (d) => {
    stderr += d
    if (/round 1 zurich_points z10/.test(stderr)) resolve()
  }))
  await Promise.race([measuring, once(child, 'exit')])
  assert.equal(child.exitCode, null, stderr)
  assert.ok(leftovers(tmp).some((n) => n.startsWith('tc-pg-bench-')), 'the config folder is there while it runs')
  child.kill('SIGTERM')
  const [code] = await once(child, 'exit')
  assert.equal(code, 143, stderr)
  // The cluster's folder and the config's are gone (bench/run.js's own folder is its own business).
  assert.deepEqual(leftovers(tmp).filter((n) => !n.startsWith('tile-cannon-bench-')), [])
  // The postmaster, bench/run.js and its servers (each names a file in tmp on its command line) are gone.
  const deadline = Date.now() + 10_000
  while (processesUsing(tmp).length && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100))
  assert.deepEqual(processesUsing(tmp), [])
})

// bench/features.js: every option checked before a database is started (one line, exit 2, an unknown flag refused),
// too few rows for a full page said as such, and a run whose answers failed says which and exits 1.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { readFileSync, readdirSync } from 'node:fs'
import { needs } from './helpers/app.js'
import { startPostgis } from './helpers/postgres.js'
import { HAVE_POSTGRES, NO_POSTGRES, assertRefused, envIn, leftovers, processesUsing, runIn, script, tmpDir } from './helpers/bench-scripts.js'

test('bench/features.js: --help at once; a bad or unknown option is one line and exit 2; no database started', (t) => {
  const tmp = tmpDir(t)
  const help = runIn(tmp, 'features.js', ['-h'])
  assert.equal(help.status, 0, help.stderr)
  assert.match(help.stdout, /^Usage: node bench\/features\.js/)
  assertRefused(assert, tmp, 'features.js', [
    [['--duration', 'abc'], "bench/features.js: --duration must be a number > 0, not 'abc'"],
    [['--connections', '4,x'], "bench/features.js: --connections must be a whole number ≥ 1 each, comma-separated, not '4,x'"],
    [['--points', '1e3x'], "bench/features.js: --points must be a whole number ≥ 1, not '1e3x'"],
    [['--lines', '0'], "bench/features.js: --lines must be a whole number ≥ 1, not '0'"],
    [['--order', 'fast'], "bench/features.js: --order takes key, none or both (key,none), not 'fast'"],
    [['--layout', 'sorted'], "bench/features.js: --layout is random or clustered, not 'sorted'"],
    [['--bogus', '1'], "bench/features.js: Unknown option '--bogus' (see --help)"],
    [['--duration'], "bench/features.js: Option '--duration <value>' argument missing (see --help)"],
  ])
  assert.deepEqual(readdirSync(tmp), [])
})

test('bench/features.js: too few rows for a full page in any box is said, exit 2, and nothing is measured', (t) => {
  if (!needs(t, HAVE_POSTGRES, NO_POSTGRES)) return
  const tmp = tmpDir(t)
  // 1,000 rows around Zurich: no city-viewport box holds 200 of them.
  const few = runIn(tmp, 'features.js', ['--points', '1000', '--lines', '1000', '--duration', '0.5', '--connections', '2', '--order', 'key'], 120_000)
  assert.equal(few.status, 2, few.stderr)
  assert.match(few.stderr, /\nbench\/features\.js: no box of osm_points or osm_lines holds a full page of 200 features with --points 1000 --lines 1000: give more rows \(the defaults are 200000 and 100000\)\n$/)
  assert.equal(few.stdout, '', 'no table of figures')
  assert.deepEqual(leftovers(tmp), [])
})

test('bench/features.js: a run whose answers failed (the database gone) says which and exits 1', async (t) => {
  if (!needs(t, HAVE_POSTGRES, NO_POSTGRES)) return
  const tmp = tmpDir(t)
  // The database goes away once the first level is measured: every answer after it is a 503 or a 500.
  const db = await startPostgis()
  t.after(() => db.stop())
  const child = spawn(process.execPath, [script('features.js'), '--points', '20000', '--lines', '20000', '--duration', '0.5', '--connections', '2', '--order', 'key'],
    { env: envIn(tmp, { DATABASE_URL: db.adminUrl }), stdio: ['ignore', 'pipe', 'pipe'] })
  let stderr = ''
  let stdout = ''
  child.stdout.on('data', (d) => { stdout += d })
  const measured = new Promise((resolve) => child.stderr.on('data', (d) => {
    stderr += d
    if (/osm_points c2 tile-cannon \(key order\): \d+ req\/s/.test(stderr)) resolve()
  }))
  await Promise.race([measured, once(child, 'exit')])
  await db.pause()
  const [code] = child.exitCode === null ? await once(child, 'exit') : [child.exitCode]
  assert.equal(code, 1, stderr)
  assert.match(stderr, /\nbench\/features\.js: some requests failed or were not answered 2xx, those figures are not comparable: [^\n]*tile-cannon \(key order\) osm_lines c2: [1-9]\d* non-2xx[^\n]*\n$/)
  assert.match(stdout, /\| osm_points \| 2 \|/, 'the figures are still printed')
  assert.doesNotMatch(stdout, /Infinity|NaN/)
  assert.deepEqual(leftovers(tmp), [])
})

test('bench/features.js killed: its ceiling server goes with it, not left running', async (t) => {
  if (!needs(t, HAVE_POSTGRES, NO_POSTGRES)) return
  const tmp = tmpDir(t)
  const db = await startPostgis()
  t.after(() => db.stop())
  const child = spawn(process.execPath, [script('features.js'), '--points', '20000', '--lines', '20000', '--duration', '5', '--connections', '2', '--order', 'key'],
    { env: envIn(tmp, { DATABASE_URL: db.adminUrl }), stdio: ['ignore', 'ignore', 'pipe'] })
  t.after(() => child.kill('SIGKILL'))
  // Killed while the ceiling is being measured (up and answering), once its first level is done.
  let stderr = ''
  const measuring = new Promise((resolve) => child.stderr.on('data', (d) => {
    stderr += d
    if (/ ceiling \(key order\): \d+ req\/s/.test(stderr)) resolve()
  }))
  await Promise.race([measuring, once(child, 'exit')])
  // The ceiling: a fork of features.js given the database's URL (the test's own database: no other run's).
  const server = new URL(db.adminUrl).host
  const ceilings = () => processesUsing('--ceiling').filter((pid) => {
    try { return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(server) } catch { return false } // (gone meanwhile)
  })
  const started = ceilings()
  assert.equal(started.length, 1, `the ceiling server is running: ${stderr}`)
  t.after(() => { for (const pid of started) try { process.kill(pid, 'SIGKILL') } catch {} })
  child.kill('SIGKILL')
  await once(child, 'exit')
  const gone = Date.now() + 5000
  while (ceilings().length > 0 && Date.now() < gone) await new Promise((resolve) => setTimeout(resolve, 50))
  assert.deepEqual(ceilings(), [], 'no ceiling server left running')
})


// Running the bench scripts that start their own PostgreSQL (bench/postgis.js, bench/features.js) in a TMPDIR of the
// test's own, where the throwaway cluster (test/helpers/postgres.js) and the scripts' folders are made: what a run
// leaves behind (folders, processes) is seen there, and taken away after the test whatever it left.
import { spawnSync } from 'node:child_process'
import { chmodSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs'
import os from 'node:os'
import { join } from 'node:path'
import { ROOT } from './app.js'

export const script = (name) => join(ROOT, 'bench', name)
export const HAVE_POSTGRES = existsSync('/usr/lib/postgresql') && readdirSync('/usr/lib/postgresql').some((v) => existsSync(join('/usr/lib/postgresql', v, 'bin', 'initdb')))

/** A TMPDIR of the test's own (the postgres user, under root, reaches its throwaway cluster's socket in it). */
export function tmpDir (t) {
  const dir = mkdtempSync(join(os.tmpdir(), 'tile-cannon-'))
  chmodSync(dir, 0o755)
  // Whatever a failing run left: its clusters stopped (SIGQUIT to the postmaster: an immediate stop), and any process
  // still running on a file in this folder (a bench/run.js and its servers) ended, so a failure leaves nothing either.
  t.after(() => {
    for (const name of readdirSync(dir).filter((n) => n.startsWith('tile-cannon-pg-'))) {
      try { process.kill(Number(readFileSync(join(dir, name, 'data', 'postmaster.pid'), 'utf8').split('\n')[0]), 'SIGQUIT') } catch {}
    }
    for (const pid of processesUsing(dir)) try { process.kill(pid, 'SIGKILL') } catch {}
    rmSync(dir, { recursive: true, force: true })
  })
  return dir
}

/** The processes whose command line names something in `dir`. */
export function processesUsing (dir) {
  const pids = []
  for (const name of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    try {
      if (readFileSync(`/proc/${name}/cmdline`, 'utf8').includes(dir)) pids.push(Number(name))
    } catch {}
  }
  return pids
}

/** What the scripts make in TMPDIR: the throwaway cluster's folder, postgis.js's config folder, features.js's. */
export const leftovers = (dir) => readdirSync(dir).filter((n) => /^(tile-cannon-pg-|tc-pg-bench-|tile-cannon-bench-)/.test(n))

/** The environment of a run in `tmp`: no DATABASE_URL, so a script that starts a database starts a throwaway one there. */
export function envIn (tmp, extra = {}) {
  const env = { ...process.env, TMPDIR: tmp, ...extra }
  if (!('DATABASE_URL' in extra)) delete env.DATABASE_URL
  return env
}

export const runIn = (tmp, name, args, timeout = 60_000) => spawnSync(process.execPath, [script(name), ...args], { encoding: 'utf8', env: envIn(tmp), timeout })

export const NO_POSTGRES = 'PostgreSQL with PostGIS is not installed (Debian: postgresql postgresql-15-postgis-3)'

/** Runs `name` with each of `cases` ([args, message]) and checks it refused them: exit 2, the message alone, no output. */
export function assertRefused (assert, tmp, name, cases) {
  for (const [args, message] of cases) {
    const res = runIn(tmp, name, args)
    assert.equal(res.status, 2, `${name} ${args.join(' ')}: ${res.stderr}`)
    assert.equal(res.stderr, `${message}\n`, `${name} ${args.join(' ')}`)
    assert.equal(res.stdout, '')
  }
}

// bench/raster-analysis.js: a mistake in the command line, whichever option (its own or one it hands to bench/run.js),
// is one line and exit 2 before any data is made or titiler started.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readdirSync } from 'node:fs'
import { assertRefused, runIn, tmpDir } from './helpers/bench-scripts.js'

test('bench/raster-analysis.js: every usage error is one line and exit 2, nothing made', (t) => {
  const tmp = tmpDir(t)
  const help = runIn(tmp, 'raster-analysis.js', ['--help'])
  assert.equal(help.status, 0, help.stderr)
  assert.match(help.stdout, /^Usage: node bench\/raster-analysis\.js/)
  assertRefused(assert, tmp, 'raster-analysis.js', [
    [['--duration', 'abc'], 'bench/raster-analysis.js: --duration must be a number ≥ 0.1'],
    [['--rounds', '0'], 'bench/raster-analysis.js: --rounds must be a number ≥ 1'],
    [['--client', 'ab'], 'bench/raster-analysis.js: --client takes autocannon or wrk, got "ab"'],
    [['--titiler', 'localhost:8000'], 'bench/raster-analysis.js: --titiler wants the base URL of a running titiler, like http://127.0.0.1:8000'],
    [['--cases', 'ndvi,x'], 'bench/raster-analysis.js: unknown case(s) x: the cases are cog, dem-terrarium, ndvi, mosaic-first, mosaic-mean, stac-ndvi'],
    [['--bogus'], "bench/raster-analysis.js: Unknown option '--bogus' (see --help)"],
  ])
  // The bench data (made in TMPDIR by default) were not made.
  assert.deepEqual(readdirSync(tmp), [])
})

import { execFileSync } from 'node:child_process'
import { startPostgis } from '../test/helpers/postgres.js'
import { loadZurichPoints } from './zurich-points.js'
const db = await startPostgis()
await loadZurichPoints(db.url)
try {
  const out = execFileSync(process.execPath, ['bench/run.js', '--data', db.url, '--format', 'postgres', '--set', 'zurich_points', '--zooms', '10-14',
    ...(process.argv[3] ? ['--header', process.argv[3]] : []), '--cache', process.argv[4] ?? 'on,off', '--pg-ceiling', '--duration', process.argv[2] ?? '8', '--warmup', '2', '--markdown', '--json', 'bench/results/postgis.json', '--chart', 'bench/results/postgis.svg'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })
  console.log(out)
} finally {
  await db.stop()
}

// OGC API – Features against what its standards ask (17-069r4 Part 1, 18-058 Part 2, RFC 7946), on a real PostGIS:
// datetime instants to the microsecond, a collection's extent that holds every feature, the API definition as HTML,
// polygon rings by the right-hand rule, and the headers a browser script of another origin may read.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import pg from 'pg'
import { makeApp, needs } from './helpers/app.js'
import { POSTGIS_MISSING, runSql, startPostgis } from './helpers/postgres.js'

let db = null
before(async () => {
  db = await startPostgis()
  if (db === null) return
  await runSql(db.url, `
    -- A feature's time as the server writes it: to the microsecond.
    CREATE TABLE micro (id integer PRIMARY KEY, ts timestamptz, geom geometry(Point, 4326));
    INSERT INTO micro VALUES (1, '2024-05-01T12:00:00.123456Z', 'SRID=4326;POINT(1 1)'), (2, '2024-05-01T12:00:00.1234Z', 'SRID=4326;POINT(1 1)'),
      (3, '2024-05-01T12:00:00.1239Z', 'SRID=4326;POINT(1 1)'), (4, '2024-05-01T12:00:00.123457Z', 'SRID=4326;POINT(1 1)');
    CREATE TABLE microts (id integer PRIMARY KEY, t timestamp, geom geometry(Point, 4326));
    INSERT INTO microts VALUES (1, '2024-05-01T12:00:00.123456', 'SRID=4326;POINT(1 1)'), (2, '2024-05-01T12:00:00.123', 'SRID=4326;POINT(1 1)');
  `)
})
after(async () => { await db?.stop() })

async function query (sql, values) {
  const c = new pg.Client({ connectionString: db.url })
  await c.connect()
  try { return (await c.query(sql, values)).rows } finally { await c.end() }
}
const appOf = (t, overrides = {}) => makeApp(t, { paths: [db.url], ...overrides })
const get = (app, url, headers = {}) => app.inject({ url, headers: { host: 'h', ...headers } })
const ids = (res) => res.json().features.map((f) => f.id).sort((a, b) => a - b)

test('datetime instants keep every digit of their fraction: a feature\'s own microsecond time finds it; =, ../t and t/.. select what PostgreSQL\'s comparison does, on timestamptz and timestamp', async (t) => {
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  const app = await appOf(t)
  const cases = [
    ['micro', 'ts', 'timestamptz', ['2024-05-01T12:00:00.123456Z', '2024-05-01T14:00:00.123456+02:00', '2024-05-01t12:00:00.1234z', '2024-05-01T12:00:00.1235Z', '2024-05-01T12:00:00.123Z']],
    ['microts', 't', 'timestamp', ['2024-05-01T12:00:00.123456Z', '2024-05-01T12:00:00.1234Z', '2024-05-01T12:00:00.123Z']],
  ]
  for (const [table, column, type, instants] of cases) {
    const inUtc = type === 'timestamptz' ? '$1::timestamptz' : "($1::timestamptz AT TIME ZONE 'UTC')"
    for (const instant of instants) {
      for (const [datetime, op] of [[instant, '='], [`../${instant}`, '<='], [`${instant}/..`, '>=']]) {
        const expected = (await query(`SELECT id FROM ${table} WHERE ${column} ${op} ${inUtc} ORDER BY id`, [instant.toUpperCase()])).map((r) => r.id)
        const res = await get(app, `/ogc/collections/${table}/items?datetime=${encodeURIComponent(datetime)}`)
        assert.equal(res.statusCode, 200, res.body)
        assert.deepEqual(ids(res), expected, `${table} datetime=${datetime}`)
      }
    }
  }
  // The rows the probe saw wrong: a feature's own time, and an interval starting between two rows of one millisecond.
  assert.deepEqual(ids(await get(app, '/ogc/collections/micro/items?datetime=2024-05-01T12:00:00.123456Z')), [1])
  assert.deepEqual(ids(await get(app, '/ogc/collections/micro/items?datetime=2024-05-01T12:00:00.1235Z/..')), [3])
  assert.deepEqual(ids(await get(app, '/ogc/collections/micro/items?datetime=2024-05-01T12:00:00.123456Z/2024-05-01T12:00:00.123457Z')), [1, 4])
  // An interval that ends before it starts within one millisecond is a 400 as any other.
  const backwards = await get(app, '/ogc/collections/micro/items?datetime=2024-05-01T12:00:00.1239Z/2024-05-01T12:00:00.1234Z')
  assert.equal(backwards.statusCode, 400)
  assert.match(backwards.json().message, /ends before it starts/)
})

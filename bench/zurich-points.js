#!/usr/bin/env node
// The 50,000 points around Zurich (47.37 N, 8.54 E) that published PostGIS tile benchmarks use, made deterministic.
//   node bench/zurich-points.js postgres://user@host/db [table] [count]
import pg from 'pg'

export async function loadZurichPoints (url, table = 'zurich_points', n = 50000) {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    await client.query(`
      SELECT setseed(0.42);
      CREATE EXTENSION IF NOT EXISTS postgis;
      DROP TABLE IF EXISTS ${table};
      CREATE TABLE ${table} (id integer PRIMARY KEY, name text, value double precision, geom geometry(Point, 4326));
      INSERT INTO ${table}
        SELECT i, 'point ' || i, round((random() * 1000)::numeric, 2),
               ST_SetSRID(ST_MakePoint(8.54 + (random() - 0.5) * 0.6, 47.37 + (random() - 0.5) * 0.4), 4326)
        FROM generate_series(1, ${Number(n)}) AS i;
      CREATE INDEX ON ${table} USING gist (geom);
      ANALYZE ${table};`)
  } finally {
    await client.end()
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [url, table, count] = process.argv.slice(2)
  if (!url || !/^postgres(ql)?:\/\//.test(url) || (table && !/^[a-z_][a-z0-9_]*$/.test(table))) {
    console.error('usage: node bench/zurich-points.js postgres://user@host/db [table] [count]')
    process.exit(2)
  }
  await loadZurichPoints(url, table, count ? Number(count) : undefined)
  console.log(`loaded ${count ?? 50000} points into ${table ?? 'zurich_points'}`)
}

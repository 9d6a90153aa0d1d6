// A real PostGIS for tests: DATABASE_URL when set, otherwise a throwaway cluster (initdb in a temp folder, its own
// port and socket; run as the `postgres` user when we are root). Returns null when PostgreSQL is not installed.
import { execFileSync, spawnSync } from 'node:child_process'
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { freePort } from '../../bench/servers.js'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'

function findBin () {
  const root = '/usr/lib/postgresql'
  if (!existsSync(root)) return null
  for (const v of readdirSync(root).sort().reverse()) {
    const bin = join(root, v, 'bin')
    if (existsSync(join(bin, 'initdb')) && existsSync(join(bin, 'pg_ctl'))) return bin
  }
  return null
}


export const POSTGIS_MISSING = 'PostgreSQL with PostGIS is not installed (Debian: postgresql postgresql-15-postgis-3) and DATABASE_URL is not set'

/**
 * Starts (or reuses, via DATABASE_URL) a PostgreSQL with PostGIS and creates a fresh database in it. `cpus` (a
 * taskset list such as '1') pins the throwaway cluster to those cores: the bench keeps the database off the cores
 * the server and the client use, as on separate machines.
 * @returns {Promise<null | { url: string, adminUrl: string, stop(): Promise<void>, start(): Promise<void>, pause(): Promise<void>, bin: string|null }>}
 */
export async function startPostgis ({ cpus } = {}) {
  const asRoot = process.getuid?.() === 0
  const db = `tile_cannon_test_${process.pid}_${Date.now() % 100000}`
  if (process.env.DATABASE_URL) {
    const adminUrl = process.env.DATABASE_URL
    const url = await createDatabase(adminUrl, db)
    return { url, adminUrl, bin: findBin(), async stop () { await dropDatabase(adminUrl, db) }, start: null, pause: null }
  }
  const bin = findBin()
  if (!bin) return null
  const dir = mkdtempSync(join(tmpdir(), 'tile-cannon-pg-'))
  chmodSync(dir, 0o777)
  const run = (cmd, args) => {
    let command = [join(bin, cmd), ...args]
    if (cpus !== undefined) command = ['taskset', '-c', String(cpus), ...command] // the postmaster's backends inherit it
    const res = asRoot
      ? spawnSync('runuser', ['-u', 'postgres', '--', ...command], { encoding: 'utf8' })
      : spawnSync(command[0], command.slice(1), { encoding: 'utf8' })
    if (res.status !== 0) throw new Error(`${cmd} failed: ${res.stderr || res.stdout}`)
    return res.stdout
  }
  const data = join(dir, 'data')
  run('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '-E', 'UTF8', '--locale=C', '--no-sync'])
  const port = await freePort()
  const opts = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off`
  const start = async () => { run('pg_ctl', ['-D', data, '-o', opts, '-w', '-l', join(dir, 'log'), 'start']) }
  await start()
  const adminUrl = `postgres://postgres@127.0.0.1:${port}/postgres`
  const url = await createDatabase(adminUrl, db)
  return {
    url,
    adminUrl,
    bin,
    start,
    /**
     * Stops the server at once (as a crash would), keeping its data, to test a database that goes away. A checkpoint
     * first: with synchronous_commit off, the last commits' WAL may not be written yet, and an immediate stop lost a
     * table a test had just made (seen in CI under load).
     */
    async pause () {
      await runSql(adminUrl, 'CHECKPOINT')
      run('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop'])
    },
    async stop () {
      try { run('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']) } catch {}
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

/** A fresh database with PostGIS and hstore, next to the one at adminUrl; returns its URL. */
async function createDatabase (adminUrl, db) {
  const admin = new pg.Client({ connectionString: adminUrl })
  await admin.connect()
  await admin.query(`CREATE DATABASE ${db}`)
  await admin.end()
  const u = new URL(adminUrl)
  u.pathname = `/${db}`
  const url = u.toString()
  await runSql(url, 'CREATE EXTENSION IF NOT EXISTS postgis; CREATE EXTENSION IF NOT EXISTS hstore')
  return url
}

async function dropDatabase (adminUrl, db) {
  const admin = new pg.Client({ connectionString: adminUrl })
  await admin.connect()
  await admin.query(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`)
  await admin.end()
}

/** Runs a SQL script (several statements, DO blocks) with the simple query protocol. */
export async function runSql (url, sql) {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    await client.query(sql)
  } finally {
    await client.end()
  }
}

/** The rows of one statement with bound values, on a connection of its own. */
export async function queryRows (url, sql, values) {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return (await client.query(sql, values)).rows
  } finally {
    await client.end()
  }
}

/** pg_restore of a custom-format dump into the database at url. */
export function restoreDump (bin, url, file) {
  const tool = bin ? join(bin, 'pg_restore') : 'pg_restore'
  execFileSync(tool, ['--no-owner', '--no-privileges', '-d', url, file], { stdio: ['ignore', 'ignore', 'pipe'] })
}

/**
 * Loads a GeoJSON FeatureCollection into a new table with one typed column per property (our own loader: no GDAL).
 * The CRS named in the file (e.g. EPSG:4269) becomes the table's SRID.
 */
export async function loadGeoJson (url, table, geojson) {
  const crs = geojson.crs?.properties?.name ?? ''
  const srid = Number(/EPSG::?(\d+)/.exec(crs)?.[1] ?? 4326)
  const keys = new Map()
  for (const f of geojson.features) {
    for (const [k, v] of Object.entries(f.properties ?? {})) {
      const t = typeof v === 'number' ? 'double precision' : typeof v === 'boolean' ? 'boolean' : 'text'
      if (v !== null && (!keys.has(k) || keys.get(k) === t)) keys.set(k, keys.has(k) && keys.get(k) !== t ? 'text' : t)
      else if (v !== null) keys.set(k, 'text')
    }
  }
  const q = (s) => `"${s.replaceAll('"', '""')}"`
  const cols = [...keys]
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    await client.query(`CREATE TABLE ${q(table)} (id serial PRIMARY KEY, ${cols.map(([k, t]) => `${q(k)} ${t}`).join(', ')}${cols.length ? ',' : ''} geom geometry(Geometry, ${srid}))`)
    await client.query('BEGIN')
    for (const f of geojson.features) {
      const values = cols.map(([k, t]) => {
        const v = f.properties?.[k]
        return v === undefined || v === null ? null : t === 'text' ? String(v) : v
      })
      const params = cols.map((_, i) => `$${i + 1}`)
      await client.query(`INSERT INTO ${q(table)} (${cols.map(([k]) => q(k)).join(', ')}${cols.length ? ',' : ''} geom) VALUES (${params.join(', ')}${cols.length ? ',' : ''} ST_SetSRID(ST_GeomFromGeoJSON($${cols.length + 1}), ${srid}))`, [...values, JSON.stringify(f.geometry)])
    }
    await client.query('COMMIT')
    await client.query(`CREATE INDEX ON ${q(table)} USING gist (geom); ANALYZE ${q(table)}`)
  } finally {
    await client.end()
  }
}

export { loadZurichPoints } from '../../bench/zurich-points.js'

/** Runs a .sql file with psql, statement by statement, stopping at the first error (as the file's authors ran it). */
export function runSqlFile (bin, url, file) {
  const psql = bin && existsSync(join(bin, 'psql')) ? join(bin, 'psql') : 'psql'
  execFileSync(psql, ['-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', url, '-f', file], { stdio: ['ignore', 'ignore', 'pipe'] })
}

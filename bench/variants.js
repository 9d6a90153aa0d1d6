#!/usr/bin/env node
// What the .mlt and .geojson variants of vector tiles cost and weigh (lib/variants), on the shared fixtures' vector
// sets: for a sample of each set's tiles (spread over its zooms), the time to make each variant from the decoded MVT on
// the event loop (median and p95, after a warm-up pass), and the sizes summed over the sample: MVT gzip (as stored),
// MLT raw and gzip, GeoJSON raw and gzip. Then the threshold behind lib/variants INLINE_RAW_BYTES: the event loop's
// time to make a tile inline against its time to hand the same tile to a variants worker and take the answer back
// (event-loop utilisation over sequential runs), by decoded tile size.
//   node bench/variants.js [--tiles 60] [--sets koh-samui_thailand,trails,…]
import { readFileSync } from 'node:fs'
import os from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { parseArgs } from 'node:util'
import { gzipSync } from 'node:zlib'
import { FIXTURES } from '../test/helpers/app.js'
import { storedTiles } from '../test/helpers/data.js'
import { VariantMaker } from '../lib/variants/index.js'
import { decodeStored, transcode } from '../lib/variants/transcode.js'
import { loadMlt } from '../lib/variants/mlt.js'

/** The shared fixtures' MVT sets (files under ../shared/fixtures). */
export const VECTOR_FIXTURES = [
  'mbtiles/koh-samui_thailand.mbtiles', 'mbtiles/trails.mbtiles', 'mbtiles/world_cities.mbtiles',
  'mbtiles/zoomed_world_cities.mbtiles', 'mbtiles/uncompressed_mvt.mbtiles', 'mbtiles/jakartabuildings.mbtiles',
  'mbtiles/protomaps538lakemerge.mbtiles', 'pmtiles/protomaps(vector)ODbL_firenze.pmtiles', 'pmtiles/trails.pmtiles',
  'pmtiles/test_fixture_1.pmtiles', 'pmtiles/test_fixture_2.pmtiles',
]

/** Up to `n` of a file's stored tiles, spread over the list (every zoom touched), as [z, x, y, stored bytes]. */
export async function sampleTiles (path, n) {
  const all = await storedTiles(path)
  const present = all.filter(([, , , d]) => d !== null && d.length > 0)
  return present.length <= n ? present : present.filter((_, i) => i % Math.ceil(present.length / n) === 0)
}

/** A stored tile's raw MVT (gzip sniffed from its bytes). */
export const rawMvt = (stored) => decodeStored(stored, stored[0] === 0x1f && stored[1] === 0x8b ? 'gzip' : 'identity')

const quantile = (list, q) => {
  const sorted = [...list].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]
}
const ms = (v) => v.toFixed(v < 1 ? 3 : 1)

async function costsAndSizes (files, n) {
  const mlt = await loadMlt()
  console.log('| set | tiles | MVT gzip | MLT | MLT gzip | MLT gzip / MVT gzip | GeoJSON | GeoJSON gzip | MLT ms median | p95 | GeoJSON ms median | p95 |')
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
  const points = [] // [raw size, inline ms] of every tile, both variants, for the threshold
  for (const rel of files) {
    const tiles = (await sampleTiles(join(FIXTURES, rel), n)).map(([z, x, y, d]) => [z, x, y, rawMvt(d)])
    const size = { mvtGz: 0, mlt: 0, mltGz: 0, geojson: 0, geojsonGz: 0 }
    const time = { mlt: [], geojson: [] }
    for (const pass of [0, 1]) { // the first pass warms the JIT up
      for (const [z, x, y, raw] of tiles) {
        for (const variant of ['mlt', 'geojson']) {
          const started = performance.now()
          const bytes = transcode(variant, 'pbf', raw, z, x, y, mlt)
          const took = performance.now() - started
          if (pass === 0) {
            size[variant] += bytes.length
            size[`${variant}Gz`] += gzipSync(bytes).length
            continue
          }
          time[variant].push(took)
          points.push([raw.length, took])
        }
        if (pass === 0) size.mvtGz += gzipSync(raw).length
      }
    }
    const kb = (b) => `${(b / 1024).toFixed(1)} KiB`
    console.log(`| ${rel.split('/')[1]} | ${tiles.length} | ${kb(size.mvtGz)} | ${kb(size.mlt)} | ${kb(size.mltGz)} | ${(size.mltGz / size.mvtGz).toFixed(2)}× | ${kb(size.geojson)} | ${kb(size.geojsonGz)} | ${ms(quantile(time.mlt, 0.5))} | ${ms(quantile(time.mlt, 0.95))} | ${ms(quantile(time.geojson, 0.5))} | ${ms(quantile(time.geojson, 0.95))} |`)
  }
  return points
}

/** CPU time of this process's main thread so far, in ms (Linux: its /proc task's utime + stime, 10 ms ticks). */
function mainThreadCpuMs () {
  const stat = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8')
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return (Number(fields[11]) + Number(fields[12])) * 10 // utime, stime (fields 14 and 15 of stat)
}

/** The main thread's CPU per tile handed to a variants worker and back, and per tile made inline, in ms. */
async function handOffCost (tiles, mlt) {
  const maker = new VariantMaker({ threads: 1 })
  const pool = maker.worker()
  const run = (variant, [z, x, y, raw]) => pool.run({ variant, format: 'pbf', stored: raw, encoding: 'identity', z, x, y })
  for (const t of tiles) { await run('mlt', t); await run('geojson', t) } // threads started, modules loaded, JIT warm
  const out = []
  for (const t of tiles) {
    for (const variant of ['mlt', 'geojson']) {
      const rounds = 400
      let before = mainThreadCpuMs()
      for (let i = 0; i < rounds; i++) await run(variant, t)
      const handOff = (mainThreadCpuMs() - before) / rounds
      before = mainThreadCpuMs()
      for (let i = 0; i < rounds; i++) transcode(variant, 'pbf', t[3], t[0], t[1], t[2], mlt)
      out.push([t[3].length, variant, handOff, (mainThreadCpuMs() - before) / rounds])
    }
  }
  await maker.close()
  return out
}

async function main () {
  const { values } = parseArgs({ options: { tiles: { type: 'string', default: '60' }, sets: { type: 'string' } } })
  const files = values.sets ? VECTOR_FIXTURES.filter((f) => values.sets.split(',').some((s) => f.includes(s))) : VECTOR_FIXTURES
  console.log(`# variants: ${os.cpus()[0].model}, ${os.availableParallelism()} cores, Node ${process.version}, load ${os.loadavg()[0].toFixed(2)}\n`)
  const points = await costsAndSizes(files, Number(values.tiles))

  // Inline time by decoded size, against the hand-off's event-loop time for tiles of those sizes.
  const buckets = [1024, 4096, 8192, 16384, 32768, 65536, 131072, Infinity]
  console.log('\n| decoded MVT | tiles | inline ms median (both variants) | p95 |')
  console.log('|---|---:|---:|---:|')
  let low = 0
  for (const high of buckets) {
    const inBucket = points.filter(([size]) => size > low && size <= high).map(([, t]) => t)
    if (inBucket.length > 0) console.log(`| ${low}-${high === Infinity ? '…' : high} B | ${inBucket.length / 2} | ${ms(quantile(inBucket, 0.5))} | ${ms(quantile(inBucket, 0.95))} |`)
    low = high
  }
  const probes = []
  for (const target of [500, 2000, 4000, 8000, 16000, 32000]) {
    const tiles = (await sampleTiles(join(FIXTURES, 'mbtiles/koh-samui_thailand.mbtiles'), 400)).map(([z, x, y, d]) => [z, x, y, rawMvt(d)])
    probes.push(tiles.reduce((best, t) => (Math.abs(t[3].length - target) < Math.abs(best[3].length - target) ? t : best)))
  }
  console.log('\n| decoded MVT | variant | main thread CPU ms per tile: handed to a worker | made inline |')
  console.log('|---:|---|---:|---:|')
  for (const [size, variant, handOff, inline] of await handOffCost(probes, await loadMlt())) console.log(`| ${size} B | ${variant} | ${ms(handOff)} | ${ms(inline)} |`)
}

if (import.meta.url === `file://${process.argv[1]}`) main()

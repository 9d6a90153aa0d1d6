// Bench output: markdown tables (as published tile-server benchmarks show them) and an SVG chart of req/s per zoom.

const fmt = (n, digits = 0) => (Number.isFinite(n) ? n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits }) : '–')
const mb = (bytesPerSec) => fmt(bytesPerSec / 1e6, 2)
const ms = (v) => `${fmt(v, 2)} ms`
const ratio = (a, b) => (Number.isFinite(a) && b > 0 ? `${(a / b).toFixed(2)}×` : '–')
const us = (v) => (Number.isFinite(v) ? fmt(v, 1) : '–')

/** A server's mark where some of its requests failed or were answered other than 2xx: its figures are not of tiles. */
const failedNote = (failed) => (failed ? ` ⚠ not comparable: ${[failed.errors ? `${failed.errors} errors` : '', failed.non2xx ? `${failed.non2xx} non-2xx` : ''].filter(Boolean).join(', ')}` : '')

/**
 * One table per set: a row per zoom and server, with the ratio to the first server on req/s (higher is better) and on
 * the server's CPU per request (µs of CPU time, every thread and child process, per request answered: lower is better),
 * that one to the first server whose CPU is known (pg direct and external servers have none).
 */
export function markdown (report) {
  const out = []
  const first = report.servers[0]
  const cpuFirst = report.cpuReference ?? first // the first server whose CPU is known
  for (const set of report.sets) {
    // --db-pid: the database's CPU per request of each server, the part of the machine a server's queries take.
    const withDb = set.rows.some((row) => Object.values(row.results).some((r) => r.dbCpuPerRequest !== undefined))
    out.push(`### ${set.location}`, '')
    out.push(`| Zoom | Location | Server | Requests/sec | vs ${first} | Throughput (MB/s) | Avg Latency | P99 Latency | Errors | Non-2xx | Server CPU (cores) | CPU/req (µs) | CPU/req vs ${cpuFirst} (lower is better) |${withDb ? ' Database CPU/req (µs) |' : ''}`)
    out.push(`|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|${withDb ? '---:|' : ''}`)
    for (const row of set.rows) {
      const base = row.results[first]
      const cpuBase = row.results[cpuFirst]
      for (const server of report.servers) {
        const r = row.results[server]
        if (!r) continue
        out.push(`| ${row.zoom} | ${set.location} | ${server} | ${fmt(r.rps)} | ${ratio(r.rps, base?.rps)} | ${mb(r.throughput)} | ${ms(r.latencyAvg)} | ${ms(r.latencyP99)} | ${r.errors} | ${r.non2xx} | ${Number.isFinite(r.cores) ? fmt(r.cores, 2) : '–'} | ${us(r.cpuPerRequest)} | ${ratio(r.cpuPerRequest, cpuBase?.cpuPerRequest)} |${withDb ? ` ${us(r.dbCpuPerRequest)} |` : ''}`)
      }
    }
    out.push('')
  }
  out.push('### Summary (averages across zooms)', '')
  out.push(`| Source | Server | Avg Requests/sec | vs ${first} | Avg Throughput (MB/s) | Avg Latency | Avg CPU/req (µs) | CPU/req vs ${cpuFirst} (lower is better) |`)
  out.push('|---|---|---:|---:|---:|---:|---:|---:|')
  for (const s of report.summary) out.push(`| ${s.location} | ${s.server}${failedNote(s.failed)} | ${fmt(s.rps)} | ${ratio(s.rps, s.firstRps)} | ${mb(s.throughput)} | ${ms(s.latencyAvg)} | ${us(s.cpuPerRequest)} | ${ratio(s.cpuPerRequest, s.firstCpuPerRequest)} |`)
  out.push('')
  return out.join('\n')
}

const COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2']
const esc = (s) => String(s).replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`)

/** Grouped bars: req/s per zoom per server, one panel per set. Opens in any browser. */
export function svgChart (report) {
  const W = 760
  const PH = 260
  const panels = report.sets.map((set, i) => {
    const top = 40 + i * (PH + 50)
    const max = Math.max(1, ...set.rows.flatMap((r) => Object.values(r.results).map((x) => x.rps)))
    const groupW = (W - 100) / Math.max(1, set.rows.length)
    const barW = Math.max(4, (groupW - 16) / report.servers.length)
    const bars = set.rows.flatMap((row, g) => report.servers.map((server, k) => {
      const r = row.results[server]
      if (!r) return ''
      const h = (r.rps / max) * (PH - 40)
      const x = 70 + g * groupW + 8 + k * barW
      const y = top + PH - 20 - h
      // A row with failed or non-2xx requests: hatched, marked ⚠ and said so, not drawn as a result.
      const failed = r.errors > 0 || r.non2xx > 0 ? { errors: r.errors, non2xx: r.non2xx } : null
      const bar = `<rect x="${x.toFixed(1)}" y="${y.toFixed(1)}" width="${(barW - 2).toFixed(1)}" height="${h.toFixed(1)}" fill="${failed ? 'url(#failed)' : COLORS[k % COLORS.length]}"${failed ? ` stroke="${COLORS[k % COLORS.length]}" class="failed"` : ''}><title>${esc(server)} z${row.zoom}: ${Math.round(r.rps)} req/s${esc(failedNote(failed))}</title></rect>`
      return failed ? `${bar}<text x="${(x + (barW - 2) / 2).toFixed(1)}" y="${(y - 3).toFixed(1)}" text-anchor="middle" fill="#d62728">⚠</text>` : bar
    }).concat(`<text x="${(70 + g * groupW + groupW / 2).toFixed(1)}" y="${top + PH - 4}" text-anchor="middle">z${row.zoom}</text>`))
    const ticks = [0, 0.25, 0.5, 0.75, 1].map((f) => {
      const y = top + PH - 20 - f * (PH - 40)
      return `<line x1="66" x2="${W - 20}" y1="${y}" y2="${y}" stroke="#ddd"/><text x="62" y="${y + 4}" text-anchor="end">${Math.round(max * f)}</text>`
    })
    return `<text x="70" y="${top - 8}" font-weight="bold">${esc(set.location)} — requests/sec</text>${ticks.join('')}${bars.join('')}`
  })
  const legendY = 40 + report.sets.length * (PH + 50) - 20
  const legend = report.servers.map((s, k) => `<rect x="${70 + k * 180}" y="${legendY}" width="12" height="12" fill="${COLORS[k % COLORS.length]}"/><text x="${88 + k * 180}" y="${legendY + 11}">${esc(s)}</text>`)
  const H = legendY + 30
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="system-ui,sans-serif" font-size="12">` +
    '<defs><pattern id="failed" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#eee"/><line x1="0" y1="0" x2="0" y2="6" stroke="#d62728" stroke-width="2"/></pattern></defs>' +
    `<rect width="100%" height="100%" fill="white"/><text x="${W / 2}" y="20" text-anchor="middle" font-size="14">tile-cannon bench — ${esc(report.machine.cpu)} (${report.machine.cores} cores), ${esc(report.date)}</text>` +
    `${panels.join('')}${legend.join('')}</svg>\n`
}

// The wrk client for bench/run.js (--client wrk): a separate C process, pinned with taskset to its own core(s), so
// that the servers, pinned to the others, are what limits req/s. A Lua script cycles through the zoom's paths (the
// list every server gets) and sends the bench's headers; the figures come from wrk's own summary.
import { spawn } from 'node:child_process'
import { existsSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { findTaskset } from './cpu.js'

/** The wrk binary on PATH (Debian: apt-get install wrk), or null. */
export function findWrk () {
  for (const dir of (process.env.PATH ?? '').split(':').concat('/usr/bin')) {
    const bin = join(dir || '.', 'wrk')
    if (existsSync(bin)) return bin
  }
  return null
}

/** A Lua string literal for any JavaScript string (bytes of its UTF-8, escaped when not plain printable ASCII). */
const lua = (s) => `"${[...Buffer.from(String(s), 'utf8')].map((b) => (b >= 0x20 && b < 0x7f && b !== 0x22 && b !== 0x5c ? String.fromCharCode(b) : `\\${b}`)).join('')}"`

/**
 * The Lua script: requests pre-formatted once per thread, taken in turn (thread k starts k/threads of the way along,
 * so threads do not ask for the same tile in lockstep), and, when the run is done, wrk's exact counts on one line
 * (the printed summary rounds bytes to 2 decimals of a MB). No response() hook: defining one makes wrk parse every
 * response's headers and body, which costs the client CPU.
 */
export function wrkScript (paths, headers, threads = 1) {
  return `-- written by bench/wrk.js
local paths = {
${paths.map((p) => `  ${lua(p)},`).join('\n')}
}
${Object.entries(headers).map(([k, v]) => `wrk.headers[${lua(k)}] = ${lua(v)}`).join('\n')}
local started = 0
function setup (thread)
  thread:set("id", started)
  started = started + 1
end
local reqs, n = {}, 0
function init (args)
  for i, p in ipairs(paths) do reqs[i] = wrk.format(nil, p) end
  n = math.floor((id or 0) * #reqs / ${threads})
end
function request ()
  n = n + 1
  if n > #reqs then n = 1 end
  return reqs[n]
end
function done (summary, latency, requests)
  local e = summary.errors
  io.write(string.format("\\nBENCH_WRK requests=%d duration_us=%d bytes=%d connect=%d read=%d write=%d status=%d timeout=%d latency_mean_us=%.3f latency_p99_us=%.3f\\n",
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout, latency.mean, latency:percentile(99)))
end
`
}

const TIME = { us: 1e-3, ms: 1, s: 1e3, m: 60e3, h: 3600e3 } // → ms
const SIZE = { B: 1, KB: 1024, MB: 1024 ** 2, GB: 1024 ** 3, TB: 1024 ** 4 } // wrk's sizes are binary
const num = (text, re) => {
  const m = re.exec(text)
  return m ? Number(m[1]) : null
}

/**
 * wrk's printed summary (run with --latency) → the bench's figures: req/s, bytes/s, mean and p99 latency (ms), socket
 * errors, answers ≥ 400 (wrk's "Non-2xx or 3xx responses": it counts 3xx as success) and the request count. When the
 * script's BENCH_WRK line is there, its exact counts win over the rounded text.
 */
export function parseWrk (text) {
  const latency = /^\s*Latency\s+([\d.]+)(us|ms|s|m|h)\b/m.exec(text)
  const p99 = /^\s*99(?:\.0+)?%\s+([\d.]+)(us|ms|s|m|h)\b/m.exec(text)
  const transfer = /^Transfer\/sec:\s*([\d.]+)(B|KB|MB|GB|TB)\b/m.exec(text)
  const sockets = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(text)
  const total = /^\s*(\d+) requests in ([\d.]+)(us|ms|s|m|h),/m.exec(text)
  const out = {
    rps: num(text, /^Requests\/sec:\s*([\d.]+)/m),
    throughput: transfer ? Number(transfer[1]) * SIZE[transfer[2]] : null,
    latencyAvg: latency ? Number(latency[1]) * TIME[latency[2]] : null,
    latencyP99: p99 ? Number(p99[1]) * TIME[p99[2]] : null,
    errors: sockets ? sockets.slice(1).reduce((a, n) => a + Number(n), 0) : 0,
    non2xx: num(text, /Non-2xx or 3xx responses:\s*(\d+)/) ?? 0,
    requests: total ? Number(total[1]) : null,
  }
  const exact = /^BENCH_WRK (.*)$/m.exec(text)
  if (exact) {
    const v = Object.fromEntries(exact[1].trim().split(/\s+/).map((kv) => kv.split('=')).map(([k, n]) => [k, Number(n)]))
    const seconds = v.duration_us / 1e6
    Object.assign(out, {
      rps: v.requests / seconds,
      throughput: v.bytes / seconds,
      latencyAvg: v.latency_mean_us / 1e3,
      latencyP99: v.latency_p99_us / 1e3,
      errors: v.connect + v.read + v.write + v.timeout,
      non2xx: v.status,
      requests: v.requests,
    })
  }
  if (out.rps === null || out.requests === null) throw new Error(`cannot read wrk's output:\n${text}`)
  return out
}

// wrk runs under way: a bench stopped by a signal ends them (stopWrk) rather than leave them loading for their duration.
const running = new Set()

/** Ends the wrk runs under way. */
export function stopWrk () {
  for (const child of running) child.kill('SIGTERM')
}

/**
 * One wrk run over `paths` on `origin`: `threads` threads, `connections` connections, `duration` whole seconds,
 * pinned to `cpus` (a taskset list) when given. `scriptFile` is where the Lua script is written.
 */
export async function wrk (origin, paths, { duration, connections, threads = 1, headers = {}, cpus = null, scriptFile }) {
  writeFileSync(scriptFile, wrkScript(paths, headers, threads))
  const bin = findWrk()
  if (!bin) throw new Error('wrk is not installed (Debian: apt-get install wrk)')
  const args = ['-t', String(threads), '-c', String(connections), '-d', `${duration}s`, '--timeout', '10s', '--latency', '-s', scriptFile, origin]
  const [cmd, argv] = cpus === null ? [bin, args] : [findTaskset() ?? 'taskset', ['-c', cpus, bin, ...args]]
  const child = spawn(cmd, argv, { stdio: ['ignore', 'pipe', 'pipe'] })
  running.add(child)
  child.on('close', () => running.delete(child))
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (d) => { stdout += d })
  child.stderr.on('data', (d) => { stderr += d })
  const code = await new Promise((resolve, reject) => child.on('error', reject).on('close', resolve))
  if (code !== 0) throw new Error(`wrk exited with ${code}: ${(stderr || stdout).trim().split('\n').pop()}`)
  return { ...parseWrk(stdout), output: stdout }
}

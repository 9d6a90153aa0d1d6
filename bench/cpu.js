// Server CPU for the bench: the CPU time a server has used (its process, every thread, and every process under it,
// such as nginx's worker under its master), and the core lists the bench pins its client and servers to (taskset).
import { spawnSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import os from 'node:os'
import { join } from 'node:path'

/** Clock ticks per second of /proc's CPU times (USER_HZ, 100 on Linux). */
const HZ = (() => {
  const r = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' })
  const n = Number(r.stdout?.trim())
  return Number.isInteger(n) && n > 0 ? n : 100
})()

/** { ppid, ticks } of a process from /proc/<pid>/stat: utime + stime (all its threads) + cutime + cstime. */
function stat (pid) {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8')
    const f = text.slice(text.lastIndexOf(')') + 2).split(' ') // the name, in parentheses, may hold spaces
    // f[0] is field 3 (state): ppid is field 4, utime 14, stime 15, cutime 16, cstime 17.
    return { ppid: Number(f[1]), ticks: Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]) }
  } catch {
    return null
  }
}

/**
 * CPU seconds used so far by process `pid` and everything under it (Linux /proc; null elsewhere or when it is gone).
 * A process's own figure covers all its threads; the reaped children's time (cutime, cstime) is added, so a process
 * that exits between two readings is still counted once, in its parent's.
 */
export function cpuSeconds (pid) {
  const root = stat(pid)
  if (root === null) return null
  const children = new Map() // ppid → [pid]
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === pid) continue
    const s = stat(name)
    if (s === null) continue
    if (!children.has(s.ppid)) children.set(s.ppid, [])
    children.get(s.ppid).push({ pid: Number(name), ticks: s.ticks })
  }
  let ticks = root.ticks
  const todo = [pid]
  while (todo.length) {
    for (const child of children.get(todo.pop()) ?? []) {
      ticks += child.ticks
      todo.push(child.pid)
    }
  }
  return ticks / HZ
}

/** The cores in a taskset list like "0", "1-3" or "0,2-3"; throws on anything else. */
export function parseCpuList (list) {
  const cpus = new Set()
  for (const part of String(list).split(',')) {
    const m = /^\s*(\d+)(?:-(\d+))?\s*$/.exec(part)
    if (!m || (m[2] !== undefined && Number(m[2]) < Number(m[1]))) throw new Error(`"${list}" is not a core list like 0, 1-3 or 0,2`)
    for (let c = Number(m[1]); c <= Number(m[2] ?? m[1]); c++) cpus.add(c)
  }
  return [...cpus].sort((a, b) => a - b)
}

/** The machine's cores outside `list`, as a taskset list ("" when there are none). */
export function otherCpus (list, cores = os.cpus().length) {
  const taken = new Set(parseCpuList(list))
  return Array.from({ length: cores }, (_, i) => i).filter((c) => !taken.has(c)).join(',')
}

/** The taskset binary (util-linux), or null. */
export function findTaskset () {
  for (const dir of (process.env.PATH ?? '').split(':').concat('/usr/bin', '/bin')) {
    const bin = join(dir || '.', 'taskset')
    if (existsSync(bin)) return bin
  }
  return null
}

/** Pins every thread of a running process to `cpus` (taskset -a -cp); threads it starts later inherit it. */
export function pin (pid, cpus) {
  const r = spawnSync(findTaskset() ?? 'taskset', ['-a', '-c', '-p', cpus, String(pid)], { encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`taskset -a -cp ${cpus} ${pid} failed: ${(r.stderr || r.error?.message || '').trim()}`)
}

/** The cores a process may run on, from /proc/<pid>/status (for checks and the report). */
export function affinity (pid) {
  try {
    return /Cpus_allowed_list:\s*(\S+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? null
  } catch {
    return null
  }
}

// Starting and stopping the servers a bench run compares: tile-cannon on given data, and the node:http baseline.
// `cpus` (a taskset list like "1" or "1-3") starts a server pinned to those cores, every thread and child process.
import { fork, spawn } from 'node:child_process'
import { existsSync, mkdirSync, writeFileSync } from 'node:fs'
import { once } from 'node:events'
import { createServer } from 'node:net'
import { basename, dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { findTaskset } from './cpu.js'

const HERE = dirname(fileURLToPath(import.meta.url))
const SERVER = join(HERE, '..', 'server.js')

export async function freePort () {
  const srv = createServer().listen(0, '127.0.0.1')
  await once(srv, 'listening')
  const { port } = srv.address()
  await new Promise((resolve) => srv.close(resolve))
  return port
}

/** The taskset binary for `cpus`, or an error saying it is missing. */
function taskset () {
  const bin = findTaskset()
  if (!bin) throw new Error('pinning servers to cores needs taskset (Debian: util-linux)')
  return bin
}

/**
 * Every server process started here and not yet gone: a bench stopped by a signal stops them all (stopAll), those
 * still starting too, whose callers have no handle on them yet.
 */
const running = new Set()

/** Stops every server started here that is still running. */
export async function stopAll () {
  await Promise.all([...running].map((s) => s.stop()))
}

const gone = (child) => child.exitCode !== null || child.signalCode !== null

/**
 * Sends `signal` to `child` and waits for it to exit; after `graceMs`, SIGKILL (a server stuck in its shutdown must
 * not hold the bench's exit).
 */
async function ended (child, signal, graceMs = 5000) {
  if (gone(child)) return
  const exited = once(child, 'exit')
  child.kill(signal)
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs)
  await exited
  clearTimeout(timer)
}

/** `child` in `running` until it exits; `stop` ends it. */
function track (child, signal) {
  const entry = { child, stop: () => ended(child, signal) }
  running.add(entry)
  child.once('exit', () => running.delete(entry))
  return entry
}

/** A server that exited before it was ready; `exitCode` 2 is tile-cannon's for bad flags, configuration or paths. */
export class StartError extends Error {
  constructor (message, exitCode) {
    super(message)
    this.exitCode = exitCode
  }
}

/**
 * Forks a Node script and resolves once it sends 'ready' (as server.js does for pm2). With `cpus`, Node starts under
 * `taskset -c cpus` (which execs it: same pid, same IPC channel), so every thread it ever starts is on those cores.
 */
async function forkReady (script, args, { timeoutMs = 60_000, env, cpus = null } = {}) {
  const pinned = cpus === null ? {} : { execPath: taskset(), execArgv: ['-c', cpus, process.execPath, ...process.execArgv] }
  // TILE_CANNON_EXIT_WITH_PARENT: the server closes when this process dies (its IPC channel closes), however it dies.
  const child = fork(script, args, { stdio: ['ignore', 'ignore', 'pipe', 'ipc'], env: { ...process.env, TILE_CANNON_EXIT_WITH_PARENT: '1', ...env }, ...pinned })
  const { stop } = track(child, 'SIGTERM')
  let stderr = ''
  child.stderr.on('data', (d) => { stderr += d })
  let onExit
  try {
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new StartError(`${basename(script)} did not start in ${timeoutMs / 1000} s`)), timeoutMs)
      child.on('message', (m) => { if (m === 'ready') { clearTimeout(timer); resolve() } })
      onExit = (code) => { clearTimeout(timer); reject(new StartError(`${basename(script)} exited with ${code}: ${stderr.trim().split('\n').pop() ?? ''}`, code)) }
      child.on('exit', onExit)
    })
  } catch (err) {
    await stop() // one that never got ready is not left running
    throw err
  }
  child.off('exit', onExit)
  return { child, stop }
}

/** tile-cannon on `data` (files, folders or URLs), on a free 127.0.0.1 port; `flags`: more of its command line. */
export async function startTileCannon (data, { cache = true, cpus = null, flags = [] } = {}) {
  const port = await freePort()
  const args = ['--port', String(port), '--host', '127.0.0.1', '--log-level', 'warn', '--no-watch', ...(cache ? [] : ['--cache-mb', '0']), ...flags, ...data]
  const proc = await forkReady(SERVER, args, { cpus })
  return { ...proc, base: `http://127.0.0.1:${port}` }
}

/** The bare node:http baseline, mirroring the answers at `urls` (a JSON file of { urls, headers }). */
export async function startBaseline (listFile, { cpus = null, timeoutMs } = {}) {
  const port = await freePort()
  const proc = await forkReady(join(HERE, 'baseline.js'), [listFile, String(port)], { cpus, timeoutMs })
  return { ...proc, base: `http://127.0.0.1:${port}` }
}

/** The node:http + pg floor for PostGIS sets (see pg-http.js). */
export async function startPgHttp (url, { cpus = null } = {}) {
  const port = await freePort()
  const proc = await forkReady(join(HERE, 'pg-http.js'), [url, String(port)], { cpus })
  return { ...proc, base: `http://127.0.0.1:${port}` }
}

/** util-linux's setpriv where it is on PATH, or null. */
function findSetpriv () {
  for (const dir of (process.env.PATH ?? '').split(':').concat('/usr/bin')) {
    const bin = join(dir || '.', 'setpriv')
    if (existsSync(bin)) return bin
  }
  return null
}

/** True when an nginx binary is on PATH (or at the usual Debian place). */
export function findNginx () {
  for (const dir of (process.env.PATH ?? '').split(':').concat('/usr/sbin')) {
    const bin = join(dir, 'nginx')
    if (existsSync(bin)) return bin
  }
  return null
}

/**
 * The static-file ceiling: the same answers exploded to files under nginx (one worker, like one Node process),
 * served with the headers of each set's first answer. `answers` is mirror()'s Map; `dir` a scratch folder.
 */
export async function startNginx (answers, dir, { cpus = null } = {}) {
  const port = await freePort()
  const root = join(dir, 'root')
  const headersBySet = new Map()
  for (const [target, a] of answers) {
    const path = target.split('?')[0] // nginx serves a file by the path alone
    const file = join(root, ...path.split('/').filter(Boolean).map(decodeURIComponent))
    mkdirSync(dirname(file), { recursive: true })
    writeFileSync(file, a.body)
    const set = path.split('/')[1]
    if (!headersBySet.has(set)) headersBySet.set(set, a.head)
  }
  const quote = (s) => `"${String(s).replace(/["\\]/g, '\\$&')}"`
  const locations = [...headersBySet].map(([set, head]) => {
    const adds = ['content-encoding', 'vary', 'cache-control', 'access-control-allow-origin']
      .filter((h) => head[h]).map((h) => `add_header ${h} ${quote(head[h])};`).join(' ')
    return `location ${quote('/' + decodeURIComponent(set) + '/')} { default_type ${quote(head['content-type'] ?? 'application/octet-stream')}; ${adds} }`
  })
  return runNginx(dir, `listen 127.0.0.1:${port};
    root ${root};
    ${locations.join('\n    ')}`, port, '', { cpus })
}

/**
 * Runs nginx (one worker, in the foreground, everything under `dir`) with one server block; resolves once it answers.
 * `http` adds directives to the http block (a proxy cache path, say; or whole server blocks, with `server` null). With `cpus`, the master starts under taskset and
 * its worker inherits the cores.
 */
export async function runNginx (dir, server, port, http = '', { cpus = null } = {}) {
  const bin = findNginx()
  if (!bin) throw new Error('nginx is not installed')
  const conf = join(dir, 'nginx.conf')
  mkdirSync(dir, { recursive: true })
  writeFileSync(conf, `${process.getuid?.() === 0 ? 'user root;' : ''}
worker_processes 1;
pid ${join(dir, 'nginx.pid')};
error_log ${join(dir, 'error.log')} error;
events { worker_connections 4096; }
http {
  access_log off;
  types {}
  sendfile on;
  tcp_nopush on;
  keepalive_requests 1000000;
  open_file_cache max=100000 inactive=60s;
  client_body_temp_path ${join(dir, 'tmp')}; proxy_temp_path ${join(dir, 'tmp')}; fastcgi_temp_path ${join(dir, 'tmp')};
  uwsgi_temp_path ${join(dir, 'tmp')}; scgi_temp_path ${join(dir, 'tmp')};
  ${http}
  ${server === null ? '' : `server {
    ${server}
  }`}
}
`)
  mkdirSync(join(dir, 'tmp'), { recursive: true })
  const argv = [bin, '-p', dir, '-c', conf, '-g', 'daemon off;']
  if (cpus !== null) argv.unshift(taskset(), '-c', cpus)
  // nginx has no IPC channel to close when the bench dies: setpriv (util-linux) gives its master a parent-death
  // signal, kept through taskset's and nginx's exec, so a bench killed outright (SIGKILL, out of memory) takes it along
  // (SIGTERM: nginx's fast shutdown, its worker too). Without setpriv it outlives such a bench.
  const setpriv = findSetpriv()
  if (setpriv !== null) argv.unshift(setpriv, '--pdeathsig', 'TERM')
  const child = spawn(argv[0], argv.slice(1), { stdio: ['ignore', 'ignore', 'pipe'] })
  // SIGQUIT: nginx's graceful shutdown, its worker finishing the requests under way.
  const { stop } = track(child, 'SIGQUIT')
  let stderr = ''
  child.stderr.on('data', (d) => { stderr += d })
  const base = `http://127.0.0.1:${port}`
  for (let i = 0; ; i++) {
    if (gone(child)) throw new StartError(`nginx exited: ${stderr.trim().split('\n').pop()}`)
    try {
      await fetch(base)
      break
    } catch {
      if (i > 100) {
        await stop()
        throw new StartError('nginx did not start in 5 s')
      }
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }
  return { child, base, stop }
}

// Starting and stopping the servers a bench run compares: tile-cannon on given data, and the node:http baseline.
import { fork } from 'node:child_process'
import { once } from 'node:events'
import { createServer } from 'node:net'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const HERE = dirname(fileURLToPath(import.meta.url))
const SERVER = join(HERE, '..', 'server.js')

export async function freePort () {
  const srv = createServer().listen(0, '127.0.0.1')
  await once(srv, 'listening')
  const { port } = srv.address()
  await new Promise((resolve) => srv.close(resolve))
  return port
}

/** Forks a Node script and resolves once it sends 'ready' (as server.js does for pm2). */
async function forkReady (script, args, { timeoutMs = 60_000, env } = {}) {
  const child = fork(script, args, { stdio: ['ignore', 'ignore', 'pipe', 'ipc'], env: { ...process.env, ...env } })
  let stderr = ''
  child.stderr.on('data', (d) => { stderr += d })
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${script} did not start in ${timeoutMs / 1000} s`)), timeoutMs)
    child.on('message', (m) => { if (m === 'ready') { clearTimeout(timer); resolve() } })
    child.on('exit', (code) => { clearTimeout(timer); reject(new Error(`${script} exited with ${code}: ${stderr.trim().split('\n').pop() ?? ''}`)) })
  })
  child.removeAllListeners('exit')
  return {
    child,
    async stop () {
      if (child.exitCode !== null) return
      child.kill('SIGTERM')
      await once(child, 'exit')
    },
  }
}

/** tile-cannon on `data` (files, folders or URLs), on a free 127.0.0.1 port. */
export async function startTileCannon (data, { cache = true } = {}) {
  const port = await freePort()
  const args = ['--port', String(port), '--host', '127.0.0.1', '--log-level', 'warn', '--no-watch', ...(cache ? [] : ['--cache-mb', '0']), ...data]
  const proc = await forkReady(SERVER, args)
  return { ...proc, base: `http://127.0.0.1:${port}` }
}

/** The bare node:http baseline, mirroring the answers at `urls` (a JSON file of { urls, headers }). */
export async function startBaseline (listFile) {
  const port = await freePort()
  const proc = await forkReady(join(HERE, 'baseline.js'), [listFile, String(port)])
  return { ...proc, base: `http://127.0.0.1:${port}` }
}

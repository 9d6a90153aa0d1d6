#!/usr/bin/env node
// Entry for `npm start`, `npx tile-cannon <paths…>` and pm2: config → buildApp → listen; reload on SIGHUP;
// graceful shutdown on SIGINT/SIGTERM (in-flight requests finish); tells pm2 when it is ready.
import './lib/v8-flags.js' // first: process-wide V8 settings
import { StartupStopped, buildApp } from './lib/app.js'
import { ConfigError, USAGE, loadConfig } from './lib/config.js'
import { UNSAID, humanLogs, makeLogger } from './lib/logging.js'

// Commands beside serving: `tile-cannon export …` (lib/export) and `tile-cannon nginx …` (lib/tile-dir).
const COMMANDS = { export: './lib/export/cli.js', nginx: './lib/tile-dir/cli.js' }
const command = Object.hasOwn(COMMANDS, process.argv[2] ?? '') ? COMMANDS[process.argv[2]] : undefined
if (command !== undefined) {
  const { main } = await import(command)
  process.exitCode = await main(process.argv.slice(3))
} else {
  await serve()
}

async function serve () {
  let loaded
  try {
    loaded = loadConfig({ argv: process.argv.slice(2), env: process.env })
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err
    console.error(`tile-cannon: ${err.message} (see --help)`) // one line: the usage is 40
    process.exit(2)
  }
  if (loaded.help) {
    console.log(USAGE)
    process.exit(0)
  }
  const { config } = loaded

  // SIGINT/SIGTERM are handled from the start: opening the catalog can take a remote store's timeout, and a signal
  // without a handler kills node uncleanly (renderer children left behind) or, as PID 1 in a container, is dropped.
  // One during start-up stops it (lib/app.js closes what was opened) and exits 0 without listening.
  const log = makeLogger(config)
  const startup = new AbortController()
  let app = null
  let serving = false
  let closing = false
  process.on('SIGINT', () => shutdown('SIGINT'))
  process.on('SIGTERM', () => shutdown('SIGTERM'))
  process.on('message', (msg) => { if (msg === 'shutdown') shutdown('shutdown message') }) // pm2 on Windows
  // A server a bench started (bench/servers.js) goes with the bench, killed or out of memory: it would be left
  // serving under init otherwise. Only then: pm2's cluster workers have an IPC channel too, and outlive its daemon.
  if (process.env.TILE_CANNON_EXIT_WITH_PARENT === '1') process.on('disconnect', () => shutdown('parent gone'))

  async function shutdown (signal) {
    if (closing) {
      log.warn(`${signal} again: exiting now`)
      process.exit(1)
    }
    closing = true
    if (!serving) {
      log.info(`${signal} during start-up: stopping without serving`)
      startup.abort() // serve() goes on from where start-up stands: stopStarting()
      return
    }
    log.info(`${signal}: finishing in-flight requests, then exiting`)
    const timer = setTimeout(() => process.exit(1), 10_000).unref()
    await app.connections.drain() // stop accepting; a second for open connections to end (lib/closing.js)
    // Fastify closes what is left: idle connections at once, in-flight requests finish, then every onClose hook
    // releases its resources (sets, pools, renderer children). A connection whose answer was already under way at the
    // signal went out keep-alive: it is closed once idle (lib/closing.js).
    await app.close()
    clearTimeout(timer)
    log.info('closed every set and resource; exiting')
    process.exit(0)
  }

  /** Start-up stopped by a signal: what was opened is closed (never listening), and exit 0. */
  async function stopStarting () {
    const timer = setTimeout(() => process.exit(1), 10_000).unref()
    await app?.close()
    clearTimeout(timer)
    log.info('stopped during start-up: closed every set and resource; exiting')
    process.exit(0)
  }

  try {
    app = await buildApp(config, { loggerInstance: log, signal: startup.signal })
  } catch (err) {
    if (err instanceof StartupStopped) return stopStarting() // (buildApp closed its app)
    if (!(err instanceof ConfigError)) throw err
    console.error(`tile-cannon: ${err.message}`) // a setting that cannot be used as it is: one line, no stack
    process.exit(2)
  }
  if (startup.signal.aborted) return stopStarting()
  try {
    await app.listen({ port: config.port, host: config.host, listenTextResolver: () => UNSAID }) // said below, once
  } catch (err) {
    app.log.fatal({ code: err.code }, `cannot listen on ${config.host}:${config.port}: ${err.code === 'EADDRINUSE' ? 'the port is in use' : err.message}`)
    await app.close()
    process.exit(1)
  }
  if (startup.signal.aborted) return stopStarting() // (a signal while listen() bound the port: nothing served yet)
  serving = true

  const { port } = app.server.address()
  const shownHost = ['0.0.0.0', '::', ''].includes(config.host) ? 'localhost' : config.host.includes(':') ? `[${config.host}]` : config.host
  const base = config.publicUrl ?? `http://${shownHost}:${port}`
  const sets = app.catalog.available()
  const listening = `tile-cannon listening on http://${shownHost}:${port} with ${sets.length} tileset(s)`
  const tileJsonOf = (id) => `${base}/${encodeURIComponent(id)}.json`
  if (humanLogs(config)) {
    app.log.info(listening)
    for (const { id } of sets) console.log(`  ${id}: ${tileJsonOf(id)}`)
  } else {
    // JSON logs (pm2, log shippers): stdout holds JSON lines only, so the sets are a field of the line (the first
    // hundred: /list has them all).
    app.log.info({ sets: sets.slice(0, 100).map(({ id }) => ({ id, tilejson: tileJsonOf(id) })) }, listening)
  }

  process.on('SIGHUP', () => {
    app.log.info('SIGHUP: reloading the catalog')
    app.catalog.reload().catch((err) => app.log.error({ err: err.message }, 'reload failed'))
    app.reloadStyles().catch((err) => app.log.error({ err: err.message }, 'reloading styles failed'))
  })

  if (typeof process.send === 'function') process.send('ready') // pm2 wait_ready
}

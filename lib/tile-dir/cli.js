// `tile-cannon nginx [paths and options as for serving…] --tile-dir DIR [--upstream URL] [--listen PORT]`: prints the
// nginx configuration that serves DIR in front of tile-cannon (lib/tile-dir/nginx.js), with each set's Cache-Control
// as tile-cannon would send it (the sets are opened to know it, then closed).
import { buildApp } from '../app.js'
import { ConfigError, loadConfig } from '../config.js'
import { makeLogger } from '../logging.js'
import { nginxConfig } from './nginx.js'
import { tilePlace } from './index.js'

const USAGE = `Usage: tile-cannon nginx [paths and options as for serving…] --tile-dir DIR [--upstream URL] [--listen PORT]

Prints an nginx configuration (for its http {} block) that serves the tiles tile-cannon writes to DIR and hands
everything else to tile-cannon at URL (default http://127.0.0.1:<--port, 3000>). nginx listens on PORT (default 8080).
Run tile-cannon with the same paths, options and --tile-dir.`

/** A port nginx's `listen` takes: 1-65535, alone or after an address (a host name, an IPv4 or a bracketed IPv6 one). */
function isListen (text) {
  const match = /^(?:(?:[\w-]+(?:\.[\w-]+)*|\[[\da-f:.]+\]):)?(\d{1,5})$/i.exec(text)
  return match !== null && Number(match[1]) >= 1 && Number(match[1]) <= 65535
}

export async function main (argv) {
  let loaded
  try {
    loaded = loadConfig({
      argv,
      env: process.env,
      extraFlags: { upstream: { type: 'string' }, listen: { type: 'string' } },
      overrides: { watch: false, demo: false, metrics: { enabled: false }, logLevel: 'warn' },
    })
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err
    console.error(`tile-cannon nginx: ${err.message} (see tile-cannon nginx --help)`) // one line, as the server's
    return 2
  }
  if (loaded.help) {
    console.log(USAGE)
    return 0
  }
  const { config, extra } = loaded
  if (!config.tileDir.dir) {
    console.error(`tile-cannon nginx: --tile-dir is needed\n\n${USAGE}`)
    return 2
  }
  const upstream = extra.upstream ?? `http://127.0.0.1:${config.port}`
  if (!/^http:\/\/[^/]+\/?$/.test(upstream)) {
    console.error(`tile-cannon nginx: --upstream is http://host:port (see tile-cannon nginx --help)`)
    return 2
  }
  if (extra.listen !== undefined && !isListen(extra.listen)) {
    console.error(`tile-cannon nginx: --listen is a port (1-65535) or address:port (127.0.0.1:8080, [::1]:8080), not ${JSON.stringify(extra.listen)} (see tile-cannon nginx --help)`)
    return 2
  }
  // Its sets, not its folder; warnings (a set that does not open) on stderr: stdout is the configuration, often
  // redirected into nginx's conf.d.
  let app
  try {
    app = await buildApp({ ...config, tileDir: { ...config.tileDir, dir: null } }, { loggerInstance: makeLogger(config, process.stderr) })
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err
    console.error(`tile-cannon nginx: ${err.message}`) // nothing given exists (lib/catalog): one line, as when serving
    return 2
  }
  try {
    const places = []
    const entries = [...app.catalog.available()]
    if (app.renderer?.available) for (const style of app.styles.list()) entries.push(app.renderer.tileEntry(style, 256), app.renderer.tileEntry(style, 512))
    for (const entry of entries) {
      const place = tilePlace(entry, config)
      if (place !== null && entry.cacheControl !== config.cacheControl) places.push({ place, cacheControl: entry.cacheControl })
    }
    process.stdout.write(nginxConfig({ dir: config.tileDir.dir, upstream, listen: extra.listen ?? 8080, places, cacheControl: config.cacheControl, cors: config.cors, apiKeys: config.apiKeys }))
    return 0
  } finally {
    await app.close()
  }
}

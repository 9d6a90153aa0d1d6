import { spawnSync } from 'node:child_process'
// Test helpers: an app built from config overrides (logs silenced), and the skip rule for missing dependencies.
import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import pino from 'pino'
import { buildApp } from '../../lib/app.js'
import { loadConfig } from '../../lib/config.js'

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
export const FIXTURES = join(ROOT, '..', 'shared', 'fixtures')
export const HAVE_FIXTURES = existsSync(FIXTURES)

/**
 * Builds the app like server.js does; closed after the test. `logs`: an array to push its log lines to (parsed, info
 * and above; silent without it).
 */
/**
 * The command prefix that runs a process bound by file permissions as a user is (a folder of mode 000 cannot be listed,
 * a file of mode 000 not opened): root without the capabilities that override them (CAP_DAC_OVERRIDE,
 * CAP_DAC_READ_SEARCH), dropped from the bounding set by setpriv. It stays root, so it still reads the checkout
 * wherever that is (CI's copy of the tree is in a mktemp folder of mode 700, which another user cannot enter). [] when
 * not root (permissions bind already); null when root without setpriv (util-linux).
 */
export const WITHOUT_FILE_OVERRIDES = process.getuid?.() !== 0
  ? []
  : spawnSync('setpriv', ['--version']).status === 0 ? ['setpriv', '--bounding-set=-dac_override,-dac_read_search'] : null

export async function makeApp (t, overrides = {}, { logs } = {}) {
  const { config } = loadConfig({ overrides: { logLevel: 'silent', watch: false, demo: false, ...overrides } })
  const loggerInstance = logs === undefined ? undefined : pino({ level: 'info' }, { write: (line) => logs.push(JSON.parse(line)) })
  const app = await buildApp(config, { loggerInstance })
  t.after(() => app.close())
  return app
}

/**
 * Skips a test whose system dependency is missing, saying why. In CI (CI=true) a missing dependency fails instead:
 * CI installs everything, so a skip there would hide a broken install.
 */
export function needs (t, ok, reason) {
  if (ok) return true
  if (process.env.CI === 'true') throw new Error(`missing in CI: ${reason}`)
  t.skip(reason)
  return false
}

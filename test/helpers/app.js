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

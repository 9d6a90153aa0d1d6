// The command lines of the bench scripts that start a database (bench/postgis.js, bench/features.js): node:util's
// parseArgs, strict (an unknown flag or a stray word is refused, never ignored), and each value checked before anything
// is started, a mistake said in one line, exit 2, as bench/run.js and bench/render.js do.
import os from 'node:os'
import { parseArgs } from 'node:util'
import { findTaskset, parseCpuList } from './cpu.js'

/** A mistake in what the bench was asked: its message is the whole answer (no stack), and the exit is 2. */
export class UsageError extends Error {}

/** Says `script: message` on stderr and exits 2. */
export function refuse (script, message) {
  console.error(`${script}: ${message}`)
  process.exit(2)
}

/** parseArgs({ args, options, strict: true })'s values; its own messages ("Unknown option '--x'") as UsageErrors. */
export function readArgs (args, options) {
  try {
    return parseArgs({ args, options, strict: true }).values
  } catch (err) {
    throw new UsageError(`${err.message} (see --help)`)
  }
}

/** The number `value` of option `name`: finite, ≥ min (> min with `above`), whole with `integer`. */
export function numberOption (name, value, { min = 0, above = false, integer = false } = {}) {
  const n = value.trim() === '' ? NaN : Number(value)
  if (!Number.isFinite(n) || (above ? n <= min : n < min) || (integer && !Number.isInteger(n))) {
    throw new UsageError(`--${name} must be ${integer ? 'a whole number' : 'a number'} ${above ? '>' : '≥'} ${min}, not '${value}'`)
  }
  return n
}

/** A comma-separated list of numbers, each as numberOption checks it. */
export function numberListOption (name, value, limits) {
  const list = value.split(',')
  try {
    return list.map((v) => numberOption(name, v, limits))
  } catch (err) {
    throw new UsageError(`${err.message.replace(/, not '.*'$/, '')} each, comma-separated, not '${value}'`)
  }
}

/** A taskset core list of this machine ('0', '1-3', '0,2'), normalised; undefined when not given. Needs taskset. */
export function cpuOption (name, value) {
  if (value === undefined) return undefined
  let cpus
  try {
    cpus = parseCpuList(value)
  } catch (err) {
    throw new UsageError(`--${name}: ${err.message}`)
  }
  const cores = os.cpus().length
  if (cpus.some((c) => c >= cores)) throw new UsageError(`--${name} ${value}: this machine has cores 0-${cores - 1}`)
  if (!findTaskset()) throw new UsageError(`--${name} needs taskset (Debian: util-linux)`)
  return cpus.join(',')
}

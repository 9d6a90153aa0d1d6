// Resuming: what an output records of the export writing it, and whether a new run may continue it. The record holds
// the job (job.js) and `done`, the index (grid.js) below which every tile is finished (written, or absent at the
// source); `reached`, the index below which tiles may have been written (those are looked for before being read).
import { UsageError } from './errors.js'

export const RECORD_VERSION = 1

/** The record an output keeps, as JSON. */
export function progressRecord (job, total, done, reached) {
  return { tool: 'tile-cannon export', version: RECORD_VERSION, job, total, done, reached, complete: done >= total, updated: new Date().toISOString() }
}

/**
 * Where a run over an existing output starts: { done, reached } from its record (text as stored; undefined: the
 * output holds something but no record). Throws a UsageError when it may not be continued: made by something else,
 * or by an export of other options (`--force` starts over instead).
 */
export function resumePoint (text, job, total, label) {
  let record = null
  try {
    record = typeof text === 'string' ? JSON.parse(text) : null
  } catch {}
  if (record === null || record.tool !== 'tile-cannon export' || record.version !== RECORD_VERSION || typeof record.job !== 'object') {
    throw new UsageError(`${label} exists and was not written by tile-cannon export: --force replaces it`)
  }
  const changes = differences(record.job, job)
  if (record.total !== total && changes.length === 0) changes.push(`${total} tiles (was ${record.total})`)
  if (changes.length > 0) {
    throw new UsageError(`${label} holds an export of other options: ${changes.join('; ')}. Run with its options to continue it, or add --force to start over`)
  }
  const index = (n) => (Number.isSafeInteger(n) ? Math.min(Math.max(n, 0), total) : 0)
  const done = index(record.done)
  return { done, reached: Math.max(done, index(record.reached)) }
}

const shown = {
  set: (v) => `'${v}'`,
  zooms: (v) => `${v[0]}-${v[1]}`,
  bbox: (v) => v.join(','),
  format: (v) => v,
  scale: (v) => `@${v}x`,
  encoding: (v) => v,
}

/** What differs between a recorded job and this one, for people: ['zooms 0-14 (was 0-12)', …]. */
function differences (recorded, job) {
  const out = []
  for (const key of Object.keys(shown)) {
    if (JSON.stringify(recorded[key]) !== JSON.stringify(job[key])) {
      out.push(`${key} ${shown[key](job[key])} (was ${recorded[key] === undefined ? 'unset' : shown[key](recorded[key])})`)
    }
  }
  return out
}

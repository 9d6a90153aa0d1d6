// What an export reads: a set of the catalog, or a style rendered to raster tiles (as /styles/:id/{z}/{x}/{y} serves
// it). Either way the tiles come from a lookup resolveTile takes (lib/resolve.js), so they are the routes' own.
import { ExportError, UsageError } from './errors.js'
import { resolveSet } from '../resolve.js'
import { NotFound } from '../errors.js'

/** Kinds that make each tile on request (a database query, a raster warp, a render): fewer reads at once suit them. */
const MAKING_KINDS = new Set(['postgis', 'cog', 'mosaic', 'render'])

/**
 * `id` → { id, kind, source, lookup, makes } (a style's also missingFrom, askAgain, retryPauseMs): `lookup.get()` is what resolveTile asks for the entry (a set's entry by
 * name, so a set re-opened meanwhile is followed; a style's rendered entry at its current revision), `source` the
 * source now (its TileJSON, formats and zooms). A set is looked for first, as URLs find them; then a style.
 */
export function exportTarget (app, id) {
  if (app.catalog.get(id) !== undefined) {
    let entry
    try {
      entry = resolveSet(app.catalog, id)
    } catch (err) {
      if (err instanceof NotFound) throw unknown(app, id)
      throw new ExportError(err.message) // unavailable: its reason
    }
    const parts = entry.parts ?? [entry] // a composite makes tiles when one of its parts does
    return { id: entry.id, kind: entry.kind, source: entry.source, lookup: app.catalog, makes: parts.some((p) => MAKING_KINDS.has(p.kind)) }
  }
  if (app.styles.get(id) !== undefined) {
    const style = app.styles.served(id)
    if (!app.renderer.available) throw new ExportError(`style '${id}' cannot be rendered: ${app.renderer.reason}`)
    const entry = app.renderer.tileEntry(style, 256)
    const { renderer } = app
    // Nothing is kept briefly here: the renderer's warning says what the export does with those tiles (cli.js).
    renderer.incompleteTiles = 'the tiles drawn without it are not written: read again, then left out of the export (the same command fills them)'
    return {
      id: style.id,
      kind: 'render',
      source: entry.source,
      lookup: { get: () => renderer.tileEntry(style, 256) },
      makes: true,
      // A tile drawn while a remote source of the style could not be read (lib/style/render/remote.js): what it lacks,
      // and how its retries ask for it again (at once, a host that could not be reached after its rest).
      missingFrom: () => renderer.remoteFailure(style),
      askAgain: () => renderer.askAgain(style),
      retryPauseMs: renderer.remoteRestMs,
    }
  }
  throw unknown(app, id)
}

function unknown (app, id) {
  const sets = app.catalog.available().map((e) => e.id)
  const styles = app.styles.list().map((s) => s.id)
  const lines = [`no set or style '${id}'`, `  sets: ${sets.length > 0 ? sets.join(', ') : '(none found in the paths given)'}`]
  if (styles.length > 0) lines.push(`  styles: ${styles.join(', ')}`)
  const unavailable = app.catalog.unavailable()
  if (unavailable.length > 0) lines.push(`  unavailable: ${unavailable.map((u) => `${u.id} (${u.reason})`).join(', ')}`)
  return new UsageError(lines.join('\n'))
}

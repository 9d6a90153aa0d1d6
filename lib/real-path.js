// Files by their real path, inside given folders: a link in them may lead elsewhere in the folders (a sprite shared by
// two styles), never out of them. Used for the styles and fonts folders and a mosaic's local parts.
import { realpath } from 'node:fs/promises'
import { sep } from 'node:path'

export const OUTSIDE = Object.freeze({ outside: true })

/**
 * `path` with links followed, when its real path is one of `roots` (real paths) or inside one: { file }; OUTSIDE when
 * a link leads out of them (the file is never opened); null when there is no such path.
 */
export async function realFileIn (path, roots) {
  let real
  try {
    real = await realpath(path)
  } catch {
    return null
  }
  return roots.some((root) => real === root || real.startsWith(root.endsWith(sep) ? root : root + sep)) ? { file: real } : OUTSIDE
}

// @maplibre/mlt, imported through module hooks scoped to it (lib/variants/mlt-hooks.js says why), rather than bundled
// at install: no build step or bundler to keep, and the package's own files are what runs. Loaded on first use, in the
// thread that makes an MLT tile (the event loop for small tiles, a variants worker for large ones): a server that never
// makes one never installs the hooks.
import module, { createRequire } from 'node:module'
import { dirname } from 'node:path'
import { pathToFileURL } from 'node:url'
import * as hooks from './mlt-hooks.js'

let loading = null

/** The package's exports ({ encodeTile, decodeTile, … }), once per thread. */
export function loadMlt () {
  if (loading === null) {
    const root = pathToFileURL(dirname(createRequire(import.meta.url).resolve('@maplibre/mlt/package.json')) + '/').href
    // registerHooks where Node has it: module.register is deprecated there (DEP0205) and runs its hooks on a thread.
    if (typeof module.registerHooks === 'function') {
      hooks.setRoot(root)
      module.registerHooks({ resolve: hooks.resolve, load: hooks.load })
    } else {
      module.register('./mlt-hooks.js', { parentURL: import.meta.url, data: { root } })
    }
    loading = import('@maplibre/mlt')
  }
  return loading
}

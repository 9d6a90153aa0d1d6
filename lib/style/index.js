// Styles and fonts as a plugin: `app.styles` (lib/style/styles.js), `app.fonts` (lib/style/glyphs.js) and `app.sprites`
// (lib/style/sprites.js), read at start,
// read again when their folders change (config watch) and on `app.reloadStyles()` (SIGHUP); watchers closed on close.
import { watch } from 'node:fs'
import fp from 'fastify-plugin'
import { FontCatalog } from './glyphs.js'
import { SpriteFiles } from './sprites.js'
import { StyleCatalog } from './styles.js'
import { dataFolders } from '../catalog/discover.js'

async function stylePlugin (app, config) {
  const styles = new StyleCatalog({ dir: config.styles, log: app.log, dataFolders: () => dataFolders(config) })
  const fonts = new FontCatalog({ dir: config.fonts, defaultFont: config.defaultFont, log: app.log })
  await Promise.all([styles.load(), fonts.load()])
  if (styles.dir !== null) app.log.info({ styles: styles.list().length, broken: styles.broken.size }, 'styles loaded')
  app.decorate('styles', styles)
  app.decorate('fonts', fonts)
  app.decorate('sprites', new SpriteFiles(styles)) // one read per sprite file and revision, for routes and renderer
  // The fonts first: the styles' loading tells what was drawn from both (lib/tile-dir checks rendered tiles then).
  app.decorate('reloadStyles', () => fonts.load().then(() => styles.load()))

  const watchers = []
  if (config.watch) {
    for (const [dir, target] of [[styles.dir, styles], [fonts.dir, fonts]]) {
      if (dir === null) continue
      let timer = null
      try {
        // Recursive: a style's folder (NAME/style.json, its sprites) changes inside the styles folder.
        const watcher = watch(dir, { recursive: true }, () => {
          clearTimeout(timer)
          // A font changed: rendered tiles drawn with it are checked again too, as after a style's change.
          const reload = target === fonts ? () => fonts.load().then(() => styles.onLoad?.()) : () => target.load()
          timer = setTimeout(() => reload().catch((err) => app.log.warn({ err: err.message }, 'reload failed')), config.watchDebounceMs)
        })
        watcher.on('error', () => {}) // a removed folder: SIGHUP reloads
        watchers.push({ watcher, stop: () => clearTimeout(timer) })
      } catch (err) {
        app.log.warn({ err: err.message }, 'cannot watch the styles or fonts folder: changes need SIGHUP')
      }
    }
  }
  app.addHook('onClose', () => { for (const w of watchers) { w.stop(); w.watcher.close() } })
}

export default fp(stylePlugin, { name: 'tile-cannon-styles', fastify: '5.x' })

// Module hooks for @maplibre/mlt 1.3.0 alone (lib/variants/mlt.js installs them): its dist is ES modules whose
// relative imports leave out `.js` and whose package.json does not say `"type": "module"`, so Node's own loader
// refuses it. Inside that package's folder, and only there, `./x` resolves to `./x.js` and `.js` files load as ES
// modules; every other import passes straight on to Node. The same hooks serve module.registerHooks (synchronous, in
// the thread: Node ≥ 22.15) and module.register (asynchronous, on a hooks thread: Node 20, where it is all there is).
let root = null // file: URL of the package's folder, ending in '/'

/** module.register's: the package's folder, from the registering thread. */
export function initialize (data) {
  root = data.root
}

export const setRoot = (url) => { root = url }

const inPackage = (url) => root !== null && typeof url === 'string' && url.startsWith(root)
const relativeWithoutExtension = (specifier) => (specifier.startsWith('./') || specifier.startsWith('../')) && !/\.[cm]?js$/.test(specifier)

export function resolve (specifier, context, next) {
  return next(inPackage(context.parentURL) && relativeWithoutExtension(specifier) ? `${specifier}.js` : specifier, context)
}

export function load (url, context, next) {
  return next(url, inPackage(url) && url.endsWith('.js') ? { ...context, format: 'module' } : context)
}

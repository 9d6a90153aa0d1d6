// What the configuration names, as specs the catalog opens: { path | url, kind } and configured sets { id, … }. Folders
// are listed (not recursed into); a file no kind serves is logged and skipped, as is one whose kind does not claim it
// (a .json that is not a mosaic: a style, a TileJSON). A bucket prefix (s3://bucket/prefix/) is listed like a folder.
// A configured folder with `mosaic: true` is one set.
import { readdir, stat } from 'node:fs/promises'
import { extname, join, resolve } from 'node:path'
import { FALLBACK, GROUP_KINDS, KINDS, fileKindsText, kindForFile, kindForUrl } from '../sources/index.js'
import { isS3Url } from '../remote/s3.js'
import { listRemotePrefix } from '../remote/reader.js'
import { Slots } from './slots.js'

const exists = (path) => stat(path).then(() => true, () => false)

/** A stat's error for a path that is not there (as against there but out of reach: EACCES on a folder above it). */
export const isMissing = (err) => err.code === 'ENOENT' || err.code === 'ENOTDIR'

export const isUrl = (s) => /^[a-z][a-z0-9+.-]*:\/\//i.test(s)

/** The spec of one URL or file path (its kind undefined when none serves it). */
export const specOf = (item) => (isUrl(item) ? { url: item, kind: kindForUrl(item) } : { path: item, kind: kindForFile(item) })

/** The kind that opens a configured folder as one set (`mosaic: true`). */
const FOLDER_KIND = KINDS.find((k) => k.opensFolders)

/** The spec of a file or folder path, as the set `id` is configured: a folder with `mosaic: true` is one set. */
export const pathSpec = (config, path, id) => (config.sets[id]?.mosaic && FOLDER_KIND ? { path, kind: FOLDER_KIND } : specOf(path))

/**
 * Does the kind of a file take it? A kind that shares its extension with other documents (.json) says so by reading
 * it (`claims`); one not taken is skipped like a file of no kind (logged at debug, once per file).
 */
export async function claimed (spec, log) {
  if (!spec.kind?.claims) return true
  if (await spec.kind.claims(spec.path)) return true
  if (!unclaimed.has(spec.path)) {
    if (unclaimed.size > 10_000) unclaimed.clear()
    unclaimed.add(spec.path)
    log?.debug({ path: spec.path }, `not a ${spec.kind.title} file: skipped`)
  }
  return false
}
const unclaimed = new Set()

/**
 * Where local files may be read from by a set or style that names other files (a mosaic's parts, a style's GeoJSON):
 * the served folders, and each served or configured file itself. A file stands for that file only: its folder made a
 * data folder let such documents read its siblings (`tile-cannon ~/roads.mbtiles` opened the home folder to them).
 * Consumers match a file's real path against these: inside a folder, or equal to a file.
 */
export function dataFolders (config) {
  const items = [...config.paths, ...Object.values(config.sets).map((s) => s.path).filter(Boolean)]
  return [...new Set(items.filter((item) => !isUrl(item)).map((item) => resolve(item)))]
}

/** An s3:// URL naming a prefix, served like a folder: a bucket, a key ending in '/', or one with no extension. */
export const isPrefixUrl = (item) => isS3Url(item) && /^s3:\/\/[^/]+(\/([^?#]*\/)?[^./?#]*)?$/i.test(item)
/** A prefix URL as the start of its objects' URLs (s3://bucket/prefix/). */
export const prefixOf = (item) => (item.endsWith('/') ? item : item + '/')

/** The specs of the objects directly under a prefix that a kind serves, sorted like a folder's files. */
export async function prefixSpecs (prefix, config) {
  return (await listRemotePrefix(prefix, config.s3)).map(({ url }) => specOf(url)).filter((spec) => spec.kind)
}

// Bucket prefixes listed at once (as sets are opened, lib/catalog/index.js): one whose store does not answer waits out
// its timeout while the others list.
const LIST_AT_ONCE = 8

/**
 * Does the configuration name anything to serve: a path or URL, a set of its own, a database? The demo is for when it
 * names nothing: never in place of what was named and is missing, empty or cannot be listed now.
 */
const namesSomething = (config) => config.paths.length > 0 ||
  Object.values(config.sets).some((s) => s.path || s.url) ||
  GROUP_KINDS.some((kind) => (kind.configuredUrls?.(config) ?? []).length > 0)

/** How many places the configuration names: paths and URLs, sets of their own, databases. */
export const namedCount = (config) => config.paths.length + Object.values(config.sets).filter((s) => s.path || s.url).length +
  GROUP_KINDS.reduce((n, kind) => n + (kind.configuredUrls?.(config) ?? []).filter((url) => !config.paths.includes(url)).length, 0)

/**
 * Every spec the configured paths, sets and group URLs (a database) hold now; the demo when nothing is named. Prefixes
 * that could not be listed are added to `unlisted` (the catalog tries them again, and keeps the sets found there);
 * local paths that do not exist to `missing` (as given, or `sets.<id>.path`), and paths given that nothing can be served
 * from to `unserved` ({ path, why }: a folder that cannot be listed, or a path a folder above which cannot be searched,
 * with its absolute path as `folder`, whose sets the catalog keeps; a file of no kind), for the caller to say. Links in a served folder whose target does not exist (yet)
 * go to `broken` ({ path: the folder as given, name, link: its absolute path }), for the caller to say and wait for.
 */
export async function discoverSpecs (config, log, unlisted = [], missing = [], unserved = [], broken = []) {
  const specs = []
  const has = (spec) => specs.some((s) => (spec.path ? s.path === spec.path : s.url === spec.url))
  // Every prefix's listing starts now, each awaited at its place in `paths` below: specs keep the order given.
  const slots = new Slots(LIST_AT_ONCE)
  const listings = config.paths.map((item) => {
    if (!isPrefixUrl(item)) return null
    const listing = slots.run(() => prefixSpecs(prefixOf(item), config))
    listing.catch(() => {}) // (judged when its turn comes)
    return listing
  })
  for (const [id, options] of Object.entries(config.sets)) {
    if (options.url) specs.push({ ...specOf(options.url), id })
    else if (options.path) {
      const path = resolve(options.path)
      // Still a spec: the catalog opens nothing for it now, and the watcher serves the file once it appears. There but
      // out of reach (a folder above it cannot be searched) is not missing: kept as a path given is, below.
      const reach = await stat(path).then(() => null, (err) => err)
      if (reach !== null) {
        if (isMissing(reach)) missing.push(`${options.path} (sets.${id}.path)`)
        else unserved.push({ path: `${options.path} (sets.${id}.path)`, why: cannotSearch(reach), folder: path })
      }
      specs.push({ ...pathSpec(config, path, id), id })
    }
  }
  for (const [index, item] of config.paths.entries()) {
    if (isPrefixUrl(item)) {
      try {
        for (const spec of await listings[index]) if (!has(spec)) specs.push(spec)
      } catch (err) {
        // The reason says why (access denied, unreachable); the bucket is named by its place in `paths` only.
        log.error({ paths: index, reason: err.message }, 'bucket prefix not listed: nothing served from it for now')
        unlisted.push(prefixOf(item))
      }
      continue
    }
    if (isUrl(item)) {
      if (!has({ url: item })) specs.push(specOf(item))
      continue
    }
    const path = resolve(item)
    let info
    try {
      info = await stat(path)
    } catch (err) {
      // Not there; or there, but a folder above it cannot be searched now (EACCES: a mount glitch, a permissions slip):
      // kept as a folder that cannot be listed is (its sets served on from their open handles), not said to be missing.
      if (isMissing(err)) missing.push(item)
      else unserved.push({ path: item, why: cannotSearch(err), folder: path })
      continue
    }
    if (info.isDirectory()) {
      let files
      try {
        files = await readdir(path, { withFileTypes: true })
      } catch (err) {
        unserved.push({ path: item, why: `the folder cannot be listed (${err.code ?? err.message})`, folder: path })
        continue
      }
      let found = 0
      for (const file of files.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
        const spec = specOf(join(path, file.name))
        if (!spec.kind || has(spec)) continue
        // A link to a file not there (yet): nothing to open or claim; the catalog says so and waits for its target.
        if (file.isSymbolicLink() && !(await exists(spec.path))) {
          broken.push({ path: item, name: file.name, link: spec.path })
          found++
        } else if (await claimed(spec, log)) {
          specs.push(spec)
          found++
        }
      }
      // Still served: files put there later are (watched, or at SIGHUP); said so an empty catalog is not a mystery.
      if (found === 0) log.warn({ path: item }, `no tileset file in this folder (yet): ${config.watch ? 'it is watched, and files put there are served' : 'files put there are served at SIGHUP'}`)
    } else if (kindForFile(path) && await claimed(specOf(path), log)) {
      if (!has({ path })) specs.push(specOf(path))
    } else {
      unserved.push({ path: item, why: notServedWhy(path) })
    }
  }
  for (const kind of GROUP_KINDS) {
    for (const url of kind.configuredUrls?.(config) ?? []) if (!has({ url })) specs.push({ url, kind })
  }
  if (!namesSomething(config) && config.demo && FALLBACK) specs.push({ id: 'countries', kind: FALLBACK })
  return specs
}

/** Why a path that is there (stat failed otherwise than ENOENT) cannot be reached. */
const cannotSearch = (err) => `a folder on its path cannot be searched (${err.code ?? err.message})`

/** Why a file given is not served, and for a config file's look the flag that was likely meant. */
function notServedWhy (path) {
  const ext = extname(path).toLowerCase()
  const why = kindForFile(path)
    ? `not a ${kindForFile(path).title} file (a style, a TileJSON or a config is not a tileset)`
    : `not a tileset file (${fileKindsText()})`
  return ['.yaml', '.yml', '.json'].includes(ext) ? `${why}; did you mean --config ${path}?` : why
}

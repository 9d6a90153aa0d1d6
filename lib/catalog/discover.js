// What the configuration names, as specs the catalog opens: { path | url, kind } and configured sets { id, … }. Folders
// are listed (not recursed into); a file no kind serves is logged and skipped. A bucket prefix (s3://bucket/prefix/)
// is listed like a folder.
import { readdir, stat } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { FALLBACK, GROUP_KINDS, fileKindsText, kindForFile, kindForUrl } from '../sources/index.js'
import { isS3Url } from '../remote/s3.js'
import { listRemotePrefix } from '../remote/reader.js'

export const isUrl = (s) => /^[a-z][a-z0-9+.-]*:\/\//i.test(s)

/** The spec of one URL or file path (its kind undefined when none serves it). */
export const specOf = (item) => (isUrl(item) ? { url: item, kind: kindForUrl(item) } : { path: item, kind: kindForFile(item) })

/** An s3:// URL naming a prefix, served like a folder: a bucket, a key ending in '/', or one with no extension. */
export const isPrefixUrl = (item) => isS3Url(item) && /^s3:\/\/[^/]+(\/([^?#]*\/)?[^./?#]*)?$/i.test(item)
/** A prefix URL as the start of its objects' URLs (s3://bucket/prefix/). */
export const prefixOf = (item) => (item.endsWith('/') ? item : item + '/')

/** The specs of the objects directly under a prefix that a kind serves, sorted like a folder's files. */
export async function prefixSpecs (prefix, config) {
  return (await listRemotePrefix(prefix, config.s3)).map(({ url }) => specOf(url)).filter((spec) => spec.kind)
}

/**
 * Every spec the configured paths, sets and group URLs (a database) hold now; the demo when there is none. Prefixes
 * that could not be listed are added to `unlisted` (the catalog tries them again, and keeps the sets found there).
 */
export async function discoverSpecs (config, log, unlisted = []) {
  const specs = []
  const has = (spec) => specs.some((s) => (spec.path ? s.path === spec.path : s.url === spec.url))
  for (const [id, options] of Object.entries(config.sets)) {
    if (options.url) specs.push({ ...specOf(options.url), id })
    else if (options.path) specs.push({ ...specOf(resolve(options.path)), id })
  }
  for (const [index, item] of config.paths.entries()) {
    if (isPrefixUrl(item)) {
      try {
        for (const spec of await prefixSpecs(prefixOf(item), config)) if (!has(spec)) specs.push(spec)
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
    } catch {
      log.error({ path: item }, 'path not found: nothing served from it')
      continue
    }
    if (info.isDirectory()) {
      for (const name of (await readdir(path)).sort()) {
        const spec = specOf(join(path, name))
        if (spec.kind && !has(spec)) specs.push(spec)
      }
    } else if (kindForFile(path)) {
      if (!has({ path })) specs.push(specOf(path))
    } else {
      log.error({ path: item }, `not a tileset file (${fileKindsText()}): skipped`)
    }
  }
  for (const kind of GROUP_KINDS) {
    for (const url of kind.configuredUrls?.(config) ?? []) if (!has({ url })) specs.push({ url, kind })
  }
  if (specs.length === 0 && config.demo && FALLBACK) specs.push({ id: 'countries', kind: FALLBACK })
  return specs
}

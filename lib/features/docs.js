// The JSON documents of the API but the features: landing page, conformance, collections, a collection, its
// queryables. `base` is the API's root URL (…/ogc); `key(url)` adds the client's API key to a link (lib/urls.js).
import { collectionDoc, collectionOf, queryablesDoc } from './collection.js'
import { CONFORMANCE, QUERYABLES_REL, TYPES } from './conformance.js'

/** self and alternate: the document as JSON (`type`) and as HTML. */
export const selfLinks = (url, key, type = TYPES.json) => [
  { href: key(`${url}${url.includes('?') ? '&' : '?'}f=json`), rel: 'self', type, title: 'this document' },
  { href: key(`${url}${url.includes('?') ? '&' : '?'}f=html`), rel: 'alternate', type: TYPES.html, title: 'this document as HTML' },
]

/**
 * A collection or feature id as one path segment of a link. encodeURIComponent leaves dots as they are, and URL
 * resolution (RFC 3986 5.2.4: curl, GDAL, Python) removes a segment `.` or `..`: `items/..` led to the collection.
 * `%2E%2E` is no dot segment there, and reaches the route as `..`. (Browsers and fetch, by the WHATWG URL standard,
 * read `%2E` as a dot too: no URL names such an id for them.)
 */
export const pathSegment = (id) => (id === '.' || id === '..' ? id.replaceAll('.', '%2E') : encodeURIComponent(id))

export const collectionUrl = (base, id) => `${base}/collections/${pathSegment(id)}`

export function landingDoc (base, key) {
  return {
    title: 'tile-cannon',
    description: 'OGC API – Features: the PostGIS tables and views served here, as GeoJSON',
    links: [
      ...selfLinks(base, key),
      { href: key(`${base}/api`), rel: 'service-desc', type: TYPES.openapi, title: 'the API definition (OpenAPI 3.0)' },
      { href: key(`${base}/api?f=html`), rel: 'service-doc', type: TYPES.html, title: 'the API definition as a page' },
      { href: key(`${base}/conformance`), rel: 'conformance', type: TYPES.json, title: 'the conformance classes implemented' },
      { href: key(`${base}/collections`), rel: 'data', type: TYPES.json, title: 'the collections' },
    ],
  }
}

export const conformanceDoc = (base, key) => ({ conformsTo: CONFORMANCE, links: selfLinks(`${base}/conformance`, key) })

export function collectionWithLinks (base, key, entry, c) {
  const url = collectionUrl(base, entry.id)
  return {
    ...collectionDoc(entry, c),
    links: [
      ...selfLinks(url, key),
      { href: key(`${url}/items`), rel: 'items', type: TYPES.geojson, title: 'the features' },
      { href: key(`${url}/items?f=html`), rel: 'items', type: TYPES.html, title: 'the features on a map' },
      { href: key(`${url}/queryables`), rel: QUERYABLES_REL, type: TYPES.schema, title: 'the properties to filter and sort by' },
    ],
  }
}

/** Every collection of the catalog, in the order found. */
export function collectionsOf (catalog) {
  const out = []
  for (const entry of catalog.available()) {
    const c = collectionOf(entry)
    if (c !== null) out.push({ entry, c })
  }
  return out
}

export function collectionsDoc (base, key, catalog) {
  return {
    links: selfLinks(`${base}/collections`, key),
    collections: collectionsOf(catalog).map(({ entry, c }) => collectionWithLinks(base, key, entry, c)),
  }
}

export function queryablesWithLinks (base, key, entry, c) {
  const url = `${collectionUrl(base, entry.id)}/queryables`
  return { ...queryablesDoc(entry, c, url), links: [...selfLinks(url, key, TYPES.schema), { href: key(collectionUrl(base, entry.id)), rel: 'collection', type: TYPES.json }] }
}

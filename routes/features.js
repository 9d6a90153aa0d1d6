// OGC API – Features (lib/features), under the configured prefix (/ogc): the landing page, conformance, the API
// definition, collections, a collection, its queryables, its features and a feature. Errors are thrown (lib/errors.js
// types) and answered by the app's error handler: 400 for a bad parameter, 404 for an unknown collection or feature,
// 503 when the database cannot answer.
import { BadRequest, NotFound } from '../lib/errors.js'
import { addVary, keyed } from '../lib/urls.js'
import { ASSETS } from '../lib/viewer/index.js'
import { findCollection } from '../lib/features/collection.js'
import { TYPES } from '../lib/features/conformance.js'
import { collectionUrl, collectionWithLinks, collectionsDoc, collectionsOf, conformanceDoc, landingDoc, pathSegment, queryablesWithLinks } from '../lib/features/docs.js'
import { apiPage, documentPage, featuresPage } from '../lib/features/html.js'
import { answerRows, encodeWhole, queryFailure } from '../lib/features/items.js'
import { chooseCoding, chooseFormat } from '../lib/features/negotiate.js'
import { openApiDoc } from '../lib/features/openapi.js'
import { featurePool } from '../lib/features/pool-share.js'
import { readItemQuery, readItemsQuery } from '../lib/features/params.js'
import { itemStatement, itemsStatement, itemsValues } from '../lib/features/sql.js'
import { GET_HEAD } from './http.js'

const INTEGER_KEY = new Set(['int2', 'int4', 'int8'])
const noop = () => {}

/** A 304 stands for its 200 but carries no content: no Content-Encoding either (metadataValidators drops the type). */
function noEncodingOn304 (request, reply, payload, done) {
  if (reply.statusCode === 304) reply.removeHeader('content-encoding')
  done(null, payload)
}

/** Only `f` on the documents: anything else is a 400 (as on /items). */
function onlyF (query) {
  for (const name of Object.keys(query)) if (name !== 'f') throw new BadRequest(`unknown parameter ${JSON.stringify(name.slice(0, 100))}: this resource takes f`)
}

export default async function featureRoutes (app) {
  const { catalog, features, links, metadataValidators } = app
  const onSend = [metadataValidators, noEncodingOn304]
  const rootOf = (request, reply) => links(request, reply) + features.prefix // adds Vary: Host (lib/urls.js)
  const keyOf = (request) => (url) => keyed(request, url)

  /**
   * A small document, made once per catalog state (lib/features/index.js): `make(root, key)` → its JSON, or throws
   * (404). ETag and 304 from metadataValidators, which also sets the metadata Cache-Control.
   */
  function document (request, reply, name, make, { title, type = TYPES.json, htmlPage = (json) => documentPage(title(json), json) }) {
    onlyF(request.query)
    const format = chooseFormat(request, ['json', 'html'])
    const root = rootOf(request, reply)
    const coding = chooseCoding(request)
    const answer = features.cached(`${name}\n${format}\n${root}\n${request.linkKey}`, coding, () => {
      const key = keyOf(request)
      const json = make(root, key)
      return format === 'html' ? htmlPage(json, root, key) : JSON.stringify(json)
    })
    reply.header('content-type', format === 'html' ? 'text/html; charset=utf-8' : type)
    addVary(reply, 'Accept, Accept-Encoding')
    const send = ({ bytes, coding }) => {
      if (coding !== 'identity') reply.header('content-encoding', coding)
      return reply.send(bytes)
    }
    return answer instanceof Promise ? answer.then(send) : send(answer)
  }

  const route = (url, handler, options = {}) => app.route({ method: GET_HEAD, url, ...options, handler })

  route('/', (request, reply) => document(request, reply, 'landing', landingDoc, { title: () => 'OGC API – Features' }), { onSend })
  route('/conformance', (request, reply) => document(request, reply, 'conformance', conformanceDoc, { title: () => 'Conformance' }), { onSend })
  route('/api', (request, reply) => document(request, reply, 'api',
    (root) => openApiDoc(root, collectionsOf(catalog), features.options), { type: TYPES.openapi, htmlPage: (api, root, key) => apiPage(api, key(`${root}/api?f=json`)) }), { onSend })
  route('/collections', (request, reply) => document(request, reply, 'collections', (root, key) => collectionsDoc(root, key, catalog), { title: () => 'Collections' }), { onSend })
  route('/collections/:collectionId', (request, reply) => {
    const { entry, collection } = findCollection(catalog, request.params.collectionId)
    return document(request, reply, `collection\n${entry.id}`, (root, key) => collectionWithLinks(root, key, entry, collection), { title: (doc) => doc.title })
  }, { onSend })
  route('/collections/:collectionId/queryables', (request, reply) => {
    const { entry, collection } = findCollection(catalog, request.params.collectionId)
    return document(request, reply, `queryables\n${entry.id}`, (root, key) => queryablesWithLinks(root, key, entry, collection), { title: (doc) => `Queryables of ${doc.title}`, type: TYPES.schema })
  }, { onSend })

  /** The headers of features: their type and CRS, the set's Cache-Control (its tiles' lifetime), Vary. */
  function featureHeaders (reply, entry, format, crs, coding) {
    reply.header('content-type', format === 'json' ? TYPES.json : TYPES.geojson)
    reply.header('content-crs', `<${crs.uri}>`)
    reply.header('cache-control', entry.cacheControl)
    addVary(reply, 'Accept, Accept-Encoding')
    if (coding !== 'identity') reply.header('content-encoding', coding)
  }

  /**
   * The features page for browsers: the features of the same query as GeoJSON (`search`, with f=geojson and no crs:
   * the map is drawn in CRS84), inline when `inline` (the answer's text: the page then has the status, and the
   * lifetime, of its data) or fetched by the page.
   */
  async function featuresHtml (request, reply, root, entry, url, search, inline = null) {
    const base = root.slice(0, -features.prefix.length)
    const page = featuresPage(entry.source.tilejson.name ?? entry.id, keyed(request, `${url}?${search}`), features.viewer ? `${base}${ASSETS}` : null, inline)
    // Compressed as the GeoJSON it carries would be: a page of features is up to 512 KiB of text.
    const coding = inline === null ? 'identity' : chooseCoding(request)
    reply.header('content-type', 'text/html; charset=utf-8')
    reply.header('cache-control', inline === null ? 'no-cache' : entry.cacheControl)
    addVary(reply, 'Accept, Accept-Encoding')
    if (coding !== 'identity') reply.header('content-encoding', coding)
    return reply.send(await encodeWhole(page, coding))
  }

  /** The query of a features page: the request's, as GeoJSON in CRS84. */
  const htmlQuery = (query) => {
    const { crs, f, ...rest } = query
    return { ...rest, f: 'geojson' }
  }

  // A query's failure as its answer; a table or column gone since discovery has its database discovered again.
  const failed = (entry, err, log, clientValues) => {
    catalog.readFailed(entry, err)
    return queryFailure(entry, err, log, clientValues)
  }
  /** The decimals of `crs` (see lib/features/index.js): awaited only for an SRID not met before. */
  const precisionOf = async (request, entry, c, crs) => {
    const precision = features.precision(c, crs)
    if (typeof precision === 'number') return precision
    try {
      return await precision
    } catch (err) {
      throw failed(entry, err, request.log)
    }
  }

  route('/collections/:collectionId/items', async (request, reply) => {
    const { entry, collection: c } = findCollection(catalog, request.params.collectionId)
    const format = chooseFormat(request, ['geojson', 'json', 'html'])
    const html = format === 'html'
    const query = html ? htmlQuery(request.query) : request.query
    const q = readItemsQuery(query, c, features.options)
    const search = new URLSearchParams(query)
    const root = rootOf(request, reply)
    const url = `${collectionUrl(root, entry.id)}/items`

    const precision = await precisionOf(request, entry, c, q.crs)
    const statement = itemsStatement(c, q, precision, features.options.orderByKey)
    const values = itemsValues(q)
    const pool = featurePool(c.d.pool) // at most half the connections: the tiles keep the rest
    const count = q.count ? pool.query({ name: statement.countName, text: statement.countText, values: values.slice(0, -2) }) : null
    count?.catch(noop) // awaited by the suffix; a failure there ends the answer
    // Pages keep every parameter of this one (the limit as applied), at another offset or in another format.
    const page = (offset, f = search.get('f')) => {
      const s = new URLSearchParams(search)
      s.set('limit', String(q.limit))
      s.set('offset', String(offset))
      if (f === null) s.delete('f')
      else s.set('f', f)
      return keyed(request, `${url}?${s}`)
    }
    const type = format === 'json' ? TYPES.json : TYPES.geojson
    const suffix = async (returned, more) => {
      // numberMatched: counted when asked; free on the last page (a partial page ends the set).
      const matched = count !== null
        ? Number((await count).rows[0].count)
        : !more && (returned > 0 || q.offset === 0) ? q.offset + returned : undefined
      const pageLinks = [
        { href: keyed(request, `${url}${search.size ? `?${search}` : ''}`), rel: 'self', type, title: 'this page' },
        { href: page(q.offset, 'html'), rel: 'alternate', type: TYPES.html, title: 'this page as HTML' },
        ...(more ? [{ href: page(q.offset + q.limit), rel: 'next', type, title: 'the next page' }] : []),
        ...(q.offset > 0 ? [{ href: page(Math.max(0, q.offset - q.limit)), rel: 'prev', type, title: 'the previous page' }] : []),
        { href: keyed(request, collectionUrl(root, entry.id)), rel: 'collection', type: TYPES.json, title: 'the collection' },
      ]
      return `],"numberReturned":${returned}${matched === undefined ? '' : `,"numberMatched":${matched}`},"links":${JSON.stringify(pageLinks)}}`
    }
    const coding = html ? 'identity' : chooseCoding(request)
    let answer
    try {
      answer = await answerRows({
        pool,
        statement,
        values,
        limit: q.limit,
        prefix: `{"type":"FeatureCollection","timeStamp":"${new Date().toISOString()}","features":[`,
        suffix,
        coding,
      })
    } catch (err) {
      throw failed(entry, err, request.log, q.filters.length > 0 || q.datetime !== null)
    }
    if (html) {
      // The page has its features in it (one request, and its status is theirs: a 503 when the database is down).
      // A page too large to hold (past items.js BUFFERED) is left to the page to fetch: its query is stopped.
      answer.stream?.destroy()
      return featuresHtml(request, reply, root, entry, url, search, answer.text ?? null)
    }
    featureHeaders(reply, entry, format, q.crs, coding)
    return reply.send(answer.stream ?? await encodeWhole(answer.text, coding))
  })

  route('/collections/:collectionId/items/:featureId', async (request, reply) => {
    const { entry, collection: c } = findCollection(catalog, request.params.collectionId)
    const id = request.params.featureId
    if (c.key === null) throw new NotFound(`collection '${entry.id}' has no primary key: its features have no stable id to be fetched by`)
    const format = chooseFormat(request, ['geojson', 'json', 'html'])
    const q = readItemQuery(request.query, c)
    const root = rootOf(request, reply)
    const url = `${collectionUrl(root, entry.id)}/items/${pathSegment(id)}`
    const missing = () => new NotFound(`no feature '${id.slice(0, 100)}' in collection '${entry.id}'`)
    if (INTEGER_KEY.has(c.key.type) && !/^[-+]?\d{1,19}$/.test(id)) throw missing()

    const precision = await precisionOf(request, entry, c, q.crs)
    const statement = itemStatement(c, q, precision)
    let res
    try {
      res = await featurePool(c.d.pool).query({ name: statement.name, text: statement.text, values: [id], rowMode: 'array' })
    } catch (err) {
      const failure = failed(entry, err, request.log, true)
      throw failure instanceof BadRequest ? missing() : failure // an id that is no value of the key's type: no such feature
    }
    const text = res.rows[0]?.[0]
    if (text === undefined) throw missing()
    // The page for browsers, once the feature is known to be there: a missing one is a 404 for them too.
    if (format === 'html') return featuresHtml(request, reply, root, entry, url, new URLSearchParams(htmlQuery(request.query)))
    const itemLinks = [
      { href: keyed(request, `${url}?f=${format}`), rel: 'self', type: format === 'json' ? TYPES.json : TYPES.geojson, title: 'this feature' },
      { href: keyed(request, `${url}?f=html`), rel: 'alternate', type: TYPES.html, title: 'this feature as HTML' },
      { href: keyed(request, collectionUrl(root, entry.id)), rel: 'collection', type: TYPES.json, title: 'the collection' },
    ]
    const coding = chooseCoding(request)
    featureHeaders(reply, entry, format, q.crs, coding)
    return reply.send(await encodeWhole(`${text.slice(0, -1)},"links":${JSON.stringify(itemLinks)}}`, coding))
  })
}

// The API definition (/api): OpenAPI 3.0, every route and parameter, the collection ids as an enum. Made once per
// catalog state and host (lib/features/index.js caches it).
import { CONFORMANCE, TYPES } from './conformance.js'
import { ITEMS_PARAMETERS } from './params.js'
import { pathSegment } from './docs.js'
import { schemaOf } from './collection.js'

const json = (schemaRef, type = TYPES.json) => ({ content: { [type]: { schema: { $ref: schemaRef } }, [TYPES.html]: { schema: { type: 'string' } } } })
const answer = (description, schemaRef, type) => ({ description, ...json(schemaRef, type) })
const ERRORS = {
  400: { $ref: '#/components/responses/BadRequest' },
  404: { $ref: '#/components/responses/NotFound' },
  503: { $ref: '#/components/responses/Unavailable' },
}
const get = (summary, operationId, parameters, responses) => ({ get: { summary, operationId, parameters, responses: { ...responses, ...ERRORS } } })
const ref = (name) => ({ $ref: `#/components/parameters/${name}` })
const queryParam = (name, description, schema, extra = {}) => ({ name, in: 'query', required: false, description, schema, ...extra })

const ITEMS_REFS = ['limit', 'offset', 'bbox', 'bbox-crs', 'datetime', 'crs', 'properties', 'sortby', 'count', 'ff']
const itemsAnswer = () => ({ 200: { ...answer('a page of features; `next` links to the following one', '#/components/schemas/featureCollectionGeoJSON', TYPES.geojson), headers: { 'Content-Crs': { schema: { type: 'string' } } } } })

/**
 * A collection's own items path, with a parameter for each of its queryables (`?name=value`, OGC API – Features
 * Part 1's 7.15.7 and Part 3): clients such as GDAL's OAPIF driver read them here to filter on the server. A
 * queryable named like a standard parameter (a `limit` column) is left out: the standard one wins (params.js).
 */
function collectionItems ({ entry, c }) {
  const filters = []
  for (const column of c.queryables.values()) {
    if (!ITEMS_PARAMETERS.has(column.name)) filters.push(queryParam(column.name, `the features whose ${column.name} equals this`, schemaOf(column)))
  }
  return get(`the features of ${entry.id}, a page at a time`, `getFeatures.${entry.id}`, [...ITEMS_REFS.map(ref), ...filters], itemsAnswer())
}

/** `collections`: [{ entry, c }] (docs.js collectionsOf). */
export function openApiDoc (serverUrl, collections, { defaultLimit, maxLimit }) {
  const link = { type: 'object', required: ['href', 'rel'], properties: { href: { type: 'string' }, rel: { type: 'string' }, type: { type: 'string' }, title: { type: 'string' } } }
  const links = { type: 'array', items: { $ref: '#/components/schemas/link' } }
  const error = { description: 'an error, said in a sentence', content: { [TYPES.json]: { schema: { $ref: '#/components/schemas/exception' } } } }
  return {
    openapi: '3.0.3',
    info: {
      title: 'tile-cannon OGC API – Features',
      version: '1.0.0',
      description: `The PostGIS tables and views served here, as GeoJSON features. Conformance: ${CONFORMANCE.join(', ')}.`,
    },
    servers: [{ url: serverUrl }],
    paths: {
      '/': get('the landing page', 'getLandingPage', [ref('f')], { 200: answer('links to the API definition, the conformance classes and the collections', '#/components/schemas/landingPage') }),
      '/conformance': get('the conformance classes implemented', 'getConformance', [ref('f')], { 200: answer('the conformance classes', '#/components/schemas/confClasses') }),
      '/api': get('this API definition', 'getApi', [ref('f')], { 200: { description: 'OpenAPI 3.0, or a page of its paths and parameters', content: { [TYPES.openapi]: { schema: { type: 'object' } }, [TYPES.html]: { schema: { type: 'string' } } } } }),
      '/collections': get('the collections: PostGIS tables and views', 'getCollections', [ref('f')], { 200: answer('the collections', '#/components/schemas/collections') }),
      '/collections/{collectionId}': get('a collection', 'describeCollection', [ref('collectionId'), ref('f')], { 200: answer('the collection', '#/components/schemas/collection') }),
      '/collections/{collectionId}/queryables': get('the properties a collection\'s features are filtered and sorted by', 'getQueryables', [ref('collectionId'), ref('f')],
        { 200: answer('a JSON Schema of the queryable properties', '#/components/schemas/queryables', TYPES.schema) }),
      '/collections/{collectionId}/items': get('the features of a collection, a page at a time (each collection\'s own path lists its property filters)', 'getFeatures',
        ['collectionId', ...ITEMS_REFS].map(ref), itemsAnswer()),
      '/collections/{collectionId}/items/{featureId}': get('a feature, by its primary key', 'getFeature', ['collectionId', 'featureId', 'crs', 'properties', 'ff'].map(ref),
        { 200: { ...answer('the feature', '#/components/schemas/featureGeoJSON', TYPES.geojson), headers: { 'Content-Crs': { schema: { type: 'string' } } } } }),
      ...Object.fromEntries(collections.map((one) => [`/collections/${pathSegment(one.entry.id)}/items`, collectionItems(one)])),
    },
    components: {
      parameters: {
        collectionId: { name: 'collectionId', in: 'path', required: true, description: 'a collection id', schema: { type: 'string', enum: collections.map(({ entry }) => entry.id) } },
        featureId: { name: 'featureId', in: 'path', required: true, description: 'the primary key of a feature (collections without one have no item route)', schema: { type: 'string' } },
        f: queryParam('f', 'the format (also by Accept)', { type: 'string', enum: ['json', 'html'] }),
        ff: queryParam('f', 'the format (also by Accept: application/geo+json, application/json, text/html)', { type: 'string', enum: ['geojson', 'json', 'html'] }),
        limit: queryParam('limit', `features per page; above ${maxLimit}, ${maxLimit}`, { type: 'integer', minimum: 1, maximum: maxLimit, default: Math.min(defaultLimit, maxLimit) }),
        offset: queryParam('offset', 'features skipped (the `next` and `prev` links carry it)', { type: 'integer', minimum: 0, default: 0 }),
        bbox: queryParam('bbox', 'minx,miny,maxx,maxy (or 6 numbers, heights ignored) in bbox-crs; in CRS84 a west edge east of the east edge crosses the antimeridian',
          { type: 'array', minItems: 4, maxItems: 6, items: { type: 'number' } }, { style: 'form', explode: false }),
        'bbox-crs': queryParam('bbox-crs', 'the CRS of bbox, one of the collection\'s `crs` (default CRS84; EPSG:4326 is lat,lon)', { type: 'string', format: 'uri' }),
        datetime: queryParam('datetime', 'an RFC 3339 date or date-time, or an interval of them (a/b, ../b, a/..): the features whose time (the table\'s first date or timestamp column) is in it; a collection without one has every feature selected',
          { type: 'string' }, { style: 'form', explode: false }),
        crs: queryParam('crs', 'the CRS of the output, one of the collection\'s `crs` (default CRS84; EPSG:4326 is lat,lon); said in Content-Crs', { type: 'string', format: 'uri' }),
        properties: queryParam('properties', 'the properties to output, comma-separated (none: `properties=`)', { type: 'array', items: { type: 'string' } }, { style: 'form', explode: false }),
        sortby: queryParam('sortby', 'queryable properties, comma-separated, `-name` descending; the primary key breaks ties', { type: 'array', items: { type: 'string' } }, { style: 'form', explode: false }),
        count: queryParam('count', 'true: numberMatched on every page (a count(*) of the query); otherwise only on the last page, where it is free', { type: 'boolean', default: false }),
      },
      schemas: {
        link,
        exception: { type: 'object', required: ['statusCode', 'message'], properties: { statusCode: { type: 'integer' }, error: { type: 'string' }, message: { type: 'string' } } },
        landingPage: { type: 'object', required: ['links'], properties: { title: { type: 'string' }, description: { type: 'string' }, links } },
        confClasses: { type: 'object', required: ['conformsTo'], properties: { conformsTo: { type: 'array', items: { type: 'string' } } } },
        extent: { type: 'object', properties: { spatial: { type: 'object', properties: { bbox: { type: 'array', items: { type: 'array', minItems: 4, maxItems: 6, items: { type: 'number' } } }, crs: { type: 'string' } } } } },
        collection: {
          type: 'object',
          required: ['id', 'links'],
          properties: { id: { type: 'string' }, title: { type: 'string' }, description: { type: 'string' }, links, extent: { $ref: '#/components/schemas/extent' }, itemType: { type: 'string' }, crs: { type: 'array', items: { type: 'string' } }, storageCrs: { type: 'string' } },
        },
        collections: { type: 'object', required: ['links', 'collections'], properties: { links, collections: { type: 'array', items: { $ref: '#/components/schemas/collection' } } } },
        queryables: { type: 'object', required: ['type', 'properties'], properties: { type: { type: 'string' }, properties: { type: 'object' } } },
        geometryGeoJSON: { type: 'object', nullable: true, required: ['type'], properties: { type: { type: 'string', enum: ['Point', 'MultiPoint', 'LineString', 'MultiLineString', 'Polygon', 'MultiPolygon', 'GeometryCollection'] } } },
        featureGeoJSON: {
          type: 'object',
          required: ['type', 'geometry', 'properties'],
          properties: { type: { type: 'string', enum: ['Feature'] }, id: { oneOf: [{ type: 'string' }, { type: 'integer' }] }, geometry: { $ref: '#/components/schemas/geometryGeoJSON' }, properties: { type: 'object', nullable: true }, links },
        },
        featureCollectionGeoJSON: {
          type: 'object',
          required: ['type', 'features'],
          properties: {
            type: { type: 'string', enum: ['FeatureCollection'] },
            features: { type: 'array', items: { $ref: '#/components/schemas/featureGeoJSON' } },
            links,
            timeStamp: { type: 'string', format: 'date-time' },
            numberMatched: { type: 'integer', minimum: 0 },
            numberReturned: { type: 'integer', minimum: 0 },
          },
        },
      },
      responses: { BadRequest: error, NotFound: error, Unavailable: error },
    },
  }
}

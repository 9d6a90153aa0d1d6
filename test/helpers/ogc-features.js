// JSON Schemas of OGC API – Features answers, written from the required fields of the Part 1 (and Part 2) OpenAPI
// components (landingPage, confClasses, collections, collection, featureCollectionGeoJSON, featureGeoJSON, the GeoJSON
// geometries, link, extent), to check our answers offline; and a check that a document looks like OpenAPI 3.0.
import assert from 'node:assert/strict'
import Ajv from 'ajv'

const number = { type: 'number' }
const position = { type: 'array', minItems: 2, items: number }
const geometry = (type, coordinates) => ({ type: 'object', required: ['type', 'coordinates'], properties: { type: { enum: [type] }, coordinates } })
const points = { type: 'array', items: position }
const ring = { type: 'array', minItems: 4, items: position }
const line = { type: 'array', minItems: 2, items: position }

const schemas = {
  $id: 'ogc',
  definitions: {
    link: {
      type: 'object',
      required: ['href', 'rel'],
      properties: { href: { type: 'string', pattern: '^https?://' }, rel: { type: 'string' }, type: { type: 'string' }, hreflang: { type: 'string' }, title: { type: 'string' }, length: { type: 'integer' } },
    },
    links: { type: 'array', items: { $ref: '#/definitions/link' } },
    landingPage: {
      type: 'object',
      required: ['links'],
      properties: { title: { type: 'string' }, description: { type: 'string' }, links: { $ref: '#/definitions/links' } },
    },
    confClasses: { type: 'object', required: ['conformsTo'], properties: { conformsTo: { type: 'array', items: { type: 'string' } } } },
    extent: {
      type: 'object',
      properties: {
        spatial: {
          type: 'object',
          properties: {
            bbox: { type: 'array', minItems: 1, items: { type: 'array', oneOf: [{ minItems: 4, maxItems: 4 }, { minItems: 6, maxItems: 6 }], items: number } },
            crs: { type: 'string', enum: ['http://www.opengis.net/def/crs/OGC/1.3/CRS84'] },
          },
        },
      },
    },
    collection: {
      type: 'object',
      required: ['id', 'links'],
      properties: {
        id: { type: 'string' },
        title: { type: 'string' },
        description: { type: 'string' },
        links: { $ref: '#/definitions/links' },
        extent: { $ref: '#/definitions/extent' },
        itemType: { type: 'string' },
        crs: { type: 'array', minItems: 1, items: { type: 'string' } },
        storageCrs: { type: 'string' },
      },
    },
    collections: {
      type: 'object',
      required: ['links', 'collections'],
      properties: { links: { $ref: '#/definitions/links' }, collections: { type: 'array', items: { $ref: '#/definitions/collection' } } },
    },
    geometryGeoJSON: {
      oneOf: [
        geometry('Point', position),
        geometry('MultiPoint', points),
        geometry('LineString', line),
        geometry('MultiLineString', { type: 'array', items: line }),
        geometry('Polygon', { type: 'array', items: ring }),
        geometry('MultiPolygon', { type: 'array', items: { type: 'array', items: ring } }),
        { type: 'object', required: ['type', 'geometries'], properties: { type: { enum: ['GeometryCollection'] }, geometries: { type: 'array', items: { $ref: '#/definitions/geometryGeoJSON' } } } },
      ],
    },
    featureGeoJSON: {
      type: 'object',
      required: ['type', 'geometry', 'properties'],
      properties: {
        type: { enum: ['Feature'] },
        geometry: { oneOf: [{ type: 'null' }, { $ref: '#/definitions/geometryGeoJSON' }] },
        properties: { type: ['object', 'null'] },
        id: { oneOf: [{ type: 'string' }, { type: 'integer' }] },
        links: { $ref: '#/definitions/links' },
      },
    },
    featureCollectionGeoJSON: {
      type: 'object',
      required: ['type', 'features'],
      properties: {
        type: { enum: ['FeatureCollection'] },
        features: { type: 'array', items: { $ref: '#/definitions/featureGeoJSON' } },
        links: { $ref: '#/definitions/links' },
        timeStamp: { type: 'string', pattern: '^\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d(\\.\\d+)?(Z|[+-]\\d\\d:\\d\\d)$' },
        numberMatched: { type: 'integer', minimum: 0 },
        numberReturned: { type: 'integer', minimum: 0 },
      },
    },
    queryables: {
      type: 'object',
      required: ['type', 'properties'],
      properties: { $schema: { type: 'string' }, $id: { type: 'string' }, type: { enum: ['object'] }, properties: { type: 'object', additionalProperties: { type: 'object' } } },
    },
  },
}

const ajv = new Ajv({ allErrors: true, strict: false })
ajv.addSchema(schemas)

/** Asserts `doc` is valid against the named definition ('landingPage', 'featureCollectionGeoJSON', …). */
export function assertOgc (name, doc, what = name) {
  const validate = ajv.getSchema(`ogc#/definitions/${name}`)
  const ok = validate(doc)
  assert.ok(ok, `${what} is not a valid ${name}: ${ajv.errorsText(validate.errors)}`)
}

/** An OpenAPI 3.0 document with a GET (and its 200) on each of `paths`, every $ref resolving inside it. */
export function assertOpenApi30 (doc, paths) {
  assert.match(doc.openapi, /^3\.0\.\d+$/, 'openapi is 3.0.x')
  assert.equal(typeof doc.info?.title, 'string')
  assert.equal(typeof doc.info?.version, 'string')
  for (const p of paths) {
    assert.ok(doc.paths[p]?.get?.responses?.['200'] ?? doc.paths[p]?.get?.responses?.[200], `GET ${p} with its 200 answer`)
    for (const param of doc.paths[p].get.parameters ?? []) {
      const resolved = param.$ref ? resolve(doc, param.$ref) : param
      assert.ok(resolved?.name && ['query', 'path', 'header'].includes(resolved.in), `${p}: parameter ${JSON.stringify(param)}`)
      if (resolved.in === 'path') assert.ok(p.includes(`{${resolved.name}}`), `${p} has {${resolved.name}}`)
    }
  }
  const refs = JSON.stringify(doc).match(/"\$ref":"[^"]+"/g) ?? []
  for (const r of refs) assert.ok(resolve(doc, JSON.parse(`{${r}}`).$ref) !== undefined, `${r} resolves`)
}

function resolve (doc, ref) {
  assert.ok(ref.startsWith('#/'), `${ref} is local`)
  return ref.slice(2).split('/').reduce((node, key) => node?.[key], doc)
}

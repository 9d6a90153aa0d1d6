// What the API implements (/conformance), and the documents that do not depend on a collection: the landing page.

export const CONFORMANCE = [
  'http://www.opengis.net/spec/ogcapi-features-1/1.0/conf/core',
  'http://www.opengis.net/spec/ogcapi-features-1/1.0/conf/geojson',
  'http://www.opengis.net/spec/ogcapi-features-1/1.0/conf/html',
  'http://www.opengis.net/spec/ogcapi-features-1/1.0/conf/oas30',
  'http://www.opengis.net/spec/ogcapi-features-2/1.0/conf/crs',
  'http://www.opengis.net/spec/ogcapi-features-3/1.0/conf/queryables',
  'http://www.opengis.net/spec/ogcapi-features-3/1.0/conf/queryables-query-parameters',
]

export const TYPES = {
  json: 'application/json',
  geojson: 'application/geo+json',
  html: 'text/html',
  schema: 'application/schema+json',
  openapi: 'application/vnd.oai.openapi+json;version=3.0',
}

export const QUERYABLES_REL = 'http://www.opengis.net/def/rel/ogc/1.0/queryables'

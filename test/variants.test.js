// Variants of vector tiles (lib/variants): `.mlt` made by @maplibre/mlt's encoder and `.geojson` in WGS84, checked
// against the MVT they come from (the MLT decoded by the same package's decoder: layers, features, geometries,
// properties; the GeoJSON against @mapbox/vector-tile's toGeoJSON), on generated MBTiles, PMTiles, MLT and GeoJSON file
// sets, on the shared fixtures' vector sets, and on PostGIS tables and a composite of them; and their HTTP: types,
// codings, ETags, 304, HEAD, absent tiles, 400s, TileJSON `?encoding=mlt`, the tile front, the tile directory and nginx.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs'
import { request } from 'node:http'
import { join } from 'node:path'
import { brotliDecompressSync, gunzipSync, gzipSync } from 'node:zlib'
import { VectorTile, classifyRings } from '@mapbox/vector-tile'
import { PbfReader } from 'pbf'
import vtpbf from 'vt-pbf'
import { FIXTURES, HAVE_FIXTURES, makeApp, needs } from './helpers/app.js'
import { HAVE_SCHEMA, assertValidTileJson } from './helpers/tilejson.js'
import { PNG, pyramid, tempDir, vectorTiles, writeMbtiles, writePmtiles } from './helpers/data.js'
import { POSTGIS_MISSING, loadGeoJson, startPostgis } from './helpers/postgres.js'
import { VECTOR_FIXTURES, rawMvt, sampleTiles } from '../bench/variants.js'
import { findNginx, freePort, runNginx } from '../bench/servers.js'
import { buildApp } from '../lib/app.js'
import { loadConfig } from '../lib/config.js'
import { nginxConfig } from '../lib/tile-dir/nginx.js'
import { INLINE_RAW_BYTES } from '../lib/variants/index.js'
import { LAYER_KEY, transcode } from '../lib/variants/transcode.js'
import { loadMlt } from '../lib/variants/mlt.js'

const MLT_TYPE = 'application/vnd.maplibre-vector-tile'
const GEOJSON_TYPE = 'application/geo+json'
const { decodeTile } = await loadMlt()

// ——— Generated data ———

/**
 * An MVT tile of three layers with every geometry type (a polygon with a hole, a multipolygon, lines, a multiline,
 * points, a multipoint), ids on some features, and properties of every kind: a column mixing strings and numbers,
 * integers past 32 bits, floats, booleans. `lines` extra lines make it larger than the inline limit.
 */
function richMvt (z, x, y, lines = 0) {
  const square = (x0, y0, s) => [[x0, y0], [x0 + s, y0], [x0 + s, y0 + s], [x0, y0 + s], [x0, y0]]
  const areas = { features: [
    { type: 3, id: 1, geometry: [square(100, 100, 1000), square(400, 400, 200).reverse()], tags: { kind: 'park', z, x, y } },
    { type: 3, id: 2, geometry: [square(2000, 2000, 500), square(3000, 3000, 500)], tags: { kind: 7, big: 2 ** 40, ratio: 0.25 } },
  ] }
  const ways = { features: [
    { type: 2, geometry: [[[0, 0], [4096, 4096]]], tags: { name: 'diagonal', open: true } },
    { type: 2, id: 9, geometry: [[[10, 10], [20, 40]], [[-50, 300], [4200, 310]]], tags: { name: 'two parts', open: false, lanes: 2 } },
    ...Array.from({ length: lines }, (_, i) => ({ type: 2, geometry: [[[i * 7, 100], [i * 7 + 300, 3000], [i * 9, 4000]]], tags: { name: `line ${i}`, n: i } })),
  ] }
  const spots = { features: [
    { type: 1, geometry: [[2048, 2048]], tags: { name: 'centre', layer: 3 } }, // a property called `layer`, as OSM data has
    { type: 1, geometry: [[100, 200], [300, 400], [500, 600]], tags: { name: 'three', rank: -4 } },
  ] }
  const pbf = vtpbf.fromGeojsonVt({ areas, ways, spots }, { version: 2 })
  return Buffer.from(pbf.buffer, pbf.byteOffset, pbf.byteLength)
}

const RICH_LAYERS = [
  { id: 'areas', fields: { kind: 'String', big: 'Number' } },
  { id: 'ways', fields: { name: 'String' } },
  { id: 'spots', fields: { name: 'String' } },
]

async function variantsApp (t, overrides = {}) {
  const dir = tempDir(t)
  const coords = pyramid(0, 4)
  writeMbtiles(join(dir, 'rich.mbtiles'), {
    tiles: coords.map(([z, x, y]) => ({ z, x, y, data: gzipSync(richMvt(z, x, y, z === 4 ? 40 : 0)) })),
    metadata: { format: 'pbf', minzoom: '0', maxzoom: '4', json: { vector_layers: RICH_LAYERS } },
  })
  writePmtiles(join(dir, 'rich-pm.pmtiles'), {
    tiles: coords.map(([z, x, y]) => ({ z, x, y, data: gzipSync(richMvt(z, x, y)) })),
    metadata: { vector_layers: RICH_LAYERS },
  })
  writeMbtiles(join(dir, 'points.mbtiles'), { tiles: vectorTiles(pyramid(0, 2)), metadata: { format: 'pbf', minzoom: '0', maxzoom: '2' } })
  // Stored MLT (made by the package's encoder from the rich MVT), and a raster set.
  const mlt = await loadMlt()
  writePmtiles(join(dir, 'stored-mlt.pmtiles'), {
    tiles: pyramid(0, 2).map(([z, x, y]) => ({ z, x, y, data: gzipSync(transcode('mlt', 'pbf', richMvt(z, x, y), z, x, y, mlt)) })),
    tileType: 'mlt',
    metadata: { vector_layers: RICH_LAYERS },
  })
  writeMbtiles(join(dir, 'photo.mbtiles'), { tiles: pyramid(0, 1).map(([z, x, y]) => ({ z, x, y, data: PNG })), metadata: { format: 'png' } })
  writeMbtiles(join(dir, 'text.mbtiles'), { tiles: [{ z: 0, x: 0, y: 0, data: Buffer.from('{"a":1}') }], metadata: { format: 'json' } })
  const app = await makeApp(t, { paths: [dir], ...overrides })
  return { app, dir }
}

// ——— Comparisons, written apart from lib/variants ———

const xy = (p) => [p.x, p.y]
/** A ring's points without repeats of the point before (a closing point written twice says nothing more). */
const ringPoints = (ring) => ring.filter((p, i) => i === 0 || p.x !== ring[i - 1].x || p.y !== ring[i - 1].y).map(xy)
/** A feature's geometry as MapLibre reads it: its kind (1 point, 2 line, 3 polygon) and its parts in tile units. */
function mvtShape (feature) {
  const lines = feature.loadGeometry()
  if (feature.type === 1) return { kind: 1, parts: lines.map((l) => xy(l[0])) }
  if (feature.type === 2) return { kind: 2, parts: lines.map((l) => l.map(xy)) }
  return { kind: 3, parts: classifyRings(lines).filter((p) => p.length > 0).map((p) => p.map(ringPoints)) }
}
function mltShape (geometry) {
  const t = geometry.type // 0 point, 1 line, 2 polygon, 3 multipoint, 4 multiline, 5 multipolygon
  const lines = geometry.coordinates
  if (t === 0 || t === 3) return { kind: 1, parts: lines.map((l) => xy(l[0])) }
  if (t === 1 || t === 4) return { kind: 2, parts: lines.map((l) => l.map(xy)) }
  const polygons = t === 2 ? [lines] : classifyRings(lines)
  return { kind: 3, parts: polygons.filter((p) => p.length > 0).map((p) => p.map(ringPoints)) }
}
const plain = (v) => (typeof v === 'bigint' ? Number(v) : v)
const plainProps = (props) => Object.fromEntries(Object.entries(props).map(([k, v]) => [k, plain(v)]))
/** Feature `i`'s properties as the table's columns hold them (getFeatures() writes them into a plain object, where a column named __proto__ is lost). */
const tableProps = (table, i) => Object.fromEntries(table.propertyVectors.filter((c) => c && c.getValue(i) !== null).map((c) => [c.name, c.getValue(i)]))

/** Asserts that MLT bytes decode to the layers, features, geometries, ids and properties of the raw MVT. */
function assertMltMatches (mltBytes, raw, label) {
  const mvt = new VectorTile(new PbfReader(raw))
  const tables = decodeTile(new Uint8Array(mltBytes))
  assert.deepEqual(tables.map((tb) => tb.name), Object.keys(mvt.layers), `${label}: layers`)
  let features = 0
  for (const table of tables) {
    const layer = mvt.layers[table.name]
    assert.equal(table.extent, layer.extent, `${label} ${table.name}: extent`)
    const decoded = table.getFeatures()
    assert.equal(decoded.length, layer.length, `${label} ${table.name}: feature count`)
    for (let i = 0; i < layer.length; i++) {
      const f = layer.feature(i)
      const at = `${label} ${table.name}#${i}`
      assert.deepEqual(mltShape(decoded[i].geometry), mvtShape(f), `${at}: geometry`)
      assert.deepEqual(plainProps(tableProps(table, i)), { ...f.properties }, `${at}: properties`)
      assert.equal(plain(decoded[i].id), f.id, `${at}: id`)
      features++
    }
  }
  return features
}

/** A ring's signed area in its own x/y (shoelace): > 0 counterclockwise with y up, as longitude and latitude are. */
const signedArea = (ring) => ring.reduce((sum, [x0, y0], i) => {
  const [x1, y1] = ring[(i + 1) % ring.length]
  return sum + x0 * y1 - x1 * y0
}, 0) / 2
/** A GeoJSON geometry's polygons (each a list of rings), none for other types. */
const polygonsOf = (g) => (g.type === 'Polygon' ? [g.coordinates] : g.type === 'MultiPolygon' ? g.coordinates : [])

/**
 * Asserts that a GeoJSON FeatureCollection has the MVT's features in order: the same properties plus the layer's name
 * under LAYER_KEY (unless the feature has that property), the same geometry type, and every coordinate within one
 * unit of the tile's grid of toGeoJSON's, polygons' rings by RFC 7946's right-hand rule (3.1.6: exteriors
 * counterclockwise, holes clockwise), where toGeoJSON keeps MVT's (exteriors clockwise).
 */
function assertGeoJsonMatches (fc, raw, z, x, y, label) {
  const mvt = new VectorTile(new PbfReader(raw))
  assert.equal(fc.type, 'FeatureCollection')
  const expected = []
  for (const [name, layer] of Object.entries(mvt.layers)) {
    for (let i = 0; i < layer.length; i++) expected.push({ name, extent: layer.extent, feature: layer.feature(i).toGeoJSON(x, y, z) })
  }
  assert.equal(fc.features.length, expected.length, `${label}: feature count`)
  for (const [i, { name, extent, feature }] of expected.entries()) {
    const got = fc.features[i]
    const at = `${label} #${i}`
    assert.equal(got.type, 'Feature', at)
    assert.deepEqual(got.properties, { [LAYER_KEY]: name, ...feature.properties }, `${at}: properties`)
    assert.equal(got.id, feature.id, `${at}: id`)
    assert.equal(got.geometry.type, feature.geometry.type, `${at}: geometry type`)
    for (const polygon of polygonsOf(got.geometry)) {
      polygon.forEach((ring, r) => {
        const area = signedArea(ring)
        assert.ok(r === 0 ? area >= 0 : area <= 0, `${at}: ${r === 0 ? 'the exterior' : `hole ${r}`} runs ${area > 0 ? 'counterclockwise' : 'clockwise'}`)
      })
    }
    for (const polygon of polygonsOf(feature.geometry)) polygon.forEach((ring, r) => { if (r === 0 ? signedArea(ring) < 0 : signedArea(ring) > 0) ring.reverse() })
    const unit = 360 / (2 ** z * extent)
    const a = got.geometry.coordinates.flat(3)
    const b = feature.geometry.coordinates.flat(3)
    assert.equal(a.length, b.length, `${at}: coordinates`)
    for (let k = 0; k < a.length; k++) assert.ok(Math.abs(a[k] - b[k]) <= unit, `${at}: ${a[k]} is ${b[k]} within ${unit}`)
  }
  return expected.length
}

const gz = (res) => (res.headers['content-encoding'] === 'gzip' ? gunzipSync(res.rawPayload) : res.rawPayload)

// ——— HTTP ———

test('.mlt of an MVT set: the MVT made into MLT, its own type, gzip or not, its own ETag, 304 and HEAD', async (t) => {
  const { app } = await variantsApp(t)
  for (const set of ['rich', 'rich-pm', 'data/rich']) {
    const url = `/${set}/2/1/1.mlt`
    const brotli = await app.inject({ url, headers: { 'accept-encoding': 'gzip, br' } })
    assert.equal(brotli.headers['content-encoding'], 'br', 'brotli when taken')
    const zipped = await app.inject({ url, headers: { 'accept-encoding': 'gzip' } })
    assert.equal(zipped.statusCode, 200, url)
    assert.equal(zipped.headers['content-type'], MLT_TYPE)
    assert.equal(zipped.headers['content-encoding'], 'gzip')
    assert.equal(zipped.headers.vary, 'Accept-Encoding')
    assert.equal(zipped.headers['cache-control'], 'public, max-age=3600')
    assertMltMatches(gunzipSync(zipped.rawPayload), richMvt(2, 1, 1), url)
    const identity = await app.inject({ url })
    assert.equal(identity.headers['content-encoding'], undefined)
    assert.deepEqual(identity.rawPayload, gunzipSync(zipped.rawPayload), 'one MLT, three codings')
    assert.deepEqual(identity.rawPayload, brotliDecompressSync(brotli.rawPayload), 'one MLT, three codings')
    assert.notEqual(identity.headers.etag, zipped.headers.etag, 'an ETag per coding')
    const pbf = await app.inject({ url: `/${set}/2/1/1.pbf`, headers: { 'accept-encoding': 'gzip' } })
    assert.equal(pbf.headers['content-type'], 'application/x-protobuf', 'the stored format is still served as it is')
    assert.notEqual(pbf.headers.etag, zipped.headers.etag, 'the variant has its own ETag')

    const again = await app.inject({ url, headers: { 'accept-encoding': 'gzip', 'if-none-match': zipped.headers.etag } })
    assert.equal(again.statusCode, 304)
    assert.equal(again.rawPayload.length, 0)
    assert.equal(again.headers.etag, zipped.headers.etag)
    assert.equal(again.headers['content-type'], undefined)
    const head = await app.inject({ method: 'HEAD', url, headers: { 'accept-encoding': 'gzip' } })
    assert.equal(head.statusCode, 200)
    assert.equal(head.rawPayload.length, 0)
    assert.equal(head.headers['content-length'], zipped.headers['content-length'])
    assert.equal(head.headers.etag, zipped.headers.etag)
  }
  const br = await app.inject({ url: '/rich/2/1/1.mlt', headers: { 'accept-encoding': 'br' } })
  assert.equal(br.headers['content-encoding'], 'br')
})

test('.geojson of an MVT set: every feature in WGS84 with its layer named, application/geo+json, compressible', async (t) => {
  const { app } = await variantsApp(t)
  for (const [z, x, y] of [[0, 0, 0], [2, 1, 1], [4, 1, 0]]) {
    for (const set of ['rich', 'rich-pm']) {
      const url = `/${set}/${z}/${x}/${y}.geojson`
      const res = await app.inject({ url, headers: { 'accept-encoding': 'gzip' } })
      assert.equal(res.statusCode, 200, url)
      assert.equal(res.headers['content-type'], GEOJSON_TYPE)
      assert.equal(res.headers['content-encoding'], 'gzip')
      assert.equal(res.headers.vary, 'Accept-Encoding')
      const fc = JSON.parse(gunzipSync(res.rawPayload))
      assertGeoJsonMatches(fc, richMvt(z, x, y, set === 'rich' && z === 4 ? 40 : 0), z, x, y, url)
      // The layer key does not clobber a property of that name, and a property called `layer` is the data's own.
      const centre = fc.features.find((f) => f.properties.name === 'centre')
      assert.deepEqual(centre.properties, { [LAYER_KEY]: 'spots', name: 'centre', layer: 3 })
      assert.equal(centre.geometry.type, 'Point')
      const plainRes = await app.inject({ url })
      assert.equal(plainRes.headers['content-encoding'], undefined)
      assert.deepEqual(JSON.parse(plainRes.rawPayload), fc)
      assert.equal((await app.inject({ url, headers: { 'if-none-match': plainRes.headers.etag } })).statusCode, 304)
    }
  }
  // Where the tile is: the point at the centre of tile 2/1/1 is there in longitude and latitude.
  const fc = (await app.inject({ url: '/points/2/1/1.geojson' })).json()
  assert.deepEqual(fc.features.map((f) => f.properties), [{ [LAYER_KEY]: 'points', z: 2, x: 1, y: 1 }])
  const [lon, lat] = fc.features[0].geometry.coordinates
  assert.ok(Math.abs(lon - -45) < 1e-4 && Math.abs(lat - 40.979898) < 1e-4, `${lon}, ${lat}: the tile's centre, to 4 decimals at z2`)
})

// A protobuf written by hand, to hold what vt-pbf cannot write from JS numbers: varints past 2^53.
const pbVarint = (v) => {
  let n = BigInt.asUintN(64, BigInt(v)) // negative int64: ten bytes of two's complement
  const out = []
  for (; n >= 0x80n; n >>= 7n) out.push(Number(n & 0x7fn) | 0x80)
  out.push(Number(n))
  return Buffer.from(out)
}
const pbField = (number, wire, body) => Buffer.concat([pbVarint((number << 3) | wire), wire === 2 ? pbVarint(body.length) : Buffer.alloc(0), body])
const pbPacked = (list) => Buffer.concat(list.map(pbVarint))

/** An MVT layer `osm` of two points: 64-bit ids and int, uint and sint values past 2^53, and values that fit. */
function bigIntegerMvt () {
  const double = Buffer.alloc(8)
  double.writeDoubleLE(2 ** 60) // a double past 2^53 is no integer of the tile's: written as JavaScript writes it
  const values = [
    pbField(5, 0, pbVarint(9007199254740993n)), // uint64: 2^53 + 1, which a JS number reads as …992
    pbField(4, 0, pbVarint(-9007199254740993n)), // int64
    pbField(6, 0, pbVarint(1234567890123456789n * 2n - 1n)), // sint64 (zigzag) of -1234567890123456789
    pbField(5, 0, pbVarint(42)),
    pbField(3, 1, double),
    pbField(1, 2, Buffer.from('x')),
  ]
  const point = pbField(4, 2, pbPacked([9, 4096, 4096])) // MoveTo(2048, 2048)
  const features = [
    pbField(2, 2, Buffer.concat([pbField(1, 0, pbVarint(18446744073709551615n)), pbField(2, 2, pbPacked([0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5])), pbField(3, 0, pbVarint(1)), point])),
    pbField(2, 2, Buffer.concat([pbField(1, 0, pbVarint(7)), pbField(2, 2, pbPacked([3, 3])), pbField(3, 0, pbVarint(1)), point])),
  ]
  const keys = ['way_id', 'neg', 'zig', 'small', 'dbl', 'name'].map((k) => pbField(3, 2, Buffer.from(k)))
  const layer = Buffer.concat([pbField(15, 0, pbVarint(2)), pbField(1, 2, Buffer.from('osm')), ...features, ...keys, ...values.map((v) => pbField(4, 2, v)), pbField(5, 0, pbVarint(4096))])
  return pbField(3, 2, layer)
}

test('.geojson writes 64-bit feature ids and integer values past 2^53 exactly; those that fit stay plain numbers', async (t) => {
  const dir = tempDir(t)
  writeMbtiles(join(dir, 'osm.mbtiles'), { tiles: [{ z: 0, x: 0, y: 0, data: gzipSync(bigIntegerMvt()) }], metadata: { format: 'pbf', minzoom: '0', maxzoom: '0' } })
  const app = await makeApp(t, { paths: [dir] })
  const res = await app.inject({ url: '/osm/0/0/0.geojson' })
  assert.equal(res.statusCode, 200, res.body)
  assert.equal(res.headers['content-type'], GEOJSON_TYPE)
  const text = res.body
  JSON.parse(text) // valid JSON (whose parser in JavaScript rounds them again; the text is what other clients read)
  assert.match(text, /"id":18446744073709551615[,}]/, 'the feature id as the tile has it, not 18446744073709552000')
  assert.match(text, /"way_id":9007199254740993[,}]/, 'uint64 past 2^53')
  assert.match(text, /"neg":-9007199254740993[,}]/, 'int64')
  assert.match(text, /"zig":-1234567890123456789[,}]/, 'sint64')
  assert.match(text, /"small":42[,}]/)
  assert.ok(text.includes(`"dbl":${JSON.stringify(2 ** 60)},`), 'a double is written as JavaScript writes it (1152921504606847000)')
  assert.match(text, /"name":"x"/)
  const fc = JSON.parse(text)
  assert.deepEqual(fc.features.map((f) => f.properties[LAYER_KEY]), ['osm', 'osm'])
  assert.equal(fc.features[1].id, 7, 'an id that fits is a plain number')
  assert.deepEqual(fc.features[1].properties, { small: 42, [LAYER_KEY]: 'osm' })
  assert.deepEqual(fc.features[0].geometry, { type: 'Point', coordinates: [0, 0] })
  assert.equal(Buffer.from(transcode('geojson', 'pbf', bigIntegerMvt(), 0, 0, 0, null)).toString('utf8'), text, 'the worker makes the same text')
  // A stored MLT tile's 64-bit columns (BigInt once decoded) are written exactly too, not as strings of digits.
  const mlt = await loadMlt()
  const point = { type: 'Point', coordinates: [2048, 2048] }
  const stored = mlt.encodeTile([{ name: 'osm', extent: 4096, features: [{ id: 1, geometry: point, properties: { big: 9007199254740993n } }, { id: 2, geometry: point, properties: { big: 5n } }] }], { propertyTypes: { big: 'int64' } })
  const fromMlt = Buffer.from(transcode('geojson', 'mlt', stored, 0, 0, 0, mlt)).toString('utf8')
  assert.match(fromMlt, /"big":9007199254740993[,}]/)
  assert.match(fromMlt, /"big":5[,}]/)
})

/**
 * An MVT of one layer written by hand (what vt-pbf cannot write: keys such as __proto__, 64-bit ids and values): points
 * [{ id (number or BigInt), at: [x, y], props: [[key, value]] }], a value { string }, { int }, { uint } or { sint }
 * (BigInt or number), each value its own entry in the layer's table.
 */
function handMvt (name, points, extent = 4096) {
  const keys = []
  const values = []
  const zigzag = (v) => (BigInt(v) < 0n ? -2n * BigInt(v) - 1n : 2n * BigInt(v))
  const value = ({ string, int, uint, sint }) => {
    if (string !== undefined) return pbField(1, 2, Buffer.from(string))
    if (int !== undefined) return pbField(4, 0, pbVarint(int))
    if (uint !== undefined) return pbField(5, 0, pbVarint(uint))
    return pbField(6, 0, pbVarint(zigzag(sint)))
  }
  const features = points.map(({ id, at = [2048, 2048], props = [] }) => {
    const tags = []
    for (const [key, v] of props) {
      if (!keys.includes(key)) keys.push(key)
      values.push(value(v))
      tags.push(keys.indexOf(key), values.length - 1)
    }
    const idField = id === undefined ? Buffer.alloc(0) : pbField(1, 0, pbVarint(id))
    const geometry = pbField(4, 2, pbPacked([9, Number(zigzag(at[0])), Number(zigzag(at[1]))]))
    return pbField(2, 2, Buffer.concat([idField, pbField(2, 2, pbPacked(tags)), pbField(3, 0, pbVarint(1)), geometry]))
  })
  const layer = Buffer.concat([pbField(15, 0, pbVarint(2)), pbField(1, 2, Buffer.from(name)), ...features,
    ...keys.map((k) => pbField(3, 2, Buffer.from(k))), ...values.map((v) => pbField(4, 2, v)), pbField(5, 0, pbVarint(extent))])
  return pbField(3, 2, layer)
}

test('properties named as Object.prototype\'s members (toString, constructor, __proto__…) are columns like any other in .mlt and .geojson', async (t) => {
  const dir = tempDir(t)
  // Each name on some features and not others, with string and integer values: a column of its own in MLT.
  const names = ['toString', 'valueOf', 'hasOwnProperty', '__proto__', 'constructor', 'name']
  const raw = handMvt('odd', names.flatMap((key, i) => [
    { id: i * 2 + 1, at: [100 + i * 10, 100], props: [[key, { string: `s${i}` }]] },
    { id: i * 2 + 2, at: [100 + i * 10, 200], props: [[key, { int: i }], ['other', { string: 'x' }]] },
  ]))
  writeMbtiles(join(dir, 'odd.mbtiles'), { tiles: [{ z: 1, x: 1, y: 0, data: gzipSync(raw) }], metadata: { format: 'pbf' } })
  const mlt = await loadMlt()
  writePmtiles(join(dir, 'odd-mlt.pmtiles'), { tiles: [{ z: 1, x: 1, y: 0, data: gzipSync(transcode('mlt', 'pbf', raw, 1, 1, 0, mlt)) }], tileType: 'mlt' })
  const app = await makeApp(t, { paths: [dir] })
  const res = await app.inject({ url: '/odd/1/1/0.mlt' })
  assert.equal(res.statusCode, 200, res.body)
  assert.equal(assertMltMatches(res.rawPayload, raw, 'odd'), names.length * 2, 'every feature, each with its own properties')
  const geojson = await app.inject({ url: '/odd/1/1/0.geojson' })
  assert.equal(geojson.statusCode, 200, geojson.body)
  assertGeoJsonMatches(JSON.parse(geojson.body), raw, 1, 1, 0, 'odd .geojson')
  // A stored MLT tile's: the same properties, __proto__ among them.
  const fromMlt = await app.inject({ url: '/odd-mlt/1/1/0.geojson' })
  assert.equal(fromMlt.statusCode, 200, fromMlt.body)
  assert.deepEqual(JSON.parse(fromMlt.body).features.map((f) => Object.keys(f.properties).filter((k) => k !== LAYER_KEY).sort()),
    names.flatMap((key) => [[key], [key, 'other'].sort()]))
  assert.match(fromMlt.body, /"__proto__":"s3"/)
})

test('64-bit integers are written exactly in .geojson and .mlt: negative sint values past 2^52, values and ids past 2^53 and 2^63', async (t) => {
  const dir = tempDir(t)
  // A sint's zigzag varint past 2^53 lost its sign bit (-(2^52 + 1) was 2^52 + 1 in .geojson, every one past 2^52 in
  // .mlt); ids past 2^53 were rounded in .mlt, and 2^64 - 1 became 0, another feature's id.
  const values = [
    [{ sint: -(2n ** 52n) - 1n }, 0n], [{ sint: -(2n ** 53n) + 1n }, 2n ** 53n + 1n], [{ sint: -(2n ** 53n) - 1n }, 2n ** 63n],
    [{ sint: -(2n ** 63n) }, 2n ** 64n - 1n], [{ sint: 2n ** 52n + 1n }, 5n], [{ sint: -5n }, 6n],
  ]
  const raw = Buffer.concat([
    handMvt('sint', values.map(([v, id], i) => ({ id, at: [100 * i, 100], props: [['v', v], ['n', { int: i }]] }))),
    // A column of int64 values past 2^53 and small ones; one of uint64 values past 2^63; one of a safe integer and a fraction.
    handMvt('wide', [
      { id: 1, props: [['i', { int: -(2n ** 60n) - 1n }], ['u', { uint: 2n ** 64n - 1n }]] },
      { id: 2, props: [['i', { int: 3 }], ['u', { uint: 2n ** 63n }]] },
    ]),
  ])
  writeMbtiles(join(dir, 'wide.mbtiles'), { tiles: [{ z: 0, x: 0, y: 0, data: gzipSync(raw) }], metadata: { format: 'pbf' } })
  const app = await makeApp(t, { paths: [dir] })

  const geojson = await app.inject({ url: '/wide/0/0/0.geojson' })
  assert.equal(geojson.statusCode, 200, geojson.body)
  const texts = geojson.body.split('{"type":"Feature",').slice(1) // each feature's text
  assert.equal(texts.length, values.length + 2)
  for (const [i, [{ sint }, id]] of values.entries()) {
    assert.ok(texts[i].includes(`"v":${sint},`), `${texts[i]}: v is ${sint}`)
    assert.ok(texts[i].includes(`"id":${id}`), `${texts[i]}: id ${id}`)
  }
  assert.ok(texts[values.length].includes(`"i":${-(2n ** 60n) - 1n},"u":${2n ** 64n - 1n},`), texts[values.length])
  assert.ok(texts[values.length + 1].includes(`"i":3,"u":${2n ** 63n},`), texts[values.length + 1])
  assert.deepEqual(JSON.parse(geojson.body).features[4].properties, { v: 2 ** 52 + 1, n: 4, [LAYER_KEY]: 'sint' }, 'an integer that fits stays a number')

  const res = await app.inject({ url: '/wide/0/0/0.mlt' })
  assert.equal(res.statusCode, 200, res.body)
  // Ids as they are (decodeTile's third argument; by default it reads them as doubles): uint64 in an Int64 vector.
  const [sintTable, wideTable] = decodeTile(new Uint8Array(res.rawPayload), undefined, false)
  const exact = (v) => (v === null || v === undefined ? v : BigInt(v))
  assert.deepEqual(values.map((_, i) => exact(sintTable.getPropertyVector('v').getValue(i))), values.map(([{ sint }]) => sint), 'sint values')
  assert.deepEqual(values.map((_, i) => BigInt.asUintN(64, exact(sintTable.idVector.getValue(i)))), values.map(([, id]) => id), 'ids: 2^64 - 1 is not 0')
  assert.deepEqual(sintTable.getFeatures().map((f) => f.properties.n), [0, 1, 2, 3, 4, 5], 'a column of small integers stays numbers')
  assert.deepEqual([0, 1].map((i) => exact(wideTable.getPropertyVector('i').getValue(i))), [-(2n ** 60n) - 1n, 3n])
  assert.deepEqual([0, 1].map((i) => exact(wideTable.getPropertyVector('u').getValue(i))), [2n ** 64n - 1n, 2n ** 63n])
  assert.deepEqual(wideTable.getFeatures().map((f) => exact(f.id)), [1n, 2n])
  // A stored MLT tile's .geojson (here, the one made of this MVT) writes them as exactly.
  assert.equal(Buffer.from(transcode('geojson', 'mlt', res.rawPayload, 0, 0, 0, await loadMlt())).toString('utf8'), geojson.body)
  // And what the worker makes of a larger tile is the same.
  assert.deepEqual(Buffer.from(transcode('mlt', 'pbf', raw, 0, 0, 0, await loadMlt())), res.rawPayload)
})

test('absent tiles answer as the set does (204, or the configured 404); zooms outside 404; raster and JSON sets and bad addresses 400', async (t) => {
  const { app } = await variantsApp(t, { sets: { points: { missingStatus: 404 } } })
  for (const ext of ['mlt', 'geojson']) {
    const absent = await app.inject({ url: `/rich/4/15/15.${ext}`, headers: { 'accept-encoding': 'gzip' } })
    assert.equal(absent.statusCode, 204, ext)
    assert.equal(absent.rawPayload.length, 0)
    assert.equal(absent.headers['content-length'], undefined)
    assert.equal((await app.inject({ method: 'HEAD', url: `/rich/4/15/15.${ext}` })).statusCode, 204)
    assert.equal((await app.inject({ url: `/points/2/3/3.${ext}` })).statusCode, 404, 'the set\'s configured status')
    assert.equal((await app.inject({ url: `/rich/5/0/0.${ext}` })).statusCode, 404, 'outside the zooms')
    for (const set of ['photo', 'text']) {
      const refused = await app.inject({ url: `/${set}/0/0/0.${ext}` })
      assert.equal(refused.statusCode, 400, `${set} .${ext}`)
      assert.match(refused.json().message, new RegExp(`^\\.${ext} is made of vector tiles, and ${set} has (png|json) tiles$`))
    }
  }
  for (const url of ['/rich/1/1/1.geojson.gz', '/rich/1/1/1.mlt.pbf', '/rich/1/1/1.ge-ojson', '/rich/1/1/1@2x.mlt', '/rich/1/2/1.mlt', '/rich/1/1/1.mlt/x']) {
    assert.ok([400, 404].includes((await app.inject({ url })).statusCode), url)
  }
  assert.equal((await app.inject({ url: '/rich/1/1/1.GeoJSON' })).headers['content-type'], GEOJSON_TYPE, 'extensions in any case')
  assert.equal((await app.inject({ url: '/rich/1/1/1.mvt' })).headers['content-type'], 'application/x-protobuf', 'other extensions still ignored')
  assert.equal((await app.inject({ url: '/rich/1/1/1.json' })).headers['content-type'], 'application/x-protobuf')
})

test('a GeoJSON file set: its tiles cut on request, and their variants made of them', async (t) => {
  const dir = tempDir(t)
  const parks = { type: 'FeatureCollection', features: [
    { type: 'Feature', properties: { name: 'a', area: 1.5 }, geometry: { type: 'Polygon', coordinates: [[[8.5, 47.3], [8.6, 47.3], [8.6, 47.4], [8.5, 47.3]]] } },
    { type: 'Feature', properties: { name: 'b', open: true }, geometry: { type: 'Point', coordinates: [8.54, 47.37] } },
  ] }
  writeFileSync(join(dir, 'parks.geojson'), JSON.stringify(parks))
  const app = await makeApp(t, { paths: [dir] })
  const [z, x, y] = [10, 536, 358] // the tile holding both
  const pbf = await app.inject({ url: `/parks/${z}/${x}/${y}.pbf` })
  assert.equal(pbf.statusCode, 200)
  assert.equal(assertMltMatches((await app.inject({ url: `/parks.geojson/${z}/${x}/${y}.mlt` })).rawPayload, pbf.rawPayload, 'parks'), 2)
  const fc = (await app.inject({ url: `/parks/${z}/${x}/${y}.geojson` })).json()
  assert.equal(assertGeoJsonMatches(fc, pbf.rawPayload, z, x, y, 'parks'), 2)
  assert.deepEqual(fc.features.map((f) => f.properties), [{ [LAYER_KEY]: 'parks', name: 'a', area: 1.5 }, { [LAYER_KEY]: 'parks', name: 'b', open: true }])
})

test('a stored MLT set: .mlt (and .pbf, and no extension) are its own bytes; .geojson is made of them', async (t) => {
  const { app } = await variantsApp(t)
  const mlt = await loadMlt()
  const own = transcode('mlt', 'pbf', richMvt(1, 1, 0), 1, 1, 0, mlt)
  for (const url of ['/stored-mlt/1/1/0.mlt', '/stored-mlt/1/1/0.pbf', '/stored-mlt/1/1/0']) {
    const res = await app.inject({ url })
    assert.equal(res.statusCode, 200, url)
    assert.equal(res.headers['content-type'], MLT_TYPE, url)
    assert.deepEqual(res.rawPayload, Buffer.from(own), `${url}: the stored tile`)
  }
  const res = await app.inject({ url: '/stored-mlt/1/1/0.geojson', headers: { 'accept-encoding': 'gzip' } })
  assert.equal(res.headers['content-type'], GEOJSON_TYPE)
  assertGeoJsonMatches(JSON.parse(gz(res)), richMvt(1, 1, 0), 1, 1, 0, 'MLT → GeoJSON')
  assert.equal((await app.inject({ url: '/stored-mlt/2/3/3.geojson' })).statusCode, 204)
})

test('variants are cached under their own keys, made once, and answered by the tile front when cached', async (t) => {
  const { app } = await variantsApp(t)
  let seenByFastify = 0
  app.addHook('onRequest', (req, reply, done) => { seenByFastify++; done() })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const port = app.server.address().port
  const entries = app.tileCache.stats.entries
  await app.inject({ url: '/rich/3/1/1.mlt' })
  assert.equal(app.tileCache.stats.entries, entries + 2, 'the MVT record and the MLT record')
  await app.inject({ url: '/rich/3/1/1.geojson' })
  await app.inject({ url: '/rich/3/1/1.pbf' })
  assert.equal(app.tileCache.stats.entries, entries + 3, 'and the GeoJSON, sharing the MVT')
  for (const [path, headers] of [['/rich/3/1/1.mlt', { 'accept-encoding': 'gzip' }], ['/rich/3/1/1.geojson', {}], ['/data/rich/3/1/1.geojson', { 'accept-encoding': 'gzip' }],
    ['/rich/3/7/7.mlt', {}], ['/rich/3/1/1.mlt', { 'if-none-match': '*' }], ['/photo/0/0/0.geojson', {}], ['/rich/4/1/1.mlt', { 'accept-encoding': 'gzip' }]]) {
    for (const round of ['first', 'again']) {
      const before = seenByFastify
      const wire = await get(port, path, headers)
      const routed = await app.inject({ url: path, headers })
      assert.equal(wire.status, routed.statusCode, `${path} ${round}`)
      assert.deepEqual(wire.body, routed.rawPayload, `${path} ${round}`)
      for (const h of ['content-type', 'content-encoding', 'etag', 'vary', 'cache-control', 'content-length']) assert.equal(wire.headers[h], routed.headers[h], `${path} ${round} ${h}`)
      if (round === 'again' && wire.status < 400) assert.equal(seenByFastify, before + 1, `${path}: the cached variant answered before Fastify (only inject() went through it)`)
    }
  }
})

/** One GET over HTTP as sent on the wire: { status, headers, body }. */
const get = (port, path, headers = {}) => new Promise((resolve, reject) => {
  request({ host: '127.0.0.1', port, path, headers }, (res) => {
    const chunks = []
    res.on('data', (c) => chunks.push(c))
    res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }))
  }).on('error', reject).end()
})

test('tiles larger than the inline limit are made in the variants worker, into the same bytes', async (t) => {
  const { app } = await variantsApp(t)
  const raw = richMvt(4, 1, 0, 40)
  assert.ok(raw.length > INLINE_RAW_BYTES, `a large tile (${raw.length} B)`)
  const maker = app.pipeline.variants
  assert.equal(maker.pool, null, 'no worker before a large tile')
  const mlt = await loadMlt()
  for (const variant of ['mlt', 'geojson']) {
    const res = await app.inject({ url: `/rich/4/1/0.${variant}` })
    assert.equal(res.statusCode, 200)
    assert.deepEqual(res.rawPayload, Buffer.from(transcode(variant, 'pbf', raw, 4, 1, 0, mlt)), `${variant}: the worker's bytes are the event loop's`)
  }
  assert.notEqual(maker.pool, null, 'the worker pool was started')
  assert.equal(maker.pool.completed, 2, 'and made them')
  assert.equal((await app.inject({ url: '/rich/0/0/0.mlt' })).statusCode, 200)
  assert.equal(maker.pool.completed, 2, 'a small tile is made on the event loop')
  await app.close()
  assert.equal(maker.pool, null, 'the pool is closed with the app')
})

test('a tile that is not a vector tile where the set says MVT: 503 naming the set, the others keep serving', async (t) => {
  const dir = tempDir(t)
  writeMbtiles(join(dir, 'liar.mbtiles'), { tiles: [{ z: 0, x: 0, y: 0, data: Buffer.from([0x1a, 0x05, 0xff, 0xff]) }], metadata: { format: 'pbf' } })
  writeMbtiles(join(dir, 'good.mbtiles'), { tiles: vectorTiles([[0, 0, 0]]), metadata: { format: 'pbf' } })
  const app = await makeApp(t, { paths: [dir] })
  for (const ext of ['mlt', 'geojson']) {
    const res = await app.inject({ url: `/liar/0/0/0.${ext}` })
    assert.equal(res.statusCode, 503, ext)
    assert.match(res.json().message, new RegExp(`^tileset 'liar': a tile could not be made into \\.${ext}`))
    assert.equal((await app.inject({ url: `/good/0/0/0.${ext}` })).statusCode, 200)
  }
})

test('a feature of geometry type UNKNOWN (0) is left out of .geojson and .mlt; the tile\'s other features are made', async (t) => {
  const dir = tempDir(t)
  // The MVT spec allows type 0 and lets decoders ignore such features; the whole tile was a 503 with Retry-After.
  const mixed = { features: [
    { type: 0, geometry: [[[10, 10], [20, 20]]], tags: { kind: 'unknown' } },
    { type: 1, id: 4, geometry: [[2048, 2048]], tags: { kind: 'point' } },
  ] }
  const only = { features: [{ type: 0, geometry: [[[30, 30], [40, 40]]], tags: { kind: 'unknown' } }] }
  const pbf = vtpbf.fromGeojsonVt({ mixed, only }, { version: 2 })
  const raw = Buffer.from(pbf.buffer, pbf.byteOffset, pbf.byteLength)
  writeMbtiles(join(dir, 'odd.mbtiles'), { tiles: [{ z: 1, x: 0, y: 0, data: gzipSync(raw) }], metadata: { format: 'pbf' } })
  const app = await makeApp(t, { paths: [dir] })
  const point = new VectorTile(new PbfReader(raw)).layers.mixed.feature(1)

  const geojson = await app.inject({ url: '/odd/1/0/0.geojson' })
  assert.equal(geojson.statusCode, 200, geojson.body)
  const fc = geojson.json()
  assert.equal(fc.features.length, 1, 'only the point')
  assert.deepEqual(fc.features[0].properties, { [LAYER_KEY]: 'mixed', kind: 'point' })
  assert.equal(fc.features[0].id, 4)
  const expected = point.toGeoJSON(0, 0, 1).geometry
  assert.equal(fc.features[0].geometry.type, expected.type)
  fc.features[0].geometry.coordinates.forEach((v, i) => assert.ok(Math.abs(v - expected.coordinates[i]) <= 360 / (2 * 4096), `${v} is ${expected.coordinates[i]}`))

  const mlt = await app.inject({ url: '/odd/1/0/0.mlt' })
  assert.equal(mlt.statusCode, 200, mlt.body)
  const tables = decodeTile(new Uint8Array(mlt.rawPayload))
  const mixedTable = tables.find((tb) => tb.name === 'mixed')
  assert.deepEqual(mixedTable.getFeatures().map((f) => [plain(f.id), f.properties.kind, mltShape(f.geometry)]), [[4, 'point', { kind: 1, parts: [[2048, 2048]] }]])
  assert.deepEqual(tables.find((tb) => tb.name === 'only')?.getFeatures() ?? [], [], 'a layer of UNKNOWN features only: none of them')
})

test('an existing tile whose only layer has no features: .mlt is 200 with that layer, as .pbf and .geojson are 200', async (t) => {
  const dir = tempDir(t)
  const pbf = vtpbf.fromGeojsonVt({ empty: { features: [] } }, { version: 2, extent: 512 })
  const onlyEmpty = Buffer.from(pbf.buffer, pbf.byteOffset, pbf.byteLength)
  assert.ok(onlyEmpty.length > 0)
  // And a tile of no layer at all (a field the MVT spec does not name): an MLT of no layers is no bytes, still a tile.
  const noLayer = Buffer.from([0x80, 0x01, 0x01]) // field 16, varint 1
  writeMbtiles(join(dir, 'sparse.mbtiles'), {
    tiles: [{ z: 1, x: 1, y: 0, data: gzipSync(onlyEmpty) }, { z: 1, x: 0, y: 0, data: gzipSync(noLayer) }],
    metadata: { format: 'pbf' },
  })
  const app = await makeApp(t, { paths: [dir] })
  for (const ext of ['pbf', 'geojson', 'mlt']) {
    assert.equal((await app.inject({ url: `/sparse/1/1/0.${ext}` })).statusCode, 200, ext)
    assert.equal((await app.inject({ url: `/sparse/1/0/0.${ext}` })).statusCode, 200, `${ext} of the tile without layers`)
    assert.equal((await app.inject({ url: `/sparse/1/1/1.${ext}` })).statusCode, 204, `${ext} of an absent tile`)
  }
  assert.deepEqual((await app.inject({ url: '/sparse/1/1/0.geojson' })).json(), { type: 'FeatureCollection', features: [] })
  const mlt = await app.inject({ url: '/sparse/1/1/0.mlt', headers: { 'accept-encoding': 'gzip' } })
  assert.equal(mlt.headers['content-type'], MLT_TYPE)
  const tables = decodeTile(new Uint8Array(gz(mlt)))
  assert.deepEqual(tables.map((tb) => [tb.name, tb.extent, tb.getFeatures().length]), [['empty', 512, 0]])
  const none = await app.inject({ url: '/sparse/1/0/0.mlt' })
  assert.equal(none.headers['content-type'], MLT_TYPE)
  assert.deepEqual(decodeTile(new Uint8Array(none.rawPayload)), [])
})

test('TileJSON ?encoding=mlt: .mlt tile URLs and "encoding": "mlt", valid TileJSON; a stored MLT set says so too', async (t) => {
  const { app } = await variantsApp(t)
  const tj = (await app.inject({ url: '/rich.json?encoding=mlt', headers: { host: 'tiles.example' } })).json()
  assert.deepEqual(tj.tiles, ['http://tiles.example/rich/{z}/{x}/{y}.mlt'])
  assert.equal(tj.encoding, 'mlt')
  assert.equal(tj.format, 'mlt')
  assert.deepEqual(tj.vector_layers.map((l) => l.id), ['areas', 'ways', 'spots'])
  const own = (await app.inject({ url: '/rich.json?encoding=mvt' })).json()
  assert.deepEqual(own, (await app.inject({ url: '/rich.json' })).json())
  assert.equal(own.encoding, undefined)
  assert.match(own.tiles[0], /\.pbf$/)
  const stored = (await app.inject({ url: '/stored-mlt.json' })).json()
  assert.equal(stored.encoding, 'mlt', 'MapLibre GL JS reads the encoding from TileJSON')
  assert.match(stored.tiles[0], /\/stored-mlt\/\{z\}\/\{x\}\/\{y\}\.mlt$/)
  assert.deepEqual((await app.inject({ url: '/stored-mlt.json?encoding=mlt' })).json(), stored)
  for (const url of ['/rich.json?encoding=geojson', '/rich.json?encoding=', '/stored-mlt.json?encoding=mvt']) {
    const res = await app.inject({ url })
    assert.equal(res.statusCode, 400, url)
  }
  // Not a vector set: not its option, told so (it was the PNG TileJSON, as if MLT had been given).
  for (const url of ['/photo.json?encoding=mlt', '/photo.json?encoding=bogus', '/photo.json?encoding=mvt', '/data/photo.json?encoding=mlt', '/text.json?encoding=mlt']) {
    const res = await app.inject({ url })
    assert.equal(res.statusCode, 400, url)
    assert.match(res.json().message, /^(photo has png|text has json) tiles: encoding \('mvt' or 'mlt'\) is an option of vector sets$/, url)
  }
  assert.equal((await app.inject({ url: '/photo.json' })).statusCode, 200)
  if (needs(t, HAVE_SCHEMA, '../shared/schemas is not present')) {
    assertValidTileJson(tj, { label: 'rich ?encoding=mlt' })
    assertValidTileJson(stored, { label: 'stored-mlt' })
  }
})

test('the tile directory keeps .mlt variants under their own extension and leaves GeoJSON to the server', async (t) => {
  const cache = tempDir(t)
  const { app } = await variantsApp(t, { tileDir: { dir: cache }, sets: { rich: { tileDir: true } } })
  for (const url of ['/rich/2/1/1.pbf', '/rich/2/1/1.mlt', '/rich/2/1/1.geojson', '/rich/4/15/15.mlt', '/rich/4/15/15.geojson']) assert.ok([200, 204].includes((await app.inject({ url })).statusCode))
  await app.tileDir.idle()
  const place = join(cache, 'rich', '2', '1')
  assert.deepEqual(readdirSync(place).sort(), ['1.mlt.gz', '1.pbf.gz'])
  // The MVT tile the variant was made of was read, so it is written too.
  assert.deepEqual(readdirSync(join(cache, 'rich', '4', '15')).sort(), ['15.mlt.none', '15.pbf.none'], 'an absent variant is a marker nginx answers 204')
  const wire = gunzipSync(readFileSync(join(place, '1.mlt.gz')))
  assert.deepEqual(wire, (await app.inject({ url: '/rich/2/1/1.mlt' })).rawPayload, 'what nginx will send')
})

test('behind nginx (tile-cannon nginx): a written .mlt is sent by nginx as tile-cannon sends it; .geojson goes to tile-cannon', async (t) => {
  if (!needs(t, findNginx() !== null, 'nginx is not installed (apt-get install nginx-light)')) return
  const dir = tempDir(t)
  writeMbtiles(join(dir, 'rich.mbtiles'), { tiles: pyramid(0, 2).map(([z, x, y]) => ({ z, x, y, data: gzipSync(richMvt(z, x, y)) })), metadata: { format: 'pbf' } })
  const args = ['--tile-dir', join(dir, 'tiles'), join(dir, 'rich.mbtiles')]
  const port = await freePort()
  const { config } = loadConfig({ argv: args, overrides: { logLevel: 'silent', demo: false, watch: false, sets: { rich: { tileDir: true } } } })
  const app = await buildApp(config)
  t.after(() => app.close())
  await app.listen({ port, host: '127.0.0.1' })
  const site = nginxConfig({ dir: join(dir, 'tiles'), upstream: `http://127.0.0.1:${port}`, listen: `127.0.0.1:${await freePort()}`, cacheControl: config.cacheControl })
  const nginx = await runNginx(join(dir, 'nginx'), null, Number(/listen 127\.0\.0\.1:(\d+);/.exec(site)[1]), site)
  t.after(() => nginx.stop())
  const fetchRaw = async (base, path, headers) => {
    const res = await fetch(base + path, { headers })
    return { status: res.status, headers: Object.fromEntries(res.headers), body: Buffer.from(await res.arrayBuffer()) }
  }
  const byNginx = (res) => /^(W\/)?"[0-9a-f]+-[0-9a-f]+"$/.test(res.headers.etag ?? '') // its ETags are mtime-size in hex
  for (const headers of [{ 'accept-encoding': 'gzip' }, { 'accept-encoding': 'identity' }]) {
    const direct = await fetchRaw(`http://127.0.0.1:${port}`, '/rich/2/1/1.mlt', headers)
    await app.tileDir.idle()
    const served = await fetchRaw(nginx.base, '/rich/2/1/1.mlt', headers)
    assert.ok(byNginx(served), `nginx sent it from disk (${served.headers.etag})`)
    for (const h of ['content-type', 'content-encoding', 'cache-control', 'vary']) assert.equal(served.headers[h], direct.headers[h], h)
    assert.deepEqual(served.body, direct.body, 'the same MLT') // fetch decodes gzip on both sides
    assertMltMatches(served.body, richMvt(2, 1, 1), 'nginx')
  }
  await fetchRaw(`http://127.0.0.1:${port}`, '/rich/2/3/3.mlt', {})
  await app.tileDir.idle()
  assert.equal((await fetchRaw(nginx.base, '/rich/2/3/3.mlt', {})).status, 204, 'an absent variant: nginx\'s 204')
  const geo = await fetchRaw(nginx.base, '/rich/2/1/1.geojson', { 'accept-encoding': 'gzip' })
  assert.equal(geo.status, 200)
  assert.equal(geo.headers['content-type'], GEOJSON_TYPE)
  assert.ok(!byNginx(geo), 'GeoJSON answered by tile-cannon')
  assertGeoJsonMatches(JSON.parse(geo.body), richMvt(2, 1, 1), 2, 1, 1, 'through nginx')
})

// ——— The shared fixtures ———

test('every fixture vector set: MLT decodes to the MVT\'s layers, features, geometries and properties; GeoJSON matches it', async (t) => {
  if (!needs(t, HAVE_FIXTURES, '../shared/fixtures is not present')) return
  const files = VECTOR_FIXTURES.filter((f) => existsSync(join(FIXTURES, f)))
  const app = await makeApp(t, { paths: files.map((f) => join(FIXTURES, f)) })
  for (const rel of files) {
    const name = rel.split('/')[1]
    const set = encodeURIComponent(name)
    const tj = (await app.inject({ url: `/${set}.json?encoding=mlt` })).json()
    assert.ok(tj.tiles[0].endsWith('/{z}/{x}/{y}.mlt'), name)
    if (HAVE_SCHEMA) assertValidTileJson(tj, { label: `${name} ?encoding=mlt` })
    let features = 0
    for (const [z, x, y, stored] of await sampleTiles(join(FIXTURES, rel), 20)) {
      const raw = rawMvt(stored)
      const label = `${name} ${z}/${x}/${y}`
      const mltRes = await app.inject({ url: `/${set}/${z}/${x}/${y}.mlt`, headers: { 'accept-encoding': 'gzip' } })
      assert.equal(mltRes.statusCode, 200, label)
      assert.equal(mltRes.headers['content-type'], MLT_TYPE)
      features += assertMltMatches(gz(mltRes), raw, label)
      const geoRes = await app.inject({ url: `/${set}/${z}/${x}/${y}.geojson`, headers: { 'accept-encoding': 'gzip' } })
      assert.equal(geoRes.statusCode, 200, label)
      assertGeoJsonMatches(JSON.parse(gz(geoRes)), raw, z, x, y, label)
    }
    assert.ok(features > 0, `${name}: features were compared`)
  }
})

// ——— PostGIS and a composite ———

test('PostGIS tables and a composite of them: .mlt and .geojson match the MVT the database made', async (t) => {
  const db = await startPostgis()
  t.after(() => db?.stop())
  if (!needs(t, db !== null, POSTGIS_MISSING)) return
  // Natural Earth countries (polygons, multipolygons) and places (points), or a few made here without the fixtures.
  const countries = { type: 'FeatureCollection', features: [{ type: 'Feature', properties: { name: 'Square', pop: 12.5 }, geometry: { type: 'MultiPolygon', coordinates: [[[[0, 0], [20, 0], [20, 20], [0, 20], [0, 0]], [[5, 5], [5, 10], [10, 10], [10, 5], [5, 5]]], [[[30, 30], [40, 30], [40, 40], [30, 30]]]] } }] }
  const places = { type: 'FeatureCollection', features: [{ type: 'Feature', properties: { name: 'Here', rank: 3 }, geometry: { type: 'Point', coordinates: [8.54, 47.37] } }] }
  const fixture = (name) => join(FIXTURES, 'postgis', 'geojson', name, 'in.json')
  const read = async (name, fallback) => {
    if (existsSync(fixture(name))) return JSON.parse(readFileSync(fixture(name), 'utf8'))
    if (existsSync(`${fixture(name)}.gz`)) return JSON.parse(gunzipSync(readFileSync(`${fixture(name)}.gz`)))
    return fallback
  }
  await loadGeoJson(db.url, 'countries', await read('ne_110m_admin_0_countries', countries))
  await loadGeoJson(db.url, 'places', await read('ne_110m_populated_places', places))
  const app = await makeApp(t, { paths: [db.url] })
  let compared = 0
  for (const set of ['countries', 'places', 'countries,places']) {
    for (const [z, x, y] of [[0, 0, 0], [1, 1, 0], [2, 2, 1], [3, 4, 2]]) {
      const pbf = await app.inject({ url: `/${set}/${z}/${x}/${y}.pbf` })
      if (pbf.statusCode === 204) {
        assert.equal((await app.inject({ url: `/${set}/${z}/${x}/${y}.mlt` })).statusCode, 204)
        continue
      }
      assert.equal(pbf.statusCode, 200, `${set} ${z}/${x}/${y}`)
      const label = `${set} ${z}/${x}/${y}`
      const mltRes = await app.inject({ url: `/${set}/${z}/${x}/${y}.mlt`, headers: { 'accept-encoding': 'gzip' } })
      assert.equal(mltRes.headers['cache-control'], pbf.headers['cache-control'], 'the lifetime of a made tile')
      compared += assertMltMatches(gz(mltRes), pbf.rawPayload, label)
      const geo = await app.inject({ url: `/${set}/${z}/${x}/${y}.geojson` })
      assertGeoJsonMatches(geo.json(), pbf.rawPayload, z, x, y, label)
    }
  }
  assert.ok(compared > 0, 'features were compared')
  const tj = (await app.inject({ url: '/countries,places.json?encoding=mlt' })).json()
  assert.match(tj.tiles[0], /\/countries%2Cplaces\/\{z\}\/\{x\}\/\{y\}\.mlt$/)
})

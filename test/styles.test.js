// Styles, sprites and fonts, as tileserver-gl clients use them: generated styles and glyphs, and the fixtures' own
// (OSM Liberty and its sprites, the Roboto and Noto glyph ranges) when ../shared is there.
import assert from 'node:assert/strict'
import { cpSync, mkdirSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { request as httpRequest } from 'node:http'
import { join } from 'node:path'
import test from 'node:test'
import { gzipSync } from 'node:zlib'
import { PbfReader, PbfWriter } from 'pbf'
import sharp from 'sharp'
import { FIXTURES, HAVE_FIXTURES, makeApp } from './helpers/app.js'
import { PNG, makeMvt, tempDir, writeMbtiles, writePmtiles } from './helpers/data.js'
import { writeLiberty } from './helpers/styles.js'

// Another image for the @2x sprite, to tell which file answered.
const PNG_2X = await sharp({ create: { width: 2, height: 2, channels: 4, background: '#f00' } }).png().toBuffer()

/** A glyph PBF of `name` holding glyphs `ids` (each glyph's advance tells which font it came from). */
function glyphPbf (name, range, ids, advance) {
  const w = new PbfWriter()
  w.writeMessage(1, (_, p) => {
    p.writeStringField(1, name)
    p.writeStringField(2, range)
    for (const id of ids) {
      p.writeMessage(3, (__, g) => {
        g.writeVarintField(1, id)
        g.writeVarintField(7, advance) // field 7: advance
      }, null)
    }
  }, null)
  return Buffer.from(w.finish())
}

/** A glyph PBF read back: { name, range, glyphs: Map id → advance }. */
function readGlyphs (buf) {
  const out = { name: null, range: null, glyphs: new Map() }
  new PbfReader(buf).readFields((tag, _, pbf) => {
    if (tag !== 1) return
    pbf.readFields((t, __, p) => {
      if (t === 1) out.name = p.readString()
      else if (t === 2) out.range = p.readString()
      else if (t === 3) {
        const g = p.readFields((gt, glyph, gp) => {
          if (gt === 1) glyph.id = gp.readVarint()
          else if (gt === 7) glyph.advance = gp.readVarint()
        }, {}, p.readVarint() + p.pos)
        out.glyphs.set(g.id, g.advance)
      }
    }, null, pbf.readVarint() + pbf.pos)
  }, null)
  return out
}

/** Tiles, styles and fonts in a temp folder: two sets, a style naming them every way a style may, sprites, glyphs. */
function setUp (t) {
  const dir = tempDir(t)
  const tiles = join(dir, 'tiles')
  mkdirSync(tiles)
  writeMbtiles(join(tiles, 'roads.mbtiles'), { tiles: [{ z: 0, x: 0, y: 0, data: gzipSync(makeMvt(0, 0, 0)) }] })
  writeMbtiles(join(tiles, 'water.mbtiles'), { tiles: [{ z: 0, x: 0, y: 0, data: gzipSync(makeMvt(0, 0, 0)) }] })
  // Two files of one name: the MBTiles is the set `twin`, the PMTiles `twin.pmtiles`.
  writeMbtiles(join(tiles, 'twin.mbtiles'), { tiles: [{ z: 0, x: 0, y: 0, data: gzipSync(makeMvt(0, 0, 0)) }] })
  writePmtiles(join(tiles, 'twin.pmtiles'), { tiles: [{ z: 0, x: 0, y: 0, data: gzipSync(makeMvt(0, 0, 0)) }] })
  const styles = join(dir, 'styles')
  mkdirSync(join(styles, 'city', 'sprites'), { recursive: true })
  const city = {
    version: 8,
    name: 'City',
    sources: {
      a: { type: 'vector', url: 'mbtiles://roads' },
      b: { type: 'vector', url: 'mbtiles://{water}' },
      c: { type: 'vector', url: 'pmtiles://water.mbtiles' },
      d: { type: 'vector', url: '{roads}' },
      e: { type: 'vector', url: 'water' },
      f: { type: 'vector', url: 'data/roads.json' },
      g: { type: 'vector', url: 'pmtiles://twin.pmtiles' },
      h: { type: 'vector', url: 'mbtiles://twin.mbtiles' },
      i: { type: 'vector', url: 'roads.json?encoding=mlt' },
      j: { type: 'vector', tiles: ['/roads/{z}/{x}/{y}.pbf'] }, // from this server's root
      remote: { type: 'vector', url: 'https://tiles.example.org/planet.json' },
      remotePmtiles: { type: 'vector', url: 'pmtiles://https://example.org/x.pmtiles' },
      gone: { type: 'vector', url: 'mbtiles://nowhere' },
      inline: { type: 'geojson', data: { type: 'FeatureCollection', features: [] } },
    },
    sprite: 'sprites/city',
    glyphs: 'fonts/{fontstack}/{range}.pbf',
    layers: [{ id: 'bg', type: 'background', paint: { 'background-color': '#eee' } }],
  }
  writeFileSync(join(styles, 'city', 'style.json'), JSON.stringify(city))
  writeFileSync(join(styles, 'city', 'sprites', 'city.json'), JSON.stringify({ dot: { x: 0, y: 0, width: 1, height: 1, pixelRatio: 1 } }))
  writeFileSync(join(styles, 'city', 'sprites', 'city.png'), PNG)
  writeFileSync(join(styles, 'city', 'sprites', 'city@2x.json'), JSON.stringify({ dot: { x: 0, y: 0, width: 2, height: 2, pixelRatio: 2 } }))
  writeFileSync(join(styles, 'city', 'sprites', 'city@2x.png'), PNG_2X)
  writeFileSync(join(styles, 'multi.json'), JSON.stringify({
    version: 8,
    sources: {},
    sprite: [{ id: 'default', url: 'city/sprites/city' }, { id: 'far', url: 'https://example.org/sprite' }, { id: 'escape', url: '../../../etc/passwd' }, { id: 'tsgl', url: '{styleJsonFolder}/city/sprites/city' }],
    layers: [],
  }))
  writeFileSync(join(styles, 'broken.json'), '{ "version": 8, ')
  writeFileSync(join(styles, 'bom.json'), '\uFEFF' + JSON.stringify({ version: 8, sources: {}, layers: [] })) // as Windows editors save it
  writeFileSync(join(styles, 'old.json'), JSON.stringify({ version: 7, sources: {}, layers: [] }))
  mkdirSync(join(styles, 'not-a-style')) // a folder without style.json: ignored
  const fonts = join(dir, 'fonts')
  mkdirSync(join(fonts, 'Sans Regular'), { recursive: true })
  mkdirSync(join(fonts, 'Sans Bold'))
  writeFileSync(join(fonts, 'Sans Regular', '0-255.pbf'), glyphPbf('Sans Regular', '0-255', [65, 66, 67], 10))
  writeFileSync(join(fonts, 'Sans Bold', '0-255.pbf'), glyphPbf('Sans Bold', '0-255', [66, 67, 68, 69], 20))
  writeFileSync(join(fonts, 'Sans Bold', '256-511.pbf'), glyphPbf('Sans Bold', '256-511', [300], 20))
  return { dir, tiles, styles, fonts }
}

test('styles: listed, and served with their sets, sprite and glyphs pointing at this server', async (t) => {
  const { tiles, styles, fonts } = setUp(t)
  const app = await makeApp(t, { paths: [tiles], styles, fonts })

  const list = (await app.inject({ url: '/styles.json', headers: { host: 'maps.test' } })).json()
  assert.deepEqual(list.map((s) => s.id).sort(), ['bom', 'city', 'multi'], 'broken JSON, version 7 and a folder without style.json are not styles (a byte order mark is no matter)')
  assert.deepEqual(list.find((s) => s.id === 'city'), { version: 8, name: 'City', id: 'city', url: 'http://maps.test/styles/city/style.json' })

  const res = await app.inject({ url: '/styles/city/style.json', headers: { host: 'maps.test' } })
  assert.equal(res.statusCode, 200)
  assert.match(res.headers['content-type'], /application\/json/)
  const style = res.json()
  const urls = Object.fromEntries(Object.entries(style.sources).map(([k, s]) => [k, s.url]))
  assert.deepEqual(urls, {
    a: 'http://maps.test/roads.json',
    b: 'http://maps.test/water.json',
    c: 'http://maps.test/water.json',
    d: 'http://maps.test/roads.json',
    e: 'http://maps.test/water.json',
    f: 'http://maps.test/roads.json',
    g: 'http://maps.test/twin.pmtiles.json', // the file named, not the MBTiles beside it
    h: 'http://maps.test/twin.json',
    i: 'http://maps.test/roads.json?encoding=mlt', // the set's options kept
    j: undefined,
    remote: 'https://tiles.example.org/planet.json',
    remotePmtiles: 'pmtiles://https://example.org/x.pmtiles',
    gone: 'mbtiles://nowhere', // served as written (and logged): the rest of the map still draws
    inline: undefined,
  })
  assert.deepEqual(style.sources.j.tiles, ['http://maps.test/roads/{z}/{x}/{y}.pbf'], 'made absolute: a path prefix applies')
  assert.equal(style.sprite, 'http://maps.test/styles/city/sprite')
  assert.equal(style.glyphs, 'http://maps.test/fonts/{fontstack}/{range}.pbf', 'the placeholders stay as MapLibre wants them')
  assert.deepEqual(style.layers, [{ id: 'bg', type: 'background', paint: { 'background-color': '#eee' } }])

  // Every URL the style now names answers.
  const tileJson = (await app.inject({ url: new URL(urls.a).pathname })).json()
  assert.match(tileJson.tiles[0], /\/roads\/\{z\}\/\{x\}\/\{y\}\.pbf$/)
  assert.equal((await app.inject({ url: new URL(urls.g).pathname })).json().id, 'twin.pmtiles')
  assert.equal((await app.inject({ url: new URL(urls.h).pathname })).json().id, 'twin')
  assert.match((await app.inject({ url: new URL(urls.i).pathname + new URL(urls.i).search })).json().tiles[0], /\/roads\/\{z\}\/\{x\}\/\{y\}\.mlt$/)
  for (const suffix of ['.json', '.png', '@2x.json', '@2x.png']) {
    const sprite = await app.inject({ url: `/styles/city/sprite${suffix}` })
    assert.equal(sprite.statusCode, 200, suffix)
    assert.equal(sprite.headers['content-type'].split(';')[0], suffix.endsWith('.png') ? 'image/png' : 'application/json')
    assert.ok(sprite.headers.etag, 'sprites carry an ETag')
  }
  assert.equal((await app.inject({ url: '/styles/city/sprite@2x.json' })).json().dot.pixelRatio, 2)
  // A ratio the style has no files for gets the highest it has below it: @3x is its @2x, JSON and PNG alike.
  assert.equal((await app.inject({ url: '/styles/city/sprite@3x.json' })).json().dot.pixelRatio, 2)
  assert.deepEqual((await app.inject({ url: '/styles/city/sprite@3x.png' })).rawPayload, PNG_2X)
  // Without its @2x JSON, a sprite's @2x is its 1x (pixelRatio 1: enlarged on high-DPI screens, not missing), its
  // @2x PNG too, though that file is there: a client pairs the two halves, and 1x positions over a 2x image garble
  // every icon.
  rmSync(join(styles, 'city', 'sprites', 'city@2x.json'))
  await app.reloadStyles()
  assert.equal((await app.inject({ url: '/styles/city/sprite@2x.json' })).json().dot.pixelRatio, 1)
  assert.equal((await app.inject({ url: '/styles/city/sprite@3x.json' })).json().dot.pixelRatio, 1)
  assert.deepEqual((await app.inject({ url: '/styles/city/sprite@3x.png' })).rawPayload, PNG)
  assert.deepEqual((await app.inject({ url: '/styles/city/sprite@2x.png' })).rawPayload, PNG, 'the 1x PNG, matching the 1x JSON')
  const glyphs = await app.inject({ url: '/fonts/Sans%20Regular/0-255.pbf' })
  assert.equal(glyphs.statusCode, 200)
  assert.equal(glyphs.headers['content-type'], 'application/x-protobuf')

  // Revalidation, as for TileJSON.
  const again = await app.inject({ url: '/styles/city/style.json', headers: { host: 'maps.test', 'if-none-match': res.headers.etag } })
  assert.equal(again.statusCode, 304)
  assert.equal(again.body, '')

  assert.equal((await app.inject({ url: '/styles/nope/style.json' })).statusCode, 404)
  assert.equal((await app.inject({ url: '/styles/bom/style.json' })).statusCode, 200, 'a byte order mark is not an error')
  const broken = await app.inject({ url: '/styles/broken/style.json' })
  assert.equal(broken.statusCode, 404)
  assert.match(broken.json().message, /not valid JSON/, 'says why the style is not served')
  assert.doesNotMatch(broken.body, new RegExp(styles.replaceAll('/', '\\/')), 'no path in the answer')
})

test('styles named in any script or with a #: listed and linked percent-encoded, served; a name no URL carries is logged once', async (t) => {
  const { tiles, styles, fonts } = setUp(t)
  const plain = (name) => JSON.stringify({ version: 8, name, sources: { a: { type: 'vector', url: 'mbtiles://roads' } }, sprite: 'sprite', layers: [] })
  mkdirSync(join(styles, 'café'))
  writeFileSync(join(styles, 'café', 'style.json'), plain('Café'))
  writeFileSync(join(styles, 'café', 'sprite.json'), JSON.stringify({ dot: { x: 0, y: 0, width: 1, height: 1, pixelRatio: 1 } }))
  writeFileSync(join(styles, 'café', 'sprite.png'), PNG)
  writeFileSync(join(styles, 'Ünï cødé.json'), plain('Unicode'))
  writeFileSync(join(styles, 'hash#1.json'), plain('Hash'))
  writeFileSync(join(styles, '地図.json'), plain('Chizu'))
  writeFileSync(join(styles, 'line\nbreak.json'), plain('Refused'))
  writeFileSync(Buffer.concat([Buffer.from(join(styles, 'latin1-')), Buffer.from([0xe9]), Buffer.from('.json')]), plain('Refused too'))
  const logs = []
  const app = await makeApp(t, { paths: [tiles], styles, fonts }, { logs })

  const list = (await app.inject({ url: '/styles.json', headers: { host: 'maps.test' } })).json()
  const url = (id) => list.find((s) => s.id === id)?.url
  assert.equal(url('café'), 'http://maps.test/styles/caf%C3%A9/style.json')
  assert.equal(url('Ünï cødé'), 'http://maps.test/styles/%C3%9Cn%C3%AF%20c%C3%B8d%C3%A9/style.json')
  assert.equal(url('hash#1'), 'http://maps.test/styles/hash%231/style.json')
  assert.equal(url('地図'), 'http://maps.test/styles/%E5%9C%B0%E5%9B%B3/style.json')
  for (const id of ['café', 'Ünï cødé', 'hash#1', '地図']) {
    const res = await app.inject({ url: new URL(url(id)).pathname, headers: { host: 'maps.test' } })
    assert.equal(res.statusCode, 200, `${id}: ${res.body}`)
    assert.equal(res.json().sources.a.url, 'http://maps.test/roads.json')
    assert.equal(res.json().sprite, `http://maps.test/styles/${encodeURIComponent(id)}/sprite`)
  }
  const sprite = await app.inject({ url: '/styles/caf%C3%A9/sprite.png' })
  assert.equal(sprite.statusCode, 200, sprite.body)
  assert.deepEqual(sprite.rawPayload, PNG)
  assert.ok((await app.inject({ url: '/' })).body.includes('/styles/caf%C3%A9/style.json'), 'linked from the index page')

  await app.reloadStyles()
  const refused = logs.filter((l) => l.msg === 'style not served' && l.file !== undefined)
  assert.deepEqual(refused.map((l) => l.reason).sort(), ['its name has a control character', 'its name is not UTF-8'], 'each logged once, saying why')
  assert.equal(list.length, 7, 'the refused names are not listed')
})

test('styles: several sprites, remote ones left out, and nothing outside the styles folder is read', async (t) => {
  const { tiles, styles, fonts } = setUp(t)
  const app = await makeApp(t, { paths: [tiles], styles, fonts })
  const style = (await app.inject({ url: '/styles/multi/style.json', headers: { host: 'h' } })).json()
  assert.deepEqual(style.sprite, [
    { id: 'default', url: 'http://h/styles/multi/sprite/default' },
    { id: 'far', url: 'https://example.org/sprite' },
    { id: 'escape', url: 'http://h/styles/multi/sprite/escape' },
    { id: 'tsgl', url: 'http://h/styles/multi/sprite/tsgl' },
  ])
  assert.deepEqual((await app.inject({ url: '/styles/multi/sprite/tsgl@2x.png' })).rawPayload, PNG_2X, "tileserver-gl's {styleJsonFolder}")
  const sprite = await app.inject({ url: '/styles/multi/sprite/default@2x.png' })
  assert.equal(sprite.statusCode, 200)
  assert.deepEqual(sprite.rawPayload, PNG_2X)
  assert.deepEqual((await app.inject({ url: '/styles/multi/sprite/default.png' })).rawPayload, PNG)
  assert.equal((await app.inject({ url: '/styles/multi/sprite/far.json' })).statusCode, 404, 'a remote sprite is fetched from where it is')
  const escape = await app.inject({ url: '/styles/multi/sprite/escape.json' })
  assert.equal(escape.statusCode, 404, 'a sprite path leaving the styles folder is refused')
  for (const url of ['/styles/city/sprite.svg', '/styles/city/sprite@9x.png', '/styles/city/..%2F..%2Fsprite.json', '/styles/city/sprite/%2e%2e.json']) {
    const res = await app.inject({ url })
    assert.ok([400, 404].includes(res.statusCode), `${url}: ${res.statusCode}`)
  }
})

test('a relative sprite with a query (a cache-buster): its files are read without it, the client keeps it', async (t) => {
  const { tiles, styles, fonts } = setUp(t)
  mkdirSync(join(styles, 'spq'))
  writeFileSync(join(styles, 'spq', 'style.json'), JSON.stringify({ version: 8, sources: {}, sprite: 'sprite?v=2', layers: [] }))
  writeFileSync(join(styles, 'listed.json'), JSON.stringify({ version: 8, sources: {}, sprite: [{ id: 'a', url: 'spq/sprite?v=3&key=secret#x' }], layers: [] }))
  for (const [suffix, bytes] of [['.json', JSON.stringify({ dot: { x: 0, y: 0, width: 1, height: 1, pixelRatio: 1 } })], ['.png', PNG], ['@2x.json', JSON.stringify({ dot: { x: 0, y: 0, width: 2, height: 2, pixelRatio: 2 } })], ['@2x.png', PNG_2X]]) {
    writeFileSync(join(styles, 'spq', `sprite${suffix}`), bytes)
  }
  const app = await makeApp(t, { paths: [tiles], styles, fonts })
  const style = (await app.inject({ url: '/styles/spq/style.json', headers: { host: 'maps.test' } })).json()
  assert.equal(style.sprite, 'http://maps.test/styles/spq/sprite?v=2', 'the cache-buster kept for clients')
  const listed = (await app.inject({ url: '/styles/listed/style.json', headers: { host: 'maps.test' } })).json()
  assert.deepEqual(listed.sprite, [{ id: 'a', url: 'http://maps.test/styles/listed/sprite/a?v=3' }], 'a key written into the style is no one\'s to hand on')
  // As MapLibre GL JS asks for them: the suffix before the query.
  for (const url of ['/styles/spq/sprite.json?v=2', '/styles/spq/sprite@2x.png?v=2', '/styles/listed/sprite/a@2x.json?v=3', '/styles/listed/sprite/a.png?v=3']) {
    const res = await app.inject({ url })
    assert.equal(res.statusCode, 200, `${url}: ${res.body}`)
  }
  assert.deepEqual((await app.inject({ url: '/styles/spq/sprite@2x.png?v=2' })).rawPayload, PNG_2X)
})

test('styles behind a proxy: URLs from X-Forwarded-* and the path prefix, only from trusted proxies', async (t) => {
  const { tiles, styles, fonts } = setUp(t)
  const forwarded = { host: 'internal:3000', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'maps.example.org', 'x-forwarded-prefix': '/tiles' }
  const trusting = await makeApp(t, { paths: [tiles], styles, fonts, trustProxy: ['loopback'] })
  const style = (await trusting.inject({ url: '/styles/city/style.json', headers: forwarded })).json()
  assert.equal(style.sources.a.url, 'https://maps.example.org/tiles/roads.json')
  assert.equal(style.sprite, 'https://maps.example.org/tiles/styles/city/sprite')
  assert.equal(style.glyphs, 'https://maps.example.org/tiles/fonts/{fontstack}/{range}.pbf')
  const list = (await trusting.inject({ url: '/styles.json', headers: forwarded })).json()
  assert.equal(list[0].url.startsWith('https://maps.example.org/tiles/styles/'), true)

  const plain = await makeApp(t, { paths: [tiles], styles, fonts })
  const res = await plain.inject({ url: '/styles/city/style.json', headers: forwarded })
  assert.equal(res.json().sources.a.url, 'http://internal:3000/roads.json', 'an untrusted peer cannot choose the links')
  assert.match(res.headers.vary, /Host/)
})

test('a style naming this server absolutely is served as one naming it relatively: the client\'s base, its API key', async (t) => {
  const { tiles, styles, fonts } = setUp(t)
  // As a style saved from this server's own answer, or written for it: its own address, as clients reached it.
  writeFileSync(join(styles, 'saved.json'), JSON.stringify({
    version: 8,
    sources: {
      asked: { type: 'vector', url: 'http://maps.test/roads.json?key=someone-elses' }, // the Host this client used
      loopback: { type: 'vector', url: 'http://localhost:3000/data/water.json?encoding=mlt' }, // the port it listens on
      listed: { type: 'vector', url: 'https://Tiles.Example.org/twin.pmtiles.json' }, // an allowed host, any scheme
      tiles: { type: 'vector', tiles: ['http://127.0.0.1:3000/roads/{z}/{x}/{y}.pbf'] },
      rendered: { type: 'raster', url: 'http://maps.test/styles/city.json' }, // another route of this server
      gone: { type: 'vector', url: 'http://maps.test/nowhere.json' },
      elsewhere: { type: 'vector', url: 'http://maps.test.example.com/roads.json' },
      otherPort: { type: 'vector', url: 'http://localhost:3001/roads.json' },
      userinfo: { type: 'vector', url: 'http://user@maps.test/roads.json' },
    },
    sprite: 'http://localhost:3000/styles/city/sprite',
    glyphs: 'http://maps.test/fonts/{fontstack}/{range}.pbf',
    layers: [],
  }))
  const app = await makeApp(t, { paths: [tiles], styles, fonts, apiKeys: ['k1'], allowedHosts: ['maps.test', 'tiles.example.org'] })
  const res = await app.inject({ url: '/styles/saved/style.json?key=k1', headers: { host: 'maps.test' } })
  assert.equal(res.statusCode, 200, res.body)
  const style = res.json()
  assert.deepEqual(Object.fromEntries(Object.entries(style.sources).map(([k, s]) => [k, s.url ?? s.tiles])), {
    asked: 'http://maps.test/roads.json?key=k1', // a key written into the style is not handed on
    loopback: 'http://maps.test/water.json?encoding=mlt&key=k1',
    listed: 'http://maps.test/twin.pmtiles.json?key=k1',
    tiles: ['http://maps.test/roads/{z}/{x}/{y}.pbf?key=k1'],
    rendered: 'http://maps.test/styles/city.json?key=k1',
    gone: 'http://maps.test/nowhere.json', // no set: left as written, as `mbtiles://nowhere` is
    elsewhere: 'http://maps.test.example.com/roads.json',
    otherPort: 'http://localhost:3001/roads.json',
    userinfo: 'http://user@maps.test/roads.json',
  })
  assert.equal(style.sprite, 'http://maps.test/styles/city/sprite?key=k1')
  assert.equal(style.glyphs, 'http://maps.test/fonts/{fontstack}/{range}.pbf?key=k1')
  // What the client then asks for answers (the key in the URL, as MapLibre sends it).
  for (const url of [style.sources.asked.url, style.sources.loopback.url, style.sources.listed.url, `${style.sprite.replace('?', '.json?')}`]) {
    const { pathname, search } = new URL(url)
    assert.equal((await app.inject({ url: pathname + search })).statusCode, 200, url)
  }

  // Behind a public URL with a path prefix: that base is this server too.
  const prefixed = await makeApp(t, { paths: [tiles], styles, fonts, publicUrl: 'https://maps.example.org/tiles', apiKeys: ['k1'] })
  writeFileSync(join(styles, 'saved.json'), JSON.stringify({ version: 8, sources: { a: { type: 'vector', url: 'https://maps.example.org/tiles/roads.json' }, b: { type: 'vector', url: 'https://maps.example.org/roads.json' } }, layers: [] }))
  await prefixed.reloadStyles()
  const behind = (await prefixed.inject({ url: '/styles/saved/style.json?key=k1' })).json()
  assert.equal(behind.sources.a.url, 'https://maps.example.org/tiles/roads.json?key=k1')
  assert.equal(behind.sources.b.url, 'https://maps.example.org/roads.json', 'outside the prefix: not this server')
})

test('GeoJSON files a style names by a relative path: resolved against the style\'s URL, served from its folder only', async (t) => {
  const { dir, tiles, styles, fonts } = setUp(t)
  const point = JSON.stringify({ type: 'FeatureCollection', features: [{ type: 'Feature', properties: { name: 'p' }, geometry: { type: 'Point', coordinates: [8.54, 47.37] } }] })
  mkdirSync(join(styles, 'parks', 'data', 'geo', 'z'), { recursive: true })
  writeFileSync(join(styles, 'parks', 'points.geojson'), point)
  writeFileSync(join(styles, 'parks', 'data', 'lines.json'), '{"type":"FeatureCollection","features":[]}')
  // Three and four folders deep: the paths of a rendered tile (/styles/:id/:z/:x/:y) and of a sprite, were they not
  // under /files/.
  writeFileSync(join(styles, 'parks', 'data', 'geo', 'deep.geojson'), point)
  writeFileSync(join(styles, 'parks', 'data', 'geo', 'z', 'deeper.geojson'), point)
  mkdirSync(join(styles, 'parks', 'sprite'))
  writeFileSync(join(styles, 'parks', 'sprite', 'shapes.json'), point)
  writeFileSync(join(styles, 'parks', 'unnamed.geojson'), point) // beside the style, but named by none of its sources
  mkdirSync(join(dir, 'outside'))
  writeFileSync(join(dir, 'outside', 'secret.geojson'), '{"secret":true}')
  symlinkSync(join(dir, 'outside', 'secret.geojson'), join(styles, 'parks', 'linked.geojson')) // a link leading out
  const geojson = (data) => ({ type: 'geojson', data })
  writeFileSync(join(styles, 'parks', 'style.json'), JSON.stringify({
    version: 8,
    sources: {
      near: geojson('points.geojson'),
      nested: geojson('./data/lines.json'),
      deep: geojson('data/geo/deep.geojson'),
      deeper: geojson('data/geo/z/deeper.geojson'),
      spriteFolder: geojson('sprite/shapes.json'),
      tsgl: geojson('{styleJsonFolder}/points.geojson'),
      linked: geojson('linked.geojson'),
      escape: geojson('../../../../../../etc/passwd'),
      escapeGeojson: geojson('../../outside/secret.geojson'),
      notGeojson: geojson('style.json.bak'),
      remote: geojson('https://example.org/x.geojson'),
      inline: geojson({ type: 'FeatureCollection', features: [] }),
    },
    layers: [],
  }))
  const logs = []
  const app = await makeApp(t, { paths: [tiles], styles, fonts, apiKeys: ['k1'] }, { logs })
  const style = (await app.inject({ url: '/styles/parks/style.json?key=k1', headers: { host: 'h' } })).json()
  assert.deepEqual(Object.fromEntries(Object.entries(style.sources).map(([k, s]) => [k, s.data])), {
    near: 'http://h/styles/parks/files/points.geojson?key=k1',
    nested: 'http://h/styles/parks/files/data/lines.json?key=k1',
    deep: 'http://h/styles/parks/files/data/geo/deep.geojson?key=k1',
    deeper: 'http://h/styles/parks/files/data/geo/z/deeper.geojson?key=k1',
    spriteFolder: 'http://h/styles/parks/files/sprite/shapes.json?key=k1',
    tsgl: 'http://h/styles/parks/files/points.geojson?key=k1',
    linked: 'http://h/styles/parks/files/linked.geojson?key=k1', // a path in its folder; the file is refused below
    escape: '../../../../../../etc/passwd', // left as written: never this server's to serve
    escapeGeojson: '../../outside/secret.geojson',
    notGeojson: 'style.json.bak',
    remote: 'https://example.org/x.geojson',
    inline: { type: 'FeatureCollection', features: [] },
  })
  const near = await app.inject({ url: '/styles/parks/files/points.geojson?key=k1' })
  assert.equal(near.statusCode, 200, near.body)
  assert.equal(near.headers['content-type'], 'application/geo+json')
  assert.equal(near.body, point)
  assert.ok(near.headers.etag)
  assert.equal((await app.inject({ url: '/styles/parks/files/points.geojson?key=k1', headers: { 'if-none-match': near.headers.etag } })).statusCode, 304)
  const nested = await app.inject({ url: '/styles/parks/files/data/lines.json?key=k1' })
  assert.equal(nested.statusCode, 200, nested.body)
  assert.match(nested.headers['content-type'], /^application\/json/)
  for (const url of [style.sources.deep.data, style.sources.deeper.data, style.sources.spriteFolder.data]) {
    const res = await app.inject({ url: url.replace('http://h', '') })
    assert.equal(res.statusCode, 200, `${url}: ${res.body}`)
    assert.equal(res.body, point)
  }
  assert.equal((await app.inject({ url: '/styles/parks/files/points.geojson' })).statusCode, 401, 'behind the keys like every data answer')
  // Over a socket, the path as written: inject() (like fetch) takes %2E for a dot and removes the dot segments itself.
  await app.listen({ port: 0, host: '127.0.0.1' })
  const raw = (path) => new Promise((resolve, reject) => {
    httpRequest({ host: '127.0.0.1', port: app.server.address().port, path }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (chunk) => { body += chunk })
      res.on('end', () => resolve({ statusCode: res.statusCode, body }))
    }).on('error', reject).end()
  })
  for (const url of ['/styles/parks/files/linked.geojson', '/styles/parks/files/unnamed.geojson', '/styles/parks/files/..%2F..%2Foutside%2Fsecret.geojson',
    '/styles/parks/files/data/..%2F..%2F..%2Foutside/secret.geojson', '/styles/parks/files/%2E%2E/%2E%2E/outside/secret.geojson',
    '/styles/parks/files/%2e%2e/%2e%2e/%2e%2e/outside/secret.geojson', '/styles/parks/files/style.json.bak',
    '/styles/nope/files/points.geojson', '/styles/city/files/points.geojson']) {
    const res = await raw(`${url}?key=k1`)
    assert.equal(res.statusCode, 404, `${url}: ${res.statusCode} ${res.body}`)
    assert.ok(!res.body.includes('"secret"') && !res.body.includes(dir), `${url}: nothing of the file, nor a path of the server's`)
  }
  assert.equal(logs.filter((l) => l.file === 'linked.geojson').length, 1, 'the link leading out is logged, once')
  // The file is part of the style's revision: a changed file is read again, and rendered tiles are made anew.
  const before = app.styles.get('parks').revision
  writeFileSync(join(styles, 'parks', 'points.geojson'), '{"type":"FeatureCollection","features":[]}')
  await app.reloadStyles()
  assert.notEqual(app.styles.get('parks').revision, before)
  assert.equal((await app.inject({ url: '/styles/parks/files/points.geojson?key=k1' })).body, '{"type":"FeatureCollection","features":[]}')
})

test('image and video files beside a style are served as GeoJSON files are; a protocol-relative URL of this server is the client\'s', async (t) => {
  const { tiles, styles, fonts } = setUp(t)
  mkdirSync(join(styles, 'img', 'media'), { recursive: true })
  writeFileSync(join(styles, 'img', 'overlay.png'), PNG)
  writeFileSync(join(styles, 'img', 'media', 'clip.mp4'), 'not really a video')
  const coordinates = [[-10, 10], [10, 10], [10, -10], [-10, -10]]
  writeFileSync(join(styles, 'img', 'style.json'), JSON.stringify({
    version: 8,
    sources: {
      pic: { type: 'image', url: 'overlay.png', coordinates },
      clip: { type: 'video', urls: ['media/clip.mp4', 'https://example.org/clip.webm'], coordinates },
      away: { type: 'image', url: '../../secret.png', coordinates },
      slashes: { type: 'vector', url: '//localhost:3000/roads.json' },
      remote: { type: 'vector', url: '//tiles.example.org/planet.json' },
    },
    sprite: '//localhost:3000/styles/city/sprite',
    layers: [],
  }))
  const logs = []
  const app = await makeApp(t, { paths: [tiles], styles, fonts, port: 3000 }, { logs })
  const style = (await app.inject({ url: '/styles/img/style.json', headers: { host: 'maps.test' } })).json()
  assert.equal(style.sources.pic.url, 'http://maps.test/styles/img/files/overlay.png', 'resolved against the style\'s URL, as MapLibre GL JS would')
  assert.deepEqual(style.sources.clip.urls, ['http://maps.test/styles/img/files/media/clip.mp4', 'https://example.org/clip.webm'])
  assert.equal(style.sources.away.url, '../../secret.png', 'a path leaving the style\'s folder: left as written')
  assert.equal(style.sources.slashes.url, 'http://maps.test/roads.json', 'this server without a scheme: the request\'s')
  assert.equal(style.sources.remote.url, '//tiles.example.org/planet.json')
  assert.equal(style.sprite, 'http://maps.test/styles/city/sprite')
  const pic = await app.inject({ url: '/styles/img/files/overlay.png' })
  assert.equal(pic.statusCode, 200, pic.body)
  assert.equal(pic.headers['content-type'], 'image/png')
  assert.deepEqual(pic.rawPayload, PNG)
  const clip = await app.inject({ url: '/styles/img/files/media/clip.mp4' })
  assert.equal(clip.statusCode, 200, clip.body)
  assert.equal(clip.headers['content-type'], 'video/mp4')
  assert.equal((await app.inject({ url: '/styles/img/files/style.json' })).statusCode, 404, 'only the files its sources name')
  const noSet = logs.filter((l) => l.msg === 'style source names no set here' && l.style === 'img').map((l) => l.source)
  assert.deepEqual(noSet, ['away'], 'an image beside the style names no set, and is not said to')
})

test('a sprite, glyph range or style file that is a link leading out of its folder is never read: 404 (an empty range for glyphs), logged once', async (t) => {
  const { dir, tiles, styles, fonts } = setUp(t)
  const outside = join(dir, 'outside')
  mkdirSync(outside)
  const secretPng = Buffer.concat([PNG, Buffer.from('secret')])
  writeFileSync(join(outside, 'secret.png'), secretPng)
  writeFileSync(join(outside, 'secret.json'), '{"secret":{"x":0,"y":0,"width":1,"height":1,"pixelRatio":1}}')
  writeFileSync(join(outside, 'style.json'), JSON.stringify({ version: 8, name: 'secret', sources: {}, layers: [] }))
  writeFileSync(join(outside, '0-255.pbf'), glyphPbf('Secret', '0-255', [65, 66, 67], 99))
  // The city's 1x sprite and a font's range lead out; its @2x sprite leads elsewhere in the styles folder (a sprite
  // shared by two styles), which is no leaving.
  for (const name of ['city.json', 'city.png']) rmSync(join(styles, 'city', 'sprites', name))
  symlinkSync(join(outside, 'secret.json'), join(styles, 'city', 'sprites', 'city.json'))
  symlinkSync(join(outside, 'secret.png'), join(styles, 'city', 'sprites', 'city.png'))
  mkdirSync(join(styles, 'shared'))
  for (const name of ['city@2x.json', 'city@2x.png']) {
    writeFileSync(join(styles, 'shared', name), readFileSync(join(styles, 'city', 'sprites', name)))
    rmSync(join(styles, 'city', 'sprites', name))
    symlinkSync(join('..', '..', 'shared', name), join(styles, 'city', 'sprites', name))
  }
  mkdirSync(join(styles, 'linked'))
  symlinkSync(join(outside, 'style.json'), join(styles, 'linked', 'style.json'))
  rmSync(join(fonts, 'Sans Bold', '0-255.pbf'))
  symlinkSync(join(outside, '0-255.pbf'), join(fonts, 'Sans Bold', '0-255.pbf'))
  const logs = []
  const app = await makeApp(t, { paths: [tiles], styles, fonts }, { logs })

  for (let i = 0; i < 2; i++) {
    for (const url of ['/styles/city/sprite.json', '/styles/city/sprite.png', '/styles/linked/style.json']) {
      const res = await app.inject({ url })
      assert.equal(res.statusCode, 404, `${url}: ${res.statusCode} ${res.body}`)
      assert.ok(!res.body.includes('secret') && !res.body.includes(dir), `${url}: nothing of the file, nor a path`)
    }
    const glyphs = await app.inject({ url: '/fonts/Sans%20Bold/0-255.pbf' })
    assert.equal(glyphs.statusCode, 200, 'a glyph range is never an error')
    assert.ok(![...readGlyphs(glyphs.rawPayload).glyphs.values()].includes(99), 'the linked range is as a missing one')
    app.fonts.cache.clear() // the merged range is kept: asked again, the file is looked at again
  }
  assert.ok(!(await app.inject({ url: '/styles.json' })).body.includes('"secret"'), 'the linked style is not listed')
  assert.deepEqual((await app.inject({ url: '/styles/city/sprite@2x.png' })).rawPayload, PNG_2X, 'a link within the styles folder is followed')
  const said = (what) => logs.filter((l) => l.level === 40 && JSON.stringify(l).includes(what))
  // Once per style and file: the city's, and multi's, which names the same sprite (its state is read on load).
  assert.equal(said('sprites/city.png').filter((l) => l.style === 'city').length, 1, 'logged once')
  assert.equal(said('sprites/city.json').filter((l) => l.style === 'city').length, 1)
  assert.equal(said('sprites/city.png').filter((l) => l.style === 'multi').length, 1)
  assert.equal(said('"range":"0-255"').length, 1)
  assert.equal(said('"style":"linked"').length, 1)
  assert.ok(!logs.some((l) => JSON.stringify(l).includes(outside)), 'where a link leads is not logged either')
})

test('a file served on its own is that file only: a style\'s GeoJSON may be it, never a file beside it', async (t) => {
  const { dir, styles, fonts } = setUp(t)
  const some = join(dir, 'some')
  mkdirSync(some)
  writeMbtiles(join(some, 'roads.mbtiles'), { tiles: [{ z: 0, x: 0, y: 0, data: gzipSync(makeMvt(0, 0, 0)) }] })
  const parks = '{"type":"FeatureCollection","features":[]}'
  writeFileSync(join(some, 'parks.geojson'), parks)
  writeFileSync(join(some, 'beside.geojson'), '{"type":"FeatureCollection","features":[],"secret":true}')
  mkdirSync(join(styles, 'near'))
  symlinkSync(join(some, 'parks.geojson'), join(styles, 'near', 'served.geojson'))
  symlinkSync(join(some, 'beside.geojson'), join(styles, 'near', 'beside.geojson'))
  writeFileSync(join(styles, 'near', 'style.json'), JSON.stringify({
    version: 8,
    sources: { served: { type: 'geojson', data: 'served.geojson' }, beside: { type: 'geojson', data: 'beside.geojson' } },
    layers: [],
  }))
  const app = await makeApp(t, { paths: [join(some, 'roads.mbtiles'), join(some, 'parks.geojson')], styles, fonts })
  assert.deepEqual(app.catalog.available().map((e) => e.id).sort(), ['parks', 'roads'])
  const served = await app.inject({ url: '/styles/near/files/served.geojson' })
  assert.equal(served.statusCode, 200, 'a link to a served file')
  assert.equal(served.body, parks)
  const beside = await app.inject({ url: '/styles/near/files/beside.geojson' })
  assert.equal(beside.statusCode, 404, 'a link to a file beside a served one')
  assert.ok(!beside.body.includes('secret') && !beside.body.includes(dir))
})

test('fonts: listed; a stack merged glyph by glyph; unknown fonts fall back; a missing range is an empty PBF', async (t) => {
  const { styles, fonts } = setUp(t)
  const app = await makeApp(t, { styles, fonts })
  assert.deepEqual((await app.inject({ url: '/fonts.json' })).json(), ['Sans Bold', 'Sans Regular'])

  const merged = readGlyphs((await app.inject({ url: '/fonts/Sans%20Regular,Sans%20Bold/0-255.pbf' })).rawPayload)
  assert.equal(merged.name, 'Sans Regular,Sans Bold')
  assert.equal(merged.range, '0-255')
  assert.deepEqual([...merged.glyphs], [[65, 10], [66, 10], [67, 10], [68, 20], [69, 20]], 'the first font wins, the next fills in')
  const reversed = readGlyphs((await app.inject({ url: '/fonts/Sans%20Bold,Sans%20Regular/0-255.pbf' })).rawPayload)
  assert.deepEqual([...reversed.glyphs], [[65, 10], [66, 20], [67, 20], [68, 20], [69, 20]])

  const fallback = readGlyphs((await app.inject({ url: '/fonts/Comic%20Sans/0-255.pbf' })).rawPayload)
  assert.deepEqual([...fallback.glyphs.keys()], [65, 66, 67], 'an unknown font is served by the first Regular font')
  // An unknown font before a known one: the known one's glyphs first, the fallback filling in after it.
  const unknownFirst = readGlyphs((await app.inject({ url: '/fonts/Comic%20Sans,Sans%20Bold/0-255.pbf' })).rawPayload)
  assert.deepEqual([...unknownFirst.glyphs], [[65, 10], [66, 20], [67, 20], [68, 20], [69, 20]], 'Sans Bold wins over the fallback')
  const chosen = await makeApp(t, { styles, fonts, defaultFont: 'Sans Bold' })
  assert.deepEqual([...readGlyphs((await chosen.inject({ url: '/fonts/Comic%20Sans/0-255.pbf' })).rawPayload).glyphs.keys()], [66, 67, 68, 69], 'or by the configured one')

  const missing = await app.inject({ url: '/fonts/Sans%20Regular/512-767.pbf' })
  assert.equal(missing.statusCode, 200, 'a range no font has is not an error')
  const empty = readGlyphs(missing.rawPayload)
  assert.equal(empty.glyphs.size, 0)
  assert.equal(empty.range, '512-767')
  assert.deepEqual([...readGlyphs((await app.inject({ url: '/fonts/Sans%20Regular,Sans%20Bold/256-511.pbf' })).rawPayload).glyphs.keys()], [300])

  for (const url of ['/fonts/Sans%20Regular/0-256.pbf', '/fonts/Sans%20Regular/1-256.pbf', '/fonts/Sans%20Regular/0-255.png', '/fonts/..%2F..%2Fetc/0-255.pbf']) {
    const res = await app.inject({ url })
    assert.ok(res.statusCode === 400 || (res.statusCode === 200 && readGlyphs(res.rawPayload).glyphs.size <= 3), `${url}: ${res.statusCode}`)
  }
  assert.equal((await app.inject({ url: '/fonts/Sans%20Regular/0-256.pbf' })).statusCode, 400)
  assert.equal((await app.inject({ url: '/fonts/Sans%20Regular/00-255.pbf' })).statusCode, 400, 'no file has that name')
  const cached = await app.inject({ url: '/fonts/Sans%20Regular/0-255.pbf' })
  assert.equal((await app.inject({ url: '/fonts/Sans%20Regular/0-255.pbf', headers: { 'if-none-match': cached.headers.etag } })).statusCode, 304)
  assert.equal(cached.headers['cache-control'], 'public, max-age=3600', 'glyphs last as long as tiles')
})

test('unknown fonts: the first ten names logged, then one line for the rest; with no font at all, the line says none stands in', async (t) => {
  const { styles, fonts } = setUp(t)
  const logs = []
  const app = await makeApp(t, { styles, fonts }, { logs })
  for (let i = 0; i < 25; i++) assert.equal((await app.inject({ url: `/fonts/Made%20Up%20${i % 15}/0-255.pbf` })).statusCode, 200)
  const said = logs.filter((l) => /unknown font/.test(l.msg))
  assert.equal(said.length, 11, 'a client choosing names cannot fill the log')
  assert.deepEqual(said.slice(0, 10).map((l) => [l.font, l.fallback, l.msg]), [...Array(10).keys()].map((i) => [`Made Up ${i}`, 'Sans Regular', 'unknown font; serving its fallback']))
  assert.equal(said[10].msg, 'more unknown fonts asked for: served as the first ones were, and not logged')

  const noFonts = []
  const bare = await makeApp(t, { styles, fonts: null }, { logs: noFonts })
  const res = await bare.inject({ url: '/fonts/Sans%20Regular/0-255.pbf' })
  assert.equal(res.statusCode, 200)
  assert.equal(readGlyphs(res.rawPayload).glyphs.size, 0)
  const line = noFonts.find((l) => /unknown font/.test(l.msg))
  assert.equal(line.msg, 'unknown font, and no font to stand in for it (no fonts folder, or none in it): its glyph ranges are empty')
  assert.equal(line.fallback, undefined)
})

test('fonts: a range a font here lacks, glyphs its range file lacks, and a folder without ranges, are served by the fallback font as an unknown font is', async (t) => {
  const { styles, fonts } = setUp(t)
  mkdirSync(join(fonts, 'Partial'))
  writeFileSync(join(fonts, 'Partial', '0-255.pbf'), glyphPbf('Partial', '0-255', [65], 30))
  mkdirSync(join(fonts, 'Empty Font'))
  const app = await makeApp(t, { styles, fonts, defaultFont: 'Sans Bold' })
  assert.deepEqual((await app.inject({ url: '/fonts.json' })).json(), ['Partial', 'Sans Bold', 'Sans Regular'], 'a folder without ranges is no font')
  const glyphs = async (url) => [...readGlyphs((await app.inject({ url })).rawPayload).glyphs]
  assert.deepEqual(await glyphs('/fonts/Partial/256-511.pbf'), [[300, 20]], 'the range Partial lacks, from the fallback')
  assert.deepEqual(await glyphs('/fonts/Unknown/256-511.pbf'), [[300, 20]], 'as an unknown font gets it')
  assert.deepEqual(await glyphs('/fonts/Partial/0-255.pbf'), [[65, 30], [66, 20], [67, 20], [68, 20], [69, 20]], 'a range it has is its own, the glyphs it lacks from the fallback')
  assert.deepEqual(await glyphs('/fonts/Empty%20Font/0-255.pbf'), [[66, 20], [67, 20], [68, 20], [69, 20]], 'an empty folder: the fallback, ASCII included')
  assert.deepEqual(await glyphs('/fonts/Sans%20Regular,Partial/256-511.pbf'), [[300, 20]])
})

test('a changed style gets a new revision and its new content on reload; a removed one goes', async (t) => {
  const { tiles, styles, fonts } = setUp(t)
  const app = await makeApp(t, { paths: [tiles], styles, fonts })
  const before = app.styles.get('city').revision
  const file = join(styles, 'city', 'style.json')
  const json = JSON.parse(readFileSync(file, 'utf8'))
  json.layers[0].paint['background-color'] = '#123456'
  writeFileSync(file, JSON.stringify(json))
  await app.reloadStyles()
  assert.notEqual(app.styles.get('city').revision, before)
  assert.equal((await app.inject({ url: '/styles/city/style.json' })).json().layers[0].paint['background-color'], '#123456')
  writeFileSync(join(styles, 'multi.json'), 'not json any more')
  await app.reloadStyles()
  assert.equal((await app.inject({ url: '/styles/multi/style.json' })).statusCode, 404)
})

test('a broken style is logged once per revision of its file, not again at each reload of the folder', async (t) => {
  const { tiles, styles, fonts } = setUp(t)
  const logs = []
  const app = await makeApp(t, { paths: [tiles], styles, fonts }, { logs })
  const said = (id) => logs.filter((l) => l.msg === 'style not served' && l.style === id).length
  assert.equal(said('broken'), 1)
  assert.equal(said('old'), 1)
  // Other files of the folder change: every style is read again, the broken ones did not change.
  for (let i = 0; i < 5; i++) {
    writeFileSync(join(styles, 'city', 'sprites', 'city.png'), Buffer.concat([PNG, Buffer.from([i])]))
    await app.reloadStyles()
  }
  assert.equal(said('broken'), 1, 'once, however often the folder changes')
  assert.equal(said('old'), 1)
  // The file itself changes, still broken: a new revision, said again (its new reason); fixed and broken again too.
  writeFileSync(join(styles, 'broken.json'), '{ "version": 8, "sources": ')
  await app.reloadStyles()
  await app.reloadStyles()
  assert.equal(said('broken'), 2)
  writeFileSync(join(styles, 'old.json'), JSON.stringify({ version: 8, sources: {}, layers: [] }))
  await app.reloadStyles()
  writeFileSync(join(styles, 'old.json'), JSON.stringify({ version: 7, sources: {}, layers: [] }))
  await app.reloadStyles()
  assert.equal(said('old'), 2)
})

test('the styles folder is watched: an edit is served without a restart', async (t) => {
  const { tiles, styles, fonts } = setUp(t)
  const app = await makeApp(t, { paths: [tiles], styles, fonts, watch: true, watchDebounceMs: 50 })
  const file = join(styles, 'city', 'style.json')
  const json = JSON.parse(readFileSync(file, 'utf8'))
  json.name = 'City, renamed'
  writeFileSync(file, JSON.stringify(json))
  let name
  for (let i = 0; i < 100 && name !== 'City, renamed'; i++) {
    await new Promise((resolve) => setTimeout(resolve, 50))
    name = (await app.inject({ url: '/styles.json' })).json().find((s) => s.id === 'city').name
  }
  assert.equal(name, 'City, renamed')
})

test('/data/:set.json and /data/:set/:z/:x/:y answer as the core routes do (tileserver-gl clients)', async (t) => {
  const { tiles } = setUp(t)
  const app = await makeApp(t, { paths: [tiles] })
  const core = await app.inject({ url: '/roads.json', headers: { host: 'h' } })
  const alias = await app.inject({ url: '/data/roads.json', headers: { host: 'h' } })
  assert.equal(alias.statusCode, 200)
  assert.deepEqual(alias.json(), core.json())
  const tile = await app.inject({ url: '/roads/0/0/0.pbf', headers: { 'accept-encoding': 'gzip' } })
  const aliasTile = await app.inject({ url: '/data/roads/0/0/0.pbf', headers: { 'accept-encoding': 'gzip' } })
  assert.equal(aliasTile.statusCode, 200)
  assert.deepEqual(aliasTile.rawPayload, tile.rawPayload)
  assert.equal(aliasTile.headers.etag, tile.headers.etag)
  assert.equal((await app.inject({ url: '/data/nope.json' })).statusCode, 404)
  assert.equal((await app.inject({ url: '/data/roads/1/5/0.pbf' })).statusCode, 400)
})

test('the fixtures: OSM Liberty with its sprites beside it, and real glyph ranges merged', { skip: !HAVE_FIXTURES && 'needs ../shared/fixtures' }, async (t) => {
  const dir = tempDir(t)
  const styles = join(dir, 'styles')
  const liberty = writeLiberty(styles) // sprites beside the style, its tiles served here
  for (const name of ['maplibre_demo.json', 'maptiler_basic.json', 'osm-liberty-lite.json']) cpSync(join(FIXTURES, 'styles', name), join(styles, name))
  const fonts = join(FIXTURES, 'styles', 'glyphs')
  const app = await makeApp(t, { paths: [join(FIXTURES, 'mbtiles', 'koh-samui_thailand.mbtiles')], styles, fonts })

  assert.deepEqual((await app.inject({ url: '/styles.json' })).json().map((s) => s.id).sort(), ['liberty', 'maplibre_demo', 'maptiler_basic', 'osm-liberty-lite'])
  const style = (await app.inject({ url: '/styles/liberty/style.json', headers: { host: 'h' } })).json()
  assert.equal(style.sources.openmaptiles.url, 'http://h/koh-samui_thailand.json')
  assert.equal(style.layers.length, liberty.layers.length)
  const index = (await app.inject({ url: '/styles/liberty/sprite@2x.json' })).json()
  assert.ok(Object.keys(index).length > 50, 'the OSM Liberty sprite index')
  const png = (await app.inject({ url: '/styles/liberty/sprite.png' })).rawPayload
  assert.deepEqual(png, readFileSync(join(FIXTURES, 'styles', 'osm-liberty', 'sprites', 'osm-liberty.png')))

  // Every font stack the fixture styles use answers, with glyphs from the fonts named (Latin range).
  const fixtureStyles = [liberty, ...['maplibre_demo.json', 'maptiler_basic.json', 'osm-liberty-lite.json'].map((n) => JSON.parse(readFileSync(join(styles, n), 'utf8')))]
  const stacks = new Set(fixtureStyles.flatMap((s) => s.layers).map((l) => l.layout?.['text-font']).filter(Array.isArray).map((f) => f.join(',')))
  assert.ok(stacks.size >= 4, [...stacks].join(' / '))
  const available = readdirSync(fonts)
  for (const stack of stacks) {
    const glyphs = readGlyphs((await app.inject({ url: `/fonts/${encodeURIComponent(stack)}/0-255.pbf` })).rawPayload)
    assert.ok(glyphs.glyphs.has(65), `${stack}: has 'A'`)
    const first = stack.split(',')[0]
    if (available.includes(first)) {
      const own = readGlyphs(readFileSync(join(fonts, first, '0-255.pbf')))
      assert.equal(glyphs.glyphs.get(65), own.glyphs.get(65), `${stack}: 'A' from ${first}`)
    }
  }
  // A stack of two real fonts holds the union of their glyphs.
  const a = readGlyphs(readFileSync(join(fonts, 'Roboto Regular', '0-255.pbf')))
  const b = readGlyphs(readFileSync(join(fonts, 'Noto Sans Regular', '0-255.pbf')))
  const both = readGlyphs((await app.inject({ url: '/fonts/Roboto%20Regular,Noto%20Sans%20Regular/0-255.pbf' })).rawPayload)
  assert.equal(both.glyphs.size, new Set([...a.glyphs.keys(), ...b.glyphs.keys()]).size)
})

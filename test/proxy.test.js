// tile-cannon behind a real caching proxy (nginx proxy_cache, which honours Vary and revalidates with If-None-Match):
// forwarding headers cannot poison what other clients get, and metadata revalidates with 304.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { findNginx, freePort, runNginx } from '../bench/servers.js'
import { makeApp, needs } from './helpers/app.js'
import { pyramid, tempDir, vectorTiles, writeMbtiles } from './helpers/data.js'

/** tile-cannon with `overrides`, and nginx caching in front of it as a naive proxy (client headers passed on). */
async function behindNginx (t, overrides = {}) {
  const dir = tempDir(t)
  writeMbtiles(join(dir, 'roads.mbtiles'), { tiles: vectorTiles(pyramid(0, 2)), metadata: { format: 'pbf' } })
  const app = await makeApp(t, { paths: [dir], ...overrides })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const port = await freePort()
  const nginx = await runNginx(join(dir, 'nginx'), `listen 127.0.0.1:${port};
    location / {
      proxy_pass http://127.0.0.1:${app.server.address().port};
      proxy_cache tc;
      proxy_cache_valid 200 10m;
      proxy_cache_revalidate on;
      add_header X-Cache $upstream_cache_status always;
    }`, port, `proxy_cache_path ${join(dir, 'nginx', 'cache')} keys_zone=tc:1m;`)
  t.after(() => nginx.stop())
  return nginx.base
}

const get = async (url, headers = {}) => {
  const res = await fetch(url, { headers })
  return { status: res.status, cache: res.headers.get('x-cache'), body: await res.text() }
}

test('a client\'s X-Forwarded-Host never reaches other clients through a shared cache', async (t) => {
  if (!needs(t, findNginx() !== null, 'nginx is not installed (apt-get install nginx-light)')) return
  const evil = { 'x-forwarded-host': 'evil.example', 'x-forwarded-proto': 'https', 'x-forwarded-prefix': '/x' }

  // Default: no proxy is trusted, so the header is ignored even for the client that sent it.
  const base = await behindNginx(t)
  const poisoned = await get(`${base}/roads.json`, evil)
  assert.equal(poisoned.status, 200)
  assert.doesNotMatch(poisoned.body, /evil/)
  const next = await get(`${base}/roads.json`)
  assert.equal(next.cache, 'HIT', 'the proxy does cache TileJSON')
  assert.doesNotMatch(next.body, /evil/)

  // Trusting the proxy: a naive one passes the client's header on, but the answer varies on it, so the cache keeps
  // that client's answer apart from everyone else's.
  const trusting = await behindNginx(t, { trustProxy: ['loopback'] })
  const own = await get(`${trusting}/roads.json`, evil)
  assert.match(JSON.parse(own.body).tiles[0], /^https:\/\/evil\.example\/x\/roads\//, 'a trusted proxy\'s headers are used')
  const other = await get(`${trusting}/roads.json`)
  assert.doesNotMatch(other.body, /evil/, 'another client is not served the first client\'s links')
  assert.equal((await get(`${trusting}/roads.json`)).cache, 'HIT')
})

test('with an allow-list, a forwarded host off it never reaches even the client that sent it, nor the cache', async (t) => {
  if (!needs(t, findNginx() !== null, 'nginx is not installed (apt-get install nginx-light)')) return
  const base = await behindNginx(t, { trustProxy: ['loopback'], allowedHosts: ['tiles.example.com'] })
  for (const path of ['/roads.json', '/catalog', '/']) {
    const own = await get(`${base}${path}`, { 'x-forwarded-host': 'evil.example', 'x-forwarded-proto': 'https' })
    assert.equal(own.status, 200, path)
    assert.doesNotMatch(own.body, /evil/, `${path}: not even for the client that sent it`)
    assert.match(own.body, /https:\/\/tiles\.example\.com\//, `${path}: the allowed host, the proxy's scheme`)
    // The answer is the one an honest client gets: a cache that ignored Vary could store it for everyone.
    const honest = await get(`${base}${path}`, { 'x-forwarded-proto': 'https' })
    assert.equal(honest.body, own.body, path)
  }
})

test('metadata revalidates through the proxy with If-None-Match (304 upstream)', async (t) => {
  if (!needs(t, findNginx() !== null, 'nginx is not installed (apt-get install nginx-light)')) return
  const base = await behindNginx(t, { metadataCacheControl: 'public, max-age=1' })
  for (const path of ['/roads.json', '/catalog', '/list']) {
    const first = await get(base + path)
    assert.equal(first.cache, 'MISS', path)
    await new Promise((resolve) => setTimeout(resolve, 2100)) // nginx counts freshness in whole seconds
    const again = await get(base + path)
    assert.equal(again.cache, 'REVALIDATED', `${path}: the stale copy was revalidated, not fetched again`)
    assert.equal(again.body, first.body, path)
  }
})

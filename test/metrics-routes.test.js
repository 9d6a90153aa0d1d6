// Route kinds in /metrics' tilecannon_requests_total: each says which endpoint answered, so an alert on one kind's
// 5xx points at that endpoint.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { makeApp } from './helpers/app.js'

const requests = (text, route, status) => Number(new RegExp(`^tilecannon_requests_total\\{route="${route}",set="",status="${status}"\\} (\\d+)$`, 'm').exec(text)?.[1] ?? 0)

test('/ready is counted as route="ready": its 503s (not ready) are not /health 5xx, which always answers 200', async (t) => {
  // A heap limit every process is past: not ready (shedding) from the first sample on.
  const app = await makeApp(t, { paths: [], shedding: { maxHeapUsedMB: 1 } })
  const deadline = Date.now() + 5000
  let ready
  do {
    await new Promise((resolve) => setTimeout(resolve, 50))
    ready = await app.inject({ url: '/ready' })
  } while (ready.statusCode !== 503 && Date.now() < deadline)
  assert.equal(ready.statusCode, 503)
  assert.equal((await app.inject({ url: '/health' })).statusCode, 200)
  const text = (await app.inject({ url: '/metrics' })).payload
  assert.equal(requests(text, 'ready', '5xx'), 1)
  assert.equal(requests(text, 'health', '5xx'), 0, '/health never answered 5xx')
  assert.equal(requests(text, 'health', '2xx'), 1)
})

// S3-compatible object storage: s3://bucket/key URLs, where a request for them goes (virtual-hosted or path-style),
// its signature (AWS Signature V4 by `aws4`), and listing a prefix (ListObjectsV2). The settings come from config.s3
// (lib/config.js maps AWS_ENDPOINT_URL_S3, AWS_REGION, AWS_ACCESS_KEY_ID, … onto it).
import { isIP } from 'node:net'
import aws4 from 'aws4'

const S3_URL = /^s3:\/\/([^/?#]+)\/?(.*)$/i
const EMPTY_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855' // of the empty body of a GET

export const isS3Url = (url) => /^s3:\/\//i.test(url)

/** { bucket, key } of an s3:// URL; the key as written, as the AWS CLI takes it (not percent-decoded). */
export function parseS3Url (url) {
  const m = S3_URL.exec(url)
  if (m === null) throw new Error('not an s3://bucket/key URL')
  return { bucket: m[1], key: m[2] }
}

// A key in a URL path: each segment RFC 3986-encoded, as the signature's canonical path encodes it.
const encodeKey = (key) => key.split('/').map((s) => encodeURIComponent(s).replace(/[!'()*]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase())).join('/')

/**
 * Where requests for `bucket` go, and how they are signed: `request(path, headers)` → { url, headers }. Path-style
 * (`endpoint/bucket/key`) when configured (MinIO, moto, Ceph), when the endpoint is an IP address or localhost (no
 * name to put the bucket in front of), or when the bucket name has dots (a virtual host `a.b.s3…` would not match the
 * TLS certificate); virtual-hosted (`bucket.endpoint/key`) otherwise, as AWS wants.
 * No credentials: unsigned requests (a public bucket).
 */
export function s3Bucket (bucket, settings = {}) {
  const region = settings.region ?? 'us-east-1'
  const endpoint = new URL(settings.endpoint ?? `https://s3.${region}.amazonaws.com`)
  const hostname = endpoint.hostname.replace(/^\[|\]$/g, '')
  const pathStyle = settings.forcePathStyle === true || bucket.includes('.') || isIP(hostname) !== 0 || hostname === 'localhost'
  const host = pathStyle ? endpoint.host : `${bucket}.${endpoint.host}`
  const base = endpoint.pathname.replace(/\/+$/, '') + (pathStyle ? `/${encodeKey(bucket)}` : '')
  const credentials = settings.accessKeyId
    ? { accessKeyId: settings.accessKeyId, secretAccessKey: settings.secretAccessKey, sessionToken: settings.sessionToken }
    : null
  const origin = `${endpoint.protocol}//${host}`
  return {
    /** `path`: '/key' or '/?query' (already encoded). */
    request (path, headers) {
      const full = base + path
      if (credentials === null) return { url: origin + full, headers }
      // The credentials are always given: aws4 would otherwise read them from process.env itself.
      const signed = aws4.sign({ host, path: full, method: 'GET', service: 's3', region, headers: { ...headers, 'x-amz-content-sha256': EMPTY_SHA256 } }, credentials)
      delete signed.headers.Host // fetch sends the URL's own host, the one signed
      return { url: origin + full, headers: signed.headers }
    },
  }
}

/** The request maker of one object (s3://bucket/key): `request(headers)` → { url, headers }, signed anew each time. */
export function s3Object (url, settings) {
  const { bucket, key } = parseS3Url(url)
  const place = s3Bucket(bucket, settings)
  const path = '/' + encodeKey(key)
  return { request: (headers) => place.request(path, headers) }
}

const unescapeXml = (s) => s.replace(/&(lt|gt|quot|apos|amp|#(\d+)|#x([0-9a-f]+));/gi, (m, name, dec, hex) =>
  dec ? String.fromCodePoint(Number(dec)) : hex ? String.fromCodePoint(parseInt(hex, 16)) : { lt: '<', gt: '>', quot: '"', apos: "'", amp: '&' }[name.toLowerCase()])

const MAX_PAGES = 100 // 100,000 keys: a prefix is a folder of tilesets, not a data lake

/**
 * The keys directly under a prefix (not in its sub-"folders": delimiter '/'), in S3's order (sorted), with the URL of
 * each. `fetchText(request)` runs a request, `request(headers)` → { url, headers } signed anew for each try, and
 * resolves to its body.
 */
export async function listS3Prefix (url, settings, fetchText) {
  const { bucket, key } = parseS3Url(url)
  const prefix = key === '' || key.endsWith('/') ? key : key + '/'
  const place = s3Bucket(bucket, settings)
  const keys = []
  let token = null
  for (let page = 0; page < MAX_PAGES; page++) {
    const query = new URLSearchParams({ 'list-type': '2', prefix, delimiter: '/' })
    if (token !== null) query.set('continuation-token', token)
    // URLSearchParams writes spaces as '+'; the signature's canonical query wants %20.
    const path = '/?' + query.toString().replace(/\+/g, '%20')
    const xml = await fetchText((headers) => place.request(path, headers))
    for (const m of xml.matchAll(/<Contents>[\s\S]*?<Key>([^<]*)<\/Key>[\s\S]*?<\/Contents>/g)) keys.push(unescapeXml(m[1]))
    const next = /<NextContinuationToken>([^<]*)<\/NextContinuationToken>/.exec(xml)
    if (!/<IsTruncated>true<\/IsTruncated>/.test(xml) || next === null) break
    token = unescapeXml(next[1])
  }
  return keys.map((k) => ({ key: k, url: `s3://${bucket}/${k}` }))
}

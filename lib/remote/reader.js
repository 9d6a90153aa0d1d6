// Reading a remote object (https:// or s3://) by byte ranges, for remote PMTiles (lib/sources/pmtiles.js) and remote
// COGs (lib/raster/dataset.js, in the raster workers). What every read gets:
// - retries with exponential backoff and jitter on network errors, 5xx and 429, bounded in tries and in time;
// - a byte-bounded LRU of 64 KiB blocks (headers, directories, COG blocks), shared by the readers of a thread;
// - the object's version pinned at open (its ETag, else its Last-Modified): every answer is checked against it (and
//   S3 is sent If-Match), so a replaced object is never read as a mix of old and new bytes. A change marks the
//   reader stale for good, every read then fails, and `onReplaced` tells the owner to re-open the set.
// Errors are Unavailable (503) whose messages name no URL, host or key: they reach logs, /health and 503 bodies.
import { createHash } from 'node:crypto'
import { LRUCache } from 'lru-cache'
import { Unavailable } from '../errors.js'
import { isS3Url, listS3Prefix, s3Object } from './s3.js'
import { outboundFetch } from '../outbound-proxy.js'
import { withBasicAuth } from '../urls.js'

export const BLOCK_BYTES = 64 * 1024
const CACHE_BYTES = 32 * 2 ** 20 // per thread: the main thread's readers, and each raster worker's
const ATTEMPTS = 4 // first try + 3 retries, 100 ms, 200 ms, 400 ms apart (± half, so replicas do not retry in step)
const FIRST_BACKOFF_MS = 100
const ATTEMPT_TIMEOUT_MS = 10_000
const TOTAL_TIMEOUT_MS = 20_000 // every try of one read, backoff included
const PROBE_TIMEOUT_MS = 2_000
const EMPTY = Buffer.alloc(0)
// An object without validators is told by the hash of its first bytes (revalidate): a PMTiles header and root
// directory fit in 16 KiB (its spec), as do a COG's header and IFDs (GDAL writes them first), so a replacement moves
// them unless its directories are the same throughout.
const IDENTITY_BYTES = 16 * 1024
const identityOf = (bytes) => createHash('sha256').update(bytes.subarray(0, IDENTITY_BYTES)).digest('base64')

// Blocks of every reader of this thread, keyed `<reader id>:<block index>`; a reader's id is its object's version.
const blocks = new LRUCache({ maxSize: CACHE_BYTES, sizeCalculation: (b) => Math.max(1, b.length) })
let readerCount = 0

const remoteError = (message, props = {}) => Object.assign(new Unavailable(message), props)
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * The request maker of a URL: s3:// signed with the S3 settings, http(s):// as it is, its `user:pass@` (which Node's
 * fetch refuses) sent as HTTP Basic auth, as curl and GDAL's /vsicurl/ send it.
 */
function requestsFor (url, s3) {
  if (isS3Url(url)) return s3Object(url, s3)
  const { url: bare, headers: auth } = withBasicAuth(url)
  if (auth.authorization === undefined) return { request: (headers) => ({ url, headers }) }
  return { request: (headers) => ({ url: bare, headers: { ...headers, ...auth } }) }
}

/** An S3 error's code (<Code>…</Code>), read off an error answer's small XML body; '' when it has none. */
async function errorCode (res) {
  try {
    const text = await res.text()
    return /<Code>([A-Za-z0-9.]{1,64})<\/Code>/.exec(text)?.[1] ?? ''
  } catch {
    return ''
  }
}

/** What a failed answer means, as an error fit to show (`when`: 'open' or 'read'). */
async function answerError (res, when) {
  const code = await errorCode(res)
  const status = res.status
  const said = code ? `${status} ${code}` : String(status)
  if (status === 401 || status === 403) {
    const hint = /InvalidAccessKeyId|SignatureDoesNotMatch|InvalidToken|ExpiredToken|TokenRefreshRequired/.test(code)
      ? ': check the credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN)'
      : code === 'AccessDenied' && status === 403 ? ': the credentials may not read it (or none were given)' : ''
    return remoteError(`access denied by the remote store (${said})${hint}`, { denied: true })
  }
  if (status === 404) return remoteError(`no such remote object (${said})`, { gone: true })
  if (status === 301 || code === 'AuthorizationHeaderMalformed' || code === 'PermanentRedirect') {
    const region = res.headers.get('x-amz-bucket-region')
    return remoteError(`the bucket is in another region (${said}${region ? `, region ${region}` : ''}): set s3.region or AWS_REGION`)
  }
  // 416 to the first 64 KiB: an empty object (`bytes */0`), or a store that refuses ranges it should take.
  if (status === 416 && when === 'open') return remoteError(/\*\/0$/.test(res.headers.get('content-range') ?? '*/0') ? 'the remote object is empty' : `the remote store refused the first range of the object (${said})`)
  return remoteError(`the remote store answered ${said}`)
}

/**
 * Does `reason`, why a remote set could not be opened, say that its store did not answer (network errors, 5xx, 429):
 * a backend down, which a retry may find back? Not a reason of the object's own (no such object, empty, not an
 * archive), nor a setting to fix (wrong credentials, another region): every replica has the same config, so /ready
 * failing for it would drain them all, and retrying or draining cannot fix it.
 */
export const storeDown = (reason) => reason?.startsWith('the remote store did not answer (') === true

/** An answer's body when it holds at most `max` bytes (by its Content-Length, else as read), else null (not read on). */
async function bodyUpTo (res, max) {
  const length = res.headers.get('content-length')
  if (length !== null && Number(length) > max) {
    res.body?.cancel().catch(() => {})
    return null
  }
  const chunks = []
  let size = 0
  for await (const chunk of res.body ?? []) {
    size += chunk.length
    if (size > max) return null // (leaving the loop cancels the rest)
    chunks.push(chunk)
  }
  return Buffer.concat(chunks, size)
}

/** A 206 that is not the range asked for (another start, or fewer bytes than it says): tried again, and said so. */
class ShortRead extends Error {}

/** A network failure in a few words: the system code (ECONNREFUSED …), or a timeout; never its message (it may hold the URL). */
export function networkReason (err) {
  if (err instanceof ShortRead) return err.message
  if (err?.name === 'TimeoutError') return 'no answer in time'
  for (let e = err, depth = 0; e && depth < 4; e = e.cause, depth++) {
    // The proxy of http_proxy/https_proxy refused (undici's words; they hold no URL): a CONNECT not answered 200, a 407.
    const proxied = /^Proxy (?:response|Authentication Required) \((\d{3})\)/.exec(e.message ?? '')
    if (proxied !== null) return `the proxy answered ${proxied[1]}`
    if (typeof e.code === 'string') return e.code
    if (e.message === 'bad port') return 'a port fetch refuses to use' // (the Fetch standard's list: 1, 9, 6000, …)
  }
  return err?.name === 'AbortError' ? 'aborted' : 'network error' // (other messages may hold the URL: not shown)
}

/**
 * Runs one request until `handle(res)` returns a value: network errors, 5xx and 429 are tried again (ATTEMPTS tries
 * at most, within TOTAL_TIMEOUT_MS); an Unavailable thrown by `handle` is final. The request is made (and signed)
 * anew for each try.
 */
async function withRetries (request, headers, handle, { attempts = ATTEMPTS, timeoutMs = ATTEMPT_TIMEOUT_MS } = {}) {
  const deadline = Date.now() + TOTAL_TIMEOUT_MS
  let failure = ''
  let tries = 0
  while (tries < attempts) {
    tries++
    const { url, headers: sent } = request(headers)
    try {
      const res = await outboundFetch(url, { headers: sent, signal: AbortSignal.timeout(Math.max(1, Math.min(timeoutMs, deadline - Date.now()))) })
      if (res.status >= 500 || res.status === 429) {
        const code = await errorCode(res)
        failure = `answered ${res.status}${code ? ' ' + code : ''}`
      } else {
        return await handle(res)
      }
    } catch (err) {
      if (err instanceof Unavailable) throw err
      failure = networkReason(err)
    }
    const wait = FIRST_BACKOFF_MS * 2 ** (tries - 1) * (0.5 + Math.random())
    if (tries >= attempts || Date.now() + wait >= deadline) break
    await sleep(wait)
  }
  throw remoteError(`the remote store did not answer (${failure}, ${tries} ${tries === 1 ? 'try' : 'tries'})`, { transient: true })
}

// Stores whose validators differ from answer to answer for one object (several servers behind one name, each with
// its own ETag or Last-Modified, as nginx makes them from each copy's file time): such an object would look replaced
// at every other read, and its set would answer 503 forever. Its URL is compared by size alone (its version is then
// `~size:<bytes>`, which raster workers take too) once a validator it had before comes back while its size stayed
// (A, then B, then A again: a replacement never goes back), or when raster workers saw its validator change with its
// size FLIPS times within FLIP_WINDOW_MS (each worker sees only its own answers).
const FLIPS = 3
const FLIP_WINDOW_MS = 60_000
const flips = new Map() // url → times its validator changed while its size did not
const bySize = new Set() // urls compared by size alone
const validators = new Map() // url → the validators its answers gave (at most 8, the latest last)
const SIZE_VERSION = '~size:'

function remember (url, validator) {
  if (validator === null || validator === undefined) return
  let seen = validators.get(url)
  if (seen === undefined) validators.set(url, seen = [])
  if (seen.includes(validator)) return
  seen.push(validator)
  if (seen.length > 8) seen.shift()
}

const BY_SIZE_NOW = 'the remote store gives this object another ETag or Last-Modified from answer to answer (several servers behind one name?): it is compared by size from now on'

/**
 * An object's validator changed while its size did not (seen here, or by a raster worker: its `flipped` answer):
 * counted, and past FLIPS within FLIP_WINDOW_MS its URL is compared by size from now on (true then, once).
 */
export function validatorFlipped (url) {
  const now = Date.now()
  const times = (flips.get(url) ?? []).filter((t) => now - t < FLIP_WINDOW_MS)
  times.push(now)
  flips.set(url, times)
  if (times.length < FLIPS || bySize.has(url)) return false
  flips.delete(url)
  bySize.add(url)
  return true
}

/** Is `url` compared by size alone (its store's validators flip)? */
export const comparedBySize = (url) => bySize.has(url)

/** One remote object, read by ranges at the version it had when opened. */
export class RangeReader {
  /**
   * @param {string} url https://… or s3://bucket/key
   * @param {{ s3?: object, revalidateMs?: number, version?: string|null }} options `s3`: config.s3; `revalidateMs`:
   *   a read more than this long after the last answer from the store checks the version again (in the background;
   *   0: never); `version`: the version the object must have (a raster worker opening what the main thread opened);
   *   `comparedBySize`: its store's validators flip (see bySize): told to a raster worker by the main thread;
   *   `identity`: for an object without validators, the hash of its first bytes as opened by another reader (a raster
   *   worker's, for the main thread's reader of a COG it described): checked at revalidation as if taken by this one
   */
  constructor (url, { s3, revalidateMs = 0, version = null, comparedBySize = false, identity = null } = {}) {
    this.url = url
    this.bySize = comparedBySize || bySize.has(url) || version?.startsWith(SIZE_VERSION) === true
    if (!this.bySize) remember(url, version) // (a worker's: the version the main thread opened)
    this.target = requestsFor(url, s3)
    this.id = `${++readerCount}:`
    this.revalidateMs = revalidateMs
    this.expected = version
    this.version = null // the ETag (else Last-Modified) of the first answer
    this.size = null
    this.stale = null // the error every read throws once the object changed
    this.onReplaced = null // (called once, when the object is found changed)
    this.onNote = null // (message): something its owner should log (its store's validators flip)
    this.inflight = new Map() // block index → promise of it, while being read
    this.answeredAt = version === null ? 0 : Date.now() // last answer from the store that matched the version
    this.revalidating = false
    this.identity = identity // without validators: the hash of its first IDENTITY_BYTES when opened (see open)
    this.identifiedAt = identity === null ? 0 : Date.now()
    this.closed = false
  }

  /** Reads the first block: the object's size and version. Throws an Unavailable saying why it cannot be read. */
  async open () {
    const first = await this.fetchRange(0, BLOCK_BYTES - 1, 'open')
    if (first.length > 0) blocks.set(this.id + 0, first)
    // No ETag, no Last-Modified: an object replaced by one of the same size would look the same. Its first bytes (a
    // PMTiles header and root directory, where its directories and data lie; a TIFF's header and first IFD) stand for
    // its version, asked again at each revalidation.
    if (this.version === null && !this.bySize) {
      this.identity = identityOf(first)
      this.identifiedAt = Date.now()
    }
    return this
  }

  /**
   * The object changed (or went away) since it was opened: stale from now on, and the owner is told once, with why
   * (`why`: when it is not that the object changed).
   */
  replaced (why = 'the remote object changed since it was opened') {
    if (this.stale === null) {
      this.stale = remoteError(why, { replaced: true })
      this.forget()
      try { this.onReplaced?.(why) } catch {}
    }
    return this.stale
  }

  /**
   * From now on, this reader and its URL compare answers by size (see bySize); its owner is told once. Its blocks
   * are read again: they were checked by validators that meant nothing.
   */
  compareBySize (total) {
    this.bySize = true
    this.version = SIZE_VERSION + total
    this.forget()
    if (!bySize.has(this.url)) {
      bySize.add(this.url)
      try { this.onNote?.(BY_SIZE_NOW) } catch {}
    }
    return this.version
  }

  /** The version an answer gives (its ETag, else Last-Modified; its size alone for a store whose validators flip). */
  versionOf (validator, total) { return this.bySize ? SIZE_VERSION + total : validator }

  /** The object's validator changed but its size did not (or a 412 said so): see validatorFlipped. */
  flipped () {
    if (this.stale !== null) return this.stale // (counted once a reader)
    const err = this.replaced(validatorFlipped(this.url) ? BY_SIZE_NOW : undefined)
    err.flipped = true
    return err
  }

  /**
   * Bytes [start, end] from the store (end clamped by it to the object's size), checked against the version.
   * `options`: withRetries' (attempts, timeoutMs), and `unconditional` (no If-Match: asked again after a 412, to see
   * which version the store has), `deadline` (of the pieces of one range).
   */
  fetchRange (start, end, when = 'read', options) {
    if (this.stale !== null) return Promise.reject(this.stale)
    const headers = { range: `bytes=${start}-${end}` } // (fetch adds Accept-Encoding: identity to a range request)
    // A strong ETag: S3 answers 412 once the object changed.
    if (this.version?.startsWith('"') && !this.bySize && !options?.unconditional) headers['if-match'] = this.version
    return withRetries(this.target.request, headers, async (res) => {
      let from, to, total
      let data = null // (a 200's, read before it is judged)
      if (res.status === 206) {
        const range = /^bytes (\d+)-(\d+)\/(\d+)$/.exec(res.headers.get('content-range') ?? '')
        if (range === null) { res.body?.cancel().catch(() => {}); throw remoteError('the remote store answered a range without Content-Range') }
        [from, to, total] = [Number(range[1]), Number(range[2]), Number(range[3])]
      } else if (res.status === 200) {
        // The whole object (the store ignores Range, as RFC 9110 §14.2 lets it): taken when it is no longer than what
        // was asked, or than a block (a small archive, asked for one byte by check()), never downloaded when longer.
        data = await bodyUpTo(res, Math.max(end - start + 1, BLOCK_BYTES))
        if (data === null) throw remoteError('the remote server does not answer range requests (it sends the whole object, longer than the range asked)')
        if (data.length === 0 && when === 'open') throw remoteError('the remote object is empty')
        total = data.length
        from = start
        to = Math.min(end, total - 1)
      } else if (when === 'read' && (res.status === 412 || res.status === 416 || res.status === 404)) {
        res.body?.cancel().catch(() => {})
        // Another ETag than the one opened: asked again without If-Match, to see which version the store has now (one
        // it had before, from another of its servers, is told apart from a new one as for any answer).
        if (res.status === 412 && !options?.unconditional) return this.fetchRange(start, end, when, { ...options, unconditional: true })
        throw this.replaced() // changed, shrunk or gone
      } else {
        throw await answerError(res, when) // (it reads the error's body)
      }
      const validator = res.headers.get('etag') ?? res.headers.get('last-modified')
      let version = this.versionOf(validator, total)
      if (this.size === null) { // the first answer
        this.size = total
        this.version = version
      }
      const expected = this.bySize && !this.expected?.startsWith(SIZE_VERSION) ? null : this.expected // (a worker's)
      let changed = version !== this.version || total !== this.size || (expected !== null && version !== expected)
      // The same size, and a validator this object had before: servers that disagree (a replacement never goes back).
      // So too the one opened, asked again after a 412 to it: a server that had another (A, not A, then A).
      const back = changed ? validators.get(this.url)?.includes(validator) : options?.unconditional === true
      if (back && total === this.size && !this.bySize) {
        version = this.compareBySize(total)
        changed = false
      }
      remember(this.url, validator)
      if (changed) {
        res.body?.cancel().catch(() => {})
        throw total === this.size ? this.flipped() : this.replaced()
      }
      if (data !== null) { // (a 200: the bytes asked for out of the whole)
        this.answeredAt = Date.now()
        return data.subarray(from, to + 1)
      }
      data = Buffer.from(await res.arrayBuffer())
      if (from !== start || to < from) throw new ShortRead(`answered bytes ${from}-${to} when asked for ${start}-${end}`) // tried again
      if (data.length !== to - from + 1) throw new ShortRead(`sent ${data.length} bytes of the ${to - from + 1} its Content-Range says`)
      this.answeredAt = Date.now()
      // A store may answer less of a range than asked (RFC 9110 14.4): the rest is asked for, never taken as all.
      const wanted = Math.min(end, total - 1)
      if (to >= wanted) return data
      const deadline = options?.deadline ?? Date.now() + TOTAL_TIMEOUT_MS // for all the pieces of this range
      if (Date.now() >= deadline) throw remoteError(`the remote store answers ranges in pieces of ${data.length} bytes, too slowly to read`, { transient: true })
      const rest = await this.fetchRange(to + 1, end, when, { ...options, deadline })
      return Buffer.concat([data, rest])
    }, options)
  }

  /** In the background, when due: asks the store whether the object is still the version opened. */
  revalidate () {
    // Any answer checks the validators; without them only the first bytes tell, so they are asked for when due whatever
    // else was read meanwhile (one range of IDENTITY_BYTES each revalidateMs).
    const last = this.identity === null ? this.answeredAt : this.identifiedAt
    if (this.revalidateMs <= 0 || this.revalidating || this.stale !== null || Date.now() - last < this.revalidateMs) return
    this.revalidating = true
    const asked = this.identity === null
      ? this.fetchRange(0, 0)
      : this.fetchRange(0, IDENTITY_BYTES - 1).then((head) => {
        this.identifiedAt = Date.now()
        if (identityOf(head) !== this.identity) this.replaced()
      })
    asked.catch(() => {}).then(() => { this.revalidating = false })
  }

  /**
   * For /ready: resolves when the store answers with the version opened (at once when it did within the last second),
   * rejects with the reason when not. One short try: a probe must not wait out the retries.
   */
  async check () {
    if (this.stale !== null) throw this.stale
    if (Date.now() - this.answeredAt < 1000) return
    await this.fetchRange(0, 0, 'read', { attempts: 1, timeoutMs: PROBE_TIMEOUT_MS })
  }

  /**
   * Bytes [offset, offset + length) as they are, in one range request (no block cache: for tile data, which the tile
   * cache keeps; every such read also checks the version).
   */
  read (offset, length) {
    if (this.identity !== null) this.revalidate() // (an answer without validators tells nothing of the object's version)
    if (this.stale !== null) return Promise.reject(this.stale)
    const end = Math.min(offset + length, this.size)
    if (end <= offset) return Promise.resolve(EMPTY)
    return this.fetchRange(offset, end - 1)
  }

  /**
   * Bytes [offset, offset + length) through the block cache: blocks missing are read, consecutive ones in one
   * request, and a block already being read is waited for rather than read twice. For headers, directories and COG
   * blocks, read again and again.
   */
  async readCached (offset, length) {
    this.revalidate()
    if (this.stale !== null) throw this.stale
    const end = Math.min(offset + length, this.size)
    if (end <= offset) return EMPTY
    const first = Math.floor(offset / BLOCK_BYTES)
    const last = Math.floor((end - 1) / BLOCK_BYTES)
    const parts = []
    let missing = -1 // first block of a run of missing ones
    for (let b = first; b <= last + 1; b++) {
      const have = b > last ? null : blocks.get(this.id + b) ?? this.inflight.get(b)
      if (have === undefined) {
        if (missing < 0) missing = b
        continue
      }
      if (missing >= 0) {
        parts.push(...this.fetchBlocks(missing, b - 1))
        missing = -1
      }
      if (have !== null) parts.push(have)
    }
    return assemble(await Promise.all(parts), first, offset, end)
  }

  /** Blocks from..to in one request: a promise of each, kept in `inflight` until it is cached. */
  fetchBlocks (from, to) {
    const start = from * BLOCK_BYTES
    const whole = this.fetchRange(start, Math.min((to + 1) * BLOCK_BYTES, this.size) - 1)
    const out = []
    for (let b = from; b <= to; b++) {
      const one = whole.then((buf) => {
        // One copy per block when several came together: a cached block must not pin its neighbours' bytes.
        const part = buf.subarray((b - from) * BLOCK_BYTES, (b - from + 1) * BLOCK_BYTES)
        const block = from === to ? part : Buffer.from(part)
        if (!this.closed && this.stale === null) blocks.set(this.id + b, block)
        return block
      })
      const done = () => { if (this.inflight.get(b) === one) this.inflight.delete(b) }
      one.then(done, done)
      this.inflight.set(b, one)
      out.push(one)
    }
    return out
  }

  /** Drops this reader's blocks from the cache. */
  forget () {
    for (const key of blocks.keys()) if (key.startsWith(this.id)) blocks.delete(key)
  }

  close () {
    if (this.closed) return
    this.closed = true
    this.forget()
  }
}

/** Bytes [offset, end) out of consecutive blocks, the first of which is block `first`. */
function assemble (parts, first, offset, end) {
  const from = offset - first * BLOCK_BYTES
  if (parts.length === 1) return parts[0].subarray(from, from + end - offset)
  return Buffer.concat(parts).subarray(from, from + end - offset)
}

/** Opens a remote object for reading (see RangeReader); throws an Unavailable with the reason. */
export async function openRemote (url, options) {
  const reader = new RangeReader(url, options)
  await reader.open()
  return reader
}

/** The URL of a file beside a remote object (`suffix`: '.aux.xml'), its query (a signature, say) kept after it. */
export function besideUrl (url, suffix) {
  const cut = isS3Url(url) ? -1 : url.search(/[?#]/)
  return cut === -1 ? url + suffix : url.slice(0, cut) + suffix + url.slice(cut)
}

/**
 * A small remote object whole (a sidecar: a COG's .aux.xml), with the retries of every read; null when there is none
 * (404, or empty) or it holds more than `maxBytes`. Throws an Unavailable saying why it cannot be read.
 */
export function readSmallRemote (url, { s3, maxBytes }) {
  return withRetries(requestsFor(url, s3).request, { range: `bytes=0-${maxBytes}` }, async (res) => {
    if (res.status === 404 || res.status === 416) {
      res.body?.cancel().catch(() => {})
      return null
    }
    if (res.status !== 200 && res.status !== 206) throw await answerError(res, 'read')
    const chunks = []
    let size = 0
    for await (const chunk of res.body ?? []) { // (a 200 from a store that ignores ranges may be long: read no further)
      size += chunk.length
      if (size > maxBytes) return null
      chunks.push(chunk)
    }
    return Buffer.concat(chunks)
  })
}

/** The s3:// URLs of the objects directly under an s3:// prefix; throws an Unavailable with the reason. */
export function listRemotePrefix (url, s3) {
  return listS3Prefix(url, s3, (request) => withRetries(request, {}, async (res) => {
    if (res.status === 200) return res.text()
    throw await answerError(res, 'open')
  }))
}

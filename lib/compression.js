// Content codings of the answers that are not tiles (JSON, HTML, JavaScript, CSS, glyph PBFs, text): brotli or gzip
// when the client takes it, identity always. A document is compressed once per version and coding and the bytes kept
// (CodedDocuments), never per request; tiles have their own negotiation (lib/encoding.js, routes/tile-answer.js).
import { acceptMask, chooseEncoding, transcode } from './encoding.js'

/** Bytes under which an answer is not worth compressing (headers and framing outweigh the saving). */
export const SMALL = 1024

// Media types worth compressing: text, JSON and JavaScript of every kind, protobuf (glyphs), SVG. Never images (PNG,
// WebP, JPEG sprites and tiles are compressed already).
const COMPRESSIBLE = /^(?:text\/|application\/(?:json|javascript|ecmascript|x-protobuf|xml|[\w.-]+\+json|[\w.-]+\+xml)|image\/svg\+xml)/i
const compressibleMemo = new Map() // content type → boolean: answers carry few distinct types

/** Whether an answer of this Content-Type is worth compressing. */
export function compressible (type) {
  if (typeof type !== 'string') return false
  let answer = compressibleMemo.get(type)
  if (answer === undefined) {
    answer = COMPRESSIBLE.test(type)
    if (compressibleMemo.size > 200) compressibleMemo.clear()
    compressibleMemo.set(type, answer)
  }
  return answer
}

/**
 * The coding of a document for this Accept-Encoding, negotiated as a raw compressible tile's (lib/encoding.js): the
 * one the client's q-values rank highest; on a tie, or without q-values, brotli (a document kept compressed comes out
 * smaller than gzip's at similar cost), else gzip, else identity.
 */
export function documentCoding (acceptEncoding) {
  return chooseEncoding('identity', true, acceptMask(acceptEncoding))
}

const VARIES_ON_CODING = /\baccept-encoding\b/i

/** Adds `Vary: Accept-Encoding` unless the answer says so already (the OGC API documents add it with Accept). */
export function varyOnCoding (reply) {
  const vary = reply.getHeader('vary')
  if (vary === undefined) reply.header('vary', 'Accept-Encoding')
  else if (!VARIES_ON_CODING.test(vary)) reply.header('vary', `${vary}, Accept-Encoding`)
}

/** An ETag of the `coding` form of the document whose identity ETag is `etag` (a different representation, RFC 9110 8.8.3). */
export function codedEtag (etag, coding) {
  return coding === 'identity' ? etag : `${etag.slice(0, -1)}-${coding}"`
}

/**
 * Documents in their codings, each made once and kept, within `maxBytes` (the least recently used go first).
 * `get(key, coding, identity)` → { bytes, coding } (coding 'identity' when the document is too small to be worth it),
 * or a promise of it while a large one is compressed; `identity()` gives the document's bytes and is called only
 * when they are not kept in that coding. `key` names one version of one document (its content hash, or a name
 * the caller clears when the document changes).
 */
export class CodedDocuments {
  constructor (maxBytes = 32 * 1024 * 1024) {
    this.maxBytes = maxBytes
    this.bytes = 0
    this.kept = new Map() // key\ncoding → { bytes, coding } | Promise of it
  }

  get (key, coding, identity) {
    const k = `${key}\n${coding}`
    const found = this.kept.get(k)
    if (found !== undefined) {
      this.kept.delete(k) // most recently used last
      this.kept.set(k, found)
      return found
    }
    const text = identity()
    if (text.length < SMALL || coding === 'identity') return this.keep(k, { bytes: text, coding: 'identity' })
    // Compressed as tiles are (lib/encoding.js, the levels of answers kept): inline when small, on libuv's pool when
    // not, so that a large document (MapLibre GL JS is 1 MB) cannot hold the event loop.
    const bytes = transcode(text, 'identity', coding)
    if (!(bytes instanceof Promise)) return this.keep(k, { bytes, coding })
    const made = bytes.then((b) => {
      const done = { bytes: b, coding }
      if (this.kept.get(k) === made) {
        this.kept.delete(k)
        this.keep(k, done)
      }
      return done
    }, (err) => {
      if (this.kept.get(k) === made) this.kept.delete(k)
      throw err
    })
    this.kept.set(k, made)
    return made
  }

  keep (k, answer) {
    this.kept.set(k, answer)
    this.bytes += answer.bytes.length
    for (const [old, value] of this.kept) {
      if (this.bytes <= this.maxBytes || old === k) break
      this.kept.delete(old)
      if (!(value instanceof Promise)) this.bytes -= value.bytes.length
    }
    return answer
  }

  clear () {
    this.kept.clear()
    this.bytes = 0
  }
}

/** Every metadata answer's coded forms (routes/http.js metadataValidators), keyed by content hash: shared by all apps. */
export const documents = new CodedDocuments()

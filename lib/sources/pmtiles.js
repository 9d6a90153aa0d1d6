// PMTiles v3 source, local (a kept file descriptor) or remote (https:// or s3://, by range requests through
// lib/remote/reader.js: retries, a block cache, the object's ETag pinned). The pmtiles library parses and
// caches the header and directories; the tile read itself is ours because the library's getZxy decompresses tile data,
// and we want the stored bytes so a gzip tile reaches a gzip-accepting client untouched.
import { close, fstat, open as openCallback, readSync } from 'node:fs'
import { promisify } from 'node:util'
import zlib from 'node:zlib'
import { LRUCache } from 'lru-cache'
import { Compression, PMTiles, ResolvedValueCache, TileType, findTile, zxyToTileId } from 'pmtiles'
import { buildTileJson, describedBy, layersOfTile, normalizeFormat } from './tilejson.js'
import { Unavailable, toldUnavailable } from '../errors.js'
import { openRemote } from '../remote/reader.js'
import { describeTile, isVector } from '../tiletype.js'
import { loadMlt } from '../variants/mlt.js'

export const kind = 'pmtiles'
export const title = 'PMTiles'
export const urlForm = 'https://…/x.pmtiles or s3://bucket/x.pmtiles'
export const extensions = ['.pmtiles']
export const matchesUrl = (url) => /^(https?|s3):\/\//i.test(url) && /\.pmtiles(\?|$)/i.test(url)

const HEADER_BYTES = 127
const MAGIC = 'PMTiles'
const TYPE_FORMAT = { [TileType.Mvt]: 'pbf', [TileType.Png]: 'png', [TileType.Jpeg]: 'jpg', [TileType.Webp]: 'webp', [TileType.Avif]: 'avif', [TileType.Mlt]: 'mlt' }
const COMPRESSION = { [Compression.None]: 'identity', [Compression.Gzip]: 'gzip', [Compression.Brotli]: 'br', [Compression.Zstd]: 'zstd' }

const openFd = promisify(openCallback)
const fstatFd = promisify(fstat)
const gunzip = promisify(zlib.gunzip)
const brotliDecompress = promisify(zlib.brotliDecompress)
const zstdDecompress = zlib.zstdDecompress ? promisify(zlib.zstdDecompress) : null

/** Directory and metadata decompression for the pmtiles library, on Node's zlib (thread pool); also for a style's remote archive (lib/style/render/remote.js). */
export async function decompressInternal (buf, compression) {
  const data = Buffer.from(buf)
  let out
  if (compression === Compression.None || compression === Compression.Unknown) return buf
  try {
    if (compression === Compression.Gzip) out = await gunzip(data)
    else if (compression === Compression.Brotli) out = await brotliDecompress(data)
    else if (compression === Compression.Zstd && zstdDecompress) out = await zstdDecompress(data)
  } catch (err) {
    err.decompression = true // zlib's words ('invalid bit length repeat') name no part of the file: open() does
    throw err
  }
  if (out === undefined) throw new Error(`unsupported internal compression ${COMPRESSION[compression] ?? compression}`)
  return out.buffer.slice(out.byteOffset, out.byteOffset + out.byteLength)
}

/**
 * A local archive read through one kept file descriptor. Reads are synchronous preads, like better-sqlite3's: a tile
 * in the page cache costs ~2.5 µs that way, while the thread-pool handoff of fs.read costs ~27 µs of main-thread time
 * a request on a 2-core machine (measured, bench/README.md). The price is that a read from a cold disk blocks the
 * event loop for its duration; the tile cache keeps such reads rare.
 */
class FileRangeSource {
  constructor (fd, key) {
    this.fd = fd
    this.key = key
  }

  getKey () { return this.key }

  readNow (offset, length) {
    const buf = Buffer.allocUnsafeSlow(length)
    const bytesRead = readSync(this.fd, buf, 0, length, offset)
    return bytesRead === length ? buf : buf.subarray(0, bytesRead)
  }

  async read (offset, length) { return this.readNow(offset, length) }

  async getBytes (offset, length) {
    const buf = await this.read(offset, length)
    return { data: buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.length) }
  }

  close () { return new Promise((resolve) => close(this.fd, () => resolve())) }
}

/**
 * A remote archive (lib/remote/reader.js). The library's reads (header, directories) go through the block cache;
 * tile data is read as its exact range, since the tile cache keeps the tiles themselves.
 */
class RemoteRangeSource {
  constructor (reader, key) {
    this.reader = reader
    this.key = key
  }

  getKey () { return this.key }

  read (offset, length) { return this.reader.read(offset, length) }

  async getBytes (offset, length) {
    const buf = await this.reader.readCached(offset, length)
    return { data: buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.length) }
  }

  close () { this.reader.close() }
}

function checkHeader (bytes, size) {
  if (bytes.length < HEADER_BYTES) throw new Error(`too short to be a PMTiles archive (${bytes.length} bytes)`)
  if (bytes.toString('latin1', 0, 7) !== MAGIC) throw new Error('not a PMTiles archive (bad magic number)')
  const version = bytes[7]
  if (version !== 3) throw new Error(`unsupported PMTiles spec version ${version} (only version 3 is read)`)
  if (size !== undefined) {
    // Every section (root directory, metadata, leaf directories, tile data) must lie inside the file: a copy in
    // progress may stop anywhere, and writers order the sections differently.
    let end = 0
    for (const at of [8, 24, 40, 56]) end = Math.max(end, Number(bytes.readBigUInt64LE(at) + bytes.readBigUInt64LE(at + 8)))
    if (end > size) {
      const err = new Error(`incomplete PMTiles archive: ${size} bytes of ${end} (still being written, or truncated)`)
      err.incomplete = true
      throw err
    }
  }
}

/**
 * `context.s3`: the object storage settings (config.s3); `context.remote`: config.remote (revalidateMs);
 * `context.replaced(id, source)`: tells the catalog a remote archive changed under this set (it re-opens the set).
 */
export async function open (spec, context = {}) {
  let source = null
  let size
  let reader = null
  try {
    if (spec.url) {
      reader = await openRemote(spec.url, { s3: context.s3, revalidateMs: context.remote?.revalidateMs })
      reader.onNote = (message) => context.log?.warn({ set: spec.id }, message)
      source = new RemoteRangeSource(reader, spec.url)
      size = reader.size
    } else {
      const fd = await openFd(spec.path, 'r')
      source = new FileRangeSource(fd, spec.path)
      size = (await fstatFd(fd)).size
    }
    const headerBytes = await (reader === null ? source.read(0, HEADER_BYTES) : reader.readCached(0, HEADER_BYTES))
    checkHeader(headerBytes, size)
    // zlib's words ('invalid bit length repeat') name no part of the file. The root directory is decompressed with
    // the header (the library reads both at once) or below.
    const damagedRoot = (err) => {
      const where = `the root directory (${headerBytes.readBigUInt64LE(16)} bytes at offset ${headerBytes.readBigUInt64LE(8)})`
      const what = err.decompression ? `cannot be decompressed (${COMPRESSION[headerBytes[97]] ?? 'unknown compression'})` : 'cannot be read'
      throw new Error(`damaged PMTiles archive: ${where} ${what}: ${err.message}`)
    }
    // A private directory cache per archive: a reload or a removed file drops it with the source.
    const cache = new ResolvedValueCache(256, false, decompressInternal)
    const archive = new PMTiles(source, cache, decompressInternal)
    const header = await archive.getHeader().catch((err) => { if (err.decompression) damagedRoot(err); throw err })
    let json = {}
    let other // JSON metadata that is not an object (an array, a number): kept whole under `json` in /:set/meta
    try {
      const parsed = header.jsonMetadataLength > 0 ? await archive.getMetadata() : {}
      if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) json = parsed
      else other = { json: parsed }
    } catch {
      json = {} // unreadable JSON metadata is not worth refusing the tiles for
    }
    const compression = COMPRESSION[header.tileCompression]
    const { etag, ...headerFields } = header
    const metadata = {
      ...json,
      ...other,
      header: { ...headerFields, tileType: TileType[header.tileType] ?? header.tileType, tileCompression: compression ?? 'unknown', internalCompression: COMPRESSION[header.internalCompression] },
    }
    // min_lon above max_lon: across the antimeridian (TileJSON's are widened to the world's width, buildTileJson).
    const bounds = header.minLon !== header.maxLon && header.minLat < header.maxLat
      ? [header.minLon, header.minLat, header.maxLon, header.maxLat]
      : undefined
    // The root directory is read on every lookup: hold it here rather than behind the cache's async lookup.
    const rootEntries = await cache.getDirectory(source, header.rootDirectoryOffset, header.rootDirectoryLength, header).catch(damagedRoot)
    const tileDataOffset = header.tileDataOffset
    const leafDirectoryOffset = header.leafDirectoryOffset
    // The first tile, found through the leaf directories where the root points at leaves (every large archive's root
    // does): it tells what the tiles are, and their layers when the metadata has no vector_layers.
    let first = rootEntries[0]
    for (let depth = 0; depth < 3 && first !== undefined && first.runLength === 0; depth++) {
      first = (await cache.getDirectory(source, leafDirectoryOffset + first.offset, first.length, header))[0]
    }
    const sample = first?.runLength > 0 && first.length > 0 ? await source.read(tileDataOffset + first.offset, first.length) : undefined
    // The tiles are the truth, as for MBTiles: a header tile type they contradict (unknown, or mvt for PNG tiles) would
    // make the set vector or raster wrongly in TileJSON, /catalog and its absent tiles' status. The declared type
    // decides only what bytes cannot say (MLT): only sure bytes (an image's signature, protobuf) overrule it.
    const declared = TYPE_FORMAT[header.tileType] ?? normalizeFormat(json.format)
    const sniffed = sample !== undefined ? describeTile(sample, { format: declared, compression }).format : undefined
    const format = (sniffed !== undefined && sniffed !== 'bin' && sniffed !== 'json') || declared === undefined ? sniffed : declared
    if (declared !== undefined && format !== declared) {
      const said = TYPE_FORMAT[header.tileType] !== undefined ? `the header says tile type '${declared}'` : `the metadata says format '${declared}'`
      context.log?.warn({ set: spec.id, format, declared }, `${said} but the tiles are '${format}': served as '${format}'`)
    }
    const vectorLayers = json.vector_layers ?? (sample !== undefined && isVector(format) ? layersOfTile(sample, compression, format === 'mlt' ? await loadMlt() : undefined) : undefined)

    // Leaf directories already read, by offset: a tile whose path is known is found synchronously, and read so from a
    // local file (a cold tile then needs no promise; the library's cache answers through one per lookup).
    const leaves = new LRUCache({ max: 256 })
    // From `entries` at `depth`: the tile's entry, null (no such tile), or { offset, length, depth } of a leaf
    // directory to read first.
    const lookUp = (tileId, entries, depth) => {
      for (; depth <= 3; depth++) {
        const entry = findTile(entries, tileId)
        if (entry === null) return null
        if (entry.runLength > 0) return entry
        const offset = leafDirectoryOffset + entry.offset
        entries = leaves.get(offset)
        if (entries === undefined) return { offset, length: entry.length, depth }
      }
      throw new Unavailable('directory deeper than the spec allows')
    }
    const readThroughLeaves = async (tileId, found) => {
      while (found !== null && found.runLength === undefined) {
        const entries = await cache.getDirectory(source, found.offset, found.length, header)
        leaves.set(found.offset, entries)
        found = lookUp(tileId, entries, found.depth + 1)
      }
      return found === null ? null : readEntry(found)
    }
    const checked = (data, entry) => {
      if (data.length !== entry.length) throw new Unavailable('tile data lies beyond the end of the archive')
      return data
    }
    // The archive was replaced at its source: this set answers 503 until the catalog has re-opened it, never a tile of
    // the new archive through the old directories.
    const changed = (err) => {
      if (err?.replaced !== true) throw err
      context.replaced?.(spec.id, set) // (the catalog re-opens a set once, however often told)
      throw toldUnavailable(`tileset '${spec.id}' changed at its source and is being re-opened`, 1)
    }
    const readEntry = source instanceof FileRangeSource
      ? (entry) => checked(source.readNow(tileDataOffset + entry.offset, entry.length), entry)
      : (entry) => source.read(tileDataOffset + entry.offset, entry.length).then((data) => checked(data, entry), changed)

    let closed = false
    const set = {
      id: spec.id,
      kind,
      format,
      hints: { format, compression },
      metadata,
      extent: bounds?.[0] > bounds?.[2] ? bounds : undefined, // for an export given no --bbox
      tilejson: buildTileJson({
        ...describedBy(json, spec.id),
        minzoom: header.minZoom,
        maxzoom: header.maxZoom,
        bounds,
        center: bounds ? [header.centerLon, header.centerLat, header.centerZoom] : undefined,
        vectorLayers,
        format,
      }),
      getTile (z, x, y) {
        const tileId = zxyToTileId(z, x, y)
        const found = lookUp(tileId, rootEntries, 0)
        if (found === null) return null
        return found.runLength !== undefined ? readEntry(found) : readThroughLeaves(tileId, found).catch(changed)
      },
      close () {
        if (closed) return
        closed = true
        return source.close()
      },
    }
    if (reader !== null) {
      set.revision = reader.version ?? undefined // the object's ETag: the same data on every replica
      set.check = () => reader.check()
      reader.onReplaced = (why) => context.replaced?.(spec.id, set, why)
    }
    return set
  } catch (err) {
    await source?.close()
    throw err
  }
}


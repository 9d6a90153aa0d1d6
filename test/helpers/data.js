// Writers for the small real tilesets the tests need: MBTiles through better-sqlite3 and PMTiles v3 by the spec
// (header, varint directories, optional leaf directories). No fixture files needed. And a reader of every stored
// tile of either (storedTiles), for the suites and benches that compare answers with what a file holds.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { brotliDecompressSync, gunzipSync, gzipSync } from 'node:zlib'
import Database from 'better-sqlite3'
import vtpbf from 'vt-pbf'
import { ResolvedValueCache, tileIdToZxy, zxyToTileId } from 'pmtiles'

export function tempDir (t, prefix = 'tile-cannon-') {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  t?.after?.(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** A real MVT tile: one point in layer `points` whose properties say where it is. */
export function makeMvt (z, x, y, extra = {}) {
  const tile = { features: [{ type: 1, geometry: [[2048, 2048]], tags: { z, x, y, ...extra } }] }
  const pbf = vtpbf.fromGeojsonVt({ points: tile }, { version: 2 })
  return Buffer.from(pbf.buffer, pbf.byteOffset, pbf.byteLength)
}

// A valid 1×1 PNG; the bytes after the signature are real chunks.
export const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==', 'base64')

/** Every tile of zooms minzoom..maxzoom inside a small grid corner, as [z, x, y]. */
export function pyramid (minzoom, maxzoom, perAxis = 2) {
  const out = []
  for (let z = minzoom; z <= maxzoom; z++) {
    const n = Math.min(2 ** z, perAxis)
    for (let x = 0; x < n; x++) for (let y = 0; y < n; y++) out.push([z, x, y])
  }
  return out
}

/**
 * Writes an MBTiles file. tiles: [{ z, x, y (XYZ), data }]. schema 'flat' (a tiles table) or 'tilemill'
 * (map + images with a tiles view, as TileMill and mbutil write).
 */
export function writeMbtiles (path, { tiles, metadata = {}, schema = 'flat' }) {
  const db = new Database(path)
  db.exec('CREATE TABLE metadata (name TEXT, value TEXT)')
  if (schema === 'flat') {
    db.exec('CREATE TABLE tiles (zoom_level INTEGER, tile_column INTEGER, tile_row INTEGER, tile_data BLOB)')
    db.exec('CREATE UNIQUE INDEX tile_index ON tiles (zoom_level, tile_column, tile_row)')
    const insert = db.prepare('INSERT INTO tiles VALUES (?, ?, ?, ?)')
    db.transaction(() => { for (const t of tiles) insert.run(t.z, t.x, 2 ** t.z - 1 - t.y, t.data) })()
  } else {
    db.exec('CREATE TABLE map (zoom_level INTEGER, tile_column INTEGER, tile_row INTEGER, tile_id TEXT)')
    db.exec('CREATE UNIQUE INDEX map_index ON map (zoom_level, tile_column, tile_row)')
    db.exec('CREATE TABLE images (tile_data BLOB, tile_id TEXT)')
    db.exec('CREATE UNIQUE INDEX images_id ON images (tile_id)')
    db.exec('CREATE VIEW tiles AS SELECT map.zoom_level AS zoom_level, map.tile_column AS tile_column, map.tile_row AS tile_row, images.tile_data AS tile_data FROM map JOIN images ON images.tile_id = map.tile_id')
    const map = db.prepare('INSERT INTO map VALUES (?, ?, ?, ?)')
    const image = db.prepare('INSERT OR IGNORE INTO images VALUES (?, ?)')
    db.transaction(() => {
      for (const t of tiles) {
        const id = `${t.z}/${t.x}/${t.y}`
        map.run(t.z, t.x, 2 ** t.z - 1 - t.y, id)
        image.run(t.data, id)
      }
    })()
  }
  const insertMeta = db.prepare('INSERT INTO metadata VALUES (?, ?)')
  for (const [k, v] of Object.entries(metadata)) insertMeta.run(k, typeof v === 'string' ? v : JSON.stringify(v))
  db.close()
  return path
}

function varint (n, out) {
  while (n >= 0x80) {
    out.push((n % 0x80) | 0x80)
    n = Math.floor(n / 0x80)
  }
  out.push(n)
}

function serializeDirectory (entries) {
  const out = []
  varint(entries.length, out)
  let last = 0
  for (const e of entries) { varint(e.tileId - last, out); last = e.tileId }
  for (const e of entries) varint(e.runLength, out)
  for (const e of entries) varint(e.length, out)
  entries.forEach((e, i) => {
    const prev = entries[i - 1]
    varint(i > 0 && e.offset === prev.offset + prev.length ? 0 : e.offset + 1, out)
  })
  return Buffer.from(out)
}

const TILE_TYPES = { unknown: 0, mvt: 1, png: 2, jpg: 3, webp: 4, avif: 5, mlt: 6 }
const COMPRESSIONS = { unknown: 0, none: 1, gzip: 2, br: 3, zstd: 4 }

/**
 * Writes a PMTiles v3 archive. tiles: [{ z, x, y, data }] with data already in `tileCompression`.
 * leafSize splits the directory into leaf directories of that many entries.
 */
export function writePmtiles (path, { tiles, metadata = {}, tileType = 'mvt', tileCompression = 'gzip', internalCompression = 'gzip', leafSize = 0, bounds = [-180, -85, 180, 85] }) {
  const sorted = tiles.map((t) => ({ ...t, tileId: zxyToTileId(t.z, t.x, t.y) })).sort((a, b) => a.tileId - b.tileId)
  const data = []
  let offset = 0
  const entries = sorted.map((t) => {
    const e = { tileId: t.tileId, offset, length: t.data.length, runLength: 1 }
    data.push(t.data)
    offset += t.data.length
    return e
  })
  const compress = (buf) => (internalCompression === 'gzip' ? gzipSync(buf) : buf)
  let root
  let leaves = Buffer.alloc(0)
  if (leafSize > 0 && entries.length > leafSize) {
    const rootEntries = []
    const parts = []
    let leafOffset = 0
    for (let i = 0; i < entries.length; i += leafSize) {
      const leaf = compress(serializeDirectory(entries.slice(i, i + leafSize)))
      rootEntries.push({ tileId: entries[i].tileId, offset: leafOffset, length: leaf.length, runLength: 0 })
      parts.push(leaf)
      leafOffset += leaf.length
    }
    root = compress(serializeDirectory(rootEntries))
    leaves = Buffer.concat(parts)
  } else {
    root = compress(serializeDirectory(entries))
  }
  const meta = compress(Buffer.from(JSON.stringify(metadata)))
  const tileData = Buffer.concat(data)
  const zooms = sorted.map((t) => t.z)
  const header = Buffer.alloc(127)
  header.write('PMTiles', 0, 'latin1')
  header[7] = 3
  const u64 = (pos, n) => header.writeBigUInt64LE(BigInt(n), pos)
  const rootOffset = 127
  const metaOffset = rootOffset + root.length
  const leafOffset = metaOffset + meta.length
  const dataOffset = leafOffset + leaves.length
  u64(8, rootOffset); u64(16, root.length)
  u64(24, metaOffset); u64(32, meta.length)
  u64(40, leafOffset); u64(48, leaves.length)
  u64(56, dataOffset); u64(64, tileData.length)
  u64(72, entries.length); u64(80, entries.length); u64(88, entries.length)
  header[96] = 1
  header[97] = COMPRESSIONS[internalCompression]
  header[98] = COMPRESSIONS[tileCompression]
  header[99] = TILE_TYPES[tileType]
  header[100] = Math.min(...zooms)
  header[101] = Math.max(...zooms)
  header.writeInt32LE(Math.round(bounds[0] * 1e7), 102)
  header.writeInt32LE(Math.round(bounds[1] * 1e7), 106)
  header.writeInt32LE(Math.round(bounds[2] * 1e7), 110)
  header.writeInt32LE(Math.round(bounds[3] * 1e7), 114)
  header[118] = Math.min(...zooms)
  header.writeInt32LE(Math.round(((bounds[0] + bounds[2]) / 2) * 1e7), 119)
  header.writeInt32LE(Math.round(((bounds[1] + bounds[3]) / 2) * 1e7), 123)
  const file = Buffer.concat([header, root, meta, leaves, tileData])
  writeFileSync(path, file)
  return file
}

/** A vector set: gzip MVT tiles for `coords`, written as MBTiles and PMTiles with the same content. */
export function vectorTiles (coords) {
  return coords.map(([z, x, y]) => ({ z, x, y, data: gzipSync(makeMvt(z, x, y)) }))
}

/** Every stored tile of an MBTiles file or PMTiles archive as [z, x, y (XYZ), bytes], in the file's order. */
export async function storedTiles (path) {
  return path.endsWith('.mbtiles') ? mbtilesTiles(path) : await pmtilesTiles(path)
}

function mbtilesTiles (path) {
  const db = new Database(path, { readonly: true })
  const rows = db.prepare('SELECT zoom_level z, tile_column x, tile_row y, tile_data d FROM tiles ORDER BY z, x, y').all()
  db.close()
  return rows.map((r) => [r.z, r.x, 2 ** r.z - 1 - r.y, r.d])
}

/** Walks a PMTiles archive's directories (leaves too) with the pmtiles library. */
async function pmtilesTiles (path) {
  const file = readFileSync(path)
  const source = { getKey: () => path, getBytes: async (o, l) => ({ data: file.buffer.slice(file.byteOffset + o, file.byteOffset + o + l) }) }
  const decompress = async (buf, c) => {
    const b = Buffer.from(buf)
    const out = c === 2 ? gunzipSync(b) : c === 3 ? brotliDecompressSync(b) : b
    return out.buffer.slice(out.byteOffset, out.byteOffset + out.length)
  }
  const cache = new ResolvedValueCache(100, false, decompress)
  const header = await cache.getHeader(source)
  const out = []
  const walk = async (offset, length) => {
    for (const e of await cache.getDirectory(source, offset, length, header)) {
      if (e.runLength === 0) await walk(header.leafDirectoryOffset + e.offset, e.length)
      else {
        const start = header.tileDataOffset + e.offset
        for (let i = 0; i < e.runLength; i++) out.push([...tileIdToZxy(e.tileId + i), file.subarray(start, start + e.length)])
      }
    }
  }
  await walk(header.rootDirectoryOffset, header.rootDirectoryLength)
  return out
}

/**
 * The start of a Python script (rasterio, numpy) for the COG sidecar tests: `d` (its first argument, the folder to
 * write in), `prof`, the profile of an n × n px GeoTIFF over z8 tile 135/91 (EPSG:3857, blocks of 256, deflate), and
 * `yy, xx`, its pixel grids.
 */
export const z8RasterPy = (n) => `
import json, math, os, shutil, sys, warnings
warnings.filterwarnings('ignore')
import numpy as np, rasterio
from rasterio.enums import Resampling
from rasterio.transform import from_origin
d = sys.argv[1]
W = 2 * math.pi * 6378137.0
size = W / 2 ** 8
yy, xx = np.mgrid[0:${n}, 0:${n}]
prof = dict(driver='GTiff', width=${n}, height=${n}, count=1, dtype='uint8', crs='EPSG:3857', tiled=True, blockxsize=256,
            blockysize=256, compress='deflate', transform=from_origin(-W / 2 + 135 * size, W / 2 - 91 * size, size / ${n}, size / ${n}))
`

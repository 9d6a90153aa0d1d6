// The tiles of a job in one fixed order, each with an index: zoom by zoom, column by column, row by row (as a folder
// of z/x/y is laid out). The index is what a resumed export starts from, so it must not depend on anything but the
// job. An index is turned into z/x/y by arithmetic: resuming at tile 300 million costs nothing.
import { UsageError } from './errors.js'
import { lonLatToTile } from '../tilemath.js'

// A box's edges are taken a hair inside it: a box ending exactly on a tile's edge (in floating point, or not quite)
// does not take the tiles beyond it (a row or a column) in.
const EDGE = 1e-9

/**
 * The tiles of a box at zoom z, as column spans: two for a box across the antimeridian (west above east), or one
 * across the whole width where its halves meet in a column (z0's one tile, or a box nearly round the world): a tile
 * must be counted, read and written once.
 */
export function spans ([w, s, e, n], z) {
  const parts = w < e ? [[w, e]] : [[w, 180], [-180, e]]
  const out = parts.map(([west, east]) => {
    const [x0, y0] = lonLatToTile(Math.min(west + EDGE, east), Math.max(s, n - EDGE), z)
    const [x1, y1] = lonLatToTile(Math.max(west, east - EDGE), Math.min(n, s + EDGE), z)
    return [x0, y0, Math.max(x0, x1), Math.max(y0, y1)]
  })
  if (out.length === 2 && out[1][2] >= out[0][0]) return [[0, out[0][1], 2 ** z - 1, out[0][3]]] // (both halves have the same rows)
  return out
}

export class TileGrid {
  constructor ([minzoom, maxzoom], bbox) {
    this.levels = []
    let offset = 0
    for (let z = minzoom; z <= maxzoom; z++) {
      for (const [x0, y0, x1, y1] of spans(bbox, z)) {
        const rows = y1 - y0 + 1
        const count = (x1 - x0 + 1) * rows
        this.levels.push({ z, x0, y0, rows, count, offset })
        offset += count
      }
    }
    if (!Number.isSafeInteger(offset)) throw new UsageError(`${offset.toExponential(2)} tiles are more than one export can count: narrow --zooms or --bbox`)
    this.total = offset
    this.level = 0 // the level of the latest index asked for: indexes are asked for mostly in order
  }

  /** Tile `index` (0 ≤ index < total) → [z, x, y]. */
  at (index) {
    let level = this.levels[this.level]
    if (index < level.offset) this.level = 0
    while (index >= (level = this.levels[this.level]).offset + level.count) this.level++
    const i = index - level.offset
    return [level.z, level.x0 + Math.floor(i / level.rows), level.y0 + (i % level.rows)]
  }

  /** Tiles per zoom, for the start-up line: '10: 12, 11: 30, …'. */
  describe () {
    const byZoom = new Map()
    for (const l of this.levels) byZoom.set(l.z, (byZoom.get(l.z) ?? 0) + l.count)
    return [...byZoom].map(([z, count]) => `z${z}: ${count}`).join(', ')
  }
}

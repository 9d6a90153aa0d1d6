// The tiles of a job in one fixed order, each with an index: zoom by zoom, column by column, row by row (as a folder
// of z/x/y is laid out). The index is what a resumed export starts from, so it must not depend on anything but the
// job. An index is turned into z/x/y by arithmetic: resuming at tile 300 million costs nothing.
import { UsageError } from './errors.js'
import { tileRange } from '../tilemath.js'

export class TileGrid {
  constructor ([minzoom, maxzoom], bbox) {
    this.levels = []
    let offset = 0
    for (let z = minzoom; z <= maxzoom; z++) {
      const [x0, y0, x1, y1] = tileRange(bbox, z)
      const rows = y1 - y0 + 1
      const count = (x1 - x0 + 1) * rows
      this.levels.push({ z, x0, y0, rows, count, offset })
      offset += count
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
    return this.levels.map((l) => `z${l.z}: ${l.count}`).join(', ')
  }
}

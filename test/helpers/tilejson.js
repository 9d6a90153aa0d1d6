// The official TileJSON 3.0.0 schema (../shared/schemas, present in CI), compiled once, for tests that check answers.
import assert from 'node:assert/strict'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import Ajv from 'ajv'
import { ROOT } from './app.js'

const SCHEMA_PATH = join(ROOT, '..', 'shared', 'schemas', 'tilejson-3.0.0.schema.json')
export const HAVE_SCHEMA = existsSync(SCHEMA_PATH)

let vectorCheck = null
let rasterCheck = null
function compile () {
  if (vectorCheck !== null) return
  const schema = JSON.parse(readFileSync(SCHEMA_PATH, 'utf8'))
  const ajv = new Ajv({ allErrors: true, strict: false })
  vectorCheck = ajv.compile(schema)
  // The schema requires vector_layers of every TileJSON; the spec text (3.3) only of vector sets (schemas/README.md).
  rasterCheck = ajv.compile({ ...schema, required: schema.required.filter((k) => k !== 'vector_layers') })
}

/** Asserts `tilejson` is valid against the official schema (raster sets without the vector_layers requirement). */
export function assertValidTileJson (tilejson, { raster = false, label = tilejson?.name } = {}) {
  compile()
  const check = raster ? rasterCheck : vectorCheck
  const ok = check(tilejson)
  assert.ok(ok, `${label}: TileJSON not valid against the 3.0.0 schema: ${JSON.stringify(check.errors)}`)
}

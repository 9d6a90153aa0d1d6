// The rendering options of raster sets (titiler's query parameters), validated and resolved in one place for every
// raster kind: what the workers need, with the defaults filled in. The result is also the tile cache key, so equal
// requests share a tile however they were spelled.
import { BadRequest as OptionError } from '../errors.js'
import { COLORMAPS as RAMPS } from './colormaps.js'
import { ExpressionError, parseExpression } from './expression.js'

const RESAMPLING = ['nearest', 'bilinear', 'cubic']
const ENCODINGS = ['terrarium', 'mapbox']
const COLORMAPS = new Set(Object.keys(RAMPS).flatMap((n) => [n, n + '_r'])) // `_r`: reversed

// A plain decimal number: Number() would also take '', ' ', '0x10' and 'Infinity', and JSON (the cache key) turns
// Infinity into null, the same key as no value at all.
const NUMBER = /^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i
const number = (s) => (NUMBER.test(s) && Number.isFinite(Number(s)) ? Number(s) : NaN)
const list = (value) => (value === undefined ? [] : (Array.isArray(value) ? value : [value]).flatMap((v) => String(v).split(',')))
const single = (query, name) => {
  const value = query[name]
  if (Array.isArray(value)) throw new OptionError(`${name} is given more than once`)
  return value === undefined || value === '' ? undefined : String(value)
}

/** The next float64 above `x` (finite). */
function nextUp (x) {
  if (x === 0) return Number.MIN_VALUE
  const bits = new BigInt64Array(new Float64Array([x]).buffer)
  bits[0] += x > 0 ? 1n : -1n
  return new Float64Array(bits.buffer)[0]
}

// Parsed band math by the text as given (or the error it makes), so a map's hundreds of tiles with the same
// expression parse it once. Bounded: the oldest goes first.
const expressions = new Map()
const MAX_EXPRESSIONS = 256

/** `text` parsed (see parseExpression), or throws OptionError with what is wrong and where. */
function expressionOf (text) {
  let parsed = expressions.get(text)
  if (parsed === undefined) {
    try {
      parsed = parseExpression(text)
    } catch (err) {
      if (!(err instanceof ExpressionError)) throw err
      parsed = { error: `expression: ${err.message}` }
    }
    if (expressions.size >= MAX_EXPRESSIONS) expressions.delete(expressions.keys().next().value)
    expressions.set(text, parsed)
  }
  if (parsed.error !== undefined) throw new OptionError(parsed.error)
  return parsed
}

/**
 * titiler-style query options → what the workers need, with the defaults filled in (also the cache key, so equal
 * requests share a tile however they were spelled). `file` is the file's description (/meta).
 */
export function resolveOptions (file, query, rendering) {
  const bidxList = query.bidx === '' ? [] : list(query.bidx) // an empty bidx= is not given, as the other empty options
  const expressionText = single(query, 'expression')
  let bidx
  let expression = null
  if (expressionText !== undefined) {
    if (bidxList.length > 0) throw new OptionError('bidx and expression cannot be combined: the expression names the bands it reads (b1, b2, …)')
    const parsed = expressionOf(expressionText)
    const outside = parsed.references.find((r) => r.band >= file.bands)
    if (outside !== undefined) throw new OptionError(`expression: ${outside.text} at position ${outside.position} is not a band of this file (${file.bands === 1 ? 'b1 only' : `b1-b${file.bands}`})`)
    if (parsed.outputs !== 1 && parsed.outputs !== 3) throw new OptionError(`expression gives ${parsed.outputs} outputs: it takes 1 (grey or colormap) or 3 (RGB), separated by ';'`)
    // The bands read, which valuesAt resamples; the canonical text is the cache key's and is compiled by the workers.
    bidx = [...parsed.bands] // a copy: the parsed result is shared by every request with this text
    expression = { text: parsed.text, outputs: parsed.outputs }
  } else if (bidxList.length > 0) {
    bidx = bidxList.map((s) => {
      const b = number(s)
      if (s === '') throw new OptionError(`bidx has an empty band number: bands are 1-${file.bands}, separated by ','`)
      if (!Number.isInteger(b) || b < 1 || b > file.bands) throw new OptionError(`bidx ${s} is not a band of this file (1-${file.bands})`)
      return b - 1
    })
    if (bidx.length !== 1 && bidx.length !== 3) throw new OptionError('bidx takes 1 band (grey or colormap) or 3 (RGB)')
  } else {
    const colour = file.alpha ? file.bands - 1 : file.bands
    bidx = colour >= 3 ? [0, 1, 2] : [0]
  }

  const resampling = single(query, 'resampling') ?? 'nearest'
  if (!RESAMPLING.includes(resampling)) throw new OptionError(`resampling must be one of ${RESAMPLING.join(', ')}`)

  const encoding = single(query, 'encoding') ?? null
  if (encoding !== null && !ENCODINGS.includes(encoding)) throw new OptionError(`encoding must be ${ENCODINGS.join(' or ')}`)
  // What is shown: the bands, or the expression's outputs.
  const shown = expression === null ? bidx.length : expression.outputs
  const oneShown = expression === null ? 'a single band' : 'an expression with one output'
  if (encoding !== null && shown !== 1) throw new OptionError('encoding=' + encoding + ' needs ' + oneShown)
  if (encoding !== null && rendering?.format === 'jpg') throw new OptionError(`encoding=${encoding} needs a lossless format (.png or .webp): JPEG would corrupt the heights`)

  const colormap = single(query, 'colormap_name') ?? null
  if (colormap !== null) {
    if (!COLORMAPS.has(colormap)) throw new OptionError(`unknown colormap_name '${colormap}'`)
    if (shown !== 1) throw new OptionError('colormap_name needs ' + oneShown)
    if (encoding !== null) throw new OptionError('colormap_name and encoding cannot be combined')
  }

  let nodata = null
  const nodataText = single(query, 'nodata')
  if (nodataText !== undefined) {
    nodata = nodataText.toLowerCase() === 'nan' ? 'nan' : number(nodataText) // a string: JSON (the cache key) has no NaN
    if (Number.isNaN(nodata)) throw new OptionError('nodata must be a finite number or nan')
  }

  let rescale = null
  const ranges = query.rescale === undefined ? [] : Array.isArray(query.rescale) ? query.rescale : [query.rescale]
  if (ranges.length > 0) {
    if (encoding !== null) throw new OptionError('rescale and encoding cannot be combined')
    rescale = ranges.map((r) => {
      const pair = String(r).split(',').map((s) => number(s.trim()))
      if (pair.length !== 2 || !pair.every(Number.isFinite) || pair[0] > pair[1]) throw new OptionError(`rescale '${r}' is not min,max with min ≤ max`)
      // min = max: a threshold, values up to it the low end, above it the high end (rio-tiler divides by the zero width:
      // NaN, every pixel 0). Made the narrowest range above min, so every stretch (and the cache key) takes it as one.
      return pair[0] === pair[1] ? [pair[0], nextUp(pair[0])] : pair
    })
    if (rescale.length === 1) rescale = Array.from({ length: shown }, () => rescale[0])
    if (rescale.length !== shown) throw new OptionError(`rescale needs one min,max or one per ${expression === null ? 'band' : 'output'} (${shown})`)
  }
  if (expression !== null) {
    // New values: no default stretch from the file's statistics (they describe the bands), and no palette.
    return { bidx, resampling, encoding, colormap, nodata, rescale, palette: false, expression: expression.text }
  }
  const palette = file.palette && bidx.length === 1 && colormap === null && rescale === null && encoding === null
  if (rescale === null && encoding === null && !palette && file.statistics) rescale = bidx.map((b) => file.statistics[`b${b + 1}`])
  return { bidx, resampling, encoding, colormap, nodata, rescale, palette, expression: null }
}

/** The options resolveOptions takes, for clients (the viewer's controls), with the defaults this file gets. */
export function describeOptions (file, defaults) {
  const written = (v) => (v === null || v === undefined ? undefined : String(v))
  return [
    { name: 'bidx', type: 'bands', count: file.bands, default: defaults.bidx.map((b) => b + 1).join(',') },
    { name: 'expression', type: 'text', example: file.bands >= 2 ? '(b2-b1)/(b2+b1)' : 'sqrt(b1)' },
    { name: 'rescale', type: 'range', default: written(defaults.rescale?.[0]) },
    { name: 'colormap_name', type: 'choice', values: [...COLORMAPS].sort(), default: written(defaults.colormap) },
    { name: 'encoding', type: 'choice', values: ENCODINGS, dem: true },
    { name: 'resampling', type: 'choice', values: RESAMPLING, default: defaults.resampling },
  ]
}

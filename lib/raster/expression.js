// Band math (`expression=`, issue #18): `(b4-b3)/(b4+b3)`, several outputs separated by `;`. The main thread parses
// the text once (options.js, cached) into a canonical text and the bands it reads; each raster worker compiles that
// text once (cached) into a kernel that works an array at a time: every operator is one tight loop over a block of
// the tile's values into reused Float64 registers, with no allocation and no call per pixel. Blocks of 1,024 values
// (numexpr's way) keep the registers small (8 KiB, in cache) whatever the tile size. The commonest outputs, a band
// as it is and a normalized difference of two bands (NDVI), are one pass straight from the bands.
//
// The parser is our own (precedence climbing) rather than jsep: jsep binds unary minus tighter than `**`, so `-b1**2`
// would be (-b1)**2 where numpy, numexpr (rio-tiler/titiler) and gdal_calc.py give -(b1**2), and its nodes carry no
// positions, which the errors about unknown names and bad bands need. The grammar, as Python's for these operators:
//
//   program    := expression (';' expression)*
//   expression := sum (('<' | '<=' | '>' | '>=' | '==' | '!=') sum)?     comparisons give 1 or 0, not chained
//   sum        := product (('+' | '-') product)*
//   product    := unary (('*' | '/') unary)*
//   unary      := ('-' | '+') unary | power
//   power      := primary ('**' unary)?                                  right-associative: 2**3**2 is 2**9
//   primary    := number | band | name '(' expression (',' expression)* ')' | '(' expression ')'
//
// Bands are b1…bN (B1 too), numbered from 1 as `bidx` numbers them. Nothing in the text is ever evaluated as code:
// names are looked up in a fixed table of bands and functions.

/** The longest expression text taken, as given and as written out canonically. */
export const MAX_EXPRESSION_LENGTH = 1000
/** The most distinct bands one expression may read: each is read and resampled for every tile. */
export const MAX_EXPRESSION_BANDS = 16
const MAX_DEPTH = 100 // nesting (parentheses, calls, unary signs): bounds the parser's and the compiler's recursion
const MAX_REGISTERS = 16 // working registers besides the bands'; 1,000 characters need fewer (about log₂ of the size)

/** A bad expression: `message` says what, `position` (0-based, into the text as given) where. */
export class ExpressionError extends Error {
  constructor (message, position) {
    super(position === undefined ? message : `${message} at position ${position}`)
    this.position = position
  }
}

// name → number of arguments (-2: two or more). A Map, not an object: 'constructor' and '__proto__' are not functions.
const FUNCTIONS = new Map([['where', 3], ['abs', 1], ['sqrt', 1], ['log', 1], ['log10', 1], ['exp', 1], ['min', -2], ['max', -2]])
// Hints for characters people bring from other languages.
const HINTS = { '^': " (powers are '**')", '=': " (equality is '==')", '&': ' (combine conditions with where() or *)', '|': ' (combine conditions with where() or max())' }

// The band a number past any file's bands is read as (0-based: b65536): a TIFF counts its bands in 16 bits.
const PAST_ANY_BAND = 65535

// Precedence levels, for printing the canonical text with only the parentheses it needs.
const LEVEL = { compare: 1, sum: 2, product: 3, unary: 4, power: 5, primary: 6 }
const levelOf = (node) => {
  if (node.value !== undefined) return node.value < 0 || Object.is(node.value, -0) ? LEVEL.unary : LEVEL.primary
  if (node.band !== undefined || FUNCTIONS.has(node.op)) return LEVEL.primary
  if (node.op === 'neg') return LEVEL.unary
  if (node.op === '**') return LEVEL.power
  if (node.op === '*' || node.op === '/') return LEVEL.product
  if (node.op === '+' || node.op === '-') return LEVEL.sum
  return LEVEL.compare
}

/**
 * Parses band math. Returns { text (canonical: constants folded, no spaces, only the parentheses needed; equal
 * expressions spelled differently give the same text), outputs (how many), bands (0-based, sorted, unique),
 * references ([{ band, text, position }] for the first mention of each band) }. Throws ExpressionError.
 */
export function parseExpression (source) {
  if (typeof source !== 'string' || source.trim() === '') throw new ExpressionError('empty expression')
  if (source.length > MAX_EXPRESSION_LENGTH) throw new ExpressionError(`longer than ${MAX_EXPRESSION_LENGTH} characters`)
  const roots = new Parser(source).program()
  const references = new Map()
  const visit = (node) => {
    if (node.band !== undefined) {
      if (!references.has(node.band)) references.set(node.band, { band: node.band, text: node.text, position: node.position })
    } else if (node.args !== undefined) node.args.forEach(visit)
  }
  const folded = roots.map((root) => fold(root))
  folded.forEach(visit)
  if (references.size === 0) throw new ExpressionError('reads no band (name one as b1, b2, …)')
  if (references.size > MAX_EXPRESSION_BANDS) throw new ExpressionError(`reads more than ${MAX_EXPRESSION_BANDS} bands`)
  if (Math.max(...folded.map(need)) > MAX_REGISTERS) throw new ExpressionError('too complex (split it, or nest less)')
  const text = folded.map((node) => print(node)).join(';')
  // The workers compile the canonical text, not the one given: it must pass the same limits (folding constants can
  // lengthen it, and a printed `(-2)` nests one level more than `(0-2)`), or a request accepted here would fail there.
  if (text !== source) {
    if (text.length > MAX_EXPRESSION_LENGTH) throw new ExpressionError(`longer than ${MAX_EXPRESSION_LENGTH} characters once written out`)
    try {
      new Parser(text).program()
    } catch (err) {
      if (err instanceof ExpressionError) throw new ExpressionError('too complex once written out (nest less)')
      throw err
    }
  }
  return {
    text,
    outputs: folded.length,
    bands: [...references.keys()].sort((a, b) => a - b),
    references: [...references.values()],
  }
}

class Parser {
  constructor (text) {
    this.text = text
    this.at = 0
    this.depth = 0
  }

  fail (message, position = this.at) { throw new ExpressionError(message, position) }

  skipSpace () {
    const { text } = this
    while (this.at < text.length && (text[this.at] === ' ' || text[this.at] === '\t' || text[this.at] === '\n' || text[this.at] === '\r')) this.at++
  }

  /** The operator at the cursor, one of `ops` (longest first), consumed; else null. */
  take (...ops) {
    this.skipSpace()
    for (const op of ops) {
      if (this.text.startsWith(op, this.at)) {
        // '*' is not the first half of '**', '<' not of '<=' (callers list the longer first, but check anyway).
        if ((op === '*' && this.text[this.at + 1] === '*') || (op.length === 1 && '<>'.includes(op) && this.text[this.at + 1] === '=')) continue
        this.at += op.length
        return op
      }
    }
    return null
  }

  /** What the cursor is at, for an error: 'end of text' or the character quoted, with a hint for common mistakes. */
  unexpected () {
    this.skipSpace()
    if (this.at >= this.text.length) this.fail('unexpected end of text')
    const c = this.text[this.at]
    if (/[A-Za-z0-9_]/.test(c)) {
      // Two operands side by side: most often a '+' that the URL turned into a space.
      const plus = /\s/.test(this.text[this.at - 1] ?? '') ? " (a '+' in a URL must be written %2B)" : ''
      this.fail(`missing operator before '${shorten(this.word())}'${plus}`)
    }
    this.fail(`unexpected '${c}'${HINTS[c] ?? ''}`)
  }

  word () { return /^[A-Za-z0-9_.]*/.exec(this.text.slice(this.at, this.at + 40))[0] } // a name or number, for messages

  program () {
    const roots = []
    do {
      this.skipSpace()
      if (roots.length > 0 && this.at >= this.text.length) break // a trailing `;`, as rio-tiler (titiler) takes it
      if (this.at >= this.text.length || this.text[this.at] === ';') this.fail('empty expression')
      roots.push(this.expression())
      this.skipSpace()
      if (this.at < this.text.length && this.text[this.at] !== ';') this.unexpected()
    } while (this.take(';') !== null)
    return roots
  }

  expression () {
    const left = this.sum()
    const op = this.take('<=', '>=', '==', '!=', '<', '>')
    if (op === null) return left
    const node = { op, args: [left, this.sum()] }
    this.skipSpace()
    if (/^(<|>|==|!=)/.test(this.text.slice(this.at))) this.fail('comparisons cannot be chained (use parentheses, or where())')
    return node
  }

  sum () {
    let node = this.product()
    for (let op; (op = this.take('+', '-')) !== null;) node = { op, args: [node, this.product()] }
    return node
  }

  product () {
    let node = this.unary()
    for (let op; (op = this.take('*', '/')) !== null;) node = { op, args: [node, this.unary()] }
    return node
  }

  unary () {
    const op = this.take('-', '+')
    if (op === null) return this.power()
    this.deeper()
    const operand = this.unary()
    this.depth--
    return op === '-' ? { op: 'neg', args: [operand] } : operand
  }

  power () {
    const base = this.primary()
    if (this.take('**') === null) return base
    this.deeper()
    const exponent = this.unary()
    this.depth--
    return { op: '**', args: [base, exponent] }
  }

  deeper () { if (++this.depth > MAX_DEPTH) this.fail(`nested more than ${MAX_DEPTH} deep`) }

  primary () {
    this.skipSpace()
    const { text } = this
    const start = this.at
    const number = /^(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?/.exec(text.slice(start, start + 400))
    if (number !== null) {
      this.at += number[0].length
      if (/[A-Za-z0-9_.]/.test(text[this.at] ?? '')) this.fail(`malformed number '${shorten(number[0] + this.word())}'`, start)
      const value = Number(number[0])
      if (!Number.isFinite(value)) this.fail(`number '${shorten(number[0])}' is too large`, start)
      return { value }
    }
    const name = /^[A-Za-z_][A-Za-z0-9_]*/.exec(text.slice(start, start + MAX_EXPRESSION_LENGTH + 1))
    if (name !== null) {
      this.at += name[0].length
      const word = name[0]
      const band = /^[bB]([1-9]\d*)$/.exec(word)
      // Past 5 digits, PAST_ANY_BAND: read as a float, 21 digits or more printed as b1e+21, which the canonical text
      // could not parse again (and several long numbers would be one band).
      if (band !== null) return { band: band[1].length > 5 ? PAST_ANY_BAND : Number(band[1]) - 1, text: word, position: start }
      const lower = word.toLowerCase()
      if (this.take('(') === null) {
        if (FUNCTIONS.has(lower)) this.fail(`${lower} is a function: ${lower}(…)`, start)
        this.fail(`unknown name '${shorten(word)}' (bands are b1, b2, …)`, start)
      }
      if (!FUNCTIONS.has(lower)) this.fail(`unknown function '${shorten(word)}' (functions: ${[...FUNCTIONS.keys()].join(', ')})`, start)
      this.deeper()
      const args = [this.expression()]
      while (this.take(',') !== null) args.push(this.expression())
      if (this.take(')') === null) this.unexpected()
      this.depth--
      const arity = FUNCTIONS.get(lower)
      if (arity === -2 ? args.length < 2 : args.length !== arity) {
        this.fail(`${lower}() takes ${arity === -2 ? '2 or more arguments' : arity === 1 ? '1 argument' : arity + ' arguments'}, not ${args.length}`, start)
      }
      return { op: lower, args }
    }
    if (this.take('(') !== null) {
      this.deeper()
      const node = this.expression()
      if (this.take(')') === null) this.unexpected()
      this.depth--
      return node
    }
    return this.unexpected()
  }
}

const shorten = (s) => (s.length > 24 ? s.slice(0, 24) + '…' : s)

// The value of each operator and function on plain numbers: used to fold constants, with the kernels' semantics.
const SCALAR = {
  '+': (a, b) => a + b,
  '-': (a, b) => a - b,
  '*': (a, b) => a * b,
  '/': (a, b) => a / b,
  '**': (a, b) => a ** b,
  '<': (a, b) => (a < b ? 1 : 0),
  '<=': (a, b) => (a <= b ? 1 : 0),
  '>': (a, b) => (a > b ? 1 : 0),
  '>=': (a, b) => (a >= b ? 1 : 0),
  '==': (a, b) => (a === b ? 1 : 0),
  '!=': (a, b) => (a !== b ? 1 : 0),
  neg: (a) => -a,
  abs: Math.abs,
  sqrt: Math.sqrt,
  log: Math.log,
  log10: Math.log10,
  exp: Math.exp,
  min: Math.min,
  max: Math.max,
  where: (c, a, b) => (c !== 0 ? a : b), // NaN counts as true, as in numpy
}

/**
 * The node with its constant parts computed (`finiteOnly`: only where the result is a finite number, which the
 * canonical text can spell; the worker folds everything), `-(-x)` as x, and where() on a constant condition as the
 * branch it takes.
 */
function fold (node, finiteOnly = true) {
  if (node.args === undefined) return node
  const args = node.args.map((a) => fold(a, finiteOnly))
  if (node.op === 'where' && args[0].value !== undefined) return SCALAR.where(args[0].value, args[1], args[2])
  if (node.op === 'neg' && args[0].op === 'neg') return args[0].args[0]
  if (args.every((a) => a.value !== undefined)) {
    const value = SCALAR[node.op](...args.map((a) => a.value))
    if (!finiteOnly || Number.isFinite(value)) return { value }
  }
  return { op: node.op, args }
}

/** The canonical text of a folded node. */
function print (node) {
  if (node.value !== undefined) return Object.is(node.value, -0) ? '-0' : String(node.value)
  if (node.band !== undefined) return `b${node.band + 1}`
  const { op, args } = node
  if (FUNCTIONS.has(op)) return `${op}(${args.map((a) => print(a)).join(',')})`
  // Each operand is wrapped when it binds less tightly than its place needs (left-associative operators need a
  // tighter right operand; `**` takes a unary exponent but only a primary base; comparisons do not chain).
  const wrap = (a, min) => (levelOf(a) < min ? `(${print(a)})` : print(a))
  if (op === 'neg') return '-' + wrap(args[0], LEVEL.unary)
  if (op === '**') return wrap(args[0], LEVEL.primary) + '**' + wrap(args[1], LEVEL.unary)
  const level = levelOf(node)
  if (level === LEVEL.compare) return wrap(args[0], LEVEL.sum) + op + wrap(args[1], LEVEL.sum)
  return wrap(args[0], level) + op + wrap(args[1], level + 1)
}

/**
 * Working registers a node needs besides the bands' (Sethi-Ullman: the operand needing most is evaluated first, so
 * the others are computed while fewer results are held). Constants and bands need none; every operator result one.
 */
function need (node) {
  if (node.args === undefined) return 0
  const needs = node.args.map(need).sort((a, b) => b - a)
  return Math.max(1, ...needs.map((n, i) => n + i))
}

// ---- Kernels: each a loop over n values; `d` may be one of the operands (each value is read before it is written).

// register ∘ register
const RR = {
  '+': (d, a, b, n) => { for (let k = 0; k < n; k++) d[k] = a[k] + b[k] },
  '-': (d, a, b, n) => { for (let k = 0; k < n; k++) d[k] = a[k] - b[k] },
  '*': (d, a, b, n) => { for (let k = 0; k < n; k++) d[k] = a[k] * b[k] },
  '/': (d, a, b, n) => { for (let k = 0; k < n; k++) d[k] = a[k] / b[k] },
  '**': (d, a, b, n) => { for (let k = 0; k < n; k++) d[k] = a[k] ** b[k] },
  '<': (d, a, b, n) => { for (let k = 0; k < n; k++) d[k] = a[k] < b[k] ? 1 : 0 },
  '<=': (d, a, b, n) => { for (let k = 0; k < n; k++) d[k] = a[k] <= b[k] ? 1 : 0 },
  '>': (d, a, b, n) => { for (let k = 0; k < n; k++) d[k] = a[k] > b[k] ? 1 : 0 },
  '>=': (d, a, b, n) => { for (let k = 0; k < n; k++) d[k] = a[k] >= b[k] ? 1 : 0 },
  '==': (d, a, b, n) => { for (let k = 0; k < n; k++) d[k] = a[k] === b[k] ? 1 : 0 },
  '!=': (d, a, b, n) => { for (let k = 0; k < n; k++) d[k] = a[k] !== b[k] ? 1 : 0 },
  min: (d, a, b, n) => { for (let k = 0; k < n; k++) d[k] = Math.min(a[k], b[k]) },
  max: (d, a, b, n) => { for (let k = 0; k < n; k++) d[k] = Math.max(a[k], b[k]) },
}
// register ∘ constant
const RC = {
  '+': (d, a, c, n) => { for (let k = 0; k < n; k++) d[k] = a[k] + c },
  '-': (d, a, c, n) => { for (let k = 0; k < n; k++) d[k] = a[k] - c },
  '*': (d, a, c, n) => { for (let k = 0; k < n; k++) d[k] = a[k] * c },
  '/': (d, a, c, n) => { for (let k = 0; k < n; k++) d[k] = a[k] / c },
  '**': (d, a, c, n) => { for (let k = 0; k < n; k++) d[k] = a[k] ** c },
  '<': (d, a, c, n) => { for (let k = 0; k < n; k++) d[k] = a[k] < c ? 1 : 0 },
  '<=': (d, a, c, n) => { for (let k = 0; k < n; k++) d[k] = a[k] <= c ? 1 : 0 },
  '>': (d, a, c, n) => { for (let k = 0; k < n; k++) d[k] = a[k] > c ? 1 : 0 },
  '>=': (d, a, c, n) => { for (let k = 0; k < n; k++) d[k] = a[k] >= c ? 1 : 0 },
  '==': (d, a, c, n) => { for (let k = 0; k < n; k++) d[k] = a[k] === c ? 1 : 0 },
  '!=': (d, a, c, n) => { for (let k = 0; k < n; k++) d[k] = a[k] !== c ? 1 : 0 },
  min: (d, a, c, n) => { for (let k = 0; k < n; k++) d[k] = Math.min(a[k], c) },
  max: (d, a, c, n) => { for (let k = 0; k < n; k++) d[k] = Math.max(a[k], c) },
}
// constant ∘ register, for the operators whose operands cannot be swapped (comparisons are turned round instead)
const CR = {
  '-': (d, c, a, n) => { for (let k = 0; k < n; k++) d[k] = c - a[k] },
  '/': (d, c, a, n) => { for (let k = 0; k < n; k++) d[k] = c / a[k] },
  '**': (d, c, a, n) => { for (let k = 0; k < n; k++) d[k] = c ** a[k] },
}
const COMMUTES = new Set(['+', '*', '==', '!=', 'min', 'max'])
const TURNED = { '<': '>', '<=': '>=', '>': '<', '>=': '<=' }
const UNARY = {
  neg: (d, a, n) => { for (let k = 0; k < n; k++) d[k] = -a[k] },
  abs: (d, a, n) => { for (let k = 0; k < n; k++) d[k] = Math.abs(a[k]) },
  sqrt: (d, a, n) => { for (let k = 0; k < n; k++) d[k] = Math.sqrt(a[k]) },
  log: (d, a, n) => { for (let k = 0; k < n; k++) d[k] = Math.log(a[k]) },
  log10: (d, a, n) => { for (let k = 0; k < n; k++) d[k] = Math.log10(a[k]) },
  exp: (d, a, n) => { for (let k = 0; k < n; k++) d[k] = Math.exp(a[k]) },
  square: (d, a, n) => { for (let k = 0; k < n; k++) d[k] = a[k] * a[k] }, // x**2, as exact as pow and cheaper
}
function where (d, c, a, b, n) { for (let k = 0; k < n; k++) d[k] = c[k] !== 0 ? a[k] : b[k] } // NaN: true, as numpy
function fill (d, c, n) { d.fill(c, 0, n) }

/** Values of one band (from index `i`, every `nb`th: interleaved bands) → register. */
function load (d, values, nb, i, n) { for (let k = 0; k < n; k++, i += nb) d[k] = values[i] }

/**
 * A register → pixels `start`… of output o of `no` interleaved outputs; a pixel whose value is not a finite number
 * turns transparent.
 */
function store (out, no, o, a, alpha, start, n) {
  for (let k = 0, i = start * no + o, p = start; k < n; k++, i += no, p++) {
    const v = a[k]
    out[i] = v
    if (v - v !== 0) alpha[p] = 0 // NaN and ±Infinity
  }
}

const BLOCK = 1024 // values per register: 8 KiB

// The commonest outputs in one pass straight from the bands, with the same arithmetic as the general steps (so the
// same values): a band as it is (band recombination, `b4;b3;b2`) and a normalized difference of two bands (NDVI,
// NDWI, NBR: `(b4-b3)/(b4+b3)`), which would otherwise take six passes.

/** Band p (of nb interleaved) → output o (of no), pixels `start`…; not a finite number: transparent. */
function copyBand (out, no, o, values, nb, p, alpha, start, n) {
  for (let k = 0, i = start * nb + p, j = start * no + o, q = start; k < n; k++, i += nb, j += no, q++) {
    const v = values[i]
    out[j] = v
    if (v - v !== 0) alpha[q] = 0
  }
}

/** (x - y) / (x + y) of bands px and py → output o, as copyBand. */
function normalizedDifference (out, no, o, values, nb, px, py, alpha, start, n) {
  for (let k = 0, i = start * nb, j = start * no + o, q = start; k < n; k++, i += nb, j += no, q++) {
    const x = values[i + px]
    const y = values[i + py]
    const v = (x - y) / (x + y)
    out[j] = v
    if (v - v !== 0) alpha[q] = 0
  }
}

/** The bands [x, y] of a normalized difference `(x-y)/(x+y)` (or `/(y+x)`: addition commutes exactly), or null. */
function normalizedBands (node) {
  if (node.op !== '/') return null
  const [difference, sum] = node.args
  if (difference.op !== '-' || sum.op !== '+') return null
  const [x, y] = difference.args.map((a) => a.band)
  const [s, t] = sum.args.map((a) => a.band)
  if (x === undefined || y === undefined) return null
  return (s === x && t === y) || (s === y && t === x) ? [x, y] : null
}

/**
 * Compiles canonical band math (parseExpression's `text`) for tiles whose values hold the bands `bidx` (0-based, in
 * that order): { registers (how many), outputs, run(values, nb, out, alpha, count, registers) }.
 */
function compile (text, bidx) {
  const roots = new Parser(text).program().map((root) => fold(root, false))
  const bandRegister = new Map(bidx.map((b, p) => [b, p])) // band → its register, and its place in the values
  const loaded = new Set() // the band registers the steps read
  const steps = []
  const free = []
  let registers = bidx.length
  const allocate = () => (free.length > 0 ? free.pop() : registers++)
  const release = (operand) => { if (operand.owned) free.push(operand.register) }
  const into = (...operands) => { // a destination: an operand's own register when one is free to overwrite
    const own = operands.find((o) => o.owned)
    for (const o of operands) if (o !== own) release(o)
    return own === undefined ? allocate() : own.register
  }
  const inRegister = (operand) => {
    if (operand.value === undefined) return operand
    const d = allocate()
    const { value } = operand
    steps.push((r, n) => fill(r[d], value, n))
    return { register: d, owned: true }
  }

  // An operand: { value } (a constant) or { register, owned } (owned: a temporary this node may overwrite).
  const generate = (node) => {
    if (node.value !== undefined) return { value: node.value }
    if (node.band !== undefined) {
      const register = placeOf(node.band)
      loaded.add(register)
      return { register, owned: false }
    }
    const { op } = node
    // The operands needing most registers first (Sethi-Ullman), then put back in order.
    const order = node.args.map((a, i) => [need(a), i]).sort((p, q) => q[0] - p[0]).map(([, i]) => i)
    const operands = []
    for (const i of order) operands[i] = generate(node.args[i])
    if (operands.every((o) => o.value !== undefined)) return { value: SCALAR[op](...operands.map((o) => o.value)) }

    if (UNARY[op] !== undefined) {
      const [a] = operands
      const d = into(a)
      const f = UNARY[op]
      steps.push((r, n) => f(r[d], r[a.register], n))
      return { register: d, owned: true }
    }
    if (op === 'where') {
      const [c, ...branches] = operands
      if (c.value !== undefined) { // a condition folded only here (a non-finite constant)
        const taken = SCALAR.where(c.value, ...branches)
        release(branches.find((b) => b !== taken) ?? {})
        return taken
      }
      const [a, b] = branches.map(inRegister)
      const d = into(c, a, b)
      steps.push((r, n) => where(r[d], r[c.register], r[a.register], r[b.register], n))
      return { register: d, owned: true }
    }
    if (op === 'min' || op === 'max') { // folded pairwise: min(a, b, c) = min(min(a, b), c)
      let acc = operands[0]
      for (const next of operands.slice(1)) acc = binary(op, acc, next)
      return acc
    }
    return binary(op, operands[0], operands[1])
  }

  const binary = (op, a, b) => {
    if (a.value !== undefined && b.value !== undefined) return { value: SCALAR[op](a.value, b.value) }
    if (op === '**' && b.value === 2) {
      const d = into(a)
      steps.push((r, n) => UNARY.square(r[d], r[a.register], n))
      return { register: d, owned: true }
    }
    if (a.value !== undefined) { // constant ∘ register
      if (COMMUTES.has(op) || TURNED[op] !== undefined) return binary(TURNED[op] ?? op, b, a)
      const d = into(b)
      const f = CR[op]; const c = a.value
      steps.push((r, n) => f(r[d], c, r[b.register], n))
      return { register: d, owned: true }
    }
    if (b.value !== undefined) {
      const d = into(a)
      const f = RC[op]; const c = b.value
      steps.push((r, n) => f(r[d], r[a.register], c, n))
      return { register: d, owned: true }
    }
    const d = into(a, b)
    const f = RR[op]
    steps.push((r, n) => f(r[d], r[a.register], r[b.register], n))
    return { register: d, owned: true }
  }

  const placeOf = (band) => {
    const place = bandRegister.get(band)
    if (place === undefined) throw new Error(`band math reads band ${band + 1}, not among the bands read`)
    return place
  }

  const outputs = roots.length
  roots.forEach((root, o) => {
    if (root.band !== undefined) {
      const p = placeOf(root.band)
      steps.push((r, n, out, alpha, start, values, nb) => copyBand(out, outputs, o, values, nb, p, alpha, start, n))
      return
    }
    const normalized = normalizedBands(root)
    if (normalized !== null) {
      const [px, py] = normalized.map(placeOf)
      steps.push((r, n, out, alpha, start, values, nb) => normalizedDifference(out, outputs, o, values, nb, px, py, alpha, start, n))
      return
    }
    const result = generate(root)
    if (result.value !== undefined) {
      const { value } = result
      const finite = Number.isFinite(value)
      steps.push((r, n, out, alpha, start) => {
        for (let k = 0, i = start * outputs + o; k < n; k++, i += outputs) out[i] = value
        if (!finite) alpha.fill(0, start, start + n)
      })
    } else {
      steps.push((r, n, out, alpha, start) => store(out, outputs, o, r[result.register], alpha, start, n))
      release(result)
    }
  })
  const loads = [...loaded]
  return {
    outputs,
    registers,
    /** `count` pixels of `values` (nb interleaved bands) → `out`, a block at a time. */
    run (values, nb, out, alpha, count, r) {
      for (let start = 0; start < count; start += BLOCK) {
        const n = Math.min(BLOCK, count - start)
        for (let l = 0; l < loads.length; l++) load(r[loads[l]], values, nb, start * nb + loads[l], n)
        for (let s = 0; s < steps.length; s++) steps[s](r, n, out, alpha, start, values, nb)
      }
    },
  }
}

const kernels = new Map() // bidx + canonical text → compiled kernel, per worker; the oldest goes first past the bound
const MAX_KERNELS = 64

function kernelFor (text, bidx) {
  const key = bidx.join(',') + '|' + text
  let kernel = kernels.get(key)
  if (kernel === undefined) {
    kernel = compile(text, bidx)
    if (kernels.size >= MAX_KERNELS) kernels.delete(kernels.keys().next().value)
    kernels.set(key, kernel)
  }
  return kernel
}

// The registers (a block of Float64 values each), shared by every tile of this worker: a kernel runs synchronously
// from its first register write to its last read, so tiles in flight never see each other's. Added as needed.
const registers = []

/**
 * The tile's values through `options.expression` (canonical, from resolveOptions; null: the values as they are):
 * { values (n² × outputs, interleaved, Float32), alpha, nb: outputs }. `tile.values` holds the bands `options.bidx`.
 * Pixels whose result is not a finite number (0/0, log(-1)) become transparent: `alpha` is updated in place. The
 * values array is the scratch's, valid until its next use.
 */
export function applyExpression (tile, options, scratch) {
  if (tile === null || !options.expression) return tile
  const { values, alpha, nb } = tile
  const count = values.length / nb
  const kernel = kernelFor(options.expression, options.bidx)
  while (registers.length < kernel.registers) registers.push(new Float64Array(BLOCK))
  const length = count * kernel.outputs
  if (!(scratch.expressionValues?.length >= length)) scratch.expressionValues = new Float32Array(length)
  const out = scratch.expressionValues.subarray(0, length)
  kernel.run(values, nb, out, alpha, count, registers)
  return { values: out, alpha, nb: kernel.outputs }
}

// Band math (`expression=`): see issue #18. Placeholder until the parser and kernels land: no expression, no change.

/**
 * The tile's values through `options.expression` (null: the values as they are): { values (n² × outputs), alpha, nb }.
 * Pixels whose result is not a finite number become transparent.
 */
export function applyExpression (tile, options, scratch) {
  if (tile === null || !options.expression) return tile
  throw new Error('band math is not implemented yet')
}

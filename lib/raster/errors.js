/** A reason a file cannot be served; its message reaches the 503 body. */
export class RasterError extends Error {}

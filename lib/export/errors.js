// The two ways an export ends before it starts, each with its exit code (cli.js).

/** A mistake in how the command was called, or an output that is another job's: exit 2 with the message. */
export class UsageError extends Error {}

/** The set or style cannot be read at all (unavailable, no renderer): exit 1, not a usage mistake. */
export class ExportError extends Error {}

/**
 * Errors carry a stable machine-readable `code`, a human message that names the offending file, field or
 * position, optional structured `details`, and the `cause`. They are translated once at each edge
 * (CLI exit code and message, HTTP status); nothing in between inspects messages.
 */
export type ErrorKind =
  | 'invalid_input' // the caller's input is wrong: a user mistake, never a stack trace
  | 'not_found'
  | 'conflict' // optimistic concurrency, duplicates
  | 'integrity' // stored or received data failed a check (tamper, corruption)
  | 'refused' // a policy refusal (unsafe key permissions, checkpoint rollback, newer schema)
  | 'unauthenticated' // the caller did not prove it may do this (a missing or wrong API operator token)
  | 'unavailable' // a dependency is missing or down (Docker, a database file that cannot be opened)
  | 'internal';

export class AssayError extends Error {
  readonly code: string;
  readonly kind: ErrorKind;
  readonly details: Readonly<Record<string, unknown>>;

  constructor(code: string, kind: ErrorKind, message: string, options: { details?: Record<string, unknown>; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'AssayError';
    this.code = code;
    this.kind = kind;
    this.details = Object.freeze({ ...(options.details ?? {}) });
  }

  toJSON(): Record<string, unknown> {
    return { code: this.code, kind: this.kind, message: this.message, details: this.details };
  }
}

export function isAssayError(e: unknown): e is AssayError {
  return e instanceof AssayError;
}

/**
 * One error table per lib: every code the lib raises, with the kind that decides its exit code and HTTP status. The
 * factory it returns is the lib's only way to build those errors, so a code and its kind cannot drift apart:
 *
 *   export const JUDGE_ERROR_KINDS = { JUDGE_BAD_REQUEST: 'invalid_input', ... } as const satisfies ErrorTable;
 *   export const judgeError = errorFactory(JUDGE_ERROR_KINDS);
 *   throw judgeError('JUDGE_BAD_REQUEST', '--repeat must be 1..100', { repeat });
 */
export type ErrorTable = Readonly<Record<string, ErrorKind>>;

export type ErrorFactory<T extends ErrorTable> = (code: keyof T & string, message: string, details?: Record<string, unknown>, cause?: unknown) => AssayError;

export function errorFactory<T extends ErrorTable>(table: T): ErrorFactory<T> {
  return (code, message, details = {}, cause) => {
    const kind = table[code];
    if (kind === undefined) throw new AssayError('INTERNAL_UNKNOWN_ERROR_CODE', 'internal', `error code ${code} is not in its lib's table`);
    return new AssayError(code, kind, message, cause === undefined ? { details } : { details, cause });
  };
}

/** A plain invalid_input error (codes outside any lib's table: the CLI's own usage errors). */
export function invalidInput(code: string, message: string, details?: Record<string, unknown>): AssayError {
  return new AssayError(code, 'invalid_input', message, details ? { details } : {});
}

/** Exit codes for the CLI edge, one per error kind. */
export const EXIT_CODES: Readonly<Record<ErrorKind, number>> = {
  invalid_input: 2,
  not_found: 3,
  conflict: 4,
  integrity: 5,
  refused: 6,
  unauthenticated: 6,
  unavailable: 7,
  internal: 70,
};

/** HTTP statuses for the API edge, one per error kind. */
export const HTTP_STATUS: Readonly<Record<ErrorKind, number>> = {
  invalid_input: 422,
  not_found: 404,
  conflict: 409,
  integrity: 409,
  refused: 403,
  unauthenticated: 401,
  unavailable: 503,
  internal: 500,
};

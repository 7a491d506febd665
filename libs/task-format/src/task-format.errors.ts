import { AssayError } from '@assay/core';

/**
 * Stable problem codes. Every problem names the file (relative to the task directory, or `<command line>`), the key
 * (a dotted path such as `environment.gpus`, or null when the problem is the file itself) and what was expected.
 */
export const TASK_ERROR_CODES = {
  /** The task directory does not exist or is not a directory. */
  DIR_NOT_FOUND: 'TASK_DIR_NOT_FOUND',
  /** A required file or directory is absent. */
  FILE_MISSING: 'TASK_FILE_MISSING',
  /** A symlink escapes its root, a special file, or a required path that is not a regular file or directory. */
  FILE_UNSAFE: 'TASK_FILE_UNSAFE',
  /** A file is larger than its bound, or the directory has too many entries or is too deep. */
  FILE_TOO_LARGE: 'TASK_FILE_TOO_LARGE',
  /** A text file is not valid UTF-8. */
  FILE_ENCODING: 'TASK_FILE_ENCODING',
  /** task.toml is not valid TOML 1.0. */
  TOML_SYNTAX: 'TASK_TOML_SYNTAX',
  /** environment/docker-compose.yaml is not valid YAML (or uses YAML features that are refused). */
  YAML_SYNTAX: 'TASK_YAML_SYNTAX',
  /** schema_version (or Harbor's legacy version) is missing or not one Assay reads. */
  SCHEMA_VERSION: 'TASK_SCHEMA_VERSION',
  /** A key Assay does not know, outside [metadata]. */
  UNKNOWN_KEY: 'TASK_UNKNOWN_KEY',
  /** A required key is absent. */
  MISSING_KEY: 'TASK_MISSING_KEY',
  /** A value of the wrong TOML type (a boolean or a string where a number belongs, a float for an integer...). */
  INVALID_TYPE: 'TASK_INVALID_TYPE',
  /** A value of the right type that is out of range or not one of the allowed values. */
  INVALID_VALUE: 'TASK_INVALID_VALUE',
  /** Two declarations that contradict each other. */
  CONFLICT: 'TASK_CONFLICT',
  /** A Harbor / RSI Harness feature that Assay does not support (the message says which and why). */
  UNSUPPORTED: 'TASK_UNSUPPORTED',
  /** An environment value that looks like a template but is not `${NAME}` or `${NAME:-default}`. */
  ENV_TEMPLATE: 'TASK_ENV_TEMPLATE',
  /** At run time: `${NAME}` without a default and NAME is not in the supplied environment. */
  ENV_UNRESOLVED: 'TASK_ENV_UNRESOLVED',
  /** The aggregate error thrown by loadTaskPlan; `details.problems` lists every problem. */
  INVALID: 'TASK_INVALID',
  /** The protocol fingerprint input is malformed. */
  FINGERPRINT_INPUT: 'TASK_FINGERPRINT_INPUT',
  /** The injected directory digester failed. */
  DIGEST_FAILED: 'TASK_DIGEST_FAILED',
  /**
   * A warning, never an error: tests/test.sh appears to download tools (curl, wget, pip install, apt-get, uv, ...)
   * while the Judge's network policy gives it no network, so the Judge will probably fail.
   */
  TESTS_NEED_NETWORK: 'TASK_TESTS_NEED_NETWORK',
  /** `assay task init`: the target exists and is not an empty directory. */
  DIR_NOT_EMPTY: 'TASK_DIR_NOT_EMPTY',
  /** `assay task init` / `assay task check`: a bad command-line value (template, name, repeat count). */
  BAD_ARGUMENT: 'TASK_BAD_ARGUMENT',
  /** `assay task check`: the task is valid but not sound (the report says which check failed and why). */
  UNSOUND: 'TASK_UNSOUND',
  /** `assay task import`: images the task needs are not in the local Docker daemon (the report says how to provide them). */
  IMAGES_MISSING: 'TASK_IMAGES_MISSING',
} as const;

export type TaskErrorCode = (typeof TASK_ERROR_CODES)[keyof typeof TASK_ERROR_CODES];

/** One thing wrong with a task (or, in TaskPlan.warnings, one thing that looks wrong). Validation collects all of them. */
export interface TaskProblem {
  readonly code: TaskErrorCode;
  /** Path relative to the task directory (`task.toml`, `environment/docker-compose.yaml`) or `<command line>`. */
  readonly file: string;
  /** Dotted key path (`environment.gpus`, `metadata.rsi_harness.assets[2].phase`), or null for the file itself. */
  readonly key: string | null;
  /** What is wrong and what was expected. Never contains resolved secret values. */
  readonly message: string;
}

export function problem(code: TaskErrorCode, file: string, key: string | null, message: string): TaskProblem {
  return Object.freeze({ code, file, key, message });
}

/** `task.toml: environment.gpus: expected ...` */
export function formatProblem(p: TaskProblem): string {
  return `${p.file}: ${p.key === null ? '' : `${p.key}: `}${p.message}`;
}

/** The single error thrown when a task does not validate; its details carry every problem. */
export function taskInvalidError(dir: string, problems: readonly TaskProblem[]): AssayError {
  const n = problems.length;
  const first = problems[0];
  const head = `${dir}: ${n} problem${n === 1 ? '' : 's'} in the task`;
  return new AssayError(TASK_ERROR_CODES.INVALID, 'invalid_input', first ? `${head}; first: ${formatProblem(first)}` : head, {
    details: { dir, problems: problems.map((p) => ({ ...p })) },
  });
}

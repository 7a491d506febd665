import { errorFactory, type ErrorTable } from '@assay/core';

/**
 * Errors of the judge lib. Judge outcomes (completed, verifier_error, ...) are results, not errors: these are the
 * cases where no judging could be attempted, or where the caller asked for something impossible.
 */
export const JUDGE_ERROR_KINDS = {
  /** `[metadata.assay_judge]` is malformed. */
  JUDGE_TASK_SETTINGS_INVALID: 'invalid_input',
  /** The task needs something the Judge cannot provide yet (an allowlisted network, GPUs, judge-phase assets, a non-root verifier user). */
  JUDGE_TASK_UNSUPPORTED: 'invalid_input',
  /** tests/ is too large or holds something that cannot be injected. */
  JUDGE_TESTS_INVALID: 'invalid_input',
  /** The task has no workdir and its image none either (a snapshot cannot be mounted at /). */
  JUDGE_WORKDIR_UNSUPPORTED: 'invalid_input',
  /** The snapshot CID is not in the store (or not a CID). */
  JUDGE_SNAPSHOT_NOT_FOUND: 'not_found',
  JUDGE_SNAPSHOT_INVALID: 'invalid_input',
  /** Full-rootfs: the daemon refuses to import the snapshot's file system, and imports the harness alone (the agent's doing). */
  JUDGE_SNAPSHOT_UNIMPORTABLE: 'invalid_input',
  /** The controller's Judge settings from its environment (ASSAY_JUDGE_PROC) are not valid. */
  JUDGE_HOST_SETTINGS_INVALID: 'invalid_input',
  /** `--repeat` out of range. */
  JUDGE_BAD_REQUEST: 'invalid_input',
  /** Appending the Judge's events failed; the Judge was torn down. */
  JUDGE_RECORD_FAILED: 'unavailable',
  /** ASSAY_HOME holds no runtime or judge key to sign the Judge's events with. */
  JUDGE_KEYS_MISSING: 'refused',
  /** `cancel()` was called (SIGINT): no new Judge starts. */
  JUDGE_CANCELLED: 'unavailable',
  /** At least one Judge ended in infrastructure_error (reported after the results are printed). */
  JUDGE_INFRASTRUCTURE: 'unavailable',
  /** The Dockerfile names a base image that is not in the local daemon (nothing is ever pulled). */
  IMAGE_BASE_MISSING: 'not_found',
  /** The Dockerfile would fetch from the network, or uses build arguments in image names. */
  IMAGE_DOCKERFILE_UNSUPPORTED: 'invalid_input',
  /** The task's docker_image does not exist locally. */
  IMAGE_NOT_FOUND: 'not_found',
  /** The build context is too large or unreadable. */
  IMAGE_CONTEXT_INVALID: 'invalid_input',
  /** scripts/build-base-image.sh failed. */
  IMAGE_BASE_BUILD_FAILED: 'unavailable',
} as const satisfies ErrorTable;

export type JudgeErrorCode = keyof typeof JUDGE_ERROR_KINDS;

export const judgeError = errorFactory(JUDGE_ERROR_KINDS);

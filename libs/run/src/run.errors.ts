/**
 * Error codes of @assay/run. Agent-facing refusals of the submission endpoint are not errors: they are rejections
 * (decide() returns them and they are recorded as SubmissionRejected); these codes are for callers that misuse the
 * run (a command that does not fit the state), for events that break the run's invariants, and for I/O failures.
 */
import { AssayError, type ErrorKind } from '@assay/core';

export const RUN_ERROR_CODES = {
  /** A command does not fit the run's state (start twice, settle a round that is not open, ...). */
  CONFLICT: 'RUN_CONFLICT',
  /** A command's input is malformed (bad run id, negative budget, bad digest). */
  INVALID_INPUT: 'RUN_INVALID_INPUT',
  /** An event of the run's stream breaks the run's invariants or schema (a corrupted or forged history). */
  EVENT_INVALID: 'RUN_EVENT_INVALID',
  /** The run has no RunStarted event. */
  NOT_STARTED: 'RUN_NOT_STARTED',
  /** The run stream was written by someone else meanwhile (another controller on the same run). */
  CONCURRENT_WRITER: 'RUN_CONCURRENT_WRITER',
  /** The submission socket path is in use by a live server, or is not a socket. */
  SOCKET_IN_USE: 'RUN_SOCKET_IN_USE',
  /** `--gpus LIST` is malformed (junk, duplicates, empty items). */
  GPUS_INVALID: 'RUN_GPUS_INVALID',
  /** The task needs more GPUs (Work, Judge) than `--gpus` gives the run, even with a hand-over. */
  GPUS_INSUFFICIENT: 'RUN_GPUS_INSUFFICIENT',
  /** A `--gpus` id names a GPU this host does not have (by nvidia-smi), or two ids name the same GPU. */
  GPUS_UNKNOWN: 'RUN_GPUS_UNKNOWN',
  /** The Docker daemon cannot give containers NVIDIA GPUs: no `nvidia` runtime, no NVIDIA CDI spec (NVIDIA Container Toolkit). */
  GPU_RUNTIME_MISSING: 'RUN_GPU_RUNTIME_MISSING',
  /** `nvidia-smi` is missing or fails on this host (no NVIDIA driver, or it is not loaded). */
  GPU_DRIVER_MISSING: 'RUN_GPU_DRIVER_MISSING',
  /** `nvidia-smi` answered with output the probe cannot read (the message names the line). */
  GPU_PROBE_INVALID: 'RUN_GPU_PROBE_INVALID',
} as const;

/** Codes of the rejections the submission endpoint answers with (also recorded in SubmissionRejected.reason). */
export const SUBMIT_REJECTION_CODES = {
  /** 401: no bearer token. */
  NO_TOKEN: 'SUBMIT_NO_TOKEN',
  /** 401: an Authorization header that is not exactly one `Bearer <token>`. */
  MALFORMED_TOKEN: 'SUBMIT_MALFORMED_TOKEN',
  /** 401: a token that is not this run's (wrong, or another run's). */
  WRONG_TOKEN: 'SUBMIT_WRONG_TOKEN',
  /** 422: the request has a body or a query string. */
  BAD_REQUEST: 'SUBMIT_BAD_REQUEST',
  /** 429: the cooldown after the last counted submission has not passed. */
  COOLDOWN: 'SUBMIT_COOLDOWN',
  /** 429: a budget is exhausted or was exceeded. */
  BUDGET_EXHAUSTED: 'SUBMIT_BUDGET_EXHAUSTED',
  /** 429: the run is completed, cancelled or closing. */
  RUN_CLOSED: 'SUBMIT_RUN_CLOSED',
  /** 429: too many submissions are already waiting for their turn. */
  QUEUE_FULL: 'SUBMIT_QUEUE_FULL',
  /** 429: a round is still open (only when the caller does not serialise rounds). */
  ROUND_OPEN: 'SUBMIT_ROUND_OPEN',
  /** 503: the round was opened and closed without a score (infrastructure failure): refunded. */
  REFUNDED: 'SUBMIT_REFUNDED',
} as const;

export type SubmitRejectionCode = (typeof SUBMIT_REJECTION_CODES)[keyof typeof SUBMIT_REJECTION_CODES];

export function runError(code: string, kind: ErrorKind, message: string, details?: Record<string, unknown>): AssayError {
  return new AssayError(code, kind, message, details ? { details } : {});
}

export function eventInvalid(message: string, details: Record<string, unknown> = {}): AssayError {
  return runError(RUN_ERROR_CODES.EVENT_INVALID, 'integrity', message, details);
}

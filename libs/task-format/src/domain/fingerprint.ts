/**
 * The protocol fingerprint: only runs with the same fingerprint are ranked against each other.
 *
 *   fingerprint = "sha256:" + hex(SHA-256(UTF-8(canonicalize(input))))
 *
 * where `input` is the plain object built by protocolFingerprintInput() and `canonicalize` is RFC 8785 (JCS). This
 * lib does not import a JCS implementation: the caller passes one (in Assay, `canonicalJson` from @assay/ledger), so
 * the fingerprint uses exactly the canonical encoding the ledger signs. The input object is also what gets recorded
 * in events, so a verifier can recompute the fingerprint from it.
 */
import { createHash } from 'node:crypto';
import { AssayError } from '@assay/core';
import { TASK_ERROR_CODES as C } from '../task-format.errors';
import type { Direction, RunSettings } from './run-settings';

/** Canonical JSON text of a plain-data value (RFC 8785). */
export type Canonicalizer = (value: unknown) => string;

export const PROTOCOL_FINGERPRINT_SCHEME = 'assay.protocol-fingerprint/1';

export interface ProtocolBudgets {
  readonly maxSubmissions: number | null;
  readonly cooldownSec: number;
  readonly timeBudgetSec: number | null;
  /** GPU-seconds (every GPU held by Work or a Judge, times its holding time); null: unlimited. */
  readonly gpuBudgetSec: number | null;
}

export interface ProtocolFingerprintInput {
  readonly scheme: typeof PROTOCOL_FINGERPRINT_SCHEME;
  /** Content digest of the whole task directory (from the snapshot lib's directory digester). */
  readonly taskDigest: string;
  /** Docker image id of the clean judge image, `sha256:<64 hex>`. */
  readonly judgeImageDigest: string;
  readonly budgets: ProtocolBudgets;
  readonly metric: string | null;
  readonly direction: Direction;
  /** Version of the harness that runs and judges (e.g. `assay/0.1.0`). */
  readonly harnessVersion: string;
}

const DIGEST_TEXT = /^[\x21-\x7e]{1,256}$/; // printable ASCII, no spaces
const IMAGE_DIGEST = /^sha256:[0-9a-f]{64}$/;

function bad(what: string): never {
  throw new AssayError(C.FINGERPRINT_INPUT, 'invalid_input', `protocol fingerprint input: ${what}`);
}

function finiteOrNull(v: number | null, name: string): number | null {
  if (v === null) return null;
  if (typeof v !== 'number' || !Number.isFinite(v)) bad(`${name} must be a finite number or null`);
  return v;
}

/** Builds (and checks) the plain object that is canonicalized and hashed. */
export function protocolFingerprintInput(args: {
  taskDigest: string;
  judgeImageDigest: string;
  settings: RunSettings;
  harnessVersion: string;
}): ProtocolFingerprintInput {
  const { taskDigest, judgeImageDigest, settings, harnessVersion } = args;
  if (typeof taskDigest !== 'string' || !DIGEST_TEXT.test(taskDigest)) bad('taskDigest must be 1-256 printable ASCII characters');
  if (typeof judgeImageDigest !== 'string' || !IMAGE_DIGEST.test(judgeImageDigest)) {
    bad('judgeImageDigest must be sha256:<64 lowercase hex> (a Docker image id)');
  }
  if (typeof harnessVersion !== 'string' || !DIGEST_TEXT.test(harnessVersion)) bad('harnessVersion must be 1-256 printable ASCII characters');
  if (settings.direction !== 'maximize' && settings.direction !== 'minimize') bad('direction must be maximize or minimize');
  if (settings.primaryMetric !== null && (typeof settings.primaryMetric !== 'string' || settings.primaryMetric === '')) {
    bad('metric must be a non-empty string or null');
  }
  if (!Number.isFinite(settings.cooldownSec)) bad('cooldownSec must be a finite number');
  if (settings.maxSubmissions !== null && !Number.isSafeInteger(settings.maxSubmissions)) bad('maxSubmissions must be an integer or null');
  return Object.freeze({
    scheme: PROTOCOL_FINGERPRINT_SCHEME,
    taskDigest,
    judgeImageDigest,
    budgets: Object.freeze({
      maxSubmissions: settings.maxSubmissions,
      cooldownSec: settings.cooldownSec,
      timeBudgetSec: finiteOrNull(settings.timeBudgetSec, 'timeBudgetSec'),
      gpuBudgetSec: finiteOrNull(settings.gpuBudgetSec, 'gpuBudgetSec'),
    }),
    metric: settings.primaryMetric,
    direction: settings.direction,
    harnessVersion,
  });
}

/** `sha256:<hex>` over the UTF-8 bytes of the canonical JSON of the input. */
export function protocolFingerprint(input: ProtocolFingerprintInput, canonicalize: Canonicalizer): string {
  const text = canonicalize(input);
  if (typeof text !== 'string' || text.length === 0) bad('the canonicalizer returned no text');
  return `sha256:${createHash('sha256').update(text, 'utf8').digest('hex')}`;
}

import { errorFactory, type ErrorTable } from '@assay/core';

/**
 * Errors of @assay/bundles. A bundle that fails a verification step is not an error of the verifier: it is a verdict
 * (`BundleVerdict`, exit 5). These are what stops an export, or a verification that could not be done at all.
 */
export const BUNDLE_ERROR_KINDS = {
  /** The run is not in the ledger, or has not ended (no RunCompleted): nothing to claim yet. */
  BUNDLE_RUN_NOT_FOUND: 'not_found',
  BUNDLE_RUN_NOT_ENDED: 'conflict',
  /** An export option is out of range (`--snapshots`, `--logs` values this version does not write). */
  BUNDLE_BAD_OPTION: 'invalid_input',
  /** The bundle cannot be read (missing, unreadable). */
  BUNDLE_UNREADABLE: 'not_found',
  /** `--key`: not a registered, unrevoked publisher or controller key of the ledger. */
  BUNDLE_KEY_NOT_REGISTERED: 'refused',
  /** A trusted key given on the command line is not a verifier key. */
  BUNDLE_BAD_TRUSTED_KEY: 'invalid_input',
  /** The checkpoint to export against (`--cosigned`) is missing, malformed, or not signed by this ledger's controller key. */
  BUNDLE_CHECKPOINT_INVALID: 'invalid_input',
  /** `--logs`: a log the ledger records a digest for is missing from the run directory, or differs from that digest. */
  BUNDLE_LOG_MISSING: 'not_found',
  BUNDLE_LOG_MISMATCH: 'integrity',
  /** `--logs redacted` against a given checkpoint: the redactions are not recorded before it. */
  BUNDLE_LOGS_NOT_RECORDED: 'conflict',
  /** `--witness-policy`: the policy file is malformed. */
  BUNDLE_BAD_WITNESS_POLICY: 'invalid_input',
} as const satisfies ErrorTable;

export const bundleError = errorFactory(BUNDLE_ERROR_KINDS);

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
  /** `assay rejudge` (docs/rejudge.md): the bundle did not verify (`invalid`): nothing judged, nothing recorded. */
  BUNDLE_REJUDGE_INVALID: 'integrity',
  /** `assay rejudge`: the bundle could not be checked (`cannot_check`: no trusted root key, an unknown format). */
  BUNDLE_REJUDGE_CANNOT_CHECK: 'refused',
  /** `assay rejudge`: the task directory's digest is not the claim's task digest. */
  BUNDLE_REJUDGE_TASK_MISMATCH: 'integrity',
  /** `assay rejudge`: the run selected no round, so there is no snapshot and no score to re-judge. */
  BUNDLE_REJUDGE_NOTHING_TO_JUDGE: 'conflict',
  /** `assay rejudge`: the selected snapshot is neither carried by the bundle, nor in `--car`, nor in the store. */
  BUNDLE_REJUDGE_SNAPSHOT_MISSING: 'not_found',
  /** `assay rejudge`: the bundle is a re-judge report's, not a run's result bundle: there is no claim to re-judge. */
  BUNDLE_REJUDGE_NOT_RUN_BUNDLE: 'invalid_input',
  /** `assay bundle export-rejudge`: no re-judging of that id in this ledger (at or before the checkpoint). */
  BUNDLE_REJUDGE_NOT_FOUND: 'not_found',
  /** `assay bundle export-rejudge`: the stream is not one self-consistent RejudgeCompleted written by `assay rejudge`. */
  BUNDLE_REJUDGE_NOT_REPORT: 'conflict',
  /** `bundle export --task DIR`: the directory's digest is not the run's task digest. */
  BUNDLE_TASK_MISMATCH: 'integrity',
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

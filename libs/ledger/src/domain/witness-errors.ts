/** Error codes of witnesses, witness policies and equivocation reports, with the kind that decides the exit code. */
import { errorFactory } from '@assay/core';

export const WITNESS_ERROR_KINDS = {
  WITNESS_ROLLBACK: 'refused',
  WITNESS_FORK: 'integrity',
  WITNESS_PROOF_REQUIRED: 'invalid_input',
  WITNESS_OLD_SIZE_MISMATCH: 'conflict',
  WITNESS_REQUEST_MALFORMED: 'invalid_input',
  WITNESS_PROOF_MALFORMED: 'invalid_input',
  WITNESS_STATE_CORRUPT: 'integrity',
  WITNESS_ORIGIN_MISMATCH: 'invalid_input',
  WITNESS_TRUST_MISMATCH: 'integrity',
  WITNESS_POLICY_MALFORMED: 'invalid_input',
  WITNESS_QUORUM_NOT_MET: 'integrity',
  WITNESS_FAILED: 'unavailable',
  WITNESS_BAD_COSIGNATURE: 'integrity',
  EQUIVOCATION_MALFORMED: 'invalid_input',
  EQUIVOCATION_NOT_PROVEN: 'integrity',
} as const;
export const witnessError = errorFactory(WITNESS_ERROR_KINDS);

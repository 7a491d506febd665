/** How a verification fails: the first failing step, its code and the first bad item; thrown as `Failed` inside. */
import type { StepName } from './check-chunk';

export interface VerifyFailure {
  step: StepName;
  code: string;
  message: string;
  position?: number;
  checkpoint?: { seq: number | null; treeSize: number; note?: string };
  /** For equivocation: the two checkpoints that cannot both be true. */
  evidence?: string[];
  /** For the claims step: the stream the broken rule was folded over, and the rule's name. */
  stream?: string;
  rule?: string;
}

/** A step's failure, thrown through the pass and turned into the report's verdict by verifyLedger. */
export class Failed extends Error {
  constructor(readonly failure: VerifyFailure) {
    super(failure.message);
  }
}

/** The storage step's failure for the database's own integrity problems (the first five named). */
export function storageCorrupt(problems: string[]): VerifyFailure {
  return { step: 'storage', code: 'VERIFY_STORAGE_CORRUPT', message: `storage integrity check failed: ${problems.slice(0, 5).join('; ')}` };
}

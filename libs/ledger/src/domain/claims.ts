/**
 * The `claims` step of verification: whatever is signed, a claim (a best score, a count, a budget) must follow from
 * the recorded events. The ledger knows envelopes, keys and the log; the rules a run's events obey belong to the run
 * (in @assay/run), so the verifier is handed them as `ClaimRules` and feeds them every event of CLAIM_EVENT_TYPES
 * (catalogue.ts) in position order, after the event passed every earlier step (so its data is signed and valid).
 */
import type { JsonObject } from './json';

/** One event as the claims step sees it: signed, schema-checked, in position order. */
export interface ClaimEvent {
  readonly position: number;
  readonly stream: string;
  readonly revision: number;
  readonly type: string;
  /** Key id of the signer (`<name>+<8 hex>`). */
  readonly signer: string;
  readonly data: JsonObject;
}

/** A claim that does not follow from the events: the rule broken, where. */
export interface ClaimProblem {
  /** VERIFY_CLAIM_* code. */
  readonly code: string;
  /** Short rule name, e.g. `run.best_score`, `judge.reward_without_completion`. */
  readonly rule: string;
  readonly message: string;
  /** The stream the rule was folded over. */
  readonly stream: string;
  /** The event at which the rule broke; null for a rule checked at the end of the log. */
  readonly position: number | null;
}

/** A fresh fold over one log. */
export interface ClaimChecker {
  /** Folds one event; returns the first problem it shows (the checker is not used again after a problem). */
  event(e: ClaimEvent): ClaimProblem | null;
  /** The end of the log: rules that need the whole history (none may be left half-done in a way no run can be). */
  end(): ClaimProblem | null;
}

export interface ClaimRules {
  /** Names the rule set in reports (e.g. `assay.run/1`). */
  readonly name: string;
  start(): ClaimChecker;
}

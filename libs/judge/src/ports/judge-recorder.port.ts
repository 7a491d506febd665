/**
 * Where the Judge's events go: the signing ledger in production (LedgerJudgeRecorder), the same Ledger over memory
 * stores in unit tests. The ledger chooses the signing key from the event type (runtime for JudgeLaunched and
 * ImageBuilt, judge for JudgeCompleted, RewardRecorded and RuleViolation).
 */
export interface RecordedPosition {
  readonly type: string;
  readonly position: number;
  readonly revision: number;
}

export interface JudgeRecorder {
  /** Appends atomically; `expected` as in the ledger (`no_stream`, a revision, or `any`). */
  append(
    stream: string,
    events: ReadonlyArray<{ type: string; data: Record<string, unknown> }>,
    expected: 'no_stream' | 'any' | number,
  ): Promise<RecordedPosition[]>;
  /** The types of the events of a stream, in order (empty when the stream does not exist). */
  streamTypes(stream: string): Promise<string[]>;
}

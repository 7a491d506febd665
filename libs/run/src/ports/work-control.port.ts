/**
 * Freezing the Work container while its workspace is snapshotted (the runtime: docker pause/unpause, later). Work
 * is frozen only while the snapshot is taken, and resumes while the Judge runs, unless the task keeps it paused for
 * the Judge (GPU hand-over): then it resumes after the Judge.
 */
export interface WorkControl {
  freeze(): Promise<void>;
  thaw(): Promise<void>;
}

export const NO_WORK_CONTROL: WorkControl = { freeze: async () => {}, thaw: async () => {} };

/**
 * The code a WorkControl throws when Work could not be frozen because of what runs inside it (the kernel's freezer
 * gave up on processes in uninterruptible I/O, after retries): the agent's doing, so the round counts with a
 * RuleViolation `work.freeze_failed` and is never refunded. Any other freeze failure is the infrastructure's.
 */
export const WORK_FREEZE_REFUSED = 'RUN_WORK_FREEZE_REFUSED';

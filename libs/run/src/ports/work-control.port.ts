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

/**
 * WorkControl over the container port: `docker pause` / `unpause` of the Work container. Under heavy I/O the kernel's
 * freezer can give up ("unable to freeze": processes in uninterruptible sleep); that is retried, and when it persists
 * it is the agent's doing (WORK_FREEZE_REFUSED: the round counts with `work.freeze_failed`), never a refund. Any other
 * failure (the daemon gone, the container gone) is thrown as it is: the host's, refunded.
 */
import { AssayError } from '@assay/core';
import type { ContainerRuntime } from '@assay/containers';
import { WORK_FREEZE_REFUSED, type WorkControl } from '../ports/work-control.port';

export class ContainerWorkControl implements WorkControl {
  constructor(
    private readonly runtime: Pick<ContainerRuntime, 'pause' | 'unpause'>,
    private readonly container: string,
    private readonly retries: { readonly attempts: number; readonly delayMs: number } = { attempts: 5, delayMs: 400 },
  ) {}

  async freeze(): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.runtime.pause(this.container);
        return;
      } catch (e) {
        const msg = e instanceof Error ? e.message : String(e);
        if (/already paused/i.test(msg)) return;
        if (!/unable to freeze|freezing|freezer/i.test(msg)) throw e;
        if (attempt >= this.retries.attempts)
          throw new AssayError(
            WORK_FREEZE_REFUSED,
            'refused',
            `docker pause failed ${attempt} times (Work's processes could not be frozen: ${msg.slice(0, 300)})`,
          );
        await new Promise((r) => setTimeout(r, this.retries.delayMs * attempt));
      }
    }
  }

  async thaw(): Promise<void> {
    await this.runtime.unpause(this.container);
  }
}

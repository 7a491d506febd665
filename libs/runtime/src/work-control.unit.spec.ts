/**
 * Freezing Work for a snapshot: "unable to freeze" (the kernel's freezer giving up on processes in uninterruptible
 * I/O, which the agent's own I/O causes) is retried and, when it persists, is the agent's doing
 * (WORK_FREEZE_REFUSED: a counted work.freeze_failed violation), never a refund. Other failures stay the host's.
 */
import { isAssayError } from '@assay/core';
import { WORK_FREEZE_REFUSED } from '@assay/run';
import { DockerWorkControl } from './run-runtime';

const freezer = (errors: Array<Error | null>) => {
  const calls: string[] = [];
  return {
    calls,
    c: {
      pause: async () => {
        calls.push('pause');
        const e = errors.shift();
        if (e) throw e;
      },
      unpause: async () => {
        calls.push('unpause');
      },
    } as unknown as ConstructorParameters<typeof DockerWorkControl>[0],
  };
};
const FREEZE = new Error('(HTTP code 500) server error - Cannot pause container abc: OCI runtime pause failed: unable to freeze: unknown');

describe('DockerWorkControl.freeze', () => {
  it('retries "unable to freeze" and succeeds when the freezer does', async () => {
    const f = freezer([FREEZE, FREEZE, null]);
    await new DockerWorkControl(f.c, { attempts: 5, delayMs: 1 }).freeze();
    expect(f.calls).toEqual(['pause', 'pause', 'pause']);
  });

  it("a freezer that keeps giving up is WORK_FREEZE_REFUSED (the agent's doing)", async () => {
    const f = freezer([FREEZE, FREEZE, FREEZE]);
    const e = await new DockerWorkControl(f.c, { attempts: 3, delayMs: 1 }).freeze().catch((x: unknown) => x);
    expect(isAssayError(e) && e.code).toBe(WORK_FREEZE_REFUSED);
    expect(f.calls).toHaveLength(3);
  });

  it("any other failure is thrown as is (the host's: refunded), and an already paused Work is frozen", async () => {
    const down = new Error('connect ENOENT /var/run/docker.sock');
    const f = freezer([down]);
    await expect(new DockerWorkControl(f.c, { attempts: 3, delayMs: 1 }).freeze()).rejects.toBe(down);
    const g = freezer([new Error('Container abc is already paused')]);
    await expect(new DockerWorkControl(g.c).freeze()).resolves.toBeUndefined();
  });
});

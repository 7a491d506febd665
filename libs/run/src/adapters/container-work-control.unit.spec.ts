/**
 * Freezing Work for a snapshot: "unable to freeze" (the kernel's freezer giving up on processes in uninterruptible
 * I/O, which the agent's own I/O causes) is retried and, when it persists, is the agent's doing
 * (WORK_FREEZE_REFUSED: a counted work.freeze_failed violation), never a refund. Other failures stay the host's.
 */
import { isAssayError } from '@assay/core';
import { FakeContainerRuntime } from '../../../containers/src/testing';
import { WORK_FREEZE_REFUSED } from '../ports/work-control.port';
import { ContainerWorkControl } from './container-work-control.adapter';

const freezer = (errors: Array<Error | null>) => {
  const calls: string[] = [];
  return {
    calls,
    rt: {
      pause: async (id: string) => {
        calls.push(`pause ${id}`);
        const e = errors.shift();
        if (e) throw e;
      },
      unpause: async (id: string) => {
        calls.push(`unpause ${id}`);
      },
    },
  };
};
const FREEZE = new Error('docker could not pause container abc: Cannot pause container abc: OCI runtime pause failed: unable to freeze: unknown');

describe('ContainerWorkControl', () => {
  it('retries "unable to freeze" and succeeds when the freezer does', async () => {
    const f = freezer([FREEZE, FREEZE, null]);
    await new ContainerWorkControl(f.rt, 'w1', { attempts: 5, delayMs: 1 }).freeze();
    expect(f.calls).toEqual(['pause w1', 'pause w1', 'pause w1']);
  });

  it("a freezer that keeps giving up is WORK_FREEZE_REFUSED (the agent's doing)", async () => {
    const f = freezer([FREEZE, FREEZE, FREEZE]);
    const e = await new ContainerWorkControl(f.rt, 'w1', { attempts: 3, delayMs: 1 }).freeze().catch((x: unknown) => x);
    expect(isAssayError(e) && e.code).toBe(WORK_FREEZE_REFUSED);
    expect(f.calls).toHaveLength(3);
  });

  it("any other failure is thrown as is (the host's: refunded), and an already paused Work is frozen", async () => {
    const down = new Error('connect ENOENT /var/run/docker.sock');
    const f = freezer([down]);
    await expect(new ContainerWorkControl(f.rt, 'w1', { attempts: 3, delayMs: 1 }).freeze()).rejects.toBe(down);
    const g = freezer([new Error('Container abc is already paused')]);
    await expect(new ContainerWorkControl(g.rt, 'w1').freeze()).resolves.toBeUndefined();
  });

  it('freezes and thaws a container through the container port (the in-memory runtime)', async () => {
    const rt = new FakeContainerRuntime();
    rt.addImage({ tag: 'work:1' });
    const id = await rt.createContainer({
      image: 'work:1',
      cmd: ['fake-sleep', '60'],
      env: {},
      labels: {},
      mounts: [],
      networkMode: 'none',
      readOnlyRootfs: true,
      capDrop: ['ALL'],
      capAdd: [],
      noNewPrivileges: true,
      pidsLimit: 8,
      memoryBytes: 1 << 26,
      nanoCpus: 1e9,
      init: true,
      openStdin: false,
    });
    await rt.start(id, { onOutput: () => undefined });
    const work = new ContainerWorkControl(rt, id);
    await work.freeze();
    await work.freeze(); // already paused: frozen
    await expect(rt.exec(id, { argv: ['fake-exit', '0'] }, () => undefined)).rejects.toMatchObject({ code: 'CONTAINER_OPERATION_FAILED' });
    await work.thaw();
    const x = await rt.exec(id, { argv: ['fake-exit', '0'] }, () => undefined);
    await x.outputEnded;
    expect(await x.exitCode()).toBe(0);
    await rt.kill(id);
    expect(rt.calls.filter((c) => /^(un)?pause /.test(c)).map((c) => c.split(' ')[0])).toEqual(['pause', 'pause', 'unpause']);
  });
});

/**
 * The Work warden (libs/runtime/src/work-warden.ts) on a real Docker daemon: a controller that dies while Work is
 * paused leaves nothing frozen behind. The lifeline inside Work cannot help there (its reader is frozen too), so this
 * is what once left a paused Work, with the agent's processes and memory, until a `--resume` killed it.
 *
 * The controller is a child Node process that starts the warden for a container and then waits; the test pauses the
 * container, SIGKILLs the child, and watches the container. Nothing here uses a network: the container has none.
 */
import { spawn } from 'node:child_process';
import Docker from 'dockerode';
import { REPO_ROOT, TS_REGISTER, finished } from '../support/child-process';
import { describeDocker } from '../support/docker';
import { waitFor } from '../support/ledger-fixtures';

jest.setTimeout(120_000);

const CONTROLLER = `
const { startWorkWarden } = require(${JSON.stringify(`${REPO_ROOT}/libs/runtime/src/work-containment.ts`)});
const w = startWorkWarden(process.argv[1]);
process.stdout.write('warden ' + w.pid + '\\n');
if (process.argv[2] === 'close') { w.close(); process.stdout.write('closed\\n'); }
setInterval(() => undefined, 1000);
`;

describeDocker('Work warden (Docker)', () => {
  const docker = new Docker();
  const made: Docker.Container[] = [];

  afterAll(async () => {
    for (const c of made) await c.remove({ force: true }).catch(() => undefined);
  });

  async function work(): Promise<Docker.Container> {
    const c = await docker.createContainer({
      Image: 'assay/base:bookworm',
      Cmd: ['sleep', '300'],
      Labels: { 'org.assay.role': 'work-warden-test' },
      NetworkDisabled: true,
      HostConfig: { NetworkMode: 'none', Init: true },
    });
    made.push(c);
    await c.start();
    return c;
  }

  function controller(id: string, ...extra: string[]) {
    const child = spawn(process.execPath, ['-r', TS_REGISTER, '-e', CONTROLLER, id, ...extra], {
      cwd: REPO_ROOT,
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...process.env, NODE_OPTIONS: '' },
    });
    const out: string[] = [];
    child.stdout.on('data', (d: Buffer) => out.push(d.toString()));
    const ready = (what: string) =>
      new Promise<void>((res, rej) => {
        const t = setInterval(() => {
          if (out.join('').includes(what)) {
            clearInterval(t);
            res();
          } else if (child.exitCode !== null) {
            clearInterval(t);
            rej(new Error(`controller exited ${child.exitCode}: ${out.join('')}`));
          }
        }, 20);
      });
    return { child, ready, pid: () => Number(/warden (\d+)/.exec(out.join(''))?.[1]) };
  }

  async function stateAfter(c: Docker.Container, ms: number, until: (s: string) => boolean): Promise<string> {
    const end = Date.now() + ms;
    let s = '';
    do {
      const i = await c.inspect();
      s = i.State.Paused ? 'paused' : i.State.Status;
      if (until(s)) return s;
      await new Promise((r) => setTimeout(r, 100));
    } while (Date.now() < end);
    return s;
  }

  const alive = (pid: number) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };

  /** Waits for a process to end, however long a loaded machine takes to start Node, reach Docker and exit (60 s cap). */
  const untilDead = (pid: number): Promise<void> => waitFor(() => !alive(pid), 60_000, `process ${pid} to end`);

  it('a controller SIGKILLed while Work is paused: the warden kills Work from outside, then exits', async () => {
    const c = await work();
    const ctl = controller(c.id);
    await ctl.ready('warden ');
    const warden = ctl.pid();
    expect(alive(warden)).toBe(true);
    await c.pause();
    expect(await stateAfter(c, 1000, (s) => s === 'paused')).toBe('paused');
    ctl.child.kill('SIGKILL');
    expect((await finished(ctl.child, 30_000)).signal).toBe('SIGKILL');
    // Without the warden it stays paused (frozen processes, held memory) until a resume.
    expect(await stateAfter(c, 15_000, (s) => s === 'exited')).toBe('exited');
    await untilDead(warden);
    expect(alive(warden)).toBe(false);
  });

  it('a running Work whose controller is SIGKILLed is killed too (the lifeline would also stop it)', async () => {
    const c = await work();
    const ctl = controller(c.id);
    await ctl.ready('warden ');
    ctl.child.kill('SIGKILL');
    await finished(ctl.child, 30_000);
    expect(await stateAfter(c, 15_000, (s) => s === 'exited')).toBe('exited');
  });

  it('closing the warden (the controller ending normally) stops its own Work only, and ends it', async () => {
    const c = await work();
    const other = await work();
    const ctl = controller(c.id, 'close');
    await ctl.ready('closed');
    const warden = ctl.pid();
    await untilDead(warden);
    expect(alive(warden)).toBe(false);
    // Its own container is stopped (in a run it is already gone by then); no other container is touched.
    expect(await stateAfter(c, 15_000, (s) => s === 'exited')).toBe('exited');
    expect(await stateAfter(other, 500, () => false)).toBe('running');
    ctl.child.kill('SIGKILL');
    await finished(ctl.child, 30_000);
  });
});

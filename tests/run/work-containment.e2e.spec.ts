/**
 * Work never gives the host anything, and crashes leave nothing running (the CLI in a child process, a real
 * ASSAY_HOME, Docker):
 *   - the agent runs unprivileged; what it leaves in the workspace is not root's and has no setuid/setgid bits; the
 *     root file system is read-only; /tmp is bounded by the task's storage_mb; run directories are private (0700);
 *   - a SIGKILLed controller's Work stops by itself (the lifeline; a paused Work is killed by the warden, see
 *     work-warden.int.spec.ts); `--resume` kills the orphan, records the edits it
 *     made after the last record as WorkspaceEdited before the agent continues, and grants only what is left of the
 *     agent-time budget; Ctrl-C records the agent's time.
 * Nothing here reaches a network: Work's network is `none`.
 */
import { chmodSync, cpSync, existsSync, lstatSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { assay, spawnAssay } from '../support/cli';
import { REPO_ROOT, TS_REGISTER, finished, onceOutput } from '../support/child-process';
import { describeDocker } from '../support/docker';
import { homeEvents, leaveInWorkspace, untilEvents } from './support/home-events';
import { SnapshotHome } from '@assay/snapshots';
import { PERIODIC_SNAPSHOTS_KEPT } from '../../libs/runtime/src/run-runtime';
import { homeTag } from '../../libs/runtime/src';

jest.setTimeout(240_000);

/** tiny-optimizer with a small storage bound and agent timeout, in a directory of the test's own. */
function smallTask(dir: string, o: { storageMb: number; timeoutSec: number }): string {
  const task = join(dir, 'task');
  cpSync(join(REPO_ROOT, 'examples/tasks/tiny-optimizer'), task, { recursive: true });
  const toml = readFileSync(join(task, 'task.toml'), 'utf8')
    .replace(/^storage_mb = \d+$/m, `storage_mb = ${o.storageMb}`)
    .replace(/^timeout_sec = 1800$/m, `timeout_sec = ${o.timeoutSec}`);
  writeFileSync(join(task, 'task.toml'), toml);
  return task;
}

const HOSTILE = String.raw`set -u
W="$ASSAY_WORKSPACE"
echo "uid=$(id -u)"
echo left > "$W/left.txt"
cp /bin/bash "$W/rootshell" && chmod 6755 "$W/rootshell"; echo "suid=$?"
mkdir -p "$W/sgid-dir" && chmod 2775 "$W/sgid-dir"
echo hacked > /etc/evil 2>/dev/null; echo "etc=$?"
dd if=/dev/zero of=/tmp/big bs=1M count=96 2>/dev/null; echo "tmp=$? $(du -m /tmp/big | cut -f1)"
dd if=/dev/zero of=/var/tmp/big bs=1M count=96 2>/dev/null; echo "vartmp=$?"
dd if=/dev/zero of="$W/big" bs=1M count=96 2>/dev/null; echo "ws=$? $(du -m "$W/big" | cut -f1)"
rm -f "$W/big"; truncate -s 6G "$W/sparse"; echo "sparse=$?"
`;

describeDocker('Work containment (CLI, Docker)', () => {
  let root: string;
  let home: string;
  const docker = new Docker();
  const workOf = (run: string) =>
    docker.listContainers({ all: true, filters: { label: [`org.assay.role=work`, `org.assay.run=${run}`, `org.assay.home=${homeTag(home)}`] } });

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'assay-work-contain-'));
    home = join(root, 'home');
    const r = await assay(['ledger', 'init', '--origin', 'assay.test/work-containment'], home);
    expect(r.code).toBe(0);
  }, 60_000);

  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('the agent is unprivileged, leaves nothing of root and no setuid bits, cannot write the root file system, /tmp is bounded; run directories are private', async () => {
    chmodSync(home, 0o755); // an ASSAY_HOME others may enter
    const task = smallTask(root, { storageMb: 64, timeoutSec: 600 });
    const r = await assay(['run', task, '--agent', `command:${HOSTILE}`, '--run-id', 'unpriv1', '--snapshot-interval', '0', '--json'], home, 200_000);
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/ASSAY_HOME .* was accessible to its group and other users \(mode 0755\); made it private \(0700\)/);
    const uid = Number(/uid=(\d+)/.exec(r.stderr)?.[1]);
    expect(uid).toBeGreaterThan(0);
    expect(r.stderr).toMatch(/etc=[1-9]/); // read-only root file system
    expect(r.stderr).toMatch(/tmp=[1-9] (6[0-4]|[1-5]?\d)\b/); // ENOSPC at 64 MiB
    expect(r.stderr).toMatch(/vartmp=[1-9]/);
    expect(r.stderr).toMatch(/ws=[1-9] (6[0-4]|[1-5]?\d)\b/); // the workspace is bounded by storage_mb too
    const ws = join(home, 'runs/unpriv1/workspace');
    expect(lstatSync(join(ws, 'left.txt')).uid).toBe(uid);
    expect(lstatSync(join(ws, 'left.txt')).uid).not.toBe(0);
    expect(lstatSync(join(ws, 'rootshell')).uid).not.toBe(0);
    expect(lstatSync(join(ws, 'rootshell')).mode & 0o6000).toBe(0);
    expect(lstatSync(join(ws, 'sgid-dir')).mode & 0o6000).toBe(0);
    for (const d of [home, join(home, 'runs'), join(home, 'runs/unpriv1')]) expect(statSync(d).mode & 0o777).toBe(0o700);
    // a sparse file stays sparse on the host (6 GiB apparent, next to nothing allocated)
    const sparse = statSync(join(ws, 'sparse'));
    expect(sparse.size).toBe(6 * 1024 ** 3);
    expect(sparse.blocks * 512).toBeLessThan(1048576);
    const run = await homeEvents(home, 'run-unpriv1');
    expect(run.find((e) => e.type === 'WorkStarted')?.data.limits).toMatchObject({
      user: `${uid}:${uid}`,
      readOnlyRootfs: true,
      tmpfsBytes: 64 * 1048576,
      workspaceBytes: 64 * 1048576,
    });
  });

  it('a controller that cannot bound the workspace (here: in a mount namespace of its own, which the Docker daemon does not see) is refused, unless the operator allows an unbounded workspace', async () => {
    const task = smallTask(root, { storageMb: 64, timeoutSec: 600 });
    // `unshare --mount`: the controller's loop mount stays in its own namespace, as for a controller in a container
    // or a sandboxed service; the daemon would bind the empty directory under it
    const inOwnMountNamespace = (args: string[]) =>
      finished(
        spawn('unshare', ['--mount', '--propagation', 'private', '--', process.execPath, '-r', TS_REGISTER, 'apps/cli/src/main.ts', ...args], {
          cwd: REPO_ROOT,
          stdio: ['pipe', 'pipe', 'pipe'],
          env: { ...process.env, NODE_OPTIONS: '', ASSAY_HOME: home },
        }),
        200_000,
      );
    const args = ['run', task, '--agent', 'command:rsi-submit', '--run-id', 'unbound1', '--snapshot-interval', '0', '--json'];
    const refused = await inOwnMountNamespace(args);
    expect(refused.code).not.toBe(0);
    const said = `${refused.stdout}${refused.stderr}`; // with --json the error is one JSON document on stdout
    expect(said).toContain('RUN_WORKSPACE_UNBOUNDED');
    expect(said).toContain('the Docker daemon does not see mounts made here');
    expect(said).toContain('--allow-unbounded-workspace');
    expect(said).not.toMatch(/at .*\.ts:\d+/);
    // nothing started, nothing recorded, no run directory: the run id can be used again
    expect(await workOf('unbound1')).toEqual([]);
    expect(await homeEvents(home, 'run-unbound1')).toEqual([]);
    expect(existsSync(join(home, 'runs/unbound1'))).toBe(false);

    const allowed = await inOwnMountNamespace([...args, '--allow-unbounded-workspace']);
    expect(allowed.code).toBe(0);
    expect(allowed.stderr).toMatch(/the workspace is not size-bounded \(--allow-unbounded-workspace\): the Docker daemon does not see mounts made here/);
    expect(JSON.parse(readFileSync(join(home, 'runs/unbound1/run.json'), 'utf8'))).toMatchObject({ allowUnboundedWorkspace: true });
    const run = await homeEvents(home, 'run-unbound1');
    expect(run.find((e) => e.type === 'WorkStarted')?.data.limits).toMatchObject({ readOnlyRootfs: true, tmpfsBytes: 64 * 1048576, workspaceBytes: null });
    expect(run[run.length - 1]).toMatchObject({ type: 'RunCompleted', data: { status: 'completed' } });
  });

  it('periodic snapshots are not all pinned forever: the baseline, the rounds and the latest few stay pinned', async () => {
    const task = smallTask(root, { storageMb: 64, timeoutSec: 600 });
    // The agent keeps changing the workspace until the test, having seen enough periodic snapshots recorded, leaves a
    // `stop` file (at most 5 minutes): how many snapshots fit in a fixed time depends on the machine's load.
    const agent = String.raw`command:i=0; until [ -e "$ASSAY_WORKSPACE/stop" ] || [ $i -ge 600 ]; do i=$((i+1)); echo "$i" > "$ASSAY_WORKSPACE/optimizer.py.$i"; sleep 0.5; done`;
    const done = assay(['run', task, '--agent', agent, '--run-id', 'pins1', '--snapshot-interval', '1', '--json'], home, 400_000);
    const isPeriodic = (e: { type: string; data: Record<string, unknown> }) => e.type === 'SnapshotTaken' && e.data.round === undefined;
    try {
      await untilEvents(home, 'run-pins1', (events) => events.filter(isPeriodic).length >= 7);
    } finally {
      leaveInWorkspace(home, 'pins1', 'stop');
    }
    const r = await done;
    expect(r.code).toBe(0);
    const run = await homeEvents(home, 'run-pins1');
    const periodic = run.filter(isPeriodic).map((e) => String(e.data.root));
    expect(periodic.length).toBeGreaterThanOrEqual(6);
    const sh = new SnapshotHome(home);
    try {
      const pinned = new Set((await sh.pins()).map((p) => p.cid.toString()));
      const kept = periodic.filter((c) => pinned.has(c));
      expect(kept.length).toBeLessThanOrEqual(PERIODIC_SNAPSHOTS_KEPT + 1); // + the baseline
      expect(pinned.has(periodic[0] as string)).toBe(true); // the baseline
      expect(pinned.has(periodic[periodic.length - 1] as string)).toBe(true); // the workspace as the agent left it
    } finally {
      await sh.close();
    }
  }, 420_000);

  it('resume kills a paused orphan rather than unpausing it: it never runs again', async () => {
    const task = smallTask(root, { storageMb: 64, timeoutSec: 600 });
    const agent = 'command:if rsi-submit --list | grep -q "^round 1:"; then echo resumed; exit 0; fi; rsi-submit; sleep 100';
    const child = spawnAssay(['run', task, '--agent', agent, '--run-id', 'paused1', '--snapshot-interval', '0'], home);
    onceOutput(child.stdout, '--- end ---', () => setTimeout(() => child.kill('SIGKILL'), 500));
    expect((await finished(child, 120_000)).signal).toBe('SIGKILL');
    // An orphan of the run as a controller killed mid-snapshot leaves it: paused, and writing the moment it thaws.
    const live = existsSync(join(home, 'runs/paused1/workfs')) ? 'workfs' : 'workspace';
    const orphan = await docker.createContainer({
      Image: 'assay/base:bookworm',
      Cmd: ['sh', '-c', 'sleep 1; while :; do echo thawed >> /w/orphan.txt; done'],
      Labels: { 'org.assay.role': 'work', 'org.assay.run': 'paused1', 'org.assay.home': homeTag(home) },
      NetworkDisabled: true,
      HostConfig: { NetworkMode: 'none', Binds: [`${join(home, 'runs/paused1', live)}:/w`] },
    });
    await orphan.start();
    await orphan.pause();
    await new Promise((res) => setTimeout(res, 1500)); // its `sleep 1` is over: it writes as soon as it runs
    const again = await assay(['run', '--resume', 'paused1', '--json'], home, 120_000);
    expect(again.code).toBe(0);
    expect(again.stderr).toContain('resumed');
    expect(existsSync(join(home, 'runs/paused1/workspace/orphan.txt'))).toBe(false);
    expect(existsSync(join(home, 'runs/paused1', live, 'orphan.txt'))).toBe(false);
    await expect(orphan.inspect()).rejects.toMatchObject({ statusCode: 404 }); // removed
  });

  it('Ctrl-C records the time the agent ran', async () => {
    const task = smallTask(root, { storageMb: 64, timeoutSec: 600 });
    // SIGINT 3 s after the agent's own first line: its time runs from before that line, whatever the exec cost.
    const child = spawnAssay(['run', task, '--agent', 'command:echo agent-up-now; sleep 120', '--run-id', 'ctrlc1', '--snapshot-interval', '0'], home);
    // The agent's own line, whole, as the CLI marks agent output (`agent| `), on either stream: a chunk may end
    // mid-line, and the CLI's line naming the command (`echo agent-up-now; ...`) is not it.
    onceOutput([child.stdout, child.stderr], /^agent\| agent-up-now$/, () => setTimeout(() => child.kill('SIGINT'), 3000));
    const r = await finished(child, 120_000);
    expect(r.code).toBe(0);
    const run = await homeEvents(home, 'run-ctrlc1');
    const used = run.filter((e) => e.type === 'BudgetConsumed' && e.data.budget === 'agent_time').reduce((n, e) => n + Number(e.data.amount), 0);
    expect(used).toBeGreaterThanOrEqual(2);
    expect(run[run.length - 1]).toMatchObject({ type: 'RunCompleted', data: { status: 'cancelled' } });
  });

  it('a SIGKILLed controller leaves no agent running; resume kills the orphan, records its edits, and grants only the agent time left', async () => {
    const task = smallTask(root, { storageMb: 64, timeoutSec: 14 });
    const agent = String.raw`command:W="$ASSAY_WORKSPACE"
if rsi-submit --list | grep -q "^round 1:"; then echo "resumed counter=$(cat "$W/counter")"; sleep 100; exit 0; fi
( i=0; while true; do i=$((i+1)); echo $i > "$W/counter"; sleep 0.1; done ) &
sleep 3; rsi-submit; sleep 100`;
    const child = spawnAssay(['run', task, '--agent', agent, '--run-id', 'orphan1', '--snapshot-interval', '0'], home);
    onceOutput(child.stdout, '--- end ---', () => setTimeout(() => child.kill('SIGKILL'), 1000));
    const r = await finished(child, 120_000);
    expect(r.signal).toBe('SIGKILL');
    // Work stops by itself once its controller is gone
    let running = true;
    for (let i = 0; i < 50 && running; i++) {
      const [c] = await workOf('orphan1');
      running = c?.State === 'running' || c?.State === 'paused';
      if (running) await new Promise((res) => setTimeout(res, 200));
    }
    expect(running).toBe(false);
    // the workspace of a session that died is where it was bound (workfs/), when the host could bound it
    const live = existsSync(join(home, 'runs/orphan1/workfs/counter')) ? 'workfs' : 'workspace';
    const counter = readFileSync(join(home, `runs/orphan1/${live}/counter`), 'utf8');
    await new Promise((res) => setTimeout(res, 1000));
    expect(readFileSync(join(home, `runs/orphan1/${live}/counter`), 'utf8')).toBe(counter); // nothing runs any more

    const again = await assay(['run', '--resume', 'orphan1', '--json'], home, 120_000);
    expect(again.code).toBe(0);
    expect(again.stderr).toMatch(/removed 1 leftover Work container/);
    expect(again.stderr).toMatch(/the workspace differs from the last recorded snapshot: recorded as WorkspaceEdited/);
    expect(again.stderr).toContain(`resumed counter=${counter.trim()}`);
    const killedSec = Number(/the previous session's agent time since its last record: ([\d.]+) s/.exec(again.stderr)?.[1]);
    expect(killedSec).toBeGreaterThanOrEqual(3);
    const limit = Number(/the agent ran out of time \(([\d.]+) s\)/.exec(again.stderr)?.[1]);
    expect(limit).toBeLessThanOrEqual(14 - 3);
    const run = await homeEvents(home, 'run-orphan1');
    const second = run.map((e) => e.type).lastIndexOf('WorkStarted');
    const after = run.slice(second + 1);
    expect(after[0]?.type).toBe('SnapshotTaken');
    expect(after[1]?.type).toBe('WorkspaceEdited');
    expect(JSON.stringify(after[1]?.data)).toContain('counter');
    const used = run.filter((e) => e.type === 'BudgetConsumed' && e.data.budget === 'agent_time').reduce((n, e) => n + Number(e.data.amount), 0);
    expect(used).toBeLessThanOrEqual(14 + 1e-6);
    expect(used).toBeGreaterThanOrEqual(13);
    expect(await workOf('orphan1')).toHaveLength(0);
    expect((await assay(['ledger', 'verify'], home)).code).toBe(0);
  });
});

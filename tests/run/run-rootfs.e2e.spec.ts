/**
 * `assay run` in full-rootfs mode (workdir "/"), as a user runs it: a child process, a real ASSAY_HOME, Docker.
 * The `command:` agent edits /etc/assay-answer (outside any workspace directory), submits, and the run completes
 * with the Judge's reward; the ledger holds the rootfs snapshot, and nothing of the run is left in Docker.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { randomIds, systemClock } from '@assay/core';
import { LedgerHome } from '@assay/ledger';
import { assay, spawnAssay } from '../support/cli';
import { REPO_ROOT, onceOutput } from '../support/child-process';
import { describeDocker } from '../support/docker';
import { runResearch } from '../../libs/runtime/src/run-runtime';

jest.setTimeout(240_000);

const TASK = join(REPO_ROOT, 'tests/fixtures/tasks/rootfs-tiny');

describeDocker('assay run, full-rootfs task (CLI, Docker)', () => {
  let home: string;

  beforeAll(async () => {
    home = join(mkdtempSync(join(tmpdir(), 'assay-run-rootfs-')), 'home');
    const r = await assay(['ledger', 'init', '--origin', 'assay.test/run-rootfs'], home);
    expect(r.code).toBe(0);
  }, 60_000);

  afterAll(() => rmSync(join(home, '..'), { recursive: true, force: true }));

  it('refused before anything starts when the daemon does not remap users and the operator did not allow a root agent', async () => {
    const r = await assay(['run', TASK, '--agent', 'command:true', '--run-id', 'rootfs0', '--json'], home, 230_000);
    expect(r.code).not.toBe(0);
    const said = `${r.stdout}${r.stderr}`; // with --json the error is one JSON document on stdout
    expect(said).toContain('RUN_ROOT_AGENT_REFUSED');
    expect(said).toContain('--allow-root-agent');
    expect(said).not.toMatch(/at .*\.ts:\d+/);
    const docker = new Docker();
    expect(await docker.listContainers({ all: true, filters: { label: ['org.assay.run=rootfs0'] } })).toEqual([]);
    const h = new LedgerHome(home, { clock: systemClock, ids: randomIds });
    try {
      expect(await h.readEvents({ stream: 'run-rootfs0', limit: 10 })).toEqual([]); // nothing recorded
    } finally {
      await h.close();
    }
  });

  it('a command agent edits /etc, submits twice, and the run completes with the best reward', async () => {
    const agent = 'command:rsi-submit > /dev/null; echo "s1=$?"; echo 42 > /etc/assay-answer; rsi-submit > /dev/null; echo "s2=$?"';
    const r = await assay(['run', TASK, '--agent', agent, '--run-id', 'rootfs1', '--allow-root-agent', '--json'], home, 230_000);
    expect(r.stderr).not.toMatch(/Error:|at .*\.ts:\d+/);
    expect(r.code).toBe(0);
    const rep = JSON.parse(r.stdout) as {
      status: string;
      bestRound: number;
      bestScore: number;
      rounds: Array<{ round: number; status: string; score: number | null }>;
    };
    expect(rep.rounds.map((x) => [x.round, x.status, x.score])).toEqual([
      [1, 'completed', 0],
      [2, 'completed', 1],
    ]);
    expect([rep.status, rep.bestRound, rep.bestScore]).toEqual(['completed', 2, 1]);

    const h = new LedgerHome(home, { clock: systemClock, ids: randomIds });
    try {
      const evs = (await h.readEvents({ stream: 'run-rootfs1', limit: 1000 })).map((e) => e.envelope);
      const snaps = evs.filter((e) => e.type === 'SnapshotTaken').map((e) => e.data as { source?: string; files?: number; round?: number | null });
      expect(snaps.length).toBeGreaterThanOrEqual(3); // the baseline, and one per submission
      for (const s of snaps) expect(s.files).toBeGreaterThan(1000); // a whole root file system
      const edited = evs.filter((e) => e.type === 'WorkspaceEdited').map((e) => JSON.stringify(e.data));
      expect(edited.some((d) => d.includes('etc/assay-answer'))).toBe(true);
    } finally {
      await h.close();
    }
    const docker = new Docker();
    expect(await docker.listContainers({ all: true, filters: { label: ['org.assay.run=rootfs1'] } })).toEqual([]);
    expect(await docker.listImages({ filters: { label: ['org.assay.role=judge-rootfs'] } })).toEqual([]);
  });

  it('a file system Docker cannot import (a whiteout name the agent made) is a counted rule violation of the round, never a refund', async () => {
    const agent = 'command:echo 42 > /etc/assay-answer; touch /etc/.wh.; rsi-submit > /dev/null; echo "s1=$?"';
    const r = await assay(['run', TASK, '--agent', agent, '--run-id', 'rootfswh', '--allow-root-agent', '--json'], home, 230_000);
    expect(r.stderr).not.toMatch(/Error:|at .*\.ts:\d+/);
    expect(r.code).toBe(0);
    const rep = JSON.parse(r.stdout) as { rounds: Array<{ round: number; status: string; score: number | null }> };
    expect(rep.rounds.map((x) => [x.round, x.status, x.score])).toEqual([[1, 'rule_violation', 0]]);
    const h = new LedgerHome(home, { clock: systemClock, ids: randomIds });
    try {
      const evs = (await h.readEvents({ stream: 'run-rootfswh', limit: 1000 })).map((e) => e.envelope);
      expect(evs.filter((e) => e.type === 'SubmissionRejected')).toEqual([]); // no refund
      // The Judge's own stream records the rule it found broken, with the daemon's reason.
      const all = (await h.readEvents({ limit: 100_000 })).map((e) => e.envelope);
      const violations = all.filter((e) => e.type === 'RuleViolation').map((e) => e.data as { rule?: string; detail?: string });
      expect(violations.map((v) => v.rule)).toContain('snapshot.refused');
      expect(violations.find((v) => v.rule === 'snapshot.refused')?.detail).toContain('cannot be made into an image');
    } finally {
      await h.close();
    }
    const docker = new Docker();
    expect(await docker.listImages({ filters: { label: ['org.assay.role=judge-rootfs'] } })).toEqual([]);
  });

  it("resume after SIGKILL carries the old Work's file system over: what the agent wrote before is still there", async () => {
    const agent =
      'command:if rsi-submit --list | grep -q "^round 1:"; then cat /root/carried; echo 42 > /etc/assay-answer; rsi-submit > /dev/null; exit 0; fi; ' +
      'echo carried-ok > /root/carried; rsi-submit; sleep 300';
    const child = spawnAssay(['run', TASK, '--agent', agent, '--run-id', 'rootfs2', '--allow-root-agent'], home);
    onceOutput(child.stdout, '--- end ---', () => setTimeout(() => child.kill('SIGKILL'), 300));
    child.stderr.resume();
    const signal = await new Promise((resolve) => child.once('exit', (_c, sig) => resolve(sig)));
    expect(signal).toBe('SIGKILL');

    const again = await assay(['run', '--resume', 'rootfs2', '--json'], home, 230_000);
    expect(again.code).toBe(0);
    expect(again.stderr).toMatch(/carried Work's file system over from [0-9a-f]{12}/);
    expect(again.stderr).toContain('carried-ok');
    const rep = JSON.parse(again.stdout) as { status: string; rounds: Array<{ round: number; status: string; score: number | null }> };
    expect(rep.rounds.map((x) => [x.round, x.status, x.score])).toEqual([
      [1, 'completed', 0],
      [2, 'completed', 1],
    ]);
    const h = new LedgerHome(home, { clock: systemClock, ids: randomIds });
    try {
      const started = (await h.readEvents({ stream: 'run-rootfs2', limit: 1000 })).map((e) => e.envelope).filter((e) => e.type === 'WorkStarted');
      expect(started).toHaveLength(2);
      const [first, second] = started.map((e) => e.data as { container: string; image: string; limits: { carriedFrom?: string } });
      expect(second?.image).not.toBe(first?.image);
      expect(second?.limits.carriedFrom).toBe(first?.container);
      // the choice is recorded, and kept for the resume (which was not given --allow-root-agent again)
      for (const e of started) expect(e.data).toMatchObject({ limits: { user: '0:0', userNamespaceRemap: false } });
    } finally {
      await h.close();
    }
    const docker = new Docker();
    expect(await docker.listContainers({ all: true, filters: { label: ['org.assay.run=rootfs2'] } })).toEqual([]);
    expect(await docker.listImages({ filters: { label: ['org.assay.role=work-carried'] } })).toEqual([]);
  });

  it("stops the agent once Work's own layer grows past storage_mb (a check, where the storage driver cannot limit the layer), and records the bound", async () => {
    // The task as shipped, with storage_mb 8: the agent writes 64 MiB into /opt, then would sleep for ten minutes.
    const task = join(home, '..', 'rootfs-small');
    cpSync(TASK, task, { recursive: true });
    const toml = join(task, 'task.toml');
    writeFileSync(toml, readFileSync(toml, 'utf8').replace(/^storage_mb = \d+$/m, 'storage_mb = 8'));
    const lines: string[] = [];
    const started = Date.now();
    const rep = await runResearch({
      home,
      taskDir: task,
      agent: 'command:dd if=/dev/zero of=/opt/fill bs=1M count=64 2>/dev/null; echo wrote; sleep 600; echo never',
      runId: 'rootfs3',
      allowRootAgent: true,
      rootfsWriteCheckSec: 1,
      snapshotIntervalSec: 0,
      log: (l) => lines.push(l),
    });
    expect(Date.now() - started).toBeLessThan(200_000); // the sleep never ran out
    // Docker's overlay2 can limit a container's layer only on XFS with project quotas; this kernel has no quota
    // support at all (CI's hosts: "XFS: quota support not available"), so the controller's check is the bound here
    // (the fake-runtime run tests cover a driver that can)
    expect(lines.join('\n')).toContain("Work's file system is bounded by a check every 1 s, not by the kernel");
    expect(lines.join('\n')).toMatch(/Work's file system grew past the task's storage_mb: \d+ bytes written, the bound is 8388608: stopping the agent/);
    expect(rep).toMatchObject({ status: 'no_valid_submission', agentExitCode: null });
    const h = new LedgerHome(home, { clock: systemClock, ids: randomIds });
    try {
      const events = (await h.readEvents({ stream: 'run-rootfs3', limit: 1000 })).map((e) => e.envelope);
      expect(events.find((e) => e.type === 'WorkStarted')?.data).toMatchObject({
        limits: { user: '0:0', rootfsWriteBytes: 8 * 1048576, rootfsWriteBound: 'checked', rootfsWriteCheckSec: 1 },
      });
      expect(events.map((e) => e.type)).toContain('RunCompleted');
    } finally {
      await h.close();
    }
    const docker = new Docker();
    expect(await docker.listContainers({ all: true, filters: { label: ['org.assay.run=rootfs3'] } })).toEqual([]);
  });
});

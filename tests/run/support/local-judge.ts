/**
 * Test stand-ins for the runtime, until the Judge and Work wiring land: a Snapshotter over a real directory (its
 * files read into the in-memory fake), and a JudgePort that scores a snapshot with a task's real scoring script on
 * this machine (python3) and records the Judge's events in the ledger like the real Judge does.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import type { IdGenerator } from '@assay/core';
import {
  EMPTY_OUTPUT_DIGEST,
  FakeSnapshotter,
  type ForeignEvent,
  type JudgeOutcome,
  type JudgePort,
  type JudgeRequest,
  type SnapshotRequest,
  type WorkspaceSnapshot,
} from '@assay/run';

/** Snapshots a real directory (regular files only, read as UTF-8). */
export class DirSnapshotter extends FakeSnapshotter {
  constructor(private readonly dir: string) {
    super();
  }

  override async snapshot(req: SnapshotRequest): Promise<WorkspaceSnapshot> {
    this.files.clear();
    const walk = (d: string) => {
      for (const name of readdirSync(d)) {
        const p = join(d, name);
        const st = statSync(p);
        if (st.isDirectory()) walk(p);
        else if (st.isFile()) this.files.set(relative(this.dir, p).split('\\').join('/'), readFileSync(p, 'utf8'));
      }
    };
    walk(this.dir);
    return super.snapshot(req);
  }
}

export type Writer = (stream: string, events: ForeignEvent[], expected: 'no_stream' | 'any') => Promise<unknown>;

/**
 * Runs `argv(workspace, out)` on a materialised copy of the snapshot, reads out/reward.json strictly and records
 * JudgeLaunched, JudgeCompleted and RewardRecorded.
 */
export class LocalScriptJudge implements JudgePort {
  private n = 0;
  constructor(
    private readonly snapshots: FakeSnapshotter,
    private readonly write: Writer,
    private readonly ids: IdGenerator,
    private readonly argv: (workspace: string, out: string, scratch: string) => string[],
    private readonly logsDir: string,
  ) {}

  async judge(req: JudgeRequest): Promise<JudgeOutcome> {
    this.n += 1;
    const judge = `local-${this.n}-r${req.round}`;
    const ev = (type: string, data: Record<string, unknown>): ForeignEvent => ({
      type,
      data: { run: req.run, round: req.round, judge, ...data },
      id: this.ids.next(),
    });
    const tree = this.snapshots.tree(req.snapshot);
    if (!tree) throw new Error(`snapshot ${req.snapshot} is unknown`);
    const scratch = mkdtempSync(join(tmpdir(), 'assay-local-judge-'));
    try {
      const ws = join(scratch, 'workspace');
      for (const [p, content] of tree) {
        mkdirSync(dirname(join(ws, p)), { recursive: true });
        writeFileSync(join(ws, p), content);
      }
      mkdirSync(ws, { recursive: true });
      const out = join(scratch, 'verifier');
      const [cmd, ...args] = this.argv(ws, out, scratch) as [string, ...string[]];
      const started = Date.now();
      const r = await new Promise<{ code: number; output: string }>((resolve) =>
        execFile(cmd, args, { cwd: scratch, timeout: 120_000 }, (err, stdout, stderr) =>
          resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, output: `${stdout}${stderr}` }),
        ),
      );
      const logName = `round-${req.round}.log`;
      writeFileSync(join(this.logsDir, logName), r.output);
      await this.write(
        `judge-${judge}`,
        [ev('JudgeLaunched', { image: `sha256:${'0'.repeat(64)}`, snapshot: req.snapshot, testsDigest: 'sha256:tests', limits: {}, network: 'none' })],
        'no_stream',
      );
      let rewards: Record<string, number> | null = null;
      try {
        const parsed = JSON.parse(readFileSync(join(out, 'reward.json'), 'utf8')) as Record<string, unknown>;
        if (Object.values(parsed).every((v) => typeof v === 'number' && Number.isFinite(v))) rewards = parsed as Record<string, number>;
      } catch {
        rewards = null;
      }
      const status = rewards ? 'completed' : 'verifier_error';
      const tail = [
        ev('JudgeCompleted', {
          status,
          exitCode: r.code,
          durationMs: Date.now() - started,
          outputDigest: EMPTY_OUTPUT_DIGEST,
          outputBytes: Buffer.byteLength(r.output),
          ...(rewards ? {} : { detail: 'no valid reward.json' }),
        }),
      ];
      if (rewards) tail.push(ev('RewardRecorded', { rewards, primaryMetric: null, primaryScore: null }));
      await this.write(`judge-${judge}`, tail, 'any');
      return { judge, status, rewards, primaryScore: null, detail: null, log: `/logs/assay/${logName}`, gpuSeconds: 0 };
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  }
}

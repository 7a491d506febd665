/**
 * The scripted reference agent on examples/tasks/tiny-optimizer, end to end short of Docker: the real task plan
 * and run settings, a SQLite ledger, the submission endpoint on a Unix socket, rsi-submit, the agent's bash script,
 * and the task's real hidden scorer (tests/score.py, numpy) as the Judge. Shows real improvement, a rejected
 * candidate and the selection rule. (The Docker end-to-end test comes with the Judge and Work wiring.)
 */
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock, SequentialIds, randomIds, systemClock } from '@assay/core';
import { canonicalJson, LedgerHome, initLedgerHome } from '@assay/ledger';
import { buildRunRules, generateRunToken, runClaimRules, LedgerRunLedger, readRunTaskSettings, SubmissionService, SubmitEndpoint, taskIdOf } from '@assay/run';
import { loadTaskPlan, mergeRunSettings, protocolFingerprint, protocolFingerprintInput } from '@assay/task-format';
import { RSI_SUBMIT, rsiSubmit } from './support/endpoint';
import { DirSnapshotter, LocalScriptJudge } from './support/local-judge';

jest.setTimeout(120_000);

const REPO = join(__dirname, '../..');
const TASK = join(REPO, 'examples/tasks/tiny-optimizer');
const AGENT = join(REPO, 'examples/agents/reference-agent/agent.sh');

describe('reference agent on tiny-optimizer', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'assay-reference-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('improves over three valid submissions, has one rejected, and the run selects the best', async () => {
    const plan = await loadTaskPlan(TASK);
    const settings = mergeRunSettings(plan.runSettings);
    const runTask = readRunTaskSettings(plan.metadata);
    if (!runTask.ok) throw new Error(runTask.problems.join('\n'));
    const token = generateRunToken();
    const input = protocolFingerprintInput({
      taskDigest: 'sha256:task',
      judgeImageDigest: `sha256:${'0'.repeat(64)}`,
      settings,
      harnessVersion: 'assay/0.1.0',
    });
    const { protocol, selection } = buildRunRules({
      settings,
      agentTimeoutSec: plan.agent.timeoutSec,
      editablePaths: runTask.value.editablePaths,
      tokenSha256: token.sha256,
      fingerprintInput: JSON.parse(JSON.stringify(input)),
    });
    expect(protocol.editablePaths).toEqual(['optimizer.py']);
    expect(selection).toMatchObject({ metric: 'val_loss', direction: 'minimize' });

    const home = join(dir, 'home');
    await initLedgerHome(home, { clock: new ManualClock('2026-03-01T10:00:00.000Z'), ids: new SequentialIds(), origin: 'assay.test/reference' });
    const h = new LedgerHome(home, { clock: systemClock, ids: randomIds });
    try {
      const workspace = join(dir, 'workspace');
      cpSync(join(TASK, 'environment/workspace'), workspace, { recursive: true });
      const logs = join(dir, 'logs');
      mkdirSync(logs);
      const ledger = new LedgerRunLedger(h.ledger);
      const snapshotter = new DirSnapshotter(workspace);
      const judge = new LocalScriptJudge(
        snapshotter,
        (s, e, x) => ledger.appendTo(s, e, x),
        randomIds,
        (ws, out, scratch) => [
          'python3',
          '-I',
          join(TASK, 'tests/score.py'),
          '--workspace',
          ws,
          '--out',
          out,
          '--runner',
          'none',
          '--python',
          'python3',
          '--cwd',
          scratch,
        ],
        logs,
      );
      const run = 'reference-1';
      const svc = await new SubmissionService({ run, ledger, snapshotter, judge, clock: systemClock, ids: randomIds }).start({
        run,
        task: taskIdOf(plan.name),
        taskDigest: 'sha256:task',
        agent: 'reference-agent',
        fingerprint: protocolFingerprint(input, canonicalJson),
        protocol,
        selection,
      });
      await svc.recordWorkspace(); // the starting workspace: what the editable-path rule compares with
      const socket = join(dir, 'submit.sock');
      const endpoint = await SubmitEndpoint.listen({ socketPath: socket, gateway: svc });
      let out: string;
      try {
        out = await new Promise<string>((resolve, reject) =>
          execFile(
            'bash',
            [AGENT],
            {
              env: {
                PATH: process.env.PATH ?? '/usr/bin:/bin',
                ASSAY_WORKSPACE: workspace,
                RSI_SUBMIT: `python3 -I ${RSI_SUBMIT}`,
                ASSAY_SUBMIT_SOCKET: socket,
                ASSAY_SUBMIT_TOKEN: token.token,
                TINY_OPTIMIZER_BENCH: join(TASK, 'environment/bench/bench.py'),
              },
              timeout: 110_000,
            },
            (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stdout}\n${stderr}`)) : resolve(stdout)),
          ),
        );
        const list = await rsiSubmit({ ASSAY_SUBMIT_SOCKET: socket, ASSAY_SUBMIT_TOKEN: token.token }, ['--list', '--json']);
        const history = JSON.parse(list.stdout) as {
          rounds: Array<{ round: number; status: string; score: number | null; rule: string | null }>;
          best: { round: number };
        };
        expect(history.rounds.map((r) => [r.round, r.status, r.rule])).toEqual([
          [1, 'completed', null],
          [2, 'rule_violation', 'workspace.not_editable'],
          [3, 'completed', null],
          [4, 'completed', null],
        ]);
        const [s1, , s3, s4] = history.rounds.map((r) => r.score as number);
        expect(s1).toBeLessThan(0.116); // plain SGD scores 0.1157
        expect(s3).toBeLessThan((s1 as number) * 0.5);
        expect(s4).toBeLessThan(s3 as number);
        expect(history.best.round).toBe(4);
      } finally {
        await endpoint.close();
      }
      expect(out).toContain('rsi-submit exited with status 1'); // the rejected round
      expect(out.match(/rsi-submit exited with status 0/g)).toHaveLength(3);
      expect(out).toMatch(/status: rule_violation\ncode: 200\n/);
      expect(readFileSync(join(logs, 'round-4.log'), 'utf8')).toMatch(/val_loss \(mean of 3 sizes, lower is better\)/);
      expect(snapshotter.calls.filter((c) => c.round !== null)).toHaveLength(4);

      const done = await svc.complete();
      expect(done).toMatchObject({ status: 'completed', bestRound: 4 });
      expect(done?.bestScore).toBeCloseTo(0.017275, 5);
      expect((await h.verify({ claims: runClaimRules() })).ok).toBe(true);
      const runEvents = (await h.readEvents({ stream: `run-${run}`, limit: 100 })).map((e) => e.envelope.type);
      expect(runEvents.filter((t) => t === 'RuleViolation')).toHaveLength(1);
      expect(runEvents.filter((t) => t === 'WorkspaceEdited').length).toBeGreaterThanOrEqual(4);
    } finally {
      await h.close();
    }
  });
});

/**
 * A run controller in a child process, for the SIGKILL tests: opens the ledger in ASSAY_HOME, starts (or resumes)
 * the run, serves the submission endpoint, and hangs on purpose at one point of a round so the test can kill it
 * there. It prints one line per milestone: READY, SNAPSHOTTING <round>, JUDGING <round>, JUDGED <round>.
 *
 * usage: run-controller-child.ts <home> <run> <socket> <start|resume> <hang: snapshot|judge|none>
 */
import { randomIds, systemClock } from '@assay/core';
import { LedgerHome } from '@assay/ledger';
import { FakeJudge, FakeSnapshotter, LedgerRunLedger, SubmissionService, SubmitEndpoint, type JudgePort, type Snapshotter } from '@assay/run';
import { startInput } from './run-fixtures';

async function main(): Promise<void> {
  const [home, run, socket, mode, hang] = process.argv.slice(2) as [string, string, string, string, string];
  const h = new LedgerHome(home, { clock: systemClock, ids: randomIds });
  const ledger = new LedgerRunLedger(h.ledger);
  const say = (line: string) => process.stdout.write(`${line}\n`);
  const inner = new FakeSnapshotter({ 'solve.py': 'v1' });
  const snapshotter: Snapshotter = {
    snapshot: async (req) => {
      say(`SNAPSHOTTING ${req.round}`);
      if (hang === 'snapshot') await new Promise(() => undefined);
      return inner.snapshot(req);
    },
    changes: (a, b) => inner.changes(a, b),
  };
  const fake = new FakeJudge((s, e, x) => ledger.appendTo(s, e, x), randomIds, [{ status: 'completed', rewards: { reward: 0.5 } }]);
  const judge: JudgePort = {
    judge: async (req) => {
      if (hang === 'judge') {
        await ledger.appendTo(
          `judge-child-${req.round}`,
          [
            {
              type: 'JudgeLaunched',
              data: {
                run: req.run,
                round: req.round,
                judge: `child-${req.round}`,
                image: 'sha256:i',
                snapshot: req.snapshot,
                testsDigest: 'sha256:t',
                limits: {},
                network: 'none',
              },
              id: randomIds.next(),
            },
          ],
          'no_stream',
        );
        say(`JUDGING ${req.round}`);
        await new Promise(() => undefined);
      }
      const out = await fake.judge(req);
      say(`JUDGED ${req.round}`);
      return out;
    },
  };
  const deps = { run, ledger, snapshotter, judge, clock: systemClock, ids: randomIds };
  const svc = new SubmissionService(deps);
  if (mode === 'start') await svc.start(startInput(run));
  else await svc.resume();
  await SubmitEndpoint.listen({ socketPath: socket, gateway: svc });
  say('READY');
}

main().catch((e: unknown) => {
  process.stderr.write(`${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(1);
});

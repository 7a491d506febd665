/**
 * examples/ledger/sample-run.jsonl (the demo's and the ledger tests' research run) is exactly what the run
 * controller writes for the scripted run in tests/support/sample-run.ts, and its claims follow from its events.
 * `SAMPLE_RUN_WRITE=1 npx jest tests/run/sample-run.unit.spec.ts` rewrites the file after a deliberate change.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { CLAIM_EVENT_TYPES } from '@assay/ledger';
import { runClaimRules } from '@assay/run';
import { SAMPLE_RUN } from '../support/ledger-home-fixtures';
import { sampleRunEvents, sampleRunJsonl } from '../support/sample-run';

describe('the sample research run', () => {
  it('is what the run controller writes', async () => {
    const text = await sampleRunJsonl();
    if (process.env.SAMPLE_RUN_WRITE === '1') writeFileSync(SAMPLE_RUN, text);
    expect(readFileSync(SAMPLE_RUN, 'utf8')).toBe(text);
  });

  it('passes the claims step: five rounds (judged, not editable, refunded), a refused request, the best round 5', async () => {
    const events = await sampleRunEvents();
    const c = runClaimRules().start();
    const revs = new Map<string, number>();
    events.forEach((e, i) => {
      const revision = (revs.get(e.stream) ?? -1) + 1;
      revs.set(e.stream, revision);
      if (CLAIM_EVENT_TYPES.includes(e.type))
        expect(c.event({ position: i + 3, stream: e.stream, revision, type: e.type, signer: 'k+00000000', data: e.data })).toBeNull();
    });
    expect(c.end()).toBeNull();
    const done = events.find((e) => e.type === 'RunCompleted');
    expect(done?.data).toMatchObject({ status: 'completed', bestRound: 5, bestScore: 0.433 });
    expect(events.filter((e) => e.type === 'SubmissionReceived')).toHaveLength(5);
    expect(events.find((e) => e.type === 'RuleViolation')?.data).toMatchObject({ round: 3, rule: 'workspace.not_editable' });
    expect(events.find((e) => e.type === 'SubmissionRejected' && e.data.round === 4)?.data).toMatchObject({ status: 503 });
  });
});

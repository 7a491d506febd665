/**
 * The reproducibility and budget reports (libs/projections domain/reports.ts) folded from the sample run's events:
 * the recorded best against its re-judges, what each budget allowed and used, and a task's sums.
 */
import { budgetReport, projectRunEvent, rejudgeOfEvent, runReport, taskBudgetReport, type RunSlot } from '@assay/projections';
import { asRecords, noValidRun, preamble, rejudgeDraft, sampleVariant, type EventDraft } from './projection-fixtures';

function slotOf(events: EventDraft[]): RunSlot {
  let slot: RunSlot | null = null;
  for (const e of asRecords(events)) slot = projectRunEvent(slot, e);
  return slot!;
}

const a = sampleVariant({ run: 'r-a' });
const best = (a.find((e) => e.type === 'RunCompleted')!.data as { bestSnapshot: string }).bestSnapshot;

describe('reports', () => {
  it('reads a RejudgeCompleted and ignores every other event, and one without a run', () => {
    const [rec] = asRecords([rejudgeDraft({ id: 'x', run: 'r-a', round: 5, snapshot: best, recorded: 0.433, scores: [0.5, 0.6, 0.7] })], 40);
    expect(rejudgeOfEvent(rec!)).toMatchObject({
      position: 40,
      run: 'r-a',
      round: 5,
      verdict: 'not_reproduced',
      matches: false,
      median: 0.6,
      judges: 3,
      spread: expect.closeTo(0.2, 9),
    });
    for (const e of asRecords([...preamble(), ...a])) expect(rejudgeOfEvent(e)).toBeNull();
    const noRun = rejudgeDraft({ id: 'y', run: 'r-a', round: 5, snapshot: best, recorded: 0.433, scores: [0.4] });
    delete (noRun.data as Record<string, unknown>).run;
    expect(rejudgeOfEvent(asRecords([noRun])[0]!)).toBeNull();
  });

  it("reports the recorded best and the latest re-judge of its snapshot, not other runs' or rounds'", () => {
    const slot = slotOf(a);
    const records = asRecords(
      [
        rejudgeDraft({ id: 'old', run: 'r-a', round: 5, snapshot: best, recorded: 0.433, scores: [0.9] }),
        rejudgeDraft({ id: 'new', run: 'r-a', round: 5, snapshot: best, recorded: 0.433, scores: [0.433] }),
        rejudgeDraft({ id: 'other-round', run: 'r-a', round: 1, snapshot: 'bafyother', recorded: 0.912, scores: [0.91] }),
        rejudgeDraft({ id: 'other-run', run: 'r-b', round: 5, snapshot: best, recorded: 0.433, scores: [0.1] }),
      ],
      100,
    ).map((e) => rejudgeOfEvent(e)!);
    const r = runReport(slot, records, 'completed');
    expect(r.reproducibility.recorded).toEqual({ round: 5, score: 0.433, snapshot: best });
    expect(r.reproducibility.rejudges.map((j) => j.position)).toEqual([100, 101, 102]);
    expect(r.reproducibility.latest).toMatchObject({ position: 101, verdict: 'reproduced', delta: 0 });
    expect(runReport(slotOf(noValidRun('r-none')), [], 'no_valid_submission').reproducibility).toEqual({ recorded: null, rejudges: [], latest: null });
  });

  it('reports each budget: allowed, used, remaining, fraction; no limit is null, never a negative remainder', () => {
    const b = budgetReport(slotOf(a).state);
    const byKind = Object.fromEntries(b.kinds.map((k) => [k.kind, k]));
    expect(byKind.submissions).toMatchObject({ allowed: 4 });
    expect(byKind.submissions!.remaining).toBe(4 - byKind.submissions!.used);
    expect(byKind.submissions!.fraction).toBeCloseTo(byKind.submissions!.used / 4, 12);
    expect(byKind.gpu_seconds).toMatchObject({ allowed: null, remaining: null, fraction: null });
    expect(b.overBudget).toBeNull();
    const over = { ...slotOf(a).state, consumed: { ...slotOf(a).state.consumed, submissions: 9 } };
    expect(budgetReport(over).kinds[0]).toMatchObject({ used: 9, remaining: 0, fraction: 9 / 4 });
  });

  it("sums a task's runs; a kind without a limit in any run stays unlimited", () => {
    const t = taskBudgetReport('tiny-optimizer', [slotOf(a), slotOf(sampleVariant({ run: 'r-b' }))]);
    const one = budgetReport(slotOf(a).state);
    expect(t.runs).toBe(2);
    expect(t.kinds[0]).toMatchObject({ kind: 'submissions', allowed: 8, used: 2 * one.kinds[0]!.used });
    expect(t.kinds[3]).toMatchObject({ kind: 'gpu_seconds', allowed: null });
    expect(taskBudgetReport('none', [])).toMatchObject({ runs: 0, refundedRounds: 0 });
  });
});

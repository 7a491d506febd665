/**
 * The baselines projection: a task's BaselineRecorded events (`assay baseline`, in the stream `baseline-<task>`),
 * parsed into the run lib's Baseline. A leaderboard shows each protocol group's latest `start` and `oracle`
 * baselines and compares every run of the group with the `start` one under the run lib's rule
 * (`compareWithBaseline`: at least 3 completed repeats, and the score outside their [min, max]), so the page, the
 * CLI's `--json` and `assay run status` say the same thing.
 */
import { BASELINE_EVENT_TYPE, baselineStream, parseBaseline, type Baseline, type JsonObject } from '@assay/run';
import type { ProjectionEvent } from './run-projection';

/** The baseline an event records, or null (another type, another stream, or data that does not parse). */
export function baselineOfEvent(e: Pick<ProjectionEvent, 'position' | 'stream' | 'type' | 'time' | 'data'>): Baseline | null {
  if (e.type !== BASELINE_EVENT_TYPE) return null;
  const b = parseBaseline(e.data as JsonObject, { position: e.position, time: e.time });
  return b !== null && e.stream === baselineStream(b.task) ? b : null;
}

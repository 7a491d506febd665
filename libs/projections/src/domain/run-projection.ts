/**
 * The runs projection: `(slot, event) -> slot`, one slot per run, folded with the run aggregate's own `evolve`
 * (@assay/run), so the read side applies exactly the rules the run controller and `assay ledger verify` apply.
 * Events are data (position, stream, type, time, data). Routing follows `readRunHistories`: a run's own stream
 * (`run-<id>`), and Judge events (judge streams, Judge event types) that name a run already started.
 */
import { evolve, initialRunState, isJudgeStream, JUDGE_EVENT_TYPES, type RunEventRecord, type RunState } from '@assay/run';

/** An event as the projections read it: the parsed envelope's fields they need. */
export type ProjectionEvent = RunEventRecord;

export interface RunSlot {
  readonly run: string;
  readonly state: RunState;
  /**
   * Set when an event broke the run's invariants (`evolve` threw): the run is frozen at the state before it and
   * reported with status `invalid`. Cannot happen on a ledger `assay ledger verify` accepts (its claims step folds
   * the same way); kept so that a projection never throws on data.
   */
  readonly error: string | null;
}

/** The run an event is about, or null when the runs projection ignores it. */
export function runOfEvent(e: Pick<ProjectionEvent, 'stream' | 'type' | 'data'>): string | null {
  if (e.stream.startsWith('run-')) return e.stream.slice(4);
  if (isJudgeStream(e.stream) && (JUDGE_EVENT_TYPES as readonly string[]).includes(e.type)) {
    const run = e.data.run;
    return typeof run === 'string' ? run : null;
  }
  return null;
}

/**
 * Folds one event into its run's slot. `slot` is the run's current slot (null: none yet). Returns the new slot, or
 * the same one when the event changes nothing. A Judge event about a run with no slot is ignored (as the run fold
 * does: it comes after its run's RunStarted).
 */
export function projectRunEvent(slot: RunSlot | null, e: ProjectionEvent): RunSlot | null {
  const run = runOfEvent(e);
  if (run === null) return slot;
  if (slot === null) {
    if (!e.stream.startsWith('run-')) return null;
    slot = { run, state: initialRunState(run), error: null };
  }
  if (slot.error !== null) return slot;
  try {
    return { run, state: evolve(slot.state, e), error: null };
  } catch (err) {
    return { run, state: slot.state, error: `position ${e.position} (${e.type}): ${(err as Error).message}` };
  }
}

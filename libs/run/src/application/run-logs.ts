/**
 * The digests of a run's logs in the ledger (`assay run logs`): the agent's transcript of each controller session,
 * `AgentTranscriptRecorded` in the stream `transcript-<run>` (written by the run controller when a session ends, or by
 * the next controller of the run for a session whose controller was killed), and each round's Judge log,
 * `JudgeCompleted.outputDigest` in the Judge's stream. A file under the run directory is the one the ledger recorded
 * when its SHA-256 equals the recorded digest.
 *
 * The transcript digests live in a stream of their own, not in `run-<id>`: a transcript ends after the run's
 * RunCompleted when the run ends itself (the refund cap, the budget), and nothing follows RunCompleted in a run stream.
 */
import type { Ledger } from '@assay/ledger';
import { isJudgeStream, recordOf } from '../domain/run-events';

export const TRANSCRIPT_STREAM_CATEGORY = 'transcript';
export const transcriptStream = (run: string): string => `${TRANSCRIPT_STREAM_CATEGORY}-${run}`;

/** One session's transcript as the controller kept it. */
export interface TranscriptFacts {
  readonly session: number;
  /** `sha256:<hex>` of the file's bytes. */
  readonly digest: string;
  readonly bytes: number;
  readonly dropped: number;
  /** Recorded by a later controller (the session's own controller ended without recording it). */
  readonly recovered: boolean;
}

/** A digest the ledger holds for one log file, and where. */
export interface RecordedLogDigest {
  readonly digest: string;
  readonly position: number;
}

/** The agent transcripts' digests recorded for a run, by session number. */
export async function recordedTranscripts(ledger: Ledger, run: string): Promise<Map<number, RecordedLogDigest & { recovered: boolean }>> {
  const out = new Map<number, RecordedLogDigest & { recovered: boolean }>();
  for await (const e of ledger.store.readStream(transcriptStream(run))) {
    if (e.type !== 'AgentTranscriptRecorded') continue;
    const d = recordOf(e).data as { run?: unknown; session?: unknown; digest?: unknown; recovered?: unknown };
    if (d.run !== run || typeof d.session !== 'number' || typeof d.digest !== 'string' || out.has(d.session)) continue;
    out.set(d.session, { digest: d.digest, position: e.position, recovered: d.recovered === true });
  }
  return out;
}

/**
 * Records the sessions that have no AgentTranscriptRecorded yet (a session already recorded is never recorded
 * again, so a second call is harmless). Returns what it appended.
 */
export async function recordTranscripts(ledger: Ledger, run: string, sessions: readonly TranscriptFacts[]): Promise<TranscriptFacts[]> {
  const have = await recordedTranscripts(ledger, run);
  const todo = sessions.filter((s) => !have.has(s.session)).sort((a, b) => a.session - b.session);
  if (todo.length === 0) return [];
  await ledger.append(
    transcriptStream(run),
    todo.map((s) => ({
      type: 'AgentTranscriptRecorded',
      data: { run, session: s.session, digest: s.digest, bytes: s.bytes, dropped: s.dropped, recovered: s.recovered },
    })),
    'any',
  );
  return todo;
}

/**
 * Each round's Judge log digest, from the run's JudgeCompleted events (the last one of a round, when a refunded round
 * was judged again). Scans the log from the run's first event.
 */
export async function recordedJudgeLogs(ledger: Ledger, run: string): Promise<Map<number, RecordedLogDigest>> {
  const out = new Map<number, RecordedLogDigest>();
  let first: number | null = null;
  for await (const e of ledger.store.readStream(`run-${run}`, { maxCount: 1 })) first = e.position;
  if (first === null) return out;
  for await (const batch of ledger.store.readAll({ fromPosition: first, batchSize: 1000 })) {
    for (const e of batch) {
      if (e.type !== 'JudgeCompleted' || !isJudgeStream(e.stream)) continue;
      const d = recordOf(e).data as { run?: unknown; round?: unknown; outputDigest?: unknown };
      if (d.run === run && typeof d.round === 'number' && typeof d.outputDigest === 'string')
        out.set(d.round, { digest: d.outputDigest, position: e.position });
    }
  }
  return out;
}

/** Whether a file's digest is the recorded one: `recorded`, `differs`, or `unrecorded` (no digest in the ledger). */
export type LogDigestCheck = 'recorded' | 'differs' | 'unrecorded';

export function checkLogDigest(fileDigest: string, recorded: RecordedLogDigest | undefined): LogDigestCheck {
  if (!recorded) return 'unrecorded';
  return recorded.digest === fileDigest ? 'recorded' : 'differs';
}

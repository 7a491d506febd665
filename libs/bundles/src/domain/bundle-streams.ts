/**
 * Which streams a run's bundle carries, whole (from revision 0): every `key-` stream (who may sign what, at which
 * position), the run's own `run-<id>`, every Judge stream whose first event names the run (`judge-<id>`, its
 * JudgeLaunched), the run's `transcript-<id>` and its `redaction-<id>` (LogRedacted, when logs were published redacted). A verifier checks each carried stream is complete up to its last
 * carried revision (no gap, the `prev` chain unbroken), and the run stream up to RunCompleted.
 */
export interface StreamChoice {
  /** Whether an event (in position order) belongs to the bundle; remembers the streams it has taken. */
  accepts(e: { readonly stream: string; readonly revision: number; readonly data: Readonly<Record<string, unknown>> }): boolean;
  readonly seen: ReadonlySet<string>;
}

export function bundleStreamsOf(run: string): StreamChoice {
  const seen = new Set<string>();
  const judges = new Set<string>();
  return {
    seen,
    accepts(e) {
      let ok = false;
      if (e.stream.startsWith('key-') || e.stream === `run-${run}` || e.stream === `transcript-${run}` || e.stream === `redaction-${run}`) ok = true;
      else if (e.stream.startsWith('judge-')) {
        if (e.revision === 0 && e.data.run === run) judges.add(e.stream);
        ok = judges.has(e.stream);
      }
      if (ok) seen.add(e.stream);
      return ok;
    },
  };
}

/**
 * Which streams a re-judge report's bundle carries, whole: every `key-` stream of the rejudger's ledger and the
 * report's own `rejudge-<id>`.
 */
export function rejudgeBundleStreamsOf(id: string): StreamChoice {
  const seen = new Set<string>();
  return {
    seen,
    accepts(e) {
      const ok = e.stream.startsWith('key-') || e.stream === `rejudge-${id}`;
      if (ok) seen.add(e.stream);
      return ok;
    },
  };
}

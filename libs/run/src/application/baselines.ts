/**
 * Read side of matched baselines: every BaselineRecorded of a ledger (`assay baseline ls`, `assay run status`), in
 * log order. The comparison rule itself is pure (domain/baseline.ts).
 */
import type { Ledger } from '@assay/ledger';
import { recordOf } from '../domain/run-events';
import { BASELINE_EVENT_TYPE, parseBaseline, type Baseline } from '../domain/baseline';
import type { JsonObject } from '../domain/run-events';

/** Every recorded baseline, in log order (one scan of the log; events whose data does not parse are left out). */
export async function readBaselines(ledger: Ledger): Promise<Baseline[]> {
  const out: Baseline[] = [];
  for await (const batch of ledger.store.readAll({ fromPosition: 0, batchSize: 1000 })) {
    for (const e of batch) {
      if (e.type !== BASELINE_EVENT_TYPE || !e.stream.startsWith('baseline-')) continue;
      const rec = recordOf(e);
      const b = parseBaseline(rec.data as JsonObject, { position: rec.position, time: rec.time });
      if (b) out.push(b);
    }
  }
  return out;
}

/**
 * Child process of the crash-safety test (ledger-crash.int.spec.ts), killed with SIGKILL at random moments:
 *   node -r ./tests/support/ts-register.js tests/crash/crash-writer.ts <ASSAY_HOME> <firstBatch> [endBatch|-] [window] [ackDelayMs]
 *
 * It writes through the real signing Ledger of an initialised ASSAY_HOME, and signs a checkpoint after every
 * CHECKPOINT_EVERY acknowledged batches, so kills also land inside checkpoint signing.
 *
 * Appends batch after batch from <firstBatch> (up to, not including, <endBatch> if given), each batch one append
 * call of EVENTS_PER_BATCH events with ids derived from the batch number, to stream crash-s<batch % STREAMS>,
 * with the expected revision that batch must find, so that a retry of a batch is the very same request. Keeps
 * [window] appends in flight (default 4; they share group commits) and waits [ackDelayMs] (default 1) between a
 * commit and its acknowledgement. Prints `READY` once the database is open, `ACK <batch>`
 * after each append resolves (in batch order) and `DONE` at the end.
 */
import { randomIds, systemClock } from '@assay/core';
import { LedgerHome, type ExpectedRevision, type NewEvent } from '@assay/ledger';
import { uuidFrom } from '../support/ledger-fixtures';

export const EVENTS_PER_BATCH = 5;
export const STREAMS = 3;
export const CHECKPOINT_EVERY = 7;

export function streamOf(batch: number): string {
  return `crash-s${batch % STREAMS}`;
}

/** Batches before this one in the same stream fix where it goes. */
export function expectedRevisionOf(batch: number): ExpectedRevision {
  const before = Math.floor(batch / STREAMS);
  return before === 0 ? 'no_stream' : before * EVENTS_PER_BATCH - 1;
}

export function eventId(batch: number, i: number): string {
  return uuidFrom(`crash/${batch}/${i}`);
}

export function eventText(batch: number, i: number): string {
  return `batch ${batch} event ${i}`;
}

export function batchEvents(batch: number): NewEvent[] {
  return Array.from({ length: EVENTS_PER_BATCH }, (_, i) => ({ id: eventId(batch, i), type: 'Note', data: { text: eventText(batch, i) } }));
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function main(): Promise<void> {
  const [file, firstArg, endArg, windowArg, delayArg] = process.argv.slice(2);
  if (!file || firstArg === undefined) throw new Error('usage: crash-writer.ts <ASSAY_HOME> <firstBatch> [endBatch|-] [window] [ackDelayMs]');
  const first = Number(firstArg);
  const end = endArg === undefined || endArg === '-' ? Number.POSITIVE_INFINITY : Number(endArg);
  const window = Math.max(1, Number(windowArg ?? '4'));
  const ackDelayMs = Number(delayArg ?? '1');
  const home = new LedgerHome(file, { clock: systemClock, ids: randomIds });
  process.stdout.write('READY\n');
  const inFlight: Array<Promise<unknown>> = [];
  let next = first;
  for (let acked = first; acked < end; acked++) {
    while (next < end && inFlight.length < window) {
      const b = next++;
      inFlight.push(home.ledger.append(streamOf(b), batchEvents(b), expectedRevisionOf(b)));
    }
    await inFlight.shift();
    // A moment between the commit and the acknowledgement, as a client would see over a network: a kill here
    // leaves a committed batch unacknowledged, whose retry must then be idempotent.
    if (ackDelayMs > 0) await sleep(ackDelayMs);
    process.stdout.write(`ACK ${acked}\n`);
    if ((acked + 1) % CHECKPOINT_EVERY === 0) await home.ledger.checkpoint();
  }
  await home.close();
  process.stdout.write('DONE\n');
}

if (require.main === module) {
  main().catch((e: unknown) => {
    process.stderr.write(`${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exit(1);
  });
}

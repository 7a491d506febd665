/**
 * A second process writing a SQLite ledger, for multi-process tests:
 *   node -r ./tests/support/ts-register.js tests/support/sqlite-writer-child.ts <db> <label> <appends> [streams] [wait]
 * Appends `appends` times (one at a time, expected revision any) 1-3 events with ids derived from the label to
 * `streams` streams named run-<label>-<k>, then prints `DONE <events>`. With `wait`, it prints READY once the
 * database is open and starts writing only when a line arrives on stdin.
 */
import { SqliteLedgerDatabase } from '../../libs/ledger/src/adapters/sqlite/sqlite-ledger-database';
import { proposedMany, zeroSigSeal } from './ledger-fixtures';

async function main(): Promise<void> {
  const [file, label, appendsArg, streamsArg, wait] = process.argv.slice(2);
  if (!file || !label || !appendsArg) throw new Error('usage: sqlite-writer-child.ts <db> <label> <appends> [streams]');
  const appends = Number(appendsArg);
  const streams = Number(streamsArg ?? '3');
  const db = new SqliteLedgerDatabase(file, { busyTimeoutMs: 30_000 });
  process.stdout.write('READY\n');
  if (wait === 'wait') await new Promise<void>((resolve) => process.stdin.once('data', () => resolve()));
  let events = 0;
  for (let i = 0; i < appends; i++) {
    const n = 1 + (i % 3);
    await db.events.append({
      stream: `run-${label}-${i % streams}`,
      expected: 'any',
      events: proposedMany(`${label}/${i}`, n),
      seal: zeroSigSeal,
    });
    events += n;
    // now and then leave the write lock free for a moment, so that two writers interleave
    if (i % 10 === 9) await new Promise((resolve) => setTimeout(resolve, 1));
  }
  await db.close();
  process.stdout.write(`DONE ${events}\n`);
}

main().catch((e: unknown) => {
  process.stderr.write(`${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  process.exit(1);
});

/**
 * Child process for the resume test: catches the read models of HOME up into DB in batches of BATCH events,
 * printing `batch <position>` after each committed batch and sleeping DELAY_MS, so the parent can SIGKILL it
 * mid-way. Usage: projector-child.ts HOME DB BATCH DELAY_MS
 */
import { randomIds, systemClock } from '@assay/core';
import { LedgerHome } from '@assay/ledger';
import { catchUp, SqliteReadModelStore } from '@assay/projections';

async function main(): Promise<void> {
  const [home, db, batch, delay] = process.argv.slice(2);
  const h = new LedgerHome(home!, { clock: systemClock, ids: randomIds, readOnly: true });
  const store = new SqliteReadModelStore(db!);
  await catchUp(h, store, {
    batchSize: Number(batch),
    workers: 0,
    afterBatch: async (position) => {
      process.stdout.write(`batch ${position}\n`);
      await new Promise((r) => setTimeout(r, Number(delay)));
    },
  });
  store.close();
  await h.close();
  process.stdout.write('done\n');
}

main().catch((e: unknown) => {
  process.stderr.write(`${(e as Error).stack ?? String(e)}\n`);
  process.exit(1);
});

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock, SequentialIds } from '@assay/core';
import { LedgerHome } from '@assay/ledger';
import { LedgerRunLedger } from '@assay/run';
import { runLedgerContract } from './run-ledger.contract';

runLedgerContract('LedgerRunLedger over SQLite (LedgerHome)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'assay-run-ledger-'));
  const deps = { clock: new ManualClock('2026-03-01T10:00:00.000Z', 1), ids: new SequentialIds('00000000-0000-4000-b000') };
  await LedgerHome.init(dir, { ...deps, origin: 'assay.test/run' });
  const home = await LedgerHome.open(dir, deps);
  const l = new LedgerRunLedger(home.ledger);
  return {
    ledger: l,
    appendTo: (s, e, x) => l.appendTo(s, e, x),
    close: async () => {
      const report = await home.verify();
      await home.close();
      rmSync(dir, { recursive: true, force: true });
      if (!report.ok) throw new Error(`the ledger does not verify: ${JSON.stringify(report).slice(0, 500)}`);
    },
  };
});

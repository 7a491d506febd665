import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock, SequentialIds } from '@assay/core';
import { LedgerHome, initLedgerHome } from '@assay/ledger';
import { LedgerRunLedger, runClaimRules } from '@assay/run';
import { runLedgerContract } from './run-ledger.contract';

runLedgerContract('LedgerRunLedger over SQLite (LedgerHome)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'assay-run-ledger-'));
  const deps = { clock: new ManualClock('2026-03-01T10:00:00.000Z', 1), ids: new SequentialIds('00000000-0000-4000-b000') };
  await initLedgerHome(dir, { ...deps, origin: 'assay.test/run' });
  const home = new LedgerHome(dir, deps);
  const l = new LedgerRunLedger(home.ledger);
  return {
    ledger: l,
    appendTo: (s, e, x) => l.appendTo(s, e, x),
    close: async () => {
      // The contract writes what the store's semantics need (revisions, ids, order), not runs a controller would
      // write (RunStarted with an empty protocol, rounds without snapshots): every step up to the claims must pass,
      // and the claims step may only find those (run-claims.unit.spec.ts covers the claims of genuine runs).
      const report = await home.verify({ claims: runClaimRules() });
      await home.close();
      rmSync(dir, { recursive: true, force: true });
      if (!report.ok && report.failure?.step !== 'claims') throw new Error(`the ledger does not verify: ${JSON.stringify(report).slice(0, 500)}`);
    },
  };
});

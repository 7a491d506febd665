import { ManualClock, SequentialIds } from '@assay/core';
import { generateKeyPair, Ledger, MemoryCheckpointStore, MemoryEventStore, MemoryMerkleNodeStore, toSigningKey } from '@assay/ledger';
import { LedgerRunLedger, MemoryRunLedger } from '@assay/run';
import { runLedgerContract } from './run-ledger.contract';

runLedgerContract('MemoryRunLedger', async () => {
  const l = new MemoryRunLedger(new ManualClock('2026-03-01T10:00:00.000Z'));
  return { ledger: l, appendTo: (s, e, x) => l.appendTo(s, e, x), close: async () => {} };
});

const keys = (['controller', 'runtime', 'judge'] as const).map((r) => toSigningKey(generateKeyPair(r)));
runLedgerContract('LedgerRunLedger over memory stores', async () => {
  const ledger = new Ledger({
    store: new MemoryEventStore(),
    merkle: new MemoryMerkleNodeStore(),
    checkpoints: new MemoryCheckpointStore(),
    keys,
    clock: new ManualClock('2026-03-01T10:00:00.000Z'),
    ids: new SequentialIds(),
    origin: 'assay.test/run',
  });
  const l = new LedgerRunLedger(ledger);
  return { ledger: l, appendTo: (s, e, x) => l.appendTo(s, e, x), close: async () => {} };
});

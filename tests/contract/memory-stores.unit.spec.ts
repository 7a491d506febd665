import { MemoryCheckpointStore } from '../../libs/ledger/src/adapters/memory/memory-checkpoint-store.adapter';
import { MemoryMerkleNodeStore } from '../../libs/ledger/src/adapters/memory/memory-merkle-node-store.adapter';
import { checkpointStoreContract } from './checkpoint-store.contract';
import { merkleNodeStoreContract } from './merkle-node-store.contract';
import { MemoryEventStore } from '../../libs/ledger/src/adapters/memory/memory-event-store.adapter';
import { MemoryLedgerLock } from '../../libs/ledger/src/adapters/memory/memory-ledger-lock.adapter';
import { ledgerLockContract } from './ledger-lock.contract';

checkpointStoreContract('memory', async () => ({ store: new MemoryCheckpointStore(), cleanup: async () => undefined }));
merkleNodeStoreContract('memory', async () => ({ store: new MemoryMerkleNodeStore(), cleanup: async () => undefined }));

ledgerLockContract('memory', async () => {
  const events = new MemoryEventStore();
  const merkle = new MemoryMerkleNodeStore();
  const checkpoints = new MemoryCheckpointStore();
  return { lock: new MemoryLedgerLock(events, [merkle, checkpoints]), events, merkle, checkpoints, cleanup: () => events.close() };
});

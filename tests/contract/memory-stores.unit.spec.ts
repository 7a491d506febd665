import { MemoryCheckpointStore } from '../../libs/ledger/src/adapters/memory/memory-checkpoint-store.adapter';
import { MemoryMerkleNodeStore } from '../../libs/ledger/src/adapters/memory/memory-merkle-node-store.adapter';
import { checkpointStoreContract } from './checkpoint-store.contract';
import { merkleNodeStoreContract } from './merkle-node-store.contract';

checkpointStoreContract('memory', async () => ({ store: new MemoryCheckpointStore(), cleanup: async () => undefined }));
merkleNodeStoreContract('memory', async () => ({ store: new MemoryMerkleNodeStore(), cleanup: async () => undefined }));

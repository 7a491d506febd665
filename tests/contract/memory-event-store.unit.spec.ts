import { MemoryEventStore } from '../../libs/ledger/src/adapters/memory/memory-event-store.adapter';
import { eventStoreContract } from './event-store.contract';

eventStoreContract('memory', async () => {
  const store = new MemoryEventStore();
  return { store, cleanup: () => store.close() };
});

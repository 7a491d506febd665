import { join } from 'node:path';
import { SqliteLedgerDatabase } from '../../libs/ledger/src/adapters/sqlite/sqlite-ledger-database';
import { makeTmpDir } from '../support/ledger-fixtures';
import { eventStoreContract } from './event-store.contract';

eventStoreContract('sqlite', async () => {
  const tmp = makeTmpDir();
  const db = new SqliteLedgerDatabase(join(tmp.dir, 'ledger.db'));
  return {
    store: db.events,
    cleanup: async () => {
      await db.close();
      tmp.cleanup();
    },
  };
});

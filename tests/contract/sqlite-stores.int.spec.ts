import { join } from 'node:path';
import { SqliteLedgerDatabase } from '../../libs/ledger/src/adapters/sqlite/sqlite-ledger-database';
import { makeTmpDir } from '../support/ledger-fixtures';
import { checkpointStoreContract } from './checkpoint-store.contract';
import { merkleNodeStoreContract } from './merkle-node-store.contract';
import { ledgerLockContract } from './ledger-lock.contract';

/** A ledger database in a fresh directory, reopenable on the same file. */
function opened<T>(pick: (db: SqliteLedgerDatabase) => T) {
  return async () => {
    const tmp = makeTmpDir();
    const file = join(tmp.dir, 'ledger.db');
    let db = new SqliteLedgerDatabase(file);
    return {
      store: pick(db),
      reopen: async () => {
        await db.close();
        db = new SqliteLedgerDatabase(file);
        return pick(db);
      },
      cleanup: async () => {
        await db.close();
        tmp.cleanup();
      },
    };
  };
}

checkpointStoreContract(
  'sqlite',
  opened((db) => db.checkpoints),
);
merkleNodeStoreContract(
  'sqlite',
  opened((db) => db.merkleNodes),
);

ledgerLockContract('sqlite', async () => {
  const tmp = makeTmpDir();
  const db = new SqliteLedgerDatabase(join(tmp.dir, 'ledger.db'));
  return {
    lock: db.lock,
    events: db.events,
    merkle: db.merkleNodes,
    checkpoints: db.checkpoints,
    cleanup: async () => {
      await db.close();
      tmp.cleanup();
    },
  };
});

/**
 * LedgerHome.head(): the ledger's size and latest committed checkpoint, what the API's /health, /ledger/live and
 * metrics report and a run's live checkpoints compare, over a real SQLite home.
 */
import { ManualClock, SequentialIds } from '@assay/core';
import { LedgerHome, initLedgerHome } from '@assay/ledger';
import { makeTmpDir } from '../support/ledger-fixtures';

describe('LedgerHome.head()', () => {
  let tmp: { dir: string; cleanup(): void };
  beforeEach(() => {
    tmp = makeTmpDir('assay-head-');
  });
  afterEach(() => tmp.cleanup());

  it('counts the events and names the latest committed checkpoint, which never covers more than the events', async () => {
    const clock = new ManualClock('2026-12-06T06:00:00.000Z');
    await initLedgerHome(tmp.dir, { clock, ids: new SequentialIds(), origin: 'assay.test/head' });
    const home = new LedgerHome(tmp.dir, { clock, ids: new SequentialIds('55555555-0000-4000-8000') });
    try {
      const before = await home.head();
      expect(before.events).toBeGreaterThan(0); // genesis and the registered keys
      const signedAtInit = home.committedCheckpoint();
      expect(before.checkpoint).toEqual(signedAtInit ? { treeSize: signedAtInit.treeSize, rootHash: signedAtInit.rootHash } : null);

      await home.ledger.appendGeneric('note-head', [{ type: 'Note', data: { text: 'one more' } }]);
      const grown = await home.head();
      expect(grown.events).toBe(before.events + 1);
      expect(grown.checkpoint).toEqual(before.checkpoint); // appending signs nothing

      const signed = await home.ledger.checkpoint();
      const after = await home.head();
      expect(after).toEqual({ events: grown.events, checkpoint: { treeSize: grown.events, rootHash: signed.rootHash } });
      expect(after.checkpoint?.rootHash).toMatch(/^[A-Za-z0-9+/]{43}=$/);
    } finally {
      await home.close();
    }
  });
});

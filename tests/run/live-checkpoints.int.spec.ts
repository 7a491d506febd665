/**
 * Checkpoints signed while a run goes on (libs/runtime startLiveCheckpoints): one when the log grew, none when it did
 * not, a failure logged once and tried again, and stop() waiting for a signing under way.
 */
import { join } from 'node:path';
import { LedgerHome } from '@assay/ledger';
import { startLiveCheckpoints } from '../../libs/runtime/src/run-runtime';
import { makeTmpDir } from '../support/ledger-fixtures';
import { deps } from '../support/ledger-home-fixtures';

jest.setTimeout(60_000);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('live checkpoints during a run', () => {
  let tmp: { dir: string; cleanup(): void };
  let home: LedgerHome;
  beforeAll(async () => {
    tmp = makeTmpDir('assay-live-cp-');
    await LedgerHome.init(join(tmp.dir, 'home'), { ...deps(), origin: 'assay.test/live' });
    home = await LedgerHome.open(join(tmp.dir, 'home'), deps());
  });
  afterAll(async () => {
    await home.close();
    tmp.cleanup();
  });

  it('signs a checkpoint after the log grows, and none while it does not', async () => {
    const lines: string[] = [];
    const live = startLiveCheckpoints(home, 50, (l) => lines.push(l));
    try {
      await home.ledger.append('note-1', [{ type: 'Note', data: { text: 'one' } }]);
      await sleep(300);
      const size = await home.db.events.size();
      expect(home.db.checkpoints.latest()?.treeSize).toBe(size);
      const count = home.db.checkpoints.all().length;
      await sleep(300);
      expect(home.db.checkpoints.all().length).toBe(count);
      await home.ledger.append('note-1', [{ type: 'Note', data: { text: 'two' } }]);
      await sleep(300);
      expect(home.db.checkpoints.latest()?.treeSize).toBe(size + 1);
      expect(home.db.checkpoints.all().length).toBe(count + 1);
    } finally {
      await live.stop();
    }
    expect(lines).toEqual([]);
  });

  it('logs a failure once, tries again, and is off with an interval of 0', async () => {
    const lines: string[] = [];
    let calls = 0;
    const failing = {
      db: { events: { size: async () => 5 }, checkpoints: { latest: () => null } },
      ledger: {
        checkpoint: async () => {
          calls++;
          throw new Error('database is locked');
        },
      },
    };
    const live = startLiveCheckpoints(failing, 20, (l) => lines.push(l));
    await sleep(200);
    await live.stop();
    expect(calls).toBeGreaterThan(2);
    expect(lines).toEqual(['a live checkpoint was not signed (tried again in 0 s): database is locked']);
    const off = startLiveCheckpoints(failing, 0, (l) => lines.push(l));
    const before = calls;
    await sleep(60);
    await off.stop();
    expect(calls).toBe(before);
  });
});

/**
 * Checkpoints signed while a run goes on (libs/runtime startLiveCheckpoints): one when the log grew, none when it did
 * not, a failure logged once and tried again, one signing at a time, and stop() waiting for a signing under way.
 * The ticks are fired by the test (an injected ticker), so no assertion rests on how soon a loaded machine runs a
 * timer; one test checks that the default interval fires at all, waiting for it without a fixed window.
 */
import { join } from 'node:path';
import { LedgerHome, initLedgerHome } from '@assay/ledger';
import { startLiveCheckpoints, type Ticker } from '../../libs/runtime/src/run-runtime';
import { makeTmpDir, waitFor } from '../support/ledger-fixtures';
import { deps } from '../support/ledger-home-fixtures';

jest.setTimeout(60_000);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('live checkpoints during a run', () => {
  let tmp: { dir: string; cleanup(): void };
  let home: LedgerHome;
  beforeAll(async () => {
    tmp = makeTmpDir('assay-live-cp-');
    await initLedgerHome(join(tmp.dir, 'home'), { ...deps(), origin: 'assay.test/live' });
    home = new LedgerHome(join(tmp.dir, 'home'), deps());
  });
  afterAll(async () => {
    await home.close();
    tmp.cleanup();
  });

  it('signs a checkpoint after the log grows, and none while it does not', async () => {
    const lines: string[] = [];
    const ticks = manualTicker();
    const live = startLiveCheckpoints(home, 50, (l) => lines.push(l), ticks.ticker);
    try {
      expect(ticks.intervalMs).toBe(50);
      await home.ledger.append('note-1', [{ type: 'Note', data: { text: 'one' } }]);
      await ticks.fire();
      const size = await home.db.events.size();
      expect(home.db.checkpoints.latest()?.treeSize).toBe(size);
      const count = home.db.checkpoints.all().length;
      await ticks.fire();
      await ticks.fire();
      expect(home.db.checkpoints.all().length).toBe(count);
      await home.ledger.append('note-1', [{ type: 'Note', data: { text: 'two' } }]);
      await ticks.fire();
      expect(home.db.checkpoints.latest()?.treeSize).toBe(size + 1);
      expect(home.db.checkpoints.all().length).toBe(count + 1);
    } finally {
      await live.stop();
    }
    expect(ticks.cancelled).toBe(true);
    expect(lines).toEqual([]);
  });

  it('signs on the default interval without being driven', async () => {
    const live = startLiveCheckpoints(home, 20, () => undefined);
    try {
      await home.ledger.append('note-1', [{ type: 'Note', data: { text: 'three' } }]);
      const size = await home.db.events.size();
      // however late a loaded machine runs the interval, it runs: wait for it rather than for a fixed time
      await waitFor(() => (home.db.checkpoints.latest()?.treeSize ?? 0) >= size, 30_000, 'a checkpoint signed on the interval');
      expect(home.db.checkpoints.latest()?.treeSize).toBe(size);
    } finally {
      await live.stop();
    }
  });

  it('logs a failure once, tries again at each tick, and is off with an interval of 0', async () => {
    const lines: string[] = [];
    let calls = 0;
    const failing = {
      head: async () => ({ events: 5, checkpoint: null }),
      ledger: {
        checkpoint: async () => {
          calls++;
          throw new Error('database is locked');
        },
      },
    };
    const ticks = manualTicker();
    const live = startLiveCheckpoints(failing, 20, (l) => lines.push(l), ticks.ticker);
    await ticks.fire();
    await ticks.fire();
    await ticks.fire();
    await live.stop();
    expect(calls).toBe(3);
    expect(lines).toEqual(['a live checkpoint was not signed (tried again in 0 s): database is locked']);
    const offTicks = manualTicker();
    const off = startLiveCheckpoints(failing, 0, (l) => lines.push(l), offTicks.ticker);
    await off.stop();
    expect(offTicks.started).toBe(false);
    expect(calls).toBe(3);
  });

  it('one signing at a time: a tick while one is under way waits for it and signs nothing more', async () => {
    let calls = 0;
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const slow = {
      head: async () => ({ events: 5, checkpoint: null }),
      ledger: {
        checkpoint: async () => {
          calls++;
          await held;
        },
      },
    };
    const ticks = manualTicker();
    const live = startLiveCheckpoints(slow, 20, () => undefined, ticks.ticker);
    const first = ticks.fire();
    const second = ticks.fire();
    const stopped = live.stop();
    let stoppedYet = false;
    void stopped.then(() => (stoppedYet = true));
    await sleep(20);
    expect(stoppedYet).toBe(false);
    release();
    await Promise.all([first, second, stopped]);
    expect(calls).toBe(1);
  });
});

/** A ticker the test fires by hand; each fire resolves when that tick's signing (if any) has settled. */
function manualTicker() {
  let tick: (() => Promise<void>) | null = null;
  const state = {
    started: false,
    cancelled: false,
    intervalMs: 0,
    ticker: ((t: () => Promise<void>, intervalMs: number) => {
      tick = t;
      state.started = true;
      state.intervalMs = intervalMs;
      return () => {
        state.cancelled = true;
      };
    }) as Ticker,
    fire: (): Promise<void> => {
      if (!tick) throw new Error('the ticker was not started');
      return tick();
    },
  };
  return state;
}

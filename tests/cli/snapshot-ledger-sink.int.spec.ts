/**
 * The CLI's snapshot application (apps/cli/src/snapshot-ledger-sink.ts): SnapshotsModule with LedgerModule imported
 * and the ledger's sink bound. A snapshot is recorded as SnapshotTaken (and a second one of the same label as
 * WorkspaceEdited) through the module's one LedgerHomeProvider, stamped with the module's clock and ids; without a
 * ledger the snapshot is still taken and one notice says nothing was recorded.
 */
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NestFactory } from '@nestjs/core';
import { CommandBus } from '@nestjs/cqrs';
import type { DynamicModule } from '@nestjs/common';
import { ManualClock, SequentialIds } from '@assay/core';
import { LedgerHome, initLedgerHome } from '@assay/ledger';
import { CreateSnapshotCommand, type SnapshotResult } from '@assay/snapshots';
import { SNAPSHOT_STREAM, snapshotsRecordedInLedger } from '../../apps/cli/src/snapshot-ledger-sink';

const T0 = '2026-06-01T08:00:00.000Z';
const base = mkdtempSync(join(tmpdir(), 'assay-snapshot-sink-'));
afterAll(() => rmSync(base, { recursive: true, force: true }));

async function snapshot(module: DynamicModule, dir: string): Promise<SnapshotResult> {
  const app = await NestFactory.createApplicationContext(module, { logger: false, abortOnError: false });
  try {
    return await app.get(CommandBus).execute(new CreateSnapshotCommand(dir, { label: 'ws', useCache: false }));
  } finally {
    await app.close();
  }
}

describe('the CLI snapshot module with the ledger sink bound', () => {
  it('records SnapshotTaken and WorkspaceEdited with the module clock and ids', async () => {
    const home = join(base, 'home');
    const ws = join(base, 'ws');
    mkdirSync(ws, { recursive: true });
    writeFileSync(join(ws, 'a.txt'), 'one\n');
    await initLedgerHome(home, { clock: new ManualClock(T0), ids: new SequentialIds(), origin: 'assay.test/snapshot-sink' });
    const notices: string[] = [];
    const clock = new ManualClock('2026-06-02T09:30:00.000Z');
    const first = await snapshot(
      snapshotsRecordedInLedger(home, (l) => notices.push(l), { clock, ids: new SequentialIds('11111111-0000-4000-8000') }),
      ws,
    );
    writeFileSync(join(ws, 'b.txt'), 'two\n');
    const second = await snapshot(
      snapshotsRecordedInLedger(home, (l) => notices.push(l), { clock, ids: new SequentialIds('22222222-0000-4000-8000') }),
      ws,
    );
    expect(notices).toEqual([]);

    const lh = new LedgerHome(home, { clock, ids: new SequentialIds() });
    try {
      const events = (await lh.readEvents({ stream: SNAPSHOT_STREAM })).map((e) => e.envelope);
      expect(events.map((e) => e.type)).toEqual(['SnapshotTaken', 'SnapshotTaken', 'WorkspaceEdited']);
      expect(events.map((e) => e.time)).toEqual(Array(3).fill('2026-06-02T09:30:00.000Z'));
      expect(events[0]!.id).toMatch(/^11111111-0000-4000-8000-/);
      expect(events[1]!.id).toMatch(/^22222222-0000-4000-8000-/);
      expect(events[0]!.data).toMatchObject({ root: first.rootCid });
      expect(events[2]!.data).toMatchObject({ from: first.rootCid, to: second.rootCid, added: 1, removed: 0 });
      expect((await lh.verify({ claims: null })).ok).toBe(true);
    } finally {
      await lh.close();
    }
  });

  it('without a ledger: the snapshot is taken, nothing is recorded, one notice names ASSAY_HOME', async () => {
    const home = join(base, 'no-ledger');
    const ws = join(base, 'ws2');
    mkdirSync(ws, { recursive: true });
    writeFileSync(join(ws, 'a.txt'), 'one\n');
    const notices: string[] = [];
    const r = await snapshot(
      snapshotsRecordedInLedger(home, (l) => notices.push(l)),
      ws,
    );
    expect(r.rootCid).toMatch(/^b/);
    expect(notices).toEqual([`assay: note: no ledger in ${home}; SnapshotTaken not recorded (run \`assay ledger init\` to record snapshots)`]);
  });
});

/**
 * The snapshot store as a NestJS module (libs/snapshots/src/nest): every `assay snapshot` verb as a command or query
 * on its buses, against a real store under a temporary ASSAY_HOME, with the module's clock and sink.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NestFactory } from '@nestjs/core';
import { CommandBus, QueryBus } from '@nestjs/cqrs';
import type { INestApplicationContext } from '@nestjs/common';
import { ManualClock } from '@assay/core';
import {
  CheckoutSnapshotCommand,
  CollectSnapshotGarbageCommand,
  CreateSnapshotCommand,
  DiffSnapshotsQuery,
  ExportSnapshotsCommand,
  ImportSnapshotsCommand,
  ListPinsQuery,
  ListSnapshotQuery,
  MemoryEventSink,
  SnapshotsModule,
  UnpinSnapshotCommand,
  VerifySnapshotQuery,
  parseCid,
  type DiffChange,
} from '@assay/snapshots';

const T0 = '2026-06-01T08:00:00.000Z';

async function boot(home: string, sink: MemoryEventSink | null): Promise<INestApplicationContext> {
  return NestFactory.createApplicationContext(SnapshotsModule.forHome(home, { clock: new ManualClock(T0), ...(sink ? { sink: () => sink } : {}) }), {
    logger: false,
    abortOnError: false,
  });
}

describe('SnapshotsModule: the snapshot verbs as commands and queries', () => {
  let dir: string;
  let home: string;
  let app: INestApplicationContext;
  const sink = new MemoryEventSink();

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'assay-snapshot-module-'));
    home = join(dir, 'home');
    mkdirSync(join(dir, 'ws', 'src'), { recursive: true });
    writeFileSync(join(dir, 'ws', 'README'), 'hello\n');
    writeFileSync(join(dir, 'ws', 'src', 'a.py'), 'print(1)\n');
    app = await boot(home, sink);
  });

  afterAll(async () => {
    await app?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a query before anything was snapshotted: SNAPSHOT_STORE_NOT_FOUND naming the directory, and no store created', async () => {
    const fresh = join(dir, 'empty-home');
    const other = await boot(fresh, null);
    try {
      await expect(other.get(QueryBus).execute(new ListPinsQuery())).rejects.toMatchObject({
        code: 'SNAPSHOT_STORE_NOT_FOUND',
        message: expect.stringContaining(join(fresh, 'blobs')),
      });
    } finally {
      await other.close();
    }
    expect(existsSync(join(fresh, 'blobs'))).toBe(false);
  });

  it('create, ls, verify, diff, pins, export, import, checkout, unpin and gc through the buses', async () => {
    const commands = app.get(CommandBus);
    const queries = app.get(QueryBus);
    const first = await commands.execute(new CreateSnapshotCommand(join(dir, 'ws'), { label: 'ws' }));
    expect(first.files).toBe(2);
    // the module's sink got the event, stamped by the module's clock
    expect(sink.events.map((e) => e.type)).toEqual(['SnapshotTaken']);
    expect(JSON.stringify(sink.events[0]!.data)).toContain(first.rootCid);

    writeFileSync(join(dir, 'ws', 'src', 'a.py'), 'print(2)\n');
    const second = await commands.execute(new CreateSnapshotCommand(join(dir, 'ws'), { label: 'ws' }));
    expect(sink.events.map((e) => e.type)).toEqual(['SnapshotTaken', 'SnapshotTaken', 'WorkspaceEdited']);

    const listing = await queries.execute(new ListSnapshotQuery(second.root, 'src'));
    expect(listing.entries.map((e) => e.name)).toEqual(['a.py']);
    const verified = await queries.execute(new VerifySnapshotQuery(second.root));
    expect(verified).toMatchObject({ files: 2, root: second.rootCid });

    const changes: DiffChange[] = [];
    const n = await queries.execute(new DiffSnapshotsQuery(first.root, second.root, (c) => changes.push(c)));
    expect(n).toBe(1);
    expect(changes).toMatchObject([{ path: 'src/a.py', change: 'changed' }]);

    const pins = await queries.execute(new ListPinsQuery());
    expect(pins.map((p) => p.cid).sort()).toEqual([first.rootCid, second.rootCid].sort());
    expect(new Set(pins.map((p) => p.createdAt))).toEqual(new Set([T0]));

    const car = join(dir, 'both.car');
    const exported = await commands.execute(new ExportSnapshotsCommand([first.root, second.root], car));
    expect(exported.roots).toHaveLength(2);
    const otherHome = join(dir, 'other-home');
    const other = await boot(otherHome, null);
    try {
      const imported = await other.get(CommandBus).execute(new ImportSnapshotsCommand(car));
      expect(imported.roots.map(String).sort()).toEqual(exported.roots.map(String).sort());
      const out = join(dir, 'checked-out');
      const co = await other.get(CommandBus).execute(new CheckoutSnapshotCommand(parseCid(second.rootCid), out));
      expect(co.files).toBe(2);
      expect(readFileSync(join(out, 'src', 'a.py'), 'utf8')).toBe('print(2)\n');
    } finally {
      await other.close();
    }

    expect(await commands.execute(new UnpinSnapshotCommand(first.root))).toBe(true);
    expect(await commands.execute(new UnpinSnapshotCommand(first.root))).toBe(false);
    const dry = await commands.execute(new CollectSnapshotGarbageCommand({ graceMs: 0, dryRun: true }));
    expect(dry.dryRun).toBe(true);
    expect(dry.deleted).toBeGreaterThan(0); // the first snapshot's own blocks (its README blob is shared)
    expect((await queries.execute(new VerifySnapshotQuery(second.root))).files).toBe(2);
  });
});

import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { AssayError } from '@assay/core';
import type { DiffChange, SnapshotEventSink, SnapshotPolicy, SnapshotResult } from '@assay/snapshots';
import type { CliContext } from '../cli-context';
import { libs } from '../libs';
import { withSnapshotBuses, type Buses } from '../nest-context';

/** Garbage collection's default grace period as help shows it (a test keeps it equal to DEFAULT_GC_GRACE_MS). */
export const GC_GRACE_HELP_SECONDS = 3600;

const parseCid = (text: string) => libs.snapshots().parseCid(text);

/**
 * `assay snapshot ...`: content-addressed snapshots in `<ASSAY_HOME>/blobs`.
 *
 *   create DIR [--dry-run] [--json] [--policy FILE] [--exclude PATTERN]... [--label L] [--previous CID] [--no-cache]
 *   verify CID [--json]            ls CID [PATH] [--json]          diff A B [--json]
 *   checkout CID DIR [--json]      export CID... -o FILE [--json]  import FILE [--json]
 *   gc [--dry-run] [--grace SECONDS] [--json]                       pins [--json]      unpin CID
 *
 * The ledger is plugged in through a SnapshotEventSink: `register(..., { sink: 'ledger' })` binds the ledger's
 * (what the program does); a test passes its own or sets one with `setSnapshotEventSink`. Without one, snapshots
 * work and no event is appended.
 */
export type SinkProvider = SnapshotEventSink | ((ctx: CliContext) => SnapshotEventSink | Promise<SnapshotEventSink>);

let moduleSink: SinkProvider | null = null;

/** Plugs the ledger (or anything else) in as the destination of SnapshotTaken / WorkspaceEdited. */
export function setSnapshotEventSink(sink: SinkProvider | null): void {
  moduleSink = sink;
}

async function resolveSink(p: SinkProvider | null | undefined, ctx: CliContext): Promise<SnapshotEventSink | null> {
  if (!p) return null;
  return typeof p === 'function' ? p(ctx) : p;
}

function readPolicy(file: string | undefined, exclude: string[] | undefined): Partial<SnapshotPolicy> {
  let base: Record<string, unknown> = {};
  if (file) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (e) {
      throw new AssayError('SNAPSHOT_POLICY_INVALID', 'invalid_input', `cannot read the policy file ${file}: ${(e as Error).message}`);
    }
    try {
      base = JSON.parse(text) as Record<string, unknown>;
    } catch (e) {
      throw new AssayError('SNAPSHOT_POLICY_INVALID', 'invalid_input', `${file} is not JSON: ${(e as Error).message}`);
    }
  }
  if (exclude && exclude.length > 0) {
    const prev = Array.isArray(base.exclude) ? (base.exclude as unknown[]) : [];
    base = { ...base, exclude: [...prev, ...exclude] };
  }
  return libs.snapshots().resolvePolicy(base);
}

function resultJson(r: SnapshotResult): Record<string, unknown> {
  const { root: _root, ...rest } = r;
  return rest;
}

function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

function describeChange(c: DiffChange): string {
  const mark = c.change === 'added' ? '+' : c.change === 'removed' ? '-' : 'M';
  const kind = c.kind === 'dir' ? '/' : c.kind === 'symlink' ? '@' : '';
  if (c.change === 'added') return `${mark} ${c.path}${kind} (${c.sizeAfter ?? 0} bytes)`;
  if (c.change === 'removed') return `${mark} ${c.path}${kind} (${c.sizeBefore ?? 0} bytes)`;
  if (c.kind === 'symlink') return `${mark} ${c.path}@ -> ${c.targetBefore ?? ''} => ${c.targetAfter ?? ''}`;
  const mode = c.modeBefore !== c.modeAfter ? ` mode ${(c.modeBefore ?? 0).toString(8)} -> ${(c.modeAfter ?? 0).toString(8)}` : '';
  return `${mark} ${c.path} (${c.sizeBefore ?? 0} -> ${c.sizeAfter ?? 0} bytes)${mode}`;
}

export function register(program: Command, ctx: CliContext, options: { sink?: SinkProvider | 'ledger' | null } = {}): void {
  // one SnapshotsModule per call: the store under ASSAY_HOME, the sink of SnapshotTaken / WorkspaceEdited
  const dispatch = <T>(fn: (b: Buses, S: ReturnType<typeof libs.snapshots>) => Promise<T>): Promise<T> => {
    const sink = options.sink ?? moduleSink;
    return withSnapshotBuses(ctx, sink === 'ledger' ? 'ledger' : () => resolveSink(sink, ctx), (b) => fn(b, libs.snapshots()));
  };
  const print = (json: boolean | undefined, data: unknown, human: string) => ctx.out(json ? JSON.stringify(data, null, 2) : human);

  const snap = program.command('snapshot').description('content-addressed snapshots of workspaces (blobs in <ASSAY_HOME>/blobs)');

  snap
    .command('create')
    .description('snapshot a directory into the blob store and print its root CID')
    .argument('<dir>', 'directory to snapshot')
    .option('--dry-run', 'compute the root CID without storing anything')
    .option('--json', 'print the result as JSON')
    .option('--policy <file>', 'JSON policy (maxFiles, maxFileBytes, maxTotalBytes, maxDepth, exclude, outsideSymlinks, specialFiles)')
    .option('--exclude <pattern>', 'exclude paths matching a pattern (repeatable)', collect, [])
    .option('--label <label>', 'what is snapshotted, recorded in the event (default: the directory real path)')
    .option('--previous <cid>', 'snapshot to diff against for WorkspaceEdited (default: the last one of the same label)')
    .option('--no-cache', 'ignore the stat cache and rehash everything')
    .action(
      async (dir: string, o: { dryRun?: boolean; json?: boolean; policy?: string; exclude?: string[]; label?: string; previous?: string; cache?: boolean }) => {
        const policy = readPolicy(o.policy, o.exclude);
        const r = await dispatch(({ commands }, S) =>
          commands.execute(
            new S.CreateSnapshotCommand(dir, {
              dryRun: o.dryRun === true,
              policy,
              useCache: o.cache !== false,
              progress: ctx.progress(),
              ...(o.label !== undefined ? { label: o.label } : {}),
              ...(o.previous !== undefined ? { previous: o.previous } : {}),
            }),
          ),
        );
        const flagged =
          r.outsideSymlinks.length > 0 ? `; ${r.outsideSymlinks.length} symlink(s) point outside: ${r.outsideSymlinks.slice(0, 5).join(', ')}` : '';
        print(
          o.json,
          resultJson(r),
          `${r.rootCid}\n${r.dryRun ? 'dry run: ' : ''}${r.files} files, ${r.directories} directories, ${r.symlinks} symlinks, ${r.bytes} bytes; ` +
            `${r.newBlobs} new blobs (${r.newBytes} bytes); ${r.cache.hits} from the stat cache, ${r.cache.hashed} hashed; ${r.durationMs} ms${flagged}`,
        );
      },
    );

  snap
    .command('verify')
    .description('read every block of a snapshot and check it against its CID, its structure and its sizes')
    .argument('<cid>', 'snapshot root CID')
    .option('--json', 'print the result as JSON')
    .action(async (cid: string, o: { json?: boolean }) => {
      const root = parseCid(cid);
      const r = await dispatch(({ queries }, S) => queries.execute(new S.VerifySnapshotQuery(root, ctx.progress())));
      print(
        o.json,
        { ok: true, ...r },
        `ok ${r.root}: ${r.files} files, ${r.directories} directories, ${r.symlinks} symlinks, ${r.bytes} bytes, ${r.blocks} blocks checked`,
      );
    });

  snap
    .command('ls')
    .description('list a directory (or show an entry) inside a snapshot')
    .argument('<cid>', 'snapshot root CID')
    .argument('[path]', 'path inside the snapshot', '')
    .option('--json', 'print the listing as JSON')
    .action(async (cid: string, path: string, o: { json?: boolean }) => {
      const root = parseCid(cid);
      const l = await dispatch(({ queries }, S) => queries.execute(new S.ListSnapshotQuery(root, path)));
      const lines = l.entries.map(
        (e) =>
          `${e.mode} ${e.kind.padEnd(7)} ${String(e.size).padStart(12)} ${e.kind === 'dir' ? `${e.name}/` : e.name}` +
          (e.kind === 'symlink' ? ` -> ${e.target ?? ''}${e.outside ? '  [points outside]' : ''}` : ''),
      );
      print(o.json, l, lines.join('\n'));
    });

  snap
    .command('diff')
    .description('added, removed and changed paths between two snapshots (reads manifests only)')
    .argument('<a>', 'from: snapshot root CID')
    .argument('<b>', 'to: snapshot root CID')
    .option('--json', 'print the changes and the summary as JSON')
    .action(async (a: string, b: string, o: { json?: boolean }) => {
      const from = parseCid(a);
      const to = parseCid(b);
      await dispatch(async ({ queries }, S) => {
        const s = S.emptySummary();
        const changes: DiffChange[] = [];
        await queries.execute(
          new S.DiffSnapshotsQuery(from, to, (c) => {
            S.addToSummary(s, c);
            if (o.json) changes.push(c);
            else ctx.out(describeChange(c));
          }),
        );
        if (o.json) {
          ctx.out(JSON.stringify({ from: a, to: b, ...s, changes }, null, 2));
          return;
        }
        ctx.out(
          `${s.totalChanges} changes: +${s.added.files} files (${s.added.bytes} bytes), -${s.removed.files} files (${s.removed.bytes} bytes), ` +
            `${s.changed.files} changed (${s.changed.bytesBefore} -> ${s.changed.bytesAfter} bytes)`,
        );
      });
    });

  snap
    .command('checkout')
    .description('materialise a snapshot into a new (or empty) directory, checking every blob against its CID')
    .argument('<cid>', 'snapshot root CID')
    .argument('<dir>', 'target directory (must not exist, or be empty)')
    .option('--json', 'print the result as JSON')
    .action(async (cid: string, dir: string, o: { json?: boolean }) => {
      const root = parseCid(cid);
      const r = await dispatch(({ commands }, S) => commands.execute(new S.CheckoutSnapshotCommand(root, dir, ctx.progress())));
      print(o.json, r, `${r.dir}: ${r.files} files, ${r.directories} directories, ${r.symlinks} symlinks, ${r.bytes} bytes from ${r.root}`);
    });

  snap
    .command('export')
    .description('write one or more snapshots to a CAR v1 file')
    .argument('<cids...>', 'snapshot root CIDs')
    .requiredOption('-o, --output <file>', 'the CAR file to write')
    .option('--json', 'print the result as JSON')
    .action(async (cids: string[], o: { output: string; json?: boolean }) => {
      const roots = cids.map((c) => parseCid(c));
      const r = await dispatch(({ commands }, S) => commands.execute(new S.ExportSnapshotsCommand(roots, o.output, ctx.progress())));
      print(o.json, r, `${r.file}: ${r.blocks} blocks, ${r.bytes} bytes, roots ${r.roots.join(' ')}`);
    });

  snap
    .command('import')
    .description('import a CAR v1 file, checking every block against its CID; nothing is kept unless all of it checks out')
    .argument('<file>', 'the CAR file')
    .option('--json', 'print the result as JSON')
    .action(async (file: string, o: { json?: boolean }) => {
      const r = await dispatch(({ commands }, S) => commands.execute(new S.ImportSnapshotsCommand(file, ctx.progress())));
      print(o.json, r, `${r.roots.join('\n')}\nimported ${r.blocks} blocks (${r.newBlobs} new), ${r.bytes} bytes`);
    });

  snap
    .command('gc')
    .description('delete blobs no pinned snapshot references (blobs younger than the grace period are kept)')
    .option('--dry-run', 'report what would be deleted')
    .option('--grace <seconds>', 'keep unreferenced blobs younger than this', String(GC_GRACE_HELP_SECONDS))
    .option('--json', 'print the result as JSON')
    .action(async (o: { dryRun?: boolean; grace: string; json?: boolean }) => {
      if (!/^\d{1,9}$/.test(o.grace)) {
        throw new AssayError('SNAPSHOT_POLICY_INVALID', 'invalid_input', `--grace must be a whole number of seconds (decimal digits), got "${o.grace}"`);
      }
      const grace = Number(o.grace);
      const r = await dispatch(({ commands }, S) =>
        commands.execute(new S.CollectSnapshotGarbageCommand({ graceMs: grace * 1000, dryRun: o.dryRun === true, progress: ctx.progress() })),
      );
      print(
        o.json,
        r,
        `${r.dryRun ? 'would delete' : 'deleted'} ${r.deleted} blobs (${r.deletedBytes} bytes); ${r.reachable} reachable from ${r.pins} pins; ` +
          `${r.young} unreferenced but younger than ${grace} s kept` +
          (r.dryRun ? '' : `; ${r.compaction.packsRewritten} packs rewritten, ${r.compaction.packsRemoved + r.stagingRemoved} removed`),
      );
    });

  snap
    .command('pins')
    .description('list pinned snapshot roots (what garbage collection keeps)')
    .option('--json', 'print as JSON')
    .action(async (o: { json?: boolean }) => {
      const pins = await dispatch(({ queries }, S) => queries.execute(new S.ListPinsQuery()));
      print(o.json, pins, pins.map((p) => `${p.cid} ${p.createdAt} ${p.origin}${p.source ? ` ${p.source}` : ''}`).join('\n'));
    });

  snap
    .command('unpin')
    .description('stop keeping a snapshot root (its blobs go at the next gc, unless another pin references them)')
    .argument('<cid>', 'snapshot root CID')
    .option('--json', 'print the result as JSON')
    .action(async (cid: string, o: { json?: boolean }) => {
      const root = parseCid(cid);
      const removed = await dispatch(({ commands }, S) => commands.execute(new S.UnpinSnapshotCommand(root)));
      if (!removed) throw new AssayError('SNAPSHOT_NOT_FOUND', 'not_found', `${cid} is not pinned`);
      print(o.json, { cid, unpinned: true }, `unpinned ${cid}`);
    });
}

/**
 * Child process for the crash-safety test: snapshots a workspace over and over (new content each time, durably),
 * printing `snapshotting` before and `committed <root CID>` after each snapshot, until it is killed.
 * Usage: snapshot-writer-child.ts HOME WORKSPACE
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SnapshotHome } from '@assay/snapshots';

async function main(): Promise<void> {
  const [home, ws] = process.argv.slice(2) as [string, string];
  const h = new SnapshotHome(home, { durability: 'batch' });
  for (let round = 0; ; round++) {
    const dir = join(ws, `round-${round % 3}`);
    mkdirSync(dir, { recursive: true });
    for (let i = 0; i < 40; i++) writeFileSync(join(dir, `f${i}.bin`), randomBytes(i % 5 === 0 ? 2_500_000 : 40_000));
    process.stdout.write('snapshotting\n');
    const r = await h.create(ws, { label: 'crash-test', useCache: false });
    process.stdout.write(`committed ${r.rootCid}\n`);
  }
}

main().catch((e: unknown) => {
  process.stderr.write(`${String((e as Error).stack ?? e)}\n`);
  process.exit(1);
});

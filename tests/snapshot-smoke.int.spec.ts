import { mkdtempSync, writeFileSync, mkdirSync, symlinkSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { SnapshotHome } from '@assay/snapshots';

it('smoke', async () => {
  const base = mkdtempSync(join(tmpdir(), 'snap-smoke-'));
  const ws = join(base, 'ws');
  mkdirSync(join(ws, 'a/b'), { recursive: true });
  writeFileSync(join(ws, 'a/b/x.txt'), 'hello');
  writeFileSync(join(ws, 'big.bin'), Buffer.alloc(5 * 1024 * 1024 + 3, 7));
  symlinkSync('../x', join(ws, 'a/l'));
  const home = SnapshotHome.open(join(base, 'home'), { workers: 2 });
  const r = await home.create(ws);
  console.log(r.rootCid, r.files, r.bytes, r.newBlobs, r.cache);
  const r2 = await home.create(ws);
  console.log(r2.rootCid, r2.cache);
  const v = await home.verify(r.root);
  console.log(v);
  await home.checkout(r.root, join(base, 'out'));
  const r3 = await home.create(join(base, 'out'), { dryRun: true });
  expect(r3.rootCid).toBe(r.rootCid);
  await home.exportCar([r.root], join(base, 'x.car'));
  const h2 = SnapshotHome.open(join(base, 'home2'));
  const imp = await h2.importCar(join(base, 'x.car'));
  console.log(imp);
  await home.close(); await h2.close();
  rmSync(base, { recursive: true, force: true });
});

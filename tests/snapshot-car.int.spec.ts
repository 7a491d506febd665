import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CID } from 'multiformats/cid';
import * as dagCbor from '@ipld/dag-cbor';
import { ManualClock, isAssayError } from '@assay/core';
import { CHUNK_SIZE, SnapshotHome, rawBlock } from '@assay/snapshots';
import { scratchDirs } from './support/scratch';

const { fresh } = scratchDirs('assay-snap-car-');
const home = () => new SnapshotHome(fresh('home'), { clock: new ManualClock('2099-01-01'), durability: 'none' });

function varint(n: number): Buffer {
  const out: number[] = [];
  while (n >= 0x80) {
    out.push((n & 0x7f) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return Buffer.from(out);
}

function readVarint(b: Buffer, pos: number): [number, number] {
  let value = 0;
  let shift = 0;
  for (;;) {
    const byte = b[pos++] as number;
    value += (byte & 0x7f) * 2 ** shift;
    if ((byte & 0x80) === 0) return [value, pos];
    shift += 7;
  }
}

interface Car {
  header: Buffer;
  sections: Array<{ cid: CID; data: Buffer }>;
}

function parseCar(bytes: Buffer): Car {
  const [hlen, p0] = readVarint(bytes, 0);
  const header = bytes.subarray(p0, p0 + hlen);
  const sections: Car['sections'] = [];
  let pos = p0 + hlen;
  while (pos < bytes.length) {
    const [len, p] = readVarint(bytes, pos);
    const section = bytes.subarray(p, p + len);
    const [cid, rest] = CID.decodeFirst(section);
    sections.push({ cid, data: Buffer.from(rest) });
    pos = p + len;
  }
  return { header: Buffer.from(header), sections };
}

function writeCar(car: Car): Buffer {
  const parts = [varint(car.header.length), car.header];
  for (const s of car.sections) {
    const body = Buffer.concat([Buffer.from(s.cid.bytes), s.data]);
    parts.push(varint(body.length), body);
  }
  return Buffer.concat(parts);
}

function headerFor(roots: CID[], version = 1): Buffer {
  return Buffer.from(dagCbor.encode({ version, roots }));
}

let exported: { file: string; root: CID; other: CID; bytes: Buffer };

beforeAll(async () => {
  const ws = fresh('ws');
  mkdirSync(join(ws, 'd'), { recursive: true });
  writeFileSync(join(ws, 'a.txt'), 'alpha');
  writeFileSync(join(ws, 'd/big.bin'), Buffer.alloc(2 * CHUNK_SIZE + 10, 3).fill(4, CHUNK_SIZE));
  writeFileSync(join(ws, 'd/b.txt'), 'beta');
  const h = home();
  const r = await h.create(ws);
  writeFileSync(join(ws, 'c.txt'), 'gamma');
  const r2 = await h.create(ws);
  const file = fresh('car');
  await h.exportCar([r.root], file);
  await h.close();
  exported = { file, root: r.root, other: r2.root, bytes: readFileSync(file) };
});

async function importRefused(bytes: Buffer, code: string, message?: RegExp): Promise<void> {
  const file = fresh('bad-car');
  writeFileSync(file, bytes);
  const h = home();
  try {
    await h.importCar(file);
  } catch (e) {
    if (!isAssayError(e)) throw e;
    expect(e.code).toBe(code);
    if (message) expect(e.message).toMatch(message);
    // nothing of a refused import is kept
    expect(await h.pins()).toEqual([]);
    const left = [];
    for await (const b of h.store.list()) left.push(b);
    expect(left).toEqual([]);
    return;
  } finally {
    await h.close();
  }
  throw new Error(`expected ${code}`);
}

describe('CAR export and import', () => {
  it('round-trips a snapshot into another store, roots first and each block once', async () => {
    const car = parseCar(exported.bytes);
    expect(car.sections[0]?.cid.equals(exported.root)).toBe(true);
    const cids = car.sections.map((s) => s.cid.toString());
    expect(new Set(cids).size).toBe(cids.length);
    const h = home();
    const r = await h.importCar(exported.file);
    expect(r).toMatchObject({ roots: [exported.root.toString()], blocks: car.sections.length, newBlobs: car.sections.length });
    await expect(h.verify(exported.root)).resolves.toMatchObject({ files: 3 });
    expect((await h.pins()).map((p) => [p.cid, p.origin])).toEqual([[exported.root.toString(), 'import']]);
    // importing again adds nothing
    expect((await h.importCar(exported.file)).newBlobs).toBe(0);
    await h.close();
  });

  it('is readable by @ipld/car, and accepts a CAR written by @ipld/car in another block order', async () => {
    const { CarReader, CarWriter } = await import('@ipld/car');
    const reader = await CarReader.fromBytes(exported.bytes);
    expect((await reader.getRoots()).map((c) => c.toString())).toEqual([exported.root.toString()]);
    const blocks = [];
    for await (const b of reader.blocks()) blocks.push(b);
    const { writer, out } = CarWriter.create([exported.root]);
    const chunks: Uint8Array[] = [];
    const collecting = (async () => {
      for await (const c of out) chunks.push(c);
    })();
    for (const b of [...blocks].reverse()) await writer.put(b);
    await writer.close();
    await collecting;
    const file = fresh('car');
    writeFileSync(file, Buffer.concat(chunks));
    const h = home();
    await h.importCar(file);
    await expect(h.verify(exported.root)).resolves.toBeTruthy();
    await h.close();
  });

  it('exports several snapshots into one CAR, sharing their common blocks', async () => {
    const h = home();
    await h.importCar(exported.file);
    const ws = fresh('ws');
    mkdirSync(ws);
    writeFileSync(join(ws, 'a.txt'), 'alpha');
    const small = await h.create(ws);
    const file = fresh('car');
    const r = await h.exportCar([exported.root, small.root], file);
    expect(r.roots).toEqual([exported.root.toString(), small.root.toString()]);
    const h2 = home();
    expect((await h2.importCar(file)).roots).toHaveLength(2);
    await expect(h2.verify(small.root)).resolves.toMatchObject({ files: 1 });
    await h.close();
    await h2.close();
  });

  it('refuses to export a snapshot the store does not have', async () => {
    const h = home();
    const r = await h.exportCar([exported.root], fresh('car')).catch((e: unknown) => e);
    expect(isAssayError(r) && r.code).toBe('SNAPSHOT_BLOB_MISSING');
    await h.close();
  });

  describe('refuses', () => {
    const car = () => parseCar(exported.bytes);

    it('a tampered block', async () => {
      const c = car();
      const victim = c.sections.findIndex((s) => s.cid.code === 0x55 && s.data.length > 100);
      const s = c.sections[victim];
      if (!s) throw new Error('no raw block');
      s.data[7] = (s.data[7] as number) ^ 1;
      await importRefused(
        writeCar(c),
        'SNAPSHOT_CAR_BLOCK_MISMATCH',
        new RegExp(`block #${victim} at byte \\d+ claims CID ${s.cid.toString()} but its bytes hash to`),
      );
    });

    it('a tampered manifest', async () => {
      const c = car();
      const s = c.sections[0];
      if (!s) throw new Error('empty');
      s.data[s.data.length - 1] = (s.data[s.data.length - 1] as number) ^ 1;
      await importRefused(writeCar(c), 'SNAPSHOT_CAR_BLOCK_MISMATCH');
    });

    it('a missing block', async () => {
      const c = car();
      const i = c.sections.findIndex((s) => s.cid.code === 0x55);
      const [gone] = c.sections.splice(i, 1);
      await importRefused(writeCar(c), 'SNAPSHOT_CAR_MISSING_BLOCK', new RegExp(`block ${gone?.cid.toString()}, linked from bafy`));
    });

    it('junk at the end', async () => {
      await importRefused(Buffer.concat([exported.bytes, Buffer.from('junk!')]), 'SNAPSHOT_CAR_TRUNCATED', /trailing bytes that are not a block/);
      await importRefused(Buffer.concat([exported.bytes, Buffer.from([0])]), 'SNAPSHOT_CAR_MALFORMED', /empty section/);
      await importRefused(Buffer.concat([exported.bytes, Buffer.from([0xff, 0xff, 0xff, 0xff, 0x7f])]), 'SNAPSHOT_CAR_MALFORMED', /exceeds/);
    });

    it('a valid but unreferenced block appended', async () => {
      const c = car();
      const extra = rawBlock(new TextEncoder().encode('stowaway'));
      c.sections.push({ cid: extra.cid, data: Buffer.from(extra.bytes) });
      await importRefused(writeCar(c), 'SNAPSHOT_CAR_UNREFERENCED_BLOCK', new RegExp(`${extra.cid.toString()}\\) is not reachable from any root`));
    });

    it('a duplicate block', async () => {
      const c = car();
      const first = c.sections[1];
      if (!first) throw new Error('short');
      c.sections.push(first);
      await importRefused(writeCar(c), 'SNAPSHOT_CAR_DUPLICATE_BLOCK', /repeats block #1/);
    });

    it('a forged root', async () => {
      const c = car();
      c.header = headerFor([exported.other]);
      await importRefused(
        writeCar(c),
        'SNAPSHOT_CAR_MISSING_ROOT',
        new RegExp(`root ${exported.other.toString()} named in the CAR header is not among its blocks`),
      );
      const raw = c.sections.find((s) => s.cid.code === 0x55);
      if (!raw) throw new Error('no raw');
      c.header = headerFor([exported.root, raw.cid]);
      await importRefused(writeCar(c), 'SNAPSHOT_CAR_BAD_ROOT', /is not a snapshot directory manifest/);
    });

    it('a truncated file', async () => {
      await importRefused(exported.bytes.subarray(0, exported.bytes.length - 100), 'SNAPSHOT_CAR_TRUNCATED', /bytes announced/);
      await importRefused(exported.bytes.subarray(0, 5), 'SNAPSHOT_CAR_TRUNCATED');
    });

    it('a CAR of another version, or blocks outside the format', async () => {
      const c = car();
      c.header = headerFor([exported.root], 2);
      await importRefused(writeCar(c), 'SNAPSHOT_CAR_UNSUPPORTED', /only version 1/);
      const v0 = CID.parse('QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG');
      const c2 = car();
      c2.sections.push({ cid: v0, data: Buffer.from('x') });
      await importRefused(writeCar(c2), 'SNAPSHOT_CAR_UNSUPPORTED', /only CIDv1 sha2-256 raw or dag-cbor/);
      const c3 = car();
      c3.header = Buffer.from(dagCbor.encode({ version: 1, roots: [exported.root], extra: true }));
      await importRefused(writeCar(c3), 'SNAPSHOT_CAR_MALFORMED', /exactly \{version, roots\}/);
    });

    it('a block whose hash is right but whose manifest is invalid', async () => {
      const bad = Buffer.from(
        dagCbor.encode({ v: 1, type: 'dir', entries: [{ name: '../escape', kind: 'file', mode: 0o644, size: 1, cid: rawBlock(new Uint8Array([1])).cid }] }),
      );
      const { sha256 } = await import('multiformats/hashes/sha2');
      const cid = CID.createV1(0x71, await sha256.digest(bad));
      const c: Car = { header: headerFor([cid]), sections: [{ cid, data: bad }] };
      await importRefused(writeCar(c), 'SNAPSHOT_MANIFEST_INVALID', /contains "\/"/);
    });
  });
});

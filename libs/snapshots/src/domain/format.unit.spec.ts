import { createHash } from 'node:crypto';
import { CID } from 'multiformats/cid';
import * as dagCbor from '@ipld/dag-cbor';
import { sha256 as mfSha256 } from 'multiformats/hashes/sha2';
import * as raw from 'multiformats/codecs/raw';
import { isAssayError } from '@assay/core';
import {
  CHUNK_SIZE,
  DAG_CBOR_CODE,
  MODE_DIR,
  MODE_EXEC,
  MODE_FILE,
  MODE_SYMLINK,
  RAW_CODE,
  chunkCount,
  cidFromDigest,
  cidString,
  decodeNode,
  encodeDirManifest,
  fileContent,
  normaliseFileMode,
  parseCid,
  rawBlock,
  sha256,
  type Entry,
} from './format';
import { cidToString, encodeDirBytes, encodeFileNodeBytes } from './cbor';

function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

const ALPHABET = ['a', 'Z', '0', '-', '_', '.', ' ', 'é', 'ß', '中', '😀', '\u0301', 'Ω', '~', '\uE000', '\uFFFD'];

function randomName(r: () => number): string {
  let s = '';
  const n = 1 + Math.floor(r() * 12);
  for (let i = 0; i < n; i++) s += ALPHABET[Math.floor(r() * ALPHABET.length)];
  return s === '.' || s === '..' ? `${s}x` : s;
}

function randomEntries(r: () => number, n: number): Entry[] {
  const names = new Set<string>();
  while (names.size < n) names.add(randomName(r));
  return [...names].map((name, i) => {
    const size = [0, 1, 23, 24, 255, 256, 65535, 65536, 2 ** 32 - 1, 2 ** 32, 2 ** 53 - 1][i % 11] as number;
    const kind = i % 3;
    if (kind === 0) {
      const target = `../${name}/t`;
      return { name, kind: 'symlink', mode: MODE_SYMLINK, size: Buffer.byteLength(target), target } as Entry;
    }
    const cid = rawBlock(new TextEncoder().encode(name)).cid;
    if (kind === 1) return { name, kind: 'dir', mode: MODE_DIR, size, cid: cidFromDigest(DAG_CBOR_CODE, cid.multihash.digest) } as Entry;
    const fileCid = size > CHUNK_SIZE ? cidFromDigest(DAG_CBOR_CODE, cid.multihash.digest) : cid;
    return { name, kind: 'file', mode: i % 2 ? MODE_EXEC : MODE_FILE, size: Math.min(size, 2 ** 37), cid: fileCid } as Entry;
  });
}

function ipldDir(entries: readonly Entry[]): Uint8Array {
  return dagCbor.encode({
    v: 1,
    type: 'dir',
    entries: entries.map((e) =>
      e.kind === 'symlink'
        ? { name: e.name, kind: e.kind, mode: e.mode, size: e.size, target: e.target }
        : { name: e.name, kind: e.kind, mode: e.mode, size: e.size, cid: e.cid },
    ),
  });
}

function expectCode(f: () => unknown, code: string, text?: RegExp): void {
  try {
    f();
  } catch (e) {
    expect(isAssayError(e) ? e.code : e).toBe(code);
    if (text) expect((e as Error).message).toMatch(text);
    return;
  }
  throw new Error(`expected ${code}`);
}

describe('DAG-CBOR writer', () => {
  it('produces exactly the bytes of @ipld/dag-cbor for directory manifests', () => {
    const r = rng(7);
    for (let round = 0; round < 200; round++) {
      const entries = encodeDirManifest(randomEntries(r, Math.floor(r() * 30))).bytes;
      const decoded = decodeNode(cidFromDigest(DAG_CBOR_CODE, sha256(entries)), entries, '');
      if (decoded.type !== 'dir') throw new Error('not a dir');
      expect(Buffer.from(encodeDirBytes(decoded.entries))).toEqual(Buffer.from(ipldDir(decoded.entries)));
    }
  });

  it('produces exactly the bytes of @ipld/dag-cbor for file nodes', () => {
    for (const n of [2, 3, 24, 25, 300]) {
      const chunks = Array.from({ length: n }, (_, i) => rawBlock(new Uint8Array([i & 255, i >> 8])).cid);
      const size = (n - 1) * CHUNK_SIZE + 17;
      const ours = encodeFileNodeBytes(size, CHUNK_SIZE, chunks);
      const theirs = dagCbor.encode({ v: 1, type: 'file', size, chunkSize: CHUNK_SIZE, chunks });
      expect(Buffer.from(ours)).toEqual(Buffer.from(theirs));
    }
  });

  it('writes CID strings exactly as multiformats does', () => {
    const r = rng(3);
    for (let i = 0; i < 500; i++) {
      const c = cidFromDigest(r() < 0.5 ? RAW_CODE : DAG_CBOR_CODE, sha256(new Uint8Array([i, i >> 8])));
      expect(cidToString(c)).toBe(c.toString());
      expect(cidString(c)).toBe(c.toString());
    }
  });
});

describe('blocks and CIDs', () => {
  it('hashes raw blocks like multiformats sha2-256 + raw', async () => {
    const bytes = new TextEncoder().encode('hello world\n');
    const expected = CID.createV1(raw.code, await mfSha256.digest(bytes));
    expect(rawBlock(bytes).cid.toString()).toBe(expected.toString());
    expect(rawBlock(new Uint8Array()).cid.toString()).toBe('bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku');
  });

  it('gives a file of at most one chunk its raw CID, a longer one a file node', () => {
    const d = createHash('sha256').update('x').digest();
    const one = fileContent(CHUNK_SIZE, d);
    expect(one.node).toBeNull();
    expect(one.cid.code).toBe(RAW_CODE);
    const two = fileContent(CHUNK_SIZE + 1, Buffer.concat([d, d]));
    expect(two.node).not.toBeNull();
    expect(two.cid.code).toBe(DAG_CBOR_CODE);
    const node = decodeNode(two.cid, two.node?.bytes ?? new Uint8Array(), 'f');
    expect(node).toMatchObject({ type: 'file', size: CHUNK_SIZE + 1, chunkSize: CHUNK_SIZE });
    expect(chunkCount(0)).toBe(1);
    expect(chunkCount(CHUNK_SIZE * 3)).toBe(3);
    expect(() => fileContent(5, Buffer.concat([d, d]))).toThrow(/2 chunk digests/);
  });

  it('records only the executable bit of a file mode', () => {
    expect(normaliseFileMode(0o100600)).toBe(MODE_FILE);
    expect(normaliseFileMode(0o100644)).toBe(MODE_FILE);
    expect(normaliseFileMode(0o100700)).toBe(MODE_EXEC);
    expect(normaliseFileMode(0o100601)).toBe(MODE_EXEC);
  });

  it('parses user CIDs and refuses anything outside the format', () => {
    const c = rawBlock(new Uint8Array([1])).cid;
    expect(parseCid(` ${c.toString()} `).equals(c)).toBe(true);
    expectCode(() => parseCid('not-a-cid'), 'SNAPSHOT_CID_INVALID', /not a CID/);
    expectCode(() => parseCid('QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG'), 'SNAPSHOT_CID_INVALID', /not a snapshot CID/);
    const identity = CID.createV1(RAW_CODE, { code: 0, size: 1, digest: new Uint8Array([1]), bytes: new Uint8Array([0, 1, 1]) } as never);
    expectCode(() => parseCid(identity.toString()), 'SNAPSHOT_CID_INVALID');
  });
});

describe('directory manifests', () => {
  const file = (name: string, content = name): Entry => ({
    name,
    kind: 'file',
    mode: MODE_FILE,
    size: content.length,
    cid: rawBlock(new TextEncoder().encode(content)).cid,
  });

  it('do not depend on the order entries are given in', () => {
    const entries = [file('b'), file('a'), file('é'), file('😀'), file('\uE000'), file('Z')];
    const a = encodeDirManifest(entries);
    const b = encodeDirManifest([...entries].reverse());
    expect(a.cid.toString()).toBe(b.cid.toString());
    const names = (decodeNode(a.cid, a.bytes, '') as unknown as { entries: Entry[] }).entries.map((e) => e.name);
    // UTF-8 byte order: U+E000 (ee 80 80) sorts before U+1F600 (f0 9f 98 80), unlike UTF-16 order.
    expect(names).toEqual(['Z', 'a', 'b', 'é', '\uE000', '😀']);
  });

  it('refuse duplicate names', () => {
    expectCode(() => encodeDirManifest([file('a'), file('a', 'other')]), 'SNAPSHOT_NAME_COLLISION');
  });

  it('round-trip through decodeNode', () => {
    const r = rng(11);
    for (let i = 0; i < 50; i++) {
      const b = encodeDirManifest(randomEntries(r, 10));
      const n = decodeNode(b.cid, b.bytes, 'x');
      expect(encodeDirManifest((n as unknown as { entries: Entry[] }).entries).cid.toString()).toBe(b.cid.toString());
    }
  });

  describe('decoding refuses hostile or non-canonical blocks', () => {
    const valid = file('a');
    const refuse = (data: unknown, why: RegExp) => {
      const bytes = dagCbor.encode(data);
      const cid = cidFromDigest(DAG_CBOR_CODE, sha256(bytes));
      expectCode(() => decodeNode(cid, bytes, 'some/dir'), 'SNAPSHOT_MANIFEST_INVALID', why);
    };
    const entry = (over: Record<string, unknown>) => ({ name: 'a', kind: 'file', mode: MODE_FILE, size: 1, cid: (valid as { cid: CID }).cid, ...over });

    it.each([
      ['not a map', [1, 2], /not a map/],
      ['a wrong version', { v: 2, type: 'dir', entries: [] }, /unsupported version/],
      ['an unknown type', { v: 1, type: 'tree', entries: [] }, /unknown node type/],
      ['an extra field', { v: 1, type: 'dir', entries: [], x: 1 }, /unexpected fields/],
      ['a name with a slash', { v: 1, type: 'dir', entries: [entry({ name: 'a/b' })] }, /contains "\/"/],
      ['a dot-dot name', { v: 1, type: 'dir', entries: [entry({ name: '..' })] }, /dot entry/],
      ['an empty name', { v: 1, type: 'dir', entries: [entry({ name: '' })] }, /is empty/],
      ['a NUL in a name', { v: 1, type: 'dir', entries: [entry({ name: 'a\0' })] }, /NUL/],
      ['an unknown kind', { v: 1, type: 'dir', entries: [entry({ kind: 'fifo' })] }, /unknown kind/],
      ['a file mode other than 644/755', { v: 1, type: 'dir', entries: [entry({ mode: 0o4755 })] }, /mode/],
      ['a negative size', { v: 1, type: 'dir', entries: [entry({ size: -1 })] }, /invalid size/],
      ['a fractional size', { v: 1, type: 'dir', entries: [entry({ size: 1.5 })] }, /invalid size/],
      ['an extra entry field', { v: 1, type: 'dir', entries: [entry({ owner: 'root' })] }, /unexpected fields/],
      ['a directory linking a raw block', { v: 1, type: 'dir', entries: [entry({ kind: 'dir', mode: MODE_DIR })] }, /does not link a manifest/],
      ['a large file linking a raw block', { v: 1, type: 'dir', entries: [entry({ size: CHUNK_SIZE + 1 })] }, /must link a file node/],
      ['unsorted entries', { v: 1, type: 'dir', entries: [entry({ name: 'b' }), entry({ name: 'a' })] }, /not strictly sorted/],
      ['duplicate entries', { v: 1, type: 'dir', entries: [entry({}), entry({})] }, /not strictly sorted/],
      ['names equal under NFC', { v: 1, type: 'dir', entries: [entry({ name: 'e\u0301' }), entry({ name: 'é' })] }, /collide under Unicode NFC/],
      [
        'a symlink whose size is not its target length',
        { v: 1, type: 'dir', entries: [{ name: 'l', kind: 'symlink', mode: MODE_SYMLINK, size: 9, target: 'x' }] },
        /size does not match/,
      ],
      ['an empty symlink target', { v: 1, type: 'dir', entries: [{ name: 'l', kind: 'symlink', mode: MODE_SYMLINK, size: 0, target: '' }] }, /empty target/],
      ['a file node with the wrong chunk size', { v: 1, type: 'file', size: 3 * CHUNK_SIZE, chunkSize: 4096, chunks: [] }, /chunk size 4096/],
      ['a file node for a small file', { v: 1, type: 'file', size: 10, chunkSize: CHUNK_SIZE, chunks: [] }, /out of range/],
      [
        'a file node with too few chunks',
        { v: 1, type: 'file', size: 2 * CHUNK_SIZE + 1, chunkSize: CHUNK_SIZE, chunks: [(valid as { cid: CID }).cid] },
        /must list 3 chunks/,
      ],
    ])('%s', (_what, data, why) => refuse(data, why));

    it('a CID of another version or hash in an entry', () => {
      const v0 = CID.parse('QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG');
      refuse({ v: 1, type: 'dir', entries: [entry({ cid: v0 })] }, /invalid CID/);
    });

    it('a non-canonical encoding of a valid manifest (integer not in its shortest form)', () => {
      const good = encodeDirManifest([]).bytes; // a3 61 76 01 ...: rewrite `v: 1` as a two-byte integer
      const bad = Buffer.concat([Buffer.from([0xa3, 0x61, 0x76, 0x18, 0x01]), Buffer.from(good.subarray(4))]);
      const cid = cidFromDigest(DAG_CBOR_CODE, sha256(bad));
      expectCode(() => decodeNode(cid, bad, ''), 'SNAPSHOT_MANIFEST_INVALID', /not DAG-CBOR|canonical/);
    });

    it('a block that is not DAG-CBOR at all', () => {
      const bytes = new Uint8Array([0xff, 0x00]);
      expectCode(() => decodeNode(cidFromDigest(DAG_CBOR_CODE, sha256(bytes)), bytes, ''), 'SNAPSHOT_MANIFEST_INVALID', /not DAG-CBOR/);
    });
  });
});

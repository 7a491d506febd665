import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CID } from 'multiformats/cid';
import * as dagCbor from '@ipld/dag-cbor';
import { sha256 } from 'multiformats/hashes/sha2';
import * as raw from 'multiformats/codecs/raw';
import { ManualClock } from '@assay/core';
import { DEFAULT_POLICY, MemoryTree, policyDigest, takeSnapshot } from '@assay/snapshots';

/**
 * The worked example of docs/snapshots-format.md, recomputed twice: by Assay's walk over an in-memory tree, and
 * independently with multiformats + @ipld/dag-cbor. Every CID and hex string in the document must match.
 */
const doc = readFileSync(join(__dirname, '..', 'docs', 'snapshots-format.md'), 'utf8');
/** The document wraps long hex at 112 characters: compare without whitespace. */
const flat = doc.replace(/\s+/g, '');

async function cidOf(code: number, bytes: Uint8Array): Promise<CID> {
  return CID.createV1(code, await sha256.digest(bytes));
}

describe('docs/snapshots-format.md worked example', () => {
  it('matches an independent computation, byte for byte', async () => {
    const te = new TextEncoder();
    const hello = te.encode('hello\n');
    const run = te.encode('#!/bin/sh\necho hi\n');
    const helloCid = await cidOf(raw.code, hello);
    const runCid = await cidOf(raw.code, run);
    const empty = dagCbor.encode({ v: 1, type: 'dir', entries: [] });
    const bin = dagCbor.encode({ v: 1, type: 'dir', entries: [{ name: 'run', kind: 'file', mode: 0o755, size: run.length, cid: runCid }] });
    const emptyCid = await cidOf(dagCbor.code, empty);
    const binCid = await cidOf(dagCbor.code, bin);
    const root = dagCbor.encode({
      v: 1,
      type: 'dir',
      entries: [
        { name: 'bin', kind: 'dir', mode: 0o755, size: run.length, cid: binCid },
        { name: 'empty', kind: 'dir', mode: 0o755, size: 0, cid: emptyCid },
        { name: 'hello.txt', kind: 'file', mode: 0o644, size: hello.length, cid: helloCid },
        { name: 'link', kind: 'symlink', mode: 0o777, size: 9, target: 'hello.txt' },
      ],
    });
    const rootCid = await cidOf(dagCbor.code, root);
    for (const [what, value] of [
      ['hello content CID', helloCid.toString()],
      ['hello bytes', Buffer.from(hello).toString('hex')],
      ['run content CID', runCid.toString()],
      ['run bytes', Buffer.from(run).toString('hex')],
      ['empty manifest CID', emptyCid.toString()],
      ['empty manifest hex', Buffer.from(empty).toString('hex')],
      ['bin manifest CID', binCid.toString()],
      ['bin manifest hex', Buffer.from(bin).toString('hex')],
      ['root manifest hex', Buffer.from(root).toString('hex')],
      ['root CID', rootCid.toString()],
    ]) {
      expect([what, flat.includes(value as string)]).toEqual([what, true]);
    }

    // Assay's own walk over the same tree, built in another order, agrees.
    const tree = new MemoryTree().dir('empty').symlink('link', 'hello.txt').file('bin/run', run, 0o755).file('hello.txt', hello, 0o644);
    const ours = await takeSnapshot({ source: tree, store: null, clock: new ManualClock('2030-01-01') }, { dryRun: true });
    expect(ours.rootCid).toBe(rootCid.toString());
  });

  it('documents the file node and the default policy digest correctly', async () => {
    const data = new Uint8Array(1048577);
    const c0 = await cidOf(raw.code, data.subarray(0, 1048576));
    const c1 = await cidOf(raw.code, data.subarray(1048576));
    const node = dagCbor.encode({ v: 1, type: 'file', size: data.length, chunkSize: 1048576, chunks: [c0, c1] });
    for (const v of [c0.toString(), c1.toString(), Buffer.from(node).toString('hex'), (await cidOf(dagCbor.code, node)).toString()]) {
      expect(flat.includes(v)).toBe(true);
    }
    const tree = new MemoryTree().file('f', data);
    const ours = await takeSnapshot({ source: tree, store: null, clock: new ManualClock('2030-01-01') }, { dryRun: true });
    const listing = dagCbor.encode({
      v: 1,
      type: 'dir',
      entries: [{ name: 'f', kind: 'file', mode: 0o644, size: data.length, cid: await cidOf(dagCbor.code, node) }],
    });
    expect(ours.rootCid).toBe((await cidOf(dagCbor.code, listing)).toString());
    expect(flat.includes(policyDigest(DEFAULT_POLICY))).toBe(true);
    expect(flat.includes('bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku')).toBe(true);
  });
});

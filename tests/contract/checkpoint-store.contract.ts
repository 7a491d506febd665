/** The CheckpointStore contract, run against every adapter (memory, SQLite). */
import { isAssayError } from '@assay/core';
import type { CheckpointStore } from '../../libs/ledger/src/ports/checkpoint-store.port';

export interface CheckpointStoreUnderTest {
  store: CheckpointStore;
  /** For persistent adapters: close and open again on the same storage. */
  reopen?: () => Promise<CheckpointStore>;
  cleanup(): Promise<void>;
}

const root = (n: number): string => Buffer.alloc(32, n).toString('base64');
const note = (size: number): string => `example.org/log\n${size}\n${root(size)}\n\n— example.org/log AAAAAA==\n`;

export function checkpointStoreContract(name: string, make: () => Promise<CheckpointStoreUnderTest>): void {
  describe(`CheckpointStore contract: ${name}`, () => {
    let under: CheckpointStoreUnderTest;
    beforeEach(async () => {
      under = await make();
    });
    afterEach(async () => {
      await under.cleanup();
    });

    it('starts empty', () => {
      expect(under.store.latest()).toBeNull();
      expect(under.store.all()).toEqual([]);
    });

    it('numbers checkpoints from 0 in issue order and returns what it stored', () => {
      const a = under.store.add({ treeSize: 0, rootHash: root(0), note: note(0) });
      const b = under.store.add({ treeSize: 5, rootHash: root(5), note: note(5) });
      const c = under.store.add({ treeSize: 9, rootHash: root(9), note: note(9) });
      expect([a.seq, b.seq, c.seq]).toEqual([0, 1, 2]);
      expect(b).toEqual({ seq: 1, treeSize: 5, rootHash: root(5), note: note(5) });
      expect(under.store.latest()).toEqual(c);
      expect(under.store.all()).toEqual([a, b, c]);
    });

    it('keeps the note text exactly (unicode, blank lines, trailing newline)', () => {
      const text = 'origin ✓\n3\n' + root(3) + '\n\n— origin ✓ q83vEg==\n— witness AAAA\n';
      under.store.add({ treeSize: 3, rootHash: root(3), note: text });
      expect(under.store.latest()!.note).toBe(text);
    });

    it('hands out copies: changing a returned checkpoint changes nothing stored', () => {
      const a = under.store.add({ treeSize: 1, rootHash: root(1), note: note(1) });
      a.treeSize = 99;
      const l = under.store.latest()!;
      l.note = 'changed';
      expect(under.store.all()).toEqual([{ seq: 0, treeSize: 1, rootHash: root(1), note: note(1) }]);
    });

    it.each([
      ['a negative tree size', { treeSize: -1, rootHash: root(1), note: note(1) }],
      ['a fractional tree size', { treeSize: 1.5, rootHash: root(1), note: note(1) }],
      ['a root that is not base64 of 32 bytes', { treeSize: 1, rootHash: Buffer.alloc(31).toString('base64'), note: note(1) }],
      ['a hex root', { treeSize: 1, rootHash: 'ab'.repeat(32), note: note(1) }],
      ['an empty note', { treeSize: 1, rootHash: root(1), note: '' }],
    ])('refuses %s with LEDGER_INVALID_CHECKPOINT', (_what, cp) => {
      let err: unknown;
      try {
        under.store.add(cp);
      } catch (e) {
        err = e;
      }
      expect(isAssayError(err) && err.code).toBe('LEDGER_INVALID_CHECKPOINT');
      expect(under.store.all()).toEqual([]);
    });

    it('remembers checkpoints across a reopen (persistent adapters)', async () => {
      if (!under.reopen) return; // nothing to remember for an in-memory adapter
      under.store.add({ treeSize: 4, rootHash: root(4), note: note(4) });
      under.store.add({ treeSize: 8, rootHash: root(8), note: note(8) });
      const again = await under.reopen();
      expect(again.latest()).toEqual({ seq: 1, treeSize: 8, rootHash: root(8), note: note(8) });
      expect(again.add({ treeSize: 10, rootHash: root(10), note: note(10) }).seq).toBe(2);
      expect(again.all().map((c) => c.treeSize)).toEqual([4, 8, 10]);
    });
  });
}

import * as fs from 'node:fs';
import { fsyncDirectory } from '@assay/core';
import type { CID } from 'multiformats/cid';
import { RAW_CODE, type Block } from '../domain/format';
import { ioError, snapshotError } from '../domain/snapshot.errors';
import type { BlobBatch, PackStaging, PinRecord } from '../ports/blob-store.port';
import { keyOf, rawKey } from './blob-keys';
import { appendRecord, type IndexEntry, type Loc, type PackIndex } from './pack-index';
import { PackWriter, fdatasyncAsync, type PackFiles } from './pack-writer';

/** What a batch uses of its store (FsBlobStore): dedup checks, reads, the index, and the pins and heads it commits. */
export interface BatchStore extends PackFiles {
  readonly dir: string;
  readonly index: PackIndex;
  hasKey(key: string, cid: CID | null): boolean;
  get(cid: CID): Promise<Uint8Array>;
  readPacked(cid: CID, key: string, loc: Loc, fd?: number): Uint8Array;
  clockNow(): number;
  writePin(rec: PinRecord): void;
  writeHead(source: string, cid: string): void;
}

/**
 * A batch of the pack store: appends to pack files of its own (through a PackWriter, and adopts those the hashing
 * threads wrote), and commits by fdatasync of its packs, then one index record, then the pins and heads.
 */
export class FsBatch implements BlobBatch {
  readonly added = { blobs: 0, bytes: 0 };
  private readonly staged = new Map<string, IndexEntry>();
  private open = true;
  private readonly writer: PackWriter;
  /** Packs written by the hashing threads for this batch. */
  private readonly adopted = new Set<number>();
  private tableBuf: SharedArrayBuffer | null = null;

  constructor(
    private readonly store: BatchStore,
    readonly id: string,
    private readonly writerFile: string,
    private readonly durable: boolean,
  ) {
    this.writer = new PackWriter(store, durable);
  }

  private alive(): void {
    if (!this.open) throw snapshotError('SNAPSHOT_IO', 'the blob batch is already committed or aborted');
  }

  async has(cid: CID): Promise<boolean> {
    const key = keyOf(cid);
    return this.staged.has(key) || this.store.hasKey(key, cid);
  }

  private add(key: string, data: Uint8Array): void {
    const at = this.writer.append(key, data);
    this.staged.set(key, { key, pack: at.pack, offset: at.offset, length: data.length, timeMs: 0 });
    this.added.blobs += 1;
    this.added.bytes += data.length;
  }

  async put(block: Block): Promise<boolean> {
    this.alive();
    const key = keyOf(block.cid);
    if (this.staged.has(key) || this.store.hasKey(key, block.cid)) return false;
    try {
      this.add(key, block.bytes);
    } catch (e) {
      throw ioError('writing a pack of', this.store.dir, e);
    }
    return true;
  }

  putRawChunks(data: Uint8Array, lengths: readonly number[], digests: Uint8Array, release?: () => void): number {
    this.alive();
    let off = 0;
    let bytes = 0;
    const items: Array<{ key: string; data: Uint8Array }> = [];
    try {
      for (let i = 0; i < lengths.length; i++) {
        const len = lengths[i] as number;
        const key = rawKey(digests, i);
        if (!this.staged.has(key) && !this.store.hasKey(key, null)) {
          // Reserve the key now, so a duplicate later in this same call is skipped.
          this.staged.set(key, { key, pack: -1, offset: 0, length: len, timeMs: 0 });
          items.push({ key, data: data.subarray(off, off + len) });
          bytes += len;
        }
        off += len;
      }
      const at = this.writer.appendMany(items, release ?? null);
      items.forEach((it, i) => {
        const where = at[i] as { pack: number; offset: number };
        this.staged.set(it.key, { key: it.key, pack: where.pack, offset: where.offset, length: it.data.length, timeMs: 0 });
      });
    } catch (e) {
      for (const it of items) if (this.staged.get(it.key)?.pack === -1) this.staged.delete(it.key);
      throw ioError('writing a pack of', this.store.dir, e);
    }
    this.added.blobs += items.length;
    this.added.bytes += bytes;
    return bytes;
  }

  async get(cid: CID): Promise<Uint8Array> {
    const key = keyOf(cid);
    const s = this.staged.get(key);
    if (s) {
      await this.writer.readable();
      if (this.adopted.has(s.pack)) return this.store.readPacked(cid, key, s);
      return this.store.readPacked(cid, key, s, this.writer.fdOf(s.pack));
    }
    return this.store.get(cid);
  }

  packStaging(): PackStaging {
    return {
      dir: this.store.packsDir,
      batch: this.id,
      maxBytes: this.store.packMaxBytes,
      table: () => (this.tableBuf ??= this.buildTable()),
      adopt: (newPacks, written, digests) => this.adopt(newPacks, written, digests),
    };
  }

  /** The raw blobs in the index (open addressing, 32-byte slots), for the threads' dedup. */
  private buildTable(): SharedArrayBuffer {
    const raw: string[] = [];
    for (const key of this.store.index.keys()) if (key.charCodeAt(1) === RAW_CODE) raw.push(key);
    let slots = 1024;
    while (slots < raw.length * 2) slots *= 2;
    const sab = new SharedArrayBuffer(slots * 32);
    const tab = Buffer.from(sab);
    for (const key of raw) {
      let i = ((key.charCodeAt(4) | (key.charCodeAt(5) << 8) | (key.charCodeAt(6) << 16) | (key.charCodeAt(7) << 24)) >>> 0) & (slots - 1);
      while (tab.readUInt32LE(i * 32) !== 0 || tab.readUInt32LE(i * 32 + 4) !== 0) i = (i + 1) & (slots - 1);
      tab.write(key.slice(4), i * 32, 32, 'latin1');
    }
    return sab;
  }

  private adopt(newPacks: readonly number[], written: readonly number[], digests: Uint8Array): void {
    for (const p of newPacks) this.adopted.add(p);
    for (let k = 0; k * 4 < written.length; k++) {
      const key = rawKey(digests, k);
      const pack = written[k * 4] as number;
      if (this.staged.has(key) || this.store.hasKey(key, null)) continue; // written twice (two threads): dead bytes
      const length = written[k * 4 + 2] as number;
      this.staged.set(key, { key, pack, offset: written[k * 4 + 1] as number, length, timeMs: 0 });
      this.added.blobs += 1;
      this.added.bytes += length;
    }
  }

  async commit(opts: { pins?: readonly PinRecord[]; heads?: ReadonlyArray<{ source: string; cid: string }> } = {}): Promise<void> {
    this.alive();
    try {
      if (this.staged.size === 0) {
        for (const p of this.adopted) fs.rmSync(this.store.packPath(p), { force: true });
        this.adopted.clear();
      } else {
        // 1. Pack bytes durable. 2. One index record, durable. Only then the pins and heads.
        await this.writer.finish();
        // Thread packs holding only chunks another thread also wrote: nothing will point into them.
        const referenced = new Set<number>();
        for (const e of this.staged.values()) referenced.add(e.pack);
        for (const p of [...this.adopted]) {
          if (referenced.has(p)) continue;
          fs.rmSync(this.store.packPath(p), { force: true });
          this.adopted.delete(p);
        }
        if (this.durable && this.adopted.size > 0) {
          await Promise.all(
            [...this.adopted].map(async (p) => {
              const fd = fs.openSync(this.store.packPath(p), fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
              try {
                await fdatasyncAsync(fd);
              } finally {
                fs.closeSync(fd);
              }
            }),
          );
          fsyncDirectory(this.store.packsDir);
        }
        const now = this.store.clockNow();
        const entries = [...this.staged.values()].map((e) => ({ ...e, timeMs: now }));
        appendRecord(this.store.index.path, entries, this.durable);
        // The next process loads the table in one read (a cache: failures only cost that process a full read).
        this.store.index.refresh();
        this.store.index.saveTable();
      }
      this.writer.close();
      for (const p of opts.pins ?? []) this.store.writePin(p);
      for (const h of opts.heads ?? []) this.store.writeHead(h.source, h.cid);
    } catch (e) {
      await this.abort();
      throw e instanceof Error && 'code' in e && String((e as { code: unknown }).code).startsWith('SNAPSHOT_')
        ? e
        : ioError('committing blobs to', this.store.dir, e);
    }
    this.open = false;
    fs.rmSync(this.writerFile, { force: true });
  }

  async abort(): Promise<void> {
    if (!this.open) return;
    this.open = false;
    await this.writer.settle();
    // Packs are this batch's own: removed whole. (If the index record was already appended, the blobs are
    // complete and durable; their packs are then kept.)
    if (!this.committedIndex()) {
      this.writer.discard();
      for (const p of this.adopted) fs.rmSync(this.store.packPath(p), { force: true });
    } else this.writer.close();
    fs.rmSync(this.writerFile, { force: true });
  }

  private committedIndex(): boolean {
    const first = this.staged.values().next().value as IndexEntry | undefined;
    if (!first) return false;
    this.store.index.refresh();
    const loc = this.store.index.get(first.key);
    return loc !== undefined && loc.pack === first.pack && loc.offset === first.offset;
  }
}

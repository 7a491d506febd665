import type { CID } from 'multiformats/cid';
import { systemClock, type Clock } from '@assay/core';
import { bytesEqual, cidFromDigest, sha256, type Block } from '../domain/format';
import { snapshotError } from '../domain/snapshot.errors';
import type { BlobBatch, BlobStore, CompactReport, PinRecord, StoredBlob } from '../ports/blob-store.port';

export function checkBlob(cid: CID, bytes: Uint8Array, where: string): void {
  const actual = cidFromDigest(cid.code as 0x55 | 0x71, sha256(bytes));
  if (!bytesEqual(actual.multihash.digest, cid.multihash.digest)) {
    throw snapshotError('SNAPSHOT_BLOB_CORRUPT', `blob ${cid.toString()} (${where}) does not match its CID: its bytes hash to ${actual.toString()}`, {
      cid: cid.toString(),
      actual: actual.toString(),
      where,
    });
  }
}

export function missingBlob(cid: CID, where: string): Error {
  return snapshotError('SNAPSHOT_BLOB_MISSING', `blob ${cid.toString()} (${where}) is not in the store`, {
    cid: cid.toString(),
    where,
  });
}

/** The in-memory fake of the blob store: same contract, including the GC protocol. */
export class MemoryBlobStore implements BlobStore {
  /** Exposed so tests can tamper with stored bytes. */
  readonly blobs = new Map<string, { cid: CID; bytes: Uint8Array; mtimeMs: number }>();
  private readonly pinned = new Map<string, PinRecord>();
  private readonly heads = new Map<string, string>();
  private writers = 0;
  private gcHeld = false;

  constructor(private readonly clock: Clock = systemClock) {}

  async has(cid: CID): Promise<boolean> {
    return this.blobs.has(cid.toString());
  }

  async get(cid: CID): Promise<Uint8Array> {
    const b = this.blobs.get(cid.toString());
    if (!b) throw missingBlob(cid, 'memory store');
    checkBlob(cid, b.bytes, 'memory store');
    return b.bytes;
  }

  async begin(): Promise<BlobBatch> {
    if (this.gcHeld) throw snapshotError('SNAPSHOT_STORE_BUSY', 'the blob store is being garbage collected');
    this.writers += 1;
    const staged = new Map<string, Block>();
    let open = true;
    const added = { blobs: 0, bytes: 0 };
    const finish = () => {
      if (open) {
        open = false;
        this.writers -= 1;
      }
    };
    const batch: BlobBatch = {
      added,
      has: async (cid) => staged.has(cid.toString()) || this.blobs.has(cid.toString()),
      put: async (block) => {
        if (!open) throw snapshotError('SNAPSHOT_IO', 'the blob batch is already committed or aborted');
        const k = block.cid.toString();
        if (staged.has(k) || this.blobs.has(k)) return false;
        staged.set(k, { cid: block.cid, bytes: Uint8Array.from(block.bytes) });
        added.blobs += 1;
        added.bytes += block.bytes.length;
        return true;
      },
      get: async (cid) => {
        const s = staged.get(cid.toString());
        if (s) {
          checkBlob(cid, s.bytes, 'staged');
          return s.bytes;
        }
        return this.get(cid);
      },
      commit: async (opts = {}) => {
        if (!open) throw new Error('internal: batch already finished');
        const now = this.clock.now().getTime();
        for (const [k, b] of staged) this.blobs.set(k, { cid: b.cid, bytes: b.bytes, mtimeMs: now });
        for (const p of opts.pins ?? []) this.pinned.set(p.cid, p);
        for (const h of opts.heads ?? []) this.heads.set(h.source, h.cid);
        finish();
      },
      abort: async () => {
        staged.clear();
        finish();
      },
    };
    return batch;
  }

  async *list(): AsyncIterable<StoredBlob> {
    for (const b of [...this.blobs.values()]) yield { cid: b.cid, size: b.bytes.length, mtimeMs: b.mtimeMs };
  }

  async delete(cid: CID): Promise<boolean> {
    return this.blobs.delete(cid.toString());
  }

  async pin(rec: PinRecord): Promise<void> {
    this.pinned.set(rec.cid, rec);
  }

  async unpin(cid: CID): Promise<boolean> {
    return this.pinned.delete(cid.toString());
  }

  async pins(): Promise<PinRecord[]> {
    return [...this.pinned.values()].sort((a, b) => a.cid.localeCompare(b.cid));
  }

  async head(source: string): Promise<string | null> {
    return this.heads.get(source) ?? null;
  }

  async lockForGc(): Promise<{ release(): Promise<void> }> {
    if (this.gcHeld) throw snapshotError('SNAPSHOT_STORE_BUSY', 'another garbage collection is running');
    if (this.writers > 0) {
      throw snapshotError('SNAPSHOT_STORE_BUSY', `${this.writers} snapshot writer(s) are active; try again when they finish`);
    }
    this.gcHeld = true;
    return {
      release: async () => {
        this.gcHeld = false;
      },
    };
  }

  async compact(): Promise<CompactReport> {
    return { packsRewritten: 0, packsRemoved: 0, bytesReclaimed: 0 };
  }

  async cleanupStaging(): Promise<number> {
    return 0;
  }

  async close(): Promise<void> {}
}

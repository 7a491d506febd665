import * as fs from 'node:fs';
import type { CID } from 'multiformats/cid';
import { CHUNK_SIZE, MAX_NODE_BYTES, RAW_CODE } from '../domain/format';
import { snapshotError } from '../domain/snapshot.errors';
import { checkBlob } from './memory-blob-store.adapter';
import { BLOB_HEADER, CID_BYTES, PACK_MAGIC, type Loc } from './pack-index';

/** Reads packed blobs, checked against their CID, through a small cache of open pack files (at most 64). */
export class PackReader {
  private readonly readFds = new Map<number, number>();

  constructor(private readonly packPath: (pack: number) => string) {}

  private readFd(pack: number): number {
    let fd = this.readFds.get(pack);
    if (fd === undefined) {
      fd = fs.openSync(this.packPath(pack), fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
      if (this.readFds.size >= 64) {
        const [first, firstFd] = this.readFds.entries().next().value as [number, number];
        this.readFds.delete(first);
        fs.closeSync(firstFd);
      }
      this.readFds.set(pack, fd);
    }
    return fd;
  }

  dropReadFd(pack: number): void {
    const fd = this.readFds.get(pack);
    if (fd !== undefined) {
      this.readFds.delete(pack);
      fs.closeSync(fd);
    }
  }

  /** Reads a packed blob and checks its header and its bytes against the CID asked for. */
  readPacked(cid: CID, key: string, loc: Loc, fd?: number): Uint8Array {
    const where = `${this.packPath(loc.pack)} at offset ${loc.offset}`;
    const limit = cid.code === RAW_CODE ? CHUNK_SIZE : MAX_NODE_BYTES;
    if (loc.length > limit || loc.offset < PACK_MAGIC.length + BLOB_HEADER) {
      throw snapshotError(
        'SNAPSHOT_BLOB_CORRUPT',
        `blob ${cid.toString()} (${where}) is indexed with ${loc.length} bytes, more than the ${limit} a block may have`,
        {
          cid: cid.toString(),
          where,
        },
      );
    }
    const buf = Buffer.allocUnsafe(BLOB_HEADER + loc.length);
    const f = fd ?? this.readFd(loc.pack);
    let n = 0;
    while (n < buf.length) {
      const r = fs.readSync(f, buf, n, buf.length - n, loc.offset - BLOB_HEADER + n);
      if (r === 0) break;
      n += r;
    }
    if (n < buf.length) {
      throw snapshotError('SNAPSHOT_BLOB_CORRUPT', `blob ${cid.toString()} (${where}) is cut short: ${n - BLOB_HEADER} of ${loc.length} bytes`, {
        cid: cid.toString(),
        where,
      });
    }
    if (buf.toString('latin1', 0, CID_BYTES) !== key || buf.readUInt32LE(CID_BYTES) !== loc.length) {
      throw snapshotError('SNAPSHOT_BLOB_CORRUPT', `blob ${cid.toString()} (${where}): the pack's header there names another blob`, {
        cid: cid.toString(),
        where,
      });
    }
    const bytes = new Uint8Array(buf.buffer, buf.byteOffset + BLOB_HEADER, loc.length);
    checkBlob(cid, bytes, where);
    return bytes;
  }

  /** Closes every cached pack file. */
  close(): void {
    for (const fd of this.readFds.values()) fs.closeSync(fd);
    this.readFds.clear();
  }
}

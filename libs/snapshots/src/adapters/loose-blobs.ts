import * as fs from 'node:fs';
import { join } from 'node:path';
import { CID } from 'multiformats/cid';
import { CHUNK_SIZE, MAX_NODE_BYTES, RAW_CODE, isFormatCid } from '../domain/format';
import { snapshotError } from '../domain/snapshot.errors';
import type { StoredBlob } from '../ports/blob-store.port';
import { checkBlob, missingBlob } from './memory-blob-store.adapter';

/**
 * Loose blobs of the earlier layout (assay-blobs/1): `<dir>/blocks/<xx>/<cid>`, one file a blob, sharded by the
 * first byte of the digest. Still read, listed and deleted; never written.
 */

/** The shard folder (two hex digits) of a loose blob. */
export function shardOf(cid: CID): string {
  return ((cid.multihash.digest[0] ?? 0) + 0x100).toString(16).slice(1);
}

/**
 * The loose blobs under `blocks` (sorted by shard, then name) that `skip` does not pass over; files whose name is not
 * a format CID of their shard, and anything not a regular file, are not blobs.
 */
export function* listLooseBlobs(blocks: string, skip: (cid: CID) => boolean): Iterable<StoredBlob> {
  for (const shard of fs.readdirSync(blocks).sort()) {
    if (!/^[0-9a-f]{2}$/.test(shard)) continue;
    for (const name of fs.readdirSync(join(blocks, shard)).sort()) {
      let cid: CID;
      try {
        cid = CID.parse(name);
      } catch {
        continue;
      }
      if (!isFormatCid(cid) || cid.toString() !== name || shardOf(cid) !== shard) continue;
      if (skip(cid)) continue;
      const st = fs.lstatSync(join(blocks, shard, name), { throwIfNoEntry: false });
      if (!st || !st.isFile()) continue;
      yield { cid, size: st.size, mtimeMs: st.mtimeMs };
    }
  }
}

/** Removes the staged loose files (`.tmp.*`) crashed writers of the earlier layout left, older than `olderThanMs`. */
export function removeLooseStaging(blocks: string, nowMs: number, olderThanMs: number): number {
  let n = 0;
  for (const shard of fs.readdirSync(blocks)) {
    if (!/^[0-9a-f]{2}$/.test(shard)) continue;
    for (const name of fs.readdirSync(join(blocks, shard))) {
      if (!name.startsWith('.tmp.')) continue;
      const st = fs.lstatSync(join(blocks, shard, name), { throwIfNoEntry: false });
      if (!st || nowMs - st.mtimeMs < olderThanMs) continue;
      fs.rmSync(join(blocks, shard, name), { force: true });
      n += 1;
    }
  }
  return n;
}

/** Reads one loose blob file (earlier layout) and checks it against its CID (never follows a symlink, bounds the size first). */
export function readBlobFile(cid: CID, path: string): Uint8Array {
  let fd: number;
  try {
    fd = fs.openSync(path, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') throw missingBlob(cid, path);
    throw snapshotError('SNAPSHOT_BLOB_CORRUPT', `blob ${cid.toString()} (${path}) cannot be opened: ${(e as Error).message}`, {
      cid: cid.toString(),
      where: path,
    });
  }
  try {
    const st = fs.fstatSync(fd);
    const limit = cid.code === RAW_CODE ? CHUNK_SIZE : MAX_NODE_BYTES;
    if (!st.isFile() || st.size > limit) {
      throw snapshotError(
        'SNAPSHOT_BLOB_CORRUPT',
        `blob ${cid.toString()} (${path}) is ${st.isFile() ? `${st.size} bytes, more than the ${limit} a block may have` : 'not a regular file'}`,
        { cid: cid.toString(), where: path },
      );
    }
    const buf = Buffer.allocUnsafe(st.size);
    let n = 0;
    while (n < st.size) {
      const r = fs.readSync(fd, buf, n, st.size - n, n);
      if (r === 0) break;
      n += r;
    }
    const bytes = new Uint8Array(buf.buffer, buf.byteOffset, n);
    checkBlob(cid, bytes, path);
    return bytes;
  } finally {
    fs.closeSync(fd);
  }
}

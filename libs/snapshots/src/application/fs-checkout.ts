import * as fs from 'node:fs';
import { randomBytes } from 'node:crypto';
import { basename, dirname, join, resolve } from 'node:path';
import type { CID } from 'multiformats/cid';
import { silentProgress, type Progress } from '@assay/core';
import { RAW_CODE, chunkLength, type Entry } from '../domain/format';
import { resolvePolicy, type SnapshotPolicy } from '../domain/policy';
import { atPath, ioError, joinRel, showPath, snapshotError } from '../domain/snapshot.errors';
import { NodeReader, type BlockGetter } from './node-reader';

export interface CheckoutOptions {
  /** Limits applied while writing (a hostile snapshot can reuse one directory many times). Default policy. */
  readonly policy?: Partial<SnapshotPolicy>;
  readonly progress?: Progress;
}

export interface CheckoutReport {
  readonly root: string;
  readonly dir: string;
  readonly files: number;
  readonly directories: number;
  readonly symlinks: number;
  readonly bytes: number;
}

/**
 * Materialises a snapshot into `dest` (which must not exist, or be an empty directory). Everything is written
 * into a fresh sibling directory and renamed into place at the end, so `dest` either receives the complete tree
 * or nothing. Every blob is checked against its CID as it is read; the first mismatch aborts with the path and
 * the CID. Files are written sparse (zero runs of 64 KiB become holes); the policy's size limits count their
 * apparent size. Files get mode 0644 or 0755, directories 0755; symlinks are recreated as recorded (never followed);
 * hard links are not recreated (each path is its own file).
 */
export async function checkoutSnapshot(blocks: BlockGetter, root: CID, dest: string, options: CheckoutOptions = {}): Promise<CheckoutReport> {
  const policy = resolvePolicy(options.policy ?? {});
  const progress = options.progress ?? silentProgress;
  const target = resolve(dest);
  const existing = fs.lstatSync(target, { throwIfNoEntry: false });
  if (existing && (!existing.isDirectory() || fs.readdirSync(target).length > 0)) {
    throw snapshotError('SNAPSHOT_TARGET_NOT_EMPTY', `${target} exists and is not an empty directory; checkout needs a new or empty one`, {
      dir: target,
    });
  }
  const parent = dirname(target);
  if (!fs.existsSync(parent)) throw snapshotError('SNAPSHOT_ROOT_INVALID', `${parent} does not exist`, { dir: parent });
  const work = join(parent, `.${basename(target)}.assay-checkout-${randomBytes(6).toString('hex')}`);
  fs.mkdirSync(work, { mode: 0o700 });

  const reader = new NodeReader(blocks);
  const counts = { files: 0, directories: 0, symlinks: 0, bytes: 0, entries: 0 };
  const dirsToSeal: string[] = [];
  progress.start('checkout: bytes');

  const count = (rel: string, size: number) => {
    counts.entries += 1;
    if (counts.entries > policy.maxFiles) {
      throw snapshotError('SNAPSHOT_TOO_MANY_FILES', `${rel}: the snapshot has more than ${policy.maxFiles} entries (policy maxFiles)`, {
        path: rel,
        limit: policy.maxFiles,
      });
    }
    if (size > policy.maxFileBytes) {
      throw snapshotError('SNAPSHOT_FILE_TOO_LARGE', `${rel} is ${size} bytes, over the limit of ${policy.maxFileBytes} (policy maxFileBytes)`, {
        path: rel,
        limit: policy.maxFileBytes,
      });
    }
    if (counts.bytes + size > policy.maxTotalBytes) {
      throw snapshotError('SNAPSHOT_TOO_LARGE', `${rel} brings the checkout over ${policy.maxTotalBytes} bytes (policy maxTotalBytes)`, {
        path: rel,
        limit: policy.maxTotalBytes,
      });
    }
  };

  const get = async (cid: CID, rel: string): Promise<Uint8Array> => {
    try {
      return await blocks.get(cid);
    } catch (e) {
      throw atPath(e, rel);
    }
  };

  const writeFile = async (e: Entry & { kind: 'file' }, rel: string, abs: string): Promise<void> => {
    const fd = fs.openSync(abs, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW, 0o600);
    try {
      // Sparse: runs of zeros (HOLE_BLOCK at a time) are skipped, not written, and the size is set at the end, so a
      // file that is mostly holes costs the disk what it holds, not its apparent size (which is what the limits
      // count: `count` above).
      let pos = 0;
      const write = (bytes: Uint8Array) => {
        for (let at = 0; at < bytes.length; at += HOLE_BLOCK) {
          const len = Math.min(HOLE_BLOCK, bytes.length - at);
          const slice = bytes.subarray(at, at + len);
          if (!isZero(slice)) {
            let off = 0;
            while (off < len) off += fs.writeSync(fd, slice, off, len - off, pos + off);
          }
          pos += len;
        }
        counts.bytes += bytes.length;
        progress.tick(counts.bytes);
      };
      if (e.cid.code === RAW_CODE) {
        const bytes = await get(e.cid, rel);
        if (bytes.length !== e.size) throw sizeMismatch(rel, e.cid, e.size, bytes.length);
        write(bytes);
      } else {
        const node = await reader.readFileNode(e.cid, rel);
        if (node.size !== e.size) throw sizeMismatch(rel, e.cid, e.size, node.size);
        // Read the next chunk while this one is written.
        const fetch = (i: number): Promise<Uint8Array> => {
          const p = get(node.chunks[i] as CID, `${rel} (chunk ${i})`);
          p.catch(() => undefined); // handled when awaited; never an unhandled rejection if we stop early
          return p;
        };
        let next: Promise<Uint8Array> | null = fetch(0);
        for (let i = 0; i < node.chunks.length; i++) {
          const bytes: Uint8Array = await (next as Promise<Uint8Array>);
          next = i + 1 < node.chunks.length ? fetch(i + 1) : null;
          if (bytes.length !== chunkLength(node.size, i)) {
            throw sizeMismatch(`${rel} (chunk ${i})`, node.chunks[i] as CID, chunkLength(node.size, i), bytes.length);
          }
          write(bytes);
        }
      }
      fs.ftruncateSync(fd, e.size); // trailing holes
      fs.fchmodSync(fd, e.mode);
    } finally {
      fs.closeSync(fd);
    }
  };

  const dir = async (cid: CID, rel: string, abs: string, depth: number): Promise<void> => {
    if (depth > policy.maxDepth) {
      throw snapshotError('SNAPSHOT_TOO_DEEP', `${rel} is nested ${depth} levels deep (policy maxDepth=${policy.maxDepth})`, { path: rel });
    }
    const m = await reader.readDir(cid, rel);
    for (const e of m.entries) {
      const childRel = joinRel(rel, e.name);
      const childAbs = join(abs, e.name);
      count(childRel, e.kind === 'file' ? e.size : 0);
      if (e.kind === 'file') {
        await writeFile(e, childRel, childAbs);
        counts.files += 1;
      } else if (e.kind === 'symlink') {
        fs.symlinkSync(e.target, childAbs);
        counts.symlinks += 1;
      } else {
        fs.mkdirSync(childAbs, { mode: 0o700 });
        dirsToSeal.push(childAbs);
        counts.directories += 1;
        await dir(e.cid, childRel, childAbs, depth + 1);
      }
    }
  };

  try {
    await dir(root, '', work, 0);
    for (const d of dirsToSeal.reverse()) fs.chmodSync(d, 0o755);
    fs.chmodSync(work, 0o755);
    if (existing) fs.rmdirSync(target);
    fs.renameSync(work, target);
  } catch (e) {
    fs.rmSync(work, { recursive: true, force: true });
    progress.end();
    if (e instanceof Error && 'code' in e && String((e as { code: unknown }).code).startsWith('SNAPSHOT_')) throw e;
    throw ioError('checking out into', target, e);
  }
  progress.end(`${counts.files} files, ${counts.bytes} bytes`);
  return { root: root.toString(), dir: target, files: counts.files, directories: counts.directories, symlinks: counts.symlinks, bytes: counts.bytes };
}

/** Zero runs at least this long become holes in checked-out files. */
const HOLE_BLOCK = 64 * 1024;
const ZEROS = Buffer.alloc(HOLE_BLOCK);

function isZero(bytes: Uint8Array): boolean {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).equals(ZEROS.subarray(0, bytes.length));
}

function sizeMismatch(rel: string, cid: CID, expected: number, actual: number): Error {
  return snapshotError('SNAPSHOT_MANIFEST_INVALID', `${showPath(rel)}: block ${cid.toString()} has ${actual} bytes, expected ${expected}`, {
    path: rel,
    cid: cid.toString(),
  });
}

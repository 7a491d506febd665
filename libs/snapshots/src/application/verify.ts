import type { CID } from 'multiformats/cid';
import { silentProgress, type Progress } from '@assay/core';
import { MAX_SNAPSHOT_DEPTH, RAW_CODE, chunkLength, type Entry } from '../domain/format';
import { atPath, joinRel, showPath, snapshotError } from '../domain/snapshot.errors';
import { NodeReader, type BlockGetter } from './node-reader';

export interface VerifyReport {
  readonly root: string;
  /** Distinct blocks read and checked. */
  readonly blocks: number;
  readonly files: number;
  readonly directories: number;
  readonly symlinks: number;
  /** Total file bytes (once per path). */
  readonly bytes: number;
}

interface Info {
  size: number;
  files: number;
  directories: number;
  symlinks: number;
}

export interface VerifyOptions {
  readonly progress?: Progress;
  /**
   * Sizes of raw blocks already read and checked against their CIDs (an import checks each block as it
   * arrives); those are not read again.
   */
  readonly knownRaw?: ReadonlyMap<string, number>;
  /**
   * Entries of the root directory whose content is withheld (a result bundle carries a task's public files, not its
   * hidden `tests/` and `solution/`): their blocks are not read, and their sizes are taken as the root manifest
   * records them. Everything else is checked as usual.
   */
  readonly withholdRootEntries?: readonly string[];
}

function mismatch(where: string, cid: CID, why: string): Error {
  return snapshotError('SNAPSHOT_MANIFEST_INVALID', `${showPath(where)}: ${why} (block ${cid.toString()})`, {
    path: where,
    cid: cid.toString(),
  });
}

/**
 * Checks a whole snapshot: every block is read and checked against its CID (by the store), every node is
 * validated, and every recorded size is checked against the content (file sizes against chunk lengths,
 * directory sizes against the sum beneath). Shared subtrees are checked once, so a hostile DAG that reuses a
 * directory many times costs only its distinct blocks. Fails on the first problem, naming the path and CID.
 */
export async function verifySnapshot(blocks: BlockGetter, root: CID, options: VerifyOptions = {}): Promise<VerifyReport> {
  const reader = new NodeReader(blocks);
  const progress = options.progress ?? silentProgress;
  const known = options.knownRaw ?? new Map<string, number>();
  const withheld = new Set(options.withholdRootEntries ?? []);
  const rawSeen = new Map<string, number>();
  const dirs = new Map<string, Info>();
  const fileNodes = new Map<string, number>();
  let count = 0;
  let bytesRead = 0;
  progress.start('verify: bytes');

  const rawLength = async (cid: CID, where: string): Promise<number> => {
    const k = cid.toString();
    const have = rawSeen.get(k) ?? known.get(k);
    if (have !== undefined) return have;
    let bytes: Uint8Array;
    try {
      bytes = await blocks.get(cid);
    } catch (e) {
      throw atPath(e, where);
    }
    rawSeen.set(k, bytes.length);
    count += 1;
    bytesRead += bytes.length;
    progress.tick(bytesRead);
    return bytes.length;
  };

  const fileSize = async (e: Entry & { kind: 'file' }, where: string): Promise<number> => {
    if (e.cid.code === RAW_CODE) return rawLength(e.cid, where);
    const k = e.cid.toString();
    const done = fileNodes.get(k);
    if (done !== undefined) return done;
    const node = await reader.readFileNode(e.cid, where);
    count += 1;
    for (let i = 0; i < node.chunks.length; i++) {
      const c = node.chunks[i] as CID;
      const len = await rawLength(c, `${where} (chunk ${i})`);
      if (len !== chunkLength(node.size, i)) {
        throw mismatch(where, c, `chunk ${i} is ${len} bytes, expected ${chunkLength(node.size, i)}`);
      }
    }
    fileNodes.set(k, node.size);
    return node.size;
  };

  const dir = async (cid: CID, where: string, depth: number): Promise<Info> => {
    const k = cid.toString();
    const done = dirs.get(k);
    if (done) return done;
    if (depth > MAX_SNAPSHOT_DEPTH) throw mismatch(where, cid, `nested deeper than ${MAX_SNAPSHOT_DEPTH}`);
    const m = await reader.readDir(cid, where);
    count += 1;
    const info: Info = { size: 0, files: 0, directories: 0, symlinks: 0 };
    for (const e of m.entries) {
      const path = joinRel(where, e.name);
      if (depth === 0 && e.kind !== 'symlink' && withheld.has(e.name)) {
        info.size += e.size;
        continue;
      }
      if (e.kind === 'symlink') {
        info.symlinks += 1;
        continue;
      }
      if (e.kind === 'file') {
        const size = await fileSize(e, path);
        if (size !== e.size) throw mismatch(path, e.cid, `the manifest says ${e.size} bytes but the content is ${size}`);
        info.files += 1;
        info.size += size;
        continue;
      }
      const sub = await dir(e.cid, path, depth + 1);
      if (sub.size !== e.size) throw mismatch(path, e.cid, `the manifest says ${e.size} bytes beneath but there are ${sub.size}`);
      info.size += sub.size;
      info.files += sub.files;
      info.directories += sub.directories + 1;
      info.symlinks += sub.symlinks;
    }
    dirs.set(k, info);
    return info;
  };

  const info = await dir(root, '', 0);
  progress.end(`${root.toString()} ok`);
  return {
    root: root.toString(),
    blocks: count,
    files: info.files,
    directories: info.directories,
    symlinks: info.symlinks,
    bytes: info.size,
  };
}

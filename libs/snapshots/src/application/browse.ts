import type { CID } from 'multiformats/cid';
import { MODE_DIR, type Entry } from '../domain/format';
import { joinRel, snapshotError } from '../domain/snapshot.errors';
import { diffTrees, summarizeDiff, type DiffChange } from '../domain/diff';
import type { WorkspaceEditedData } from '../domain/events';
import { NodeReader, type BlockGetter } from './node-reader';

/** One line of `ls`: an entry as plain JSON. */
export interface ListedEntry {
  path: string;
  name: string;
  kind: Entry['kind'];
  mode: string;
  size: number;
  cid: string | null;
  target: string | null;
  /** For symlinks: true if the target, read lexically from this link's directory, leaves the snapshot. */
  outside: boolean | null;
}

export interface Listing {
  root: string;
  path: string;
  kind: Entry['kind'];
  /** Children of a directory (sorted), or the single entry for a file or symlink. */
  entries: ListedEntry[];
}

function lexicallyOutside(rel: string, target: string): boolean {
  if (target.startsWith('/')) return true;
  const stack = rel.split('/');
  stack.pop();
  for (const c of target.split('/')) {
    if (c === '' || c === '.') continue;
    if (c === '..') {
      if (stack.length === 0) return true;
      stack.pop();
    } else stack.push(c);
  }
  return false;
}

export function listedEntry(path: string, e: Entry): ListedEntry {
  return {
    path,
    name: e.name,
    kind: e.kind,
    mode: e.mode.toString(8).padStart(4, '0'),
    size: e.size,
    cid: e.kind === 'symlink' ? null : e.cid.toString(),
    target: e.kind === 'symlink' ? e.target : null,
    outside: e.kind === 'symlink' ? lexicallyOutside(path, e.target) : null,
  };
}

/** Lists a path inside a snapshot (`''` or `.` for the root) without materialising anything. */
export async function listSnapshot(blocks: BlockGetter, root: CID, path = ''): Promise<Listing> {
  const reader = new NodeReader(blocks);
  const parts = path.split('/').filter((p) => p !== '' && p !== '.');
  let cid = root;
  let where = '';
  let entry: Entry = { name: '', kind: 'dir', mode: MODE_DIR, size: 0, cid: root };
  for (const part of parts) {
    if (entry.kind !== 'dir') {
      throw snapshotError('SNAPSHOT_PATH_NOT_FOUND', `${where} is a ${entry.kind}, so ${path} does not exist in ${root.toString()}`, { path });
    }
    const m = await reader.readDir(cid, where);
    const next = m.entries.find((e) => e.name === part);
    if (!next) throw snapshotError('SNAPSHOT_PATH_NOT_FOUND', `${joinRel(where, part)} does not exist in ${root.toString()}`, { path });
    entry = next;
    where = joinRel(where, part);
    if (next.kind === 'dir') cid = next.cid;
  }
  if (entry.kind !== 'dir') return { root: root.toString(), path: where, kind: entry.kind, entries: [listedEntry(where, entry)] };
  const m = await reader.readDir(cid, where);
  return { root: root.toString(), path: where, kind: 'dir', entries: m.entries.map((e) => listedEntry(joinRel(where, e.name), e)) };
}

/** Every change from `a` to `b`, in path order, from manifests alone. */
export function diffSnapshots(blocks: BlockGetter, a: CID, b: CID): AsyncGenerator<DiffChange> {
  return diffTrees(new NodeReader(blocks), a, b);
}

/** Counts and a bounded path list, as in the WorkspaceEdited event. */
export function summarizeSnapshots(blocks: BlockGetter, a: CID, b: CID, maxPaths?: number): Promise<WorkspaceEditedData> {
  return summarizeDiff(new NodeReader(blocks), a, b, maxPaths);
}

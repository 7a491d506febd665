import type { CID } from 'multiformats/cid';
import { MAX_SNAPSHOT_DEPTH, type DirManifest, type Entry } from './format';
import { compareNameBytes, utf8 } from './names';
import { joinRel, snapshotError } from './snapshot.errors';
import { EVENT_MAX_PATHS, type ChangedPath, type DiffSummary, type WorkspaceEditedData } from './events';

/** Reads a directory manifest (already hash-checked and validated) by CID; `where` names it in errors. */
export interface DirReader {
  readDir(cid: CID, where: string): Promise<DirManifest>;
}

export interface DiffChange extends ChangedPath {
  modeBefore: number | null;
  modeAfter: number | null;
  /** Content CID (files, directories) before/after; null for symlinks and for the missing side. */
  cidBefore: string | null;
  cidAfter: string | null;
  /** Symlink targets before/after. */
  targetBefore: string | null;
  targetAfter: string | null;
}

/** The most changed paths one diff will enumerate before refusing (a guard against hostile shared subtrees). */
export const DEFAULT_DIFF_MAX_CHANGES = 10_000_000;

interface Budget {
  left: number;
}

function side(e: Entry | null): Pick<DiffChange, 'modeBefore' | 'cidBefore' | 'targetBefore' | 'sizeBefore'> {
  return {
    sizeBefore: e ? e.size : null,
    modeBefore: e ? e.mode : null,
    cidBefore: e && e.kind !== 'symlink' ? e.cid.toString() : null,
    targetBefore: e && e.kind === 'symlink' ? e.target : null,
  };
}

function change(path: string, kind: DiffChange['change'], before: Entry | null, after: Entry | null): DiffChange {
  const b = side(before);
  const a = side(after);
  return {
    path,
    change: kind,
    kind: (after ?? before)?.kind ?? 'file',
    ...b,
    sizeAfter: a.sizeBefore,
    modeAfter: a.modeBefore,
    cidAfter: a.cidBefore,
    targetAfter: a.targetBefore,
  };
}

function spend(budget: Budget): void {
  budget.left -= 1;
  if (budget.left < 0) {
    throw snapshotError('SNAPSHOT_TOO_MANY_FILES', `the diff has more than the limit of changed paths`, {});
  }
}

async function* whole(reader: DirReader, e: Entry, path: string, kind: 'added' | 'removed', depth: number, budget: Budget): AsyncGenerator<DiffChange> {
  spend(budget);
  yield kind === 'added' ? change(path, 'added', null, e) : change(path, 'removed', e, null);
  if (e.kind !== 'dir') return;
  if (depth > MAX_SNAPSHOT_DEPTH) throw snapshotError('SNAPSHOT_TOO_DEEP', `${path} is nested deeper than ${MAX_SNAPSHOT_DEPTH}`);
  const m = await reader.readDir(e.cid, path);
  for (const child of m.entries) yield* whole(reader, child, joinRel(path, child.name), kind, depth + 1, budget);
}

async function* diffDir(reader: DirReader, a: CID, b: CID, prefix: string, depth: number, budget: Budget): AsyncGenerator<DiffChange> {
  if (depth > MAX_SNAPSHOT_DEPTH) throw snapshotError('SNAPSHOT_TOO_DEEP', `${prefix} is nested deeper than ${MAX_SNAPSHOT_DEPTH}`);
  const [ma, mb] = await Promise.all([reader.readDir(a, prefix), reader.readDir(b, prefix)]);
  const ea = ma.entries;
  const eb = mb.entries;
  let i = 0;
  let j = 0;
  while (i < ea.length || j < eb.length) {
    const x = ea[i];
    const y = eb[j];
    const cmp = x && y ? compareNameBytes(utf8(x.name), utf8(y.name)) : x ? -1 : 1;
    if (cmp < 0 && x) {
      yield* whole(reader, x, joinRel(prefix, x.name), 'removed', depth + 1, budget);
      i++;
      continue;
    }
    if (cmp > 0 && y) {
      yield* whole(reader, y, joinRel(prefix, y.name), 'added', depth + 1, budget);
      j++;
      continue;
    }
    i++;
    j++;
    if (!x || !y) continue;
    const path = joinRel(prefix, x.name);
    if (x.kind !== y.kind) {
      yield* whole(reader, x, path, 'removed', depth + 1, budget);
      yield* whole(reader, y, path, 'added', depth + 1, budget);
    } else if (x.kind === 'dir' && y.kind === 'dir') {
      if (!x.cid.equals(y.cid)) yield* diffDir(reader, x.cid, y.cid, path, depth + 1, budget);
    } else if (x.kind === 'file' && y.kind === 'file') {
      if (!x.cid.equals(y.cid) || x.mode !== y.mode) {
        spend(budget);
        yield change(path, 'changed', x, y);
      }
    } else if (x.kind === 'symlink' && y.kind === 'symlink') {
      if (x.target !== y.target) {
        spend(budget);
        yield change(path, 'changed', x, y);
      }
    }
  }
}

/**
 * Every difference between two snapshots, in path order, reading manifests only (no file content). An added or
 * removed directory is reported, then everything beneath it. A path whose kind changed is removed then added.
 */
export async function* diffTrees(reader: DirReader, from: CID, to: CID, maxChanges = DEFAULT_DIFF_MAX_CHANGES): AsyncGenerator<DiffChange> {
  if (from.equals(to)) {
    await reader.readDir(from, '');
    return;
  }
  yield* diffDir(reader, from, to, '', 0, { left: maxChanges });
}

export function emptySummary(): DiffSummary {
  const s = () => ({ files: 0, symlinks: 0, directories: 0, bytes: 0 });
  return { added: s(), removed: s(), changed: { files: 0, symlinks: 0, modeOnly: 0, bytesBefore: 0, bytesAfter: 0 }, totalChanges: 0 };
}

/** Adds one change to a summary. */
export function addToSummary(s: DiffSummary, c: DiffChange): void {
  s.totalChanges += 1;
  if (c.change === 'changed') {
    if (c.kind === 'symlink') s.changed.symlinks += 1;
    else {
      s.changed.files += 1;
      s.changed.bytesBefore += c.sizeBefore ?? 0;
      s.changed.bytesAfter += c.sizeAfter ?? 0;
      if (c.cidBefore === c.cidAfter) s.changed.modeOnly += 1;
    }
    return;
  }
  const t = c.change === 'added' ? s.added : s.removed;
  if (c.kind === 'dir') t.directories += 1;
  else if (c.kind === 'symlink') t.symlinks += 1;
  else {
    t.files += 1;
    t.bytes += (c.change === 'added' ? c.sizeAfter : c.sizeBefore) ?? 0;
  }
}

/** The WorkspaceEdited data between two snapshots: complete counts, the first `maxPaths` paths. */
export async function summarizeDiff(reader: DirReader, from: CID, to: CID, maxPaths = EVENT_MAX_PATHS): Promise<WorkspaceEditedData> {
  const s = emptySummary();
  const paths: ChangedPath[] = [];
  for await (const c of diffTrees(reader, from, to)) {
    addToSummary(s, c);
    if (paths.length < maxPaths) {
      paths.push({ path: c.path, change: c.change, kind: c.kind, sizeBefore: c.sizeBefore, sizeAfter: c.sizeAfter });
    }
  }
  return { fromCid: from.toString(), toCid: to.toString(), ...s, paths, pathsTruncated: s.totalChanges > paths.length };
}

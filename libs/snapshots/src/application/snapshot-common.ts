/**
 * What takeSnapshot (a tree on disk) and ingestTar (a tar stream) share: the policy's limits on what a snapshot
 * holds, the manifest size limit, finding the previous snapshot, and the tail of a snapshot once its batch is
 * committed (SnapshotTaken, WorkspaceEdited against the previous snapshot, the result).
 */
import type { CID } from 'multiformats/cid';
import type { Clock, Progress } from '@assay/core';
import {
  CHUNK_SIZE,
  FORMAT_ID,
  MAX_NODE_BYTES,
  cidString,
  encodeSortedDirManifest,
  parseCid,
  validateSymlinkTarget,
  type Block,
  type Entry,
} from '../domain/format';
import { decodeUtf8Strict, displayBytes, findNfcCollision } from '../domain/names';
import { policyDigest, policyDocument, type PolicyDocument, type SnapshotPolicy } from '../domain/policy';
import { outsideSymlinks } from '../domain/symlinks';
import { joinRel, snapshotError } from '../domain/snapshot.errors';
import { boundedPaths, type SnapshotEventSink, type SnapshotTakenData, type WorkspaceEditedData } from '../domain/events';
import { summarizeDiff } from '../domain/diff';
import type { BlobBatch, BlobStore } from '../ports/blob-store.port';
import { NodeReader, type KnownManifests } from './node-reader';

export interface SnapshotResult {
  readonly root: CID;
  readonly rootCid: string;
  readonly dryRun: boolean;
  readonly files: number;
  readonly directories: number;
  readonly symlinks: number;
  readonly bytes: number;
  readonly newBlobs: number;
  readonly newBytes: number;
  readonly durationMs: number;
  readonly startedAt: string;
  readonly policy: PolicyDocument;
  readonly policyDigest: string;
  readonly outsideSymlinks: string[];
  readonly skippedSpecialFiles: string[];
  readonly cache: { hits: number; hashed: number };
  /** The events emitted (null on a dry run, or when there was no previous snapshot to diff against). */
  readonly taken: SnapshotTakenData | null;
  readonly edited: WorkspaceEditedData | null;
  /** Problems that did not prevent the snapshot (the stat cache could not be updated, no diff was possible). */
  readonly warnings: string[];
  /** Where the time went (monotonic clock, ms): diagnostics for benchmarks, not part of any event. */
  readonly phases: { walkMs: number; commitMs: number; cacheMs: number; eventsMs: number };
}

/** The counts of a snapshot being built, checked against the policy's limits as entries are met. */
export class TreeTally {
  files = 0;
  directories = 0;
  symlinks = 0;
  entries = 0;
  bytes = 0;
  /** Symlinks met (relative path to target), to classify once the tree is complete. */
  readonly links = new Map<string, string>();
  /** Special files skipped under specialFiles="skip". */
  readonly skipped: string[] = [];

  constructor(readonly policy: SnapshotPolicy) {}

  countEntry(rel: string): void {
    this.entries += 1;
    if (this.entries > this.policy.maxFiles) {
      throw snapshotError(
        'SNAPSHOT_TOO_MANY_FILES',
        `${rel}: the snapshot has more than ${this.policy.maxFiles} entries (policy maxFiles=${this.policy.maxFiles})`,
        {
          path: rel,
          limit: this.policy.maxFiles,
        },
      );
    }
  }

  countBytes(rel: string, size: number): void {
    if (size > this.policy.maxFileBytes) {
      throw snapshotError('SNAPSHOT_FILE_TOO_LARGE', `${rel} is ${size} bytes, over the limit of ${this.policy.maxFileBytes} (policy maxFileBytes)`, {
        path: rel,
        size,
        limit: this.policy.maxFileBytes,
      });
    }
    this.bytes += size;
    if (this.bytes > this.policy.maxTotalBytes) {
      throw snapshotError(
        'SNAPSHOT_TOO_LARGE',
        `${rel} (${size} bytes) brings the snapshot to ${this.bytes} bytes, over the limit of ${this.policy.maxTotalBytes} (policy maxTotalBytes)`,
        { path: rel, size, total: this.bytes, limit: this.policy.maxTotalBytes },
      );
    }
  }

  /**
   * Counts `n` regular files of `bytes` in all, if that stays within the limits (the largest being `largest`
   * bytes); returns false, counting nothing, if it would not (the caller then counts them one by one, which
   * names the offending file).
   */
  countFilesInBulk(n: number, bytes: number, largest: number): boolean {
    const p = this.policy;
    if (this.entries + n > p.maxFiles || largest > p.maxFileBytes || this.bytes + bytes > p.maxTotalBytes) return false;
    this.entries += n;
    this.files += n;
    this.bytes += bytes;
    return true;
  }

  /** Counts a regular file (or a hard link to one) of `size` bytes. */
  countFile(rel: string, size: number): void {
    this.countEntry(rel);
    this.countBytes(rel, size);
    this.files += 1;
  }

  /** Counts a directory nested `depth` levels below the root. */
  countDir(rel: string, depth: number): void {
    this.countEntry(rel);
    if (depth > this.policy.maxDepth) {
      throw snapshotError('SNAPSHOT_TOO_DEEP', `${rel} is nested ${depth} levels deep, over the limit of ${this.policy.maxDepth} (policy maxDepth)`, {
        path: rel,
        limit: this.policy.maxDepth,
      });
    }
    this.directories += 1;
  }

  /** Checks a symlink's raw target (UTF-8, the format's rules), records it and returns it; the caller counts the entry. */
  addSymlink(rel: string, raw: Uint8Array): string {
    const target = decodeUtf8Strict(raw);
    if (target === null) {
      throw snapshotError('SNAPSHOT_SYMLINK_TARGET_INVALID', `${rel}: the symlink target "${displayBytes(raw)}" is not valid UTF-8`, { path: rel });
    }
    const problem = validateSymlinkTarget(target);
    if (problem) throw snapshotError('SNAPSHOT_SYMLINK_TARGET_INVALID', `${rel}: the symlink ${problem}`, { path: rel });
    this.symlinks += 1;
    this.links.set(rel, target);
    return target;
  }

  /** A device file, socket or fifo (`what` as the message names it): skipped or refused, as the policy says. */
  special(rel: string, kind: string, what: string): void {
    if (this.policy.specialFiles === 'skip') {
      this.skipped.push(rel);
      return;
    }
    throw snapshotError('SNAPSHOT_SPECIAL_FILE', `${rel} is a ${what}; device files, sockets and fifos are refused (policy specialFiles="refuse")`, {
      path: rel,
      kind,
    });
  }

  /** Refuses the snapshot when a symlink points outside it and the policy says so (the tree must be complete). */
  checkOutsideSymlinks(): void {
    if (this.policy.outsideSymlinks !== 'refuse') return;
    const outside = outsideSymlinks(this.links);
    if (outside.length === 0) return;
    const first = outside[0] ?? '';
    throw snapshotError(
      'SNAPSHOT_SYMLINK_OUTSIDE',
      `${first} -> ${this.links.get(first) ?? ''} points outside the snapshot (policy outsideSymlinks="refuse")`,
      {
        path: first,
        target: this.links.get(first),
        count: outside.length,
      },
    );
  }
}

/** Refuses two names of a directory that are different but equal under Unicode NFC. */
export function refuseNfcCollision(rel: string, names: readonly string[]): void {
  const collision = findNfcCollision(names);
  if (!collision) return;
  const [a, b] = collision.map((n) => joinRel(rel, n));
  throw snapshotError('SNAPSHOT_NAME_COLLISION', `${a} and ${b} are different names that are equal under Unicode NFC; such pairs are refused`, {
    path: a,
    other: b,
  });
}

/** Encodes the manifest of the directory `rel`, refusing one over the format's size limit. */
export function encodeManifest(rel: string, entries: readonly Entry[]): Block {
  return encodeManifestSorted(rel, entries).block;
}

/** encodeManifest, also returning the entries in manifest order. */
export function encodeManifestSorted(rel: string, entries: readonly Entry[]): { block: Block; sorted: readonly Entry[] } {
  const { block, sorted } = encodeSortedDirManifest(entries);
  if (block.bytes.length > MAX_NODE_BYTES) {
    throw snapshotError(
      'SNAPSHOT_TOO_MANY_FILES',
      `${rel === '' ? '.' : rel}: ${entries.length} entries make a manifest of ${block.bytes.length} bytes, over the format's limit of ${MAX_NODE_BYTES} bytes per directory`,
      { path: rel, entries: entries.length, limit: MAX_NODE_BYTES },
    );
  }
  return { block, sorted };
}

/**
 * The snapshot to diff against for WorkspaceEdited: with 'auto' (the default) the last one the store committed for
 * `label`, if it is still stored; a given CID must be in the store; null for none.
 */
export async function resolvePrevious(store: BlobStore, label: string | null, option: CID | string | 'auto' | null | undefined): Promise<CID | null> {
  const p = option === undefined ? 'auto' : option;
  if (p === 'auto') {
    const h = label ? await store.head(label) : null;
    const cid = h ? parseCid(h) : null;
    // A previous snapshot that was unpinned and collected is no longer something to diff against.
    return cid && (await store.has(cid)) ? cid : null;
  }
  if (p === null) return null;
  const previous = typeof p === 'string' ? parseCid(p) : p;
  if (!(await store.has(previous))) {
    throw snapshotError('SNAPSHOT_NOT_FOUND', `the previous snapshot ${previous.toString()} is not in the store`, { cid: previous.toString() });
  }
  return previous;
}

/** Commits a snapshot's batch: pins its root and moves the label's head to it. */
export async function commitSnapshot(batch: BlobBatch, rootCid: string, started: Date, label: string | null): Promise<void> {
  await batch.commit({
    pins: [{ cid: rootCid, createdAt: started.toISOString(), source: label, origin: 'snapshot' }],
    heads: label ? [{ source: label, cid: rootCid }] : [],
  });
}

/** What a snapshot was started with. */
export interface SnapshotRun {
  /** Where the snapshot is stored; null for a dry run (no events, no diff). */
  readonly store: BlobStore | null;
  readonly batch: BlobBatch | null;
  readonly progress: Progress;
  readonly policy: SnapshotPolicy;
  readonly label: string | null;
  readonly previous: CID | null;
  readonly started: Date;
}

/** What a snapshot's walk (or ingestion) and commit produced. */
export interface SnapshotDone {
  readonly root: CID;
  readonly tally: TreeTally;
  readonly cache: { hits: number; hashed: number };
  /** Manifests known without reading the store (built by this snapshot, or checked rebuilds of older ones). */
  readonly built?: KnownManifests;
  /** Warnings so far; the diff's is added. */
  readonly warnings: string[];
  /** performance.now() marks: the walk's start and end, the commit's end, the stat cache update's end. */
  readonly marks: { readonly t0: number; readonly t1: number; readonly t2: number; readonly t3: number };
}

/**
 * The tail of a snapshot whose batch is committed: ends the progress line, emits SnapshotTaken and (when the root
 * differs from the previous snapshot's and that one can be read) WorkspaceEdited through the sink, and builds the
 * result.
 */
export async function finishSnapshot(
  deps: { readonly clock: Clock; readonly sink?: SnapshotEventSink | null },
  run: SnapshotRun,
  done: SnapshotDone,
): Promise<SnapshotResult> {
  const { store, batch, started, previous } = run;
  const { tally, warnings } = done;
  const finished = deps.clock.now();
  const outside = outsideSymlinks(tally.links);
  const doc = policyDocument(run.policy);
  const base = {
    rootCid: cidString(done.root),
    files: tally.files,
    directories: tally.directories,
    symlinks: tally.symlinks,
    bytes: tally.bytes,
    newBlobs: batch ? batch.added.blobs : 0,
    newBytes: batch ? batch.added.bytes : 0,
    durationMs: Math.max(0, finished.getTime() - started.getTime()),
    startedAt: started.toISOString(),
    policyDigest: policyDigest(doc),
    cache: done.cache,
  };
  run.progress.end(`${base.rootCid} (${base.files} files, ${base.bytes} bytes)`);

  let taken: SnapshotTakenData | null = null;
  let edited: WorkspaceEditedData | null = null;
  if (store) {
    taken = {
      ...base,
      format: FORMAT_ID,
      chunkSize: CHUNK_SIZE,
      policy: doc,
      source: run.label,
      outsideSymlinks: boundedPaths(outside),
      skippedSpecialFiles: boundedPaths(tally.skipped),
    };
    if (previous && !previous.equals(done.root)) {
      try {
        edited = await summarizeDiff(new NodeReader(store, done.built ?? null), previous, done.root);
      } catch (e) {
        warnings.push(`no WorkspaceEdited event: the previous snapshot ${previous.toString()} cannot be read (${(e as Error).message})`);
      }
    }
    if (deps.sink) {
      await deps.sink.snapshotTaken(taken);
      if (edited) await deps.sink.workspaceEdited(edited);
    }
  }
  const t4 = performance.now();
  const { t0, t1, t2, t3 } = done.marks;
  return {
    ...base,
    warnings,
    phases: { walkMs: t1 - t0, commitMs: t2 - t1, cacheMs: t3 - t2, eventsMs: t4 - t3 },
    root: done.root,
    dryRun: store === null,
    policy: doc,
    outsideSymlinks: outside,
    skippedSpecialFiles: [...tally.skipped].sort(),
    taken,
    edited,
  };
}

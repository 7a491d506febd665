/**
 * Snapshot ingestion from a tar stream (docs/snapshots-format.md, "Ingesting a tar stream"): reads an archive such
 * as `docker export` writes and stores the same snapshot that `takeSnapshot` stores for the same tree on disk with
 * the same policy (same root CID).
 *
 * - File content is cut into CHUNK_SIZE pieces as it streams and each piece is stored through the BlobStore port
 *   (never a whole file in memory); directories are kept as metadata only and encoded into manifests, with the
 *   format's own encoder, once the archive has ended.
 * - Symlinks are recorded as they are; hard links (type '1') share the content CID of the file they name, which
 *   must come earlier in the archive; only the execute bit of a mode counts.
 * - The policy applies as on disk: exclusions (an excluded directory excludes everything beneath it), limits on
 *   entries, bytes, single-file size and depth (the error names the offending path), device files and fifos
 *   refused or skipped, symlinks pointing outside flagged or refused.
 * - The archive is hostile: absolute names and `..` components are refused (SNAPSHOT_PATH_ESCAPE), so is a path
 *   given twice, a path beneath a non-directory, a name that is not UTF-8, a bad header checksum, a truncated
 *   archive or an unsupported entry type (SNAPSHOT_TAR_INVALID).
 */
import type { CID } from 'multiformats/cid';
import { createHash } from 'node:crypto';
import { silentProgress, type Clock, type Progress } from '@assay/core';
import { CHUNK_SIZE, MODE_DIR, MODE_SYMLINK, cidFromDigest, cidString, fileContent, normaliseFileMode, RAW_CODE, type Entry } from '../domain/format';
import { decodeUtf8Strict, displayBytes, validateEntryName } from '../domain/names';
import { resolvePolicy, type SnapshotPolicy } from '../domain/policy';
import { compileExcludes, type ExcludeMatcher } from '../domain/exclude';
import { joinRel, snapshotError } from '../domain/snapshot.errors';
import type { SnapshotEventSink } from '../domain/events';
import type { BlobBatch, BlobStore } from '../ports/blob-store.port';
import { TreeTally, commitSnapshot, encodeManifest, finishSnapshot, refuseNfcCollision, resolvePrevious, type SnapshotResult } from './snapshot-common';
import { TarReader, type TarEntryHeader } from '@assay/tar';

/** A malformed or refused archive: SNAPSHOT_TAR_INVALID (the tar reader reports its format errors through this too). */
export function tarInvalid(message: string, details: Record<string, unknown> = {}): Error {
  return snapshotError('SNAPSHOT_TAR_INVALID', message, details);
}

/**
 * What full-rootfs mode leaves out of a container's file system (docs/run.md, "Full-rootfs mode"): the kernel's
 * and Docker's per-container mounts, and Assay's own mounts and injected files, which the Judge gets fresh.
 * Anchored patterns without a trailing `/`, so they match whatever kind of entry the agent left there.
 */
export const ROOTFS_EXCLUDES: readonly string[] = Object.freeze([
  '/proc',
  '/sys',
  '/dev',
  '/tmp',
  '/.dockerenv',
  '/etc/hostname',
  '/etc/hosts',
  '/etc/resolv.conf',
  '/run/assay',
  '/logs/assay',
  '/logs/verifier',
  '/tests',
  '/usr/local/bin/rsi-submit',
  '/usr/local/bin/assay-egress-forward',
  '/usr/local/bin/run-as-candidate',
  '/opt/assay',
]);

/** A policy for full-rootfs snapshots: the given one with ROOTFS_EXCLUDES added in front of its exclusions. */
export function rootfsPolicy(p: Partial<SnapshotPolicy> = {}): Partial<SnapshotPolicy> {
  const own = p.exclude ?? [];
  return { ...p, exclude: [...ROOTFS_EXCLUDES, ...own.filter((x) => !ROOTFS_EXCLUDES.includes(x))] };
}

export interface IngestTarDeps {
  readonly store: BlobStore;
  readonly clock: Clock;
  readonly sink?: SnapshotEventSink | null;
  readonly progress?: Progress;
}

export interface IngestTarOptions {
  readonly policy?: Partial<SnapshotPolicy>;
  /** What was ingested (e.g. `container:<id>`), recorded in the event and used to find the previous snapshot. */
  readonly label?: string | null;
  /** As for takeSnapshot: a CID, 'auto' (default: the last snapshot committed for the label) or null. */
  readonly previous?: CID | string | 'auto' | null;
}

interface TFile {
  readonly kind: 'file';
  readonly mode: 0o644 | 0o755;
  readonly size: number;
  readonly cid: CID;
}
interface TLink {
  readonly kind: 'symlink';
  readonly target: string;
  readonly size: number;
}
interface TDir {
  readonly kind: 'dir';
  readonly children: Map<string, TNode>;
  explicit: boolean;
}
type TNode = TFile | TLink | TDir;

class Ingest extends TreeTally {
  readonly root: TDir = { kind: 'dir', children: new Map(), explicit: false };
  newChunks = 0;
  private readonly excludedDirs = new Set<string>();
  private readonly keptDirs = new Set<string>();

  constructor(
    policy: SnapshotPolicy,
    readonly excluded: ExcludeMatcher,
    readonly batch: BlobBatch,
    readonly progress: Progress,
  ) {
    super(policy);
  }

  /** Is `segs` (or a directory above it) excluded by the policy? */
  isExcluded(segs: readonly string[], isDir: boolean): boolean {
    let rel = '';
    for (let i = 0; i < segs.length - 1; i++) {
      rel = joinRel(rel, segs[i] as string);
      if (this.keptDirs.has(rel)) continue;
      if (this.excludedDirs.has(rel) || this.excluded(rel, true)) {
        this.excludedDirs.add(rel);
        return true;
      }
      this.keptDirs.add(rel);
    }
    return this.excluded(segs.join('/'), isDir);
  }

  /** The directory holding `segs`' last component, created (and counted) where the archive did not list it. */
  parentOf(segs: readonly string[]): TDir {
    let dir = this.root;
    let rel = '';
    for (let i = 0; i < segs.length - 1; i++) {
      const name = segs[i] as string;
      rel = joinRel(rel, name);
      const child = dir.children.get(name);
      if (child === undefined) {
        const d: TDir = { kind: 'dir', children: new Map(), explicit: false };
        this.countDir(rel, i + 1);
        dir.children.set(name, d);
        dir = d;
      } else if (child.kind !== 'dir') {
        throw tarInvalid(`${segs.join('/')}: the archive puts it beneath ${rel}, which is a ${child.kind}`, { path: segs.join('/') });
      } else dir = child;
    }
    return dir;
  }

  lookup(segs: readonly string[]): TNode | undefined {
    let node: TNode = this.root;
    for (const s of segs) {
      if (node.kind !== 'dir') return undefined;
      const next: TNode | undefined = node.children.get(s);
      if (next === undefined) return undefined;
      node = next;
    }
    return node;
  }

  /** Streams a file's content into the batch, one chunk at a time, and returns its content CID. */
  async content(r: TarReader, rel: string, size: number): Promise<CID> {
    const digests = Buffer.allocUnsafe(Math.max(1, Math.ceil(size / CHUNK_SIZE)) * 32);
    let n = 0;
    let got = 0;
    if (size === 0) {
      const digest = createHash('sha256').digest();
      digest.copy(digests, 0);
      if (await this.batch.put({ cid: cidFromDigest(RAW_CODE, digest), bytes: new Uint8Array(0) })) this.newChunks += 1;
      n = 1;
    }
    for (;;) {
      const piece = await r.read(CHUNK_SIZE);
      if (piece === null) break;
      got += piece.length;
      const digest = createHash('sha256').update(piece).digest();
      digest.copy(digests, n * 32);
      n += 1;
      if (await this.batch.put({ cid: cidFromDigest(RAW_CODE, digest), bytes: piece })) this.newChunks += 1;
    }
    if (got !== size) throw new Error(`internal: read ${got} of ${size} bytes of ${rel}`);
    const c = fileContent(size, digests.subarray(0, n * 32));
    if (c.node) await this.batch.put(c.node);
    return c.cid;
  }

  async entry(r: TarReader, h: TarEntryHeader): Promise<void> {
    const segs = entryPath(h.name);
    if (segs === null) {
      // the archive's root ('.', './')
      if (h.kind !== 'dir') throw tarInvalid(`the archive's root entry "${displayBytes(h.name)}" is a ${h.kind}, not a directory`, { path: '.' });
      if (this.root.explicit) throw tarInvalid('the archive lists its root directory twice', { path: '.' });
      this.root.explicit = true;
      return;
    }
    const rel = segs.join('/');
    if (this.isExcluded(segs, h.kind === 'dir')) {
      await r.skip();
      return;
    }
    const parent = this.parentOf(segs);
    const name = segs[segs.length - 1] as string;
    const existing = parent.children.get(name);
    if (existing !== undefined) {
      if (h.kind === 'dir' && existing.kind === 'dir' && !existing.explicit) {
        existing.explicit = true;
        return;
      }
      throw tarInvalid(`${rel} appears twice in the archive; duplicate entries are refused`, { path: rel });
    }
    switch (h.kind) {
      case 'dir': {
        this.countDir(rel, segs.length);
        parent.children.set(name, { kind: 'dir', children: new Map(), explicit: true });
        return;
      }
      case 'file': {
        this.countFile(rel, h.size);
        const cid = await this.content(r, rel, h.size);
        parent.children.set(name, { kind: 'file', mode: normaliseFileMode(h.mode), size: h.size, cid });
        if (this.files % 256 === 0) this.progress.tick(this.files);
        return;
      }
      case 'hardlink': {
        const tsegs = entryPath(h.link);
        const target = tsegs === null ? undefined : this.lookup(tsegs);
        const shown = displayBytes(h.link);
        if (target === undefined || target.kind !== 'file') {
          throw tarInvalid(
            `${rel} is a hard link to "${shown}", which is not a file earlier in the archive${target === undefined ? ' (or is excluded by the policy)' : ''}`,
            { path: rel, target: shown },
          );
        }
        this.countFile(rel, target.size);
        parent.children.set(name, target);
        return;
      }
      case 'symlink': {
        this.countEntry(rel);
        const target = this.addSymlink(rel, h.link);
        parent.children.set(name, { kind: 'symlink', target, size: h.link.length });
        return;
      }
      default: {
        const what = h.kind === 'fifo' ? 'fifo' : h.kind === 'chardev' ? 'character device' : 'block device';
        this.special(rel, h.kind, what);
        return;
      }
    }
  }

  /** Encodes and stores a directory's manifest after its subdirectories' (post-order). */
  async manifest(dir: TDir, rel: string): Promise<{ cid: CID; size: number }> {
    refuseNfcCollision(rel, [...dir.children.keys()]);
    const entries: Entry[] = [];
    let size = 0;
    for (const [name, node] of dir.children) {
      if (node.kind === 'dir') {
        const sub = await this.manifest(node, joinRel(rel, name));
        size += sub.size;
        entries.push({ name, kind: 'dir', mode: MODE_DIR, size: sub.size, cid: sub.cid });
      } else if (node.kind === 'file') {
        size += node.size;
        entries.push({ name, kind: 'file', mode: node.mode, size: node.size, cid: node.cid });
      } else {
        entries.push({ name, kind: 'symlink', mode: MODE_SYMLINK, size: node.size, target: node.target });
      }
    }
    const block = encodeManifest(rel, entries);
    await this.batch.put(block);
    return { cid: block.cid, size };
  }
}

/**
 * An entry name as path segments: `./` prefixes and one trailing `/` dropped; null for the root itself. Absolute
 * names, `..`, `.` and empty components are refused, and so is a name that is not UTF-8.
 */
function entryPath(raw: Uint8Array): string[] | null {
  const text = decodeUtf8Strict(raw);
  const shown = displayBytes(raw);
  if (text === null) throw snapshotError('SNAPSHOT_NAME_NOT_UTF8', `${shown}: the name is not valid UTF-8; such names are refused`, { path: shown });
  if (text.startsWith('/')) throw snapshotError('SNAPSHOT_PATH_ESCAPE', `${shown}: absolute names are refused in a snapshot archive`, { path: shown });
  let s = text;
  while (s.startsWith('./')) s = s.slice(2);
  if (s.endsWith('/')) s = s.slice(0, -1);
  if (s === '' || s === '.') return null;
  const segs = s.split('/');
  for (const seg of segs) {
    if (seg === '..') throw snapshotError('SNAPSHOT_PATH_ESCAPE', `${shown}: names with ".." components are refused in a snapshot archive`, { path: shown });
    const why = validateEntryName(seg);
    if (why) throw snapshotError('SNAPSHOT_NAME_INVALID', `${shown}: the component ${JSON.stringify(seg)} ${why}`, { path: shown });
  }
  return segs;
}

/**
 * Ingests a tar stream into the store as one snapshot: stores its blobs in one batch, commits it, pins the root,
 * and emits SnapshotTaken (and WorkspaceEdited against the previous snapshot) through the sink, like takeSnapshot.
 * The source is read to its end marker and then released; on any error the batch is aborted.
 */
export async function ingestTar(deps: IngestTarDeps, source: AsyncIterable<Uint8Array>, options: IngestTarOptions = {}): Promise<SnapshotResult> {
  const policy = resolvePolicy(options.policy ?? {});
  const excluded = compileExcludes(policy.exclude);
  const started = deps.clock.now();
  const progress = deps.progress ?? silentProgress;
  const label = options.label ?? null;
  const store = deps.store;

  const previous = await resolvePrevious(store, label, options.previous);

  const t0 = performance.now();
  const batch = await store.begin();
  const reader = new TarReader(source, { invalid: tarInvalid });
  progress.start('snapshot (tar): files');
  let ing: Ingest;
  let root: { cid: CID; size: number };
  let t1 = t0;
  try {
    ing = new Ingest(policy, excluded, batch, progress);
    for (;;) {
      const h = await reader.next();
      if (h === null) break;
      await ing.entry(reader, h);
    }
    root = await ing.manifest(ing.root, '');
    ing.checkOutsideSymlinks();
    t1 = performance.now();
    await commitSnapshot(batch, cidString(root.cid), started, label);
  } catch (e) {
    await batch.abort().catch(() => undefined);
    progress.end();
    throw e;
  } finally {
    await reader.close().catch(() => undefined);
  }
  const t2 = performance.now();
  return finishSnapshot(
    deps,
    { store, batch, progress, policy, label, previous, started },
    {
      root: root.cid,
      tally: ing,
      cache: { hits: 0, hashed: ing.files },
      warnings: [],
      marks: { t0, t1, t2, t3: t2 },
    },
  );
}

import type { CID } from 'multiformats/cid';
import { silentProgress, type Clock, type Progress } from '@assay/core';
import {
  MODE_DIR,
  MODE_EXEC,
  MODE_FILE,
  MODE_SYMLINK,
  cidString,
  encodeSortedDirManifest,
  fileContent,
  normaliseFileMode,
  parseCid,
  type DirManifest,
  type Entry,
} from '../domain/format';
import { compareNames, displayBytes, validateEntryName } from '../domain/names';
import { resolvePolicy, type SnapshotPolicy } from '../domain/policy';
import { compileExcludes, type ExcludeMatcher } from '../domain/exclude';
import { ListingKey, digestBytes, isClean, recordedTimeNs, statSig, type CachedEntry, type DirCacheRecord, type SourceStat } from '../domain/stat-cache';
import { snapshotError } from '../domain/snapshot.errors';
import type { SnapshotEventSink } from '../domain/events';
import type { BlobBatch, BlobStore } from '../ports/blob-store.port';
import type { StatCache } from '../ports/stat-cache.port';
import type { ContentHasher, ListingSummary, SourceEntry, TreeSource } from '../ports/tree-source.port';
import type { KnownManifests } from './node-reader';
import { TreeTally, commitSnapshot, encodeManifestSorted, finishSnapshot, refuseNfcCollision, resolvePrevious, type SnapshotResult } from './snapshot-common';

export type { SnapshotResult } from './snapshot-common';

export interface TakeSnapshotDeps {
  readonly source: TreeSource;
  /** Where blobs go; may be null for a dry run. */
  readonly store: BlobStore | null;
  readonly cache?: StatCache | null;
  readonly clock: Clock;
  readonly sink?: SnapshotEventSink | null;
  readonly progress?: Progress;
}

export interface TakeSnapshotOptions {
  /** The policy, or a partial one to complete with the defaults. */
  readonly policy?: Partial<SnapshotPolicy>;
  /** Compute the root CID without storing anything (no pins, no events). */
  readonly dryRun?: boolean;
  /** A label for what is snapshotted, recorded in the event and used to find the previous snapshot. */
  readonly label?: string | null;
  /**
   * The snapshot to diff against for WorkspaceEdited: a CID, or 'auto' (default) for the last snapshot the
   * store committed for the same label, or null for none.
   */
  readonly previous?: CID | string | 'auto' | null;
  /** Use and update the stat cache (default true when a cache is given). */
  readonly useCache?: boolean;
}

interface DirResult {
  cid: string;
  size: number;
}

/** One entry of a directory being built. */
interface Child {
  readonly name: string;
  readonly kind: Entry['kind'];
  readonly mode: number;
  readonly size: number;
  /** Content or manifest CID (files, directories); '' for symlinks. */
  readonly cid: string;
  /** The CID object when it was just computed (saves parsing it again). */
  readonly cidObj: CID | null;
  readonly target: string;
  /** What the stat cache will remember for it. */
  readonly cached: CachedEntry;
}

/** A subdirectory being walked: its name and the promise of its manifest. */
interface DirJob {
  readonly name: string;
  readonly result: Promise<DirResult>;
}

interface Item {
  readonly name: string;
  readonly rel: string;
  readonly stat: SourceStat;
}

const PLAIN_NAME = /^[\x20-\x2e\x30-\x7e]{1,255}$/;

function toEntry(c: Child): Entry {
  if (c.kind === 'symlink') return { name: c.name, kind: 'symlink', mode: MODE_SYMLINK, size: c.size, target: c.target };
  const cid = c.cidObj ?? parseCid(c.cid);
  if (c.kind === 'dir') return { name: c.name, kind: 'dir', mode: MODE_DIR, size: c.size, cid };
  return { name: c.name, kind: 'file', mode: c.mode === MODE_EXEC ? MODE_EXEC : MODE_FILE, size: c.size, cid };
}

function fromCached(name: string, e: CachedEntry): Child {
  return { name, kind: e.kind, mode: e.mode, size: e.size, cid: e.cid, cidObj: null, target: e.target, cached: e };
}

/**
 * The manifests a diff against the previous snapshot can have without reading the store: those this snapshot
 * built, and older ones rebuilt from the stat cache's records, each re-encoded and used only if it gives exactly
 * the CID asked for (a damaged cache cannot change the diff).
 */
class ManifestMemo implements KnownManifests {
  constructor(
    private readonly built: ReadonlyMap<string, DirManifest>,
    private readonly records: ReadonlyMap<string, DirCacheRecord>,
  ) {}

  get(cid: string): DirManifest | undefined {
    const mine = this.built.get(cid);
    if (mine) return mine;
    const record = this.records.get(cid);
    if (!record) return undefined;
    const entries: Entry[] = [];
    for (const [name, e] of record.entries()) entries.push(toEntry(fromCached(name, e)));
    const { block, sorted } = encodeSortedDirManifest(entries);
    return cidString(block.cid) === cid ? { type: 'dir', entries: sorted } : undefined;
  }
}

/** Entries of the manifests a snapshot keeps for its diff (a re-snapshot builds few; a first one may build many). */
const BUILT_MANIFESTS_KEPT = 50_000;

class Walk extends TreeTally {
  /** Manifests built by this walk, for the diff (see BUILT_MANIFESTS_KEPT). */
  readonly built = new Map<string, DirManifest>();
  /** The stat cache's records met by the walk, by the manifest they describe (the diff rebuilds old ones from them). */
  readonly previousManifests = new Map<string, DirCacheRecord>();
  builtEntries = 0;
  /** No exclusion patterns: listings can be judged from their summary (see filesUnchanged). */
  readonly noExcludes: boolean;
  hits = 0;
  hashed = 0;
  readonly hardlinks = new Map<string, Promise<{ cid: CID; size: number; stat: SourceStat }>>();
  readonly upserts: Array<{ dir: string; record: DirCacheRecord }> = [];
  readonly visitedDirs = new Set<string>();
  failure: unknown = null;
  lastTick = 0;
  lastYield = 0;

  constructor(
    readonly deps: TakeSnapshotDeps,
    policy: SnapshotPolicy,
    readonly excluded: ExcludeMatcher,
    readonly hasher: ContentHasher,
    readonly batch: BlobBatch | null,
    readonly cache: StatCache | null,
    readonly recordedNs: bigint,
    readonly progress: Progress,
  ) {
    super(policy);
    this.noExcludes = policy.exclude.length === 0;
  }

  check(): void {
    if (this.failure !== null) throw this.failure;
  }

  /** Remembers the first failure of background work (so the walk stops) and keeps the promise handled. */
  guard<T>(p: Promise<T>): Promise<T> {
    p.catch((e: unknown) => {
      if (this.failure === null) this.failure = e;
    });
    return p;
  }

  tick(): void {
    const done = this.hits + this.hashed;
    if (done - this.lastTick >= 256) {
      this.lastTick = done;
      this.progress.tick(done);
    }
  }

  /** A file's entry: from the cache when its stat is unchanged and clean, else read and hashed. */
  async file(it: Item, sig: string, prev: ReadonlyMap<string, CachedEntry> | null, trustStored: boolean): Promise<Child> {
    const p = prev?.get(it.name);
    if (p && p.kind === 'file' && p.sig === sig && p.clean) {
      // Stored blobs are trusted when the record says so; otherwise (dry run, after a GC) checked once.
      if (!this.batch || trustStored || (await this.batch.has(parseCid(p.cid)))) {
        this.hits += 1;
        this.tick();
        return fromCached(it.name, p);
      }
    }
    const st = it.stat;
    let job: Promise<{ cid: CID; size: number; stat: SourceStat }> | undefined;
    const linkKey = st.nlink > 1 ? `${st.dev}:${st.ino}` : null;
    if (linkKey) job = this.hardlinks.get(linkKey);
    if (!job) {
      // Registered before the first await, so a hard link met later in the same directory shares the work.
      job = this.hash(it.rel, st);
      if (linkKey) this.hardlinks.set(linkKey, job);
    }
    const done = await job;
    if (done.size !== st.size) {
      // The file changed between the walk's lstat and the read (the hasher re-read it consistently).
      this.bytes -= st.size;
      this.countBytes(it.rel, done.size);
    }
    const cid = cidString(done.cid);
    const mode = normaliseFileMode(done.stat.mode);
    const cached: CachedEntry = {
      kind: 'file',
      sig: statSig(done.stat),
      cid,
      mode,
      size: done.size,
      clean: isClean(done.stat, this.recordedNs),
      target: '',
    };
    return { name: it.name, kind: 'file', mode, size: done.size, cid, cidObj: done.cid, target: '', cached };
  }

  private async hash(rel: string, st: SourceStat): Promise<{ cid: CID; size: number; stat: SourceStat }> {
    await this.hasher.ready();
    this.check();
    const h = await this.hasher.hash({ rel, stat: st });
    const content = fileContent(h.size, h.digests);
    if (content.node && this.batch) await this.batch.put(content.node);
    this.hashed += 1;
    this.tick();
    return { cid: content.cid, size: h.size, stat: h.stat };
  }

  /**
   * Walks a directory depth first: lists it, sends its changed files to the hasher, walks its subdirectories
   * one after the other, and returns as soon as the whole subtree has been dispatched, with a promise of the
   * directory's manifest. The hashing of a directory's files therefore overlaps the walk of everything after it.
   */
  async walkDir(rel: string, st: SourceStat, depth: number): Promise<{ result: Promise<DirResult> }> {
    // Let the event loop run now and then: hashing results and worker hand-offs are macrotasks, and a walk made
    // only of microtasks would starve them until it ends.
    const now = performance.now();
    if (now - this.lastYield > 2) {
      await new Promise<void>((r) => setImmediate(r));
      this.lastYield = performance.now();
    }
    this.check();
    const record = this.cache ? await this.cache.lookupDir(this.deps.source.id, rel) : null;
    if (record) this.previousManifests.set(record.manifest, record);
    let listing: SourceEntry[];
    const summarize = this.cache && this.noExcludes ? this.deps.source.listSummary : undefined;
    if (summarize) {
      const sum = await summarize.call(this.deps.source, rel, st);
      if (record && this.filesUnchanged(sum, record)) return this.walkUnchanged(rel, depth, record, sum);
      listing = sum.entries();
    } else {
      listing = await this.deps.source.listDir(rel, st);
    }
    const items: Item[] = [];
    let plain = true;
    for (const e of listing) {
      if (e.invalidName) {
        const shown = rel === '' ? displayBytes(e.invalidName) : `${rel}/${displayBytes(e.invalidName)}`;
        throw snapshotError('SNAPSHOT_NAME_NOT_UTF8', `${shown}: the name is not valid UTF-8; such names are refused`, { path: shown });
      }
      const name = e.name;
      const childRel = rel === '' ? name : `${rel}/${name}`;
      if (!PLAIN_NAME.test(name) || name === '..') {
        plain = false;
        const why = validateEntryName(name);
        if (why) throw snapshotError('SNAPSHOT_NAME_INVALID', `${childRel}: the name ${why}`, { path: childRel });
      }
      if (this.excluded(childRel, e.stat.kind === 'dir')) continue;
      items.push({ name, rel: childRel, stat: e.stat });
    }
    if (!plain)
      refuseNfcCollision(
        rel,
        items.map((i) => i.name),
      );
    items.sort((a, b) => compareNames(a.name, b.name));
    this.visitedDirs.add(rel);

    // Files and symlinks first: their part of the listing key decides whether anything needs reading.
    const key = new ListingKey();
    const fileItems: Array<{ it: Item; sig: string }> = [];
    const linkChildren: Child[] = [];
    const dirItems: Item[] = [];
    for (const it of items) {
      const s = it.stat;
      if (s.kind === 'file') {
        this.countFile(it.rel, s.size);
        const sig = statSig(s);
        key.file(it.name, sig);
        fileItems.push({ it, sig });
      } else if (s.kind === 'symlink') {
        this.countEntry(it.rel);
        const raw = await this.deps.source.readLink(it.rel);
        const target = this.addSymlink(it.rel, raw);
        key.symlink(it.name, target);
        const cached: CachedEntry = { kind: 'symlink', sig: '', cid: '', mode: MODE_SYMLINK, size: raw.length, clean: true, target };
        linkChildren.push(fromCached(it.name, cached));
      } else if (s.kind === 'dir') {
        this.countDir(it.rel, depth + 1);
        dirItems.push(it);
      } else {
        this.special(it.rel, s.kind, s.kind);
      }
    }
    const filesKey = this.cache ? key.filesKey() : '';
    const trustStored = record?.stored === true;
    const filesUnchanged = record !== null && record.allClean && record.filesKey === filesKey && (!this.batch || trustStored);
    let fileJobs: Array<Promise<Child>> | null = null;
    if (filesUnchanged) {
      this.hits += fileItems.length;
      this.tick();
    } else {
      const prev = record ? record.entries() : null;
      fileJobs = [];
      for (const f of fileItems) fileJobs.push(this.guard(this.file(f.it, f.sig, prev, trustStored)));
    }

    // Backpressure: do not walk further ahead than the hasher can take (bounds memory on huge trees).
    if (fileJobs && fileJobs.length > 0) await this.hasher.ready();
    const dirJobs = await this.walkSubdirs(dirItems, depth);
    return { result: this.guard(this.complete(rel, record, filesKey, key, fileItems, fileJobs, dirJobs, linkChildren)) };
  }

  /** Walks a directory's subdirectories one after the other (hinting them to the source first). */
  private async walkSubdirs(dirItems: readonly Item[], depth: number): Promise<DirJob[]> {
    this.deps.source.prefetch?.(dirItems);
    const dirJobs: DirJob[] = [];
    for (const it of dirItems) {
      this.check();
      dirJobs.push({ name: it.name, result: (await this.walkDir(it.rel, it.stat, depth + 1)).result });
    }
    return dirJobs;
  }

  /** Waits for the subdirectories' results: their entries, their total size, and (given a key) their part of it. */
  private async collectSubdirs(dirJobs: readonly DirJob[], key: ListingKey | null): Promise<{ dirChildren: Child[]; size: number }> {
    const dirChildren: Child[] = [];
    let size = 0;
    for (const d of dirJobs) {
      const r = await d.result;
      key?.dir(d.name, r.cid, r.size);
      size += r.size;
      dirChildren.push(fromCached(d.name, { kind: 'dir', sig: '', cid: r.cid, mode: MODE_DIR, size: r.size, clean: true, target: '' }));
    }
    return { dirChildren, size };
  }

  /**
   * Whether a directory's regular files are exactly those the cache recorded, with the same stat signatures,
   * all clean when recorded and stored (when storing), judged from the listing's summary alone. Only directories
   * without symlinks, special files or names that need checking qualify; the others take the entry-by-entry
   * path, which gives the same result.
   */
  private filesUnchanged(sum: ListingSummary, record: DirCacheRecord): boolean {
    if (!sum.allPlain || sum.others !== 0 || !record.allClean || (this.batch !== null && !record.stored)) return false;
    if (digestBytes(sum.filesKeyText) !== record.filesKey) return false;
    return this.countFilesInBulk(sum.files, sum.fileBytes, sum.largestFile);
  }

  /** walkDir for a directory whose files are unchanged (filesUnchanged): only its subdirectories are looked at. */
  private async walkUnchanged(rel: string, depth: number, record: DirCacheRecord, sum: ListingSummary): Promise<{ result: Promise<DirResult> }> {
    this.visitedDirs.add(rel);
    this.hits += sum.files;
    this.tick();
    const dirItems: Item[] = sum.subdirectories().map((e) => ({ name: e.name, rel: rel === '' ? e.name : `${rel}/${e.name}`, stat: e.stat }));
    dirItems.sort((a, b) => compareNames(a.name, b.name));
    for (const it of dirItems) this.countDir(it.rel, depth + 1);
    const dirJobs = await this.walkSubdirs(dirItems, depth);
    return { result: this.guard(this.completeUnchanged(rel, record, sum.fileBytes, dirJobs)) };
  }

  /** complete() for a directory whose files are unchanged: its manifest is rebuilt only if a subdirectory changed. */
  private async completeUnchanged(rel: string, record: DirCacheRecord, fileBytes: number, dirJobs: readonly DirJob[]): Promise<DirResult> {
    const key = new ListingKey();
    const subdirs = await this.collectSubdirs(dirJobs, key);
    const dirChildren = subdirs.dirChildren;
    const size = fileBytes + subdirs.size;
    this.check();
    const dirsKey = key.dirsKey();
    if (record.dirsKey === dirsKey && record.size === size) return { cid: record.manifest, size };
    const files: Child[] = [];
    for (const [name, e] of record.entries()) if (e.kind === 'file') files.push(fromCached(name, e));
    files.sort((a, b) => compareNames(a.name, b.name));
    return this.buildManifest(rel, files, [], dirChildren, size, record.filesKey, dirsKey);
  }

  /** Waits for a directory's files and subdirectories, then reuses or builds its manifest. */
  async complete(
    rel: string,
    record: DirCacheRecord | null,
    filesKey: string,
    key: ListingKey,
    fileItems: ReadonlyArray<{ it: Item; sig: string }>,
    fileJobs: Array<Promise<Child>> | null,
    dirJobs: readonly DirJob[],
    linkChildren: readonly Child[],
  ): Promise<DirResult> {
    const subdirs = await this.collectSubdirs(dirJobs, this.cache ? key : null);
    const dirChildren = subdirs.dirChildren;
    let size = subdirs.size;
    const fileChildren = fileJobs ? await Promise.all(fileJobs) : null;
    this.check();
    if (fileChildren) for (const c of fileChildren) size += c.size;
    else for (const f of fileItems) size += f.it.stat.size;
    const dirsKey = this.cache ? key.dirsKey() : '';

    // An unchanged directory keeps its manifest: nothing to encode, hash or store.
    if (fileJobs === null && record && record.dirsKey === dirsKey && record.size === size) return { cid: record.manifest, size };

    let files: Child[];
    if (fileChildren) files = fileChildren;
    else {
      const prev = record ? record.entries() : new Map<string, CachedEntry>();
      files = fileItems.map((f) => {
        const e = prev.get(f.it.name);
        if (!e) throw new Error(`internal: the stat cache lost ${f.it.rel}`);
        return fromCached(f.it.name, e);
      });
    }
    return this.buildManifest(rel, files, linkChildren, dirChildren, size, filesKey, dirsKey);
  }

  /** Encodes and stores a directory's manifest and records the directory for the stat cache. */
  private async buildManifest(
    rel: string,
    files: readonly Child[],
    linkChildren: readonly Child[],
    dirChildren: readonly Child[],
    size: number,
    filesKey: string,
    dirsKey: string,
  ): Promise<DirResult> {
    const children = [...files, ...linkChildren, ...dirChildren];
    const { block, sorted } = encodeManifestSorted(rel, children.map(toEntry));
    if (this.batch) await this.batch.put(block);
    const cid = cidString(block.cid);
    if (this.builtEntries + sorted.length <= BUILT_MANIFESTS_KEPT) {
      this.builtEntries += sorted.length;
      this.built.set(cid, { type: 'dir', entries: sorted });
    }
    if (this.cache) {
      const cachedEntries = new Map(children.map((c) => [c.name, c.cached] as const));
      this.upserts.push({
        dir: rel,
        record: {
          manifest: cid,
          size,
          stored: this.batch !== null,
          allClean: files.every((f) => f.cached.clean),
          filesKey,
          dirsKey,
          entries: () => cachedEntries,
        },
      });
    }
    return { cid, size };
  }
}

/**
 * Takes a snapshot of a tree: walks it (lstat only, symlinks recorded and never followed), applies the policy,
 * hashes what the stat cache cannot vouch for, stores blobs and manifests in one batch, commits it durably,
 * pins the root, updates the stat cache, and emits SnapshotTaken (and WorkspaceEdited against the previous
 * snapshot) through the sink.
 */
export async function takeSnapshot(deps: TakeSnapshotDeps, options: TakeSnapshotOptions = {}): Promise<SnapshotResult> {
  const policy = resolvePolicy(options.policy ?? {});
  const excluded = compileExcludes(policy.exclude);
  const dryRun = options.dryRun === true;
  if (!dryRun && !deps.store) throw new Error('internal: a snapshot that stores needs a blob store');
  const started = deps.clock.now();
  const progress = deps.progress ?? silentProgress;
  const label = options.label ?? null;
  const cache = options.useCache === false ? null : (deps.cache ?? null);

  const rootStat = await deps.source.statRoot();
  if (rootStat.kind !== 'dir') {
    throw snapshotError('SNAPSHOT_ROOT_INVALID', `${deps.source.id} is not a directory (it is a ${rootStat.kind})`, { path: deps.source.id });
  }

  // A source that can list ahead starts on the whole tree now, while the store and the stat cache load.
  deps.source.prefetch?.([{ rel: '', stat: rootStat }], { wholeTree: policy.exclude.length === 0 });
  try {
    return await snapshotTree(deps, options, { policy, excluded, dryRun, started, progress, label, cache, rootStat });
  } finally {
    deps.source.release?.();
  }
}

async function snapshotTree(
  deps: TakeSnapshotDeps,
  options: TakeSnapshotOptions,
  o: {
    policy: SnapshotPolicy;
    excluded: ExcludeMatcher;
    dryRun: boolean;
    started: Date;
    progress: Progress;
    label: string | null;
    cache: StatCache | null;
    rootStat: SourceStat;
  },
): Promise<SnapshotResult> {
  const { policy, excluded, dryRun, started, progress, label, cache, rootStat } = o;
  const store = dryRun ? null : deps.store;
  const previous = store ? await resolvePrevious(store, label, options.previous) : null;

  const t0 = performance.now();
  let t1 = t0;
  let t2 = t0;
  const batch = store ? await store.begin() : null;
  const hasher = deps.source.openHasher(batch);
  progress.start(dryRun ? 'snapshot (dry run): files' : 'snapshot: files');
  let walk: Walk;
  let root: DirResult;
  let rootCid: CID;
  try {
    walk = new Walk(deps, policy, excluded, hasher, batch, cache, recordedTimeNs(started), progress);
    root = await (await walk.walkDir('', rootStat, 0)).result;
    deps.source.release?.();
    walk.checkOutsideSymlinks();
    t1 = performance.now();
    rootCid = parseCid(root.cid);
    if (batch) await commitSnapshot(batch, root.cid, started, label);
    await hasher.close();
  } catch (e) {
    await hasher.close().catch(() => undefined);
    if (batch) await batch.abort().catch(() => undefined);
    progress.end();
    throw e;
  }
  t2 = performance.now();
  const warnings: string[] = [];
  if (cache) {
    try {
      await cache.commit(deps.source.id, { upserts: walk.upserts, visitedDirs: walk.visitedDirs });
    } catch (e) {
      // The snapshot is stored; only the next one is slower.
      warnings.push(`the stat cache could not be updated: ${(e as Error).message}`);
    }
  }
  const t3 = performance.now();
  return finishSnapshot(
    deps,
    { store, batch, progress, policy, label, previous, started },
    {
      root: rootCid,
      tally: walk,
      cache: { hits: walk.hits, hashed: walk.hashed },
      built: new ManifestMemo(walk.built, walk.previousManifests),
      warnings,
      marks: { t0, t1, t2, t3 },
    },
  );
}

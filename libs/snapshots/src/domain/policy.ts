import * as dagCbor from '@ipld/dag-cbor';
import { snapshotError } from './snapshot.errors';
import { CHUNK_SIZE, DAG_CBOR_CODE, FORMAT_ID, MAX_FILE_BYTES_FORMAT, MAX_SNAPSHOT_DEPTH, cidFromDigest, sha256 } from './format';
import { compileExcludes } from './exclude';

/**
 * What a snapshot accepts. Configurable per task; every field has a safe default. The policy is part of what an
 * auditor checks, so it is recorded (with its digest) in the SnapshotTaken event.
 */
export interface SnapshotPolicy {
  /** Most entries (files, directories and symlinks, the root not counted). */
  readonly maxFiles: number;
  /** Largest single file, in bytes (at most 128 GiB, the format's limit). */
  readonly maxFileBytes: number;
  /** Most bytes of file content in total; a file reachable under two names (a hard link) counts twice. */
  readonly maxTotalBytes: number;
  /** Deepest directory nesting below the root. */
  readonly maxDepth: number;
  /** Exclusion patterns (see exclude.ts); excluded paths are neither recorded nor read. */
  readonly exclude: readonly string[];
  /** A symlink whose target resolves outside the root: recorded and flagged, or the snapshot refused. */
  readonly outsideSymlinks: 'flag' | 'refuse';
  /** Device files, sockets and fifos: refuse the snapshot (default) or leave them out. */
  readonly specialFiles: 'refuse' | 'skip';
}

export const DEFAULT_POLICY: Readonly<SnapshotPolicy> = Object.freeze({
  maxFiles: 1_000_000,
  maxFileBytes: 64 * 2 ** 30,
  maxTotalBytes: 128 * 2 ** 30,
  maxDepth: 128,
  exclude: Object.freeze([]) as readonly string[],
  outsideSymlinks: 'flag',
  specialFiles: 'refuse',
});

/** The policy as recorded: plain JSON, with the format it applies to. */
export interface PolicyDocument {
  format: string;
  chunkSize: number;
  maxFiles: number;
  maxFileBytes: number;
  maxTotalBytes: number;
  maxDepth: number;
  exclude: string[];
  outsideSymlinks: 'flag' | 'refuse';
  specialFiles: 'refuse' | 'skip';
}

const KEYS = Object.keys(DEFAULT_POLICY) as (keyof SnapshotPolicy)[];

function fail(field: string, why: string): Error {
  return snapshotError('SNAPSHOT_POLICY_INVALID', `policy field "${field}" ${why}`, { field });
}

function intIn(v: unknown, field: string, min: number, max: number): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min || v > max) {
    throw fail(field, `must be an integer from ${min} to ${max}, got ${JSON.stringify(v)}`);
  }
  return v;
}

/** Validates a (partial) policy from a task or the command line and fills in the defaults. */
export function resolvePolicy(input: unknown = {}): SnapshotPolicy {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    throw snapshotError('SNAPSHOT_POLICY_INVALID', 'policy must be a JSON object');
  }
  const o = input as Record<string, unknown>;
  for (const k of Object.keys(o)) {
    if (!(KEYS as string[]).includes(k)) throw fail(k, `is unknown (known: ${KEYS.join(', ')})`);
  }
  const get = <K extends keyof SnapshotPolicy>(k: K): unknown => (o[k] === undefined ? DEFAULT_POLICY[k] : o[k]);
  const exclude = get('exclude');
  if (!Array.isArray(exclude) || exclude.some((p) => typeof p !== 'string')) throw fail('exclude', 'must be a list of strings');
  compileExcludes(exclude as string[]);
  const outsideSymlinks = get('outsideSymlinks');
  if (outsideSymlinks !== 'flag' && outsideSymlinks !== 'refuse') throw fail('outsideSymlinks', 'must be "flag" or "refuse"');
  const specialFiles = get('specialFiles');
  if (specialFiles !== 'refuse' && specialFiles !== 'skip') throw fail('specialFiles', 'must be "refuse" or "skip"');
  return Object.freeze({
    maxFiles: intIn(get('maxFiles'), 'maxFiles', 0, 1e9),
    maxFileBytes: intIn(get('maxFileBytes'), 'maxFileBytes', 0, MAX_FILE_BYTES_FORMAT),
    maxTotalBytes: intIn(get('maxTotalBytes'), 'maxTotalBytes', 0, Number.MAX_SAFE_INTEGER),
    maxDepth: intIn(get('maxDepth'), 'maxDepth', 0, MAX_SNAPSHOT_DEPTH),
    exclude: Object.freeze([...(exclude as string[])]),
    outsideSymlinks,
    specialFiles,
  });
}

export function policyDocument(p: SnapshotPolicy): PolicyDocument {
  return {
    format: FORMAT_ID,
    chunkSize: CHUNK_SIZE,
    maxFiles: p.maxFiles,
    maxFileBytes: p.maxFileBytes,
    maxTotalBytes: p.maxTotalBytes,
    maxDepth: p.maxDepth,
    exclude: [...p.exclude],
    outsideSymlinks: p.outsideSymlinks,
    specialFiles: p.specialFiles,
  };
}

/** The policy digest: the CID (dag-cbor, sha2-256) of the policy document. Recomputable from the event. */
export function policyDigest(p: SnapshotPolicy | PolicyDocument): string {
  const doc = 'format' in p ? p : policyDocument(p);
  const bytes = dagCbor.encode(doc);
  return cidFromDigest(DAG_CBOR_CODE, sha256(bytes)).toString();
}

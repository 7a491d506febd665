/**
 * Judge settings a task may declare in `[metadata.assay_judge]` (Harbor tasks carry none; every key has a safe
 * default), and the snapshot rules the harness checks before it runs anything:
 *
 *   [metadata.assay_judge]
 *   pids_limit = 1024                  # processes and threads in one Judge container (16 to 65536)
 *   writable_rootfs = false            # true: test.sh may write into the image's file system (still discarded)
 *
 *   [metadata.assay_judge.snapshot]
 *   max_files = 200000                 # entries (files, directories, symlinks)
 *   max_bytes = 17179869184            # total file bytes
 *   max_file_bytes = 8589934592        # largest single file
 *   max_depth = 128                    # directory nesting
 *   forbidden_paths = ["logs/", "*.so"]    # no entry may match (gitignore-like patterns, as snapshot excludes)
 *   allowed_paths = ["solve.py", "src/"]   # when set: every file and symlink must match, or sit under a match
 *   symlinks = "allow"                 # "allow" | "internal" (targets must stay inside) | "forbid"
 *
 * Pure: validation of plain data, and a checker fed one snapshot entry at a time.
 */
import { compileExcludes, outsideSymlinks, type ExcludeMatcher } from '@assay/snapshots';

export interface SnapshotRules {
  readonly maxFiles: number;
  readonly maxBytes: number;
  readonly maxFileBytes: number;
  readonly maxDepth: number;
  readonly forbiddenPaths: readonly string[];
  /** Null: any path. */
  readonly allowedPaths: readonly string[] | null;
  readonly symlinks: 'allow' | 'internal' | 'forbid';
}

export interface JudgeTaskSettings {
  readonly pidsLimit: number;
  readonly writableRootfs: boolean;
  readonly snapshot: SnapshotRules;
}

export const DEFAULT_SNAPSHOT_RULES: SnapshotRules = Object.freeze({
  maxFiles: 200_000,
  maxBytes: 16 * 2 ** 30,
  maxFileBytes: 8 * 2 ** 30,
  maxDepth: 128,
  forbiddenPaths: Object.freeze([]) as readonly string[],
  allowedPaths: null,
  symlinks: 'allow',
});

export const DEFAULT_JUDGE_SETTINGS: JudgeTaskSettings = Object.freeze({ pidsLimit: 1024, writableRootfs: false, snapshot: DEFAULT_SNAPSHOT_RULES });

export const SETTINGS_TABLE = 'metadata.assay_judge';

type Json = unknown;

export type JudgeSettingsParse = { readonly ok: true; readonly value: JudgeTaskSettings } | { readonly ok: false; readonly problems: readonly string[] };

function isTable(v: Json): v is Record<string, Json> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Reads `[metadata.assay_judge]` from a task plan's metadata; unknown keys and bad values are all reported. */
export function readJudgeSettings(metadata: Readonly<Record<string, Json>>): JudgeSettingsParse {
  const raw = metadata.assay_judge;
  if (raw === undefined) return { ok: true, value: DEFAULT_JUDGE_SETTINGS };
  const problems: string[] = [];
  const where = (k: string) => `task.toml: ${SETTINGS_TABLE}.${k}`;
  if (!isTable(raw)) return { ok: false, problems: [`task.toml: ${SETTINGS_TABLE}: expected a table`] };
  for (const k of Object.keys(raw))
    if (!['pids_limit', 'writable_rootfs', 'snapshot'].includes(k)) problems.push(`${where(k)}: unknown key (known: pids_limit, writable_rootfs, snapshot)`);
  const int = (t: Record<string, Json>, k: string, path: string, min: number, max: number, def: number): number => {
    const v = t[k];
    if (v === undefined) return def;
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min || v > max) {
      problems.push(`${where(path)}: expected an integer from ${min} to ${max}, got ${JSON.stringify(v)}`);
      return def;
    }
    return v;
  };
  const pidsLimit = int(raw, 'pids_limit', 'pids_limit', 16, 65536, DEFAULT_JUDGE_SETTINGS.pidsLimit);
  const writable = raw.writable_rootfs;
  if (writable !== undefined && typeof writable !== 'boolean')
    problems.push(`${where('writable_rootfs')}: expected a boolean, got ${JSON.stringify(writable)}`);
  let snapshot = DEFAULT_SNAPSHOT_RULES;
  const s = raw.snapshot;
  if (s !== undefined) {
    if (!isTable(s)) problems.push(`${where('snapshot')}: expected a table`);
    else {
      const known = ['max_files', 'max_bytes', 'max_file_bytes', 'max_depth', 'forbidden_paths', 'allowed_paths', 'symlinks'];
      for (const k of Object.keys(s)) if (!known.includes(k)) problems.push(`${where(`snapshot.${k}`)}: unknown key (known: ${known.join(', ')})`);
      const patterns = (k: string): string[] | null => {
        const v = s[k];
        if (v === undefined) return null;
        if (!Array.isArray(v) || v.some((x) => typeof x !== 'string')) {
          problems.push(`${where(`snapshot.${k}`)}: expected an array of strings`);
          return null;
        }
        try {
          compileExcludes(v as string[]);
        } catch (e) {
          problems.push(`${where(`snapshot.${k}`)}: ${(e as Error).message.replace(/^exclude /, '')}`);
          return null;
        }
        return v as string[];
      };
      const symlinks = s.symlinks;
      if (symlinks !== undefined && symlinks !== 'allow' && symlinks !== 'internal' && symlinks !== 'forbid') {
        problems.push(`${where('snapshot.symlinks')}: expected "allow", "internal" or "forbid", got ${JSON.stringify(symlinks)}`);
      }
      const d = DEFAULT_SNAPSHOT_RULES;
      const allowed = patterns('allowed_paths');
      snapshot = Object.freeze({
        maxFiles: int(s, 'max_files', 'snapshot.max_files', 0, 100_000_000, d.maxFiles),
        maxBytes: int(s, 'max_bytes', 'snapshot.max_bytes', 0, Number.MAX_SAFE_INTEGER, d.maxBytes),
        maxFileBytes: int(s, 'max_file_bytes', 'snapshot.max_file_bytes', 0, Number.MAX_SAFE_INTEGER, d.maxFileBytes),
        maxDepth: int(s, 'max_depth', 'snapshot.max_depth', 0, 1024, d.maxDepth),
        forbiddenPaths: Object.freeze(patterns('forbidden_paths') ?? []),
        allowedPaths: allowed === null ? null : Object.freeze(allowed),
        symlinks: symlinks === 'internal' || symlinks === 'forbid' ? symlinks : 'allow',
      });
    }
  }
  if (problems.length) return { ok: false, problems };
  return { ok: true, value: Object.freeze({ pidsLimit, writableRootfs: writable === true, snapshot }) };
}

/** One entry of a snapshot, from its manifests (no file content). */
export interface SnapshotEntry {
  /** Relative, `/`-separated. */
  readonly path: string;
  readonly kind: 'file' | 'dir' | 'symlink';
  /** File bytes (0 for directories and symlinks). */
  readonly size: number;
  readonly target: string | null;
}

export interface RuleFinding {
  /** Stable rule name, e.g. `snapshot.forbidden_path`. */
  readonly rule: string;
  readonly path: string | null;
  readonly detail: string;
}

/** Checks entries one at a time; reports the first broken rule. */
export class SnapshotRuleChecker {
  private files = 0;
  private bytes = 0;
  private readonly links = new Map<string, string>();
  private readonly forbidden: ExcludeMatcher;
  private readonly allowed: ExcludeMatcher | null;

  constructor(private readonly rules: SnapshotRules) {
    this.forbidden = compileExcludes(rules.forbiddenPaths);
    this.allowed = rules.allowedPaths === null ? null : compileExcludes(rules.allowedPaths);
  }

  private find(rule: string, path: string | null, detail: string): RuleFinding {
    return { rule, path, detail: path === null ? detail : `${path}: ${detail}` };
  }

  /** The first rule the entry breaks, or null. */
  visit(e: SnapshotEntry): RuleFinding | null {
    const r = this.rules;
    this.files += 1;
    if (this.files > r.maxFiles)
      return this.find('snapshot.max_files', e.path, `the snapshot has more than ${r.maxFiles} entries (${SETTINGS_TABLE}.snapshot.max_files)`);
    const depth = e.path.split('/').length - (e.kind === 'dir' ? 0 : 1);
    if (depth > r.maxDepth)
      return this.find('snapshot.max_depth', e.path, `nested ${depth} directories deep, over ${r.maxDepth} (${SETTINGS_TABLE}.snapshot.max_depth)`);
    if (e.kind === 'file') {
      if (e.size > r.maxFileBytes)
        return this.find(
          'snapshot.max_file_bytes',
          e.path,
          `${e.size} bytes, over the ${r.maxFileBytes} allowed for one file (${SETTINGS_TABLE}.snapshot.max_file_bytes)`,
        );
      this.bytes += e.size;
      if (this.bytes > r.maxBytes)
        return this.find('snapshot.max_bytes', e.path, `brings the snapshot over ${r.maxBytes} bytes (${SETTINGS_TABLE}.snapshot.max_bytes)`);
    }
    if (this.forbidden(e.path, e.kind === 'dir')) {
      const which = r.forbiddenPaths.find((p) => compileExcludes([p])(e.path, e.kind === 'dir')) ?? '';
      return this.find(
        'snapshot.forbidden_path',
        e.path,
        `matches the forbidden pattern ${JSON.stringify(which)} (${SETTINGS_TABLE}.snapshot.forbidden_paths)`,
      );
    }
    if (this.allowed && e.kind !== 'dir' && !this.isAllowed(e.path)) {
      return this.find(
        'snapshot.path_not_allowed',
        e.path,
        `matches none of the allowed patterns ${JSON.stringify(r.allowedPaths)} (${SETTINGS_TABLE}.snapshot.allowed_paths)`,
      );
    }
    if (e.kind === 'symlink') {
      if (r.symlinks === 'forbid')
        return this.find(
          'snapshot.symlink',
          e.path,
          `is a symbolic link (to ${JSON.stringify(e.target)}); the task forbids them (${SETTINGS_TABLE}.snapshot.symlinks = "forbid")`,
        );
      this.links.set(e.path, e.target ?? '');
    }
    return null;
  }

  private isAllowed(path: string): boolean {
    const m = this.allowed as ExcludeMatcher;
    if (m(path, false)) return true;
    const parts = path.split('/');
    for (let i = 1; i < parts.length; i++) if (m(parts.slice(0, i).join('/'), true)) return true;
    return false;
  }

  /** Rules that need the whole tree (symlinks that leave it). */
  finish(): RuleFinding | null {
    if (this.rules.symlinks !== 'internal') return null;
    const out = outsideSymlinks(this.links);
    const first = out[0];
    if (first === undefined) return null;
    return this.find(
      'snapshot.symlink',
      first,
      `points outside the snapshot (to ${JSON.stringify(this.links.get(first))})${out.length > 1 ? `, as do ${out.length - 1} more` : ''}; the task allows only internal links (${SETTINGS_TABLE}.snapshot.symlinks = "internal")`,
    );
  }
}

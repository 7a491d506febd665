/**
 * Which workspace paths a submission may change. A task declares them (for now) in its own namespace:
 *
 *   [metadata.assay_run]
 *   editable_paths = ["optimizer.py", "src/"]   # exact files, or directories ending in "/" (all beneath them)
 *
 * (proposed to move to [metadata.assay] editable_paths once @assay/task-format accepts the key). The run compares
 * each submission's snapshot with the starting workspace (the first SnapshotTaken of the run without a round); any
 * added, removed or changed path outside the list makes the round a RuleViolation `workspace.not_editable`, score 0,
 * and the round is not judged. Pure.
 */
import { editablePathProblem } from './run-protocol';

export const RUN_TASK_SETTINGS_TABLE = 'metadata.assay_run';

export interface RunTaskSettings {
  /** Null: the task does not restrict edits. */
  readonly editablePaths: readonly string[] | null;
}

export type RunTaskSettingsParse = { readonly ok: true; readonly value: RunTaskSettings } | { readonly ok: false; readonly problems: readonly string[] };

/** Reads [metadata.assay_run] from a task plan's metadata (TaskPlan.metadata); every problem is reported. */
export function readRunTaskSettings(metadata: Readonly<Record<string, unknown>>): RunTaskSettingsParse {
  const raw = metadata.assay_run;
  if (raw === undefined) return { ok: true, value: { editablePaths: null } };
  const where = (k: string) => `task.toml: ${RUN_TASK_SETTINGS_TABLE}${k ? `.${k}` : ''}`;
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return { ok: false, problems: [`${where('')}: expected a table`] };
  const t = raw as Record<string, unknown>;
  const problems: string[] = [];
  for (const k of Object.keys(t)) if (k !== 'editable_paths') problems.push(`${where(k)}: unknown key (known: editable_paths)`);
  let editablePaths: string[] | null = null;
  const e = t.editable_paths;
  if (e !== undefined) {
    if (!Array.isArray(e) || e.length === 0 || e.length > 1000) problems.push(`${where('editable_paths')}: expected a list of 1 to 1000 paths`);
    else {
      for (const p of e) {
        const why = editablePathProblem(p);
        if (why) problems.push(`${where('editable_paths')}: ${JSON.stringify(p)} ${why}`);
      }
      editablePaths = [...new Set(e as string[])].sort();
    }
  }
  return problems.length ? { ok: false, problems } : { ok: true, value: { editablePaths } };
}

/** True when `path` (relative, `/`-separated, as snapshots name entries) may be changed. */
export function isEditablePath(path: string, editable: readonly string[]): boolean {
  for (const e of editable) {
    if (e.endsWith('/')) {
      const dir = e.slice(0, -1);
      if (path === dir || path.startsWith(e)) return true;
    } else if (path === e) return true;
  }
  return false;
}

export interface PathChange {
  readonly path: string;
  readonly change: 'added' | 'removed' | 'changed';
}

/** The changes outside the editable paths, in the order given (at most `limit`). */
export function changesOutside(changes: Iterable<PathChange>, editable: readonly string[], limit = 10): PathChange[] {
  const out: PathChange[] = [];
  for (const c of changes) {
    if (isEditablePath(c.path, editable)) continue;
    out.push(c);
    if (out.length >= limit) break;
  }
  return out;
}

/** The RuleViolation detail for such changes. */
export function notEditableDetail(bad: readonly PathChange[], editable: readonly string[]): string {
  const list = bad.map((c) => `${c.change} ${JSON.stringify(c.path)}`).join(', ');
  return `the submission changes paths outside the editable ones (${editable.map((e) => JSON.stringify(e)).join(', ')}): ${list}`;
}

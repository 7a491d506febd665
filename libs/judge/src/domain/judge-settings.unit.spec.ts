import { DEFAULT_JUDGE_SETTINGS, readJudgeSettings, SnapshotRuleChecker, type SnapshotEntry, type SnapshotRules } from './judge-settings';

const rules = (o: Partial<SnapshotRules> = {}): SnapshotRules => ({ ...DEFAULT_JUDGE_SETTINGS.snapshot, ...o });
const f = (path: string, size = 1): SnapshotEntry => ({ path, kind: 'file', size, target: null });
const d = (path: string): SnapshotEntry => ({ path, kind: 'dir', size: 0, target: null });
const l = (path: string, target: string): SnapshotEntry => ({ path, kind: 'symlink', size: 0, target });

function check(r: SnapshotRules, entries: SnapshotEntry[]) {
  const c = new SnapshotRuleChecker(r);
  for (const e of entries) {
    const x = c.visit(e);
    if (x) return x;
  }
  return c.finish();
}

describe('readJudgeSettings', () => {
  it('defaults when the table is absent', () => {
    expect(readJudgeSettings({})).toEqual({ ok: true, value: DEFAULT_JUDGE_SETTINGS });
  });
  it('reads every key', () => {
    const r = readJudgeSettings({
      assay_judge: {
        pids_limit: 64,
        writable_rootfs: true,
        snapshot: {
          max_files: 10,
          max_bytes: 100,
          max_file_bytes: 50,
          max_depth: 3,
          forbidden_paths: ['logs/'],
          allowed_paths: ['src/', 'main.py'],
          symlinks: 'internal',
        },
      },
    });
    expect(r).toEqual({
      ok: true,
      value: {
        pidsLimit: 64,
        writableRootfs: true,
        snapshot: {
          maxFiles: 10,
          maxBytes: 100,
          maxFileBytes: 50,
          maxDepth: 3,
          forbiddenPaths: ['logs/'],
          allowedPaths: ['src/', 'main.py'],
          symlinks: 'internal',
        },
      },
    });
  });
  it('reports every problem', () => {
    const r = readJudgeSettings({
      assay_judge: { pids_limit: 3, typo: 1, writable_rootfs: 'yes', snapshot: { max_files: -1, forbidden_paths: ['!x', 3], symlinks: 'maybe', extra: true } },
    });
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.problems).toEqual(
        expect.arrayContaining([
          expect.stringContaining('metadata.assay_judge.typo: unknown key'),
          expect.stringContaining('pids_limit: expected an integer from 16 to 65536, got 3'),
          expect.stringContaining('writable_rootfs: expected a boolean'),
          expect.stringContaining('snapshot.extra: unknown key'),
          expect.stringContaining('snapshot.max_files: expected an integer'),
          expect.stringContaining('snapshot.forbidden_paths: expected an array of strings'),
          expect.stringContaining('snapshot.symlinks: expected "allow", "internal" or "forbid"'),
        ]),
      );
    }
  });
  it('refuses invalid patterns', () => {
    const r = readJudgeSettings({ assay_judge: { snapshot: { forbidden_paths: ['!negated'] } } });
    expect(r).toMatchObject({ ok: false, problems: [expect.stringContaining('negation')] });
  });
});

describe('SnapshotRuleChecker', () => {
  it('passes a snapshot within the rules', () => {
    expect(check(rules({ forbiddenPaths: ['logs/'] }), [d('src'), f('src/a.py'), l('link', 'src/a.py')])).toBeNull();
  });
  it('forbidden paths, at any depth and directories only when asked', () => {
    expect(check(rules({ forbiddenPaths: ['logs/', '*.so'] }), [d('logs'), d('logs/verifier'), f('logs/verifier/reward.txt')])).toMatchObject({
      rule: 'snapshot.forbidden_path',
      path: 'logs',
    });
    expect(check(rules({ forbiddenPaths: ['*.so'] }), [d('lib'), f('lib/x.so')])).toMatchObject({
      rule: 'snapshot.forbidden_path',
      path: 'lib/x.so',
      detail: expect.stringContaining('"*.so"'),
    });
    expect(check(rules({ forbiddenPaths: ['logs/'] }), [f('logs')])).toBeNull();
  });
  it('allowed paths: every file and link must match or sit under a match', () => {
    const r = rules({ allowedPaths: ['src/', 'main.py'] });
    expect(check(r, [f('main.py'), d('src'), d('src/x'), f('src/x/y.py')])).toBeNull();
    expect(check(r, [f('main.py'), f('notes.txt')])).toMatchObject({ rule: 'snapshot.path_not_allowed', path: 'notes.txt' });
  });
  it('limits on entries, bytes, file size and depth', () => {
    expect(check(rules({ maxFiles: 2 }), [f('a'), f('b'), f('c')])).toMatchObject({ rule: 'snapshot.max_files', path: 'c' });
    expect(check(rules({ maxBytes: 10 }), [f('a', 6), f('b', 6)])).toMatchObject({ rule: 'snapshot.max_bytes', path: 'b' });
    expect(check(rules({ maxFileBytes: 5 }), [f('a', 6)])).toMatchObject({ rule: 'snapshot.max_file_bytes' });
    expect(check(rules({ maxDepth: 1 }), [d('a'), d('a/b')])).toMatchObject({ rule: 'snapshot.max_depth', path: 'a/b' });
    expect(check(rules({ maxDepth: 1 }), [d('a'), f('a/b')])).toBeNull();
  });
  it('symlinks: forbid, or internal only (resolved through other links, never on disk)', () => {
    expect(check(rules({ symlinks: 'forbid' }), [l('x', 'y')])).toMatchObject({ rule: 'snapshot.symlink', path: 'x' });
    expect(check(rules({ symlinks: 'internal' }), [l('tests', '/tests')])).toMatchObject({ rule: 'snapshot.symlink', path: 'tests' });
    expect(check(rules({ symlinks: 'internal' }), [d('a'), l('a/up', '../..')])).toMatchObject({ rule: 'snapshot.symlink', path: 'a/up' });
    expect(check(rules({ symlinks: 'internal' }), [d('a'), l('a/l', '../b'), f('b')])).toBeNull();
    expect(check(rules({ symlinks: 'allow' }), [l('tests', '/tests')])).toBeNull();
  });
});

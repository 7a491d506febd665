/**
 * The import boundaries (.dependency-cruiser.cjs, docs/architecture.md "Boundaries") tested as rules: every rule
 * reports its planted violation in tests/fixtures/boundaries/ under its own name and nothing else there; the real tree
 * breaks no rule at all (there is no baseline of known violations).
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

const root = join(__dirname, '..', '..');
const config = join(root, '.dependency-cruiser.cjs');
const depcruise = join(root, 'node_modules', 'dependency-cruiser', 'bin', 'dependency-cruise.mjs');
const fixture = join(root, 'tests', 'fixtures', 'boundaries');

interface Violation {
  readonly from: string;
  readonly to: string;
  readonly rule: { readonly name: string };
}

/** Runs dependency-cruiser with the project's rules on `paths`, from `cwd`; the violations, unfiltered. */
function cruise(cwd: string, paths: readonly string[]): Violation[] {
  const r = spawnSync(process.execPath, [depcruise, ...paths, '--config', config, '--output-type', 'json'], {
    cwd,
    encoding: 'utf8',
    maxBuffer: 256 * 1024 * 1024,
  });
  if (r.error) throw r.error;
  if (!r.stdout) throw new Error(`depcruise printed nothing (exit ${r.status}): ${r.stderr}`);
  return (JSON.parse(r.stdout) as { summary: { violations: Violation[] } }).summary.violations;
}

const key = (v: { from: string; to: string; rule: { name: string } }): string => `${v.rule.name}: ${v.from} -> ${v.to.replace(/^(\.\.\/)+/, '')}`;

const ruleNames = (): string[] => (require(config) as { forbidden: { name: string }[] }).forbidden.map((r) => r.name);

describe('import boundaries: the rules', () => {
  // rule, importing file, imported module (npm packages relative to the repository's node_modules).
  const planted: readonly (readonly [string, string, string])[] = [
    ['no-app-to-app', 'apps/api/src/main.ts', 'apps/cli/src/name.ts'],
    ['no-app-to-app', 'apps/cli/src/serve.ts', 'apps/api/src/main.ts'],
    ['no-lib-to-app', 'libs/judge/src/to-app.ts', 'apps/api/src/main.ts'],
    ['lib-public-entry-only', 'libs/judge/src/deep.ts', 'libs/ledger/src/domain/beta.ts'],
    ['lib-entry-through-alias', 'libs/judge/src/relative-entry.ts', 'libs/ledger/src/index.ts'],
    ['no-testing-entry-in-shipped-code', 'libs/judge/src/uses-testing.ts', 'libs/ledger/src/testing.ts'],
    ['domain-imports-no-outer-layer', 'libs/judge/src/domain/layered.ts', 'libs/judge/src/application/helper.ts'],
    ['domain-imports-no-framework', 'libs/judge/src/domain/impure.ts', 'fs'],
    ['domain-imports-no-framework', 'libs/judge/src/domain/impure.ts', 'node_modules/@nestjs/common/index.d.ts'],
    ['application-imports-no-adapters', 'libs/judge/src/application/service.ts', 'libs/judge/src/adapters/store.adapter.ts'],
    ['adapters-import-no-application', 'libs/judge/src/adapters/store.adapter.ts', 'libs/judge/src/application/helper.ts'],
    ['ports-import-only-domain', 'libs/judge/src/ports/leaky.port.ts', 'libs/judge/src/adapters/memory-store.adapter.ts'],
    ['lib-layers-core', 'libs/core/src/index.ts', 'libs/ledger/src/index.ts'],
    ['lib-layers-codec', 'libs/tar/src/index.ts', 'libs/ledger/src/index.ts'],
    ['lib-layers-base', 'libs/ledger/src/domain/back.ts', 'libs/judge/src/index.ts'],
    ['lib-layers-top', 'libs/run/src/index.ts', 'libs/judge/src/index.ts'],
    ['lib-layers-outer', 'libs/run/src/to-bundles.ts', 'libs/bundles/src/index.ts'],
    ['lib-layers-runtime', 'libs/run/src/to-runtime.ts', 'libs/runtime/src/index.ts'],
    ['lib-in-a-layer', 'libs/extra/src/index.ts', 'libs/ledger/src/index.ts'],
    ['no-circular', 'libs/judge/src/domain/cycle-a.ts', 'libs/judge/src/domain/cycle-b.ts'],
    ['no-dev-dependency-in-shipped-code', 'libs/judge/src/uses-dev.ts', 'node_modules/tweetnacl/nacl-fast.js'],
    ['no-undeclared-dependency', 'libs/judge/src/undeclared.ts', 'node_modules/js-yaml/dist/js-yaml.mjs'],
    ['no-tests-in-shipped-code', 'libs/judge/src/uses-tests.ts', 'tests/helper.ts'],
    ['no-unresolvable', 'libs/judge/src/unresolvable.ts', './does-not-exist'],
  ];
  let found: string[];

  beforeAll(() => {
    found = cruise(fixture, ['apps', 'libs', 'tests']).map(key);
  }, 120_000);

  it('plants a violation of every rule', () => {
    expect(new Set(planted.map(([rule]) => rule))).toEqual(new Set(ruleNames()));
  });

  it.each(planted)('%s: %s -> %s is reported', (rule, from, to) => {
    expect(found).toContain(`${rule}: ${from} -> ${to}`);
  });

  it('reports nothing else: the clean files (apps on @assay/runtime, spec files, type-only dev imports) pass', () => {
    // (The type-only cycle is reported once, from its first module.)
    expect([...found].sort()).toEqual(planted.map(([r, f, t]) => `${r}: ${f} -> ${t}`).sort());
  });
});

describe('import boundaries: the real tree', () => {
  it('breaks no rule', () => {
    // The same paths as `npm run lint`.
    const found = cruise(root, ['apps', 'libs', 'bench', 'tests', 'scripts', 'task-runtime']).map(key);
    expect(found).toEqual([]);
  }, 180_000);
});

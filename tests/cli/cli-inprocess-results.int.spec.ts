/**
 * The results commands run in this process (runCli with a capturing context), on a real sample home: API tokens,
 * bundle import into the leaderboard, `assay watch` and `assay report` with its reproducibility and budget sections.
 * The child-process suites (tests/api, tests/bundles, tests/projections) run the same commands as a user does; these
 * check the in-process paths and their exit codes.
 */
import { assayInProcess } from '../support/cli';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { homeWith, preamble, sampleVariant } from '../projections/projection-fixtures';

jest.setTimeout(120_000);

const FIXTURES = join(__dirname, '..', 'fixtures', 'bundles');

const cli = assayInProcess;

describe('results commands, in process', () => {
  let dir: string;
  let home: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'assay-cli-results-'));
    home = join(dir, 'home');
    await homeWith(home, [...preamble(), ...sampleVariant({ run: 'r-one', scores: [0.9, 0.8, 0.7] })]);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('tokens: create, list and revoke, text and JSON; refusals', async () => {
    const c = await cli(['tokens', 'create', '--role', 'auditor', '--name', 'in process'], home);
    expect(c.code).toBe(0);
    expect(c.out).toMatch(/^assay-tk-/);
    const j = await cli(['tokens', 'create', '--role', 'reader', '--json'], home);
    const created = JSON.parse(j.out) as { id: string; role: string; token: string };
    expect(created.role).toBe('reader');
    const list = await cli(['tokens', 'list'], home);
    expect(list.out.split('\n')).toHaveLength(2);
    expect(list.out).not.toContain(created.token);
    const listJson = JSON.parse((await cli(['tokens', 'list', '--json'], home)).out) as { tokens: unknown[] };
    expect(listJson.tokens).toHaveLength(2);
    expect((await cli(['tokens', 'revoke', created.id, '--json'], home)).out).toMatch(/"revokedAt":"20/);
    expect((await cli(['tokens', 'revoke', created.id], home)).out).toMatch(/^revoked /);
    expect((await cli(['tokens', 'create', '--role', 'god'], home)).code).toBe(2);
    expect((await cli(['tokens', 'revoke', 'tk_ffffffffffffffff'], home)).code).toBe(3);
    const empty = join(dir, 'empty');
    expect((await cli(['tokens', 'list'], empty)).out).toMatch(/^no API tokens in /);
    expect((await cli(['serve', '--reads', 'sometimes'], home)).code).toBe(2);
  });

  it('bundle import, then the leaderboard shows the imported row; JSON; refusals', async () => {
    const bundle = join(FIXTURES, 'sample-run.v1.bundle');
    const key = join(FIXTURES, 'sample-run.v1.root.pub');
    const r = await cli(['bundle', 'import', bundle, '--trusted-key', key], home);
    expect([r.code, r.err]).toEqual([0, '']);
    expect(r.out).toMatch(/^imported: run r-20261202-0001 /);
    const again = JSON.parse((await cli(['bundle', 'import', bundle, '--trusted-key', key, '--json'], home)).out) as { imported: boolean };
    expect(again.imported).toBe(false);
    const lb = await cli(['leaderboard', 'tiny-optimizer'], home);
    expect(lb.out).toMatch(/r-20261202-0001 .*imported from /);
    expect((await cli(['bundle', 'import', join(dir, 'none.bundle'), '--trusted-key', key], home)).code).toBe(3);
    const notBundle = join(dir, 'not.bundle');
    writeFileSync(notBundle, 'not a bundle');
    const bad = await cli(['bundle', 'import', notBundle, '--trusted-key', key], home);
    expect(bad.code).toBe(5);
    expect(bad.err).toMatch(/BUNDLE_IMPORT_REFUSED/);
  });

  it('watch and report of a run that has ended', async () => {
    const w = await cli(['watch', 'r-one', '--interval', '100'], home);
    expect(w.code).toBe(0);
    expect(w.out.split('\n').at(-1)).toBe('run r-one ended: completed, best 0.7 (round 5)');
    const wj = await cli(['watch', 'r-one', '--json'], home);
    expect(JSON.parse(wj.out.split('\n').at(-1)!)).toEqual({ ended: 'completed', best: { round: 5, score: 0.7 } });
    expect((await cli(['watch', 'nope'], home)).code).toBe(3);
    expect((await cli(['watch', 'bad id'], home)).code).toBe(2);
    expect((await cli(['watch', 'r-one', '--interval', 'x'], home)).code).toBe(2);
    const rep = await cli(['report', 'r-one'], home);
    expect(rep.out).toMatch(/^reproducibility: recorded best 0\.7 \(round 5/m);
    expect(rep.out).toMatch(/^budget:$/m);
  });
});

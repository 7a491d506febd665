/** `assay run ls` / `run status` without Docker: a missing ledger is a clear not_found and creates nothing. */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { assay } from '../support/cli';

jest.setTimeout(60_000);

describe('assay run ls / status (no Docker)', () => {
  let dir: string;
  beforeAll(() => (dir = mkdtempSync(join(tmpdir(), 'assay-run-views-'))));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('no ledger: not_found, exit 3, one line, and no state created', async () => {
    const home = join(dir, 'missing');
    const r = await assay(['run', 'ls'], home);
    expect(r.code).toBe(3);
    expect(r.stderr.trim().split('\n')).toEqual([expect.stringContaining('LEDGER_NOT_INITIALIZED')]);
    expect(existsSync(home)).toBe(false);
  });

  it('an empty ledger: no runs; an unknown run: RUN_NOT_FOUND, exit 3', async () => {
    const home = join(dir, 'home');
    expect((await assay(['ledger', 'init', '--origin', 'assay.test/run-views'], home)).code).toBe(0);
    const ls = await assay(['run', 'ls', '--json'], home);
    expect([ls.code, JSON.parse(ls.stdout)]).toEqual([0, { runs: [] }]);
    expect((await assay(['run', 'ls'], home)).stdout.trim()).toBe('no runs in this ledger');
    const st = await assay(['run', 'status', 'nope'], home);
    expect(st.code).toBe(3);
    expect(st.stderr.trim().split('\n')).toEqual([expect.stringContaining('RUN_NOT_FOUND')]);
  });
});

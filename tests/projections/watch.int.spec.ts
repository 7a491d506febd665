/**
 * `assay watch RUN_ID`: a child process follows a run while its events are appended, printing each round once judged
 * and the best so far, and exits 0 when the run ends; a run that is not there is exit 3, a bad interval exit 2.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { REPO_ROOT, TS_REGISTER, finished } from '../support/child-process';
import { assay } from '../support/cli';
import { makeTmpDir } from '../support/ledger-fixtures';
import { appendTo, homeWith, preamble, sampleVariant } from './projection-fixtures';

jest.setTimeout(120_000);

let tmp: { dir: string; cleanup(): void };
let home: string;
const events = sampleVariant({ run: 'r-w' });
// up to and including round 2's JudgeCompleted: rounds 1 and 2 judged, the rest still to come
const reward2 = events.findIndex((e) => e.type === 'RewardRecorded' && (e.data as { round: number }).round === 2);
const cut = events.findIndex((e, i) => i > reward2 && e.type === 'JudgeCompleted') + 1;

beforeAll(async () => {
  tmp = makeTmpDir('assay-watch-');
  home = join(tmp.dir, 'home');
  await homeWith(home, [...preamble(), ...events.slice(0, cut)], { checkpoint: false });
});
afterAll(() => tmp.cleanup());

describe('assay watch', () => {
  it('prints rounds as they are judged and the best so far, then ends with the run', async () => {
    const child = spawn(process.execPath, ['-r', TS_REGISTER, 'apps/cli/src/main.ts', 'watch', 'r-w', '--interval', '100'], {
      cwd: REPO_ROOT,
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...process.env, NODE_OPTIONS: '', ASSAY_HOME: home },
    });
    child.stdin.end();
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const done = finished(child, 60_000);
    const deadline = Date.now() + 30_000;
    while (!out.includes('(round 2)') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect(out).not.toContain('round 5');
    expect(out).not.toContain('ended');
    await appendTo(home, events.slice(cut), { checkpoint: false });
    const r = await done;
    expect(r.code).toBe(0);
    expect(out.trimEnd().split('\n')).toEqual([
      'watching run r-w  task tiny-optimizer  agent reference  val_loss (minimize)',
      'round 1  completed  score 0.912',
      'best so far: 0.912 (round 1)',
      'round 2  completed  score 0.574',
      'best so far: 0.574 (round 2)',
      expect.stringMatching(/^round 3 {2}rule_violation {2}rule \S+$/),
      'round 4  refunded',
      'round 5  completed  score 0.433',
      'best so far: 0.433 (round 5)',
      'run r-w ended: completed, best 0.433 (round 5)',
    ]);
  });

  it('--json prints one document per line; a run that is not there is exit 3, a bad interval exit 2', async () => {
    const r = await assay(['watch', 'r-w', '--json'], home);
    expect(r.code).toBe(0);
    const docs = r.stdout
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(docs.filter((d) => 'round' in d).map((d) => d.round)).toEqual([1, 2, 3, 4, 5]);
    expect(docs[docs.length - 1]).toEqual({ ended: 'completed', best: { round: 5, score: 0.433 } });
    const missing = await assay(['watch', 'r-none'], home);
    expect(missing.code).toBe(3);
    expect(missing.stderr).toMatch(/RUN_NOT_FOUND/);
    expect((await assay(['watch', 'r-w', '--interval', '5'], home)).code).toBe(2);
  });
});

/**
 * `assay leaderboard` and `assay report` end to end (the CLI in a child process, a real signed ledger): text with a
 * header per protocol group and ranked rows, --json, a task directory path matched by its name, a run's trajectory,
 * not found, a tampered ledger refused with exit 5, and the ledger left unwritten.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { homePaths } from '@assay/ledger';
import { readModelsPath, type LeaderboardGroup, type RunReport, type Trajectory } from '@assay/projections';
import { assay } from '../support/cli';
import { makeTmpDir } from '../support/ledger-fixtures';
import { copyHome, tamper } from '../support/ledger-home-fixtures';
import { baselineEvents, homeWith, noValidRun, preamble, sampleVariant } from './projection-fixtures';

jest.setTimeout(120_000);

const FP_B = 'sha256:' + 'b'.repeat(64);
const FP_C = 'sha256:' + 'c'.repeat(64);
let tmp: { dir: string; cleanup(): void };
let home: string;

beforeAll(async () => {
  tmp = makeTmpDir('assay-projections-cli-');
  home = join(tmp.dir, 'home');
  await homeWith(home, [
    ...preamble(),
    ...sampleVariant({ run: 'r-a' }),
    ...sampleVariant({ run: 'r-b', fingerprint: FP_B, scores: [0.3, 0.2, 0.1] }),
    ...noValidRun('r-none'),
    // the sample's protocol: a start baseline of 3 repeats (r-a's 0.433 lies below its range: an improvement) and an oracle
    ...baselineEvents({ kind: 'start', scores: [0.95, 0.9, 0.92] }),
    ...baselineEvents({ kind: 'oracle', scores: [0.4, 0.41, 0.4] }),
    // protocol B: 2 completed repeats of 3: too few to tell r-b's 0.1 from the start
    ...baselineEvents({ kind: 'start', fingerprint: FP_B, scores: [0.2, null, 0.25] }),
    // a protocol no run used yet: a group of baseline rows only
    ...baselineEvents({ kind: 'start', fingerprint: FP_C, scores: [0.5, 0.5, 0.5] }),
  ]);
});
afterAll(() => tmp.cleanup());

describe('assay leaderboard', () => {
  it('prints each protocol group with what identifies it, rows ranked; the ledger is not written', async () => {
    const ledgerBefore = readFileSync(homePaths(home).db);
    const r = await assay(['leaderboard', 'tiny-optimizer'], home);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const lines = r.stdout.split('\n');
    const headers = lines.filter((l) => l.startsWith('task tiny-optimizer  protocol group'));
    expect(headers).toHaveLength(3);
    expect(headers[0]).toContain('protocol fingerprint sha256:5aef9624');
    expect(headers[0]).toContain('task digest sha256:0ebb429f');
    expect(headers[1]).toContain(`protocol fingerprint ${FP_B}`);
    expect(headers[2]).toContain(`protocol fingerprint ${FP_C}`);
    expect(r.stdout).toContain('ranked by val_loss (minimize); 2 run(s)');
    const cells = (run: string) =>
      lines
        .find((l) => l.includes(` ${run} `))!
        .trim()
        .split(/\s{2,}/);
    expect(cells('r-a').slice(0, 8)).toEqual(['1', 'r-a', 'reference', 'scripted', 'completed', '0.433', '5', expect.stringMatching(/^bafy/)]);
    // the median 0.92 minus 0.433, relative to 0.92; outside [0.9, 0.95] on the better side with 3 repeats
    expect(cells('r-a').slice(8)).toEqual(['+0.487 (+52.9%) improvement', '4/4', '0', '0', '1', '1', '39.0 s', '-', 'ledger']);
    expect(cells('r-none').slice(0, 7)).toEqual(['-', 'r-none', 'reference', 'scripted', 'no_valid_submission', '-', '-']);
    expect(cells('r-none')[8]).toBe('no score');
    expect(cells('r-b')[8]).toMatch(/^\+0\.125 \(\+55\.6%\) not distinguishable$/);
    expect(lines.indexOf(lines.find((l) => l.includes(' r-a '))!)).toBeLessThan(lines.indexOf(lines.find((l) => l.includes(' r-none '))!));
    expect(cells('r-b').slice(0, 2)).toEqual(['1', 'r-b']);
    // each group's baseline rows
    const group = (i: number) => lines.slice(lines.indexOf(headers[i]!), i + 1 < headers.length ? lines.indexOf(headers[i + 1]!) : undefined);
    expect(group(0)).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^ {2}baseline start {2}median 0\.92 over 3 of 3 repeat\(s\), range \[0\.9, 0\.95\], spread 0\.05 \(position \d+\)$/),
        expect.stringMatching(/^ {2}baseline oracle median 0\.4 over 3 of 3 repeat\(s\), range \[0\.4, 0\.41\]/),
      ]),
    );
    expect(group(1)).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^ {2}baseline start {2}median 0\.225 over 2 of 3 repeat\(s\)/),
        '  baseline oracle none recorded under this protocol',
      ]),
    );
    expect(group(2)).toEqual(
      expect.arrayContaining(['  ranked by val_loss (minimize); 0 run(s)', expect.stringMatching(/^ {2}baseline start {2}median 0\.5 over 3/)]),
    );
    expect(existsSync(readModelsPath(home))).toBe(true);
    expect(readFileSync(homePaths(home).db).equals(ledgerBefore)).toBe(true);
  });

  it('--json, and a task directory path matched by its name', async () => {
    const r = await assay(['leaderboard', 'examples/tasks/tiny-optimizer/', '--json'], home);
    expect(r.code).toBe(0);
    const doc = JSON.parse(r.stdout) as { task: string; groups: LeaderboardGroup[] };
    expect(doc.groups.map((g) => g.rows.map((x) => [x.run, x.rank, x.best?.score ?? null, x.source]))).toEqual([
      [
        ['r-a', 1, 0.433, 'ledger'],
        ['r-none', null, null, 'ledger'],
      ],
      [['r-b', 1, 0.1, 'ledger']],
      [],
    ]);
    expect(doc.groups[0]).toMatchObject({ task: 'tiny-optimizer', direction: 'minimize', metric: 'val_loss' });
    expect(doc.groups[0]!.baselines.start).toMatchObject({ kind: 'start', repeats: 3, completed: 3, median: 0.92, min: 0.9, max: 0.95 });
    expect(doc.groups[0]!.rows[0]!.vsBaseline).toMatchObject({ matched: true, verdict: 'improvement', distinguishable: true, score: 0.433 });
    expect(doc.groups[1]!.rows[0]!.vsBaseline).toMatchObject({ matched: true, verdict: 'not_distinguishable', distinguishable: false });
    expect(doc.groups[2]).toMatchObject({ fingerprint: FP_C, rows: [], baselines: { start: { median: 0.5 }, oracle: null } });
  });

  it('a task with no runs', async () => {
    const r = await assay(['leaderboard', 'nothing-here'], home);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('no runs of task nothing-here in the signed part of this ledger\n');
  });
});

describe('assay report', () => {
  it("prints the run's rounds with elapsed time, status, score and the best so far", async () => {
    const r = await assay(['report', 'r-a'], home);
    expect(r.code).toBe(0);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines[0]).toBe('run r-a  task tiny-optimizer  agent reference  status completed  val_loss (minimize)');
    expect(lines[1]!.trim().split(/\s{2,}/)).toEqual(['round', 'elapsed', 'status', 'score', 'best so far']);
    expect(
      lines.slice(2, 7).map((l) =>
        l
          .trim()
          .split(/\s{2,}/)
          .filter((_, i) => i !== 1),
      ),
    ).toEqual([
      ['1', 'completed', '0.912', '0.912 (round 1)'],
      ['2', 'completed', '0.574', '0.574 (round 2)'],
      ['3', 'rule_violation', '-', '0.574 (round 2)'],
      ['4', 'refunded', '-', '0.574 (round 2)'],
      ['5', 'completed', '0.433', '0.433 (round 5)'],
    ]);
    expect(lines.slice(7)).toEqual([
      '',
      expect.stringMatching(/^reproducibility: recorded best 0\.433 \(round 5, snapshot bafy\w+\)$/),
      '  never re-judged in this ledger (assay rejudge BUNDLE; docs/rejudge.md)',
      'budget:',
      expect.stringMatching(/^ {2}kind +used +allowed +remaining$/),
      expect.stringMatching(/^ {2}submissions +4 +4 +0$/),
      expect.stringMatching(/^ {2}wall_time +\d+(\.\d+)? +3600 +/),
      expect.stringMatching(/^ {2}agent_time +\d+(\.\d+)? +1800 +/),
      expect.stringMatching(/^ {2}gpu_seconds +0 +unlimited +-$/),
      '  refunded rounds: 1',
    ]);
  });

  it('--json', async () => {
    const r = await assay(['report', 'r-none', '--json'], home);
    expect(r.code).toBe(0);
    const t = JSON.parse(r.stdout) as Trajectory;
    expect(t).toMatchObject({ run: 'r-none', status: 'no_valid_submission', source: 'ledger' });
    expect(t.rounds.map((x) => [x.round, x.status, x.score, x.bestSoFar])).toEqual([[1, 'rule_violation', null, null]]);
    const doc = JSON.parse(r.stdout) as Trajectory & RunReport;
    expect(doc.reproducibility).toEqual({ recorded: null, rejudges: [], latest: null });
    expect(doc.budget.kinds.map((k) => k.kind)).toEqual(['submissions', 'wall_time', 'agent_time', 'gpu_seconds']);
  });

  it('an unknown run is not found (3); a bad id is a usage error (2)', async () => {
    expect((await assay(['report', 'r-missing'], home)).code).toBe(3);
    expect((await assay(['report', '../x'], home)).code).toBe(2);
  });

  it('a ledger that does not verify is refused (5), a missing ledger is not found', async () => {
    const h = join(tmp.dir, 'tampered');
    copyHome(home, h);
    tamper(h, (db) => {
      const rows = db.prepare('SELECT position, bytes FROM events ORDER BY position').all() as Array<{ position: number; bytes: Buffer }>;
      const row = rows.find((x) => x.bytes.toString('utf8').includes('"primaryScore":0.912'))!;
      db.prepare('UPDATE events SET bytes = ? WHERE position = ?').run(Buffer.from(row.bytes.toString('utf8').replace('0.912', '0.012')), row.position);
    });
    // a fresh tampered home: its read models were copied along, so remove them to force a projection
    const { rmSync } = await import('node:fs');
    rmSync(join(h, 'projections'), { recursive: true, force: true });
    const r = await assay(['leaderboard', 'tiny-optimizer'], h);
    expect(r.code).toBe(5);
    expect(r.stderr).toContain('LEDGER_VERIFICATION_FAILED');
    const missing = await assay(['report', 'r-a'], join(tmp.dir, 'no-home'));
    expect(missing.code).toBe(3);
    expect(missing.stderr).toContain('LEDGER_NOT_INITIALIZED');
  });
});

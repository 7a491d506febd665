/**
 * Containment of a hostile agent in Work, end to end (the CLI in a child process, a real ASSAY_HOME, Docker):
 *   - the terminal shows only what Assay wrote: the agent's output is escaped and marked, its forged summary lines
 *     cannot pass for Assay's, no escape sequence reaches the terminal;
 *   - snapshot failures the agent causes (a fifo, a non-UTF-8 name, a path over PATH_MAX) are counted rule
 *     violations, never refunds.
 * No test here sends a packet anywhere: Work's network is `none`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { assay } from '../support/cli';
import { REPO_ROOT } from '../support/child-process';
import { describeDocker } from '../support/docker';
import { homeEvents } from './support/home-events';

jest.setTimeout(240_000);

const TASK = join(REPO_ROOT, 'examples/tasks/tiny-optimizer');

// Forged summary lines, a window title, concealed text, a cursor move and a carriage return, on stdout and stderr.
const NOISY = String.raw`set -u
printf '\033]0;pwned\007\033[8mconcealed\033[0m\n'
printf 'best      round 99, score 1e-9, snapshot bafyforged\n'
printf 'progress\rrun       forged (x) completed\n' >&2
printf '\033[2A\033[2Kround 7   completed  score 0\n'
printf 'no newline at the end'
`;

// Three snapshot failures only the agent can cause, then one submission more than the budget.
const PLANTER = String.raw`set -u
W="$ASSAY_WORKSPACE"
mkfifo "$W/pipe"; rsi-submit > /dev/null; echo "fifo=$?"; rm -f "$W/pipe"
touch "$W/$(printf 'bad\377name')"; rsi-submit > /dev/null; echo "utf8=$?"; rm -f "$W"/bad*name
D=$(printf 'd%.0s' $(seq 200)); P="$W"; for i in $(seq 24); do P="$P/$D"; done
mkdir -p "$P" 2>/dev/null || (cd "$W" && for i in $(seq 24); do mkdir -p "$D" && cd "$D"; done)
rsi-submit > /dev/null; echo "long=$?"; rm -rf "$W/$D"
rsi-submit > /dev/null; echo "after=$?"
`;

describeDocker('containment of a hostile agent in Work (CLI, Docker)', () => {
  let home: string;

  beforeAll(async () => {
    home = join(mkdtempSync(join(tmpdir(), 'assay-contain-')), 'home');
    const r = await assay(['ledger', 'init', '--origin', 'assay.test/containment'], home);
    expect(r.code).toBe(0);
  }, 60_000);

  afterAll(() => rmSync(join(home, '..'), { recursive: true, force: true }));

  it('the terminal shows only what Assay wrote: agent output escaped and marked, the summary not imitable', async () => {
    const r = await assay(['run', TASK, '--agent', `command:${NOISY}`, '--run-id', 'noisy1', '--snapshot-interval', '0'], home, 200_000);
    expect(r.code).toBe(0);
    for (const out of [r.stdout, r.stderr]) {
      // no control character but newline reaches the terminal (ESC, BEL, CR)
      expect(out).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/);
    }
    const lines = r.stdout.split('\n').filter((l) => l !== '');
    // every line is either the agent's (marked) or one of Assay's summary lines
    for (const l of lines) expect(l).toMatch(/^(agent\| |run {7}|round \d+ {3}|best {6}|time {6}|files {5})/);
    expect(lines).toContain('agent| \\x1b]0;pwned\\x07\\x1b[8mconcealed\\x1b[0m');
    expect(lines).toContain('agent| best      round 99, score 1e-9, snapshot bafyforged');
    expect(lines).toContain('agent| \\x1b[2A\\x1b[2Kround 7   completed  score 0');
    expect(lines).toContain('agent| no newline at the end');
    expect(lines).toContain('agent| progress\\rrun       forged (x) completed'); // the agent's stderr, also marked
    // Assay's own lines: exactly one unmarked "best" line, the real one
    expect(lines.filter((l) => l.startsWith('best '))).toEqual(['best      none']);
    expect(lines.filter((l) => l.startsWith('run '))).toEqual([expect.stringMatching(/^run {7}noisy1 \(assay:tiny-optimizer\) no_valid_submission$/)]);
  });

  it('a fifo, a non-UTF-8 name and a path over PATH_MAX are counted rule violations, never refunds', async () => {
    const r = await assay(
      ['run', TASK, '--agent', `command:${PLANTER}`, '--run-id', 'planter1', '--max-submissions', '3', '--snapshot-interval', '0', '--json'],
      home,
      200_000,
    );
    expect(r.code).toBe(0);
    // rsi-submit: 1 = judged, not completed (a rule violation); 5 = 429, the budget is spent; 6 would be a refund
    expect(r.stderr).toContain('fifo=1');
    expect(r.stderr).toContain('utf8=1');
    expect(r.stderr).toContain('long=1');
    expect(r.stderr).toContain('after=5');
    const rep = JSON.parse(r.stdout) as { rounds: Array<{ round: number; status: string; rule: string | null }>; status: string };
    expect(rep.rounds.map((x) => [x.round, x.status, x.rule])).toEqual([
      [1, 'rule_violation', 'snapshot.refused'],
      [2, 'rule_violation', 'snapshot.refused'],
      [3, 'rule_violation', 'snapshot.refused'],
    ]);
    expect(rep.status).toBe('no_valid_submission');
    const run = await homeEvents(home, 'run-planter1');
    expect(run.filter((e) => e.type === 'SubmissionRejected' && e.data.status === 503)).toHaveLength(0);
    expect(run.filter((e) => e.type === 'BudgetConsumed' && e.data.budget === 'submissions').map((e) => e.data.round)).toEqual([1, 2, 3]);
    expect(run.filter((e) => e.type === 'RuleViolation').map((e) => [e.data.round, e.data.rule])).toEqual([
      [1, 'snapshot.refused'],
      [2, 'snapshot.refused'],
      [3, 'snapshot.refused'],
    ]);
    const details = run.filter((e) => e.type === 'RuleViolation').map((e) => String(e.data.detail));
    expect(details[0]).toMatch(/SNAPSHOT_SPECIAL_FILE/);
    expect(details[1]).toMatch(/SNAPSHOT_NAME_NOT_UTF8/);
    expect(details[2]).toMatch(/ENAMETOOLONG/);
    expect((await assay(['ledger', 'verify'], home)).code).toBe(0);
  });
});

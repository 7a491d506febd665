/**
 * Claims follow from events, on a real SQLite ledger: a best score with no run behind it, or a reward no Judge
 * recorded, is refused by the generic appends (`assay ledger append`, `POST /ledger/events`), and, signed with the
 * keys anyway (as a forger holding them would, through the ledger's own append), fails `assay ledger verify` in the
 * claims step with the stream, the position and the rule.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { systemClock } from '@assay/core';
import { LedgerHome, createOperatorToken, type JsonObject } from '@assay/ledger';
import { createApi } from '../../apps/api/src/main';
import { assay } from '../support/cli';
import { deps, sampleHomes, verifyHome } from '../support/ledger-home-fixtures';

jest.setTimeout(120_000);

// The forged best score: a RunCompleted with no RunStarted and no rounds.
const FORGED: JsonObject = { run: 'fake', status: 'completed', bestRound: 1, bestScore: 1e-7, bestSnapshot: 'bafyfake' };

async function signAnyway(home: string, stream: string, type: string, data: JsonObject): Promise<number> {
  const h = new LedgerHome(home, deps());
  try {
    return (await h.ledger.append(stream, [{ type, data }])).lastPosition;
  } finally {
    await h.close();
  }
}

const eventCount = async (home: string): Promise<number> => {
  const h = new LedgerHome(home, deps());
  try {
    return await h.db.events.size();
  } finally {
    await h.close();
  }
};

describe('claims follow from events (SQLite ledger, CLI, API)', () => {
  const homes = sampleHomes('assay-claims-');
  const fresh = (): string => homes.fresh();

  it('the sample research run verifies, claims step included', async () => {
    const r = await verifyHome(homes.pristine);
    expect(r.failure).toBeNull();
    expect(r.claims).toBe('assay.run-claims/1');
    expect(r.steps.find((s) => s.name === 'claims')).toMatchObject({ ok: true, checked: expect.any(Number) });
    expect(r.steps.find((s) => s.name === 'claims')?.checked).toBeGreaterThan(30);
  });

  it("refuses the issue's forged RunCompleted, and every other reserved type, in `assay ledger append`; nothing is written", async () => {
    const home = fresh();
    const r = await assay(['ledger', 'append', '--stream', 'run-fake', '--type', 'RunCompleted', '--data', JSON.stringify(FORGED)], home);
    expect(r.code).toBe(6);
    expect(r.stderr).toMatch(
      /^assay: error LEDGER_TYPE_RESERVED: --data: RunCompleted is written only by the run controller \(`assay run`\), never by a generic append; generic appends may write TaskRegistered, RejudgeCompleted, Note/,
    );
    const reward = await assay(
      [
        'ledger',
        'append',
        '--stream',
        'judge-forged',
        '--type',
        'RewardRecorded',
        '--data',
        JSON.stringify({ judge: 'forged', rewards: { reward: 1 }, primaryMetric: 'reward', primaryScore: 1 }),
      ],
      home,
    );
    expect([reward.code, reward.stderr]).toEqual([6, expect.stringMatching(/LEDGER_TYPE_RESERVED: --data: RewardRecorded is written only by the Judge/)]);
    const key = await assay(
      ['ledger', 'append', '--stream', 'key-x', '--type', 'KeyRevoked', '--data', JSON.stringify({ keyId: 'x+00000000', reason: 'r' })],
      home,
    );
    expect([key.code, key.stderr]).toEqual([6, expect.stringMatching(/LEDGER_TYPE_RESERVED: --data: KeyRevoked is written only by the key commands/)]);
    // --file: every line is checked before any is written
    const file = join(homes.dir, 'mixed.jsonl');
    require('node:fs').writeFileSync(
      file,
      `${JSON.stringify({ stream: 'note-a', type: 'Note', data: { text: 'fine' } })}\n${JSON.stringify({ stream: 'run-fake', type: 'RunCompleted', data: FORGED })}\n`,
    );
    const f = await assay(['ledger', 'append', '--file', file], home);
    expect([f.code, f.stderr]).toEqual([
      6,
      expect.stringMatching(/LEDGER_TYPE_RESERVED: .*mixed\.jsonl:2: RunCompleted is written only by the run controller/),
    ]);
    expect(await eventCount(home)).toBe(homes.total);
    // an operator's type in a stream only Assay writes: it would shift the run's revisions (and break --resume)
    for (const stream of ['run-real', 'judge-j1', 'key-assay-controller', 'transcript-real']) {
      const n = await assay(['ledger', 'append', '--stream', stream, '--type', 'Note', '--data', '{"text":"hi"}'], home);
      expect([n.code, n.stderr]).toEqual([
        6,
        expect.stringMatching(new RegExp(`^assay: error LEDGER_STREAM_RESERVED: --data: stream "${stream}": \\w+- streams are written only by `)),
      ]);
    }
    expect(await eventCount(home)).toBe(homes.total);
    // what operators write still goes through
    const note = await assay(['ledger', 'append', '--stream', 'note-ops', '--type', 'Note', '--data', '{"text":"checked"}'], home);
    expect([note.code, note.stderr]).toEqual([0, '']);
    expect(await eventCount(home)).toBe(homes.total + 1);
  });

  it('refuses it in POST /ledger/events too (403), leaving the ledger as it was', async () => {
    const home = fresh();
    const token = createOperatorToken(home, { clock: systemClock }).token;
    const app = await createApi(home);
    try {
      await app.listen(0, '127.0.0.1');
      const { port } = app.getHttpServer().address() as { port: number };
      const post = (body: unknown) =>
        fetch(`http://127.0.0.1:${port}/ledger/events`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
          body: JSON.stringify(body),
        });
      const res = await post({
        stream: 'run-fake',
        events: [
          { type: 'Note', data: { text: 'fine' } },
          { type: 'RunCompleted', data: FORGED },
        ],
      });
      expect(res.status).toBe(403);
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect(body.error).toMatchObject({
        code: 'LEDGER_TYPE_RESERVED',
        message: expect.stringMatching(/^event 1 \(RunCompleted\): RunCompleted is written only by the run controller/),
      });
      expect((await post({ stream: 'note-api', events: [{ type: 'Note', data: { text: 'fine' } }] })).status).toBe(201);
    } finally {
      await app.close();
    }
    expect(await eventCount(home)).toBe(homes.total + 1);
  });

  it('the same RunCompleted signed with the controller key fails `assay ledger verify` in the claims step, naming stream, position and rule', async () => {
    const home = fresh();
    const at = await signAnyway(home, 'run-fake', 'RunCompleted', FORGED);
    expect(at).toBe(homes.total);
    const v = await assay(['ledger', 'verify'], home);
    expect(v.code).toBe(5);
    expect(v.stdout).toMatch(/^ {2}ok {3}signatures +\d+$/m);
    expect(v.stdout).toMatch(/^ {2}FAIL claims +\d+ \(assay\.run-claims\/1\)$/m);
    expect(v.stdout).toContain(
      `ledger verification FAILED in step "claims" at position ${at}: VERIFY_CLAIM_NOT_STARTED: run-fake: RunCompleted: the run stream does not begin with RunStarted`,
    );
    expect(v.stdout).toContain('stream run-fake, rule run.started_first (assay.run-claims/1)');
    const j = await assay(['ledger', 'verify', '--json'], home);
    expect(j.code).toBe(5);
    const report = JSON.parse(j.stdout) as { ok: boolean; claims: string; failure: Record<string, unknown> };
    expect(report).toMatchObject({
      ok: false,
      claims: 'assay.run-claims/1',
      failure: { step: 'claims', code: 'VERIFY_CLAIM_NOT_STARTED', position: at, stream: 'run-fake', rule: 'run.started_first' },
    });
    // an auditor's read-only copy of the file: the same verdict
    const db = join(home, 'ledger', 'ledger.db');
    const audit = await assay(['ledger', 'verify', '--db', db, '--json'], join(homes.dir, 'nobody'));
    expect(audit.code).toBe(5);
    expect(JSON.parse(audit.stdout).failure).toMatchObject({ step: 'claims', position: at, stream: 'run-fake', rule: 'run.started_first' });
    expect(readdirSync(homes.dir)).not.toContain('nobody');
  });

  it('a hand-written RewardRecorded (a better score for round 2) signed with the Judge key fails the claims step', async () => {
    const home = fresh();
    const at = await signAnyway(home, 'judge-r-20261202-0001-2', 'RewardRecorded', {
      run: 'r-20261202-0001',
      round: 2,
      judge: 'r-20261202-0001-2',
      rewards: { val_loss: 0.0001, train_loss: 0.0001 },
      primaryMetric: 'val_loss',
      primaryScore: 0.0001,
    });
    const r = await verifyHome(home);
    expect(r.failure).toMatchObject({ step: 'claims', code: 'VERIFY_CLAIM_REWARD', position: at, stream: 'judge-r-20261202-0001-2', rule: 'judge.reward' });
    // ... and in a Judge stream of its own, for a Judge nobody launched
    const home2 = fresh();
    const at2 = await signAnyway(home2, 'judge-forged', 'RewardRecorded', {
      run: 'r-20261202-0001',
      round: 2,
      judge: 'forged',
      rewards: { val_loss: 0.0001 },
      primaryMetric: 'val_loss',
      primaryScore: 0.0001,
    });
    const v = await assay(['ledger', 'verify', '--json'], home2);
    expect(v.code).toBe(5);
    expect(JSON.parse(v.stdout).failure).toMatchObject({
      step: 'claims',
      code: 'VERIFY_CLAIM_REWARD',
      position: at2,
      stream: 'judge-forged',
      rule: 'judge.reward',
    });
  });

  it('a whole forged run (started, a round counted without any Judge, a best score) fails at the round', async () => {
    const home = fresh();
    const h = new LedgerHome(home, deps());
    let counted = 0;
    try {
      const started = (await h.readEvents({ stream: 'run-r-20261202-0001', limit: 1 }))[0]?.envelope.data as JsonObject;
      await h.ledger.append('run-fake', [
        { type: 'RunStarted', data: { ...started, run: 'fake' } },
        { type: 'SubmissionReceived', data: { run: 'fake', round: 1 } },
      ]);
      const r = await h.ledger.append('run-fake', [
        { type: 'BudgetConsumed', data: { run: 'fake', budget: 'submissions', amount: 1, remaining: 3, round: 1 } },
        { type: 'RunCompleted', data: FORGED },
      ]);
      counted = r.lastPosition - 1;
    } finally {
      await h.close();
    }
    const r = await verifyHome(home, { workers: 2, chunkSize: 4 });
    expect(r.failure).toMatchObject({ step: 'claims', code: 'VERIFY_CLAIM_ROUND_UNJUDGED', position: counted, stream: 'run-fake', rule: 'round.judged' });
  });
});

/**
 * Logs in result bundles, in process (the CLI path is in tests/run/run-e2e.e2e.spec.ts): a run recorded by the real
 * run service on a real SQLite ledger, its transcript's and Judge logs' digests in the ledger, the files in the run
 * directory. `--logs full` carries them as recorded, `--logs redacted` carries assay-redact/1 copies linked by
 * LogRedacted events (recorded once); the logs step refuses a changed, missing or unlinked log; export refuses files
 * that are not what the ledger recorded.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock, randomIds, SequentialIds, systemClock } from '@assay/core';
import { exportBundle, verifyBundle, type BundleVerdict, type LogMode } from '@assay/bundles';
import { LedgerHome, type SigningKey, initLedgerHome } from '@assay/ledger';
import {
  buildRunRules,
  FakeJudge,
  LedgerRunLedger,
  recordTranscripts,
  runClaimRules,
  SubmissionService,
  taskIdOf,
  tokenSha256,
  type Snapshotter,
  type WorkspaceChange,
  type WorkspaceSnapshot,
} from '@assay/run';
import { chunks, entries, pack } from '../support/bundle-archive';

jest.setTimeout(120_000);

const RUN = 'logs-run';
const ROOT_CID = 'bafyreih6ikc6snzkyigwtsucjvygd5iveghukozq6xmemsbu7kqgb4k5yu';
const TRANSCRIPT = 'epoch 1 loss 0.9\nusing key sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz012345 from /home/alice/.config\nOPENAI_API_KEY=abc123\n';
const sha = (b: Buffer | string) => `sha256:${createHash('sha256').update(b).digest('hex')}`;

class FixedSnapshotter implements Snapshotter {
  async snapshot(): Promise<WorkspaceSnapshot> {
    return { root: ROOT_CID, files: 1, bytes: 1, durationMs: 1, policyDigest: `sha256:${'3'.repeat(64)}`, source: '/ws', flagged: [] };
  }
  async *changes(): AsyncIterable<WorkspaceChange> {}
}

describe('result bundles with logs', () => {
  let dir: string;
  let home: string;
  let runDir: string;
  let root: string;
  const open = () => new LedgerHome(home, { clock: systemClock, ids: randomIds });
  const exportWith = async (logs: LogMode, out: string, checkpoint?: string) => {
    const h = await open();
    try {
      return await exportBundle(h.ledger, {
        run: RUN,
        out,
        publisher: h.ledger.key('controller') as SigningKey,
        logs,
        runDir,
        hostnames: ['build-7'],
        checkpoint,
      });
    } finally {
      await h.close();
    }
  };
  const verify = (b: Buffer): Promise<BundleVerdict> => verifyBundle(chunks(b), { trustedKeys: [root], claims: runClaimRules() });

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'assay-bundle-logs-'));
    home = join(dir, 'home');
    runDir = join(home, 'runs', RUN);
    await initLedgerHome(home, { clock: systemClock, ids: randomIds, origin: 'assay.test/logs' });
    const h = await open();
    try {
      root = (h.ledger.key('controller') as SigningKey).publicKeyText;
      const ledger = new LedgerRunLedger(h.ledger);
      const ids = new SequentialIds('c0000000-0000-4000-8000');
      const clock = new ManualClock('2026-12-03T09:00:00.000Z');
      const scores = [0.9, 0.5, 0.7].map((loss) => ({ status: 'completed' as const, rewards: { loss } }));
      const judge = new FakeJudge((stream, events, expected) => ledger.appendTo(stream, events, expected), ids, scores);
      const token = 'logs-token';
      const { protocol, selection } = buildRunRules({
        settings: { primaryMetric: 'loss', direction: 'minimize', maxSubmissions: 3, cooldownSec: 0, timeBudgetSec: null, gpuBudgetSec: null },
        agentTimeoutSec: null,
        editablePaths: null,
        tokenSha256: tokenSha256(token),
        fingerprintInput: null,
      });
      const svc = await new SubmissionService({ run: RUN, ledger, snapshotter: new FixedSnapshotter(), judge, clock, ids }).start({
        run: RUN,
        task: taskIdOf('test/logs'),
        taskDigest: `sha256:${'4'.repeat(64)}`,
        agent: 'test',
        model: null,
        fingerprint: `sha256:${'5'.repeat(64)}`,
        protocol,
        selection,
      });
      for (let i = 0; i < 3; i++) {
        clock.advance(1000);
        await svc.submit({ authorization: `Bearer ${token}`, hasBody: false, hasQuery: false });
      }
      await svc.complete();
      // the files as the controller keeps them: an empty Judge log per round (the fake Judge's digest), one transcript
      mkdirSync(join(runDir, 'logs'), { recursive: true });
      mkdirSync(join(runDir, 'agent'), { recursive: true });
      for (const r of [1, 2, 3]) writeFileSync(join(runDir, 'logs', `round-${r}.log`), '');
      writeFileSync(join(runDir, 'agent', 'session-1.log'), TRANSCRIPT);
      await recordTranscripts(h.ledger, RUN, [{ session: 1, digest: sha(TRANSCRIPT), bytes: TRANSCRIPT.length, dropped: 0, recovered: false }]);
    } finally {
      await h.close();
    }
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('full: the files as recorded; every step ok, 4 logs checked', async () => {
    const r = await exportWith('full', join(dir, 'full.bundle'));
    expect(r.logs).toBe(4);
    const b = readFileSync(join(dir, 'full.bundle'));
    const v = await verify(b);
    expect([v.verdict, v.failure]).toEqual(['valid', null]);
    expect(v.steps.find((s) => s.name === 'logs')).toEqual({ name: 'logs', status: 'ok', checked: 4 });
    const lines = entries(b)
      .find((e) => e.name === 'assay-bundle/logs.jsonl')!
      .content.toString()
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { log: string; content: string });
    expect(lines.map((l) => l.log)).toEqual(['transcript/session-1', 'judge/round-1', 'judge/round-2', 'judge/round-3']);
    expect(Buffer.from(lines[0]!.content, 'base64').toString()).toBe(TRANSCRIPT);
  });

  it('redacted: assay-redact/1 copies, each linked by one LogRedacted (recorded once); tampering is refused at the logs step', async () => {
    await exportWith('redacted', join(dir, 'red.bundle'));
    const b = readFileSync(join(dir, 'red.bundle'));
    expect((await verify(b)).verdict).toBe('valid');
    const logs = entries(b)
      .find((e) => e.name === 'assay-bundle/logs.jsonl')!
      .content.toString();
    const transcript = Buffer.from((JSON.parse(logs.split('\n')[0]!) as { content: string }).content, 'base64').toString();
    expect(transcript).toBe('epoch 1 loss 0.9\nusing key [redacted:token] from /home/[user]/.config\nOPENAI_API_KEY=[redacted]\n');
    const h = await open();
    let redactions: Array<{ data: Record<string, unknown> }> = [];
    try {
      for await (const e of h.ledger.store.readStream(`redaction-${RUN}`)) redactions.push({ data: JSON.parse(Buffer.from(e.bytes).toString()).data });
    } finally {
      await h.close();
    }
    expect(redactions).toHaveLength(4);
    expect(redactions[0]!.data).toMatchObject({
      log: 'transcript/session-1',
      original: sha(TRANSCRIPT),
      redacted: sha(transcript),
      rules: 'assay-redact/1',
      replaced: 3,
    });
    await exportWith('redacted', join(dir, 'red2.bundle'));
    const h2 = await open();
    try {
      redactions = [];
      for await (const _e of h2.ledger.store.readStream(`redaction-${RUN}`)) redactions.push({ data: {} });
    } finally {
      await h2.close();
    }
    expect(redactions).toHaveLength(4);

    // a carried log changed (its line's digest kept): the content does not hash to it
    const parts = entries(b);
    const i = parts.findIndex((p) => p.name === 'assay-bundle/logs.jsonl');
    const lines = parts[i]!.content.toString().trim().split('\n');
    const first = JSON.parse(lines[0]!) as { content: string; digest: string; log: string };
    const forged = { ...first, content: Buffer.from(transcript.replace('0.9', '0.1')).toString('base64') };
    const swap = (content: string) => pack(parts.map((p, k) => (k === i ? { ...p, content: Buffer.from(content) } : p)));
    const ordered = (o: { content: string; digest: string; log: string }) => JSON.stringify({ content: o.content, digest: o.digest, log: o.log });
    const v1 = await verify(swap([ordered(forged), ...lines.slice(1)].join('\n') + '\n'));
    expect([v1.verdict, v1.failure?.step, v1.failure?.code]).toEqual(['invalid', 'logs', 'BUNDLE_LOG_DIGEST_MISMATCH']);
    // changed with a matching digest: no LogRedacted links it
    const relinked = { ...forged, digest: sha(Buffer.from(forged.content, 'base64')) };
    const v2 = await verify(swap([ordered(relinked), ...lines.slice(1)].join('\n') + '\n'));
    expect([v2.verdict, v2.failure?.step, v2.failure?.code]).toEqual(['invalid', 'logs', 'BUNDLE_LOG_NOT_REDACTION']);
    // a log left out
    const v3 = await verify(swap(lines.slice(1).join('\n') + '\n'));
    expect([v3.verdict, v3.failure?.step, v3.failure?.code]).toEqual(['invalid', 'logs', 'BUNDLE_LOGS_INCOMPLETE']);
  });

  it('export refuses a log file that is missing or not what the ledger recorded, and redactions a given checkpoint does not cover', async () => {
    const file = join(runDir, 'logs', 'round-2.log');
    writeFileSync(file, 'changed after the fact\n');
    await expect(exportWith('full', join(dir, 'x.bundle'))).rejects.toMatchObject({ code: 'BUNDLE_LOG_MISMATCH' });
    rmSync(file);
    await expect(exportWith('full', join(dir, 'x.bundle'))).rejects.toMatchObject({ code: 'BUNDLE_LOG_MISSING' });
    writeFileSync(file, '');
    // another host name gives other redacted copies: against an existing checkpoint they cannot be recorded
    const h = await open();
    let note: string;
    try {
      note = (await h.ledger.checkpoint()).note;
    } finally {
      await h.close();
    }
    writeFileSync(join(runDir, 'agent', 'session-1.log'), TRANSCRIPT);
    const h2 = await open();
    try {
      await expect(
        exportBundle(h2.ledger, {
          run: RUN,
          out: join(dir, 'y.bundle'),
          publisher: h2.ledger.key('controller') as SigningKey,
          logs: 'redacted',
          runDir,
          hostnames: ['loss'],
          checkpoint: note,
        }),
      ).rejects.toMatchObject({ code: 'BUNDLE_LOGS_NOT_RECORDED' });
    } finally {
      await h2.close();
    }
  });
});

/**
 * A re-judge report's own bundle (docs/bundle-format.md, "Re-judge report bundles"), in process on a real SQLite
 * ledger: a rejudger's home records a RejudgeCompleted the way `assay rejudge` does, `exportRejudgeBundle` writes its
 * bundle, and `verifyBundle` with nothing but the file and the rejudger's root key accepts it. Refused, each by a
 * named step: random byte mutations, an untrusted key, a report whose verdict does not follow from its own scores
 * (signed by the real key), a predicate with a better median (re-signed by the real key), a swapped re-judged bundle
 * subject, a run's stream smuggled into a report bundle. (The CLI path, after a real re-judge, is in
 * tests/bundles/rejudge.e2e.spec.ts.)
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomIds, systemClock } from '@assay/core';
import {
  BUNDLE_STEPS,
  BundleWriter,
  openOwnCheckpoint,
  ENTRY,
  exportRejudgeBundle,
  provedEvents,
  rejudgeEventData,
  rejudgeStatementOf,
  rejudgeVerdict,
  REJUDGE_BUNDLE_FORMAT,
  verifyBundle,
  DSSE_PAYLOAD_TYPE,
  pae,
  type BundleVerdict,
  type ResultClaim,
  type RejudgeScore,
} from '@assay/bundles';
import { canonicalJson, LedgerHome, type JsonObject, type SigningKey, initLedgerHome } from '@assay/ledger';
import { recordOf, runClaimRules } from '@assay/run';
import { AssayError } from '@assay/core';
import { chunks, entries, pack } from '../support/bundle-archive';
import { prng } from '../support/prng';

jest.setTimeout(120_000);

const ID = '6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f';
const FORGED_ID = '6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e60';
const SNAPSHOT = 'bafyreih6ikc6snzkyigwtsucjvygd5iveghukozq6xmemsbu7kqgb4k5yu';
const BUNDLE_DIGEST = `sha256:${'ab'.repeat(32)}`;
const CLAIM: ResultClaim = {
  run: 'pub1',
  task: 'tiny-optimizer',
  taskDigest: `sha256:${'1'.repeat(64)}`,
  agent: 'reference',
  model: null,
  protocolFingerprint: `sha256:${'2'.repeat(64)}`,
  selection: {},
  metric: 'val_loss',
  direction: 'minimize',
  status: 'completed',
  claimedScore: 0.433,
  round: 5,
  snapshot: SNAPSHOT,
  counts: { rounds: 5, completed: 3, violating: 1, invalid: 0, failed: 0, refunded: 1, refusedRequests: 1 },
  budgets: {},
};
const SCORES: RejudgeScore[] = [
  { judge: 'j1', status: 'completed', primaryScore: 0.431 },
  { judge: 'j2', status: 'completed', primaryScore: 0.433 },
  { judge: 'j3', status: 'verifier_error', primaryScore: null },
];

describe('re-judge report bundles', () => {
  let dir: string;
  let home: string;
  let bundle: Buffer;
  let rootPub: string;
  let report: JsonObject;
  const open = () => new LedgerHome(home, { clock: systemClock, ids: randomIds });
  const verify = (b: Buffer, trusted: string[] = [rootPub]): Promise<BundleVerdict> =>
    verifyBundle(chunks(b), { trustedKeys: trusted, claims: runClaimRules(), signatureWorkers: 0 });

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'assay-rejudge-bundle-'));
    home = join(dir, 'auditor');
    await initLedgerHome(home, { clock: systemClock, ids: randomIds, origin: 'assay.test/auditor' });
    const h = await open();
    try {
      const a = rejudgeVerdict(CLAIM.claimedScore, SCORES, 0.005);
      report = rejudgeEventData({ claim: CLAIM, bundleDigest: BUNDLE_DIGEST, scores: SCORES, tolerance: 0.005, ...a });
      await h.ledger.appendGeneric(`rejudge-${ID}`, [{ id: ID, type: 'RejudgeCompleted', data: report }], 'no_stream');
      // a run's stream in the same ledger: never carried by the report's bundle
      await h.ledger.appendGeneric('note-1', [{ type: 'Note', data: { text: 'unrelated' } }], 'any');
      // a forged report: "reproduced" although the median is 0.001 away and the tolerance is 0
      const honest = rejudgeEventData({
        claim: CLAIM,
        bundleDigest: BUNDLE_DIGEST,
        scores: SCORES,
        tolerance: 0,
        ...rejudgeVerdict(CLAIM.claimedScore, SCORES, 0),
      });
      expect(honest.verdict).toBe('not_reproduced');
      const forged = { ...honest, verdict: 'reproduced', matches: true };
      await h.ledger.appendGeneric(`rejudge-${FORGED_ID}`, [{ id: FORGED_ID, type: 'RejudgeCompleted', data: forged }], 'no_stream');
      const out = join(dir, 'report.bundle');
      const r = await exportRejudgeBundle(h.ledger, { rejudge: ID, out, publisher: h.ledger.key('controller') as SigningKey });
      expect(r.report).toEqual(report);
      bundle = readFileSync(out);
      rootPub = (h.ledger.key('controller') as SigningKey).publicKeyText;
    } finally {
      await h.close();
    }
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('verifies with only the file and the root key: the report is the claim, the snapshots, task and logs steps do not apply', async () => {
    const v = await verify(bundle);
    expect(v).toMatchObject({ verdict: 'valid', kind: 'rejudge', rejudge: ID, run: 'pub1', failure: null, claim: report });
    expect(v.steps.map((s) => [s.name, s.status])).toEqual(
      BUNDLE_STEPS.map((name) => [name, name === 'snapshots' || name === 'task' || name === 'logs' ? 'skipped' : 'ok']),
    );
    const manifest = JSON.parse((entries(bundle).find((e) => e.name === ENTRY.manifest) as { content: Buffer }).content.toString()) as Record<string, unknown>;
    expect(manifest).toMatchObject({ format: REJUDGE_BUNDLE_FORMAT, rejudge: ID });
    // key streams and the report's own: the note and the forged report are not carried
    expect(manifest.streams).toEqual(expect.arrayContaining([`rejudge-${ID}`]));
    expect((manifest.streams as string[]).every((s) => s.startsWith('key-') || s === `rejudge-${ID}`)).toBe(true);
    expect(entries(bundle).map((e) => e.name)).toEqual([ENTRY.manifest, ENTRY.checkpoint, ENTRY.events, ENTRY.statement]);
  });

  it('cannot be checked without the rejudger’s root key', async () => {
    const v = await verify(bundle, []);
    expect(v).toMatchObject({ verdict: 'cannot_check', failure: { step: 'trust', code: 'BUNDLE_NO_TRUSTED_KEY' } });
  });

  it('refuses every one of 300 random byte mutations, naming a step', async () => {
    const rnd = prng(2026_12_04);
    const rng = { int: (n: number) => Math.floor(rnd() * n) };
    const seen = new Set<string>();
    for (let i = 0; i < 300; i++) {
      const b = Buffer.from(bundle);
      const at = rng.int(b.length);
      b[at] = (b[at] as number) ^ (1 + rng.int(255));
      const v = await verify(b);
      expect({ i, at, verdict: v.verdict }).toEqual({ i, at, verdict: expect.stringMatching(/^(invalid|cannot_check)$/) });
      expect(BUNDLE_STEPS).toContain(v.failure?.step);
      seen.add(v.failure?.step as string);
    }
    expect(seen.size).toBeGreaterThanOrEqual(3);
  });

  it('export refuses a report whose verdict does not follow from its scores; verify refuses it at claims when built anyway', async () => {
    const h = await open();
    try {
      const out = join(dir, 'forged.bundle');
      const e = await exportRejudgeBundle(h.ledger, { rejudge: FORGED_ID, out, publisher: h.ledger.key('controller') as SigningKey }).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(AssayError);
      expect(e).toMatchObject({ code: 'BUNDLE_REJUDGE_NOT_REPORT', message: expect.stringContaining('verdict') });
      // the same file, written without export's check, signed by the real key: the claims step refuses it
      const forgedBundle = await writeReportBundle(h, FORGED_ID, join(dir, 'forged-by-hand.bundle'));
      const v = await verify(forgedBundle);
      expect(v).toMatchObject({
        verdict: 'invalid',
        failure: { step: 'claims', code: 'BUNDLE_REPORT_INCONSISTENT', message: expect.stringContaining('verdict') },
      });
      const missing = await exportRejudgeBundle(h.ledger, { rejudge: 'no-such', out, publisher: h.ledger.key('controller') as SigningKey }).catch(
        (x: unknown) => x,
      );
      expect(missing).toMatchObject({ code: 'BUNDLE_REJUDGE_NOT_FOUND' });
    } finally {
      await h.close();
    }
  });

  it('refuses a predicate with a better median and a swapped re-judged bundle subject, both re-signed by the real key', async () => {
    const h = await open();
    try {
      const key = h.ledger.key('controller') as SigningKey;
      const parts = entries(bundle);
      const st = JSON.parse(Buffer.from(JSON.parse((parts[3] as { content: Buffer }).content.toString()).payload, 'base64').toString()) as {
        subject: Array<{ name: string; digest: { sha256: string } }>;
        predicate: JsonObject;
      };
      const resign = (statement: unknown): Buffer => {
        const payload = Buffer.from(canonicalJson(statement as JsonObject));
        const dsse = {
          payloadType: DSSE_PAYLOAD_TYPE,
          payload: payload.toString('base64'),
          signatures: [{ keyid: key.signer, sig: Buffer.from(key.sign(pae(DSSE_PAYLOAD_TYPE, payload))).toString('base64') }],
        };
        return pack([...parts.slice(0, 3), { name: ENTRY.statement, content: Buffer.from(canonicalJson(dsse as unknown as JsonObject)) }]);
      };
      const better = await verify(resign({ ...st, predicate: { ...st.predicate, median: 0.433, delta: 0 } }));
      expect(better).toMatchObject({
        verdict: 'invalid',
        failure: { step: 'statement', code: 'BUNDLE_CLAIM_MISMATCH', message: expect.stringMatching(/claim's (median|delta) is/) },
      });
      const swapped = await verify(
        resign({ ...st, subject: st.subject.map((s) => (s.name === 'assay-rejudged-bundle' ? { ...s, digest: { sha256: 'cd'.repeat(32) } } : s)) }),
      );
      expect(swapped).toMatchObject({ verdict: 'invalid', failure: { step: 'statement', code: 'BUNDLE_SUBJECT_MISMATCH' } });
      expect(await verify(resign(st))).toMatchObject({ verdict: 'valid' });
    } finally {
      await h.close();
    }
  });

  it('refuses a report bundle that carries a stream other than key streams and its report', async () => {
    const h = await open();
    try {
      const b = await writeReportBundle(h, ID, join(dir, 'smuggled.bundle'), (s) => s.startsWith('key-') || s === `rejudge-${ID}` || s === 'note-1');
      const v = await verify(b);
      expect(v).toMatchObject({ verdict: 'invalid', failure: { step: 'claims', code: 'BUNDLE_STREAMS_MISMATCH', message: expect.stringContaining('note-1') } });
    } finally {
      await h.close();
    }
  });
});

/**
 * A report bundle written by hand from the ledger (BundleWriter, as export writes it, without export's refusals):
 * the streams `take` accepts, a fresh checkpoint, the statement over the report's data as recorded.
 */
async function writeReportBundle(h: LedgerHome, id: string, out: string, take = (s: string) => s.startsWith('key-') || s === `rejudge-${id}`): Promise<Buffer> {
  const { note } = await h.ledger.checkpoint();
  const cp = openOwnCheckpoint(h.ledger, note);
  const chosen: Array<{ position: number; bytes: Uint8Array }> = [];
  const streams = new Set<string>();
  let data: JsonObject | null = null;
  for await (const batch of h.ledger.store.readAll({ fromPosition: 0, toPosition: cp.treeSize, batchSize: 1000 }))
    for (const e of batch) {
      const rec = recordOf(e);
      if (!take(rec.stream)) continue;
      chosen.push({ position: e.position, bytes: e.bytes });
      streams.add(rec.stream);
      if (rec.stream === `rejudge-${id}`) data = rec.data as JsonObject;
    }
  const w = new BundleWriter(out);
  w.entry(
    ENTRY.manifest,
    Buffer.from(
      canonicalJson({
        format: REJUDGE_BUNDLE_FORMAT,
        origin: cp.origin,
        rejudge: id,
        events: chosen.length,
        treeSize: cp.treeSize,
        streams: [...streams].sort(),
      }),
    ),
  );
  w.entry(ENTRY.checkpoint, Buffer.from(note));
  w.entry(ENTRY.events, await provedEvents(h.ledger, cp, chosen));
  const d = data as unknown as JsonObject;
  w.finish(
    rejudgeStatementOf(d, w.contentDigest(), { cid: SNAPSHOT, sha256: '00'.repeat(32) }, BUNDLE_DIGEST.slice(7)),
    h.ledger.key('controller') as SigningKey,
  );
  return readFileSync(out);
}

/**
 * Result bundles, version 2 (docs/bundle-format.md, "Version 2"), in process on a real SQLite ledger: the sample run
 * recorded against the real digest of examples/tasks/tiny-optimizer, with start baselines. A bundle carries the
 * task's registration, the Judge image's build, the task's baselines and, with a task directory, its public files
 * (tests/ and solution/ only by digest); the claim names the Judge image, the registered digests and the comparison
 * with the matched start baseline, and `assay verify` recomputes all of it. Refused: hidden files in task.car, the
 * files of another task, a Judge that ran another image than the fingerprint binds, a better baseline comparison
 * re-signed with the real key, a stream the claim does not depend on. A version 1 bundle still verifies.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  BUNDLE_STEPS,
  contentDigest,
  contentLine,
  DSSE_PAYLOAD_TYPE,
  ENTRY,
  eventLine,
  exportBundle,
  pae,
  verifyBundle,
  WITHHELD_TASK_ENTRIES,
  type BundleVerdict,
} from '@assay/bundles';
import { canonicalJson, LedgerHome, type JsonObject, type SigningKey, initLedgerHome } from '@assay/ledger';
import { recordOf, runClaimRules } from '@assay/run';
import { parseCid, SnapshotHome } from '@assay/snapshots';
import { chunks, entries, pack, type BundleEntry } from '../support/bundle-archive';
import { REPO_ROOT } from '../support/child-process';
import { deps, sampleEvents } from '../support/ledger-home-fixtures';
import { baselineEvents } from '../projections/projection-fixtures';

jest.setTimeout(120_000);

const RUN = 'r-20261202-0001';
const TASK = join(REPO_ROOT, 'examples/tasks/tiny-optimizer');
const OTHER_TASK = join(REPO_ROOT, 'examples/tasks/hello-judge');
const SAMPLE_TASK_DIGEST = 'sha256:0ebb429fa86d481c2630fac53db1c91cffed5d4d41d1021c179444eb67e7ee0b';
const JUDGE_IMAGE = 'sha256:b29814cf5792e684cd75d6a7fce7a67a11887e312f87ca2ac2496d81f365ff72';

describe('result bundles, version 2', () => {
  let dir: string;
  let taskDigest: string;
  const verify = (b: Buffer, root: string): Promise<BundleVerdict> =>
    verifyBundle(chunks(b), { trustedKeys: [root], claims: runClaimRules(), signatureWorkers: 0 });

  /** A home holding the sample run of the real task digest (its events edited by `edit`), and two start baselines. */
  async function sampleHome(name: string, edit: (events: ReturnType<typeof sampleEvents>) => void = () => {}): Promise<string> {
    const home = join(dir, name);
    await initLedgerHome(home, { ...deps(), origin: `assay.test/${name}` });
    const events = JSON.parse(JSON.stringify(sampleEvents()).split(SAMPLE_TASK_DIGEST).join(taskDigest)) as ReturnType<typeof sampleEvents>;
    edit(events);
    const baselines = [
      ...baselineEvents({ kind: 'start', scores: [0.95, 0.9, 0.92], taskDigest }),
      ...baselineEvents({ kind: 'start', scores: [0.91, 0.93, 0.9], taskDigest }),
    ];
    const h = new LedgerHome(home, deps());
    try {
      for (const e of [...events, ...baselines]) await h.ledger.append(e.stream, [{ type: e.type, data: e.data }]);
    } finally {
      await h.close();
    }
    return home;
  }

  /** Exports the run; `taskDir`: carry its public files (`withhold` false: everything, as a broken exporter would). */
  async function exportFrom(
    home: string,
    o: { taskDir?: string; withhold?: boolean; claimedRoot?: string } = {},
  ): Promise<{ bundle: Buffer; root: string; key: SigningKey }> {
    const h = new LedgerHome(home, deps());
    try {
      const key = h.ledger.key('controller') as SigningKey;
      const out = join(home, 'run.bundle');
      const { taskDir } = o;
      await exportBundle(h.ledger, {
        run: RUN,
        out,
        publisher: key,
        ...(taskDir
          ? {
              writeTaskCar: async (file: string) => {
                const store = new SnapshotHome(home, { sink: null });
                try {
                  const snap = await store.create(taskDir, { previous: null, label: null, useCache: false });
                  await store.exportCar([parseCid(snap.rootCid)], file, undefined, { withholdRootEntries: o.withhold === false ? [] : WITHHELD_TASK_ENTRIES });
                  return { root: o.claimedRoot ?? snap.rootCid };
                } finally {
                  await store.close();
                }
              },
            }
          : {}),
      });
      return { bundle: readFileSync(out), root: key.publicKeyText, key };
    } finally {
      await h.close();
    }
  }

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'assay-bundle-v2-'));
    const store = new SnapshotHome(join(dir, 'digest'), { sink: null });
    try {
      taskDigest = (await store.create(TASK, { dryRun: true, previous: null, label: null, useCache: false })).rootCid;
    } finally {
      await store.close();
    }
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("carries the task's public files, registration, baselines and Judge image build; the claim names them and verifies", async () => {
    const home = await sampleHome('full');
    const { bundle, root } = await exportFrom(home, { taskDir: TASK });
    const v = await verify(bundle, root);
    expect(v.failure).toBeNull();
    expect(v.steps.map((s) => [s.name, s.status])).toEqual(BUNDLE_STEPS.map((s) => [s, 'ok']));
    // instruction.md, task.toml, environment/ (Dockerfile, bench, workspace/...): tests/ and solution/ only by digest
    expect(v.steps.find((s) => s.name === 'task')?.checked).toBeGreaterThanOrEqual(4);
    const parts = entries(bundle);
    expect(parts.map((p) => p.name)).toEqual([ENTRY.manifest, ENTRY.checkpoint, ENTRY.events, ENTRY.task, ENTRY.statement]);
    const car = parts[3]!.content;
    expect(car.includes(readFileSync(join(TASK, 'instruction.md')))).toBe(true);
    expect(car.includes(readFileSync(join(TASK, 'tests', 'score.py')))).toBe(false);
    expect(car.includes(readFileSync(join(TASK, 'solution', 'solve.sh')))).toBe(false);
    const m = JSON.parse(parts[0]!.content.toString()) as { task: string; streams: string[] };
    expect(m.task).toBe('public');
    expect(m.streams.filter((s) => !/^(key|judge)-/.test(s))).toEqual(['baseline-tiny-optimizer', 'image-tiny-optimizer', `run-${RUN}`, 'task-tiny-optimizer']);
    expect(v.claim).toMatchObject({
      taskDigest,
      judgeImages: [JUDGE_IMAGE],
      images: [{ digest: JUDGE_IMAGE, purpose: 'judge' }],
      taskRegistration: { name: 'tiny-optimizer' },
      // the latest matched start baseline, [0.9, 0.93] over 3 repeats: the run's 0.433 is a distinguishable improvement
      baseline: { matched: true, verdict: 'improvement', score: 0.433, median: 0.91, min: 0.9, max: 0.93, completed: 3, repeats: 3 },
    });
  });

  it('refuses hidden files in task.car, and the public files of another task', async () => {
    const home = await sampleHome('hidden');
    const leaked = await exportFrom(home, { taskDir: TASK, withhold: false });
    expect(await verify(leaked.bundle, leaked.root)).toMatchObject({
      verdict: 'invalid',
      failure: { step: 'task', code: 'SNAPSHOT_CAR_UNREFERENCED_BLOCK' },
    });
    const other = await exportFrom(home, { taskDir: OTHER_TASK, claimedRoot: taskDigest });
    expect(await verify(other.bundle, other.root)).toMatchObject({ verdict: 'invalid', failure: { step: 'task', code: 'BUNDLE_TASK_MISMATCH' } });
    const refused = await exportFrom(home, { taskDir: OTHER_TASK }).catch((e: unknown) => e);
    expect(refused).toMatchObject({ code: 'BUNDLE_TASK_MISMATCH', message: expect.stringContaining(taskDigest) });
  });

  it('refuses a Judge that ran another image than the protocol fingerprint binds', async () => {
    const home = await sampleHome('image', (events) => {
      const second = events.filter((e) => e.type === 'JudgeLaunched')[1]!;
      (second.data as Record<string, unknown>).image = `sha256:${'e'.repeat(64)}`;
    });
    const { bundle, root } = await exportFrom(home);
    expect(await verify(bundle, root)).toMatchObject({
      verdict: 'invalid',
      failure: { step: 'claims', code: 'BUNDLE_JUDGE_IMAGE_MISMATCH', message: expect.stringContaining('e'.repeat(64)) },
    });
  });

  it('refuses a better baseline comparison, and a stream the claim does not depend on, both re-signed with the real key', async () => {
    const home = await sampleHome('resigned');
    const { bundle, root, key } = await exportFrom(home);
    const parts = entries(bundle);
    const resign = (ps: BundleEntry[], mutate: (st: { predicate: Record<string, unknown> }) => void = () => {}): Buffer => {
      const before = ps.slice(0, -1);
      const env = JSON.parse(ps[ps.length - 1]!.content.toString()) as { payload: string };
      const st = JSON.parse(Buffer.from(env.payload, 'base64').toString()) as {
        subject: Array<{ name: string; digest: { sha256: string } }>;
        predicate: Record<string, unknown>;
      };
      st.subject[0]!.digest.sha256 = contentDigest(before.map((p) => contentLine(p.name, p.content)));
      mutate(st);
      const payload = Buffer.from(canonicalJson(st as unknown as JsonObject));
      const sig = Buffer.from(key.sign(pae(DSSE_PAYLOAD_TYPE, payload))).toString('base64');
      return pack([
        ...before,
        {
          name: ENTRY.statement,
          content: Buffer.from(
            canonicalJson({ payloadType: DSSE_PAYLOAD_TYPE, payload: payload.toString('base64'), signatures: [{ keyid: key.signer, sig }] }),
          ),
        },
      ]);
    };
    expect(await verify(resign(parts), root)).toMatchObject({ verdict: 'valid' });
    const better = await verify(
      resign(parts, (st) => {
        st.predicate.baseline = { ...(st.predicate.baseline as object), absolute: 0.9, verdict: 'improvement' };
      }),
      root,
    );
    expect(better).toMatchObject({
      verdict: 'invalid',
      failure: { step: 'statement', code: 'BUNDLE_CLAIM_MISMATCH', message: expect.stringContaining("claim's baseline") },
    });

    // a note appended to the same ledger, carried with its real proof: its stream is none the claim depends on
    const h = new LedgerHome(home, deps());
    let smuggled: Buffer;
    try {
      const manifest = JSON.parse(parts[0]!.content.toString()) as { treeSize: number; events: number; streams: string[] };
      let note: { position: number; bytes: Uint8Array; stream: string } | null = null;
      for await (const batch of h.ledger.store.readAll({ fromPosition: 0, toPosition: manifest.treeSize, batchSize: 1000 }))
        for (const e of batch) if (recordOf(e).type === 'Note') note = { position: e.position, bytes: e.bytes, stream: recordOf(e).stream };
      const n = note!;
      const signed = parts[1]!.content.toString().split('\n');
      const rootHash = Buffer.from(signed[2]!, 'base64');
      const [proof] = await h.ledger.inclusionProofsAt(manifest.treeSize, rootHash, [n]);
      const lines = parts[2]!.content.toString().trimEnd().split('\n');
      const at = lines.findIndex((l) => {
        const env = JSON.parse(Buffer.from((JSON.parse(l) as { envelope: string }).envelope, 'base64').toString()) as { position: number };
        return env.position > n.position;
      });
      lines.splice(
        at,
        0,
        eventLine(
          n.bytes,
          (proof as Uint8Array[]).map((x) => Buffer.from(x).toString('base64')),
        ).trimEnd(),
      );
      const m2 = { ...manifest, events: manifest.events + 1, streams: [...manifest.streams, n.stream].sort() };
      smuggled = resign([
        { name: ENTRY.manifest, content: Buffer.from(canonicalJson(m2 as unknown as JsonObject)) },
        parts[1]!,
        { name: ENTRY.events, content: Buffer.from(`${lines.join('\n')}\n`) },
        parts[3]!,
      ]);
    } finally {
      await h.close();
    }
    expect(await verify(smuggled, root)).toMatchObject({
      verdict: 'invalid',
      failure: { step: 'claims', code: 'BUNDLE_STREAMS_MISMATCH', message: expect.stringContaining('note-') },
    });
  });

  it('a version 1 bundle (tests/fixtures/bundles) still verifies; its claim has no version 2 members', async () => {
    const fixture = join(REPO_ROOT, 'tests/fixtures/bundles');
    const v = await verify(readFileSync(join(fixture, 'sample-run.v1.bundle')), readFileSync(join(fixture, 'sample-run.v1.root.pub'), 'utf8').trim());
    expect(v).toMatchObject({ verdict: 'valid', kind: 'run', run: RUN, claim: { claimedScore: 0.433, round: 5 } });
    expect(v.claim).not.toHaveProperty('baseline');
    expect(v.steps.find((s) => s.name === 'task')).toEqual({ name: 'task', status: 'ok', checked: 0 });
  });
});

/**
 * Result bundles (libs/bundles): a real run's bundle, exported from a real SQLite ledger, verifies offline with only
 * the file and the root key; every tampering is refused by a named step; the CLI's exit codes tell invalid (5) from
 * could-not-check (6).
 */
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BUNDLE_STEPS, exportBundle, pae, DSSE_PAYLOAD_TYPE, verifyBundle, type BundleVerdict } from '@assay/bundles';
import { canonicalJson, LedgerHome, type JsonObject, type SigningKey } from '@assay/ledger';
import { runClaimRules } from '@assay/run';
import { TAR_BLOCK } from '@assay/containers';
import { chunks, entries, pack } from '../support/bundle-archive';
import { assay } from '../support/cli';
import { buildSampleHome, deps } from '../support/ledger-home-fixtures';
import { SAMPLE_WORKSPACES, sampleRunEvents } from '../support/sample-run';
import { parseCid, SnapshotHome } from '@assay/snapshots';

jest.setTimeout(180_000);

const RUN = 'r-20261202-0001';

describe('result bundles (export, offline verification, tampering)', () => {
  let dir: string;
  let home: string;
  let bundle: Buffer;
  let root: string;
  let controller: SigningKey;
  const writeCar = async (roots: readonly string[], file: string) => {
    const store = new SnapshotHome(home);
    try {
      await store.exportCar(
        roots.map((r) => parseCid(r)),
        file,
      );
    } finally {
      await store.close();
    }
  };
  const verify = (b: Buffer, trusted: string[] = [root]): Promise<BundleVerdict> => verifyBundle(chunks(b), { trustedKeys: trusted, claims: runClaimRules() });

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'assay-bundle-'));
    home = join(dir, 'home');
    await buildSampleHome(home);
    // the sample's snapshots, for real, in the home's store (each is one file, workspace.txt)
    await sampleRunEvents();
    const store = new SnapshotHome(home);
    try {
      for (const [cid, content] of SAMPLE_WORKSPACES) {
        const ws = mkdtempSync(join(dir, 'ws-'));
        writeFileSync(join(ws, 'workspace.txt'), content, { mode: 0o644 });
        expect((await store.create(ws, { previous: null, label: null })).rootCid).toBe(cid);
      }
    } finally {
      await store.close();
    }
    const h = new LedgerHome(home, deps());
    try {
      controller = h.ledger.key('controller') as SigningKey;
      root = controller.publicKeyText;
      await exportBundle(h.ledger, { run: RUN, out: join(dir, 'run.bundle'), publisher: controller, snapshots: 'all', writeCar });
    } finally {
      await h.close();
    }
    bundle = readFileSync(join(dir, 'run.bundle'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('a real run verifies with only the file and the root key: every step ok, the claim the events support', async () => {
    const v = await verify(bundle);
    expect(v.failure).toBeNull();
    expect(v.verdict).toBe('valid');
    expect(v.steps.map((s) => [s.name, s.status])).toEqual(BUNDLE_STEPS.map((s) => [s, 'ok']));
    expect(v.claim).toMatchObject({ run: RUN, status: 'completed', round: expect.any(Number), claimedScore: expect.any(Number) });
    // the key, run and judge streams, and what the claim depends on: the task's registration and the build of the
    // Judge image the run used; not the base image's build (no Judge or Work ran it) nor the note
    const m = JSON.parse(entries(bundle)[0]!.content.toString()) as { streams: string[]; events: number; format: string; task: string };
    expect([m.format, m.task]).toEqual(['assay-bundle/v2', 'none']);
    expect(m.streams.some((s) => s.startsWith('key-'))).toBe(true);
    expect(m.streams).toContain(`run-${RUN}`);
    expect(m.streams.filter((s) => s.startsWith('judge-'))).toHaveLength(4);
    expect(m.streams.filter((s) => /^(task|image|note|baseline)-/.test(s))).toEqual(['image-tiny-optimizer', 'task-tiny-optimizer']);
    expect(v.claim).toMatchObject({
      judgeImages: ['sha256:b29814cf5792e684cd75d6a7fce7a67a11887e312f87ca2ac2496d81f365ff72'],
      images: [{ digest: 'sha256:b29814cf5792e684cd75d6a7fce7a67a11887e312f87ca2ac2496d81f365ff72', purpose: 'judge', recipeDigest: null }],
      taskRegistration: { name: 'tiny-optimizer', testsDigest: expect.stringMatching(/^sha256:/), instructionDigest: expect.stringMatching(/^sha256:/) },
      baseline: { matched: false },
    });
    // every round's snapshot travels in the CAR, checked block by block
    expect((m as unknown as { snapshotRoots: string[] }).snapshotRoots.length).toBeGreaterThanOrEqual(3);
    expect(entries(bundle).map((e) => e.name)).toEqual([
      'assay-bundle/manifest.json',
      'assay-bundle/checkpoint',
      'assay-bundle/events.jsonl',
      'assay-bundle/snapshots.car',
      'assay-bundle/statement.dsse.json',
    ]);
    expect(v.steps.find((s) => s.name === 'snapshots')?.checked).toBe((m as unknown as { snapshotRoots: string[] }).snapshotRoots.length);
  });

  it('a swapped snapshot block, a CAR of other snapshots: refused by the snapshots step', async () => {
    const parts = entries(bundle);
    const car = parts[3]!;
    // the last byte of the CAR lies in a block: its bytes no longer hash to its CID
    const swapped = Buffer.from(car.content);
    swapped[swapped.length - 1] = swapped[swapped.length - 1]! ^ 0x55;
    const v1 = await verify(pack(parts.map((p) => (p === car ? { ...p, content: swapped } : p))));
    expect([v1.verdict, v1.failure?.step, v1.failure?.code]).toEqual(['invalid', 'snapshots', 'SNAPSHOT_CAR_BLOCK_MISMATCH']);
    // only the best snapshot instead of all: the CAR's roots are not the manifest's
    const other = join(dir, 'best.car');
    const m = JSON.parse(parts[0]!.content.toString()) as { snapshotRoots: string[] };
    await writeCar([m.snapshotRoots[m.snapshotRoots.length - 1]!], other);
    const v2 = await verify(pack(parts.map((p) => (p === car ? { ...p, content: readFileSync(other) } : p))));
    expect([v2.verdict, v2.failure?.step, v2.failure?.code]).toEqual(['invalid', 'snapshots', 'BUNDLE_SNAPSHOTS_MISMATCH']);
  });

  it('exporting twice gives the same bytes: nothing in a bundle depends on when it was written', async () => {
    const h = new LedgerHome(home, deps());
    try {
      await exportBundle(h.ledger, { run: RUN, out: join(dir, 'again.bundle'), publisher: controller, snapshots: 'all', writeCar });
    } finally {
      await h.close();
    }
    expect(readFileSync(join(dir, 'again.bundle')).equals(bundle)).toBe(true);
  });

  it('1,000 random byte mutations: every one refused, each by a named step', async () => {
    let seed = Number(process.env.ASSAY_FUZZ_SEED ?? 20261203);
    const rnd = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const byStep = new Map<string, number>();
    for (let i = 0; i < 1000; i++) {
      const b = Buffer.from(bundle);
      const at = rnd(b.length);
      b[at] = (b[at]! + 1 + rnd(255)) % 256;
      const v = await verify(b);
      if (v.verdict === 'valid') throw new Error(`mutation ${i} (byte ${at}) was accepted`);
      expect(BUNDLE_STEPS).toContain(v.failure?.step);
      byStep.set(v.failure!.step, (byStep.get(v.failure!.step) ?? 0) + 1);
    }
    expect(byStep.get('format')).toBeGreaterThan(0);
  });

  it('signatures checked on worker threads: the same verdict, step, code and position as on this thread', async () => {
    const on = (b: Buffer, workers: number) => verifyBundle(chunks(b), { trustedKeys: [root], claims: runClaimRules(), signatureWorkers: workers });
    const view = (v: BundleVerdict) => [v.verdict, v.failure?.step, v.failure?.code, v.failure?.position, v.steps.map((s) => s.checked)];
    expect(view(await on(bundle, 1))).toEqual(view(await on(bundle, 0)));
    // mutations inside the events entry, where a spoiled signature and a spoiled chain or proof compete
    const parts = entries(bundle);
    const events = parts[2]!.content;
    const start = bundle.indexOf(events);
    let seed = 7;
    const rnd = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const steps = new Set<string>();
    for (let i = 0; i < 12; i++) {
      const b = Buffer.from(bundle);
      const at = start + rnd(events.length);
      b[at] = (b[at]! + 1 + rnd(255)) % 256;
      const inline = await on(b, 0);
      expect(view(await on(b, 1))).toEqual(view(inline));
      steps.add(inline.failure?.step ?? 'none');
    }
    expect(steps.has('none')).toBe(false);
  }, 120_000);

  it('a truncated file, bytes after the end, no trusted key, a key that is not the root: refused, the last two as could-not-check', async () => {
    for (const cut of [10, TAR_BLOCK, bundle.length - 1024, bundle.length - 1]) {
      const v = await verify(bundle.subarray(0, cut));
      expect([v.verdict, v.failure?.step]).toEqual(['invalid', 'format']);
    }
    expect((await verify(Buffer.concat([bundle, Buffer.from('x')]))).failure?.code).toBe('BUNDLE_TRAILING_DATA');
    expect((await verify(bundle, [])).verdict).toBe('cannot_check');
    const other = (await import('@assay/ledger')).generateKeyPair('controller');
    const v = await verify(bundle, [other.publicKeyText]);
    expect([v.verdict, v.failure?.code]).toEqual(['cannot_check', 'BUNDLE_UNTRUSTED_ROOT']);
  });

  /** Rebuilds the bundle with altered events.jsonl lines (and a statement re-signed over the new content, as a forger holding the key would). */
  const withLines = (f: (lines: string[]) => string[]): Buffer => {
    const parts = entries(bundle);
    const lines = parts[2]!.content.toString().trimEnd().split('\n');
    const next = f(lines);
    parts[2]!.content = Buffer.from(`${next.join('\n')}\n`);
    const m = JSON.parse(parts[0]!.content.toString()) as JsonObject;
    parts[0]!.content = Buffer.from(canonicalJson({ ...m, events: next.length }));
    return pack(parts);
  };
  const line = (l: string) => JSON.parse(l) as { envelope: string; proof: string[] };

  it('a proof copied from another event, a dropped round: refused by proofs and chains', async () => {
    const copied = await verify(
      withLines((ls) => {
        const a = line(ls[5]!);
        const b = line(ls[6]!);
        return ls.map((l, i) => (i === 5 ? canonicalJson({ envelope: a.envelope, proof: b.proof }) : l));
      }),
    );
    expect([copied.failure?.step, copied.failure?.position]).toEqual(['proofs', expect.any(Number)]);
    // the rounds' rewards dropped (the last event of each Judge stream, so no chain breaks): the claims no longer follow
    const dropped = await verify(withLines((ls) => ls.filter((l) => !Buffer.from(line(l).envelope, 'base64').toString().includes('"type":"RewardRecorded"'))));
    expect([dropped.verdict, dropped.failure?.step]).toEqual(['invalid', 'claims']);
    // an event from the middle of the run stream dropped: its chain is cut
    const gap = await verify(
      withLines((ls) => ls.filter((l, i) => !(i > 10 && Buffer.from(line(l).envelope, 'base64').toString().includes(`"stream":"run-${RUN}"`) && i % 2 === 0))),
    );
    expect([gap.verdict, gap.failure?.step, gap.failure?.code]).toEqual(['invalid', 'chains', 'VERIFY_CHAIN_BROKEN']);
  });

  it('a proof copied from another bundle (the same event, proved against a later checkpoint): refused by proofs', async () => {
    // the ledger grows by a note, and the run is exported again: the same events, proofs against a larger tree
    const h = new LedgerHome(home, deps());
    const later = join(dir, 'later.bundle');
    try {
      await h.ledger.append('note-later', [{ type: 'Note', data: { text: 'after the first export' } }]);
      await exportBundle(h.ledger, { run: RUN, out: later, publisher: controller });
    } finally {
      await h.close();
    }
    const theirs = entries(readFileSync(later))[2]!.content.toString().trimEnd().split('\n');
    const proofOf = new Map(theirs.map((l) => [line(l).envelope, line(l).proof]));
    const v = await verify(
      withLines((ls) =>
        ls.map((l, i) => {
          const mine = line(l);
          const other = proofOf.get(mine.envelope);
          return i === 7 && other ? canonicalJson({ envelope: mine.envelope, proof: other }) : l;
        }),
      ),
    );
    const seventh = line(entries(bundle)[2]!.content.toString().split('\n')[7]!);
    expect(proofOf.get(seventh.envelope)).not.toEqual(seventh.proof); // the proof really is another tree's
    expect([v.verdict, v.failure?.step, v.failure?.code]).toEqual(['invalid', 'proofs', 'VERIFY_PROOF_INVALID']);
  });

  /** The bundle with its claim changed by `mutate` and the statement signed again with the real controller key. */
  const reclaimed = (mutate: (claim: { claimedScore: number; round: number }) => void): Buffer => {
    const parts = entries(bundle);
    const last = parts[parts.length - 1]!;
    const env = JSON.parse(last.content.toString()) as { payload: string };
    const st = JSON.parse(Buffer.from(env.payload, 'base64').toString()) as { predicate: { claimedScore: number; round: number } };
    mutate(st.predicate);
    const payload = Buffer.from(canonicalJson(st as unknown as JsonObject));
    const sig = Buffer.from(controller.sign(pae(DSSE_PAYLOAD_TYPE, payload))).toString('base64');
    last.content = Buffer.from(
      canonicalJson({ payloadType: DSSE_PAYLOAD_TYPE, payload: payload.toString('base64'), signatures: [{ keyid: controller.signer, sig }] }),
    );
    return pack(parts);
  };

  it('a claim with a better score than recorded, signed with the real key: refused by the statement step', async () => {
    const v = await verify(reclaimed((c) => (c.claimedScore = c.claimedScore / 10)));
    expect([v.verdict, v.failure?.step, v.failure?.code]).toEqual(['invalid', 'statement', 'BUNDLE_CLAIM_MISMATCH']);
    expect(v.failure?.message).toMatch(/^the claim's claimedScore is /);
  });

  it('a claim that picks a worse round while a better one exists, signed with the real key: refused by the statement step', async () => {
    // the sample: round 2 scored 0.574, round 5 scored 0.433 (minimize): the rule picks round 5
    const v = await verify(
      reclaimed((c) => {
        expect([c.round, c.claimedScore]).toEqual([5, 0.433]);
        c.round = 2;
        c.claimedScore = 0.574;
      }),
    );
    expect([v.verdict, v.failure?.step, v.failure?.code]).toEqual(['invalid', 'statement', 'BUNDLE_CLAIM_MISMATCH']);
    expect(v.failure?.message).toMatch(/^the claim's (claimedScore|round) is (0\.574|2), but the events support (0\.433|5)/);
  });

  it('the CLI: export, then verify in a fresh directory with only the bundle and the public key; exit 5 and 6', async () => {
    const out = join(dir, 'cli.bundle');
    const ex = await assay(['bundle', 'export', RUN, '-o', out], home); // --snapshots best (the default)
    expect([ex.code, ex.stderr]).toEqual([0, '']);
    expect(ex.stdout).toMatch(/^bundle {4}.*cli\.bundle \(\d+ bytes\)$/m);
    const fresh = mkdtempSync(join(tmpdir(), 'assay-auditor-'));
    try {
      copyFileSync(out, join(fresh, 'run.bundle'));
      writeFileSync(join(fresh, 'root.pub'), `${root}\n`);
      const nohome = join(fresh, 'no-home');
      const ok = await assay(['verify', join(fresh, 'run.bundle'), '--trusted-key', join(fresh, 'root.pub')], nohome);
      expect(ok.code).toBe(0);
      expect(ok.stdout).toMatch(/^valid: run r-20261202-0001 completed, round \d+, score /m);
      const bad = Buffer.from(readFileSync(out));
      bad[bad.length - 2000] = bad[bad.length - 2000]! ^ 1;
      writeFileSync(join(fresh, 'bad.bundle'), bad);
      const invalid = await assay(['verify', join(fresh, 'bad.bundle'), '--trusted-key', root, '--json'], nohome);
      expect(invalid.code).toBe(5);
      expect((JSON.parse(invalid.stdout) as BundleVerdict).verdict).toBe('invalid');
      const unknown = await assay(['verify', join(fresh, 'run.bundle')], nohome);
      expect(unknown.code).toBe(6);
      expect(unknown.stdout).toMatch(/could not check: step trust: BUNDLE_NO_TRUSTED_KEY/);
      const missing = await assay(['verify', join(fresh, 'nope.bundle'), '--trusted-key', root], nohome);
      expect([missing.code, missing.stderr.trim().split('\n')]).toEqual([3, [expect.stringContaining('BUNDLE_UNREADABLE')]]);
      expect(require('node:fs').existsSync(nohome)).toBe(false);
    } finally {
      rmSync(fresh, { recursive: true, force: true });
    }
    const notEnded = await assay(['bundle', 'export', 'nope', '-o', join(dir, 'x.bundle')], home);
    expect([notEnded.code, notEnded.stderr]).toEqual([3, expect.stringContaining('BUNDLE_RUN_NOT_FOUND')]);
  });
});

/**
 * Witnessed bundles: `assay bundle export --cosigned` proves every event against the checkpoint witnesses cosigned
 * and carries their cosignature lines; `assay verify --witness-policy` requires a quorum of named witnesses at the
 * checkpoint step. Also a checkpoint rolled back to a smaller tree, signed by the real controller key, and an event
 * signed by a key after its revocation.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { exportBundle, verifyBundle, type BundleVerdict } from '@assay/bundles';
import {
  addSignatures,
  canonicalJson,
  cosignatureKeyId,
  cosignatureNoteSigner,
  ed25519Cosigner,
  Ledger,
  LedgerHome,
  parseCheckpointBody,
  parseNote,
  parseWitnessPolicy,
  signCheckpoint,
  type Cosigner,
  type JsonObject,
  type SigningKey,
  type WitnessPolicy,
} from '@assay/ledger';
import { runClaimRules } from '@assay/run';
import { chunks, entries, pack } from '../support/bundle-archive';
import { assay } from '../support/cli';
import { buildSampleHome, deps } from '../support/ledger-home-fixtures';

jest.setTimeout(180_000);

const RUN = 'r-20261202-0001';

/** A witness: its cosigner and its verifier key text (type 0x04). */
function witness(name: string): { cosigner: Cosigner; text: string } {
  const cosigner = ed25519Cosigner(name, randomBytes(32));
  const id = cosignatureKeyId(name, cosigner.publicKey).toString('hex');
  return { cosigner, text: `${name}+${id}+${Buffer.concat([Buffer.from([0x04]), cosigner.publicKey]).toString('base64')}` };
}

const policy = (quorum: number, texts: string[]): WitnessPolicy =>
  parseWitnessPolicy(JSON.stringify({ format: 'assay-witness-policy/v1', quorum, witnesses: texts }));

describe('witnessed result bundles', () => {
  let dir: string;
  let home: string;
  let controller: SigningKey;
  let root: string;
  let bundle: Buffer;
  const [a, b, c, outsider] = ['auditor-a.example', 'auditor-b.example', 'auditor-c.example', 'someone-else.example'].map(witness) as [
    ReturnType<typeof witness>,
    ReturnType<typeof witness>,
    ReturnType<typeof witness>,
    ReturnType<typeof witness>,
  ];
  const verify = (bytes: Buffer, p?: WitnessPolicy): Promise<BundleVerdict> =>
    verifyBundle(chunks(bytes), { trustedKeys: [root], claims: runClaimRules(), witnessPolicy: p });

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'assay-bundle-witness-'));
    home = join(dir, 'home');
    await buildSampleHome(home);
    const h = new LedgerHome(home, deps());
    try {
      controller = h.ledger.key('controller') as SigningKey;
      root = controller.publicKeyText;
      // the ledger signs a checkpoint after the run; witnesses a and b cosign it, and so does one outside any policy
      const note = (await h.ledger.checkpoint()).note;
      const cosigned = addSignatures(
        note,
        [a, b, outsider].map((w) => cosignatureNoteSigner(w.cosigner, 1_780_000_000)),
      );
      writeFileSync(join(home, 'ledger', 'checkpoint.cosigned'), cosigned);
      await exportBundle(h.ledger, { run: RUN, out: join(dir, 'witnessed.bundle'), publisher: controller, checkpoint: cosigned });
    } finally {
      await h.close();
    }
    bundle = readFileSync(join(dir, 'witnessed.bundle'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('carries the cosigned checkpoint; valid without a policy, and with a policy whose quorum cosigned', async () => {
    const note = entries(bundle)[1]!.content.toString();
    expect(parseNote(note).signatures).toHaveLength(4);
    expect((await verify(bundle)).verdict).toBe('valid');
    const v = await verify(bundle, policy(2, [a.text, b.text, c.text]));
    expect([v.verdict, v.failure]).toEqual(['valid', null]);
    expect(v.witnesses).toMatchObject({
      met: true,
      quorum: 2,
      missing: [expect.stringContaining('auditor-c.example+')],
    });
    expect(v.witnesses?.cosigned.map((w) => w.signer.split('+')[0])).toEqual(['auditor-a.example', 'auditor-b.example']);
  });

  it('too few of the policy cosigned, or only keys outside it: refused at the checkpoint step, naming who did and who did not', async () => {
    const v3 = await verify(bundle, policy(3, [a.text, b.text, c.text]));
    expect([v3.verdict, v3.failure?.step, v3.failure?.code]).toEqual(['invalid', 'checkpoint', 'BUNDLE_WITNESS_QUORUM']);
    expect(v3.failure?.message).toMatch(/cosigned by 2 of the policy's witnesses, 3 needed.*no cosignature: auditor-c/);
    // the outsider's cosignature never counts for a policy that does not name it
    const vOut = await verify(bundle, policy(1, [c.text]));
    expect([vOut.verdict, vOut.failure?.code]).toEqual(['invalid', 'BUNDLE_WITNESS_QUORUM']);
    expect(vOut.failure?.message).toMatch(/outside the policy \(not counted\): .*someone-else\.example/);
  });

  it('a spoiled cosignature does not count; the checkpoint itself still verifies with the controller key', async () => {
    const parts = entries(bundle);
    const lines = parts[1]!.content.toString().split('\n');
    const i = lines.findIndex((l) => l.startsWith('— auditor-b.example '));
    const sig = Buffer.from(lines[i]!.split(' ')[2]!, 'base64');
    sig[20] = sig[20]! ^ 1;
    lines[i] = `— auditor-b.example ${sig.toString('base64')}`;
    const spoiled = pack(parts.map((p, k) => (k === 1 ? { ...p, content: Buffer.from(lines.join('\n')) } : p)));
    const v = await verify(spoiled, policy(2, [a.text, b.text, c.text]));
    // the checkpoint entry changed, so the statement's content digest would fail later; the quorum fails first
    expect([v.verdict, v.failure?.step, v.failure?.code]).toEqual(['invalid', 'checkpoint', 'BUNDLE_WITNESS_QUORUM']);
    expect(v.failure?.message).toMatch(/not verifying: auditor-b/);
  });

  it('a checkpoint rolled back to a smaller tree, signed by the real controller key: refused (checkpoint, then proofs)', async () => {
    const parts = entries(bundle);
    const m = JSON.parse(parts[0]!.content.toString()) as { treeSize: number; origin: string };
    const h = new LedgerHome(home, deps());
    let older: string;
    try {
      const size = m.treeSize - 3;
      older = signCheckpoint({ origin: m.origin, treeSize: size, rootHash: await h.ledger.root(size) }, [
        { name: controller.name, keyId: controller.keyId, sign: (t) => controller.sign(t) },
      ]);
    } finally {
      await h.close();
    }
    expect(parseCheckpointBody(parseNote(older).body).treeSize).toBe(m.treeSize - 3);
    const v1 = await verify(pack(parts.map((p, k) => (k === 1 ? { ...p, content: Buffer.from(older) } : p))));
    expect([v1.verdict, v1.failure?.step, v1.failure?.code]).toEqual(['invalid', 'checkpoint', 'BUNDLE_CHECKPOINT_INVALID']);
    // the manifest rolled back with it: the last events' proofs cannot reach the smaller tree
    const manifest = Buffer.from(canonicalJson({ ...(JSON.parse(parts[0]!.content.toString()) as JsonObject), treeSize: m.treeSize - 3 }));
    const rolled = pack(parts.map((p, k) => (k === 0 ? { ...p, content: manifest } : k === 1 ? { ...p, content: Buffer.from(older) } : p)));
    const v2 = await verify(rolled);
    expect([v2.verdict, v2.failure?.step, v2.failure?.code]).toEqual(['invalid', 'proofs', 'VERIFY_PROOF_INVALID']);
  });

  it('an event signed by a revoked key (its holder kept writing): refused at the signatures step', async () => {
    const other = join(dir, 'revoked-home');
    await buildSampleHome(other);
    const h = new LedgerHome(other, deps());
    let revokedAt: number;
    let late: number;
    try {
      const runtime = h.keys.find((k) => k.role === 'runtime') as SigningKey;
      revokedAt = (
        await h.ledger.append(Ledger.keyStream(runtime.name), [{ type: 'KeyRevoked', data: { keyId: runtime.signer, reason: 'leaked' } }], 'stream_exists')
      ).lastPosition;
      // a Judge stream of the run, launched by the revoked runtime key: the bundle carries it
      late = (
        await h.ledger.append('judge-late', [
          {
            type: 'JudgeLaunched',
            data: {
              run: RUN,
              round: 1,
              judge: 'late',
              image: 'sha256:00',
              snapshot: 'bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy',
              testsDigest: 'sha256:00',
              limits: {},
              network: 'none',
            },
          },
        ])
      ).lastPosition;
      await exportBundle(h.ledger, { run: RUN, out: join(dir, 'revoked.bundle'), publisher: h.ledger.key('controller') as SigningKey });
    } finally {
      await h.close();
    }
    const otherRoot = JSON.parse(readFileSync(join(other, 'ledger', 'ledger.json'), 'utf8')).rootKey as string;
    const v = await verifyBundle(chunks(readFileSync(join(dir, 'revoked.bundle'))), { trustedKeys: [otherRoot], claims: runClaimRules() });
    expect(late).toBe(revokedAt + 1);
    expect([v.verdict, v.failure?.step, v.failure?.code, v.failure?.position]).toEqual(['invalid', 'signatures', 'VERIFY_REVOKED_SIGNER', late]);
  });

  it('the CLI: export --cosigned, verify --witness-policy (exit 0 met, 5 not met, 2 for a malformed policy)', async () => {
    const out = join(dir, 'cli.bundle');
    const exp = await assay(['bundle', 'export', RUN, '-o', out, '--cosigned', '--snapshots', 'none'], home);
    expect([exp.code, exp.stderr]).toEqual([0, '']);
    expect(readFileSync(out).equals(bundle)).toBe(true);
    const keyFile = join(dir, 'root.pub');
    writeFileSync(keyFile, `${root}\n`);
    const met = join(dir, 'met.json');
    writeFileSync(met, JSON.stringify({ format: 'assay-witness-policy/v1', quorum: 2, witnesses: [a.text, b.text, c.text] }));
    const unmet = join(dir, 'unmet.json');
    writeFileSync(unmet, JSON.stringify({ format: 'assay-witness-policy/v1', quorum: 3, witnesses: [a.text, b.text, c.text] }));
    const bad = join(dir, 'bad.json');
    writeFileSync(bad, '{"format": "assay-witness-policy/v1", "quorum": 4, "witnesses": []}');
    const ok = await assay(['verify', out, '--trusted-key', keyFile, '--witness-policy', met], join(dir, 'no-home'));
    expect(ok.code).toBe(0);
    expect(ok.stdout).toMatch(/witnesses: the checkpoint is cosigned by 2 of the policy's witnesses, 2 needed/);
    const no = await assay(['verify', out, '--trusted-key', keyFile, '--witness-policy', unmet], join(dir, 'no-home'));
    expect(no.code).toBe(5);
    expect(no.stdout).toMatch(/INVALID: step checkpoint: BUNDLE_WITNESS_QUORUM/);
    const malformed = await assay(['verify', out, '--trusted-key', keyFile, '--witness-policy', bad], join(dir, 'no-home'));
    expect(malformed.code).toBe(2);
    expect(malformed.stderr).toMatch(/BUNDLE_BAD_WITNESS_POLICY.*witnesses/);
    expect(malformed.stderr).not.toMatch(/\n\s+at /);
  });
});

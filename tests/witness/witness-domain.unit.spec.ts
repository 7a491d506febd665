/**
 * The witness's pure decisions, equivocation reports and witness policies, on in-memory trees: every refusal, what a
 * report proves and what it does not, and what counts toward a quorum.
 */
import {
  checkWitnessPolicy,
  consistencyProof,
  cosign,
  decideCosign,
  ed25519Cosigner,
  ed25519NoteSigner,
  ed25519NoteVerifier,
  formatVerifierKey,
  formatWitnessRequest,
  leafHash,
  makeEquivocationReport,
  nodeHash,
  nodeEd25519,
  parseConsistencyProofText,
  parseWitnessPolicy,
  parseWitnessRequest,
  rootAt,
  signCheckpoint,
  verifyEquivocation,
  type NodeSource,
  type WitnessState,
} from '@assay/ledger';

const seed = (b: number) => Buffer.alloc(32, b);
const logSigner = ed25519NoteSigner('log', seed(1));
const logKey = ed25519NoteVerifier('log', nodeEd25519.publicKeyFromSeed(seed(1)));
const otherLogKey = ed25519NoteVerifier('log', nodeEd25519.publicKeyFromSeed(seed(9)));
const ORIGIN = 'example.test/log';

/** A tree of `n` leaves "<tag>-<i>" (leaves before `forkAt` are shared by every tag). */
function tree(n: number, tag = 'a', forkAt = Infinity): { root: Buffer; node: NodeSource } {
  const leaves = Array.from({ length: n }, (_, i) => leafHash(Buffer.from(i < forkAt ? `leaf-${i}` : `${tag}-${i}`)));
  const memo = new Map<string, Uint8Array>();
  const node: NodeSource = (level, index) => {
    const k = `${level}/${index}`;
    const hit = memo.get(k);
    if (hit) return hit;
    let h: Uint8Array;
    if (level === 0) h = leaves[index] as Uint8Array;
    else h = nodeHash(node(level - 1, 2 * index), node(level - 1, 2 * index + 1));
    memo.set(k, h);
    return h;
  };
  return { root: Buffer.from(rootAt(n, node)), node };
}

const note = (n: number, tag = 'a', forkAt = Infinity) => signCheckpoint({ origin: ORIGIN, treeSize: n, rootHash: tree(n, tag, forkAt).root }, [logSigner]);
const b64proof = (m: number, n: number, tag = 'a', forkAt = Infinity) =>
  consistencyProof(m, n, tree(n, tag, forkAt).node).map((h) => Buffer.from(h).toString('base64'));
const req = (old: number, proof: string[], text: string) => parseWitnessRequest(formatWitnessRequest(old, proof, text));

function cosigned(state: WitnessState | null, r: ReturnType<typeof req>): WitnessState {
  const d = decideCosign({ state, request: r, logVerifiers: [logKey] });
  if (d.action !== 'cosign') throw d.error;
  return d.state;
}

describe('decideCosign', () => {
  it('trusts on first use, then needs a consistency proof that verifies', () => {
    const s1 = cosigned(null, req(0, [], note(5)));
    expect(s1.latest.treeSize).toBe(5);
    const noProof = decideCosign({ state: s1, request: req(5, [], note(9)), logVerifiers: [logKey] });
    expect(noProof.action === 'refuse' && noProof.error.code).toBe('WITNESS_PROOF_REQUIRED');
    const s2 = cosigned(s1, req(5, b64proof(5, 9), note(9)));
    expect(s2.latest.treeSize).toBe(9);
    expect(s2.history.map((h) => h.treeSize)).toEqual([5]);
    const again = decideCosign({ state: s2, request: req(9, [], note(9)), logVerifiers: [logKey] });
    expect(again.action === 'cosign' && again.repeated).toBe(true);
  });

  it('refuses a rollback, a fork of the same size (proven report) and a failing proof (unproven report)', () => {
    const s1 = cosigned(null, req(0, [], note(5)));
    const s2 = cosigned(s1, req(5, b64proof(5, 9), note(9)));
    const back = decideCosign({ state: s2, request: req(9, [], note(5)), logVerifiers: [logKey] });
    expect(back.action === 'refuse' && [back.error.code, back.report]).toEqual(['WITNESS_ROLLBACK', null]);
    // a rollback to a recorded size with another root: proven
    const backFork = decideCosign({ state: s2, request: req(9, [], note(5, 'b', 3)), logVerifiers: [logKey] });
    expect(backFork.action).toBe('refuse');
    if (backFork.action !== 'refuse') return;
    expect(backFork.error.code).toBe('WITNESS_ROLLBACK');
    expect(verifyEquivocation(backFork.report!, [logKey]).proven).toBe(true);

    const fork = decideCosign({ state: s2, request: req(9, [], note(9, 'b', 7)), logVerifiers: [logKey] });
    expect(fork.action).toBe('refuse');
    if (fork.action !== 'refuse') return;
    expect(fork.error.code).toBe('WITNESS_FORK');
    expect(verifyEquivocation(fork.report!, [logKey])).toMatchObject({ proven: true });
    expect(verifyEquivocation(fork.report!, [otherLogKey]).proven).toBe(false);

    const badProof = decideCosign({ state: s2, request: req(9, b64proof(9, 12, 'b', 7), note(12, 'b', 7)), logVerifiers: [logKey] });
    expect(badProof.action).toBe('refuse');
    if (badProof.action !== 'refuse') return;
    expect(badProof.error.code).toBe('WITNESS_FORK');
    const v = verifyEquivocation(badProof.report!, [logKey]);
    expect(v.proven).toBe(false);
    expect(v.reason).toMatch(/does not prove a fork by itself/);
  });

  it('answers a wrong old size with the known size, and honours a pinned trust anchor', () => {
    const s1 = cosigned(null, req(0, [], note(5)));
    const wrong = decideCosign({ state: s1, request: req(3, b64proof(3, 9), note(9)), logVerifiers: [logKey] });
    expect(wrong.action === 'refuse' && [wrong.error.code, wrong.error.details.knownSize]).toEqual(['WITNESS_OLD_SIZE_MISMATCH', 5]);
    const trust = { treeSize: 5, rootHash: tree(5).root.toString('base64') };
    expect(decideCosign({ state: null, request: req(5, b64proof(5, 9), note(9)), logVerifiers: [logKey], trust }).action).toBe('cosign');
    const off = decideCosign({ state: null, request: req(5, [], note(5, 'b', 2)), logVerifiers: [logKey], trust });
    expect(off.action === 'refuse' && off.error.code).toBe('WITNESS_TRUST_MISMATCH');
  });

  it('refuses a checkpoint the log key did not sign', () => {
    expect(() => decideCosign({ state: null, request: req(0, [], note(5)), logVerifiers: [otherLogKey] })).toThrow(/not signed by any of the known keys/);
  });

  it('reads the proof text `assay ledger consistency` prints', () => {
    const text = `consistency 5 -> 9\nroot1 ${tree(5).root.toString('base64')}\nroot2 ${tree(9).root.toString('base64')}\n${b64proof(5, 9).join('\n')}\n`;
    expect(parseConsistencyProofText(text)).toMatchObject({ oldSize: 5, newSize: 9 });
    expect(() => parseConsistencyProofText('hello\n')).toThrow(/first line/);
  });
});

describe('verifyEquivocation', () => {
  it('does not prove two consistent checkpoints, nor malformed reports', () => {
    const r = makeEquivocationReport({ origin: ORIGIN, checkpoints: [note(5), note(9)], consistency: { size1: 5, size2: 9, proof: b64proof(5, 9) } });
    expect(verifyEquivocation(r, [logKey])).toMatchObject({ proven: false, reason: expect.stringMatching(/consistent/) });
    expect(verifyEquivocation('{"format":"x"}', [logKey]).proven).toBe(false);
    const origins = makeEquivocationReport({ origin: 'other', checkpoints: [note(5), note(5, 'b', 2)] });
    expect(verifyEquivocation(origins, [logKey]).proven).toBe(false);
  });
});

describe('checkWitnessPolicy', () => {
  const ws = [2, 3, 4, 5].map((b, i) => ed25519Cosigner(`w${i}`, seed(b)));
  const keyText = (c: (typeof ws)[0]) => formatVerifierKey(c.name, c.publicKey, 0x04);
  const policy = parseWitnessPolicy(JSON.stringify({ format: 'assay-witness-policy/v1', quorum: 2, witnesses: ws.slice(0, 3).map(keyText) }));
  const body = `${ORIGIN}\n5\n${tree(5).root.toString('base64')}\n`;
  const withLines = (...cs: Array<(typeof ws)[0]>) => note(5) + cs.map((c) => cosign(body, c, 1_700_000_000)).join('');

  it('counts policy witnesses only, up to the quorum', () => {
    const one = checkWitnessPolicy(withLines(ws[0]!, ws[3]!), policy);
    expect(one).toMatchObject({
      met: false,
      outside: [expect.stringMatching(/^w3\+/)],
      missing: [expect.stringMatching(/^w1\+/), expect.stringMatching(/^w2\+/)],
    });
    expect(checkWitnessPolicy(withLines(ws[0]!, ws[2]!), policy).met).toBe(true);
  });

  it('refuses malformed policies', () => {
    const p = (o: unknown) => () => parseWitnessPolicy(JSON.stringify(o));
    expect(p({ format: 'assay-witness-policy/v1', quorum: 4, witnesses: ws.slice(0, 3).map(keyText) })).toThrow(/quorum/);
    expect(p({ format: 'assay-witness-policy/v1', quorum: 1, witnesses: [keyText(ws[0]!), keyText(ws[0]!)] })).toThrow(/twice/);
    expect(p({ format: 'nope', quorum: 1, witnesses: [] })).toThrow(/format/);
  });
});

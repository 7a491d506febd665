import { createHash } from 'node:crypto';
import nacl from 'tweetnacl';
import { nodeEd25519 } from '../crypto/ed25519';
import { naclEd25519 } from '../../../../tests/support/nacl-ed25519';
import { formatVerifierKey, parseVerifierKey } from '../crypto/keys';
import { formatCheckpointBody, signCheckpoint } from './checkpoint';
import { cosign, cosignatureKeyId, cosignatureNoteSigner, cosignatureVerifier, cosignedMessage, ed25519Cosigner, verifyCosignature } from './cosignature';
import { addSignatures, ed25519NoteSigner, ed25519NoteVerifier, parseNote, verifyNote } from './note';

const code = (c: string) => expect.objectContaining({ code: c });
const SEED_LOG = Buffer.from('9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60', 'hex'); // RFC 8032 TEST 1
const SEED_AUDITOR = Buffer.from('4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb', 'hex'); // TEST 2
const AUDITOR = 'assay.example/auditor';
const auditorPub = nodeEd25519.publicKeyFromSeed(SEED_AUDITOR);
const auditorKey = { name: AUDITOR, publicKey: auditorPub };
const T = 1767225600; // 2026-01-01T00:00:00Z

const KNOWN_NOTE =
  'assay.example/ledger\n3\ncuDRdZjUDBQ/FOv7BeLFxN3Wvr8WXzVpRDrEaViH0wI=\n\n' +
  '\u2014 assay-controller-9d61b19d pPojn7SpE1PGzGyQqO3zTxLvtT5cNZah6oVmsuRu8mU3Q1JHS/hM3cJhqECkmcIGDsGsvKxEZ6rFgyktyD/Jie+u5wg=\n';
const BODY = KNOWN_NOTE.slice(0, KNOWN_NOTE.indexOf('\n\n') + 1);
const KNOWN_COSIGNATURE =
  '\u2014 assay.example/auditor cQKFNwAAAABpVbkAHH9WtfvFsvVYHIIxNXbyVAMeOHOHGbQt/AdiL7p9K8tUarXr8ZvMf6T6741FU0eFXjmqxrN8/nG1urdahi9KDA==\n';

describe('tlog-cosignature v1.0.1 (Ed25519)', () => {
  it('uses key ID SHA-256(name || 0x0A || 0x04 || key)[:4] and a 0x04 verifier key', () => {
    const want = createHash('sha256').update(`${AUDITOR}\n\x04`).update(auditorPub).digest().subarray(0, 4);
    expect(cosignatureKeyId(AUDITOR, auditorPub).toString('hex')).toBe(want.toString('hex'));
    expect(cosignatureKeyId(AUDITOR, auditorPub).toString('hex')).toBe('71028537');
    const vkey = formatVerifierKey(AUDITOR, auditorPub, 4);
    expect(vkey).toBe('assay.example/auditor+71028537+BD1AF8PoQ4lakrcKp00bfrycmCzPLsSWjMDNVfEq9GYM');
    expect(parseVerifierKey(vkey).keyIdHex).toBe('71028537');
  });

  it('signs "cosignature/v1\\ntime <t>\\n" followed by the checkpoint body', () => {
    expect(cosignedMessage(BODY, T).toString()).toBe(`cosignature/v1\ntime ${T}\n${BODY}`);
    expect(cosignedMessage(BODY, 0).toString()).toBe(`cosignature/v1\ntime 0\n${BODY}`);
  });

  it('known answer: the cosignature line is keyid || u64 BE time || Ed25519 signature', () => {
    for (const impl of [nodeEd25519, naclEd25519]) expect(cosign(BODY, ed25519Cosigner(AUDITOR, SEED_AUDITOR, impl), T)).toBe(KNOWN_COSIGNATURE);
    const raw = Buffer.from(KNOWN_COSIGNATURE.trim().split(' ')[2] as string, 'base64');
    expect(raw.byteLength).toBe(76);
    expect(raw.subarray(0, 4).toString('hex')).toBe('71028537');
    expect(raw.readBigUInt64BE(4)).toBe(BigInt(T));
    const msg = Buffer.from(`cosignature/v1\ntime ${T}\n${BODY}`);
    expect(nacl.sign.detached.verify(msg, raw.subarray(12), auditorPub)).toBe(true);
  });

  it('round trip: the cosigned note verifies for the cosigner and stays valid for the log key', () => {
    const cosigned = KNOWN_NOTE + KNOWN_COSIGNATURE;
    const got = verifyCosignature(cosigned, auditorKey);
    expect(got).toMatchObject({ name: AUDITOR, keyIdHex: '71028537', timestamp: T });
    expect(got.checkpoint.treeSize).toBe(3);
    expect(verifyCosignature(cosigned, auditorKey, { impl: naclEd25519 }).timestamp).toBe(T);
    // Through the generic note verifier, next to the log's own key; a cosignature is ignored by verifiers that
    // do not know the cosigner.
    const logVerifier = ed25519NoteVerifier('assay-controller-9d61b19d', nodeEd25519.publicKeyFromSeed(SEED_LOG));
    expect(verifyNote(cosigned, [logVerifier, cosignatureVerifier(auditorKey)]).map((k) => k.name)).toEqual(['assay-controller-9d61b19d', AUDITOR]);
    expect(verifyNote(cosigned, [logVerifier])).toHaveLength(1);
    // addSignatures appends the same line.
    const appended = addSignatures(KNOWN_NOTE, [cosignatureNoteSigner(ed25519Cosigner(AUDITOR, SEED_AUDITOR), T)]);
    expect(appended).toBe(cosigned);
  });

  it('cosigns checkpoints with extension lines, including them in the signed message', () => {
    const body = formatCheckpointBody({ origin: 'o', treeSize: 5, rootHash: Buffer.alloc(32, 1), extensions: ['ext'] });
    const note = signCheckpoint({ origin: 'o', treeSize: 5, rootHash: Buffer.alloc(32, 1), extensions: ['ext'] }, [ed25519NoteSigner('log', SEED_LOG)]);
    const line = cosign(body, ed25519Cosigner(AUDITOR, SEED_AUDITOR), T + 1);
    expect(verifyCosignature(note + line, auditorKey).timestamp).toBe(T + 1);
    const stripped = `o\n5\n${Buffer.alloc(32, 1).toString('base64')}\n\n${note.split('\n\n')[1]}${line}`;
    expect(() => verifyCosignature(stripped, auditorKey)).toThrow(code('COSIGNATURE_BAD_SIGNATURE'));
  });

  it('detects every tampering and malformation with its own code', () => {
    const raw = Buffer.from(KNOWN_COSIGNATURE.trim().split(' ')[2] as string, 'base64');
    const line = (bytes: Buffer, name = AUDITOR): string => `\u2014 ${name} ${bytes.toString('base64')}\n`;
    const withTime = Buffer.from(raw);
    withTime.writeBigUInt64BE(BigInt(T + 1), 4);
    const hugeTime = Buffer.from(raw);
    hugeTime.writeBigUInt64BE(2n ** 63n - 1n, 4);
    const badSig = Buffer.from(raw);
    badSig[40] = (badSig[40] as number) ^ 1;
    const cases: Array<[string, string, string]> = [
      ['no cosignature', KNOWN_NOTE, 'COSIGNATURE_MISSING'],
      ['cosignature under another name', KNOWN_NOTE + line(raw, 'other.example/auditor'), 'COSIGNATURE_MISSING'],
      ['time changed', KNOWN_NOTE + line(withTime), 'COSIGNATURE_BAD_SIGNATURE'],
      ['signature bit flipped', KNOWN_NOTE + line(badSig), 'COSIGNATURE_BAD_SIGNATURE'],
      ['timestamp beyond 2^53', KNOWN_NOTE + line(hugeTime), 'COSIGNATURE_BAD_TIMESTAMP'],
      ['truncated payload', KNOWN_NOTE + line(raw.subarray(0, 75)), 'COSIGNATURE_MALFORMED'],
      ['payload without timestamp (a plain note signature)', KNOWN_NOTE + line(Buffer.concat([raw.subarray(0, 4), raw.subarray(12)])), 'COSIGNATURE_MALFORMED'],
      ['checkpoint size changed', KNOWN_NOTE.replace('\n3\n', '\n2\n') + KNOWN_COSIGNATURE, 'COSIGNATURE_BAD_SIGNATURE'],
      ['checkpoint body malformed', KNOWN_NOTE.replace('\n3\n', '\n03\n') + KNOWN_COSIGNATURE, 'CHECKPOINT_BAD_TREE_SIZE'],
    ];
    for (const [what, note, c] of cases) {
      let got: unknown;
      try {
        verifyCosignature(note, auditorKey);
      } catch (e) {
        got = (e as { code?: string }).code;
      }
      expect([what, got]).toEqual([what, c]);
    }
    // The generic verifier agrees: a known cosigner with a bad signature rejects the note.
    expect(() => verifyNote(KNOWN_NOTE + line(badSig), [cosignatureVerifier(auditorKey)])).toThrow(code('NOTE_BAD_SIGNATURE'));
    expect(() => verifyNote(KNOWN_NOTE + line(raw.subarray(0, 75)), [cosignatureVerifier(auditorKey)])).toThrow(code('NOTE_BAD_SIGNATURE'));
  });

  it('refuses cosignatures dated after notAfterSeconds', () => {
    const cosigned = KNOWN_NOTE + KNOWN_COSIGNATURE;
    expect(verifyCosignature(cosigned, auditorKey, { notAfterSeconds: T }).timestamp).toBe(T);
    expect(() => verifyCosignature(cosigned, auditorKey, { notAfterSeconds: T - 1 })).toThrow(code('COSIGNATURE_BAD_TIMESTAMP'));
  });

  it('refuses bad inputs when cosigning', () => {
    const cosigner = ed25519Cosigner(AUDITOR, SEED_AUDITOR);
    expect(() => cosign(BODY, cosigner, -1)).toThrow(code('COSIGNATURE_BAD_TIMESTAMP'));
    expect(() => cosign(BODY, cosigner, 1.5)).toThrow(code('COSIGNATURE_BAD_TIMESTAMP'));
    expect(() => cosign(BODY, cosigner, 2 ** 53)).toThrow(code('COSIGNATURE_BAD_TIMESTAMP'));
    expect(() => cosign('not a checkpoint\n', cosigner, T)).toThrow(code('CHECKPOINT_MALFORMED'));
    expect(() => cosign(BODY, { ...cosigner, name: 'a b' }, T)).toThrow(code('NOTE_BAD_KEY_NAME'));
    expect(() => cosign(BODY, { ...cosigner, sign: () => new Uint8Array(10) }, T)).toThrow(code('COSIGNATURE_MALFORMED'));
    expect(() => cosignatureVerifier({ name: AUDITOR, publicKey: Buffer.alloc(32) })).toThrow(code('COSIGNATURE_BAD_PUBLIC_KEY'));
  });

  it('a cosignature line parses as an ordinary note signature', () => {
    const parsed = parseNote(KNOWN_NOTE + KNOWN_COSIGNATURE);
    expect(parsed.signatures.map((s) => [s.name, s.keyIdHex, s.signature.byteLength])).toEqual([
      ['assay-controller-9d61b19d', 'a4fa239f', 64],
      [AUDITOR, '71028537', 72],
    ]);
  });
});

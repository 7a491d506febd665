/** Keeps docs/formats.md true: recomputes every value of its worked example and checks the page quotes them. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { nodeEd25519 } from '../crypto/ed25519';
import { naclEd25519 } from '../../../../tests/support/nacl-ed25519';
import { formatVerifierKey, parseVerifierKey } from '../crypto/keys';
import { envelopeHash, parseEnvelope, signingBytes, wireBytes, ZERO_HASH } from './envelope';
import { leafHash, nodeHash } from './merkle';
import { signCheckpoint } from './checkpoint';
import { ed25519NoteSigner } from './note';

const doc = readFileSync(join(__dirname, '..', '..', '..', '..', 'docs', 'formats.md'), 'utf8');
const seed = Buffer.from('9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60', 'hex');
const name = 'assay-controller-9d61b19d';

describe('docs/formats.md worked example', () => {
  const pub = nodeEd25519.publicKeyFromSeed(seed);
  const vk = formatVerifierKey(name, pub);
  const signer = parseVerifierKey(vk).signer;
  const unsigned = {
    type: 'Note',
    data: { text: 'hello' },
    stream: 'note-demo',
    revision: 0,
    position: 3,
    id: '00000000-0000-4000-8000-000000000001',
    time: '2026-12-02T10:00:00.000Z',
    prev: ZERO_HASH,
    signer,
  };
  const signing = signingBytes(unsigned);
  const sig = Buffer.from(nodeEd25519.sign(seed, signing));
  const wire = wireBytes({ ...unsigned, sig: sig.toString('base64') });

  it('quotes the verifier key, signing bytes, signature, wire bytes and hashes the code computes', () => {
    for (const value of [
      vk,
      signing.toString('utf8'),
      signing.toString('hex'),
      sig.toString('hex'),
      sig.toString('base64'),
      wire.toString('utf8'),
      envelopeHash(wire).toString('hex'),
      leafHash(wire).toString('hex'),
    ])
      expect(doc).toContain(value);
  });

  it('is a valid envelope whose signature verifies with both Ed25519 implementations', () => {
    const p = parseEnvelope(wire);
    expect(naclEd25519.verify(pub, p.signing, p.signature)).toBe(true);
    expect(nodeEd25519.verify(pub, p.signing, p.signature)).toBe(true);
    expect(Buffer.from(naclEd25519.sign(seed, signing)).equals(sig)).toBe(true);
  });

  it('quotes the checkpoint example exactly', () => {
    const [l0, l1, l2] = ['event 0', 'event 1', 'event 2'].map((s) => leafHash(Buffer.from(s))) as [Buffer, Buffer, Buffer];
    const root = nodeHash(nodeHash(l0, l1), l2);
    const note = signCheckpoint({ origin: 'assay.example/ledger', treeSize: 3, rootHash: root }, [ed25519NoteSigner(name, seed)]);
    expect(doc).toContain(note);
  });
});

/**
 * Key names are at most 128 bytes of UTF-8 (formats.md, "Keys"), not 128 UTF-16 code units: a name of 100 'é'
 * (100 code units, 200 bytes) or of 50 emoji (100 code units, 200 bytes) is refused everywhere a key name enters:
 * generation, verifier and private key texts (.pub and .key files), note signature lines, the catalogue's keyId and
 * publicKey fields, and the envelope's signer.
 */
import { createHash } from 'node:crypto';
import { nodeEd25519 } from '../crypto/ed25519';
import { formatPrivateKey, generateKeyPair, parsePrivateKey, parseVerifierKey } from '../crypto/keys';
import { eventDataProblem } from './catalogue';
import { envelopeText, parseEnvelope } from './envelope';
import { keyNameProblem, parseNote, SIG_TYPE_ED25519 } from './note';

const seed = Buffer.alloc(32, 7);
const pub = nodeEd25519.publicKeyFromSeed(seed);
/** The key id of a name without the name check (noteKeyId refuses it), to build texts only the name makes invalid. */
const hex8 = (name: string): string =>
  createHash('sha256')
    .update(name, 'utf8')
    .update(Buffer.from([0x0a, SIG_TYPE_ED25519]))
    .update(pub)
    .digest()
    .subarray(0, 4)
    .toString('hex');
const pubB64 = Buffer.concat([Buffer.from([SIG_TYPE_ED25519]), pub]).toString('base64');

const cases: Array<[string, string]> = [
  ['128 ASCII bytes', 'a'.repeat(128)],
  ['64 two-byte characters (128 bytes)', 'é'.repeat(64)],
  ['32 four-byte characters (128 bytes)', '😀'.repeat(32)],
];
const tooLong: Array<[string, string]> = [
  ['129 ASCII bytes', 'a'.repeat(129)],
  ['100 two-byte characters (200 bytes, 100 code units)', 'é'.repeat(100)],
  ['43 three-byte characters (129 bytes, 43 code units)', '€'.repeat(43)],
  ['50 four-byte characters (200 bytes, 100 code units)', '😀'.repeat(50)],
  ['a 300-byte name', 'é'.repeat(150)],
];

describe('key names: at most 128 UTF-8 bytes', () => {
  it.each(cases)('accepts %s everywhere', (_what, name) => {
    expect(keyNameProblem(name)).toBeNull();
    const pair = generateKeyPair('auditor', name);
    expect(parseVerifierKey(pair.publicKeyText).name).toBe(name);
    expect(parsePrivateKey(pair.privateKeyText).name).toBe(name);
    expect(eventDataProblem('KeyRegistered', { keyId: pair.signer, publicKey: pair.publicKeyText, role: 'auditor' })).toBeNull();
  });

  it.each(tooLong)('refuses %s everywhere', (_what, name) => {
    expect(keyNameProblem(name)).toMatch(/at most 128 bytes/);
    expect(() => generateKeyPair('auditor', name)).toThrow(expect.objectContaining({ code: 'NOTE_BAD_KEY_NAME' }));
    expect(() => formatPrivateKey(name, seed)).toThrow(expect.objectContaining({ code: 'NOTE_BAD_KEY_NAME' }));
    const id = hex8(name);
    expect(() => parseVerifierKey(`${name}+${id}+${pubB64}`)).toThrow(expect.objectContaining({ code: 'KEY_BAD_NAME' }));
    expect(() => parsePrivateKey(`PRIVATE+KEY+${name}+${id}+${Buffer.concat([Buffer.from([1]), seed]).toString('base64')}`)).toThrow(
      expect.objectContaining({ code: 'KEY_BAD_NAME' }),
    );
    const sigLine = `— ${name} ${Buffer.concat([Buffer.from(id, 'hex'), Buffer.alloc(64, 1)]).toString('base64')}\n`;
    expect(() => parseNote(`origin\n1\n${Buffer.alloc(32).toString('base64')}\n\n${sigLine}`)).toThrow(
      expect.objectContaining({ code: 'NOTE_MALFORMED_SIGNATURE' }),
    );
    expect(eventDataProblem('KeyRegistered', { keyId: `${name}+${id}`, publicKey: `${name}+${id}+${pubB64}`, role: 'auditor' })).toMatchObject({
      code: 'LEDGER_EVENT_INVALID',
    });
    expect(eventDataProblem('KeyRevoked', { keyId: `${name}+${id}`, reason: 'x' })).toMatchObject({ code: 'LEDGER_EVENT_INVALID' });
    // An envelope whose signer names such a key is malformed (whatever its signature).
    const unsigned = {
      type: 'Note',
      stream: 'note-a',
      revision: 0,
      position: 1,
      id: '00000000-0000-4000-8000-000000000001',
      time: '2026-12-02T10:00:00.000Z',
      prev: '0'.repeat(64),
      signer: `${name}+${id}`,
    };
    const wire = Buffer.from(envelopeText(unsigned, '{"text":"x"}', `${'A'.repeat(86)}==`), 'utf8');
    expect(() => parseEnvelope(wire, { position: 1 })).toThrow(expect.objectContaining({ code: 'ENVELOPE_MALFORMED' }));
  });
});

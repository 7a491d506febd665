import { createHash } from 'node:crypto';
import nacl from 'tweetnacl';
import { nodeEd25519 } from '../crypto/ed25519';
import { naclEd25519 } from '../../../../tests/support/nacl-ed25519';
import {
  addSignatures,
  decodeBase64Strict,
  ed25519NoteSigner,
  ed25519NoteVerifier,
  keyNameProblem,
  MAX_NOTE_BYTES,
  noteKeyId,
  parseNote,
  signNote,
  verifyNote,
  type NoteSigner,
} from './note';

const seedA = Buffer.from('9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60', 'hex');
const seedB = Buffer.from('4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb', 'hex');
const pubA = nodeEd25519.publicKeyFromSeed(seedA);
const pubB = nodeEd25519.publicKeyFromSeed(seedB);
const signerA = ed25519NoteSigner('alice.example/key', seedA);
const signerB = ed25519NoteSigner('bob.example/key', seedB);
const verifierA = ed25519NoteVerifier('alice.example/key', pubA);
const verifierB = ed25519NoteVerifier('bob.example/key', pubB, naclEd25519);
const code = (c: string) => expect.objectContaining({ code: c });
const body = 'hello\nworld\n';

describe('signed-note: signing and round trip', () => {
  it('formats text, blank line, one "— name base64(keyid || sig)" line per signer', () => {
    const note = signNote(body, [signerA, signerB]);
    const lines = note.split('\n');
    expect(lines.slice(0, 3)).toEqual(['hello', 'world', '']);
    expect(lines[3]).toMatch(/^\u2014 alice\.example\/key [A-Za-z0-9+/]{91}=$/);
    expect(lines[4]).toMatch(/^\u2014 bob\.example\/key [A-Za-z0-9+/]{91}=$/);
    expect(lines[5]).toBe('');
    const raw = Buffer.from((lines[3] as string).split(' ')[2] as string, 'base64');
    const id = createHash('sha256').update('alice.example/key\n\x01').update(pubA).digest().subarray(0, 4);
    expect(raw.subarray(0, 4).toString('hex')).toBe(id.toString('hex'));
    // The signature covers exactly the text bytes, final newline included, blank line excluded.
    expect(nacl.sign.detached.verify(Buffer.from(body), raw.subarray(4), pubA)).toBe(true);
  });

  it('round-trips and verifies with known keys, in note order', () => {
    const note = signNote(body, [signerA, signerB]);
    const parsed = parseNote(note);
    expect(parsed.body).toBe(body);
    expect(parsed.bodyBytes.toString()).toBe(body);
    expect(parsed.signatures.map((s) => s.name)).toEqual(['alice.example/key', 'bob.example/key']);
    expect(verifyNote(note, [verifierB, verifierA]).map((k) => k.name)).toEqual(['alice.example/key', 'bob.example/key']);
    expect(verifyNote(Buffer.from(note), [verifierB]).map((k) => k.keyIdHex)).toEqual([Buffer.from(verifierB.keyId).toString('hex')]);
    expect(verifyNote(parsed, [verifierA])).toHaveLength(1);
  });

  it('keeps empty lines inside the text (the text ends at the last blank line)', () => {
    const text = 'first\n\nsecond\n\n\nthird\n';
    const note = signNote(text, [signerA]);
    expect(parseNote(note).body).toBe(text);
    expect(verifyNote(note, [verifierA])).toHaveLength(1);
    // A text that itself ends with an empty line.
    const trailing = 'x\n\n';
    expect(parseNote(signNote(trailing, [signerA])).body).toBe(trailing);
  });

  it('handles non-ASCII text and names', () => {
    const text = 'ed è subito sera.\n— ein Gedicht\n';
    const s = ed25519NoteSigner('quasimodo.example/salvatore', seedA);
    const note = signNote(text, [s]);
    expect(parseNote(note).body).toBe(text);
    expect(verifyNote(note, [ed25519NoteVerifier('quasimodo.example/salvatore', pubA)])).toHaveLength(1);
  });

  it('adds signatures (e.g. cosignatures) to a signed note', () => {
    const note = addSignatures(signNote(body, [signerA]), [signerB]);
    expect(verifyNote(note, [verifierA, verifierB])).toHaveLength(2);
    expect(() => addSignatures(note, [signerA])).toThrow(code('NOTE_DUPLICATE_SIGNATURE'));
  });

  it('refuses to sign what it could not parse back', () => {
    expect(() => signNote('no newline', [signerA])).toThrow(code('NOTE_MISSING_FINAL_NEWLINE'));
    expect(() => signNote('', [signerA])).toThrow(code('NOTE_MISSING_FINAL_NEWLINE'));
    expect(() => signNote('tab\there\n', [signerA])).toThrow(code('NOTE_CONTROL_CHARACTER'));
    expect(() => signNote('cr\r\n', [signerA])).toThrow(code('NOTE_CONTROL_CHARACTER'));
    expect(() => signNote('lone \ud800\n', [signerA])).toThrow(code('NOTE_BAD_UTF8'));
    expect(() => signNote(body, [])).toThrow(code('NOTE_NO_SIGNATURES'));
    expect(() => signNote(body, [signerA, signerA])).toThrow(code('NOTE_DUPLICATE_SIGNATURE'));
    expect(() => signNote(body, [{ ...signerA, name: 'a b' }])).toThrow(code('NOTE_BAD_KEY_NAME'));
    expect(() => signNote(body, [{ ...signerA, keyId: Buffer.alloc(3) }])).toThrow(code('NOTE_BAD_KEY_ID'));
    expect(() => signNote(body, [{ ...signerA, sign: () => new Uint8Array(0) }])).toThrow(code('NOTE_BAD_SIGNATURE_LENGTH'));
    expect(() => signNote('x'.repeat(MAX_NOTE_BYTES) + '\n', [signerA])).toThrow(code('NOTE_TOO_LARGE'));
  });
});

describe('signed-note: verification rules', () => {
  const note = signNote(body, [signerA, signerB]);

  it('ignores signatures by unknown keys, even with a known name or a known id (but not both)', () => {
    const sameNameOtherKey = ed25519NoteVerifier('alice.example/key', pubB);
    expect(verifyNote(note, [sameNameOtherKey])).toEqual([]);
    const sameIdOtherName: typeof verifierA = { ...verifierA, name: 'mallory.example/key' };
    expect(verifyNote(note, [sameIdOtherName])).toEqual([]);
    expect(verifyNote(note, [])).toEqual([]);
  });

  it('rejects the whole note when a known key signature is wrong', () => {
    const forged = signNote('goodbye\n', [signerA]);
    const sigLine = forged.split('\n')[2] as string;
    const tampered = `${body}\n${sigLine}\n`;
    expect(() => verifyNote(tampered, [verifierA])).toThrow(expect.objectContaining({ code: 'NOTE_BAD_SIGNATURE', kind: 'integrity' }));
    // The text changed after signing.
    expect(() => verifyNote(note.replace('hello', 'jello'), [verifierA])).toThrow(code('NOTE_BAD_SIGNATURE'));
    // One good known signature does not excuse a bad known one.
    const bobElsewhere = signNote('goodbye\n', [signerB]).split('\n')[2] as string;
    const mixed = `${body}\n${note.split('\n')[3]}\n${bobElsewhere}\n`;
    expect(verifyNote(mixed, [verifierA]).map((k) => k.name)).toEqual(['alice.example/key']);
    expect(() => verifyNote(mixed, [verifierA, verifierB])).toThrow(code('NOTE_BAD_SIGNATURE'));
  });

  it('treats a verifier that throws as a failed signature', () => {
    const throwing = {
      ...verifierA,
      verify: (): boolean => {
        throw new Error('boom');
      },
    };
    expect(() => verifyNote(note, [throwing])).toThrow(code('NOTE_BAD_SIGNATURE'));
  });

  it('refuses ambiguous verifier sets', () => {
    expect(() => verifyNote(note, [verifierA, verifierA])).toThrow(code('NOTE_DUPLICATE_VERIFIER'));
    expect(() => verifyNote(note, [{ ...verifierA, keyId: Buffer.alloc(5) }])).toThrow(code('NOTE_BAD_KEY_ID'));
  });

  it('refuses a verifier for a small-order public key', () => {
    expect(() => ed25519NoteVerifier('x', Buffer.alloc(32))).toThrow(code('NOTE_BAD_PUBLIC_KEY'));
  });

  it('ignores unknown signature types of any length', () => {
    const pq: NoteSigner = { name: 'pq.example/key', keyId: Buffer.from([1, 2, 3, 4]), sign: () => Buffer.alloc(2420, 7) };
    const withPq = signNote(body, [pq, signerA]);
    expect(parseNote(withPq).signatures[0]?.signature.byteLength).toBe(2420);
    expect(verifyNote(withPq, [verifierA]).map((k) => k.name)).toEqual(['alice.example/key']);
  });
});

describe('signed-note: strict parsing', () => {
  const good = signNote(body, [signerA]);
  const sigLine = good.split('\n')[3] as string;
  const sigB64 = sigLine.split(' ')[2] as string;

  it.each<[string, string | Uint8Array, string]>([
    ['no blank line', `${body}${sigLine}\n`, 'NOTE_MISSING_BLANK_LINE'],
    ['no signatures', `${body}\n`, 'NOTE_NO_SIGNATURES'],
    ['blank line after the signatures', `${good}\n`, 'NOTE_NO_SIGNATURES'],
    ['no final newline', good.slice(0, -1), 'NOTE_MISSING_FINAL_NEWLINE'],
    ['hyphen instead of em dash', `${body}\n- alice.example/key ${sigB64}\n`, 'NOTE_MALFORMED_SIGNATURE'],
    ['en dash instead of em dash', `${body}\n\u2013 alice.example/key ${sigB64}\n`, 'NOTE_MALFORMED_SIGNATURE'],
    ['no space after the dash', `${body}\n\u2014alice.example/key ${sigB64}\n`, 'NOTE_MALFORMED_SIGNATURE'],
    ['no signature after the name', `${body}\n\u2014 alice.example/key\n`, 'NOTE_MALFORMED_SIGNATURE'],
    ['two spaces before the signature', `${body}\n\u2014 alice.example/key  ${sigB64}\n`, 'NOTE_MALFORMED_SIGNATURE'],
    ['empty name', `${body}\n\u2014  ${sigB64}\n`, 'NOTE_MALFORMED_SIGNATURE'],
    ['name with a plus', `${body}\n\u2014 alice+key ${sigB64}\n`, 'NOTE_MALFORMED_SIGNATURE'],
    ['trailing space', `${body}\n${sigLine} \n`, 'NOTE_MALFORMED_SIGNATURE'],
    ['bad base64', `${body}\n\u2014 alice.example/key ${sigB64.slice(1)}\n`, 'NOTE_MALFORMED_SIGNATURE'],
    ['url-safe base64', `${body}\n\u2014 alice.example/key ${Buffer.from(sigB64, 'base64').toString('base64url')}==\n`, 'NOTE_MALFORMED_SIGNATURE'],
    [
      'non-canonical base64 padding bits',
      `${body}\n\u2014 alice.example/key ${sigB64.slice(0, -2)}${String.fromCharCode(sigB64.charCodeAt(sigB64.length - 2) + 1)}=\n`,
      'NOTE_MALFORMED_SIGNATURE',
    ],
    ['signature shorter than 5 bytes', `${body}\n\u2014 alice.example/key AQIDBA==\n`, 'NOTE_MALFORMED_SIGNATURE'],
    ['duplicate signature line', `${good}${sigLine}\n`, 'NOTE_DUPLICATE_SIGNATURE'],
    ['carriage returns', good.replace(/\n/g, '\r\n'), 'NOTE_CONTROL_CHARACTER'],
    ['a NUL in the text', `hel\u0000lo\n\n${sigLine}\n`, 'NOTE_CONTROL_CHARACTER'],
    ['a tab in a signature line', `${body}\n\u2014 alice.example/key\t${sigB64}\n`, 'NOTE_CONTROL_CHARACTER'],
    ['invalid UTF-8 bytes', Buffer.concat([Buffer.from('he'), Buffer.from([0xc3, 0x28]), Buffer.from(`\n\n${sigLine}\n`)]), 'NOTE_BAD_UTF8'],
    ['an overlong UTF-8 encoding', Buffer.concat([Buffer.from([0xc0, 0xaf]), Buffer.from(`\n\n${sigLine}\n`)]), 'NOTE_BAD_UTF8'],
    ['a lone surrogate', `he\udc00llo\n\n${sigLine}\n`, 'NOTE_BAD_UTF8'],
    ['too large', `${'a'.repeat(MAX_NOTE_BYTES)}\n\n${sigLine}\n`, 'NOTE_TOO_LARGE'],
    ['too many signature lines', `${body}\n${Array.from({ length: 101 }, (_, i) => `\u2014 k${i} ${sigB64}\n`).join('')}`, 'NOTE_TOO_MANY_SIGNATURES'],
    ['too many text lines', `${'a\n'.repeat(70000)}\n${sigLine}\n`, 'NOTE_TOO_MANY_LINES'],
  ])('rejects %s', (_what, text, c) => {
    expect(() => parseNote(text)).toThrow(code(c));
  });

  it('takes a blank line between signature lines as the end of the text (the earlier lines become text)', () => {
    const parsed = parseNote(`${good}\n${sigLine}\n`);
    expect(parsed.body).toBe(`${body}\n${sigLine}\n`);
    expect(parsed.signatures).toHaveLength(1);
    expect(() => verifyNote(`${good}\n${sigLine}\n`, [verifierA])).toThrow(code('NOTE_BAD_SIGNATURE'));
  });

  it('names the offending line', () => {
    expect(() => parseNote(`${body}\n${sigLine}\n- x ${sigB64}\n`)).toThrow(expect.objectContaining({ message: expect.stringContaining('signature line 2') }));
    expect(() => parseNote(`a\nb\u0001\n\n${sigLine}\n`)).toThrow(expect.objectContaining({ message: expect.stringContaining('line 2') }));
  });

  it('accepts 100 signature lines (the spec asks for at least 16)', () => {
    const many = `${body}\n${Array.from({ length: 100 }, (_, i) => `\u2014 k${i} ${sigB64}\n`).join('')}`;
    expect(parseNote(many).signatures).toHaveLength(100);
  });
});

describe('key names, key ids and base64', () => {
  it('applies the key name rules', () => {
    expect(keyNameProblem('example.com/log42')).toBeNull();
    expect(keyNameProblem('oid/1.3.6.1.4.1.44363.47.1')).toBeNull();
    for (const bad of ['', 'a b', 'a+b', 'a\tb', 'a\u00a0b', 'a\u2003b', 'a\u3000b', 'a\u0085b', 'a\nb', 'x'.repeat(129), 'a\ud800']) {
      expect([bad, keyNameProblem(bad)]).toEqual([bad, expect.any(String)]);
    }
  });

  it('computes key ids per the spec', () => {
    const id = noteKeyId('PeterNeumann', 1, Buffer.from('1a5cd907143c384c41e830c5bce12aa8817ec5649aaabf2c31388b35b2d744d6', 'hex'));
    expect(id.toString('hex')).toBe('c74f20a3');
    expect(() => noteKeyId('a b', 1, pubA)).toThrow(code('NOTE_BAD_KEY_NAME'));
    expect(() => noteKeyId('a', 256, pubA)).toThrow(code('NOTE_BAD_KEY_TYPE'));
  });

  it('decodes only canonical, padded, standard base64', () => {
    expect(decodeBase64Strict('AQID')?.toString('hex')).toBe('010203');
    expect(decodeBase64Strict('AQ==')?.toString('hex')).toBe('01');
    expect(decodeBase64Strict('')?.length).toBe(0);
    for (const bad of ['AQ', 'AQ=', 'AR==', 'AQ==AQ==', 'A-_=', ' AQID', 'AQID\n', 'AQJ=']) expect([bad, decodeBase64Strict(bad)]).toEqual([bad, null]);
  });
});

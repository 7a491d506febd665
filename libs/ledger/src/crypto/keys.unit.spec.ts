import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { nodeEd25519 } from './ed25519';
import { naclEd25519 } from '../../../../tests/support/nacl-ed25519';
import {
  formatPrivateKey,
  formatVerifierKey,
  generateKeyPair,
  keyIdOf,
  noteSignerOf,
  noteVerifierOf,
  parsePrivateKey,
  parseVerifierKey,
  readPrivateKey,
  readPublicKey,
  ROLES,
  toSigningKey,
  writeKeyPair,
  type RandomBytes,
} from './keys';
import { signNote, verifyNote } from '../domain/note';

const seed1 = Buffer.from('9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60', 'hex');

/** A deterministic random source: 0x00, 0x01, 0x02, ... */
function counting(): RandomBytes {
  let next = 0;
  return (n) => Uint8Array.from({ length: n }, () => next++ & 0xff);
}

const code = (c: string) => expect.objectContaining({ code: c });

describe('key texts (C2SP signed-note / golang.org/x/mod/sumdb/note)', () => {
  // The example key of the Go note package documentation.
  const goSkey = 'PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz';
  const goVkey = 'PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW';

  it('reads the Go note package example keys and derives the same verifier key and signature', () => {
    const priv = parsePrivateKey(goSkey);
    expect(priv.name).toBe('PeterNeumann');
    expect(priv.keyIdHex).toBe('c74f20a3');
    expect(priv.signer).toBe('PeterNeumann+c74f20a3');
    expect(formatVerifierKey(priv.name, priv.publicKey)).toBe(goVkey);
    expect(formatPrivateKey(priv.name, priv.seed)).toBe(goSkey);
    const pub = parseVerifierKey(goVkey);
    expect(Buffer.from(pub.publicKey).equals(Buffer.from(priv.publicKey))).toBe(true);
    expect(pub.type).toBe(1);
    const text = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n";
    const note = signNote(text, [noteSignerOf(priv)]);
    expect(note).toBe(`${text}\n— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n`);
    expect(verifyNote(note, [noteVerifierOf(pub, naclEd25519)]).map((k) => k.name)).toEqual(['PeterNeumann']);
  });

  it('computes key ids as SHA-256(name || 0x0A || type || key)[:4]', () => {
    const pub = nodeEd25519.publicKeyFromSeed(seed1);
    const { createHash } = jest.requireActual<typeof import('node:crypto')>('node:crypto');
    const want = createHash('sha256').update('assay-judge-00000000\n\x01').update(pub).digest().subarray(0, 4);
    expect(keyIdOf('assay-judge-00000000', pub).toString('hex')).toBe(want.toString('hex'));
    const want4 = createHash('sha256').update('assay-judge-00000000\n\x04').update(pub).digest().subarray(0, 4);
    expect(keyIdOf('assay-judge-00000000', pub, 4).toString('hex')).toBe(want4.toString('hex'));
  });

  it('parses cosignature (type 0x04) verifier keys too', () => {
    const pub = nodeEd25519.publicKeyFromSeed(seed1);
    const k = parseVerifierKey(formatVerifierKey('auditor.example/w1', pub, 4));
    expect(k.type).toBe(4);
    expect(k.keyIdHex).toBe(keyIdOf('auditor.example/w1', pub, 4).toString('hex'));
    expect(() => noteVerifierOf(k)).toThrow(code('KEY_UNSUPPORTED_TYPE'));
  });

  const pub = nodeEd25519.publicKeyFromSeed(seed1);
  const good = formatVerifierKey('assay-judge-01020304', pub);
  const [gName, gId, gKey] = [good.split('+')[0] as string, good.split('+')[1] as string, good.slice(good.indexOf('+', good.indexOf('+') + 1) + 1)];
  const b64 = (bytes: number[] | Buffer): string => Buffer.from(bytes as number[]).toString('base64');
  const typed = (type: number, key: Uint8Array): string => b64(Buffer.concat([Buffer.from([type]), key]));
  const idFor = (name: string): string => keyIdOf(name, pub).toString('hex');

  it.each([
    ['empty', '', 'KEY_TEXT_MALFORMED'],
    ['no separators', 'abc', 'KEY_TEXT_MALFORMED'],
    ['one separator', `${gName}+${gId}`, 'KEY_TEXT_MALFORMED'],
    ['empty name', `+${gId}+${gKey}`, 'KEY_BAD_NAME'],
    ['name with a space', `a b+${gId}+${gKey}`, 'KEY_BAD_NAME'],
    ['name with a non-breaking space', `a\u00a0b+${gId}+${gKey}`, 'KEY_BAD_NAME'],
    ['uppercase key id', `${gName}+${gId.toUpperCase()}+${gKey}`, 'KEY_TEXT_MALFORMED'],
    ['short key id', `${gName}+${gId.slice(1)}+${gKey}`, 'KEY_TEXT_MALFORMED'],
    ['key id of another key', `${gName}+00000000+${gKey}`, 'KEY_ID_MISMATCH'],
    ['key id of another name', `other+${gId}+${gKey}`, 'KEY_ID_MISMATCH'],
    ['truncated base64', `${gName}+${gId}+${gKey.slice(0, -1)}`, 'KEY_TEXT_MALFORMED'],
    ['base64 with stray padding', `${gName}+${gId}+${gKey}====`, 'KEY_TEXT_MALFORMED'],
    ['base64 with whitespace', `${gName}+${gId}+${gKey.slice(0, 20)} ${gKey.slice(21)}`, 'KEY_TEXT_MALFORMED'],
    ['url-safe base64', `${gName}+${gId}+${gKey.replace(/\+/g, '-').replace(/\//g, '_')}`, 'KEY_TEXT_MALFORMED'],
    ['trailing newline', `${good}\n`, 'KEY_TEXT_MALFORMED'],
    ['unknown type', `${gName}+${gId}+${typed(2, pub)}`, 'KEY_UNSUPPORTED_TYPE'],
    ['short key', `${gName}+${gId}+${typed(1, pub.subarray(0, 31))}`, 'KEY_BAD_LENGTH'],
    ['long key', `${gName}+${gId}+${typed(1, Buffer.concat([pub, Buffer.alloc(1)]))}`, 'KEY_BAD_LENGTH'],
    ['small-order key', `z+${idFor('z')}+${typed(1, Buffer.alloc(32))}`, 'KEY_BAD_PUBLIC_KEY'],
    ['private key given', formatPrivateKey('x', seed1), 'KEY_NOT_PUBLIC'],
    ['too long', `${'n'.repeat(600)}+${gId}+${gKey}`, 'KEY_TEXT_MALFORMED'],
  ])('refuses a verifier key: %s', (_what, text, c) => {
    expect(() => parseVerifierKey(text)).toThrow(code(c));
  });

  const skey = formatPrivateKey('assay-runtime-0a0b0c0d', seed1);
  it.each([
    ['public key given', good, 'KEY_NOT_PRIVATE'],
    ['no prefix', skey.slice('PRIVATE+KEY+'.length), 'KEY_TEXT_MALFORMED'],
    ['lowercase prefix', skey.replace('PRIVATE+KEY', 'private+key'), 'KEY_TEXT_MALFORMED'],
    ['wrong key id', skey.replace(/\+[0-9a-f]{8}\+/, '+00000000+'), 'KEY_ID_MISMATCH'],
    ['wrong type', `PRIVATE+KEY+n+00000000+${typed(4, seed1)}`, 'KEY_UNSUPPORTED_TYPE'],
    ['short seed', `PRIVATE+KEY+n+00000000+${typed(1, seed1.subarray(1))}`, 'KEY_BAD_LENGTH'],
    ['garbage base64', 'PRIVATE+KEY+n+00000000+!!!!', 'KEY_TEXT_MALFORMED'],
    ['name with a plus', `PRIVATE+KEY+a+b+00000000+${typed(1, seed1)}`, 'KEY_TEXT_MALFORMED'],
  ])('refuses a private key: %s', (_what, text, c) => {
    expect(() => parsePrivateKey(text)).toThrow(code(c));
  });
});

describe('generateKeyPair', () => {
  it('names keys assay-<role>-<8 random hex> and derives everything from the injected randomness', () => {
    const a = generateKeyPair('judge', undefined, counting());
    expect(a.name).toBe('assay-judge-00010203');
    expect(Buffer.from(a.seed).toString('hex')).toBe(Buffer.from(Array.from({ length: 32 }, (_, i) => i + 4)).toString('hex'));
    expect(a.signer).toBe(`${a.name}+${a.keyIdHex}`);
    expect(a.signer).toMatch(/^[^\s+]{1,128}\+[0-9a-f]{8}$/);
    expect(parseVerifierKey(a.publicKeyText).signer).toBe(a.signer);
    expect(parsePrivateKey(a.privateKeyText).signer).toBe(a.signer);
    const b = generateKeyPair('judge', undefined, counting());
    expect(b.publicKeyText).toBe(a.publicKeyText);
    expect(generateKeyPair('judge').name).toMatch(/^assay-judge-[0-9a-f]{8}$/);
  });

  it('accepts every role and a given name; refuses bad roles, names and random sources', () => {
    for (const role of ROLES) expect(generateKeyPair(role).role).toBe(role);
    expect(generateKeyPair('auditor', 'auditor.example/w1').name).toBe('auditor.example/w1');
    expect(() => generateKeyPair('root' as never)).toThrow(code('KEY_BAD_ROLE'));
    expect(() => generateKeyPair('judge', 'has space')).toThrow(code('NOTE_BAD_KEY_NAME'));
    expect(() => generateKeyPair('judge', 'a+b')).toThrow(code('NOTE_BAD_KEY_NAME'));
    expect(() => generateKeyPair('judge', undefined, () => new Uint8Array(3))).toThrow(code('KEY_BAD_RANDOM'));
  });

  it('gives a signing key that signs with node:crypto and verifies with tweetnacl', () => {
    const pair = generateKeyPair('controller');
    const key = toSigningKey(pair);
    expect(key).not.toHaveProperty('seed');
    const msg = Buffer.from('canonical envelope bytes');
    expect(naclEd25519.verify(key.publicKey, msg, key.sign(msg))).toBe(true);
    expect(key.signer).toBe(pair.signer);
    expect(key.publicKeyText).toBe(pair.publicKeyText);
  });
});

describe('key files', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'assay-keys-'));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('writes <name>.key (0600, JSON with the role) and <name>.pub (0644), and reads them back', () => {
    const pair = generateKeyPair('runtime', undefined, counting());
    const { privateKeyPath, publicKeyPath } = writeKeyPair(dir, pair);
    expect(privateKeyPath).toBe(path.join(dir, `${pair.name}.key`));
    expect(statSync(privateKeyPath).mode & 0o777).toBe(0o600);
    expect(statSync(publicKeyPath).mode & 0o777).toBe(0o644);
    expect(readFileSync(publicKeyPath, 'utf8')).toBe(`${pair.publicKeyText}\n`);
    expect(JSON.parse(readFileSync(privateKeyPath, 'utf8'))).toEqual({
      format: 'assay-signing-key/v1',
      role: 'runtime',
      name: pair.name,
      privateKey: pair.privateKeyText,
    });
    const back = readPrivateKey(privateKeyPath);
    expect(back.role).toBe('runtime');
    expect(back.signer).toBe(pair.signer);
    expect(Buffer.from(back.seed).equals(Buffer.from(pair.seed))).toBe(true);
    expect(readPublicKey(publicKeyPath).signer).toBe(pair.signer);
  });

  it('never overwrites an existing key', () => {
    const pair = generateKeyPair('judge');
    writeKeyPair(dir, pair);
    const before = readFileSync(path.join(dir, `${pair.name}.key`), 'utf8');
    expect(() => writeKeyPair(dir, { ...pair, role: 'controller' })).toThrow(expect.objectContaining({ code: 'KEY_FILE_EXISTS', kind: 'conflict' }));
    expect(readFileSync(path.join(dir, `${pair.name}.key`), 'utf8')).toBe(before);
  });

  it('does not leave a private key behind when the public file cannot be written', () => {
    const pair = generateKeyPair('judge');
    writeFileSync(path.join(dir, `${pair.name}.pub`), 'someone else\n');
    expect(() => writeKeyPair(dir, pair)).toThrow(code('KEY_FILE_EXISTS'));
    expect(() => statSync(path.join(dir, `${pair.name}.key`))).toThrow();
  });

  it('refuses key names that are not file names', () => {
    expect(() => writeKeyPair(dir, generateKeyPair('judge', 'example.com/log'))).toThrow(code('KEY_BAD_NAME'));
    expect(() => writeKeyPair(dir, generateKeyPair('judge', '..'))).toThrow(code('KEY_BAD_NAME'));
  });

  it.each([0o640, 0o604, 0o644, 0o660, 0o666, 0o700, 0o610])('refuses a private key with mode %s', (mode) => {
    const pair = generateKeyPair('judge');
    const { privateKeyPath } = writeKeyPair(dir, pair);
    chmodSync(privateKeyPath, mode);
    let err: unknown;
    try {
      readPrivateKey(privateKeyPath);
    } catch (e) {
      err = e;
    }
    const octal = mode.toString(8).padStart(4, '0');
    if ((mode & 0o077) === 0) {
      expect(err).toBeUndefined();
      return;
    }
    expect(err).toMatchObject({ code: 'KEY_FILE_UNSAFE_PERMISSIONS', kind: 'refused' });
    const message = (err as Error).message;
    expect(message).toContain(privateKeyPath);
    expect(message).toContain(octal);
    expect(message).toContain(`chmod 600 ${privateKeyPath}`);
  });

  it('accepts 0400', () => {
    const { privateKeyPath } = writeKeyPair(dir, generateKeyPair('judge'));
    chmodSync(privateKeyPath, 0o400);
    expect(readPrivateKey(privateKeyPath).role).toBe('judge');
  });

  it('refuses a symlink, a directory, a missing file', () => {
    const pair = generateKeyPair('judge');
    const { privateKeyPath } = writeKeyPair(dir, pair);
    const link = path.join(dir, 'link.key');
    symlinkSync(privateKeyPath, link);
    expect(() => readPrivateKey(link)).toThrow(expect.objectContaining({ code: 'KEY_FILE_SYMLINK', kind: 'refused' }));
    mkdirSync(path.join(dir, 'd.key'));
    expect(() => readPrivateKey(path.join(dir, 'd.key'))).toThrow(code('KEY_FILE_NOT_REGULAR'));
    expect(() => readPrivateKey(path.join(dir, 'missing.key'))).toThrow(
      expect.objectContaining({ code: 'KEY_FILE_NOT_FOUND', kind: 'not_found', message: expect.stringContaining('missing.key') }),
    );
  });

  it('explains a public key given where a private one is expected, and the reverse', () => {
    const pair = generateKeyPair('judge');
    const { privateKeyPath, publicKeyPath } = writeKeyPair(dir, pair);
    expect(() => readPrivateKey(publicKeyPath)).toThrow(code('KEY_NOT_PRIVATE'));
    expect(() => readPublicKey(privateKeyPath)).toThrow(code('KEY_NOT_PUBLIC'));
  });

  const writePrivate = (name: string, content: string | Buffer): string => {
    const p = path.join(dir, name);
    writeFileSync(p, content, { mode: 0o600 });
    return p;
  };

  it.each([
    ['garbage', 'hello world\n', 'KEY_FILE_MALFORMED'],
    ['bad JSON', '{"format":', 'KEY_FILE_MALFORMED'],
    ['a JSON array', '[1]', 'KEY_FILE_MALFORMED'],
    ['not UTF-8', Buffer.from([0x7b, 0xff, 0xfe, 0x7d]), 'KEY_FILE_MALFORMED'],
    ['too large', `{"x":"${'a'.repeat(5000)}"}`, 'KEY_FILE_MALFORMED'],
    ['empty', '', 'KEY_FILE_MALFORMED'],
    ['a bare private key text', `${formatPrivateKey('n', seed1)}\n`, 'KEY_FILE_MALFORMED'],
    [
      'an extra field',
      JSON.stringify({ format: 'assay-signing-key/v1', role: 'judge', name: 'n', privateKey: formatPrivateKey('n', seed1), x: 1 }),
      'KEY_FILE_MALFORMED',
    ],
    ['a missing role', JSON.stringify({ format: 'assay-signing-key/v1', name: 'n', privateKey: formatPrivateKey('n', seed1) }), 'KEY_FILE_MALFORMED'],
    [
      'an unknown role',
      JSON.stringify({ format: 'assay-signing-key/v1', role: 'root', name: 'n', privateKey: formatPrivateKey('n', seed1) }),
      'KEY_FILE_MALFORMED',
    ],
    ['a wrong format', JSON.stringify({ format: 'v2', role: 'judge', name: 'n', privateKey: formatPrivateKey('n', seed1) }), 'KEY_FILE_MALFORMED'],
    [
      'a name that differs from the key',
      JSON.stringify({ format: 'assay-signing-key/v1', role: 'judge', name: 'm', privateKey: formatPrivateKey('n', seed1) }),
      'KEY_FILE_MALFORMED',
    ],
    [
      'a tampered key id',
      JSON.stringify({
        format: 'assay-signing-key/v1',
        role: 'judge',
        name: 'n',
        privateKey: formatPrivateKey('n', seed1).replace(/\+[0-9a-f]{8}\+/, '+00000000+'),
      }),
      'KEY_ID_MISMATCH',
    ],
  ])('refuses a private key file holding %s', (_what, content, c) => {
    const p = writePrivate('k.key', content);
    expect(() => readPrivateKey(p)).toThrow(expect.objectContaining({ code: c, message: expect.stringContaining(p) }));
  });
});

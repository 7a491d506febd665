import nacl from 'tweetnacl';
import { nodeEd25519 } from '../crypto/ed25519';
import { naclEd25519 } from '../../../../tests/support/nacl-ed25519';
import { formatCheckpointBody, openCheckpoint, parseCheckpointBody, signCheckpoint } from './checkpoint';
import { leafHash, nodeHash } from './merkle';
import { ed25519NoteSigner, ed25519NoteVerifier, parseNote } from './note';

const code = (c: string) => expect.objectContaining({ code: c });
const root = Buffer.from('CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=', 'base64');

// RFC 8032 section 7.1 TEST 1 seed: Ed25519 is deterministic, so the signed checkpoint below is a fixed text.
const SEED_TEST1 = Buffer.from('9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60', 'hex');
const KEY_NAME = 'assay-controller-9d61b19d';

describe('tlog-checkpoint body', () => {
  it('formats origin, decimal size and base64 root, each on its own line', () => {
    expect(formatCheckpointBody({ origin: 'example.com/behind-the-sofa', treeSize: 20852163, rootHash: root })).toBe(
      'example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n',
    );
    expect(formatCheckpointBody({ origin: 'o', treeSize: 0, rootHash: root })).toBe(`o\n0\n${root.toString('base64')}\n`);
    expect(formatCheckpointBody({ origin: 'o', treeSize: 1, rootHash: root, extensions: ['ext one', 'ext two'] })).toBe(
      `o\n1\n${root.toString('base64')}\next one\next two\n`,
    );
  });

  it('round-trips', () => {
    const text = formatCheckpointBody({ origin: 'assay.example/ledger', treeSize: 2 ** 53 - 1, rootHash: root, extensions: ['x'] });
    const cp = parseCheckpointBody(text);
    expect(cp.origin).toBe('assay.example/ledger');
    expect(cp.treeSize).toBe(2 ** 53 - 1);
    expect(Buffer.from(cp.rootHash).equals(root)).toBe(true);
    expect(cp.extensions).toEqual(['x']);
    expect(parseCheckpointBody('the spec example\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n').treeSize).toBe(20852163);
  });

  const r = root.toString('base64');
  it.each<[string, string, string]>([
    ['no final newline', `o\n1\n${r}`, 'CHECKPOINT_MALFORMED'],
    ['two lines', `o\n1\n`, 'CHECKPOINT_MALFORMED'],
    ['empty text', '', 'CHECKPOINT_MALFORMED'],
    ['empty origin', `\n1\n${r}\n`, 'CHECKPOINT_BAD_ORIGIN'],
    ['origin with a control character', `o\u0007\n1\n${r}\n`, 'CHECKPOINT_BAD_ORIGIN'],
    ['origin too long', `${'o'.repeat(1025)}\n1\n${r}\n`, 'CHECKPOINT_BAD_ORIGIN'],
    ['leading zero', `o\n01\n${r}\n`, 'CHECKPOINT_BAD_TREE_SIZE'],
    ['negative size', `o\n-1\n${r}\n`, 'CHECKPOINT_BAD_TREE_SIZE'],
    ['plus sign', `o\n+1\n${r}\n`, 'CHECKPOINT_BAD_TREE_SIZE'],
    ['hex size', `o\n0x10\n${r}\n`, 'CHECKPOINT_BAD_TREE_SIZE'],
    ['exponent', `o\n1e3\n${r}\n`, 'CHECKPOINT_BAD_TREE_SIZE'],
    ['space in size', `o\n 1\n${r}\n`, 'CHECKPOINT_BAD_TREE_SIZE'],
    ['empty size', `o\n\n${r}\n`, 'CHECKPOINT_BAD_TREE_SIZE'],
    ['size beyond 2^53 - 1', `o\n9007199254740992\n${r}\n`, 'CHECKPOINT_BAD_TREE_SIZE'],
    ['uint64 max', `o\n18446744073709551615\n${r}\n`, 'CHECKPOINT_BAD_TREE_SIZE'],
    ['root of 31 bytes', `o\n1\n${root.subarray(1).toString('base64')}\n`, 'CHECKPOINT_BAD_ROOT_HASH'],
    ['root of 33 bytes', `o\n1\n${Buffer.concat([root, Buffer.alloc(1)]).toString('base64')}\n`, 'CHECKPOINT_BAD_ROOT_HASH'],
    ['root without padding', `o\n1\n${r.replace('=', '')}\n`, 'CHECKPOINT_BAD_ROOT_HASH'],
    ['root in base64url', `o\n1\n${root.toString('base64url')}=\n`, 'CHECKPOINT_BAD_ROOT_HASH'],
    ['root in hex', `o\n1\n${root.toString('hex')}\n`, 'CHECKPOINT_BAD_ROOT_HASH'],
    ['root with non-canonical last character', `o\n1\n${r.slice(0, 42)}J=\n`, 'CHECKPOINT_BAD_ROOT_HASH'],
    ['empty extension line', `o\n1\n${r}\n\n`, 'CHECKPOINT_BAD_EXTENSION'],
    ['empty line between extensions', `o\n1\n${r}\na\n\nb\n`, 'CHECKPOINT_BAD_EXTENSION'],
    ['carriage return', `o\r\n1\n${r}\n`, 'CHECKPOINT_BAD_ORIGIN'],
    ['too many extensions', `o\n1\n${r}\n${'e\n'.repeat(65)}`, 'CHECKPOINT_TOO_MANY_EXTENSIONS'],
    ['too large', `o\n1\n${r}\n${'e'.repeat(70000)}\n`, 'CHECKPOINT_TOO_LARGE'],
  ])('rejects %s', (_what, text, c) => {
    expect(() => parseCheckpointBody(text)).toThrow(code(c));
  });

  it('names the bad line', () => {
    expect(() => parseCheckpointBody(`o\n1\n${r}\nok\n\n`)).toThrow(expect.objectContaining({ message: expect.stringContaining('line 5') }));
  });

  it('refuses to format a bad checkpoint', () => {
    expect(() => formatCheckpointBody({ origin: '', treeSize: 1, rootHash: root })).toThrow(code('CHECKPOINT_BAD_ORIGIN'));
    expect(() => formatCheckpointBody({ origin: 'a\nb', treeSize: 1, rootHash: root })).toThrow(code('CHECKPOINT_BAD_ORIGIN'));
    expect(() => formatCheckpointBody({ origin: 'o', treeSize: -1, rootHash: root })).toThrow(code('CHECKPOINT_BAD_TREE_SIZE'));
    expect(() => formatCheckpointBody({ origin: 'o', treeSize: 1.5, rootHash: root })).toThrow(code('CHECKPOINT_BAD_TREE_SIZE'));
    expect(() => formatCheckpointBody({ origin: 'o', treeSize: 2 ** 53, rootHash: root })).toThrow(code('CHECKPOINT_BAD_TREE_SIZE'));
    expect(() => formatCheckpointBody({ origin: 'o', treeSize: 1, rootHash: root.subarray(1) })).toThrow(code('CHECKPOINT_BAD_ROOT_HASH'));
    expect(() => formatCheckpointBody({ origin: 'o', treeSize: 1, rootHash: root, extensions: [''] })).toThrow(code('CHECKPOINT_BAD_EXTENSION'));
    expect(() => formatCheckpointBody({ origin: 'o', treeSize: 1, rootHash: root, extensions: ['a\nb'] })).toThrow(code('CHECKPOINT_BAD_EXTENSION'));
  });
});

describe('signed checkpoints', () => {
  // The root of the RFC 9162 tree over the three leaves "event 0", "event 1", "event 2".
  const leaves = ['event 0', 'event 1', 'event 2'].map((s) => leafHash(Buffer.from(s)));
  const root3 = nodeHash(nodeHash(leaves[0] as Buffer, leaves[1] as Buffer), leaves[2] as Buffer);
  const KNOWN_NOTE =
    'assay.example/ledger\n' +
    '3\n' +
    'cuDRdZjUDBQ/FOv7BeLFxN3Wvr8WXzVpRDrEaViH0wI=\n' +
    '\n' +
    '\u2014 assay-controller-9d61b19d pPojn7SpE1PGzGyQqO3zTxLvtT5cNZah6oVmsuRu8mU3Q1JHS/hM3cJhqECkmcIGDsGsvKxEZ6rFgyktyD/Jie+u5wg=\n';

  it('known answer: a fixed checkpoint signed with the RFC 8032 TEST 1 seed', () => {
    expect(root3.toString('base64')).toBe('cuDRdZjUDBQ/FOv7BeLFxN3Wvr8WXzVpRDrEaViH0wI=');
    for (const impl of [nodeEd25519, naclEd25519]) {
      const note = signCheckpoint({ origin: 'assay.example/ledger', treeSize: 3, rootHash: root3 }, [ed25519NoteSigner(KEY_NAME, SEED_TEST1, impl)]);
      expect(note).toBe(KNOWN_NOTE);
    }
    // Independently: the key id is SHA-256(name || 0x0A || 0x01 || pub)[:4] = a4fa239f, and the rest of the
    // signature line is the RFC 8032 signature over the three body lines.
    const raw = Buffer.from((KNOWN_NOTE.split('\n')[4] as string).split(' ')[2] as string, 'base64');
    expect(raw.subarray(0, 4).toString('hex')).toBe('a4fa239f');
    const pub = Buffer.from('d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a', 'hex');
    expect(nacl.sign.detached.verify(Buffer.from(KNOWN_NOTE.slice(0, KNOWN_NOTE.indexOf('\n\n') + 1)), raw.subarray(4), pub)).toBe(true);
  });

  it('opens a signed checkpoint: parse, verify against known keys, parse the body', () => {
    const pub = nodeEd25519.publicKeyFromSeed(SEED_TEST1);
    const { checkpoint, signedBy, body } = openCheckpoint(KNOWN_NOTE, [ed25519NoteVerifier(KEY_NAME, pub)]);
    expect(checkpoint.treeSize).toBe(3);
    expect(checkpoint.origin).toBe('assay.example/ledger');
    expect(Buffer.from(checkpoint.rootHash).equals(root3)).toBe(true);
    expect(signedBy.map((k) => k.keyIdHex)).toEqual(['a4fa239f']);
    expect(body).toBe(parseNote(KNOWN_NOTE).body);
  });

  it('refuses a checkpoint no known key signed, or one whose numbers were changed', () => {
    const pub = nodeEd25519.publicKeyFromSeed(SEED_TEST1);
    const other = ed25519NoteVerifier('someone-else', pub);
    expect(() => openCheckpoint(KNOWN_NOTE, [other])).toThrow(expect.objectContaining({ code: 'CHECKPOINT_NOT_SIGNED', kind: 'integrity' }));
    expect(() => openCheckpoint(KNOWN_NOTE.replace('\n3\n', '\n4\n'), [ed25519NoteVerifier(KEY_NAME, pub)])).toThrow(code('NOTE_BAD_SIGNATURE'));
    expect(() => openCheckpoint(KNOWN_NOTE.replace('\n3\n', '\n03\n'), [ed25519NoteVerifier(KEY_NAME, pub)])).toThrow(code('CHECKPOINT_BAD_TREE_SIZE'));
  });
});

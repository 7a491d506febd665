import { createPublicKey, randomBytes, verify as rawNodeVerify } from 'node:crypto';
import nacl from 'tweetnacl';
import { ed25519Problem, ed25519PublicKeyProblem, nodeEd25519, type Ed25519 } from './ed25519';
import { naclEd25519 } from '../../../../tests/support/nacl-ed25519';

const h = (s: string): Buffer => Buffer.from(s, 'hex');
const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');
const IMPLS: Ed25519[] = [nodeEd25519, naclEd25519];

// RFC 8032 section 7.1.
const RFC8032 = [
  {
    name: 'TEST 1',
    seed: '9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60',
    pub: 'd75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a',
    msg: '',
    sig: 'e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b',
  },
  {
    name: 'TEST 2',
    seed: '4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb',
    pub: '3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c',
    msg: '72',
    sig: '92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00',
  },
  {
    name: 'TEST 3',
    seed: 'c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7',
    pub: 'fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025',
    msg: 'af82',
    sig: '6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a',
  },
  {
    name: 'TEST SHA(abc)',
    seed: '833fe62409237b9d62ec77587520911e9a759cec1d19755b7da901b96dca3d42',
    pub: 'ec172b93ad5e563bf4932c70e1245034c35467ef2efd4d64ebf819683467e2bf',
    msg: 'ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f',
    sig: 'dc2a4459e7369633a52b1bf277839a00201009a3efbf3ecb69bea2186c26b58909351fc9ac90b3ecfdfbc7c66431e0303dca179c138ac17ad9bef1177331a704',
  },
];

describe.each(IMPLS.map((i) => [i.name, i] as const))('RFC 8032 7.1 vectors with %s', (_name, impl) => {
  it.each(RFC8032.map((v) => [v.name, v] as const))('%s', (_n, v) => {
    expect(hex(impl.publicKeyFromSeed(h(v.seed)))).toBe(v.pub);
    expect(hex(impl.sign(h(v.seed), h(v.msg)))).toBe(v.sig);
    expect(impl.verify(h(v.pub), h(v.msg), h(v.sig))).toBe(true);
    expect(impl.verify(h(v.pub), Buffer.concat([h(v.msg), Buffer.from([0])]), h(v.sig))).toBe(false);
  });

  it('refuses seeds of the wrong length with a coded error', () => {
    expect(() => impl.sign(Buffer.alloc(31), Buffer.alloc(0))).toThrow(expect.objectContaining({ code: 'ED25519_BAD_SEED' }));
    expect(() => impl.publicKeyFromSeed(Buffer.alloc(33))).toThrow(expect.objectContaining({ code: 'ED25519_BAD_SEED' }));
  });
});

describe('cross-verification', () => {
  it('signatures made by each implementation verify with the other, over random messages', () => {
    // tweetnacl is slow (milliseconds per operation, more under jest): a dozen messages of varied length.
    for (let i = 0; i < 12; i++) {
      const seed = randomBytes(32);
      const msg = randomBytes(i * 37);
      const pubNode = nodeEd25519.publicKeyFromSeed(seed);
      const pubNacl = naclEd25519.publicKeyFromSeed(seed);
      expect(hex(pubNode)).toBe(hex(pubNacl));
      const sNode = nodeEd25519.sign(seed, msg);
      const sNacl = naclEd25519.sign(seed, msg);
      expect(hex(sNode)).toBe(hex(sNacl)); // deterministic
      expect(naclEd25519.verify(pubNode, msg, sNode)).toBe(true);
      expect(nodeEd25519.verify(pubNacl, msg, sNacl)).toBe(true);
      const other = Buffer.from(msg);
      if (other.length > 0) {
        other[0] = (other[0] as number) ^ 0x80;
        expect(nodeEd25519.verify(pubNode, other, sNode)).toBe(false);
        expect(naclEd25519.verify(pubNode, other, sNode)).toBe(false);
      }
    }
  });

  it('repeated verification with one key reuses the cached key and stays correct', () => {
    const seed = randomBytes(32);
    const pub = nodeEd25519.publicKeyFromSeed(seed);
    for (let i = 0; i < 200; i++) {
      const msg = Buffer.from(`event ${i}`);
      expect(nodeEd25519.verify(pub, msg, nodeEd25519.sign(seed, msg))).toBe(true);
    }
  });
});

// ---- malformed signatures and keys --------------------------------------------------------------------------------

const L = 2n ** 252n + 27742317777372353535851937790883648493n;
const P = 2n ** 255n - 19n;

function le32(n: bigint): Buffer {
  const b = Buffer.alloc(32);
  for (let i = 0; i < 32; i++) b[i] = Number((n >> BigInt(8 * i)) & 0xffn);
  return b;
}

function fromLe(b: Uint8Array): bigint {
  let n = 0n;
  for (let i = b.length - 1; i >= 0; i--) n = (n << 8n) | BigInt(b[i] as number);
  return n;
}

function withS(sig: Uint8Array, s: bigint): Buffer {
  return Buffer.concat([Buffer.from(sig).subarray(0, 32), le32(s)]);
}

function flip(b: Uint8Array, byte: number, bit: number): Buffer {
  const c = Buffer.from(b);
  c[byte] = (c[byte] as number) ^ (1 << bit);
  return c;
}

// The eight points of order dividing 8 (their canonical encodings; the libsodium blocklist).
const SMALL_ORDER = [
  '0100000000000000000000000000000000000000000000000000000000000000', // identity
  'ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f', // (0, -1), order 2
  '0000000000000000000000000000000000000000000000000000000000000000', // order 4
  '0000000000000000000000000000000000000000000000000000000000000080', // order 4
  'c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a', // order 8
  'c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa', // order 8
  '26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05', // order 8
  '26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85', // order 8
];

describe('strict verification, identical in both implementations', () => {
  const v = RFC8032[2] as (typeof RFC8032)[number];
  const pub = h(v.pub);
  const msg = h(v.msg);
  const sig = h(v.sig);
  const S = fromLe(sig.subarray(32));

  it('S + L: tweetnacl alone accepts the malleated signature, both strict implementations reject it', () => {
    expect(nacl.sign.detached.verify(msg, withS(sig, S + L), pub)).toBe(true);
    expect(naclEd25519.verify(pub, msg, withS(sig, S + L))).toBe(false);
    expect(nodeEd25519.verify(pub, msg, withS(sig, S + L))).toBe(false);
  });

  it('small-order keys: the raw libraries accept a forged universal signature, both strict ones refuse', () => {
    // A = identity, R = identity, S = 0: [0]B = R + [k]A holds for every message.
    const A = h(SMALL_ORDER[0] as string);
    const forged = Buffer.concat([h(SMALL_ORDER[0] as string), Buffer.alloc(32)]);
    const m = Buffer.from('anything at all');
    const key = createPublicKey({ key: Buffer.concat([h('302a300506032b6570032100'), A]), format: 'der', type: 'spki' });
    expect(rawNodeVerify(null, m, key, forged)).toBe(true);
    expect(nacl.sign.detached.verify(m, forged, A)).toBe(true);
    expect(nodeEd25519.verify(A, m, forged)).toBe(false);
    expect(naclEd25519.verify(A, m, forged)).toBe(false);
  });

  it('classifies public keys', () => {
    expect(ed25519PublicKeyProblem(pub)).toBeNull();
    for (const t of RFC8032) expect(ed25519PublicKeyProblem(h(t.pub))).toBeNull();
    for (const s of SMALL_ORDER) expect([s, ed25519PublicKeyProblem(h(s))]).toEqual([s, 'public key is a small-order point']);
    expect(ed25519PublicKeyProblem(le32(P))).toBe('public key is not a canonical encoding'); // y = p (= 0)
    expect(ed25519PublicKeyProblem(le32(P + 1n))).toBe('public key is not a canonical encoding'); // y = p + 1 (= 1)
    expect(ed25519PublicKeyProblem(le32(2n ** 255n - 1n))).toBe('public key is not a canonical encoding');
    // y = 1, x = 0 with the sign bit set: x = 0 cannot be negative (RFC 8032 5.1.3 step 4).
    expect(ed25519PublicKeyProblem(h('0100000000000000000000000000000000000000000000000000000000000080'))).toBe('public key is not a canonical encoding');
    // y = 2 is not on the curve.
    expect(ed25519PublicKeyProblem(le32(2n))).toBe('public key is not a point on the curve');
    expect(ed25519PublicKeyProblem(Buffer.alloc(31))).toBe('public key must be 32 bytes');
  });

  // [what, key, message, signature, expected pre-check verdict (undefined: whatever it is, as long as both reject)]
  const table: Array<[string, Uint8Array, Uint8Array, Uint8Array, string | null | undefined]> = [
    ['valid', pub, msg, sig, null],
    ['S = L exactly', pub, msg, withS(sig, L), 'signature S is not below the group order L'],
    ['S = S + L', pub, msg, withS(sig, S + L), 'signature S is not below the group order L'],
    ['S = 2^256 - 1', pub, msg, withS(sig, 2n ** 256n - 1n), 'signature S is not below the group order L'],
    ['S = L - 1 (well-formed, wrong)', pub, msg, withS(sig, L - 1n), null],
    ['bit flipped in R', pub, msg, flip(sig, 3, 2), null],
    ['top bit flipped in R (sign of x)', pub, msg, flip(sig, 31, 7), null],
    ['bit flipped in S', pub, msg, flip(sig, 40, 0), null],
    ['R with y = p (non-canonical)', pub, msg, Buffer.concat([le32(P), sig.subarray(32)]), 'signature R is not a canonical encoding'],
    ['R with y = p + 1 (non-canonical)', pub, msg, Buffer.concat([le32(P + 1n), sig.subarray(32)]), 'signature R is not a canonical encoding'],
    ['signature 63 bytes', pub, msg, sig.subarray(0, 63), 'signature must be 64 bytes'],
    ['signature 65 bytes', pub, msg, Buffer.concat([sig, Buffer.alloc(1)]), 'signature must be 64 bytes'],
    ['empty signature', pub, msg, Buffer.alloc(0), 'signature must be 64 bytes'],
    ['all-zero key', Buffer.alloc(32), msg, sig, 'public key is a small-order point'],
    ['identity key', h(SMALL_ORDER[0] as string), msg, sig, 'public key is a small-order point'],
    ['order-8 key', h(SMALL_ORDER[4] as string), msg, sig, 'public key is a small-order point'],
    ['key y = p', le32(P), msg, sig, 'public key is not a canonical encoding'],
    ['key y = p + 1 (identity, non-canonical)', le32(P + 1n), msg, sig, 'public key is not a canonical encoding'],
    ['key y = p + 3', le32(P + 3n), msg, sig, 'public key is not a canonical encoding'],
    ['key not on the curve', le32(2n), msg, sig, 'public key is not a point on the curve'],
    ['key 31 bytes', pub.subarray(0, 31), msg, sig, 'public key must be 32 bytes'],
    ['key 33 bytes', Buffer.concat([pub, Buffer.alloc(1)]), msg, sig, 'public key must be 32 bytes'],
    ['key bit flipped', flip(pub, 0, 0), msg, sig, undefined],
    ['other message', pub, Buffer.from('other'), sig, null],
  ];

  it.each(table)('%s', (_what, k, m, s, problem) => {
    const valid = _what === 'valid';
    if (problem !== undefined) expect(ed25519Problem(k, m, s)).toBe(problem);
    expect(nodeEd25519.verify(k, m, s)).toBe(valid);
    expect(naclEd25519.verify(k, m, s)).toBe(valid);
  });

  it('never throws on junk', () => {
    const junk = [undefined, null, 'abc', 12, {}, [], new Uint16Array(16)] as unknown as Uint8Array[];
    for (const impl of IMPLS)
      for (const j of junk) {
        expect(impl.verify(j, msg, sig)).toBe(false);
        expect(impl.verify(pub, j, sig)).toBe(false);
        expect(impl.verify(pub, msg, j)).toBe(false);
      }
  });

  it('agrees on bit flips spread over key and signature', () => {
    let disagreements = 0;
    let accepted = 0;
    for (let i = 0; i < 48; i++) {
      const k = i % 3 === 0 ? flip(pub, i % 32, i % 8) : pub;
      const s = i % 3 !== 0 ? flip(sig, (i * 29) % 64, (i * 3) % 8) : sig;
      const a = nodeEd25519.verify(k, msg, s);
      const b = naclEd25519.verify(k, msg, s);
      if (a !== b) disagreements++;
      if (a) accepted++;
    }
    expect(disagreements).toBe(0);
    expect(accepted).toBe(0);
  });
});

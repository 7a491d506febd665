/**
 * The addon's envelope scan (libs/ledger/native/ledger-kernels.c, scanEnvelopes) against the reference parser
 * (parseEnvelope), through the verifier's own per-event code (readEnvelopes, checkChunk): for valid envelopes of many
 * shapes and for tens of thousands of damaged ones, a chunk read and checked with the addon's kernels and with
 * node:crypto + parseEnvelope must give exactly the same: every field read from each envelope (data, signing bytes and
 * signature included), digests, problems (step, code, message), signers, key events. So the scan accepts nothing the
 * parser refuses, and reads the same from what both accept.
 */
import { createHash } from 'node:crypto';
import {
  nativeKernels,
  nativeKernelsStatus,
  nodeEd25519,
  wireBytes,
  signingBytes,
  type Envelope,
  type UnsignedEnvelope,
  type VerifyKernels,
} from '@assay/ledger';
import { DIGEST_STRIDE, checkChunk, jsKernels, packChunk, readEnvelopes, type ChunkInput } from '../../libs/ledger/src/application/verify/check-chunk';

function kernels(): VerifyKernels {
  const k = nativeKernels();
  if (!k?.scanEnvelopes) throw new Error(`the ledger kernels addon is not available: ${nativeKernelsStatus().why}`);
  return k;
}

const seed = createHash('sha256').update('envelope-scan test key').digest();
const publicKey = nodeEd25519.publicKeyFromSeed(seed);

function signed(u: UnsignedEnvelope): Buffer {
  const sig = Buffer.from(nodeEd25519.sign(seed, signingBytes(u))).toString('base64');
  return wireBytes({ ...u, sig } as Envelope);
}

const base: UnsignedEnvelope = {
  type: 'Note',
  data: { text: 'hello' },
  stream: 'note-run1',
  revision: 0,
  position: 0,
  id: '0b7e1c2a-3d4f-4a5b-8c6d-7e8f9a0b1c2d',
  time: '2026-12-02T21:00:00.000Z',
  prev: '0'.repeat(64),
  signer: 'operator+0a1b2c3d',
};

const task = { task: 't1', name: 'n', digest: 'sha256:aa', instructionDigest: 'sha256:bb', testsDigest: 'sha256:cc', environmentDigest: 'sha256:dd' };

/**
 * Envelopes of many shapes, all signed and canonical: the common one, and everything the scan must leave to the
 * parser. `valid`: the data also follows its type's schema, so checking finds no problem at all.
 */
const shapes: Array<[string, Partial<UnsignedEnvelope>, boolean]> = [
  ['a plain note', {}, true],
  [
    'nested data with braces, brackets, quotes and escapes in strings',
    {
      type: 'TaskRegistered',
      stream: 'task-r1.3:x_y-z',
      data: { ...task, metadata: { 'a}': 'j"}{]', b: 'loss\\n\t', c: [-1.5e-7, 1e21, 0, { d: [[], {}] }], e: null, f: true } },
    },
    true,
  ],
  ['a large position and revision', { position: 9007199254740991, revision: 4503599627370496, prev: 'ab'.repeat(32) }, true],
  ['a unicode note (not ASCII)', { data: { text: 'déjà vu ✓' } }, true],
  ['a note with a \\u escape (a control character)', { data: { text: 'bell \u0007' } }, true],
  ['integer-like names (JavaScript orders them first)', { type: 'TaskRegistered', data: { ...task, metadata: { '10': 1, '9': 2, a: 3 } } }, true],
  ['a signer with a quote and a backslash', { signer: 'a"b\\c+0a1b2c3d' }, true],
  ['a non-ASCII signer', { signer: 'opé+0a1b2c3d' }, true],
  ['midnight written as 24:00', { time: '2026-12-01T24:00:00.000Z' }, true],
  ['the first instant of year 0', { time: '0000-01-01T00:00:00.000Z' }, true],
  ['February 30th (which Date.parse accepts)', { time: '2026-02-30T12:00:00.000Z' }, true],
  ['a long stream id and type name', { stream: `c${'a'.repeat(31)}-${'Z'.repeat(128)}`, type: `T${'x'.repeat(63)}` }, false],
  ['data that breaks its schema', { data: { text: '' } }, false],
];

function chunkOf(envelopes: Buffer[], u: UnsignedEnvelope): ChunkInput {
  return packChunk(
    envelopes.map((bytes, i) => ({
      position: u.position + i,
      stream: u.stream,
      revision: u.revision,
      id: u.id,
      type: u.type,
      bytes,
      hash: createHash('sha256').update(bytes).digest(),
    })),
    [[u.signer, publicKey]],
  );
}

/** Everything the verifier takes from a checked chunk, and every field it read from each envelope. */
function outcome(input: ChunkInput, k: VerifyKernels) {
  const out = checkChunk(input, new Map(), k);
  const fields = readEnvelopes(input, k, new Uint8Array(DIGEST_STRIDE * input.positions.length)).map((e) =>
    'signing' in e
      ? {
          position: e.position,
          revision: e.revision,
          stream: e.stream,
          id: e.id,
          type: e.type,
          signer: e.signer,
          data: e.data,
          dataBytes: e.dataBytes,
          signing: e.signing.toString('hex'),
          signature: e.signature.toString('hex'),
        }
      : e,
  );
  return {
    digests: Buffer.from(out.digests).toString('hex'),
    signerIndex: [...out.signerIndex],
    signers: out.signers,
    problems: out.problems,
    unknownSigner: out.unknownSigner,
    dataEvents: out.dataEvents,
    fields,
  };
}

function copyOf(u: UnsignedEnvelope): Uint8Array {
  return Uint8Array.from(signed(u));
}

describe('the envelope scan of the ledger kernels addon', () => {
  it('recognises the common shape and leaves the rest to the parser, with the same result either way', () => {
    const k = kernels();
    for (const [name, change, valid] of shapes) {
      const u = { ...base, ...change };
      const input = chunkOf([signed(u)], u);
      const mine = outcome(input, k);
      if (valid) expect({ name, problems: mine.problems }).toEqual({ name, problems: [] });
      else expect({ name, problems: mine.problems.length }).toEqual({ name, problems: 1 });
      expect({ name, ...mine }).toEqual({ name, ...outcome(input, jsKernels) });
    }
    // The common shape really takes the scan (a recognised envelope): its signing bytes come from the addon.
    const bytes = signed(base);
    const offsets = new Uint32Array([0, bytes.length]);
    const meta = new Float64Array(10);
    expect(k.scanEnvelopes?.(bytes, offsets, meta, new Uint8Array(64), new Uint8Array(bytes.length), new Uint8Array(96), 96, 0)).toBe(1);
    expect(meta[0]).toBe(1);
    const leftToTheParser = ['a unicode note (not ASCII)', 'a signer with a quote and a backslash', 'a non-ASCII signer', 'midnight written as 24:00'];
    for (const [, change] of shapes.filter(([n]) => leftToTheParser.includes(n))) {
      const b = signed({ ...base, ...change });
      expect(
        k.scanEnvelopes?.(b, new Uint32Array([0, b.length]), new Float64Array(10), new Uint8Array(64), new Uint8Array(b.length), new Uint8Array(96), 96, 0),
      ).toBe(0);
    }
  });

  it('gives the same problems as the parser for every single-byte change, deletion and insertion of several envelopes', () => {
    const k = kernels();
    const replacements = [0x22, 0x5c, 0x7b, 0x7d, 0x5b, 0x5d, 0x2c, 0x3a, 0x20, 0x30, 0x39, 0x61, 0x41, 0x2b, 0x2d, 0x3d, 0x2e, 0x00, 0x7f, 0x80, 0xc3, 0xff];
    let cases = 0;
    for (const [, change] of [shapes[0], shapes[1], shapes[2], shapes[3], shapes[5], shapes[9]].map((x) => x as (typeof shapes)[number])) {
      const u = { ...base, ...change };
      const good = copyOf(u);
      const variants: Uint8Array[] = [];
      for (let at = 0; at < good.length; at++) {
        for (const r of replacements) {
          if (good[at] === r) continue;
          const v = Uint8Array.from(good);
          v[at] = r;
          variants.push(v);
        }
        variants.push(Uint8Array.from([...good.subarray(0, at), ...good.subarray(at + 1)]));
        variants.push(Uint8Array.from([...good.subarray(0, at), 0x20, ...good.subarray(at)]));
      }
      variants.push(good.subarray(0, good.length - 1), Uint8Array.from([...good, 0x20]), new Uint8Array(0));
      // Chunks of 64 damaged envelopes, each chunk checked both ways.
      for (let from = 0; from < variants.length; from += 64) {
        const input = chunkOf(
          variants.slice(from, from + 64).map((v) => Buffer.from(v)),
          u,
        );
        expect(outcome(input, k)).toEqual(outcome(input, jsKernels));
        cases += Math.min(64, variants.length - from);
      }
    }
    expect(cases).toBeGreaterThan(40_000);
  });

  it('draws the limits of every field where the parser does', () => {
    const k = kernels();
    const sig = Buffer.from(nodeEd25519.sign(seed, Buffer.from('x'))).toString('base64');
    const good: Record<string, string> = {
      data: '{"text":"x"}',
      id: base.id,
      position: '7',
      prev: 'f'.repeat(64),
      revision: '3',
      sig,
      signer: '"operator+0a1b2c3d"',
      stream: 'note-run1',
      time: base.time,
      type: 'Note',
    };
    const text = (f: Record<string, string>): string =>
      `{"data":${f.data},"id":"${f.id}","position":${f.position},"prev":"${f.prev}","revision":${f.revision},"sig":"${f.sig}","signer":${f.signer},"stream":"${f.stream}","time":"${f.time}","type":"${f.type}"}`;
    const hex8 = '0a1b2c3d';
    const values: Record<string, string[]> = {
      data: [
        '{}',
        '{ "text":"x"}',
        '{"text":"x"} ',
        '{"text":"x","text":"y"}',
        '{"text":"\\"}',
        '{"text":"}"}',
        '{"text":"a\\"b"}',
        '[]',
        '"x"',
        '{"text":"x"',
        '{"text":["x"]}',
        '{"text":1e400}',
      ],
      id: [base.id.toUpperCase(), base.id.slice(1), `${base.id}0`, base.id.replace(/-/g, '0'), base.id.replace('-', '0-').slice(0, 36), `g${base.id.slice(1)}`],
      position: ['0', '00', '01', '9007199254740991', '9007199254740992', '12345678901234567', '-1', '1.0', '1e3', '"7"', ''],
      prev: ['F'.repeat(64), 'f'.repeat(63), 'f'.repeat(65), `${'f'.repeat(63)}g`],
      revision: ['0', '00', '9007199254740991', '9007199254740992', '-0', '3.5'],
      sig: [
        sig.replace(/.==$/, 'B=='),
        sig.replace(/.==$/, 'A=='),
        sig.replace(/.==$/, 'Q=='),
        sig.replace(/.==$/, 'g=='),
        sig.replace(/.==$/, 'w=='),
        sig.slice(0, 86),
        `${sig.slice(0, 87)}`,
        `${sig}=`,
        sig.replace(/^./, '-'),
        sig.replace(/^./, '_'),
      ],
      signer: [
        `"a+${hex8}"`,
        `"+${hex8}"`,
        `"${'n'.repeat(128)}+${hex8}"`,
        `"${'n'.repeat(129)}+${hex8}"`,
        `"a+b+${hex8}"`,
        `"a+${hex8.toUpperCase()}"`,
        `"a+${hex8.slice(1)}"`,
        `"a+${hex8}0"`,
        `"a b+${hex8}"`,
        `"a\\tb+${hex8}"`,
        `"a~!#$%&'()*,-./:;<=>?@[]^_\`{|}+${hex8}"`,
        '7',
      ],
      stream: [
        `${'a'.repeat(32)}-x`,
        `${'a'.repeat(33)}-x`,
        `a-${'X'.repeat(128)}`,
        `a-${'X'.repeat(129)}`,
        '1a-x',
        'A-x',
        'a-.x',
        'a-x.y_z:w-v',
        'a-x/y',
        'a--x',
        'a-',
        '-x',
        'ab9-0',
      ],
      time: [
        '2026-00-01T00:00:00.000Z',
        '2026-12-01T00:00:00.000Z',
        '2026-13-01T00:00:00.000Z',
        '2026-01-00T00:00:00.000Z',
        '2026-01-31T00:00:00.000Z',
        '2026-01-32T00:00:00.000Z',
        '2026-01-01T23:59:59.999Z',
        '2026-01-01T24:00:00.000Z',
        '2026-01-01T24:00:00.001Z',
        '2026-01-01T00:60:00.000Z',
        '2026-01-01T00:00:60.000Z',
        '2026-01-01T00:00:00.000z',
        '2026-01-01 00:00:00.000Z',
        '2026-01-01T00:00:00Z',
        '+02026-01-01T00:00:00.000Z',
      ],
      type: [`N${'o'.repeat(63)}`, `N${'o'.repeat(64)}`, 'note', 'N', 'N0te9', 'No_te', '9Note'],
    };
    let cases = 0;
    for (const [field, list] of Object.entries(values)) {
      const bytes = list.map((v) => Buffer.from(text({ ...good, [field]: v }), 'utf8'));
      const input = packChunk(
        bytes.map((b, i) => ({
          position: 7 + i,
          stream: good.stream as string,
          revision: 3,
          id: base.id,
          type: 'Note',
          bytes: b,
          hash: createHash('sha256').update(b).digest(),
        })),
        [['operator+0a1b2c3d', publicKey]],
      );
      expect({ field, ...outcome(input, k) }).toEqual({ field, ...outcome(input, jsKernels) });
      cases += list.length;
    }
    expect(cases).toBeGreaterThan(90);
  });
});

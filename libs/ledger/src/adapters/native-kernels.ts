/**
 * The ledger kernels addon (libs/ledger/native/ledger-kernels.c): both SHA-256 digests of a whole chunk of envelopes,
 * the Merkle hash of a perfect subtree of leaf hashes, and a scan that recognises envelopes in the common canonical
 * layout and cuts their signing bytes and signature, each in one call per chunk, with the OpenSSL that Node carries.
 * An optimisation only: when it is not built (no C compiler or no OpenSSL headers next to Node's), when
 * `ASSAY_NATIVE_LEDGER=0`, or when it disagrees with node:crypto on a probe at load time, verification uses
 * node:crypto and parseEnvelope (`jsKernels`) and gets the same results. Ed25519 stays on node:crypto either way.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { jsKernels, type DigestAll, type ScanEnvelopes, type SubtreeRoot, type VerifyKernels } from '../domain/verify-kernels';

export const NATIVE_KERNELS_FILE = 'assay_ledger_kernels.node';
const FORMAT_VERSION = 1;

interface KernelsAddon {
  digestAll: DigestAll;
  subtreeRoot: SubtreeRoot;
  scanEnvelopes: ScanEnvelopes;
  readonly formatVersion: number;
}

function candidates(): string[] {
  return [
    join(__dirname, '..', '..', 'native', 'build', NATIVE_KERNELS_FILE),
    join(__dirname, '..', '..', '..', '..', '..', 'libs', 'ledger', 'native', 'build', NATIVE_KERNELS_FILE),
  ];
}

/**
 * Probes of awkward lengths (empty, around SHA-256's 55/56/64-byte block edges, several blocks), hashed both ways,
 * and subtree roots of 1, 2 and 8 of the resulting leaves.
 */
function agreesWithNodeCrypto(native: VerifyKernels): boolean {
  const lengths = [0, 1, 55, 56, 63, 64, 65, 119, 120, 600, 4099];
  const offsets = new Uint32Array(lengths.length + 1);
  for (let i = 0; i < lengths.length; i++) offsets[i + 1] = (offsets[i] as number) + (lengths[i] as number);
  const bytes = new Uint8Array(offsets[lengths.length] as number);
  for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 131 + 7) & 0xff;
  const stride = 80;
  const a = new Uint8Array(stride * lengths.length);
  const b = new Uint8Array(stride * lengths.length);
  native.digestAll(bytes, offsets, a, stride, 16);
  jsKernels.digestAll(bytes, offsets, b, stride, 16);
  if (!Buffer.from(a).equals(Buffer.from(b))) return false;
  return [1, 2, 8].every((count) => Buffer.from(native.subtreeRoot(a, stride, 48, count)).equals(Buffer.from(jsKernels.subtreeRoot(b, stride, 48, count))));
}

let loaded: { kernels: VerifyKernels | null; why: string } | null = null;

function load(): { kernels: VerifyKernels | null; why: string } {
  if (loaded) return loaded;
  if (process.env.ASSAY_NATIVE_LEDGER === '0') return (loaded = { kernels: null, why: 'disabled by ASSAY_NATIVE_LEDGER=0' });
  const file = candidates().find((f) => existsSync(f));
  if (!file) return (loaded = { kernels: null, why: `not built (${NATIVE_KERNELS_FILE} not found; run npm run build:native)` });
  try {
    const m = require(file) as KernelsAddon;
    if (m.formatVersion !== FORMAT_VERSION)
      return (loaded = { kernels: null, why: `${file} has format ${m.formatVersion}, expected ${FORMAT_VERSION}; rebuild it` });
    const kernels: VerifyKernels = { digestAll: m.digestAll, subtreeRoot: m.subtreeRoot, scanEnvelopes: m.scanEnvelopes };
    if (!agreesWithNodeCrypto(kernels)) return (loaded = { kernels: null, why: `${file} disagrees with node:crypto on a probe; not used` });
    return (loaded = { kernels, why: file });
  } catch (e) {
    return (loaded = { kernels: null, why: `${file} could not be loaded: ${(e as Error).message}` });
  }
}

/** The addon's kernels, or null (nativeKernelsStatus says why). Loaded once per thread. */
export function nativeKernels(): VerifyKernels | null {
  return load().kernels;
}

export function nativeKernelsStatus(): { active: boolean; why: string } {
  const l = load();
  return { active: l.kernels !== null, why: l.why };
}

/** What verification hashes with on this thread: the addon when it is usable, else node:crypto. */
export function bestKernels(): VerifyKernels {
  return nativeKernels() ?? jsKernels;
}

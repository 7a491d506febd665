/**
 * Ed25519 checks packed to cross to a worker thread (signature-batch.ts sends them, home/verify.worker.ts checks them):
 * the messages concatenated with offsets, keys and signatures at fixed strides, all transferable buffers.
 */
import { nodeEd25519 } from '../../crypto/ed25519';

export interface SignedItem {
  /** The signer's 32-byte Ed25519 public key. */
  readonly key: Uint8Array;
  /** The signed bytes. */
  readonly message: Uint8Array;
  readonly signature: Uint8Array;
}

/** Items packed for a worker: messages concatenated with offsets, keys and signatures at fixed strides. */
export interface SignatureBatch {
  messages: Uint8Array;
  offsets: Uint32Array;
  keys: Uint8Array;
  signatures: Uint8Array;
}

export function packSignatures(items: readonly SignedItem[]): SignatureBatch {
  let total = 0;
  for (const it of items) total += it.message.byteLength;
  const messages = new Uint8Array(total);
  const offsets = new Uint32Array(items.length + 1);
  const keys = new Uint8Array(items.length * 32);
  const signatures = new Uint8Array(items.length * 64);
  let at = 0;
  items.forEach((it, i) => {
    offsets[i] = at;
    messages.set(it.message, at);
    at += it.message.byteLength;
    // A key or signature of the wrong length cannot verify: it is packed as zeros, which fail the checks.
    if (it.key.byteLength === 32) keys.set(it.key, i * 32);
    if (it.signature.byteLength === 64) signatures.set(it.signature, i * 64);
  });
  offsets[items.length] = at;
  return { messages, offsets, keys, signatures };
}

/** The indexes (ascending) of the batch's items whose signature does not verify. */
export function badSignaturesIn(b: SignatureBatch): number[] {
  const bad: number[] = [];
  const keyArrays = new Map<string, Uint8Array>();
  const n = b.offsets.length - 1;
  for (let i = 0; i < n; i++) {
    const keyBytes = b.keys.subarray(i * 32, i * 32 + 32);
    // the same array for the same key, so the verifier's per-key cache applies
    const id = Buffer.from(keyBytes).toString('base64');
    let key = keyArrays.get(id);
    if (!key) keyArrays.set(id, (key = Uint8Array.from(keyBytes)));
    const message = b.messages.subarray(b.offsets[i] as number, b.offsets[i + 1] as number);
    if (!nodeEd25519.verify(key, message, b.signatures.subarray(i * 64, i * 64 + 64))) bad.push(i);
  }
  return bad;
}

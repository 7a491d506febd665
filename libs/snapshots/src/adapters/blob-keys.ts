// The pack store's in-memory keys: a blob's binary CID as a latin1 string (docs/snapshots-format.md, section 9).
import { CID } from 'multiformats/cid';
import { isFormatCid } from '../domain/format';
import { CID_BYTES } from './pack-index';

/** The binary CID of a raw chunk from its digest, as the index's latin1 key. */
export function rawKey(digests: Uint8Array, i: number): string {
  return `\x01\x55\x12\x20${Buffer.from(digests.buffer, digests.byteOffset + i * 32, 32).toString('latin1', 0, 32)}`;
}

export function keyOf(cid: CID): string {
  return Buffer.from(cid.bytes.buffer, cid.bytes.byteOffset, cid.bytes.byteLength).toString('latin1', 0, cid.bytes.byteLength);
}

export function cidOfKey(key: string): CID | null {
  if (key.length !== CID_BYTES) return null;
  try {
    const cid = CID.decode(Buffer.from(key, 'latin1'));
    return isFormatCid(cid) ? cid : null;
  } catch {
    return null;
  }
}

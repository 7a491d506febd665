/**
 * Names. A recorded name is exactly the name on disk, as a Unicode string that must round-trip through UTF-8.
 * Decisions (documented in docs/snapshots-format.md):
 * - a name that is not valid UTF-8 is refused (SNAPSHOT_NAME_NOT_UTF8), never replaced or escaped;
 * - names are not normalised (the bytes on disk are what a checkout recreates), but two names in one directory
 *   that are equal under Unicode NFC are refused (SNAPSHOT_NAME_COLLISION): they would collide on macOS and in
 *   any tool that normalises, and they look identical to a human;
 * - entries are ordered by the bytes of their UTF-8 names (which is Unicode code point order).
 */
export const MAX_NAME_BYTES = 255;

const encoder = new TextEncoder();
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const strictDecoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

export function utf8(s: string): Uint8Array {
  return encoder.encode(s);
}

export function compareNameBytes(a: Uint8Array, b: Uint8Array): number {
  return Buffer.compare(a, b);
}

const SURROGATE = /[\uD800-\uDFFF]/;

/**
 * Orders names by their UTF-8 bytes. UTF-16 code unit order (JavaScript's `<`) agrees with it except when a
 * surrogate pair is involved, so only those names are encoded.
 */
export function compareNames(a: string, b: string): number {
  if (!SURROGATE.test(a) && !SURROGATE.test(b)) return a < b ? -1 : a > b ? 1 : 0;
  return Buffer.compare(encoder.encode(a), encoder.encode(b));
}

/** Decodes a name read from disk; null if the bytes are not valid UTF-8. */
export function decodeUtf8Strict(bytes: Uint8Array): string | null {
  try {
    return strictDecoder.decode(bytes);
  } catch {
    return null;
  }
}

/** Shows bytes that may not be UTF-8: printable ASCII as is, everything else as \xNN. */
export function displayBytes(bytes: Uint8Array): string {
  let s = '';
  for (const b of bytes) s += b >= 0x20 && b < 0x7f && b !== 0x5c ? String.fromCharCode(b) : `\\x${b.toString(16).padStart(2, '0')}`;
  return s;
}

/** Why a name cannot be an entry name, or null if it can. */
export function validateEntryName(name: string): string | null {
  if (name.length === 0) return 'is empty';
  if (name === '.' || name === '..') return 'is a dot entry';
  if (name.includes('/')) return 'contains "/"';
  if (name.includes('\0')) return 'contains NUL';
  if (encoder.encode(name).length > MAX_NAME_BYTES) return `is longer than ${MAX_NAME_BYTES} bytes`;
  // Lone surrogates cannot be encoded as UTF-8; TextEncoder would silently replace them.
  if (LONE_SURROGATE.test(name)) return 'is not valid Unicode';
  return null;
}

/** The first pair of distinct names that are equal under NFC, or null. */
export function findNfcCollision(names: readonly string[]): [string, string] | null {
  const seen = new Map<string, string>();
  for (const n of names) {
    // Most names are ASCII, which NFC leaves alone; skip the normalisation cost for them.
    const key = /^[\x00-\x7f]*$/.test(n) ? n : n.normalize('NFC');
    const prev = seen.get(key);
    if (prev !== undefined && prev !== n) return [prev, n];
    seen.set(key, n);
  }
  return null;
}

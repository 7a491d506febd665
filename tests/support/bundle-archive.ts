/**
 * Result bundles as the tests take them apart and put them back together (docs/bundle-format.md, "The file"): the
 * entries of a ustar archive, the canonical archive of given entries, and a bundle fed in small chunks as a stream.
 */
import { TAR_BLOCK, TAR_END, tarHeader, tarPadding } from '@assay/containers';

export interface BundleEntry {
  name: string;
  content: Buffer;
}

/** The bundle's bytes in 4 KiB chunks, as verifyBundle reads a file. */
export async function* chunks(b: Buffer): AsyncGenerator<Uint8Array> {
  for (let i = 0; i < b.length; i += 4096) yield b.subarray(i, i + 4096);
}

/** The entries of a bundle (tests build altered bundles from them). */
export function entries(b: Buffer): BundleEntry[] {
  const out: BundleEntry[] = [];
  let at = 0;
  while (b[at] !== 0) {
    const name = b
      .subarray(at, at + 100)
      .toString('latin1')
      .replace(/\0.*$/s, '');
    const size = parseInt(b.subarray(at + 124, at + 135).toString('latin1'), 8);
    out.push({ name, content: Buffer.from(b.subarray(at + TAR_BLOCK, at + TAR_BLOCK + size)) });
    at += TAR_BLOCK + size + tarPadding(size).length;
  }
  return out;
}

/** The canonical archive of these entries, in this order. */
export function pack(parts: readonly BundleEntry[]): Buffer {
  return Buffer.concat([
    ...parts.flatMap((p) => [tarHeader({ path: p.name, type: 'file', mode: 0o644, size: p.content.length }), p.content, tarPadding(p.content.length)]),
    TAR_END,
  ]);
}

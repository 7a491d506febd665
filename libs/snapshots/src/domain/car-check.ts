/**
 * The checks of a CAR v1 file of snapshots, section by section, with no I/O: `assay snapshot import` feeds it from a
 * file, `assay verify` from the snapshots entry of a result bundle as it streams past. Every block is checked against
 * its CID as it arrives; at the end, every root must be a directory manifest among the blocks, every block a root
 * links (transitively) must be present, and no block may be unreachable. The CAR framing (varint lengths) is the
 * reader's: it hands over the header bytes and each section's bytes with their offsets.
 *
 * Memory: CIDs and links of every block, raw block sizes, and (with `keepNodes`) the bytes of the dag-cbor manifest
 * nodes, never the raw chunks: a 2 GB snapshot is checked in the memory of its manifests.
 */
import { CID } from 'multiformats/cid';
import * as dagCbor from '@ipld/dag-cbor';
import { CHUNK_SIZE, DAG_CBOR_CODE, MAX_NODE_BYTES, RAW_CODE, bytesEqual, decodeNode, isFormatCid, nodeLinks, sha256, type SnapshotNode } from './format';
import { snapshotError } from './snapshot.errors';

export const MAX_CAR_ROOTS = 1024;
export const MAX_CAR_HEADER_BYTES = 1 << 20;
export const MAX_CAR_SECTION_BYTES = MAX_NODE_BYTES + 64;

export function carMalformed(offset: number, why: string): Error {
  return snapshotError('SNAPSHOT_CAR_MALFORMED', `CAR file is malformed at byte ${offset}: ${why}`, { offset });
}

export function carTruncated(offset: number, why: string): Error {
  return snapshotError(
    'SNAPSHOT_CAR_TRUNCATED',
    `CAR file ends inside a section at byte ${offset} (${why}): it is truncated or has trailing bytes that are not a block`,
    { offset },
  );
}

export class CarCheck {
  roots: CID[] = [];
  readonly rawSizes = new Map<string, number>();
  /** dag-cbor node bytes by CID (only with keepNodes): a BlockGetter for verifySnapshot without the raw chunks. */
  readonly nodes = new Map<string, Uint8Array>();
  private readonly seen = new Map<string, { index: number; offset: number }>();
  private readonly links = new Map<string, string[]>();
  private readonly kinds = new Map<string, SnapshotNode['type']>();
  blocks = 0;
  bytes = 0;

  constructor(private readonly o: { keepNodes?: boolean } = {}) {}

  header(bytes: Uint8Array): CID[] {
    if (bytes.length === 0) throw carMalformed(0, 'empty header');
    let header: unknown;
    try {
      header = dagCbor.decode(bytes);
    } catch (e) {
      throw carMalformed(1, `the header is not DAG-CBOR (${(e as Error).message})`);
    }
    const h = header as { version?: unknown; roots?: unknown };
    if (typeof header !== 'object' || header === null || Object.keys(header).sort().join(',') !== 'roots,version') {
      throw carMalformed(1, 'the header must be exactly {version, roots}');
    }
    if (h.version !== 1) throw snapshotError('SNAPSHOT_CAR_UNSUPPORTED', `CAR version ${String(h.version)}; only version 1 is accepted`);
    if (!Array.isArray(h.roots) || h.roots.length === 0 || h.roots.length > MAX_CAR_ROOTS) {
      throw carMalformed(1, `the header must list 1 to ${MAX_CAR_ROOTS} roots`);
    }
    this.roots = h.roots.map((r) => {
      const c = CID.asCID(r);
      if (!c || !isFormatCid(c)) throw snapshotError('SNAPSHOT_CAR_UNSUPPORTED', `a root in the CAR header is not a snapshot CID: ${String(r)}`);
      return c;
    });
    return this.roots;
  }

  /** One section (CID then block bytes) starting at `offset` of the file: checked and recorded. */
  block(section: Uint8Array, offset: number): { cid: CID; data: Uint8Array } {
    const index = this.blocks;
    let cid: CID;
    let data: Uint8Array;
    try {
      [cid, data] = CID.decodeFirst(section) as unknown as [CID, Uint8Array];
    } catch (e) {
      throw carMalformed(offset, `block #${index} does not start with a CID (${(e as Error).message})`);
    }
    if (!isFormatCid(cid)) {
      throw snapshotError(
        'SNAPSHOT_CAR_UNSUPPORTED',
        `block #${index} at byte ${offset} has CID ${cid.toString()}: only CIDv1 sha2-256 raw or dag-cbor blocks are accepted`,
        { offset, cid: cid.toString() },
      );
    }
    const k = cid.toString();
    const actual = sha256(data);
    if (!bytesEqual(actual, cid.multihash.digest)) {
      throw snapshotError(
        'SNAPSHOT_CAR_BLOCK_MISMATCH',
        `block #${index} at byte ${offset} claims CID ${k} but its bytes hash to sha2-256 ${Buffer.from(actual).toString('hex')}`,
        { offset, cid: k, index },
      );
    }
    const dup = this.seen.get(k);
    if (dup) throw snapshotError('SNAPSHOT_CAR_DUPLICATE_BLOCK', `block #${index} at byte ${offset} repeats block #${dup.index} (${k})`, { offset, cid: k });
    this.seen.set(k, { index, offset });
    if (cid.code === RAW_CODE) {
      if (data.length > CHUNK_SIZE) throw carMalformed(offset, `raw block ${k} is larger than a chunk (${CHUNK_SIZE} bytes)`);
      this.rawSizes.set(k, data.length);
    } else if (cid.code === DAG_CBOR_CODE) {
      const node = decodeNode(cid, data, `block #${index} at byte ${offset}`);
      this.links.set(
        k,
        nodeLinks(node).map((c) => c.toString()),
      );
      this.kinds.set(k, node.type);
      if (this.o.keepNodes) this.nodes.set(k, data);
    }
    this.blocks += 1;
    this.bytes += data.length;
    return { cid, data };
  }

  /**
   * Roots present and directories; every block reachable and present. `withholdRootEntries`: entries of the roots'
   * directories (by name) whose blocks are withheld: the link from the root to them is not followed (nor required),
   * so their blocks must not be in the CAR unless other content reaches them (needs `keepNodes`).
   */
  finish(o: { withholdRootEntries?: readonly string[] } = {}): void {
    for (const r of this.roots) {
      const k = r.toString();
      if (!this.seen.has(k)) throw snapshotError('SNAPSHOT_CAR_MISSING_ROOT', `root ${k} named in the CAR header is not among its blocks`, { cid: k });
      if (this.kinds.get(k) !== 'dir') throw snapshotError('SNAPSHOT_CAR_BAD_ROOT', `root ${k} is not a snapshot directory manifest`, { cid: k });
    }
    const withheld = new Set<string>();
    const names = o.withholdRootEntries ?? [];
    if (names.length > 0) {
      for (const r of this.roots) {
        const bytes = this.nodes.get(r.toString());
        if (!bytes) throw new Error('internal: CarCheck needs keepNodes to withhold root entries');
        const node = decodeNode(r, bytes, 'the root');
        if (node.type !== 'dir') continue;
        const linked = node.entries.flatMap((e) => (e.kind === 'symlink' ? [] : [{ name: e.name, cid: e.cid.toString() }]));
        // content the root also links under a public name (an empty directory, say) is carried for that name
        const shown = new Set(linked.filter((e) => !names.includes(e.name)).map((e) => e.cid));
        for (const e of linked) if (names.includes(e.name) && !shown.has(e.cid)) withheld.add(`${r.toString()} ${e.cid}`);
      }
    }
    const reached = new Set<string>();
    const stack: Array<{ k: string; from: string | null }> = this.roots.map((r) => ({ k: r.toString(), from: null }));
    while (stack.length > 0) {
      const { k, from } = stack.pop() as { k: string; from: string | null };
      if (reached.has(k) || (from !== null && withheld.has(`${from} ${k}`))) continue;
      if (!this.seen.has(k))
        throw snapshotError('SNAPSHOT_CAR_MISSING_BLOCK', `block ${k}, linked from ${from ?? 'the header'}, is not in the CAR`, { cid: k, from });
      reached.add(k);
      for (const c of this.links.get(k) ?? []) if (!reached.has(c)) stack.push({ k: c, from: k });
    }
    for (const [k, where] of this.seen) {
      if (!reached.has(k)) {
        throw snapshotError('SNAPSHOT_CAR_UNREFERENCED_BLOCK', `block #${where.index} at byte ${where.offset} (${k}) is not reachable from any root`, {
          cid: k,
          offset: where.offset,
        });
      }
    }
  }
}

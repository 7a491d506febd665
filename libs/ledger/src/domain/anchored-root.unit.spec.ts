import { createHash } from 'node:crypto';
import { anchoredRoot } from './anchored-root';
import { emptyRoot, leafHash, newNodesForAppend, rootAt, type NodeSource } from './merkle';

const leaves = Array.from({ length: 45 }, (_, i) => leafHash(createHash('sha256').update(`event ${i}`).digest()));

/** Every perfect-subtree node of the first n leaves, as a mutable map (a stand-in for the stored table). */
function table(n: number): Map<string, Uint8Array> {
  const m = new Map<string, Uint8Array>();
  for (const x of newNodesForAppend(0, leaves.slice(0, n), (l, i) => m.get(`${l}/${i}`) as Uint8Array)) m.set(`${x.level}/${x.index}`, x.hash);
  return m;
}
const source =
  (m: Map<string, Uint8Array>): NodeSource =>
  (l, i) => {
    const h = m.get(`${l}/${i}`);
    if (!h) throw new Error(`no node ${l}/${i}`);
    return h;
  };
const after = (from: number, to: number): Uint8Array[] => leaves.slice(from, to);

describe('anchoredRoot: roots from stored nodes, trusted only as far as a signed checkpoint vouches', () => {
  const stored = table(45);
  const honest = source(stored);

  it('gives the true root at every size, below, at and above the signed size, and with no checkpoint at all', () => {
    for (const c of [1, 2, 7, 16, 33]) {
      const signed = { treeSize: c, rootHash: rootAt(c, honest) };
      for (let size = 0; size <= 45; size++)
        expect(Buffer.from(anchoredRoot(signed, size, honest, after) as Uint8Array)).toEqual(Buffer.from(size === 0 ? emptyRoot() : rootAt(size, honest)));
    }
    expect(Buffer.from(anchoredRoot(null, 45, honest, after) as Uint8Array)).toEqual(Buffer.from(rootAt(45, honest)));
  });

  it('gives null when a stored node the answer depends on was changed, whichever node it is', () => {
    const signed = { treeSize: 33, rootHash: rootAt(33, honest) };
    for (const key of stored.keys()) {
      const damaged = new Map(stored);
      damaged.set(key, Buffer.alloc(32, 0xab));
      const node = source(damaged);
      for (const size of [5, 32, 33, 40, 45]) {
        const r = anchoredRoot(signed, size, node, after);
        // Either the damage is caught, or the answer is still the true root (the node was not needed).
        if (r !== null)
          expect({ key, size, root: Buffer.from(r).toString('hex') }).toEqual({ key, size, root: Buffer.from(rootAt(size, honest)).toString('hex') });
      }
      // Damage inside the signed tree's own perfect subtrees is always caught above the signed size.
      const [level, index] = key.split('/').map(Number) as [number, number];
      const inFrontier = (level === 5 && index === 0) || (level === 0 && index === 32);
      if (inFrontier) expect(anchoredRoot(signed, 40, node, after)).toBeNull();
    }
  });

  it("gives null when the signed root is not the stored tree's", () => {
    expect(anchoredRoot({ treeSize: 20, rootHash: Buffer.alloc(32, 1) }, 10, honest, after)).toBeNull();
    expect(anchoredRoot({ treeSize: 20, rootHash: Buffer.alloc(32, 1) }, 20, honest, after)).toBeNull();
    expect(anchoredRoot({ treeSize: 20, rootHash: Buffer.alloc(32, 1) }, 30, honest, after)).toBeNull();
  });
});

import { randomUUID } from 'node:crypto';
import { uuidWords } from './check-chunk';
import { IdSet, uuidText } from './id-set';

const words = (id: string): Uint32Array => {
  const w = new Uint32Array(4);
  uuidWords(id, w, 0);
  return w;
};

describe("IdSet: the verifier's own check that event ids are unique", () => {
  it('holds ids as their 128 bits, and gives the text back', () => {
    const id = randomUUID();
    expect(uuidText(words(id), 0)).toBe(id);
  });

  it('finds the first use of a repeated id among many, sequential or random, across growth', () => {
    const set = new IdSet(4);
    const ids: string[] = [];
    for (let i = 0; i < 50_000; i++) ids.push(i % 2 === 0 ? `00000000-0000-4000-8000-${i.toString(16).padStart(12, '0')}` : randomUUID());
    const repeats = ids.filter((id, position) => set.add(words(id), 0, position) !== -1);
    expect(repeats).toEqual([]);
    expect(set.size).toBe(50_000);
    expect(set.add(words(ids[12_345] as string), 0, 50_000)).toBe(12_345);
    expect(set.add(words(ids[0] as string), 0, 50_001)).toBe(0);
    // Ids that differ in one bit of any word are different.
    const w = words(ids[2] as string);
    for (let k = 0; k < 4; k++) {
      const v = Uint32Array.from(w);
      v[k] = (v[k] as number) ^ 1;
      expect(set.add(v, 0, 60_000 + k)).toBe(-1);
    }
  });
});

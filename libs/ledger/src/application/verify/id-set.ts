/**
 * The set of event ids seen by the ordered pass of verification, so that it checks by itself that every id is unique
 * in the whole log (the database's UNIQUE index is not evidence: it can be dropped). Ids are lowercase UUIDs, held as
 * their 128 bits (4 words, see uuidWords) in one open-addressing table of typed arrays kept at most half full: 24 bytes
 * a slot, so 48 to 96 bytes an event, no object or string per id, and a few tens of nanoseconds per insert.
 */
export class IdSet {
  private words: Uint32Array;
  private positions: Float64Array;
  private used = 0;
  private mask: number;

  constructor(capacity = 1024) {
    let slots = 16;
    while (slots < capacity * 2) slots *= 2;
    this.words = new Uint32Array(4 * slots);
    this.positions = new Float64Array(slots).fill(-1);
    this.mask = slots - 1;
  }

  get size(): number {
    return this.used;
  }

  /**
   * Adds the id at words[at..at+4) first seen at `position`. Returns -1 when it is new, otherwise the position
   * where it was seen first.
   */
  add(words: Uint32Array, at: number, position: number): number {
    if (2 * (this.used + 1) > this.positions.length) this.grow();
    return this.insert(words[at] as number, words[at + 1] as number, words[at + 2] as number, words[at + 3] as number, position);
  }

  private insert(a: number, b: number, c: number, d: number, position: number): number {
    // Mix all 128 bits (ids need not be random: tests and imports use sequential ones).
    let h = Math.imul(a ^ Math.imul(b, 0x9e3779b1) ^ Math.imul(c, 0x85ebca77) ^ Math.imul(d, 0xc2b2ae3d), 0x27d4eb2f);
    h ^= h >>> 15;
    let slot = h & this.mask;
    for (;;) {
      const seen = this.positions[slot] as number;
      if (seen < 0) {
        const k = 4 * slot;
        this.words[k] = a;
        this.words[k + 1] = b;
        this.words[k + 2] = c;
        this.words[k + 3] = d;
        this.positions[slot] = position;
        this.used++;
        return -1;
      }
      const k = 4 * slot;
      if (this.words[k] === a && this.words[k + 1] === b && this.words[k + 2] === c && this.words[k + 3] === d) return seen;
      slot = (slot + 1) & this.mask;
    }
  }

  private grow(): void {
    const oldWords = this.words;
    const oldPositions = this.positions;
    const slots = 2 * oldPositions.length;
    this.words = new Uint32Array(4 * slots);
    this.positions = new Float64Array(slots).fill(-1);
    this.mask = slots - 1;
    this.used = 0;
    for (let s = 0; s < oldPositions.length; s++) {
      const p = oldPositions[s] as number;
      if (p >= 0) this.insert(oldWords[4 * s] as number, oldWords[4 * s + 1] as number, oldWords[4 * s + 2] as number, oldWords[4 * s + 3] as number, p);
    }
  }
}

/** The lowercase UUID text of 4 words. */
export function uuidText(words: Uint32Array, at: number): string {
  const hex = [0, 1, 2, 3].map((j) => (words[at + j] as number).toString(16).padStart(8, '0')).join('');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

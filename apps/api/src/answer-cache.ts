/**
 * Answers of the read routes kept as their JSON text, by route and argument, for one read-model version
 * (ReadModelsProvider.version(): the projected position and the imports). A read whose version has not changed since
 * the answer was made sends the same bytes again, with its ETag, without querying or serializing anything; a new
 * signed checkpoint or an import makes every kept answer stale. Bounded by entries and bytes (least recently used
 * first out).
 */
import { createHash } from 'node:crypto';

export interface CachedAnswer {
  readonly text: string;
  readonly etag: string;
}

export class AnswerCache {
  private readonly entries = new Map<string, { version: string; answer: CachedAnswer }>();
  private bytes = 0;

  constructor(
    private readonly maxEntries = 1024,
    private readonly maxBytes = 64 * 1024 * 1024,
  ) {}

  /** The answer for `key` at `version`: kept, or made by `make` (null: not found, not kept) and kept. */
  async get(key: string, version: string, make: () => Promise<unknown>): Promise<CachedAnswer | null> {
    const hit = this.entries.get(key);
    if (hit && hit.version === version) {
      this.entries.delete(key);
      this.entries.set(key, hit);
      return hit.answer;
    }
    const value = await make();
    if (value === null || value === undefined) return null;
    const text = JSON.stringify(value);
    const answer = { text, etag: `"${createHash('sha256').update(text).digest('base64url').slice(0, 27)}"` };
    this.put(key, version, answer);
    return answer;
  }

  private put(key: string, version: string, answer: CachedAnswer): void {
    const old = this.entries.get(key);
    if (old) {
      this.bytes -= old.answer.text.length;
      this.entries.delete(key);
    }
    if (answer.text.length > this.maxBytes / 4) return; // one huge answer never evicts everything else
    this.entries.set(key, { version, answer });
    this.bytes += answer.text.length;
    for (const [k, v] of this.entries) {
      if (this.entries.size <= this.maxEntries && this.bytes <= this.maxBytes) break;
      this.entries.delete(k);
      this.bytes -= v.answer.text.length;
    }
  }
}

/**
 * Answers of the read routes kept as their JSON bytes, by route and argument, for one read-model version
 * (ReadModelsProvider.version(): the projected position and the imports). A read whose version has not changed since
 * the answer was made sends the same bytes again, with its ETag, without querying, serializing or encoding anything;
 * a new signed checkpoint or an import makes every kept answer stale. Bounded by entries and bytes (least recently
 * used first out).
 *
 * Kept as bytes, not text: handing a 150 KB string to the response re-encodes it to UTF-8 on every request, which was
 * a fifth of the API's time under load (docs/benchmarks.md, "HTTP API reads").
 */
import { createHash } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';

export interface CachedAnswer {
  /** The UTF-8 JSON text of the answer. */
  readonly bytes: Buffer;
  /** A strong ETag: the first 27 characters of the base64url SHA-256 of `bytes`, quoted. */
  readonly etag: string;
}

/** The JSON bytes of `value` and their ETag. */
export function answerOf(value: unknown): CachedAnswer {
  const bytes = Buffer.from(JSON.stringify(value), 'utf8');
  return { bytes, etag: `"${createHash('sha256').update(bytes).digest('base64url').slice(0, 27)}"` };
}

/**
 * Whether an If-None-Match header value names `etag` (RFC 9110 13.1.2: `*`, or a comma-separated list of entity tags
 * compared weakly, so `W/"x"` matches `"x"`). A request's `Cache-Control: no-cache` speaks to caches, not to the
 * origin: a matching conditional GET still gets 304 here (fetch() sends no-cache with every conditional request).
 */
export function ifNoneMatchNames(header: string | string[] | undefined, etag: string): boolean {
  if (header === undefined) return false;
  const want = etag.replace(/^W\//, '');
  for (const raw of (Array.isArray(header) ? header.join(',') : header).split(',')) {
    const tag = raw.trim();
    if (tag === '*' || tag.replace(/^W\//, '') === want) return true;
  }
  return false;
}

/**
 * Writes `a` as the whole response (200, JSON), or 304 without a body when the request's If-None-Match names its
 * ETag. For routes that take `@Res()` without passthrough: nothing else writes the response.
 */
export function sendAnswer(req: FastifyRequest, reply: FastifyReply, a: CachedAnswer): void {
  reply.header('content-type', 'application/json; charset=utf-8');
  reply.header('etag', a.etag);
  if (ifNoneMatchNames(req.headers['if-none-match'], a.etag)) {
    reply.code(304).send();
    return;
  }
  reply.code(200).send(a.bytes);
}

export class AnswerCache {
  private readonly entries = new Map<string, { version: string; answer: CachedAnswer }>();
  private bytes = 0;

  constructor(
    private readonly maxEntries = 1024,
    private readonly maxBytes = 64 * 1024 * 1024,
  ) {}

  /** The answer kept for `key` at `version`, if any (it becomes the most recently used). */
  peek(key: string, version: string): CachedAnswer | null {
    const hit = this.entries.get(key);
    if (!hit || hit.version !== version) return null;
    this.entries.delete(key);
    this.entries.set(key, hit);
    return hit.answer;
  }

  /** The answer for `key` at `version`: kept, or made by `make` (null: not found, not kept) and kept. */
  async get(key: string, version: string, make: () => Promise<unknown>): Promise<CachedAnswer | null> {
    const hit = this.peek(key, version);
    if (hit) return hit;
    const value = await make();
    if (value === null || value === undefined) return null;
    const answer = answerOf(value);
    this.put(key, version, answer);
    return answer;
  }

  /** Keeps `answer` for `key` at `version`, replacing what was kept for `key`. */
  put(key: string, version: string, answer: CachedAnswer): void {
    const old = this.entries.get(key);
    if (old) {
      this.bytes -= old.answer.bytes.byteLength;
      this.entries.delete(key);
    }
    if (answer.bytes.byteLength > this.maxBytes / 4) return; // one huge answer never evicts everything else
    this.entries.set(key, { version, answer });
    this.bytes += answer.bytes.byteLength;
    for (const [k, v] of this.entries) {
      if (this.entries.size <= this.maxEntries && this.bytes <= this.maxBytes) break;
      this.entries.delete(k);
      this.bytes -= v.answer.bytes.byteLength;
    }
  }
}

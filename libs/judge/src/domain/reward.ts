/**
 * The reward contract (docs/judge.md, "Reward contract and statuses"), as pure functions.
 *
 * - `reward.json` wins over `reward.txt` whenever it exists, even when it is broken: malformed JSON is a verifier
 *   error and never falls back to the text file.
 * - `reward.json` is a non-empty object of finite numbers (no duplicate keys, at most 64 keys named
 *   `[A-Za-z0-9_.:-]{1,64}` so the ledger can record them). NaN, infinities, overflow (`1e400`), booleans, null,
 *   strings, nested values, an empty object, an empty or non-UTF-8 file are verifier errors, never a zero.
 * - `reward.txt` holds exactly one finite decimal number (surrounding whitespace allowed); it becomes `{reward: x}`.
 * - Only regular files count: a symlink, directory or other entry named like a reward file is a verifier error.
 * - Primary metric: the requested key; else `reward`; else the only key; else none.
 */
import { jsonKindName, parseStrictJson } from './strict-json';

export const REWARD_JSON = 'reward.json';
export const REWARD_TXT = 'reward.txt';
/**
 * The verifier's report of an infrastructure fault (no GPU, a driver error, its own runner out of memory): with no
 * reward beside it, the Judge's status is `infrastructure_error` and the controller refunds the round. Only test.sh
 * (root) can write it: /logs/verifier is 0700 root and candidate code runs unprivileged.
 */
export const INFRASTRUCTURE_REPORT = 'infrastructure-error.txt';
export const MAX_INFRASTRUCTURE_REPORT_CHARS = 1000;
export const MAX_REWARD_FILE_BYTES = 64 * 1024;
export const MAX_REWARD_KEYS = 64;
export const REWARD_KEY_RE = /^[A-Za-z0-9_.:-]{1,64}$/;

/** What the Judge found at one reward path. */
export type RewardFile =
  | { readonly state: 'absent' }
  | { readonly state: 'file'; readonly bytes: Uint8Array }
  /** A symlink, directory, hard link or special file under a reward file's name. */
  | { readonly state: 'not_regular'; readonly what: string }
  | { readonly state: 'too_large'; readonly size: number };

export type Rewards = Readonly<Record<string, number>>;

export type RewardParse =
  | { readonly ok: true; readonly source: typeof REWARD_JSON | typeof REWARD_TXT; readonly rewards: Rewards }
  | { readonly ok: false; readonly source: typeof REWARD_JSON | typeof REWARD_TXT | null; readonly reason: string };

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

function decode(bytes: Uint8Array): string | null {
  try {
    return utf8.decode(bytes);
  } catch {
    return null;
  }
}

function refuse(source: typeof REWARD_JSON | typeof REWARD_TXT, reason: string): RewardParse {
  return { ok: false, source, reason: `${source}: ${reason}` };
}

export function parseRewardJson(bytes: Uint8Array): RewardParse {
  const src = REWARD_JSON;
  if (bytes.length === 0) return refuse(src, 'the file is empty');
  if (bytes.length > MAX_REWARD_FILE_BYTES) return refuse(src, `the file is ${bytes.length} bytes, over ${MAX_REWARD_FILE_BYTES}`);
  const text = decode(bytes);
  if (text === null) return refuse(src, 'not UTF-8');
  if (text.trim() === '') return refuse(src, 'the file holds only whitespace');
  const parsed = parseStrictJson(text);
  if (!parsed.ok) return refuse(src, `not valid JSON: ${parsed.error}`);
  const v = parsed.value;
  if (v.kind !== 'object') return refuse(src, `expected an object of numbers, got ${jsonKindName(v)}`);
  if (v.entries.length === 0) return refuse(src, 'the object is empty; it must hold at least one reward');
  if (v.entries.length > MAX_REWARD_KEYS) return refuse(src, `${v.entries.length} keys; at most ${MAX_REWARD_KEYS} are recorded`);
  const out: Record<string, number> = {};
  for (const [key, val] of v.entries) {
    if (!REWARD_KEY_RE.test(key)) return refuse(src, `key ${JSON.stringify(key.slice(0, 80))} is not a reward name (1-64 of A-Z a-z 0-9 _ . : -)`);
    if (val.kind !== 'number') return refuse(src, `${JSON.stringify(key)} is ${jsonKindName(val)}, not a number`);
    if (!Number.isFinite(val.value)) return refuse(src, `${JSON.stringify(key)} is ${val.text}, which overflows a 64-bit float`);
    out[key] = val.value === 0 ? 0 : val.value; // no -0
  }
  return { ok: true, source: src, rewards: Object.freeze(out) };
}

const DECIMAL = /^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$/;

export function parseRewardTxt(bytes: Uint8Array): RewardParse {
  const src = REWARD_TXT;
  if (bytes.length === 0) return refuse(src, 'the file is empty');
  if (bytes.length > MAX_REWARD_FILE_BYTES) return refuse(src, `the file is ${bytes.length} bytes, over ${MAX_REWARD_FILE_BYTES}`);
  const text = decode(bytes);
  if (text === null) return refuse(src, 'not UTF-8');
  const t = text.replace(/^\uFEFF/, '').replace(/^[ \t\r\n]+|[ \t\r\n]+$/g, '');
  if (t === '') return refuse(src, 'the file holds only whitespace');
  if (!DECIMAL.test(t)) return refuse(src, `expected one decimal number, got ${JSON.stringify(t.slice(0, 40))}`);
  const n = Number(t);
  if (!Number.isFinite(n)) return refuse(src, `${t.slice(0, 40)} overflows a 64-bit float`);
  return { ok: true, source: src, rewards: Object.freeze({ reward: n === 0 ? 0 : n }) };
}

function unreadable(source: typeof REWARD_JSON | typeof REWARD_TXT, f: RewardFile): RewardParse | null {
  if (f.state === 'not_regular') return refuse(source, `is ${f.what}, not a regular file; only regular files count`);
  if (f.state === 'too_large') return refuse(source, `the file is ${f.size} bytes, over ${MAX_REWARD_FILE_BYTES}`);
  return null;
}

/** Applies the precedence: reward.json whenever it exists (even broken), else reward.txt, else no reward. */
export function parseRewardFiles(files: { readonly json: RewardFile; readonly txt: RewardFile }): RewardParse {
  if (files.json.state !== 'absent') return unreadable(REWARD_JSON, files.json) ?? parseRewardJson((files.json as { bytes: Uint8Array }).bytes);
  if (files.txt.state !== 'absent') return unreadable(REWARD_TXT, files.txt) ?? parseRewardTxt((files.txt as { bytes: Uint8Array }).bytes);
  return { ok: false, source: null, reason: 'the verifier wrote neither /logs/verifier/reward.json nor /logs/verifier/reward.txt' };
}

/** The reason in /logs/verifier/infrastructure-error.txt, one line, bounded; null when the verifier wrote none. */
export function parseInfrastructureReport(f: RewardFile): string | null {
  if (f.state === 'absent') return null;
  if (f.state === 'not_regular') return `${INFRASTRUCTURE_REPORT} is ${f.what}, not a regular file`;
  if (f.state === 'too_large') return `${INFRASTRUCTURE_REPORT} is ${f.size} bytes (its reason not read)`;
  const text = decode(f.bytes);
  if (text === null) return `${INFRASTRUCTURE_REPORT} is not UTF-8`;
  const t = text
    .replace(/^\uFEFF/, '')
    .replace(/\s+/g, ' ')
    .trim();
  if (t === '') return 'no reason given';
  return t.length > MAX_INFRASTRUCTURE_REPORT_CHARS ? `${t.slice(0, MAX_INFRASTRUCTURE_REPORT_CHARS)}...` : t;
}

export interface PrimaryMetric {
  /** The key chosen, or null. */
  readonly metric: string | null;
  readonly score: number | null;
  /** Why there is none, when there is none. */
  readonly note: string | null;
}

/** The requested key; else `reward`; else the only key; else none. A requested key that is missing gives none. */
export function choosePrimaryMetric(rewards: Rewards, requested: string | null): PrimaryMetric {
  const keys = Object.keys(rewards);
  if (requested !== null) {
    const v = rewards[requested];
    return v === undefined
      ? {
          metric: requested.length <= 64 ? requested : null,
          score: null,
          note: `the requested primary metric ${JSON.stringify(requested)} is not among the rewards (${keys.join(', ')})`,
        }
      : { metric: requested, score: v, note: null };
  }
  if (rewards.reward !== undefined) return { metric: 'reward', score: rewards.reward, note: null };
  if (keys.length === 1) {
    const k = keys[0] as string;
    return { metric: k, score: rewards[k] as number, note: null };
  }
  return {
    metric: null,
    score: null,
    note: `no primary metric: no "reward" key and ${keys.length} keys (${keys.join(', ')}); name one with --metric or [metadata.assay] primary_metric`,
  };
}

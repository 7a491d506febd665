/**
 * The redaction rule set `assay-redact/1`, applied to a run's logs when a bundle is exported with `--logs redacted`
 * (docs/bundle-format.md, "logs.jsonl"). Pure and deterministic: the same bytes and the same host names give the
 * same output, so the digest recorded in LogRedacted can be recomputed by whoever holds the original.
 *
 * Logs are bytes, not necessarily UTF-8: the rules run over the latin1 reading of the bytes (one character per byte),
 * so every byte outside a match is kept exactly. What the rules replace, in this order:
 *
 *   private-key   PEM private key blocks, and Assay private key texts (`PRIVATE+KEY+...`)
 *   token         API keys and tokens by their published shapes (OpenAI/Anthropic `sk-`, GitHub `ghp_`/`github_pat_`,
 *                 Slack `xox?-`, AWS `AKIA`, Hugging Face `hf_`, Google `AIza`), and `Bearer`/`Basic` credentials
 *   assignment    values assigned to names that say secret (`*API_KEY*`, `*TOKEN*`, `*SECRET*`, `*PASSWORD*`), the
 *                 shape in which env templates' secrets leak (`NAME=value`, `NAME: value`, `"NAME": "value"`)
 *   home-path     the user name in home directories (`/home/<user>`, `/Users/<user>`)
 *   host          the exporting machine's host names, given by the caller
 *
 * Secrets the run declared (an agent's secret environment) are already replaced by `[redacted]` as the transcript is
 * written; these rules are for what an agent or a Judge printed that nobody declared.
 */
export const REDACTION_RULES = 'assay-redact/1';
export const REDACTION_RULE_NAMES = ['private-key', 'token', 'assignment', 'home-path', 'host'] as const;
export type RedactionRule = (typeof REDACTION_RULE_NAMES)[number];

export interface RedactionResult {
  readonly bytes: Buffer;
  /** Replacements per rule. */
  readonly replaced: Readonly<Record<RedactionRule, number>>;
  readonly total: number;
}

const SECRET_NAME = '[A-Za-z0-9_]*(?:API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD)[A-Za-z0-9_]*';

const FIXED: ReadonlyArray<{ rule: RedactionRule; re: RegExp; to: string }> = [
  {
    rule: 'private-key',
    re: /-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----[\s\S]{0,20000}?-----END [A-Z0-9 ]{0,40}PRIVATE KEY-----/g,
    to: '[redacted:private-key]',
  },
  { rule: 'private-key', re: /PRIVATE\+KEY\+[^\s"']{1,400}/g, to: '[redacted:private-key]' },
  {
    rule: 'token',
    re: /(?<![A-Za-z0-9_-])(?:sk-(?:proj-|ant-[a-z0-9]{0,8}-)?[A-Za-z0-9_-]{20,400}|gh[pousr]_[A-Za-z0-9]{30,255}|github_pat_[A-Za-z0-9_]{40,255}|xox[abprs]-[A-Za-z0-9-]{10,255}|AKIA[0-9A-Z]{16}|hf_[A-Za-z0-9]{30,255}|AIza[0-9A-Za-z_-]{35})(?![A-Za-z0-9_-])/g,
    to: '[redacted:token]',
  },
  { rule: 'token', re: /\b(Bearer|Basic) [A-Za-z0-9._~+/=-]{16,4096}/g, to: '$1 [redacted:token]' },
  { rule: 'assignment', re: new RegExp(`\\b(${SECRET_NAME})(=|: ?)(?!\\[redacted)([^\\s"',;]{1,4096})`, 'g'), to: '$1$2[redacted]' },
  { rule: 'assignment', re: new RegExp(`"(${SECRET_NAME})"(\\s*:\\s*)"(?!\\[redacted)[^"\\\\]{1,4096}"`, 'g'), to: '"$1"$2"[redacted]"' },
  { rule: 'home-path', re: /\/(home|Users)\/(?!\[user\])[^/\s:'"\\]{1,255}/g, to: '/$1/[user]' },
];

function escapeRe(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** Applies `assay-redact/1`. `hostnames`: the names of the exporting machine (empty or one-letter names are ignored). */
export function redactLog(bytes: Uint8Array, o: { hostnames: readonly string[] }): RedactionResult {
  let text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('latin1');
  const replaced: Record<RedactionRule, number> = { 'private-key': 0, token: 0, assignment: 0, 'home-path': 0, host: 0 };
  const apply = (rule: RedactionRule, re: RegExp, to: string) => {
    text = text.replace(re, (...m: unknown[]) => {
      replaced[rule]++;
      return to.replace(/\$(\d)/g, (_, d: string) => String(m[Number(d)] ?? ''));
    });
  };
  for (const r of FIXED) apply(r.rule, r.re, r.to);
  const hosts = [...new Set(o.hostnames.filter((h) => h.length >= 2 && h.length <= 253 && !/\s/.test(h)))].sort((a, b) => b.length - a.length);
  for (const h of hosts) apply('host', new RegExp(`(?<![A-Za-z0-9.-])${escapeRe(h)}(?![A-Za-z0-9-])`, 'gi'), '[host]');
  const total = Object.values(replaced).reduce((a, b) => a + b, 0);
  return { bytes: Buffer.from(text, 'latin1'), replaced, total };
}

import { snapshotError } from './snapshot.errors';

/**
 * Exclusion patterns: a documented subset of gitignore syntax, matched against the path relative to the
 * snapshot root with `/` separators.
 *
 * - A pattern without a `/` (other than a trailing one) matches a name at any depth: `*.pyc`, `__pycache__/`.
 * - A pattern with a leading or inner `/` is anchored at the root: `/build`, `data/raw/*.bin`.
 * - A trailing `/` matches directories only.
 * - `*` matches any run of characters except `/`; `?` one character except `/`; `[abc]`, `[a-z]`, `[!abc]` one
 *   character of (or not of) a class; a whole segment `**` matches zero or more directories; `\` escapes.
 * - An excluded directory is not entered. Negation (`!pattern`) is refused so that a pattern list can only
 *   remove things.
 */
export const MAX_EXCLUDE_PATTERNS = 1024;
export const MAX_PATTERN_LENGTH = 4096;

export type ExcludeMatcher = (rel: string, isDir: boolean) => boolean;

function escapeRe(c: string): string {
  return /[\\^$.*+?()[\]{}|/-]/.test(c) ? `\\${c}` : c;
}

function segmentToRe(seg: string, pattern: string): string {
  let re = '';
  for (let i = 0; i < seg.length; i++) {
    const c = seg.charAt(i);
    if (c === '\\') {
      i += 1;
      if (i >= seg.length) throw invalid(pattern, 'ends with an escape');
      re += escapeRe(seg.charAt(i));
    } else if (c === '*') {
      re += '[^/]*';
    } else if (c === '?') {
      re += '[^/]';
    } else if (c === '[') {
      const close = seg.indexOf(']', i + 2);
      if (close < 0) {
        re += '\\[';
        continue;
      }
      let body = seg.slice(i + 1, close);
      let neg = false;
      if (body.startsWith('!') || body.startsWith('^')) {
        neg = true;
        body = body.slice(1);
      }
      const cls = [...body].map((ch) => (ch === '-' ? '-' : escapeRe(ch))).join('');
      re += neg ? `[^/${cls}]` : `[${cls}]`;
      i = close;
    } else {
      re += escapeRe(c);
    }
  }
  return re;
}

function invalid(pattern: string, why: string): Error {
  return snapshotError('SNAPSHOT_POLICY_INVALID', `exclude pattern ${JSON.stringify(pattern)} ${why}`, { pattern });
}

/** Compiles one pattern to a RegExp over relative paths, plus whether it applies to directories only. */
export function compilePattern(pattern: string): { re: RegExp; dirOnly: boolean } {
  if (typeof pattern !== 'string' || pattern.length === 0) throw invalid(String(pattern), 'is empty');
  if (pattern.length > MAX_PATTERN_LENGTH) throw invalid(pattern.slice(0, 40), `is longer than ${MAX_PATTERN_LENGTH}`);
  if (pattern.startsWith('!')) throw invalid(pattern, 'is a negation, which is not supported');
  if (pattern.includes('\0')) throw invalid(pattern, 'contains NUL');
  let p = pattern;
  let dirOnly = false;
  if (p.endsWith('/') && !p.endsWith('\\/')) {
    dirOnly = true;
    p = p.replace(/\/+$/, '');
  }
  const anchored = p.includes('/');
  if (p.startsWith('/')) p = p.slice(1);
  if (p.length === 0) throw invalid(pattern, 'matches nothing');
  const segs = p.split('/');
  if (segs.some((s) => s === '' || s === '.' || s === '..')) throw invalid(pattern, 'has an empty, . or .. segment');
  let re = '';
  segs.forEach((seg, i) => {
    const last = i === segs.length - 1;
    if (seg === '**') {
      re += last ? '.*' : '(?:[^/]+/)*';
    } else {
      re += segmentToRe(seg, pattern) + (last ? '' : '/');
    }
  });
  const full = anchored ? `^${re}$` : `^(?:.*/)?${re}$`;
  return { re: new RegExp(full, 's'), dirOnly };
}

export function compileExcludes(patterns: readonly string[]): ExcludeMatcher {
  if (patterns.length > MAX_EXCLUDE_PATTERNS) {
    throw snapshotError('SNAPSHOT_POLICY_INVALID', `${patterns.length} exclude patterns; the limit is ${MAX_EXCLUDE_PATTERNS}`);
  }
  const compiled = patterns.map(compilePattern);
  if (compiled.length === 0) return () => false;
  return (rel, isDir) => compiled.some((c) => (!c.dirOnly || isDir) && c.re.test(rel));
}

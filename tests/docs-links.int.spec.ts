/**
 * The docs are self-contained and point at what exists: no docs/*.md or README.md refers to a file outside the
 * repository (a `../` that leaves it, an absolute path into someone's checkout, a design document that is not here),
 * every relative markdown link resolves to a file of the repository (and its #anchor to a heading there), every
 * repository path named in backticks (apps/, libs/, examples/, ...) exists, and every `assay ...` /
 * `node bin/assay.js ...` command named is one the CLI registers (its top-level command, and each sub-command word
 * while the command named has sub-commands).
 *
 * Only what is clearly a path or a command is checked: links in markdown syntax, backticked tokens that start with a
 * top-level directory of the repository, and `assay <word>` at the start of a backticked span or a code line.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import type { Command } from 'commander';
import { buildProgram } from '../apps/cli/src/main';
import { defaultContext } from '../apps/cli/src/cli-context';

const ROOT = resolve(__dirname, '..');

interface Doc {
  /** repository-relative path, e.g. docs/run.md */
  file: string;
  text: string;
}

function docs(): Doc[] {
  const files = [
    'README.md',
    ...readdirSync(join(ROOT, 'docs'))
      .filter((n) => n.endsWith('.md'))
      .sort()
      .map((n) => `docs/${n}`),
  ];
  return files.map((file) => ({ file, text: readFileSync(join(ROOT, file), 'utf8') }));
}

interface Line {
  n: number;
  text: string;
  /** inside a ``` fence */
  code: boolean;
}

function lines(text: string): Line[] {
  let code = false;
  return text.split('\n').map((t, i) => {
    if (/^\s*(```|~~~)/.test(t)) {
      code = !code;
      return { n: i + 1, text: t, code: true };
    }
    return { n: i + 1, text: t, code };
  });
}

function inside(root: string, p: string): boolean {
  const r = relative(root, p);
  return r === '' || (!r.startsWith('..') && !r.startsWith(sep) && !/^[A-Za-z]:/.test(r));
}

/** GitHub's heading anchors: lowercase, punctuation dropped, spaces to '-', duplicates numbered. */
function anchorsOf(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const l of lines(text)) {
    if (l.code) continue;
    const m = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(l.text);
    if (!m) continue;
    const base = (m[1] as string)
      .toLowerCase()
      .replace(/<[^>]+>/g, '')
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const k = seen.get(base) ?? 0;
    seen.set(base, k + 1);
    out.add(k === 0 ? base : `${base}-${k}`);
  }
  return out;
}

/** Markdown links `[text](target)` outside code, with their line. */
function links(d: Doc): Array<{ n: number; target: string }> {
  const out: Array<{ n: number; target: string }> = [];
  for (const l of lines(d.text)) {
    if (l.code) continue;
    // inline code spans are not links
    const prose = l.text.replace(/`[^`]*`/g, '``');
    for (const m of prose.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) out.push({ n: l.n, target: m[1] as string });
  }
  return out;
}

const where = (d: Doc, n: number) => `${d.file}:${n}`;

describe('docs are self-contained', () => {
  const all = docs();

  it('name no file outside the repository (../ leaving it, absolute paths of a checkout, DESIGN.md, shared/)', () => {
    const bad: string[] = [];
    for (const d of all) {
      for (const l of lines(d.text)) {
        const t = l.text;
        if (/\bDESIGN(\.md)?\b/.test(t)) bad.push(`${where(d, l.n)}: names DESIGN: ${t.trim()}`);
        if (/(^|[\s`("'[])(\.\.\/)*\.\.\/shared\b|(^|[\s`("'[])shared\//.test(t)) bad.push(`${where(d, l.n)}: names shared/: ${t.trim()}`);
        if (/(^|[\s`("'[=:])\/(work|home|Users)\//.test(t)) bad.push(`${where(d, l.n)}: an absolute path of a checkout: ${t.trim()}`);
        // a ../ path (in a link or as text) that leaves the repository
        for (const m of t.matchAll(/(?:^|[\s`("'[])((?:\.\.\/)+[^\s`)"'\]]*)/g)) {
          const p = resolve(ROOT, dirname(d.file), m[1] as string);
          if (!inside(ROOT, p)) bad.push(`${where(d, l.n)}: ${m[1]} leaves the repository`);
        }
      }
    }
    expect(bad).toEqual([]);
  });

  it('link only to files that exist in the repository, and to headings that exist there', () => {
    const bad: string[] = [];
    const anchorCache = new Map<string, Set<string>>();
    const anchors = (file: string) => anchorCache.get(file) ?? anchorCache.set(file, anchorsOf(readFileSync(file, 'utf8'))).get(file)!;
    for (const d of all) {
      for (const { n, target } of links(d)) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:
        const [path, anchor] = target.split('#', 2) as [string, string | undefined];
        if (path.startsWith('/')) {
          bad.push(`${where(d, n)}: absolute link ${target}`);
          continue;
        }
        const abs = path === '' ? join(ROOT, d.file) : resolve(ROOT, dirname(d.file), decodeURIComponent(path));
        if (!inside(ROOT, abs)) {
          bad.push(`${where(d, n)}: ${target} leaves the repository`);
          continue;
        }
        if (!existsSync(abs)) {
          bad.push(`${where(d, n)}: ${target} does not exist`);
          continue;
        }
        if (anchor && abs.endsWith('.md') && statSync(abs).isFile() && !anchors(abs).has(anchor.toLowerCase()))
          bad.push(`${where(d, n)}: ${target}: no heading with anchor #${anchor} in ${relative(ROOT, abs)}`);
      }
    }
    expect(bad).toEqual([]);
  });

  it('name only repository paths that exist (backticked apps/, libs/, examples/, task-runtime/, scripts/, bench/, docs/, migrations/)', () => {
    // tests/ and bin/ are left out: docs also name a task's own tests/test.sh and files inside snapshots that way
    const bad: string[] = [];
    for (const d of all) {
      for (const l of lines(d.text)) {
        if (l.code) continue;
        for (const span of l.text.matchAll(/`([^`\s]+)`/g)) {
          const s = span[1] as string;
          const m = /^(?:apps|libs|examples|task-runtime|scripts|bench|docs|migrations)\/[A-Za-z0-9_.\/-]*$/.exec(s);
          if (!m) continue;
          if (/\.\.\.|[*<>{}]/.test(s)) continue; // placeholders and globs
          const p = s.replace(/[.,:;]+$/, '').replace(/\/$/, '');
          if (!existsSync(join(ROOT, p))) bad.push(`${where(d, l.n)}: ${s} does not exist`);
        }
      }
    }
    expect(bad).toEqual([]);
  });

  it('name only commands the CLI registers', () => {
    const program: Command = buildProgram({ ...defaultContext(), out: () => undefined, err: () => undefined });
    const names = (c: Command) => new Set(c.commands.flatMap((s) => [s.name(), ...s.aliases()]));
    const top = names(program);
    expect(top.size).toBeGreaterThan(3);
    const bad: string[] = [];
    const check = (d: Doc, n: number, words: string[]) => {
      let cmd: Command = program;
      const path = ['assay'];
      for (const w of words) {
        if (!/^[a-z][a-z0-9-]*$/.test(w)) break; // a flag, a placeholder, an argument (a path, a CID)
        if (cmd.commands.length === 0) break; // a leaf: what follows are its arguments
        const sub = cmd.commands.find((s) => s.name() === w || s.aliases().includes(w));
        if (!sub) {
          bad.push(`${where(d, n)}: \`${[...path, w].join(' ')}\`: no such command (${path.join(' ')} has ${[...names(cmd)].sort().join(', ')})`);
          break;
        }
        cmd = sub;
        path.push(w);
      }
    };
    for (const d of all) {
      for (const l of lines(d.text)) {
        // `assay ...` at the start of a backticked span, or of a code line (after $, npx)
        const spans = [...l.text.matchAll(/`(?:\$ )?(?:npx )?assay ([^`]*)`/g)].map((m) => m[1] as string);
        if (l.code) {
          const m = /^\s*(?:\$ )?(?:npx )?assay ([^#\n]*)/.exec(l.text);
          if (m) spans.push(m[1] as string);
        }
        for (const m of l.text.matchAll(/node bin\/assay\.js ([^`#\n]*)/g)) spans.push(m[1] as string);
        for (const s of spans) check(d, l.n, s.trim().split(/\s+/));
      }
    }
    expect(bad).toEqual([]);
  });
});

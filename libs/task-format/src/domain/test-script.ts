/**
 * A heuristic read of tests/test.sh: does it download tools or packages at run time? Harbor's tasks run their
 * verifier with the public internet by default, so many test scripts install what they grade with (`apt-get install
 * curl`, `curl ... | sh`, `pip install pytest`, `uvx`). Assay's Judge has no network unless the task asks for it, so
 * such a script will fail there: compileTask turns a match into a warning, never an error. Pure: text in, lines out.
 */

export interface NetworkFetch {
  /** 1-based line number in tests/test.sh. */
  readonly line: number;
  /** What was matched, e.g. `apt-get install`, `curl https://...`, `pip install`, `uvx`. */
  readonly command: string;
}

interface FetchRule {
  readonly name: string;
  readonly pattern: RegExp;
  /** Flags that make the command work offline (`pip install --no-index`, `uv --offline`). */
  readonly offline?: RegExp;
}

// Each pattern must match a command word, not a substring of a path or an argument (`/opt/curl-cache` is not curl).
const CMD = String.raw`(?:^|[\s;&|({\x60]|\$\()`;
const RULES: readonly FetchRule[] = [
  { name: 'curl', pattern: new RegExp(`${CMD}curl\\b[^#\\n]*\\b(?:https?|ftp)://`) },
  { name: 'wget', pattern: new RegExp(`${CMD}wget\\b[^#\\n]*\\b(?:https?|ftp)://`) },
  { name: 'git clone', pattern: new RegExp(`${CMD}git\\s+clone\\b[^#\\n]*(?:https?://|git@|ssh://|git://)`) },
  { name: 'apt-get', pattern: new RegExp(`${CMD}apt(?:-get)?\\s+(?:-\\S+\\s+)*(?:update|install|upgrade)\\b`) },
  { name: 'apk add', pattern: new RegExp(`${CMD}apk\\s+(?:-\\S+\\s+)*(?:add|update)\\b`), offline: /--no-network\b/ },
  { name: 'yum/dnf install', pattern: new RegExp(`${CMD}(?:yum|dnf|microdnf)\\s+(?:-\\S+\\s+)*install\\b`) },
  {
    name: 'uv',
    pattern: new RegExp(`${CMD}(?:uvx\\b|uv\\s+(?:pip\\s+install|tool\\s+(?:install|run)|add|sync|run\\s+[^#\\n]*--with)\\b)`),
    offline: /--offline\b/,
  },
  {
    name: 'pip install',
    pattern: new RegExp(`${CMD}(?:pip3?|python3?(?:\\.\\d+)?\\s+-m\\s+pip)\\s+(?:-\\S+\\s+)*install\\b`),
    offline: /--no-index\b|--find-links\b|\s-f\s/,
  },
  { name: 'conda install', pattern: new RegExp(`${CMD}(?:conda|mamba|micromamba)\\s+(?:install|create)\\b`), offline: /--offline\b/ },
  {
    name: 'npm install',
    pattern: new RegExp(`${CMD}(?:npm\\s+(?:install|i|ci)|npx|yarn\\s+(?:add|install)|pnpm\\s+(?:add|install))\\b`),
    offline: /--offline\b/,
  },
  { name: 'cargo install', pattern: new RegExp(`${CMD}cargo\\s+install\\b`), offline: /--offline\b/ },
  { name: 'go install', pattern: new RegExp(`${CMD}go\\s+(?:install|get)\\b`) },
  { name: 'gem install', pattern: new RegExp(`${CMD}gem\\s+install\\b`), offline: /--local\b/ },
];

/** Removes a trailing `# comment` (outside quotes, roughly) and leading whitespace. */
function code(line: string): string {
  let quote: string | null = null;
  for (let i = 0; i < line.length; i += 1) {
    const ch = line[i];
    if (quote !== null) {
      if (ch === quote) quote = null;
    } else if (ch === '"' || ch === "'") quote = ch;
    else if (ch === '#' && (i === 0 || /\s/.test(line[i - 1] ?? ''))) return line.slice(0, i);
  }
  return line;
}

/** Every line of the script that appears to fetch from the network, in order, at most one rule (the first) per line. */
export function findNetworkFetches(script: string): NetworkFetch[] {
  const out: NetworkFetch[] = [];
  const lines = script.split(/\r?\n/);
  lines.forEach((raw, i) => {
    const text = code(raw);
    if (text.trim() === '') return;
    for (const rule of RULES) {
      if (rule.pattern.test(text) && !(rule.offline?.test(text) ?? false)) {
        out.push({ line: i + 1, command: rule.name });
        return;
      }
    }
  });
  return out;
}

/**
 * The pure half of `assay task check` (docs/task-format.md, "Authoring a task"): static scans of a task's files, the
 * hostile workspace planted to try to write the reward, and the verdicts computed from Judge outcomes. The runtime
 * (libs/runtime/src/task-check.ts) builds, judges and feeds what it saw in here.
 */

export type CheckStatus = 'ok' | 'failed' | 'skipped';

export interface CheckResult {
  readonly name: CheckName;
  readonly status: CheckStatus;
  readonly detail: string;
}

/** The checks, in the order they are reported; the first failed one is the reason given on exit. */
export const CHECK_NAMES = [
  'valid',
  'build',
  'leak-context',
  'leak-image',
  'verifier-interpreters',
  'reward-written',
  'separates',
  'deterministic',
  'reward-writable',
  'judge-duration',
] as const;
export type CheckName = (typeof CHECK_NAMES)[number];

/** One Judge's outcome, as the check needs it. */
export interface JudgeOutcome {
  readonly status: string;
  readonly score: number | null;
  readonly durationMs: number;
  readonly detail: string | null;
}

export const HOSTILE_MARKER = 'ASSAY-CHECK-HOSTILE-WROTE';
export const HOSTILE_KEY = 'assay_check_hostile';
export const HOSTILE_SCORE = 987654321;

const HOSTILE_PY = `# --- planted by assay task check: candidate code trying to write the verdict (must fail) ---
def _assay_check_hostile():
    import os
    # Where the marker can reach the Judge's output: this process's streams, and the stdout of its ancestors (test.sh
    # holds the container's), which a process of the same uid and capabilities may open.
    sinks, pid = ["/dev/stdout", "/dev/stderr", "/proc/1/fd/1"], os.getppid()
    for _ in range(8):
        if pid <= 1:
            break
        sinks.append("/proc/%d/fd/1" % pid)
        try:
            pid = int(open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[1])
        except Exception:
            break
    for path, text in (("/logs/verifier/reward.json", '{"reward": ${HOSTILE_SCORE}, "${HOSTILE_KEY}": 1}'), ("/logs/verifier/reward.txt", "${HOSTILE_SCORE}")):
        try:
            with open(path, "w") as f:
                f.write(text)
        except Exception:
            continue
        for sink in sinks:
            try:
                with open(sink, "a") as o:
                    o.write("${HOSTILE_MARKER} " + path + "\\n")
            except Exception:
                pass
_assay_check_hostile()
# --- end of planted code ---
`;

const HOSTILE_SH = `# --- planted by assay task check: candidate code trying to write the verdict (must fail) ---
_assay_check_hostile() {
  # Where the marker can reach the Judge's output: this shell's streams, and the stdout of its ancestors (test.sh
  # holds the container's). A function, so the positional parameters it sets are its own, not the script's.
  _assay_sinks="/dev/stdout /dev/stderr /proc/1/fd/1"
  _assay_pid=$PPID
  for _assay_i in 1 2 3 4 5 6 7 8; do
    [ "$_assay_pid" -gt 1 ] 2>/dev/null || break
    _assay_sinks="$_assay_sinks /proc/$_assay_pid/fd/1"
    _assay_stat=$(cat "/proc/$_assay_pid/stat" 2>/dev/null) || break
    set -- \${_assay_stat##*) }
    _assay_pid=$2
  done
  for _assay_p in /logs/verifier/reward.json /logs/verifier/reward.txt; do
    if { case "$_assay_p" in *.json) printf '{"reward": ${HOSTILE_SCORE}, "${HOSTILE_KEY}": 1}' ;; *) printf '${HOSTILE_SCORE}' ;; esac; } > "$_assay_p" 2>/dev/null; then
      for _assay_o in $_assay_sinks; do echo "${HOSTILE_MARKER} $_assay_p" 2>/dev/null >>"$_assay_o"; done
    fi
  done
}
_assay_check_hostile
# --- end of planted code ---
`;

/**
 * The file with code planted that tries to write the reward files when it runs, or null for a file it cannot be
 * planted in (only Python and shell files are). Python: at the top (after a `#!` line), or at the end when the file
 * has `from __future__` imports, which must come first.
 */
export function plantHostile(path: string, content: string): string | null {
  const lower = path.toLowerCase();
  if (lower.endsWith('.py')) {
    if (/^\s*from\s+__future__\s+import/m.test(content)) return `${content}${content.endsWith('\n') ? '' : '\n'}${HOSTILE_PY}`;
    return withShebang(content, HOSTILE_PY);
  }
  if (lower.endsWith('.sh')) return withShebang(content, HOSTILE_SH);
  return null;
}

function withShebang(content: string, planted: string): string {
  if (content.startsWith('#!')) {
    const nl = content.indexOf('\n');
    if (nl < 0) return `${content}\n${planted}`;
    return `${content.slice(0, nl + 1)}${planted}${content.slice(nl + 1)}`;
  }
  return `${planted}${content}`;
}

/** What the hostile Judge shows: whether a planted write reached the verdict or the output. */
export function hostileVerdict(o: { rewards: Readonly<Record<string, number>> | null; output: string }): { wrote: boolean; how: string } {
  if (o.rewards && (HOSTILE_KEY in o.rewards || Object.values(o.rewards).includes(HOSTILE_SCORE)))
    return { wrote: true, how: 'the planted reward became the verdict' };
  const m = new RegExp(`${HOSTILE_MARKER} (\\S+)`).exec(o.output);
  if (m) return { wrote: true, how: `candidate code wrote ${m[1]}` };
  return { wrote: false, how: '' };
}

export interface ScriptFinding {
  readonly line: number;
  readonly text: string;
  readonly why: string;
}

const INTERPRETERS = /(?:^|[\s;&|(`])(python[0-9.]*|node|nodejs|perl|ruby|php|Rscript|julia)(?=\s|$)/;
const BUILD_TOOLS = /(?:^|[\s;&|(`])(pytest|py\.test|make|npm|npx|yarn|pnpm|tox|nox|cargo|go\s+(?:run|test|build)|mvn|gradle|pip3?\s+install)(?=\s|$)/;

/**
 * Lines of a test.sh (run as root in the workdir, which is the candidate's snapshot) that start an interpreter or a
 * build tool with the workdir on its import path, or on a file in the workdir, outside `run-as-candidate`.
 * Heuristic, line by line: comments are ignored, `cd` is followed, a line naming run-as-candidate is trusted.
 */
export function findRootInterpreterRisks(script: string, workdir: string): ScriptFinding[] {
  const out: ScriptFinding[] = [];
  const wd = workdir.replace(/\/+$/, '') || '/';
  let cwd = wd;
  const lines = script.split('\n');
  let heredoc: string | null = null;
  lines.forEach((raw, i) => {
    const text = raw.trim();
    if (heredoc !== null) {
      if (text === heredoc) heredoc = null;
      else if (
        /sys\.path\.(?:insert|append)\([^)]*(?:['"]\.?['"]|os\.getcwd\(\)|['"]\.\/?['"])/.test(text) ||
        (wd !== '/' && text.includes(`sys.path`) && text.includes(wd))
      )
        out.push({ line: i + 1, text, why: 'puts the workdir on sys.path in a root Python' });
      return;
    }
    const hd = /<<-?\s*['"]?([A-Za-z_][A-Za-z0-9_]*)['"]?/.exec(text);
    if (text === '' || text.startsWith('#')) return;
    const code = text.replace(/\s+#.*$/, '');
    const cd = /^(?:cd|pushd)\s+("?)([^"\s;&]+)\1/.exec(code);
    if (cd) cwd = (cd[2] as string).startsWith('/') ? (cd[2] as string) : `${cwd}/${cd[2] as string}`;
    const inWorkdir = cwd === wd || cwd.startsWith(`${wd}/`) || cwd === '.';
    if (/run-as-candidate|RUN_AS_CANDIDATE/.test(code)) {
      if (hd) heredoc = hd[1] as string;
      return;
    }
    const pyPath = /\bPYTHONPATH=("?)([^"\s;]*)\1/.exec(code);
    if (pyPath) {
      const parts = (pyPath[2] as string).split(':');
      if (
        parts.some((p) => p === '' || p === '.' || p.startsWith('./') || p === '$PWD' || p === '${PWD}' || p === wd || (wd !== '/' && p.startsWith(`${wd}/`)))
      )
        out.push({ line: i + 1, text, why: 'PYTHONPATH includes the workdir (or the current directory): root Python imports candidate modules' });
    }
    if (/\bPYTHONSAFEPATH=(?:0|""|''|\s|$)|\bunset\s+PYTHONSAFEPATH\b/.test(code))
      out.push({ line: i + 1, text, why: 'turns PYTHONSAFEPATH off: root Python would import from the current directory (the workdir)' });
    if (/\bNODE_PATH=/.test(code)) out.push({ line: i + 1, text, why: 'NODE_PATH set for a root node' });
    const interp = INTERPRETERS.exec(code);
    if (interp) {
      const name = interp[1] as string;
      const rest = code.slice((interp.index ?? 0) + interp[0].length);
      const args = rest.trim().split(/\s+/);
      const script0 = args.find((a) => !a.startsWith('-') && !/^[A-Z_]+=/.test(a));
      const flagsBefore = args.slice(0, Math.max(0, args.indexOf(script0 ?? ''))).join(' ');
      if (name.startsWith('python') && /-m\s/.test(` ${rest} `) && /\bPYTHONSAFEPATH=0/.test(code)) {
        // reported above
      } else if (script0 && !/^[<>|&;]/.test(script0) && !script0.startsWith('$') && !flagsBefore.match(/(^|\s)-[cem]\b/)) {
        const path = script0.replace(/^["']|["']$/g, '');
        const abs = path.startsWith('/') ? path : `${cwd}/${path}`;
        if (path !== '-' && (abs === wd || abs.startsWith(`${wd}/`) || (!path.startsWith('/') && inWorkdir)))
          out.push({ line: i + 1, text, why: `${name} runs ${path}, a file of the candidate's workspace, as root` });
      }
      if (name === 'node' && inWorkdir && /\s-(e|p)\b/.test(` ${rest}`))
        out.push({ line: i + 1, text, why: 'node -e in the workdir resolves ./node_modules as root' });
      if ((name === 'perl' || name === 'ruby') && /\s-I\s*\.?(\s|$)/.test(` ${rest} `))
        out.push({ line: i + 1, text, why: `${name} -I. imports from the workdir as root` });
    }
    const tool = BUILD_TOOLS.exec(code);
    if (tool && inWorkdir)
      out.push({
        line: i + 1,
        text,
        why: `${(tool[1] as string).split(/\s/)[0] as string} runs as root in the workdir, reading configuration and plugins from the candidate's files`,
      });
    if (/^(?:source|\.)\s+(?!\/)/.test(code) && inWorkdir) out.push({ line: i + 1, text, why: 'sources a file of the workdir as root' });
    if (hd) heredoc = hd[1] as string;
  });
  return out;
}

/** COPY / ADD lines of a Dockerfile whose sources name tests/ or solution/ (the hidden tests, the oracle). */
export function findDockerfileLeaks(dockerfile: string): ScriptFinding[] {
  const out: ScriptFinding[] = [];
  dockerfile.split('\n').forEach((raw, i) => {
    const text = raw.trim();
    const m = /^(COPY|ADD)\s+(.*)$/i.exec(text);
    if (!m) return;
    const args = (m[2] as string).split(/\s+/).filter((a) => !a.startsWith('--'));
    const sources = args.slice(0, -1);
    const bad = sources.find((s) => /(^|\/)(tests?|solution)(\/|$)/.test(s.replace(/^["[]+|["\],]+$/g, '')));
    if (bad) out.push({ line: i + 1, text, why: `${m[1] as string} of ${bad}: hidden tests and the solution must never enter the Work image` });
  });
  return out;
}

export function median(xs: readonly number[]): number | null {
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}

const fmt = (x: number | null): string => (x === null ? 'none' : String(Number(x.toPrecision(6))));

function describeOutcome(o: JudgeOutcome): string {
  return o.status === 'completed' ? `score ${fmt(o.score)}` : `${o.status}${o.detail ? ` (${o.detail.split('\n')[0] as string})` : ''}`;
}

export interface JudgedChecks {
  readonly start: readonly JudgeOutcome[];
  readonly oracle: readonly JudgeOutcome[];
  readonly direction: 'maximize' | 'minimize';
  readonly metric: string | null;
  readonly tolerance: number;
  readonly verifierTimeoutSec: number;
}

/** reward-written, separates, deterministic and judge-duration, from the Judges of the start and of the oracle. */
export function judgedChecks(j: JudgedChecks): CheckResult[] {
  const scored = (os: readonly JudgeOutcome[]) => os.every((o) => o.status === 'completed' && o.score !== null);
  const metric = j.metric ?? 'the primary metric';
  const written: CheckResult = (() => {
    const bad = [...j.oracle.map((o) => ['oracle', o] as const), ...j.start.map((o) => ['start', o] as const)].find(
      ([, o]) => o.status !== 'completed' || o.score === null,
    );
    if (!bad) return { name: 'reward-written', status: 'ok', detail: `every Judge wrote a reward with ${metric}` };
    const [who, o] = bad;
    const why = o.status === 'completed' ? `the reward has no ${metric}${o.detail ? `: ${o.detail.split('\n')[0] as string}` : ''}` : describeOutcome(o);
    return { name: 'reward-written', status: 'failed', detail: `${who}: no usable reward: ${why}` };
  })();
  const startScores = j.start
    .filter((o) => o.status === 'completed')
    .map((o) => o.score)
    .filter((s): s is number => s !== null);
  const oracleScores = j.oracle
    .filter((o) => o.status === 'completed')
    .map((o) => o.score)
    .filter((s): s is number => s !== null);
  const ms = median(startScores);
  const mo = median(oracleScores);
  let separates: CheckResult;
  if (!scored(j.oracle) || !scored(j.start) || ms === null || mo === null) {
    separates = { name: 'separates', status: 'skipped', detail: 'needs scores of both the start and the oracle' };
  } else {
    const gain = j.direction === 'maximize' ? mo - ms : ms - mo;
    const ok = gain > j.tolerance;
    separates = {
      name: 'separates',
      status: ok ? 'ok' : 'failed',
      detail: `${metric} (${j.direction}): oracle ${fmt(mo)}, start ${fmt(ms)}${ok ? '' : ': the solution is no better than the starting workspace'}${j.tolerance > 0 ? ` (tolerance ${j.tolerance})` : ''}`,
    };
  }
  let deterministic: CheckResult;
  const spread = (xs: number[]) => (xs.length ? Math.max(...xs) - Math.min(...xs) : 0);
  if (startScores.length + oracleScores.length < 3 || Math.max(j.start.length, j.oracle.length) < 2) {
    deterministic = { name: 'deterministic', status: 'skipped', detail: 'needs at least two scored Judges of the same workspace (--repeat 2)' };
  } else {
    const ss = spread(startScores);
    const so = spread(oracleScores);
    const ok = ss <= j.tolerance && so <= j.tolerance;
    deterministic = {
      name: 'deterministic',
      status: ok ? 'ok' : 'failed',
      detail: `${ok ? '' : 'the reward changes between Judges of the same workspace: '}spread over ${j.start.length} Judges: start ${fmt(ss)}, oracle ${fmt(so)} (tolerance ${j.tolerance}: [metadata.assay_check] tolerance)`,
    };
  }
  const all = [...j.start, ...j.oracle];
  const durations = median(all.map((o) => o.durationMs / 1000));
  const timedOut = all.filter((o) => o.status === 'verifier_timeout').length;
  const duration: CheckResult = {
    name: 'judge-duration',
    status: timedOut ? 'failed' : 'ok',
    detail: `median ${durations === null ? 'none' : durations.toFixed(2)} s over ${all.length} Judges (verifier timeout ${j.verifierTimeoutSec} s)${timedOut ? `; ${timedOut} timed out` : ''}`,
  };
  return [written, separates, deterministic, duration];
}

/** The first failed check, or null when the task is sound. */
export function firstFailure(checks: readonly CheckResult[]): CheckResult | null {
  return checks.find((c) => c.status === 'failed') ?? null;
}

/** `[metadata.assay_check] tolerance` (absolute, ≥ 0; default 0), or a message saying why it cannot be read. */
export function checkTolerance(metadata: Readonly<Record<string, unknown>>): number | string {
  const t = (metadata['assay_check'] as Record<string, unknown> | undefined)?.['tolerance'];
  if (t === undefined) return 0;
  if (typeof t !== 'number' || !Number.isFinite(t) || t < 0) return 'metadata.assay_check.tolerance: expected a finite number ≥ 0';
  return t;
}

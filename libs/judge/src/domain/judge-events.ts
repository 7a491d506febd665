/**
 * The ledger events of one judging, as plain data (schemas in docs/events.md). Stream: `judge-<judge id>`.
 *
 *   JudgeLaunched   (runtime key) after the container is created and before it starts: what Docker applied
 *   JudgeCompleted  (judge key)   status, exit code, duration, output digest and size, detail
 *   RewardRecorded  (judge key)   only when completed: every reward, the primary metric and score
 *   RuleViolation   (judge key)   only for submission_error: the rule, what broke it, score 0
 */
import { escapeTerminalText } from '@assay/core';
import { OVERLAY_SETUP_CAPABILITIES, SETUP_CAPABILITIES, type JudgeLimits } from './judge-plan';
import type { Rewards } from './reward';
import type { JudgeStatus } from './verdict';

export const JUDGE_STREAM_CATEGORY = 'judge';
export const judgeStream = (judgeId: string): string => `${JUDGE_STREAM_CATEGORY}-${judgeId}`;

/** Where a judging sits in a run; absent for a standalone `assay judge`. */
export interface RunRef {
  readonly run?: string;
  readonly round?: number;
}

type Data = Record<string, unknown>;

const runFields = (r: RunRef): Data => ({ ...(r.run !== undefined ? { run: r.run } : {}), ...(r.round !== undefined ? { round: r.round } : {}) });

export const MAX_DETAIL = 4096;

/** At most `max` characters on one line, control characters shown as escapes (escapeTerminalText): recorded text never executes. */
export function clip(text: string, max = MAX_DETAIL): string {
  const shown = escapeTerminalText(text, { newlines: true });
  if (shown.length <= max) return shown;
  return `${shown.slice(0, max - 15)} [... clipped]`;
}

/** What JudgeLaunched records of the limits: what the daemon reports it applied, plus the harness's own bounds. */
export interface LaunchedLimits {
  readonly cpus: number;
  readonly cpusRequested: number | null;
  readonly memoryBytes: number | null;
  readonly pidsLimit: number | null;
  readonly verifierTimeoutSec: number;
  readonly outputCapBytes: number;
  readonly testsTmpfsBytes: number;
  readonly readOnlyRootfs: boolean;
  readonly capAdd: readonly string[];
  readonly capDrop: readonly string[];
  readonly noNewPrivileges: boolean;
  /**
   * Of capAdd, those the entrypoint's first step alone holds (remount /proc, then dropped from the bounding set
   * before test.sh runs; see SETUP_CAPABILITIES). Empty when none were given.
   */
  readonly setupCapabilities: readonly string[];
  /** /proc hides other users' processes (hidepid=invisible) from test.sh on: the setup capabilities were given. */
  readonly procHidden: boolean;
  /**
   * Writes to the image's root file system: `none` (read-only), `bounded` (writable_rootfs with the setup step:
   * overlays whose changes go to a tmpfs of rootfsWriteBytes; or without it, Docker's own writable layer limited to
   * rootfsWriteBytes by the storage driver), `unbounded` (writable_rootfs without either: Docker's own writable
   * layer, on the host's disk).
   */
  readonly rootfsWrites: 'none' | 'bounded' | 'unbounded';
  readonly rootfsWriteBytes: number | null;
  /**
   * The memory cgroup candidate code runs in (run-as-candidate joins it), made by the setup step on a cgroup v1 host:
   * its processes and the files it writes together hold at most this many bytes, and the verifier keeps the rest
   * of memoryBytes. Null: no such cgroup (no setup step, or a host the step does not support); candidate code is
   * then bounded by its tmpfs places and its oom_score_adj alone.
   */
  readonly candidateMemoryBytes: number | null;
  readonly user: string;
  /** Host GPUs handed to the Judge (nvidia device ids, as Docker applied them); absent without GPUs. */
  readonly gpus?: readonly string[];
}

export function launchedLimits(
  l: JudgeLimits,
  applied: {
    nanoCpus: number | null;
    memoryBytes: number | null;
    pidsLimit: number | null;
    readOnlyRootfs: boolean;
    capAdd: readonly string[];
    capDrop: readonly string[];
    securityOpt: readonly string[];
    deviceRequests?: ReadonlyArray<{ readonly deviceIds: readonly string[] }>;
    /** The storage driver's limit on the container's own writable layer, as applied; null or absent without one. */
    rootfsSizeBytes?: number | null;
  },
  /** The candidate's memory cgroup limit the container was given (the setup step makes it or fails the Judge). */
  candidateMemoryBytes: number | null = null,
): LaunchedLimits {
  const gpus = (applied.deviceRequests ?? []).flatMap((r) => r.deviceIds);
  // The entrypoint refuses to run test.sh while any capability beyond SETUID and SETGID is in its bounding set, and
  // with the setup capabilities it either does every setup step (hide /proc; overlays for a writable root file
  // system) or fails setup: so given them means those were done.
  const capAdd = applied.capAdd.map((c) => c.toUpperCase().replace(/^CAP_/, ''));
  const setup = SETUP_CAPABILITIES.every((c) => capAdd.includes(c));
  const overlay = setup && OVERLAY_SETUP_CAPABILITIES.every((c) => capAdd.includes(c));
  const layerLimit = applied.rootfsSizeBytes ?? null;
  return {
    cpus: applied.nanoCpus === null ? 0 : applied.nanoCpus / 1e9,
    cpusRequested: l.cpusRequested,
    memoryBytes: applied.memoryBytes,
    pidsLimit: applied.pidsLimit,
    verifierTimeoutSec: l.verifierTimeoutSec,
    outputCapBytes: l.outputCapBytes,
    testsTmpfsBytes: l.testsTmpfsBytes,
    readOnlyRootfs: applied.readOnlyRootfs,
    capAdd: [...applied.capAdd].sort(),
    capDrop: [...applied.capDrop].sort(),
    noNewPrivileges: applied.securityOpt.some((o) => /^no-new-privileges(:true|=true)?$/.test(o)),
    setupCapabilities: [...SETUP_CAPABILITIES, ...OVERLAY_SETUP_CAPABILITIES].filter((c) => capAdd.includes(c)).sort(),
    procHidden: setup,
    rootfsWrites: l.readOnlyRootfs ? 'none' : overlay || layerLimit !== null ? 'bounded' : 'unbounded',
    rootfsWriteBytes: l.readOnlyRootfs ? null : overlay ? l.rootfsWriteBytes : layerLimit,
    candidateMemoryBytes: setup ? candidateMemoryBytes : null,
    user: '0:0',
    ...(gpus.length ? { gpus } : {}),
  };
}

export function judgeLaunchedData(
  i: RunRef & { judge: string; image: string; snapshot: string; testsDigest: string; limits: LaunchedLimits; network: string },
): Data {
  return {
    ...runFields(i),
    judge: i.judge,
    image: i.image,
    snapshot: i.snapshot,
    testsDigest: i.testsDigest,
    limits: {
      ...i.limits,
      capAdd: [...i.limits.capAdd],
      capDrop: [...i.limits.capDrop],
      setupCapabilities: [...i.limits.setupCapabilities],
      ...(i.limits.gpus ? { gpus: [...i.limits.gpus] } : {}),
    },
    network: i.network,
  };
}

export function judgeCompletedData(
  i: RunRef & {
    judge: string;
    status: JudgeStatus;
    exitCode: number | null;
    durationMs: number;
    outputDigest: string;
    outputBytes: number;
    detail: string | null;
  },
): Data {
  return {
    ...runFields(i),
    judge: i.judge,
    status: i.status,
    exitCode: i.exitCode,
    durationMs: Math.max(0, Math.round(i.durationMs)),
    outputDigest: i.outputDigest,
    outputBytes: i.outputBytes,
    ...(i.detail ? { detail: clip(i.detail) } : {}),
  };
}

export function rewardRecordedData(i: RunRef & { judge: string; rewards: Rewards; primaryMetric: string | null; primaryScore: number | null }): Data {
  return { ...runFields(i), judge: i.judge, rewards: { ...i.rewards }, primaryMetric: i.primaryMetric, primaryScore: i.primaryScore };
}

export function ruleViolationData(i: RunRef & { rule: string; detail: string }): Data {
  return { ...runFields(i), rule: clip(i.rule, 128), detail: clip(i.detail), score: 0 };
}

/** SHA-256 of nothing: the output digest of a Judge that never ran. */
export const EMPTY_OUTPUT_DIGEST = 'sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';

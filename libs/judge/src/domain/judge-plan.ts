/**
 * How a Judge container is configured, decided from the task plan alone (pure): limits, mounts, privileges.
 *
 *   image            the task's judge image (its clean work image plus the Judge entrypoint layer), by id
 *   workdir          the snapshot, materialised on the host and bind-mounted read-only
 *   /tests           tmpfs, mode 0700 root, filled from stdin by the entrypoint; never exists in Work
 *   /logs/verifier   a fresh, empty, labelled volume, mode 0700 root, read back through the archive API
 *   /tmp, /dev/shm   tmpfs (mode 1777), the only places candidate code can write; together at most half the
 *                    memory limit (/tmp 3/8, /dev/shm 1/8), and one inode per 8 KiB of each (an empty file costs
 *                    kernel memory too), so files the candidate leaves there never take the memory the verifier
 *                    needs (run-as-candidate also makes candidate processes the OOM killer's first choice)
 *   environment      the task's, over PYTHONSAFEPATH=1: a root Python never imports from the workdir by default
 *   sysctls          kernel.shm_rmid_forced=1: System V shared memory dies with the processes using it
 *   network          none, unless the task allows the public network (allowlists are refused for now)
 *   privileges       uid 0 for test.sh, every capability dropped except SETUID and SETGID (run-as-candidate
 *                    needs them to switch to the candidate user), no-new-privileges, read-only root file system
 *   /proc            hidepid=invisible when the image is the task author's (hideProc): the container also gets
 *                    SYS_ADMIN and SETPCAP, which the entrypoint's first step (hide-proc) uses to remount /proc
 *                    and then drops from the bounding set before anything the task or the candidate controls runs
 *   limits           the task's cpus (at most the host's) and memory, no swap, a pids limit, the verifier timeout
 */
import type { ContainerSpec } from '@assay/containers';
import type { JudgeTaskSettings } from './judge-settings';

export const JUDGE_DIR_IN_IMAGE = '/opt/assay/judge';
export const JUDGE_ENTRYPOINT = `${JUDGE_DIR_IN_IMAGE}/entrypoint`;
export const RUN_AS_CANDIDATE = `${JUDGE_DIR_IN_IMAGE}/run-as-candidate`;
export const TESTS_PATH = '/tests';
export const VERIFIER_PATH = '/logs/verifier';
/**
 * Exit status and first line on the container's stderr (the entrypoint's own channel: the verifier's stderr goes to
 * stdout) when the entrypoint could not set the Judge up (an infrastructure error).
 */
export const ENTRYPOINT_SETUP_FAILED_STATUS = 125;
export const ENTRYPOINT_SETUP_FAILED_MARK = 'assay-judge-entrypoint: setup failed:';

export const CAPABILITIES_KEPT = Object.freeze(['SETUID', 'SETGID']) as readonly string[];
/**
 * Held by the entrypoint's first step alone (task-runtime/judge/hide-proc: remount /proc with hidepid, then drop
 * both from the bounding set); never given to a Judge whose image was made from the agent's root file system, where
 * the interpreters root runs are the agent's.
 */
export const SETUP_CAPABILITIES = Object.freeze(['SETPCAP', 'SYS_ADMIN']) as readonly string[];
/** Environment that asks the entrypoint for step 0 (hide-proc). */
export const HIDE_PROC_ENV = 'ASSAY_JUDGE_HIDE_PROC';

export const MiB = 1024 * 1024;
export const DEFAULTS = Object.freeze({
  /** When the task declares no memory. */
  memoryMb: 4096,
  /** When the task declares no cpus. */
  cpus: 2,
  outputCapBytes: MiB,
  tmpBytes: 512 * MiB,
  /** Shares of the memory limit the candidate-writable tmpfs places may hold: /tmp 3/8, /dev/shm 1/8. */
  tmpShare: 3 / 8,
  shmShare: 1 / 8,
  minTestsTmpfsBytes: 16 * MiB,
  /** Largest tests/ the harness injects. */
  maxTestsBytes: 512 * MiB,
});

export interface JudgeLimits {
  /** CPUs the task asked for (null: not declared). */
  readonly cpusRequested: number | null;
  /** CPUs applied: the request (or the default), at most the host's. */
  readonly cpus: number;
  readonly memoryBytes: number;
  readonly pidsLimit: number;
  readonly verifierTimeoutSec: number;
  readonly outputCapBytes: number;
  readonly testsTmpfsBytes: number;
  readonly tmpBytes: number;
  /** Most inodes in /tmp (each file costs about 1 KiB of kernel memory, whatever its size). */
  readonly tmpInodes: number;
  readonly shmBytes: number;
  readonly shmInodes: number;
  readonly readOnlyRootfs: boolean;
}

export interface LimitsInput {
  readonly cpus: number | null;
  readonly memoryMb: number | null;
  readonly shmSizeBytes: number;
  readonly verifierTimeoutSec: number;
  readonly settings: JudgeTaskSettings;
  readonly hostCpus: number;
  readonly testsBytes: number;
  readonly outputCapBytes?: number;
}

/** A share of the memory limit, rounded down to whole MiB (at least 1 MiB). */
function shareOf(memoryBytes: number, share: number): number {
  return Math.max(MiB, Math.floor((memoryBytes * share) / MiB) * MiB);
}

/**
 * Inodes of a candidate-writable tmpfs: one per 8 KiB of its size (at least 1024). An empty file costs about 1 KiB
 * of kernel memory (inode and dentry), charged to the Judge and never counted in the tmpfs size, so without this
 * bound a candidate could hold the Judge's memory with files of no size at all; with it, the inodes cost at most
 * about 1/8 of the mount's size on top.
 */
function inodesFor(bytes: number): number {
  return Math.max(1024, Math.floor(bytes / 8192));
}

/** Environment defaults of every Judge; the task's `[environment.env]` / `[verifier.env]` may override them. */
export const JUDGE_ENV_DEFAULTS = Object.freeze({ PYTHONSAFEPATH: '1' }) as Readonly<Record<string, string>>;

/**
 * Kernel settings of the Judge's own IPC namespace: System V shared memory segments are removed once no process has
 * them attached, so segments candidate code creates and leaves die with its processes instead of holding the
 * Judge's memory (tmpfs places are bounded apart; this is the one other place memory could be left behind).
 */
export const JUDGE_SYSCTLS = Object.freeze({ 'kernel.shm_rmid_forced': '1' }) as Readonly<Record<string, string>>;

export function judgeLimits(i: LimitsInput): JudgeLimits {
  const memoryBytes = (i.memoryMb ?? DEFAULTS.memoryMb) * MiB;
  const cpus = Math.max(0.01, Math.min(i.cpus ?? DEFAULTS.cpus, i.hostCpus));
  const tmpBytes = Math.min(DEFAULTS.tmpBytes, shareOf(memoryBytes, DEFAULTS.tmpShare));
  const shmBytes = Math.max(MiB, Math.min(i.shmSizeBytes, shareOf(memoryBytes, DEFAULTS.shmShare)));
  return Object.freeze({
    cpusRequested: i.cpus,
    cpus,
    memoryBytes,
    pidsLimit: i.settings.pidsLimit,
    verifierTimeoutSec: i.verifierTimeoutSec,
    outputCapBytes: i.outputCapBytes ?? DEFAULTS.outputCapBytes,
    testsTmpfsBytes: Math.max(DEFAULTS.minTestsTmpfsBytes, Math.ceil((i.testsBytes * 2) / MiB) * MiB),
    tmpBytes,
    tmpInodes: inodesFor(tmpBytes),
    shmBytes,
    shmInodes: inodesFor(shmBytes),
    readOnlyRootfs: !i.settings.writableRootfs,
  });
}

export interface JudgeContainerInput {
  readonly judgeId: string;
  readonly imageId: string;
  readonly workdir: string;
  /** The materialised snapshot, bind-mounted read-only at the workdir; null in full-rootfs mode (it is the image). */
  readonly snapshotHostDir: string | null;
  readonly verifierVolume: string;
  /** The verifier command of the plan (`/bin/bash /tests/test.sh`). */
  readonly command: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  readonly network: 'none' | 'bridge';
  readonly limits: JudgeLimits;
  readonly labels: Readonly<Record<string, string>>;
  /** Remount /proc with hidepid (setup-only SYS_ADMIN and SETPCAP); only for an image that is the task author's. */
  readonly hideProc: boolean;
}

export function judgeContainerName(judgeId: string): string {
  return `assay-judge-${judgeId}`;
}

export function judgeVolumeName(judgeId: string): string {
  return `assay-judge-${judgeId}-verifier`;
}

export function judgeContainerSpec(i: JudgeContainerInput): ContainerSpec {
  const l = i.limits;
  return {
    name: judgeContainerName(i.judgeId),
    image: i.imageId,
    entrypoint: [JUDGE_ENTRYPOINT],
    cmd: [...i.command],
    env: { ...JUDGE_ENV_DEFAULTS, ...i.env, ASSAY_JUDGE_WORKDIR: i.workdir, ...(i.hideProc ? { [HIDE_PROC_ENV]: '1' } : {}) },
    workingDir: i.workdir,
    user: '0:0',
    labels: { ...i.labels },
    mounts: [
      ...(i.snapshotHostDir === null ? [] : [{ type: 'bind' as const, source: i.snapshotHostDir, target: i.workdir, readOnly: true }]),
      { type: 'tmpfs', target: TESTS_PATH, sizeBytes: l.testsTmpfsBytes, mode: 0o700 },
      { type: 'volume', source: i.verifierVolume, target: VERIFIER_PATH, readOnly: false },
      { type: 'tmpfs', target: '/tmp', sizeBytes: l.tmpBytes, mode: 0o1777, inodes: l.tmpInodes },
      // Replaces Docker's own /dev/shm (same size), so its inodes are bounded too.
      { type: 'tmpfs', target: '/dev/shm', sizeBytes: l.shmBytes, mode: 0o1777, inodes: l.shmInodes },
    ],
    networkMode: i.network,
    readOnlyRootfs: l.readOnlyRootfs,
    capDrop: ['ALL'],
    capAdd: [...CAPABILITIES_KEPT, ...(i.hideProc ? SETUP_CAPABILITIES : [])],
    noNewPrivileges: true,
    pidsLimit: l.pidsLimit,
    memoryBytes: l.memoryBytes,
    nanoCpus: Math.round(l.cpus * 1e9),
    shmSizeBytes: l.shmBytes,
    sysctls: { ...JUDGE_SYSCTLS },
    init: true,
    openStdin: true,
  };
}

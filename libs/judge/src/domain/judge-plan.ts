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
 *   setup step       when the image is the task author's (`setup`): the container also gets SYS_ADMIN and SETPCAP,
 *                    which the entrypoint's first step (task-runtime/judge/judge-setup) uses, then drops from the
 *                    bounding set before anything the task or the candidate controls runs, to
 *                      - remount /proc hidepid=invisible (candidate code sees none of root's processes);
 *                      - on a cgroup v1 host, make a memory cgroup for candidate code of half the memory limit
 *                        (run-as-candidate joins it): its processes and the tmpfs pages it writes are charged
 *                        there, so the verifier always keeps the other half;
 *                      - for `writable_rootfs`, keep Docker's root file system read-only and lay an overlay on each
 *                        top-level directory whose writes go to a size-bounded tmpfs (/.assay-rw): writable,
 *                        but bounded like every other writable place (without the setup step the writes go to
 *                        Docker's unbounded layer, and JudgeLaunched says so)
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
 * Held by the entrypoint's first step alone (task-runtime/judge/judge-setup: remount /proc with hidepid, then drop
 * both from the bounding set); never given to a Judge whose image was made from the agent's root file system, where
 * the interpreters root runs are the agent's.
 */
export const SETUP_CAPABILITIES = Object.freeze(['SETPCAP', 'SYS_ADMIN']) as readonly string[];
/**
 * Also held by the setup step alone when it lays the overlays of a writable root file system: an overlay keeps its
 * mounter's credentials for its own work (copy-up keeps owners and modes, deletions leave whiteouts), and mounting one
 * over Docker's root file system needs DAC_OVERRIDE. Dropped from the bounding set with the others.
 */
export const OVERLAY_SETUP_CAPABILITIES = Object.freeze(['CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'MKNOD']) as readonly string[];
/** Environment that asks the entrypoint for step 0 (judge-setup): a comma-separated list of SETUP_STEPS. */
export const JUDGE_SETUP_ENV = 'ASSAY_JUDGE_SETUP';
export const SETUP_STEPS = Object.freeze({ hideProc: 'hide-proc', rootfsOverlay: 'rootfs-overlay', candidateMemory: 'candidate-memory' });
/** The candidate-memory step's limit, in bytes (judge-setup removes it from the environment once applied). */
export const CANDIDATE_MEMORY_ENV = 'ASSAY_JUDGE_CANDIDATE_MEMORY';
/** Where the bounded tmpfs that holds a writable root file system's changes is mounted (judge-setup's overlays). */
export const ROOTFS_WRITES_PATH = '/.assay-rw';

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
  /** With writable_rootfs: /tmp 1/8 and the root file system's writes 1/4, so candidate-writable places stay at half. */
  tmpShareWritable: 1 / 8,
  rootfsShare: 1 / 4,
  /**
   * Share of the memory limit candidate code (its processes and the files it writes) may hold where the Judge can
   * give it a memory cgroup of its own: the verifier always keeps the rest.
   */
  candidateShare: 1 / 2,
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
  /** The task does not let test.sh write the image's file system (`writable_rootfs` false). */
  readonly readOnlyRootfs: boolean;
  /** writable_rootfs: the most the writes to the root file system may hold (tmpfs, charged to memory); else 0. */
  readonly rootfsWriteBytes: number;
  readonly rootfsWriteInodes: number;
  /** The candidate's memory cgroup limit, where the Judge can make one (DEFAULTS.candidateShare of memoryBytes). */
  readonly candidateMemoryBytes: number;
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
  /** The task's `storage_mb` (null: not declared): a writable root file system holds at most that much too. */
  readonly storageMb?: number | null;
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
  const writable = i.settings.writableRootfs;
  const tmpBytes = Math.min(DEFAULTS.tmpBytes, shareOf(memoryBytes, writable ? DEFAULTS.tmpShareWritable : DEFAULTS.tmpShare));
  const rootfsWriteBytes = writable ? Math.min(shareOf(memoryBytes, DEFAULTS.rootfsShare), i.storageMb ? i.storageMb * MiB : Infinity) : 0;
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
    readOnlyRootfs: !writable,
    rootfsWriteBytes,
    rootfsWriteInodes: writable ? inodesFor(rootfsWriteBytes) : 0,
    candidateMemoryBytes: shareOf(memoryBytes, DEFAULTS.candidateShare),
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
  /**
   * The entrypoint's setup step (setup-only SYS_ADMIN and SETPCAP): hide /proc, and bound a writable root file
   * system. Only for an image that is the task author's, and unless the operator chose ASSAY_JUDGE_PROC=visible.
   */
  readonly setup: boolean;
  /**
   * With the setup step on a cgroup v1 host: the candidate's memory cgroup limit (limits.candidateMemoryBytes).
   * Null: no cgroup for the candidate (no setup step, or a host the step does not support yet).
   */
  readonly candidateMemoryBytes: number | null;
}

export function judgeContainerName(judgeId: string): string {
  return `assay-judge-${judgeId}`;
}

export function judgeVolumeName(judgeId: string): string {
  return `assay-judge-${judgeId}-verifier`;
}

/** Whether Docker's root file system is read-only: always, except a writable_rootfs Judge without the setup step. */
export function judgeReadOnlyRootfs(l: JudgeLimits, setup: boolean): boolean {
  return l.readOnlyRootfs || setup;
}

export function judgeContainerSpec(i: JudgeContainerInput): ContainerSpec {
  const l = i.limits;
  const overlay = i.setup && !l.readOnlyRootfs;
  const candidateMemory = i.setup ? i.candidateMemoryBytes : null;
  const steps = i.setup
    ? [SETUP_STEPS.hideProc, ...(overlay ? [SETUP_STEPS.rootfsOverlay] : []), ...(candidateMemory !== null ? [SETUP_STEPS.candidateMemory] : [])]
    : [];
  return {
    name: judgeContainerName(i.judgeId),
    image: i.imageId,
    entrypoint: [JUDGE_ENTRYPOINT],
    cmd: [...i.command],
    env: {
      ...JUDGE_ENV_DEFAULTS,
      ...i.env,
      ASSAY_JUDGE_WORKDIR: i.workdir,
      ...(steps.length ? { [JUDGE_SETUP_ENV]: steps.join(',') } : {}),
      ...(candidateMemory !== null ? { [CANDIDATE_MEMORY_ENV]: String(candidateMemory) } : {}),
    },
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
      ...(overlay ? [{ type: 'tmpfs' as const, target: ROOTFS_WRITES_PATH, sizeBytes: l.rootfsWriteBytes, mode: 0o700, inodes: l.rootfsWriteInodes }] : []),
    ],
    networkMode: i.network,
    readOnlyRootfs: judgeReadOnlyRootfs(l, i.setup),
    capDrop: ['ALL'],
    capAdd: [...CAPABILITIES_KEPT, ...(i.setup ? SETUP_CAPABILITIES : []), ...(overlay ? OVERLAY_SETUP_CAPABILITIES : [])],
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

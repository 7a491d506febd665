/**
 * How a Judge container is configured, decided from the task plan alone (pure): limits, mounts, privileges.
 *
 *   image            the task's judge image (its clean work image plus the Judge entrypoint layer), by id
 *   workdir          the snapshot, materialised on the host and bind-mounted read-only
 *   /tests           tmpfs, mode 0700 root, filled from stdin by the entrypoint; never exists in Work
 *   /logs/verifier   a fresh, empty, labelled volume, mode 0700 root, read back through the archive API
 *   /tmp             tmpfs, mode 1777, so tools work with a read-only root file system
 *   network          none, unless the task allows the public network (allowlists are refused for now)
 *   privileges       uid 0 for test.sh, every capability dropped except SETUID and SETGID (run-as-candidate
 *                    needs them to switch to the candidate user), no-new-privileges, read-only root file system
 *   limits           the task's cpus (at most the host's) and memory, no swap, a pids limit, the verifier timeout
 */
import type { ContainerSpec } from '@assay/containers';
import type { JudgeTaskSettings } from './judge-settings';

export const JUDGE_DIR_IN_IMAGE = '/opt/assay/judge';
export const JUDGE_ENTRYPOINT = `${JUDGE_DIR_IN_IMAGE}/entrypoint`;
export const RUN_AS_CANDIDATE = `${JUDGE_DIR_IN_IMAGE}/run-as-candidate`;
export const TESTS_PATH = '/tests';
export const VERIFIER_PATH = '/logs/verifier';
/** Exit status and first output of the entrypoint when it could not set the Judge up (an infrastructure error). */
export const ENTRYPOINT_SETUP_FAILED_STATUS = 125;
export const ENTRYPOINT_SETUP_FAILED_MARK = 'assay-judge-entrypoint: setup failed:';

export const CAPABILITIES_KEPT = Object.freeze(['SETUID', 'SETGID']) as readonly string[];

export const MiB = 1024 * 1024;
export const DEFAULTS = Object.freeze({
  /** When the task declares no memory. */
  memoryMb: 4096,
  /** When the task declares no cpus. */
  cpus: 2,
  outputCapBytes: MiB,
  tmpBytes: 512 * MiB,
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
  readonly shmBytes: number;
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

export function judgeLimits(i: LimitsInput): JudgeLimits {
  const memoryBytes = (i.memoryMb ?? DEFAULTS.memoryMb) * MiB;
  const cpus = Math.max(0.01, Math.min(i.cpus ?? DEFAULTS.cpus, i.hostCpus));
  return Object.freeze({
    cpusRequested: i.cpus,
    cpus,
    memoryBytes,
    pidsLimit: i.settings.pidsLimit,
    verifierTimeoutSec: i.verifierTimeoutSec,
    outputCapBytes: i.outputCapBytes ?? DEFAULTS.outputCapBytes,
    testsTmpfsBytes: Math.max(DEFAULTS.minTestsTmpfsBytes, Math.ceil((i.testsBytes * 2) / MiB) * MiB),
    tmpBytes: Math.min(DEFAULTS.tmpBytes, memoryBytes),
    shmBytes: Math.min(i.shmSizeBytes, memoryBytes),
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
    env: { ...i.env, ASSAY_JUDGE_WORKDIR: i.workdir },
    workingDir: i.workdir,
    user: '0:0',
    labels: { ...i.labels },
    mounts: [
      ...(i.snapshotHostDir === null ? [] : [{ type: 'bind' as const, source: i.snapshotHostDir, target: i.workdir, readOnly: true }]),
      { type: 'tmpfs', target: TESTS_PATH, sizeBytes: l.testsTmpfsBytes, mode: 0o700 },
      { type: 'volume', source: i.verifierVolume, target: VERIFIER_PATH, readOnly: false },
      { type: 'tmpfs', target: '/tmp', sizeBytes: l.tmpBytes, mode: 0o1777 },
    ],
    networkMode: i.network,
    readOnlyRootfs: l.readOnlyRootfs,
    capDrop: ['ALL'],
    capAdd: [...CAPABILITIES_KEPT],
    noNewPrivileges: true,
    pidsLimit: l.pidsLimit,
    memoryBytes: l.memoryBytes,
    nanoCpus: Math.round(l.cpus * 1e9),
    shmSizeBytes: l.shmBytes,
    init: true,
    openStdin: true,
  };
}

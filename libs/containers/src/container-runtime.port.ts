/**
 * The container runtime port: the few Docker Engine operations Assay needs, in Assay's words. Adapters: dockerode
 * (the real daemon) and an in-memory fake; one contract suite (tests/judge/container-runtime.contract.ts) runs
 * against both. Nothing here knows about Judges: the judge lib decides what to ask for.
 */

/** Mounts, in the order given. Bind sources are host paths; volume sources are volume names. */
export type MountSpec =
  | { readonly type: 'bind'; readonly source: string; readonly target: string; readonly readOnly: boolean }
  | { readonly type: 'volume'; readonly source: string; readonly target: string; readonly readOnly: boolean }
  | {
      readonly type: 'tmpfs';
      readonly target: string;
      readonly sizeBytes: number;
      readonly mode: number;
      /** Most files and directories it may hold (`nr_inodes`); each costs kernel memory beyond its bytes. Absent: the kernel's default. */
      readonly inodes?: number;
    };

export interface ContainerSpec {
  /** Docker container name (unique); optional. */
  readonly name?: string;
  /** Image reference or id. */
  readonly image: string;
  readonly cmd: readonly string[];
  /** Overrides the image's entrypoint; `[]` clears it. Absent: the image's. */
  readonly entrypoint?: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  readonly workingDir?: string;
  /** `uid[:gid]` or a name known to the image. */
  readonly user?: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly mounts: readonly MountSpec[];
  /** `none` (no interface but loopback) or `bridge` (the daemon's default network). */
  readonly networkMode: 'none' | 'bridge';
  readonly readOnlyRootfs: boolean;
  readonly capDrop: readonly string[];
  readonly capAdd: readonly string[];
  readonly noNewPrivileges: boolean;
  readonly pidsLimit: number;
  /** Memory limit in bytes (swap disabled: memory+swap = memory), or null for none. */
  readonly memoryBytes: number | null;
  /** CPU limit in billionths of a CPU, or null for none. */
  readonly nanoCpus: number | null;
  readonly shmSizeBytes?: number;
  /** Namespaced kernel settings of the container (`HostConfig.Sysctls`), e.g. `kernel.shm_rmid_forced`. */
  readonly sysctls?: Readonly<Record<string, string>>;
  /**
   * A size limit, in bytes, that the kernel enforces on the container's writable layer (Docker's `--storage-opt
   * size`): writes past it fail with ENOSPC. Only some storage drivers can (overlay2 on XFS mounted with project
   * quotas); a daemon whose driver cannot refuses the container with CONTAINER_STORAGE_QUOTA_UNSUPPORTED.
   */
  readonly rootfsSizeBytes?: number;
  /** Run a minimal init as PID 1 (reaps zombies, forwards signals). */
  readonly init: boolean;
  /** Keep stdin open for `start(…, {stdin})`; it is closed after the bytes given there. */
  readonly openStdin: boolean;
  /**
   * Host GPUs handed to the container: a Docker device request with driver `nvidia`, these device ids (host
   * indices such as `0` or UUIDs such as `GPU-…`) and capability `gpu`. Absent or empty: no GPU.
   */
  readonly gpus?: GpuRequest | null;
}

/** A GPU device request (Docker `HostConfig.DeviceRequests[]`): driver `nvidia`, explicit device ids. */
export interface GpuRequest {
  readonly driver: 'nvidia';
  /** Host GPU indices (`0`) or UUIDs (`GPU-…`), at least one. */
  readonly deviceIds: readonly string[];
}

export interface ImageInfo {
  /** Image id, `sha256:<64 hex>`: the image's digest in Assay's records. */
  readonly id: string;
  readonly tags: readonly string[];
  readonly labels: Readonly<Record<string, string>>;
  /** The image's WORKDIR ('' when unset). */
  readonly workingDir: string;
  readonly user: string;
  readonly sizeBytes: number;
  /** The image's Env (`KEY=value` lines) and Cmd, where the adapter reports them (carried over by importImage). */
  readonly env?: readonly string[];
  readonly cmd?: readonly string[] | null;
}

/** An image made from a root file system tar (`docker import`), with the configuration given here. */
export interface ImportImageOptions {
  /** Tag given to the result, `repo:tag`. */
  readonly tag: string;
  readonly labels: Readonly<Record<string, string>>;
  /** Image configuration: Env (`KEY=value`), WorkingDir, Cmd, User, as `docker import --change` sets them. */
  readonly env: readonly string[];
  readonly workingDir: string;
  readonly cmd: readonly string[] | null;
  readonly user: string;
  readonly timeoutMs: number;
}

export interface ImageSummary {
  readonly id: string;
  readonly tags: readonly string[];
  readonly labels: Readonly<Record<string, string>>;
}

/** What the daemon reports about a container: the configuration as applied, and its state. */
export interface ContainerInfo {
  readonly id: string;
  readonly name: string;
  /** Image id the container was created from. */
  readonly imageId: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly running: boolean;
  /** Null while it has not exited. */
  readonly exitCode: number | null;
  readonly oomKilled: boolean;
  readonly networkMode: string;
  readonly readOnlyRootfs: boolean;
  readonly capAdd: readonly string[];
  readonly capDrop: readonly string[];
  readonly securityOpt: readonly string[];
  readonly pidsLimit: number | null;
  readonly memoryBytes: number | null;
  readonly nanoCpus: number | null;
  readonly mounts: ReadonlyArray<{ type: string; target: string; readOnly: boolean; source: string }>;
  /** The namespaced kernel settings as applied (empty when none), where the adapter reports them. */
  readonly sysctls?: Readonly<Record<string, string>>;
  /** The size limit on its writable layer as applied (`HostConfig.StorageOpt.size`); null without one. */
  readonly rootfsSizeBytes?: number | null;
  /** The GPU device requests as applied (driver and device ids); empty without GPUs. */
  readonly deviceRequests?: ReadonlyArray<{ readonly driver: string; readonly deviceIds: readonly string[]; readonly capabilities: readonly string[] }>;
}

export interface ContainerSummary {
  readonly id: string;
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly running: boolean;
}

export interface VolumeSummary {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
}

export type OutputStream = 'stdout' | 'stderr';

export interface StartIo {
  /** Bytes written to the container's stdin once it starts, then stdin is closed (needs `openStdin`). */
  readonly stdin?: AsyncIterable<Uint8Array> | Uint8Array;
  /** Every chunk the container writes, in order. Called synchronously; keep it cheap. */
  readonly onOutput: (stream: OutputStream, chunk: Buffer) => void;
}

export interface StartedContainer {
  /** Resolves when the container's output has ended (after it exits) and every chunk was handed to onOutput. */
  readonly outputEnded: Promise<void>;
}

/** A process started in a running container (`docker exec`). */
export interface ExecSpec {
  readonly argv: readonly string[];
  readonly env?: Readonly<Record<string, string>>;
  /** Default: the container's working directory. */
  readonly workingDir?: string;
}

export interface RunningExec {
  /** Resolves when the process's output has ended (it exited, or the stream broke) and every chunk was handed on. */
  readonly outputEnded: Promise<void>;
  /** Its exit status once its output ended; null when the daemon cannot say (still running, or gone with Work). */
  exitCode(): Promise<number | null>;
  /** Stops following the process: its output is no longer read (the process itself goes when its container does). */
  detach(): void;
}

export type WaitResult = { readonly exited: true; readonly exitCode: number } | { readonly exited: false };

export interface BuildOptions {
  /** Tag given to the result, `repo:tag`. */
  readonly tag: string;
  readonly labels: Readonly<Record<string, string>>;
  /** Network of RUN steps: `none` keeps builds off the network. */
  readonly networkMode: 'none' | 'default';
  readonly timeoutMs: number;
  /** Each line of the build log as it arrives. */
  readonly onLog: (line: string) => void;
}

/** Label filter: `key` alone matches any value. */
export type LabelFilter = Readonly<Record<string, string | true>>;

/** What the daemon says of itself (`docker info`), as far as Assay uses it. */
export interface DaemonInfo {
  /** The OCI runtimes it offers by name (`runc`, and `nvidia` with the NVIDIA Container Toolkit). */
  readonly runtimes: readonly string[];
  /** The directories it reads CDI device specs from (Docker 25+); empty when it reports none. */
  readonly cdiSpecDirs: readonly string[];
  /** Its security options as reported (`name=seccomp,profile=builtin`, `name=userns` under `--userns-remap`, ...). */
  readonly securityOptions: readonly string[];
  /** The cgroup version its containers get (`docker info` CgroupVersion); null when it does not say. */
  readonly cgroupVersion: 1 | 2 | null;
}

/** Whether the daemon runs containers in a remapped user namespace (`dockerd --userns-remap`): their root is not the host's. */
export const remapsUsers = (info: DaemonInfo): boolean => info.securityOptions.some((o) => o.split(',').includes('name=userns'));

export interface ContainerRuntime {
  /** Checks the daemon answers; CONTAINER_UNAVAILABLE otherwise. */
  ping(): Promise<void>;
  /** What the daemon says of itself (`docker info`); CONTAINER_UNAVAILABLE when it does not answer. */
  daemonInfo(): Promise<DaemonInfo>;
  /** Null when no such image exists locally. Never contacts a registry. */
  inspectImage(ref: string): Promise<ImageInfo | null>;
  /** Builds from a tar build context (Dockerfile at its root). CONTAINER_BUILD_FAILED with the log tail. */
  buildImage(context: AsyncIterable<Uint8Array>, o: BuildOptions): Promise<{ id: string }>;
  createVolume(name: string, labels: Readonly<Record<string, string>>): Promise<void>;
  /** Removes a volume; a missing one is not an error. */
  removeVolume(name: string): Promise<void>;
  createContainer(spec: ContainerSpec): Promise<string>;
  /** Attaches to the container's streams, then starts it. */
  start(id: string, io: StartIo): Promise<StartedContainer>;
  /** Waits for the container to exit, at most timeoutMs. */
  wait(id: string, timeoutMs: number): Promise<WaitResult>;
  /** SIGKILL; a container that is not running is not an error. */
  kill(id: string): Promise<void>;
  /** Null when no such container exists. */
  inspectContainer(id: string): Promise<ContainerInfo | null>;
  /**
   * A tar archive of `path` in the container (running or stopped; volumes included, tmpfs not). The last path
   * component is archived as it is (a symlink stays a symlink). Null when the path does not exist.
   */
  readArchive(id: string, path: string): Promise<AsyncIterable<Uint8Array> | null>;
  /** Removes a container (killing it if needed) and its anonymous volumes; a missing one is not an error. */
  removeContainer(id: string): Promise<void>;
  listContainers(filter: LabelFilter): Promise<ContainerSummary[]>;
  listVolumes(filter: LabelFilter): Promise<VolumeSummary[]>;
  /**
   * The container's whole file system as a tar stream (`docker export`): its root file system with every layer
   * flattened; volumes, bind mounts and tmpfs mounts are not included. CONTAINER_NOT_FOUND when it does not exist.
   */
  exportContainer(id: string): Promise<AsyncIterable<Uint8Array>>;
  /** Makes an image from a root file system tar (`docker import`); returns its id. Never contacts a registry. */
  importImage(rootfs: AsyncIterable<Uint8Array>, o: ImportImageOptions): Promise<{ id: string }>;
  /** Removes an image (by id or tag, forced: its tags go with it); a missing one is not an error. */
  removeImage(ref: string): Promise<void>;
  listImages(filter: LabelFilter): Promise<ImageSummary[]>;
  /**
   * Starts a process in a running container, its output handed to `onOutput` as it comes. CONTAINER_NOT_FOUND when
   * the container does not exist; CONTAINER_OPERATION_FAILED when it is not running (or paused).
   */
  exec(id: string, spec: ExecSpec, onOutput: StartIo['onOutput']): Promise<RunningExec>;
  /**
   * Freezes every process of a running container (`docker pause`). The daemon's message is kept in the error
   * (CONTAINER_OPERATION_FAILED): "unable to freeze" when the kernel's freezer gives up, "already paused".
   */
  pause(id: string): Promise<void>;
  /** Thaws a paused container (`docker unpause`). */
  unpause(id: string): Promise<void>;
  /**
   * Bytes written to the container's own writable layer (`docker inspect --size`: SizeRw), which the daemon
   * measures by walking the layer; null when it does not say. CONTAINER_NOT_FOUND when it does not exist.
   */
  writableLayerBytes(id: string): Promise<number | null>;
}

/** The injection token a composition root binds the ContainerRuntime to (@assay/runtime's RuntimeModule: dockerode). */
export const CONTAINER_RUNTIME = Symbol.for('assay.ContainerRuntime');

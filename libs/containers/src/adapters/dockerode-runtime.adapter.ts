/**
 * The ContainerRuntime port over the Docker Engine API, through dockerode (Docker 20.10 and later, API 1.41).
 * Talks to the daemon's Unix socket (DOCKER_HOST or /var/run/docker.sock); never contacts a registry: images are
 * only inspected and built locally, and builds never pull.
 */
import { Readable } from 'node:stream';
import Docker from 'dockerode';
import { isAssayError } from '@assay/core';
import type {
  BuildOptions,
  ContainerInfo,
  ContainerRuntime,
  ContainerSpec,
  ContainerSummary,
  DaemonInfo,
  ExecSpec,
  ImageInfo,
  ImageSummary,
  ImportImageOptions,
  LabelFilter,
  RunningExec,
  StartIo,
  StartedContainer,
  VolumeSummary,
  WaitResult,
} from '../container-runtime.port';
import { containerError } from '../containers.errors';
import { dockerDeviceRequests } from '../gpu-request';

interface DockerHttpError {
  statusCode?: number;
  code?: string;
  reason?: string;
  json?: { message?: string } | null;
  message?: string;
}

const statusOf = (e: unknown): number | undefined => (e as DockerHttpError | undefined)?.statusCode;

/** A size storage option as the daemon reports it (`10G`, `1048576`, `512m`), in bytes; null when absent or unreadable. */
function sizeOpt(v: string | undefined): number | null {
  const m = /^(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?$/i.exec((v ?? '').trim());
  if (!m) return null;
  const unit = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3, t: 1024 ** 4 }[(m[2] ?? '').toLowerCase() as '' | 'k' | 'm' | 'g' | 't'];
  return Math.round(Number(m[1]) * unit);
}

function daemonMessage(e: unknown): string {
  const d = e as DockerHttpError;
  const m = d?.json?.message ?? d?.message ?? String(e);
  return m.replace(/^\(HTTP code \d+\) [a-z ]+ - /, '').trim();
}

const UNREACHABLE = new Set(['ECONNREFUSED', 'ENOENT', 'EACCES', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT']);

function fail(op: string, e: unknown, details: Record<string, unknown> = {}) {
  if (isAssayError(e)) return e;
  const code = (e as DockerHttpError | undefined)?.code;
  if (code && UNREACHABLE.has(code)) {
    return containerError(
      'CONTAINER_UNAVAILABLE',
      `the Docker daemon does not answer (${code} while trying to ${op}); start it with scripts/ensure-docker.sh (as root), or set DOCKER_HOST`,
      details,
      e,
    );
  }
  return containerError('CONTAINER_OPERATION_FAILED', `docker could not ${op}: ${daemonMessage(e)}`, { ...details, statusCode: statusOf(e) ?? null }, e);
}

/**
 * Runs `fn`, an operation on container `id` named by `verb`: a 404 is CONTAINER_NOT_FOUND ("no container <id> to
 * <verb>"), anything else what fail() makes of it ("docker could not <verb> container <id>: ...").
 */
async function onContainer<T>(id: string, verb: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    if (statusOf(e) === 404) throw containerError('CONTAINER_NOT_FOUND', `no container ${id.slice(0, 12)} to ${verb}`, { container: id }, e);
    throw fail(`${verb} container ${id.slice(0, 12)}`, e, { container: id });
  }
}

/** `docker import --change` lines for an image's configuration (JSON forms, so nothing is shell-parsed). */
export function importChanges(o: Pick<ImportImageOptions, 'env' | 'workingDir' | 'cmd' | 'user' | 'labels'>): string[] {
  const out: string[] = [];
  for (const e of o.env) {
    const eq = e.indexOf('=');
    if (eq <= 0 || /[\n\r]/.test(e)) continue;
    out.push(`ENV ${e.slice(0, eq)}=${JSON.stringify(e.slice(eq + 1))}`);
  }
  if (o.workingDir) out.push(`WORKDIR ${o.workingDir}`);
  if (o.cmd && o.cmd.length) out.push(`CMD ${JSON.stringify(o.cmd)}`);
  if (o.user) out.push(`USER ${o.user}`);
  for (const [k, v] of Object.entries(o.labels)) out.push(`LABEL ${JSON.stringify(k)}=${JSON.stringify(v)}`);
  return out;
}

/** An abort signal that fires after `ms`; `timedOut` says whether it did, `clear()` disarms it. */
function abortAfter(ms: number): { readonly signal: AbortSignal; readonly timedOut: boolean; clear(): void } {
  const abort = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    abort.abort();
  }, ms);
  return {
    signal: abort.signal,
    get timedOut() {
      return timedOut;
    },
    clear: () => clearTimeout(timer),
  };
}

/** How long exitCode() waits for the daemon to record an exec's exit once its output ended. */
const EXEC_EXIT_WAIT_MS = 2000;

function labelFilters(filter: LabelFilter): string[] {
  return Object.entries(filter).map(([k, v]) => (v === true ? k : `${k}=${v}`));
}

/** Splits Docker's multiplexed attach stream (8-byte headers: stream type, 3 zero bytes, big-endian length). */
export class StreamDemuxer {
  private buf: Buffer = Buffer.alloc(0);
  constructor(private readonly emit: (stream: 'stdout' | 'stderr', chunk: Buffer) => void) {}

  push(chunk: Buffer): void {
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    while (this.buf.length >= 8) {
      const type = this.buf[0] as number;
      const len = this.buf.readUInt32BE(4);
      if (this.buf.length < 8 + len) return;
      const payload = this.buf.subarray(8, 8 + len);
      this.buf = this.buf.subarray(8 + len);
      if (len > 0) this.emit(type === 2 ? 'stderr' : 'stdout', Buffer.from(payload));
    }
  }
}

export interface DockerodeRuntimeOptions {
  /** An existing client; default: `new Docker()` (DOCKER_HOST or /var/run/docker.sock). */
  readonly docker?: Docker;
  readonly socketPath?: string;
  /** Bound on a ping (ms). */
  readonly pingTimeoutMs?: number;
}

export class DockerodeRuntime implements ContainerRuntime {
  readonly docker: Docker;
  private readonly pingTimeoutMs: number;

  constructor(o: DockerodeRuntimeOptions = {}) {
    this.docker = o.docker ?? (o.socketPath ? new Docker({ socketPath: o.socketPath }) : new Docker());
    this.pingTimeoutMs = o.pingTimeoutMs ?? 5000;
  }

  async ping(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        this.docker.ping(),
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(Object.assign(new Error('ping timed out'), { code: 'ETIMEDOUT' })), this.pingTimeoutMs);
        }),
      ]);
    } catch (e) {
      const f = fail('answer a ping', e);
      if (f.code === 'CONTAINER_UNAVAILABLE') throw f;
      throw containerError('CONTAINER_UNAVAILABLE', `the Docker daemon does not answer: ${f.message}`, {}, e);
    } finally {
      clearTimeout(timer);
    }
  }

  async daemonInfo(): Promise<DaemonInfo> {
    let info: { Runtimes?: Record<string, unknown> | null; CDISpecDirs?: unknown; SecurityOptions?: unknown; CgroupVersion?: unknown };
    try {
      info = (await this.docker.info()) as typeof info;
    } catch (e) {
      throw fail('describe itself (docker info)', e);
    }
    const strings = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []);
    return {
      runtimes: info.Runtimes && typeof info.Runtimes === 'object' ? Object.keys(info.Runtimes) : [],
      cdiSpecDirs: strings(info.CDISpecDirs),
      securityOptions: strings(info.SecurityOptions),
      cgroupVersion: info.CgroupVersion === '1' ? 1 : info.CgroupVersion === '2' ? 2 : null,
    };
  }

  async inspectImage(ref: string): Promise<ImageInfo | null> {
    try {
      const i = await this.docker.getImage(ref).inspect();
      return {
        id: i.Id,
        tags: i.RepoTags ?? [],
        labels: i.Config?.Labels ?? {},
        workingDir: i.Config?.WorkingDir ?? '',
        user: i.Config?.User ?? '',
        sizeBytes: i.Size ?? 0,
        env: i.Config?.Env ?? [],
        cmd: i.Config?.Cmd ?? null,
      };
    } catch (e) {
      if (statusOf(e) === 404) return null;
      throw fail(`inspect image ${ref}`, e, { image: ref });
    }
  }

  async buildImage(context: AsyncIterable<Uint8Array>, o: BuildOptions): Promise<{ id: string }> {
    const deadline = abortAfter(o.timeoutMs);
    const tail: string[] = [];
    const log = (line: string) => {
      tail.push(line);
      if (tail.length > 30) tail.shift();
      o.onLog(line);
    };
    let id: string | null = null;
    let error: string | null = null;
    try {
      const res = await this.docker.buildImage(
        Readable.from(context) as unknown as NodeJS.ReadableStream,
        {
          t: o.tag,
          labels: { ...o.labels },
          networkmode: o.networkMode,
          rm: true,
          forcerm: true,
          abortSignal: deadline.signal,
        } as Docker.ImageBuildOptions,
      );
      let pending = '';
      let partial = '';
      const handle = (text: string) => {
        pending += text;
        let nl: number;
        while ((nl = pending.indexOf('\n')) >= 0) {
          const line = pending.slice(0, nl).trim();
          pending = pending.slice(nl + 1);
          if (!line) continue;
          let msg: { stream?: string; error?: string; errorDetail?: { message?: string }; aux?: { ID?: string }; status?: string };
          try {
            msg = JSON.parse(line) as typeof msg;
          } catch {
            log(line);
            continue;
          }
          if (msg.stream !== undefined) {
            partial += msg.stream;
            let i: number;
            while ((i = partial.indexOf('\n')) >= 0) {
              log(partial.slice(0, i));
              partial = partial.slice(i + 1);
            }
          }
          if (msg.status) log(msg.status);
          if (msg.aux?.ID) id = msg.aux.ID;
          if (msg.error) {
            error = msg.errorDetail?.message ?? msg.error;
            log(`error: ${error}`);
          }
        }
      };
      for await (const chunk of res as unknown as AsyncIterable<Buffer>) handle(chunk.toString('utf8'));
      handle('\n');
      if (partial) log(partial);
    } catch (e) {
      if (deadline.timedOut) {
        throw containerError(
          'CONTAINER_BUILD_TIMEOUT',
          `building ${o.tag} took longer than ${Math.round(o.timeoutMs / 1000)} s (build_timeout_sec); the build was cancelled`,
          {
            tag: o.tag,
            logTail: tail,
          },
        );
      }
      throw fail(`build ${o.tag}`, e, { tag: o.tag, logTail: tail });
    } finally {
      deadline.clear();
    }
    if (error !== null) {
      throw containerError('CONTAINER_BUILD_FAILED', `building ${o.tag} failed: ${error}\n${tail.map((l) => `  | ${l}`).join('\n')}`, {
        tag: o.tag,
        logTail: tail,
      });
    }
    const img = await this.inspectImage(o.tag);
    if (!img) throw containerError('CONTAINER_BUILD_FAILED', `the build of ${o.tag} reported success but no such image exists`, { tag: o.tag });
    if (id !== null && id !== img.id) {
      throw containerError('CONTAINER_BUILD_FAILED', `the build of ${o.tag} produced ${id}, but the tag points at ${img.id} (a concurrent build?)`, {
        tag: o.tag,
      });
    }
    return { id: img.id };
  }

  async createVolume(name: string, labels: Readonly<Record<string, string>>): Promise<void> {
    try {
      await this.docker.createVolume({ Name: name, Driver: 'local', Labels: { ...labels } });
    } catch (e) {
      throw fail(`create volume ${name}`, e, { volume: name });
    }
  }

  async removeVolume(name: string): Promise<void> {
    try {
      await this.docker.getVolume(name).remove({ force: true });
    } catch (e) {
      if (statusOf(e) === 404) return;
      throw fail(`remove volume ${name}`, e, { volume: name });
    }
  }

  async createContainer(spec: ContainerSpec): Promise<string> {
    const deviceRequests = dockerDeviceRequests(spec);
    const tmpfs: Record<string, string> = {};
    const mounts: Docker.MountSettings[] = [];
    for (const m of spec.mounts) {
      if (m.type === 'tmpfs') {
        tmpfs[m.target] =
          `rw,nosuid,nodev,exec,size=${m.sizeBytes}${m.inodes !== undefined ? `,nr_inodes=${m.inodes}` : ''},mode=${m.mode.toString(8).padStart(4, '0')}`;
      } else if (m.type === 'bind') {
        mounts.push({ Type: 'bind', Source: m.source, Target: m.target, ReadOnly: m.readOnly, BindOptions: { Propagation: 'rprivate' } });
      } else {
        mounts.push({
          Type: 'volume',
          Source: m.source,
          Target: m.target,
          ReadOnly: m.readOnly,
          VolumeOptions: { NoCopy: true, Labels: {}, DriverConfig: { Name: 'local', Options: {} } },
        });
      }
    }
    const opts: Docker.ContainerCreateOptions = {
      ...(spec.name ? { name: spec.name } : {}),
      Image: spec.image,
      Cmd: [...spec.cmd],
      ...(spec.entrypoint ? { Entrypoint: [...spec.entrypoint] } : {}),
      Env: Object.entries(spec.env).map(([k, v]) => `${k}=${v}`),
      ...(spec.workingDir ? { WorkingDir: spec.workingDir } : {}),
      ...(spec.user ? { User: spec.user } : {}),
      Labels: { ...spec.labels },
      AttachStdin: spec.openStdin,
      AttachStdout: true,
      AttachStderr: true,
      OpenStdin: spec.openStdin,
      StdinOnce: spec.openStdin,
      Tty: false,
      NetworkDisabled: spec.networkMode === 'none',
      HostConfig: {
        NetworkMode: spec.networkMode === 'none' ? 'none' : 'bridge',
        ReadonlyRootfs: spec.readOnlyRootfs,
        CapDrop: [...spec.capDrop],
        CapAdd: [...spec.capAdd],
        SecurityOpt: spec.noNewPrivileges ? ['no-new-privileges'] : [],
        PidsLimit: spec.pidsLimit,
        ...(spec.memoryBytes !== null ? { Memory: spec.memoryBytes, MemorySwap: spec.memoryBytes } : {}),
        ...(spec.nanoCpus !== null ? { NanoCpus: spec.nanoCpus } : {}),
        ...(spec.shmSizeBytes !== undefined ? { ShmSize: spec.shmSizeBytes } : {}),
        ...(spec.sysctls && Object.keys(spec.sysctls).length ? { Sysctls: { ...spec.sysctls } } : {}),
        ...(spec.rootfsSizeBytes !== undefined ? { StorageOpt: { size: String(spec.rootfsSizeBytes) } } : {}),
        Init: spec.init,
        Privileged: false,
        IpcMode: 'private',
        Tmpfs: tmpfs,
        Mounts: mounts,
        ...(deviceRequests.length ? { DeviceRequests: deviceRequests } : {}),
        // Output goes through the attach stream only: nothing is kept by the daemon, so a flood cannot fill its disk.
        LogConfig: { Type: 'none', Config: {} },
        AutoRemove: false,
      },
    };
    try {
      const c = await this.docker.createContainer(opts);
      return c.id;
    } catch (e) {
      if (statusOf(e) === 404)
        throw containerError(
          'CONTAINER_IMAGE_NOT_FOUND',
          `no image ${spec.image} in the local Docker daemon (nothing is ever pulled)`,
          { image: spec.image },
          e,
        );
      // overlay2: "--storage-opt is supported only for overlay over xfs with 'pquota' mount option"; other drivers
      // word it their own way, all naming the storage option
      if (spec.rootfsSizeBytes !== undefined && !isAssayError(e) && /storage[- ]?opt|quota/i.test(daemonMessage(e)))
        throw containerError(
          'CONTAINER_STORAGE_QUOTA_UNSUPPORTED',
          `the Docker daemon cannot limit a container's writable layer (${daemonMessage(e).split('\n')[0]}); overlay2 can on XFS mounted with project quotas (pquota)`,
          { image: spec.image },
          e,
        );
      throw fail(`create a container from ${spec.image}`, e, { image: spec.image });
    }
  }

  async start(id: string, io: StartIo): Promise<StartedContainer> {
    const c = this.docker.getContainer(id);
    const withStdin = io.stdin !== undefined;
    let stream: NodeJS.ReadWriteStream;
    try {
      stream = await c.attach({ stream: true, stdin: withStdin, stdout: true, stderr: true, hijack: withStdin });
    } catch (e) {
      throw fail(`attach to container ${id.slice(0, 12)}`, e, { container: id });
    }
    const demux = new StreamDemuxer(io.onOutput);
    const destroy = () => (stream as unknown as { destroy?: () => void }).destroy?.();
    const outputEnded = new Promise<void>((resolve) => {
      const done = () => {
        destroy(); // a hijacked connection stays half-open otherwise
        resolve();
      };
      stream.on('data', (b: Buffer) => demux.push(b));
      stream.on('end', done);
      stream.on('close', done);
      stream.on('error', done);
    });
    try {
      await c.start();
    } catch (e) {
      destroy();
      throw fail(`start container ${id.slice(0, 12)}`, e, { container: id });
    }
    if (withStdin) {
      const source = io.stdin as AsyncIterable<Uint8Array> | Uint8Array;
      const write = async () => {
        if (source instanceof Uint8Array) {
          stream.end(Buffer.from(source.buffer, source.byteOffset, source.byteLength));
          return;
        }
        for await (const chunk of source) {
          if (!stream.write(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength))) {
            await new Promise<void>((r) => stream.once('drain', () => r()));
          }
        }
        stream.end();
      };
      await write().catch((e: unknown) => {
        throw fail(`write to the stdin of container ${id.slice(0, 12)}`, e, { container: id });
      });
    }
    return { outputEnded };
  }

  async wait(id: string, timeoutMs: number): Promise<WaitResult> {
    const c = this.docker.getContainer(id);
    let timer: NodeJS.Timeout | undefined;
    const waiting = c.wait() as Promise<{ StatusCode: number }>;
    waiting.catch(() => undefined);
    try {
      const r = await Promise.race([
        waiting.then((w) => ({ exited: true as const, exitCode: w.StatusCode })),
        new Promise<WaitResult>((resolve) => {
          timer = setTimeout(() => resolve({ exited: false }), Math.max(0, timeoutMs));
        }),
      ]);
      return r;
    } catch (e) {
      throw fail(`wait for container ${id.slice(0, 12)}`, e, { container: id });
    } finally {
      clearTimeout(timer);
    }
  }

  async kill(id: string): Promise<void> {
    try {
      await this.docker.getContainer(id).kill({ signal: 'SIGKILL' });
    } catch (e) {
      const s = statusOf(e);
      if (s === 404 || s === 409 || s === 304) return;
      throw fail(`kill container ${id.slice(0, 12)}`, e, { container: id });
    }
  }

  async inspectContainer(id: string): Promise<ContainerInfo | null> {
    try {
      const i = await this.docker.getContainer(id).inspect();
      const hc = i.HostConfig as Docker.HostConfig;
      return {
        id: i.Id,
        name: i.Name.replace(/^\//, ''),
        imageId: i.Image,
        labels: i.Config?.Labels ?? {},
        running: i.State.Running,
        exitCode: i.State.Running || i.State.Status === 'created' ? null : i.State.ExitCode,
        oomKilled: i.State.OOMKilled,
        networkMode: hc.NetworkMode ?? '',
        readOnlyRootfs: hc.ReadonlyRootfs === true,
        capAdd: (hc.CapAdd as string[] | null) ?? [],
        capDrop: (hc.CapDrop as string[] | null) ?? [],
        securityOpt: (hc.SecurityOpt as string[] | null) ?? [],
        pidsLimit: hc.PidsLimit ?? null,
        memoryBytes: hc.Memory ? hc.Memory : null,
        nanoCpus: hc.NanoCpus ? hc.NanoCpus : null,
        mounts: [
          ...(hc.Mounts ?? []).map((m) => ({ type: m.Type, target: m.Target, readOnly: m.ReadOnly === true, source: m.Source })),
          ...Object.keys(hc.Tmpfs ?? {}).map((t) => ({ type: 'tmpfs', target: t, readOnly: false, source: '' })),
        ],
        sysctls: { ...((hc as { Sysctls?: Record<string, string> | null }).Sysctls ?? {}) },
        rootfsSizeBytes: sizeOpt((hc as { StorageOpt?: Record<string, string> | null }).StorageOpt?.size),
        deviceRequests: ((hc as { DeviceRequests?: Docker.DeviceRequest[] | null }).DeviceRequests ?? []).map((r) => ({
          driver: r.Driver ?? '',
          deviceIds: r.DeviceIDs ?? [],
          capabilities: (r.Capabilities ?? []).flat(),
        })),
      };
    } catch (e) {
      if (statusOf(e) === 404) return null;
      throw fail(`inspect container ${id.slice(0, 12)}`, e, { container: id });
    }
  }

  async readArchive(id: string, path: string): Promise<AsyncIterable<Uint8Array> | null> {
    try {
      const s = await this.docker.getContainer(id).getArchive({ path });
      return s as unknown as AsyncIterable<Uint8Array>;
    } catch (e) {
      if (statusOf(e) === 404) return null;
      throw fail(`read ${path} from container ${id.slice(0, 12)}`, e, { container: id, path });
    }
  }

  async removeContainer(id: string): Promise<void> {
    try {
      await this.docker.getContainer(id).remove({ force: true, v: true });
    } catch (e) {
      const s = statusOf(e);
      if (s === 404) return;
      if (s === 409 && /already in progress/.test(daemonMessage(e))) return;
      throw fail(`remove container ${id.slice(0, 12)}`, e, { container: id });
    }
  }

  async listContainers(filter: LabelFilter): Promise<ContainerSummary[]> {
    try {
      const list = await this.docker.listContainers({ all: true, filters: { label: labelFilters(filter) } });
      return list.map((c) => ({ id: c.Id, name: (c.Names[0] ?? '').replace(/^\//, ''), labels: c.Labels ?? {}, running: c.State === 'running' }));
    } catch (e) {
      throw fail('list containers', e);
    }
  }

  async exportContainer(id: string): Promise<AsyncIterable<Uint8Array>> {
    return onContainer(id, 'export', async () => (await this.docker.getContainer(id).export()) as unknown as AsyncIterable<Uint8Array>);
  }

  async importImage(rootfs: AsyncIterable<Uint8Array>, o: ImportImageOptions): Promise<{ id: string }> {
    const deadline = abortAfter(o.timeoutMs);
    const colon = o.tag.lastIndexOf(':');
    const repo = colon > 0 ? o.tag.slice(0, colon) : o.tag;
    const tag = colon > 0 ? o.tag.slice(colon + 1) : 'latest';
    let error: string | null = null;
    let source: Readable | null = null;
    try {
      source = Readable.from(rootfs);
      const res = await this.docker.importImage(
        source as unknown as NodeJS.ReadableStream,
        {
          repo,
          tag,
          changes: importChanges(o),
          abortSignal: deadline.signal,
        } as unknown as Record<string, unknown>,
      );
      let text = '';
      for await (const chunk of res as unknown as AsyncIterable<Buffer>) text += chunk.toString('utf8');
      for (const line of text.split('\n')) {
        if (!line.trim()) continue;
        try {
          const m = JSON.parse(line) as { error?: string; errorDetail?: { message?: string } };
          if (m.error) error = m.errorDetail?.message ?? m.error;
        } catch {
          /* progress text */
        }
      }
    } catch (e) {
      source?.destroy();
      if (deadline.timedOut)
        throw containerError('CONTAINER_OPERATION_FAILED', `importing ${o.tag} took longer than ${Math.round(o.timeoutMs / 1000)} s; it was cancelled`, {
          tag: o.tag,
        });
      // An HTTP error answer (a status code) means the daemon read the stream and refused it, as a streamed error
      // line does below; a transport failure has none.
      const status = statusOf(e);
      throw fail(`import ${o.tag}`, e, { tag: o.tag, ...(status !== undefined ? { refusedByDaemon: true } : {}) });
    } finally {
      deadline.clear();
    }
    // The daemon read the stream and refused what it holds: the caller may tell a bad tar from a bad daemon.
    if (error !== null) throw containerError('CONTAINER_OPERATION_FAILED', `docker could not import ${o.tag}: ${error}`, { tag: o.tag, refusedByDaemon: true });
    const img = await this.inspectImage(o.tag);
    if (!img) throw containerError('CONTAINER_OPERATION_FAILED', `the import of ${o.tag} reported success but no such image exists`, { tag: o.tag });
    return { id: img.id };
  }

  async removeImage(ref: string): Promise<void> {
    try {
      await this.docker.getImage(ref).remove({ force: true, noprune: false });
    } catch (e) {
      if (statusOf(e) === 404) return;
      throw fail(`remove image ${ref}`, e, { image: ref });
    }
  }

  async listImages(filter: LabelFilter): Promise<ImageSummary[]> {
    try {
      const list = await this.docker.listImages({ filters: { label: labelFilters(filter) } } as Docker.ListImagesOptions);
      return list.map((i) => ({ id: i.Id, tags: (i.RepoTags ?? []).filter((t) => t !== '<none>:<none>'), labels: i.Labels ?? {} }));
    } catch (e) {
      throw fail('list images', e);
    }
  }

  async listVolumes(filter: LabelFilter): Promise<VolumeSummary[]> {
    try {
      const r = await this.docker.listVolumes({ filters: { label: labelFilters(filter) } } as Docker.VolumeListOptions);
      return (r.Volumes ?? []).map((v) => ({ name: v.Name, labels: (v.Labels as Record<string, string> | null) ?? {} }));
    } catch (e) {
      throw fail('list volumes', e);
    }
  }

  async exec(id: string, spec: ExecSpec, onOutput: StartIo['onOutput']): Promise<RunningExec> {
    const c = this.docker.getContainer(id);
    const { exec, stream } = await onContainer(id, 'run a process in', async () => {
      const x = await c.exec({
        Cmd: [...spec.argv],
        ...(spec.env ? { Env: Object.entries(spec.env).map(([k, v]) => `${k}=${v}`) } : {}),
        ...(spec.workingDir ? { WorkingDir: spec.workingDir } : {}),
        AttachStdout: true,
        AttachStderr: true,
      });
      return { exec: x, stream: (await x.start({ hijack: true, stdin: false })) as NodeJS.ReadWriteStream };
    });
    const demux = new StreamDemuxer(onOutput);
    const destroy = () => (stream as unknown as { destroy?: () => void }).destroy?.();
    const outputEnded = new Promise<void>((resolve) => {
      stream.on('data', (b: Buffer) => demux.push(b));
      stream.on('end', () => resolve());
      stream.on('close', () => resolve());
      stream.on('error', () => resolve());
    });
    return {
      outputEnded,
      // The daemon can close the output stream a moment before it records the exit (two events it does not order):
      // a process still "running" right after its output ended is asked again, for up to EXEC_EXIT_WAIT_MS.
      exitCode: async () => {
        for (const started = Date.now(); ;) {
          const i = await exec.inspect().catch(() => null);
          if (!i) return null;
          if (!i.Running) return i.ExitCode ?? null;
          if (Date.now() - started >= EXEC_EXIT_WAIT_MS) return null;
          await new Promise((r) => setTimeout(r, 50));
        }
      },
      detach: destroy,
    };
  }

  async pause(id: string): Promise<void> {
    await onContainer(id, 'pause', () => this.docker.getContainer(id).pause());
  }

  async unpause(id: string): Promise<void> {
    await onContainer(id, 'unpause', () => this.docker.getContainer(id).unpause());
  }

  async writableLayerBytes(id: string): Promise<number | null> {
    // dockerode's types miss `size`; the Engine API takes it as a query parameter of inspect.
    const info = (await onContainer(id, 'measure', () =>
      this.docker.getContainer(id).inspect({ size: true } as unknown as Docker.ContainerInspectOptions),
    )) as { SizeRw?: number };
    return typeof info.SizeRw === 'number' ? info.SizeRw : null;
  }
}

/**
 * An in-memory ContainerRuntime for unit tests. Containers run "programs": TypeScript functions looked up by the
 * first word of the command, with a small file system that follows the container's mounts the way Docker does
 * (read-only binds and root file systems refuse writes, volumes outlive the container, tmpfs mounts vanish with it
 * and are invisible to archive reads, binds read the host). The contract suite checks it agrees with Docker.
 */
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import { join, posix } from 'node:path';
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
  MountSpec,
  OutputStream,
  RunningExec,
  StartIo,
  StartedContainer,
  VolumeSummary,
  WaitResult,
} from '../container-runtime.port';
import { containerError } from '../containers.errors';
import { dockerDeviceRequests } from '../gpu-request';
import { packTarSync, readTar, type TarEntryInput } from '../tar/tar';

export type FakeNode =
  { readonly kind: 'file'; readonly data: Buffer; readonly mode: number } | { readonly kind: 'dir' } | { readonly kind: 'symlink'; readonly target: string };

export class FakeFsError extends Error {
  constructor(
    readonly code: 'EROFS' | 'ENOENT' | 'EACCES' | 'EISDIR',
    path: string,
  ) {
    super(`${code}: ${path}`);
  }
}

class Killed extends Error {}

export interface FakeProcess {
  readonly spec: ContainerSpec;
  /** The command, entrypoint included. */
  readonly argv: readonly string[];
  readonly signal: AbortSignal;
  stdin(): Promise<Buffer>;
  write(stream: OutputStream, data: string | Buffer): void;
  writeFile(path: string, data: string | Buffer, mode?: number): void;
  symlink(target: string, path: string): void;
  mkdir(path: string): void;
  readFile(path: string): Buffer;
  exists(path: string): boolean;
  list(dir: string): string[];
  /** Resolves after ms, or throws when the container is killed first. */
  sleep(ms: number): Promise<void>;
  /** Ends the container as the kernel's OOM killer would (exit 137, oomKilled). */
  oom(): never;
}

export type FakeProgram = (p: FakeProcess) => Promise<number>;

interface FakeImage {
  id: string;
  tags: Set<string>;
  labels: Record<string, string>;
  workingDir: string;
  user: string;
  files: Map<string, FakeNode>;
}

interface FakeContainer {
  id: string;
  name: string;
  spec: ContainerSpec;
  image: FakeImage;
  state: 'created' | 'running' | 'exited';
  /** `docker pause`: a paused container's processes are frozen (the fake only refuses exec while paused). */
  paused: boolean;
  exitCode: number | null;
  oomKilled: boolean;
  rootfs: Map<string, FakeNode>;
  tmpfs: Map<string, Map<string, FakeNode>>;
  abort: AbortController;
  exited: Promise<void>;
  markExited: () => void;
}

interface FakeVolume {
  labels: Record<string, string>;
  files: Map<string, FakeNode>;
  inUse: number;
}

type FailOp = 'create' | 'start' | 'wait' | 'readArchive' | 'createVolume' | 'build' | 'ping' | 'exec' | 'pause' | 'unpause' | 'info';

const norm = (p: string): string => posix.normalize(`/${p}`).replace(/\/+$/, '') || '/';

function matches(labels: Readonly<Record<string, string>>, filter: LabelFilter): boolean {
  return Object.entries(filter).every(([k, v]) => (v === true ? k in labels : labels[k] === v));
}

type FakeTarEntry = TarEntryInput & { content?: Buffer };

/** A node of a fake file system as a tar entry named `name` (a directory's name gets its trailing `/`). */
function tarEntryOf(name: string, n: FakeNode): FakeTarEntry {
  if (n.kind === 'file') return { path: name, type: 'file', mode: n.mode, content: n.data };
  if (n.kind === 'dir') return { path: `${name}/`, type: 'dir', mode: 0o755 };
  return { path: name, type: 'symlink', mode: 0o777, linkTarget: n.target };
}

/** The entries packed into one archive, streamed in 4 KiB pieces as Docker streams one. */
function tarStream(entries: readonly FakeTarEntry[]): AsyncIterable<Uint8Array> {
  const tar = packTarSync(entries);
  return (async function* () {
    for (let i = 0; i < tar.length; i += 4096) yield tar.subarray(i, i + 4096);
  })();
}

/** Builtin programs, used by the contract suite (the Docker side runs the equivalent shell commands). */
export const FAKE_BUILTINS: Readonly<Record<string, FakeProgram>> = {
  'fake-exit': async (p) => Number(p.argv[1] ?? 0),
  'fake-echo': async (p) => {
    p.write('stdout', `${p.argv[1] ?? ''}\n`);
    p.write('stderr', `${p.argv[2] ?? ''}\n`);
    return 0;
  },
  'fake-cat-stdin-to': async (p) => {
    p.writeFile(p.argv[1] as string, await p.stdin());
    return 0;
  },
  'fake-write': async (p) => {
    try {
      p.writeFile(p.argv[1] as string, p.argv[2] ?? '');
      return 0;
    } catch (e) {
      p.write('stderr', `${(e as Error).message}\n`);
      return 1;
    }
  },
  'fake-sleep': async (p) => {
    await p.sleep(Number(p.argv[1] ?? 0) * 1000);
    return 0;
  },
  'fake-flood': async (p) => {
    let left = Number(p.argv[1] ?? 0);
    const block = Buffer.alloc(64 * 1024, 0x78);
    while (left > 0) {
      const n = Math.min(left, block.length);
      p.write('stdout', block.subarray(0, n));
      left -= n;
    }
    return 0;
  },
  'fake-net': async (p) => {
    p.write('stdout', p.spec.networkMode === 'none' ? 'lo\n' : 'eth0\nlo\n');
    return 0;
  },
};

export class FakeContainerRuntime implements ContainerRuntime {
  private readonly images = new Map<string, FakeImage>();
  private readonly containers = new Map<string, FakeContainer>();
  private readonly volumes = new Map<string, FakeVolume>();
  private readonly programs = new Map<string, FakeProgram>(Object.entries(FAKE_BUILTINS));
  private readonly failures = new Map<FailOp, string>();
  /** Env and Cmd of imported images (built and added images have none). */
  private readonly imageConfig = new Map<string, { env: string[]; cmd: string[] | null }>();
  private seq = 0;
  /** Every call, for assertions: `op target`. */
  readonly calls: string[] = [];
  available = true;
  /** What daemonInfo() answers (a plain daemon: runc, seccomp, no user-namespace remap, cgroup v1). */
  /**
   * Whether the storage driver can limit a container's writable layer (`rootfsSizeBytes`): false like Docker's
   * overlay2 on ext4, which refuses such a container with CONTAINER_STORAGE_QUOTA_UNSUPPORTED.
   */
  storageQuota = false;
  daemon: DaemonInfo = { runtimes: ['runc'], cdiSpecDirs: [], securityOptions: ['name=seccomp,profile=builtin'], cgroupVersion: 1 };

  addImage(o: { tag: string; id?: string; labels?: Record<string, string>; workingDir?: string; user?: string }): string {
    const id = o.id ?? `sha256:${createHash('sha256').update(`image:${o.tag}`).digest('hex')}`;
    const existing = this.images.get(id);
    const img: FakeImage = existing ?? {
      id,
      tags: new Set(),
      labels: { ...(o.labels ?? {}) },
      workingDir: o.workingDir ?? '',
      user: o.user ?? '',
      files: new Map(),
    };
    this.untag(o.tag);
    img.tags.add(o.tag);
    this.images.set(id, img);
    return id;
  }

  async daemonInfo(): Promise<DaemonInfo> {
    this.injected('info');
    return {
      runtimes: [...this.daemon.runtimes],
      cdiSpecDirs: [...this.daemon.cdiSpecDirs],
      securityOptions: [...this.daemon.securityOptions],
      cgroupVersion: this.daemon.cgroupVersion,
    };
  }

  defineProgram(name: string, program: FakeProgram): void {
    this.programs.set(name, program);
  }

  /** The next call of `op` fails with CONTAINER_OPERATION_FAILED and this message. */
  failNext(op: FailOp, message = 'injected failure'): void {
    this.failures.set(op, message);
  }

  private injected(op: FailOp): void {
    if (!this.available) throw containerError('CONTAINER_UNAVAILABLE', 'the Docker daemon does not answer (fake: unavailable)');
    const m = this.failures.get(op);
    if (m !== undefined) {
      this.failures.delete(op);
      throw containerError('CONTAINER_OPERATION_FAILED', `docker could not ${op}: ${m}`);
    }
  }

  private untag(tag: string): void {
    for (const i of this.images.values()) i.tags.delete(tag);
  }

  private findImage(ref: string): FakeImage | null {
    const direct = this.images.get(ref);
    if (direct) return direct;
    const withTag = ref.includes(':') ? ref : `${ref}:latest`;
    for (const i of this.images.values()) if (i.tags.has(withTag) || i.id.startsWith(`sha256:${ref}`)) return i;
    return null;
  }

  async ping(): Promise<void> {
    this.injected('ping');
  }

  async inspectImage(ref: string): Promise<ImageInfo | null> {
    this.injected('ping');
    const i = this.findImage(ref);
    if (!i) return null;
    const cfg = this.imageConfig.get(i.id);
    return {
      id: i.id,
      tags: [...i.tags],
      labels: { ...i.labels },
      workingDir: i.workingDir,
      user: i.user,
      sizeBytes: 1024,
      env: cfg?.env ?? [],
      cmd: cfg?.cmd ?? null,
    };
  }

  async buildImage(context: AsyncIterable<Uint8Array>, o: BuildOptions): Promise<{ id: string }> {
    this.calls.push(`build ${o.tag}`);
    this.injected('build');
    const hash = createHash('sha256');
    const files = new Map<string, FakeNode>();
    let dockerfile: string | null = null;
    const hashed = (async function* () {
      for await (const c of context) {
        hash.update(c);
        yield c;
      }
    })();
    for await (const r of readTar(hashed, { maxArchiveBytes: 1 << 30, keep: (h) => (h.type === 'file' ? 1 << 26 : false) })) {
      const rel = r.header.path.replace(/^\.\//, '').replace(/\/$/, '');
      if (rel === 'Dockerfile' && r.content) dockerfile = r.content.toString('utf8');
      if (r.header.type === 'file' && r.content) files.set(rel, { kind: 'file', data: r.content, mode: r.header.mode });
    }
    if (dockerfile === null)
      throw containerError('CONTAINER_BUILD_FAILED', `building ${o.tag} failed: no Dockerfile at the root of the context`, { tag: o.tag });
    const lines = dockerfile
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith('#'));
    let base: FakeImage | null = null;
    let workingDir = '';
    const stages = new Set<string>();
    let step = 0;
    for (const line of lines) {
      step += 1;
      o.onLog(`Step ${step}/${lines.length} : ${line}`);
      const [instr, ...rest] = line.split(/\s+/);
      const args = rest.filter((a) => !a.startsWith('--'));
      if (instr?.toUpperCase() === 'FROM') {
        const ref = args[0] ?? '';
        const b: FakeImage | null = stages.has(ref) ? base : this.findImage(ref);
        if (!b) {
          o.onLog(`error: pull access denied for ${ref}`);
          throw containerError('CONTAINER_BUILD_FAILED', `building ${o.tag} failed: no such image ${ref} (fake)`, { tag: o.tag });
        }
        base = b;
        workingDir = b.workingDir;
        if (args[1]?.toUpperCase() === 'AS' && args[2]) stages.add(args[2]);
      } else if (instr?.toUpperCase() === 'WORKDIR') {
        workingDir = posix.resolve(workingDir || '/', args[0] ?? '/');
      } else if (instr?.toUpperCase() === 'RUN' && rest.join(' ').includes('exit 1')) {
        o.onLog('error: The command returned a non-zero code: 1');
        throw containerError('CONTAINER_BUILD_FAILED', `building ${o.tag} failed: The command returned a non-zero code: 1`, { tag: o.tag });
      }
    }
    if (!base) throw containerError('CONTAINER_BUILD_FAILED', `building ${o.tag} failed: no FROM`, { tag: o.tag });
    const id = `sha256:${hash.update(base.id).digest('hex')}`;
    o.onLog(`Successfully built ${id.slice(7, 19)}`);
    const img: FakeImage = this.images.get(id) ?? {
      id,
      tags: new Set(),
      labels: { ...base.labels, ...o.labels },
      workingDir,
      user: base.user,
      files: new Map([...base.files, ...files]),
    };
    this.untag(o.tag);
    img.tags.add(o.tag);
    this.images.set(id, img);
    return { id };
  }

  async createVolume(name: string, labels: Readonly<Record<string, string>>): Promise<void> {
    this.calls.push(`createVolume ${name}`);
    this.injected('createVolume');
    if (!this.volumes.has(name)) this.volumes.set(name, { labels: { ...labels }, files: new Map(), inUse: 0 });
  }

  async removeVolume(name: string): Promise<void> {
    this.calls.push(`removeVolume ${name}`);
    const v = this.volumes.get(name);
    if (!v) return;
    if (v.inUse > 0) throw containerError('CONTAINER_OPERATION_FAILED', `docker could not remove volume ${name}: volume is in use`);
    this.volumes.delete(name);
  }

  async createContainer(spec: ContainerSpec): Promise<string> {
    this.calls.push(`create ${spec.name ?? ''}`);
    this.injected('create');
    dockerDeviceRequests(spec); // the same refusals as the real adapter
    if (spec.rootfsSizeBytes !== undefined && !this.storageQuota)
      throw containerError(
        'CONTAINER_STORAGE_QUOTA_UNSUPPORTED',
        "the Docker daemon cannot limit a container's writable layer (--storage-opt is supported only for overlay over xfs with 'pquota' mount option); overlay2 can on XFS mounted with project quotas (pquota)",
        { image: spec.image },
      );
    const image = this.findImage(spec.image);
    if (!image)
      throw containerError('CONTAINER_IMAGE_NOT_FOUND', `no image ${spec.image} in the local Docker daemon (nothing is ever pulled)`, { image: spec.image });
    for (const m of spec.mounts) {
      if (m.type === 'volume' && !this.volumes.has(m.source)) this.volumes.set(m.source, { labels: {}, files: new Map(), inUse: 0 });
      if (m.type === 'bind' && !fs.existsSync(m.source))
        throw containerError('CONTAINER_OPERATION_FAILED', `docker could not create a container: bind source path does not exist: ${m.source}`);
    }
    this.seq += 1;
    const id = createHash('sha256')
      .update(`container:${this.seq}:${spec.name ?? ''}`)
      .digest('hex');
    if (spec.name && [...this.containers.values()].some((c) => c.name === spec.name)) {
      throw containerError('CONTAINER_OPERATION_FAILED', `docker could not create a container: the name ${spec.name} is already in use`);
    }
    let markExited: () => void = () => undefined;
    const exited = new Promise<void>((r) => (markExited = r));
    const c: FakeContainer = {
      id,
      name: spec.name ?? id.slice(0, 12),
      spec,
      image,
      state: 'created',
      paused: false,
      exitCode: null,
      oomKilled: false,
      rootfs: new Map(image.files),
      tmpfs: new Map(),
      abort: new AbortController(),
      exited,
      markExited,
    };
    for (const m of spec.mounts) {
      if (m.type === 'volume') (this.volumes.get(m.source) as FakeVolume).inUse += 1;
    }
    this.containers.set(id, c);
    return id;
  }

  private container(id: string): FakeContainer {
    const c = this.containers.get(id);
    if (!c) throw containerError('CONTAINER_NOT_FOUND', `no such container ${id.slice(0, 12)}`);
    return c;
  }

  /** The mount serving `path` (longest target prefix), or null for the root file system. */
  private mountFor(c: FakeContainer, path: string): { m: MountSpec; rel: string } | null {
    let best: { m: MountSpec; rel: string } | null = null;
    for (const m of c.spec.mounts) {
      const t = norm(m.target);
      if (path === t || path.startsWith(`${t}/`)) {
        if (!best || t.length > norm(best.m.target).length) best = { m, rel: path === t ? '' : path.slice(t.length + 1) };
      }
    }
    return best;
  }

  private store(c: FakeContainer, path: string): { map: Map<string, FakeNode>; key: string; readOnly: boolean } | { host: string; readOnly: boolean } {
    const p = norm(path);
    const at = this.mountFor(c, p);
    if (!at) return { map: c.rootfs, key: p, readOnly: c.spec.readOnlyRootfs };
    const { m, rel } = at;
    if (m.type === 'bind') return { host: rel ? join(m.source, rel) : m.source, readOnly: m.readOnly };
    if (m.type === 'volume') return { map: (this.volumes.get(m.source) as FakeVolume).files, key: rel, readOnly: m.readOnly };
    let t = c.tmpfs.get(m.target);
    if (!t) c.tmpfs.set(m.target, (t = new Map()));
    return { map: t, key: rel, readOnly: false };
  }

  private process(c: FakeContainer, io: StartIo, stdin: Promise<Buffer>, argv: readonly string[] = [...(c.spec.entrypoint ?? []), ...c.spec.cmd]): FakeProcess {
    const store = (path: string) => this.store(c, path);
    const write = (path: string, node: FakeNode) => {
      const s = store(path);
      if (s.readOnly) throw new FakeFsError('EROFS', path);
      if ('host' in s) {
        if (node.kind === 'file') fs.writeFileSync(s.host, node.data);
        else if (node.kind === 'dir') fs.mkdirSync(s.host, { recursive: true });
        else fs.symlinkSync(node.target, s.host);
        return;
      }
      s.map.set(s.key, node);
    };
    return {
      spec: c.spec,
      argv,
      signal: c.abort.signal,
      stdin: () => stdin,
      write: (stream, data) => {
        if (c.abort.signal.aborted) throw new Killed();
        io.onOutput(stream, Buffer.from(data));
      },
      writeFile: (path, data, mode = 0o644) => write(path, { kind: 'file', data: Buffer.from(data), mode }),
      symlink: (target, path) => write(path, { kind: 'symlink', target }),
      mkdir: (path) => write(path, { kind: 'dir' }),
      readFile: (path) => {
        const s = store(path);
        if ('host' in s) {
          try {
            return fs.readFileSync(s.host);
          } catch {
            throw new FakeFsError('ENOENT', path);
          }
        }
        const n = s.map.get(s.key);
        if (!n || n.kind !== 'file') throw new FakeFsError(n ? 'EISDIR' : 'ENOENT', path);
        return n.data;
      },
      exists: (path) => {
        const s = store(path);
        if ('host' in s) return fs.existsSync(s.host);
        return s.key === '' || s.map.has(s.key) || [...s.map.keys()].some((k) => k.startsWith(`${s.key}/`));
      },
      list: (dir) => {
        const s = store(dir);
        if ('host' in s) return fs.existsSync(s.host) ? fs.readdirSync(s.host).sort() : [];
        const prefix = s.key === '' ? '' : `${s.key}/`;
        const names = new Set<string>();
        for (const k of s.map.keys()) if (k.startsWith(prefix) && k.length > prefix.length) names.add(k.slice(prefix.length).split('/')[0] as string);
        return [...names].sort();
      },
      sleep: (ms) =>
        new Promise<void>((resolve, reject) => {
          if (c.abort.signal.aborted) return reject(new Killed());
          const t = setTimeout(resolve, ms);
          c.abort.signal.addEventListener('abort', () => {
            clearTimeout(t);
            reject(new Killed());
          });
        }),
      oom: () => {
        c.oomKilled = true;
        throw new Killed('oom');
      },
    };
  }

  async start(id: string, io: StartIo): Promise<StartedContainer> {
    this.calls.push(`start ${id.slice(0, 12)}`);
    this.injected('start');
    const c = this.container(id);
    if (c.state !== 'created') throw containerError('CONTAINER_OPERATION_FAILED', `docker could not start container ${id.slice(0, 12)}: already started`);
    const argv = [...(c.spec.entrypoint ?? []), ...c.spec.cmd];
    const program = this.programs.get(argv[0] ?? '');
    if (!program) {
      throw containerError(
        'CONTAINER_OPERATION_FAILED',
        `docker could not start container ${id.slice(0, 12)}: exec: "${argv[0] ?? ''}": executable file not found in $PATH`,
      );
    }
    let stdin: Promise<Buffer>;
    if (io.stdin === undefined || !c.spec.openStdin) stdin = Promise.resolve(Buffer.alloc(0));
    else if (io.stdin instanceof Uint8Array) stdin = Promise.resolve(Buffer.from(io.stdin));
    else {
      const src = io.stdin;
      stdin = (async () => {
        const parts: Buffer[] = [];
        for await (const ch of src) parts.push(Buffer.from(ch));
        return Buffer.concat(parts);
      })();
    }
    c.state = 'running';
    const proc = this.process(c, io, stdin);
    const outputEnded = (async () => {
      await new Promise((r) => setImmediate(r));
      let code: number;
      try {
        code = await program(proc);
      } catch (e) {
        if (e instanceof Killed) code = 137;
        else {
          io.onOutput('stderr', Buffer.from(`fake program crashed: ${(e as Error).message}\n`));
          code = 1;
        }
      }
      if (c.abort.signal.aborted) code = 137;
      c.exitCode = code;
      c.state = 'exited';
      c.paused = false;
      c.tmpfs.clear();
      c.markExited();
    })();
    return { outputEnded };
  }

  async wait(id: string, timeoutMs: number): Promise<WaitResult> {
    this.injected('wait');
    const c = this.container(id);
    let timer: NodeJS.Timeout | undefined;
    const exited = await Promise.race([
      c.exited.then(() => true),
      new Promise<boolean>((r) => {
        timer = setTimeout(() => r(false), Math.max(0, timeoutMs));
      }),
    ]);
    clearTimeout(timer);
    return exited ? { exited: true, exitCode: c.exitCode as number } : { exited: false };
  }

  async kill(id: string): Promise<void> {
    this.calls.push(`kill ${id.slice(0, 12)}`);
    const c = this.containers.get(id);
    if (!c || c.state !== 'running') return;
    c.abort.abort();
    await c.exited;
  }

  async inspectContainer(id: string): Promise<ContainerInfo | null> {
    const c = this.containers.get(id);
    if (!c) return null;
    const s = c.spec;
    return {
      id: c.id,
      name: c.name,
      imageId: c.image.id,
      labels: { ...s.labels },
      running: c.state === 'running',
      exitCode: c.state === 'exited' ? c.exitCode : null,
      oomKilled: c.oomKilled,
      networkMode: s.networkMode,
      readOnlyRootfs: s.readOnlyRootfs,
      capAdd: [...s.capAdd],
      capDrop: [...s.capDrop],
      securityOpt: s.noNewPrivileges ? ['no-new-privileges'] : [],
      pidsLimit: s.pidsLimit,
      memoryBytes: s.memoryBytes,
      nanoCpus: s.nanoCpus,
      mounts: s.mounts.map((m) => ({
        type: m.type,
        target: m.target,
        readOnly: m.type === 'tmpfs' ? false : m.readOnly,
        source: m.type === 'tmpfs' ? '' : m.source,
      })),
      sysctls: { ...(s.sysctls ?? {}) },
      rootfsSizeBytes: s.rootfsSizeBytes ?? null,
      deviceRequests: dockerDeviceRequests(s).map((r) => ({ driver: r.Driver, deviceIds: [...r.DeviceIDs], capabilities: r.Capabilities.flat() })),
    };
  }

  async readArchive(id: string, path: string): Promise<AsyncIterable<Uint8Array> | null> {
    this.calls.push(`readArchive ${path}`);
    this.injected('readArchive');
    const c = this.container(id);
    const p = norm(path);
    const at = this.mountFor(c, p);
    let map: Map<string, FakeNode>;
    let key: string;
    if (!at) {
      map = c.rootfs;
      key = p;
    } else if (at.m.type === 'volume') {
      map = (this.volumes.get(at.m.source) as FakeVolume).files;
      key = at.rel;
    } else if (at.m.type === 'tmpfs') {
      // Docker reads the container's own layer beneath a tmpfs mount: what the program wrote there is not seen.
      map = new Map();
      key = at.rel;
    } else {
      throw containerError('CONTAINER_OPERATION_FAILED', 'fake: archives of bind mounts are not supported');
    }
    const base = posix.basename(p);
    const entries: FakeTarEntry[] = [];
    const isRootOfMap = key === '';
    const self = map.get(key);
    if (!isRootOfMap && !self && ![...map.keys()].some((k) => k.startsWith(`${key}/`))) return null;
    if (self && self.kind !== 'dir') {
      entries.push(tarEntryOf(base, self));
    } else {
      entries.push({ path: `${base}/`, type: 'dir', mode: 0o755 });
      const prefix = isRootOfMap ? '' : `${key}/`;
      for (const [k, n] of [...map.entries()].sort(([a], [b]) => (a < b ? -1 : 1))) {
        if (!k.startsWith(prefix) || k === key) continue;
        entries.push(tarEntryOf(`${base}/${k.slice(prefix.length)}`, n));
      }
    }
    return tarStream(entries);
  }

  async removeContainer(id: string): Promise<void> {
    this.calls.push(`remove ${id.slice(0, 12)}`);
    const c = this.containers.get(id);
    if (!c) return;
    if (c.state === 'running') await this.kill(id);
    for (const m of c.spec.mounts) {
      if (m.type === 'volume') {
        const v = this.volumes.get(m.source);
        if (v) v.inUse = Math.max(0, v.inUse - 1);
      }
    }
    this.containers.delete(id);
  }

  async listContainers(filter: LabelFilter): Promise<ContainerSummary[]> {
    this.injected('ping');
    return [...this.containers.values()]
      .filter((c) => matches(c.spec.labels, filter))
      .map((c) => ({ id: c.id, name: c.name, labels: { ...c.spec.labels }, running: c.state === 'running' }));
  }

  async listVolumes(filter: LabelFilter): Promise<VolumeSummary[]> {
    this.injected('ping');
    return [...this.volumes.entries()].filter(([, v]) => matches(v.labels, filter)).map(([name, v]) => ({ name, labels: { ...v.labels } }));
  }

  async exportContainer(id: string): Promise<AsyncIterable<Uint8Array>> {
    this.calls.push(`export ${id.slice(0, 12)}`);
    this.injected('readArchive');
    const c = this.containers.get(id);
    if (!c) throw containerError('CONTAINER_NOT_FOUND', `no container ${id.slice(0, 12)} to export`, { container: id });
    // The container's own file system only: like `docker export`, nothing of its mounts.
    const entries: FakeTarEntry[] = [];
    for (const [k, n] of [...c.rootfs.entries()].sort(([a], [b]) => (a < b ? -1 : 1))) {
      const name = k.replace(/^\/+/, '');
      if (name) entries.push(tarEntryOf(name, n));
    }
    return tarStream(entries);
  }

  async importImage(rootfs: AsyncIterable<Uint8Array>, o: ImportImageOptions): Promise<{ id: string }> {
    this.calls.push(`import ${o.tag}`);
    this.injected('build');
    const hash = createHash('sha256');
    const files = new Map<string, FakeNode>();
    const hashed = (async function* () {
      for await (const c of rootfs) {
        hash.update(c);
        yield c;
      }
    })();
    for await (const r of readTar(hashed, { maxArchiveBytes: 1 << 30, keep: (h) => (h.type === 'file' ? 1 << 26 : false) })) {
      const rel = norm(r.header.path.replace(/^\.\//, ''));
      if (rel === '/') continue;
      if (r.header.type === 'file' && r.content) files.set(rel, { kind: 'file', data: r.content, mode: r.header.mode });
      else if (r.header.type === 'dir') files.set(rel, { kind: 'dir' });
      else if (r.header.type === 'symlink') files.set(rel, { kind: 'symlink', target: r.header.linkTarget });
    }
    hash.update(JSON.stringify([o.env, o.workingDir, o.cmd, o.user, o.labels]));
    const id = `sha256:${hash.digest('hex')}`;
    const img: FakeImage = this.images.get(id) ?? { id, tags: new Set(), labels: { ...o.labels }, workingDir: o.workingDir, user: o.user, files };
    this.untag(o.tag);
    img.tags.add(o.tag);
    this.images.set(id, img);
    this.imageConfig.set(id, { env: [...o.env], cmd: o.cmd ? [...o.cmd] : null });
    return { id };
  }

  async removeImage(ref: string): Promise<void> {
    this.calls.push(`removeImage ${ref}`);
    const i = this.findImage(ref);
    if (!i) return;
    this.images.delete(i.id);
    this.imageConfig.delete(i.id);
  }

  async listImages(filter: LabelFilter): Promise<ImageSummary[]> {
    this.injected('ping');
    return [...this.images.values()].filter((i) => matches(i.labels, filter)).map((i) => ({ id: i.id, tags: [...i.tags], labels: { ...i.labels } }));
  }

  /** Test helper: the files of a volume. */
  volumeFiles(name: string): ReadonlyMap<string, FakeNode> | null {
    return this.volumes.get(name)?.files ?? null;
  }

  async exec(id: string, spec: ExecSpec, onOutput: StartIo['onOutput']): Promise<RunningExec> {
    this.calls.push(`exec ${id.slice(0, 12)} ${spec.argv[0] ?? ''}`);
    this.injected('exec');
    const c = this.container(id);
    if (c.state !== 'running' || c.paused)
      throw containerError(
        'CONTAINER_OPERATION_FAILED',
        `docker could not run a process in container ${id.slice(0, 12)}: container ${id.slice(0, 12)} is ${c.paused ? 'paused' : 'not running'}`,
        { container: id },
      );
    let detached = false;
    let code: number | null = null;
    let detach: () => void = () => undefined;
    const proc = this.process(c, { onOutput: (st, chunk) => (detached ? undefined : onOutput(st, chunk)) }, Promise.resolve(Buffer.alloc(0)), spec.argv);
    const program = this.programs.get(spec.argv[0] ?? '');
    const ran = (async () => {
      await new Promise((r) => setImmediate(r));
      if (!program) {
        // Docker starts the exec and reports the missing binary on its output, exit status 126
        proc.write('stdout', `OCI runtime exec failed: exec: "${spec.argv[0] ?? ''}": executable file not found in $PATH: unknown\r\n`);
        code = 126;
        return;
      }
      try {
        code = await program(proc);
      } catch (e) {
        if (e instanceof Killed) code = 137;
        else {
          if (!detached) onOutput('stderr', Buffer.from(`fake program crashed: ${(e as Error).message}\n`));
          code = 1;
        }
      }
    })();
    const outputEnded = Promise.race([ran, new Promise<void>((r) => (detach = r))]);
    return {
      outputEnded,
      exitCode: async () => code,
      detach: () => {
        detached = true;
        detach();
      },
    };
  }

  async pause(id: string): Promise<void> {
    this.calls.push(`pause ${id.slice(0, 12)}`);
    this.injected('pause');
    const c = this.container(id);
    if (c.state !== 'running')
      throw containerError('CONTAINER_OPERATION_FAILED', `docker could not pause container ${id.slice(0, 12)}: Container ${id} is not running`, {
        container: id,
      });
    if (c.paused)
      throw containerError('CONTAINER_OPERATION_FAILED', `docker could not pause container ${id.slice(0, 12)}: Container ${id} is already paused`, {
        container: id,
      });
    c.paused = true;
  }

  async unpause(id: string): Promise<void> {
    this.calls.push(`unpause ${id.slice(0, 12)}`);
    this.injected('unpause');
    const c = this.container(id);
    if (!c.paused)
      throw containerError('CONTAINER_OPERATION_FAILED', `docker could not unpause container ${id.slice(0, 12)}: Container ${id} is not paused`, {
        container: id,
      });
    c.paused = false;
  }

  async writableLayerBytes(id: string): Promise<number | null> {
    const c = this.container(id);
    let bytes = 0;
    // the container's own layer: what was written over the image (a node the image does not hold, the same object)
    for (const [k, n] of c.rootfs) if (n !== c.image.files.get(k) && n.kind === 'file') bytes += n.data.length;
    return bytes;
  }
}

/**
 * The host's GPUs, real adapters (docs/run.md, "GPUs"); the decisions are pure, in @assay/run (domain/gpu-host.ts).
 *
 *   DockerGpuRuntimeCheck  `docker info` (dockerode): a runtime named `nvidia`, or a daemon CDI spec directory holding
 *                          an `nvidia*` file (read here, bounded: the first 16 directories, 1,000 entries each). The
 *                          directories are read on this machine: right for the local daemon Assay drives.
 *   NvidiaSmiGpuProbe      `nvidia-smi --query-gpu=… --format=csv,noheader,nounits` (the GPUs), plain `nvidia-smi`
 *                          (the header's CUDA version) and, when a `MIG-` id is asked for, `nvidia-smi -L`; execFile,
 *                          no shell, 15 s and 1 MiB each.
 */
import { execFile } from 'node:child_process';
import { opendirSync } from 'node:fs';
import { escapeTerminalText } from '@assay/core';
import { containerError, type ContainerRuntime } from '@assay/containers';
import {
  cdiSpecDirsOf,
  gpuDriverMissing,
  gpuRuntimeMissing,
  matchProbedGpus,
  MAX_NVIDIA_SMI_BYTES,
  NVIDIA_SMI_QUERY,
  nvidiaContainerSupport,
  parseNvidiaSmiCudaVersion,
  parseNvidiaSmiList,
  parseNvidiaSmiQuery,
  RUN_ERROR_CODES,
  runError,
  type DockerInfoGpuFacts,
  type GpuProbe,
  type GpuRuntimeCheck,
  type NvidiaContainerSupport,
  type ProbedGpu,
} from '@assay/run';

/** Seconds each nvidia-smi invocation and `docker info` may take. */
export const GPU_HOST_TIMEOUT_MS = 15_000;
/** Most entries read from one CDI spec directory. */
export const MAX_CDI_ENTRIES = 1000;

/** The names in a directory (files and symlinks), at most MAX_CDI_ENTRIES; [] when it cannot be read. */
export function listCdiDir(dir: string): string[] {
  const names: string[] = [];
  let d;
  try {
    d = opendirSync(dir);
  } catch {
    return names;
  }
  try {
    for (let i = 0; i < MAX_CDI_ENTRIES; i++) {
      const e = d.readSync();
      if (!e) break;
      if (e.isFile() || e.isSymbolicLink()) names.push(e.name);
    }
  } catch {
    // an unreadable directory holds no spec we can see
  } finally {
    d.closeSync();
  }
  return names;
}

/**
 * `docker info` through the container port, in the shape DockerGpuRuntimeCheck reads (its `Runtimes` and
 * `CDISpecDirs`), so a run asks the daemon through one ContainerRuntime for everything.
 */
export function daemonInfoOf(containers: Pick<ContainerRuntime, 'daemonInfo'>): { info(): Promise<DockerInfoGpuFacts> } {
  return {
    info: async () => {
      const d = await containers.daemonInfo();
      return { Runtimes: Object.fromEntries(d.runtimes.map((name) => [name, {}])), CDISpecDirs: [...d.cdiSpecDirs] };
    },
  };
}

export class DockerGpuRuntimeCheck implements GpuRuntimeCheck {
  constructor(
    private readonly docker: { info(): Promise<unknown> },
    private readonly listDir: (dir: string) => readonly string[] = listCdiDir,
    private readonly timeoutMs = GPU_HOST_TIMEOUT_MS,
  ) {}

  async check(devices: readonly string[]): Promise<NvidiaContainerSupport> {
    let info: DockerInfoGpuFacts;
    let timer: NodeJS.Timeout | undefined;
    try {
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${this.timeoutMs / 1000} s`)), this.timeoutMs);
      });
      info = ((await Promise.race([this.docker.info(), timeout])) ?? {}) as DockerInfoGpuFacts;
    } catch (e) {
      throw containerError(
        'CONTAINER_UNAVAILABLE',
        `the Docker daemon does not answer \`docker info\` (${e instanceof Error ? e.message : String(e)}), so the run cannot check that it can give containers GPUs; start it with scripts/ensure-docker.sh (as root), or set DOCKER_HOST`,
        {},
        e,
      );
    } finally {
      clearTimeout(timer);
    }
    const files = new Map<string, readonly string[]>();
    if (!nvidiaContainerSupport(info, files)) for (const dir of cdiSpecDirsOf(info)) files.set(dir, this.listDir(dir));
    const ok = nvidiaContainerSupport(info, files);
    if (!ok) throw gpuRuntimeMissing(info, devices);
    return ok;
  }
}

export type ExecFileText = (
  file: string,
  args: readonly string[],
  options: { timeout: number; maxBuffer: number },
) => Promise<{ stdout: string; stderr: string }>;

const execFileText: ExecFileText = (file, args, options) =>
  new Promise((resolve, reject) => {
    execFile(file, [...args], { ...options, encoding: 'utf8', windowsHide: true, killSignal: 'SIGKILL' }, (err, stdout, stderr) => {
      if (err) reject(Object.assign(err, { stdout, stderr }));
      else resolve({ stdout, stderr });
    });
  });

/** One line of another program's output for a message: its first non-empty line, escaped, at most 200 characters. */
function firstLine(text: unknown): string {
  const line = (typeof text === 'string' ? text : '').split(/\r?\n/).find((l) => l.trim() !== '') ?? '';
  return escapeTerminalText(line.trim().slice(0, 200));
}

export class NvidiaSmiGpuProbe implements GpuProbe {
  constructor(private readonly o: { readonly bin?: string; readonly exec?: ExecFileText; readonly timeoutMs?: number } = {}) {}

  async probe(devices: readonly string[]): Promise<ProbedGpu[]> {
    const rows = parseNvidiaSmiQuery(await this.run([...NVIDIA_SMI_QUERY]));
    const cuda = parseNvidiaSmiCudaVersion(await this.run([]));
    const migs = devices.some((d) => d.startsWith('MIG-')) ? parseNvidiaSmiList(await this.run(['-L'])) : [];
    return matchProbedGpus(devices, { rows, cuda, migs });
  }

  private async run(args: string[]): Promise<string> {
    const bin = this.o.bin ?? 'nvidia-smi';
    const timeout = this.o.timeoutMs ?? GPU_HOST_TIMEOUT_MS;
    const cmd = ['nvidia-smi', ...args].join(' ');
    try {
      return (await (this.o.exec ?? execFileText)(bin, args, { timeout, maxBuffer: MAX_NVIDIA_SMI_BYTES })).stdout;
    } catch (e) {
      const err = e as NodeJS.ErrnoException & { stdout?: unknown; stderr?: unknown; killed?: boolean; signal?: string | null };
      if (err.code === 'ENOENT') throw gpuDriverMissing(`${bin} is not on PATH`);
      if (err.code === 'EACCES') throw gpuDriverMissing(`${bin} cannot be executed (permission denied)`);
      if (err.code === 'ERR_CHILD_PROCESS_STDIO_MAXBUFFER')
        throw runError(
          RUN_ERROR_CODES.GPU_PROBE_INVALID,
          'unavailable',
          `\`${cmd}\` wrote more than ${MAX_NVIDIA_SMI_BYTES} bytes; the GPU probe cannot read it`,
          {
            command: cmd,
          },
        );
      if (err.killed || err.signal) throw gpuDriverMissing(`\`${cmd}\` did not answer within ${timeout / 1000} s`);
      const said = firstLine(err.stdout) || firstLine(err.stderr);
      throw gpuDriverMissing(`\`${cmd}\` failed${typeof err.code === 'number' ? ` with exit code ${err.code}` : ''}${said ? `: ${said}` : ''}`);
    }
  }
}

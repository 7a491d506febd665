/**
 * The host's GPUs, as a GPU run checks and records them at start (docs/run.md, "GPUs"). Pure: the adapters
 * (libs/runtime/src/gpu-host.ts) run `docker info` and `nvidia-smi` and hand their answers here.
 *
 *   - nvidiaContainerSupport: can this Docker daemon give containers NVIDIA GPUs at all (the NVIDIA Container
 *     Toolkit): a runtime named `nvidia` in `docker info`'s `Runtimes`, or a CDI spec directory of the daemon that
 *     holds a file whose name starts with `nvidia` (what `nvidia-ctk cdi generate` writes);
 *   - parseNvidiaSmiQuery / parseNvidiaSmiCudaVersion / parseNvidiaSmiList: nvidia-smi's output, read defensively
 *     (it is another program's output: every line is checked, a line that does not fit is an error naming it);
 *   - matchProbedGpus: each `--gpus` id (index, `GPU-` or `MIG-` UUID) to the GPU the host has, or
 *     RUN_GPUS_UNKNOWN naming the id and listing what the host has.
 */
import { AssayError } from '@assay/core';
import { RUN_ERROR_CODES } from '../run.errors';

/** One GPU a run was given, as the host reported it at the run's start (GpusProbed.gpus[]). */
export interface ProbedGpu {
  /** The `--gpus` id as given (`0`, `GPU-…`, `MIG-…`). */
  readonly device: string;
  /** nvidia-smi's index of the (physical) GPU. */
  readonly index: number;
  /** The device's UUID (`GPU-…`; for a MIG device, its `MIG-…` UUID). */
  readonly uuid: string;
  /** The product name (`NVIDIA H200`). */
  readonly model: string;
  /** Total memory of the physical GPU in MiB; null for a MIG device (nvidia-smi lists only its profile). */
  readonly memoryMiB: number | null;
  /** The NVIDIA driver version (`550.54.15`). */
  readonly driver: string;
  /** The CUDA driver API version the driver supports (`12.4`, nvidia-smi's header); null when it says `N/A`. */
  readonly cuda: string | null;
  /** A MIG device: its parent GPU's UUID and its profile (`1g.5gb`). */
  readonly mig?: { readonly parent: string; readonly profile: string };
}

/** One row of `nvidia-smi --query-gpu=index,uuid,name,memory.total,driver_version --format=csv,noheader,nounits`. */
export interface NvidiaSmiGpuRow {
  readonly index: number;
  readonly uuid: string;
  readonly name: string;
  readonly memoryMiB: number;
  readonly driver: string;
}

/** A MIG device line of `nvidia-smi -L`, under its parent GPU. */
export interface NvidiaSmiMigDevice {
  readonly uuid: string;
  readonly parentIndex: number;
  readonly profile: string;
}

/** The query nvidia-smi is asked (its columns, in this order). */
export const NVIDIA_SMI_QUERY = ['--query-gpu=index,uuid,name,memory.total,driver_version', '--format=csv,noheader,nounits'] as const;
/** Most GPUs a host may report (more lines is garbled output). */
export const MAX_HOST_GPUS = 1024;
/** Most bytes of nvidia-smi output read (each invocation). */
export const MAX_NVIDIA_SMI_BYTES = 1024 * 1024;

const GPU_UUID_RE = /^GPU-[A-Za-z0-9-]{1,120}$/;
/** MIG UUIDs: `MIG-<uuid>` (R470+) or the older `MIG-GPU-<uuid>/<gi>/<ci>`. */
const MIG_UUID_RE = /^MIG-[A-Za-z0-9-]{1,120}(?:\/[0-9]{1,4}\/[0-9]{1,4})?$/;
const DRIVER_RE = /^[0-9][0-9A-Za-z.-]{0,63}$/;
const CUDA_RE = /^[0-9]{1,3}\.[0-9]{1,3}$/;
const PRINTABLE_RE = /^[\x20-\x7e]+$/;

const show = (line: string): string => JSON.stringify(line.length > 200 ? `${line.slice(0, 200)}…` : line);

function invalid(what: string, why: string, details: Record<string, unknown> = {}): AssayError {
  return new AssayError(
    RUN_ERROR_CODES.GPU_PROBE_INVALID,
    'unavailable',
    `nvidia-smi ${what}: ${why}; the GPU probe cannot tell which GPUs this host has (is the NVIDIA driver healthy? run nvidia-smi by hand)`,
    { details },
  );
}

function lines(text: string): string[] {
  return text.split(/\r?\n/).filter((l) => l.trim() !== '');
}

/**
 * Parses the CSV rows of NVIDIA_SMI_QUERY: `0, GPU-…, NVIDIA H200, 143771, 550.54.15` per GPU. Every line must have
 * the five columns, each of its shape; indices and UUIDs are unique. Throws RUN_GPU_PROBE_INVALID naming the line.
 */
export function parseNvidiaSmiQuery(text: string): NvidiaSmiGpuRow[] {
  const all = lines(text);
  if (all.length === 0) throw invalid('--query-gpu', 'it listed no GPU');
  if (all.length > MAX_HOST_GPUS) throw invalid('--query-gpu', `it listed ${all.length} lines, more than ${MAX_HOST_GPUS} GPUs`);
  const rows: NvidiaSmiGpuRow[] = [];
  const seen = new Set<string>();
  for (const [i, line] of all.entries()) {
    const at = `--query-gpu line ${i + 1} ${show(line)}`;
    if (!PRINTABLE_RE.test(line)) throw invalid(at, 'it holds characters other than printable ASCII', { line: i + 1 });
    const cols = line.split(',').map((c) => c.trim());
    if (cols.length !== 5) throw invalid(at, `expected 5 columns (index, uuid, name, memory.total, driver_version), found ${cols.length}`, { line: i + 1 });
    const [index, uuid, name, memory, driver] = cols as [string, string, string, string, string];
    if (!/^[0-9]{1,4}$/.test(index)) throw invalid(at, `index ${JSON.stringify(index)} is not an integer 0-9999`, { line: i + 1 });
    if (!GPU_UUID_RE.test(uuid)) throw invalid(at, `uuid ${JSON.stringify(uuid)} is not a GPU UUID (GPU-…)`, { line: i + 1 });
    if (name === '' || name.length > 256) throw invalid(at, 'name is empty or longer than 256 characters', { line: i + 1 });
    if (!/^[0-9]{1,9}$/.test(memory)) throw invalid(at, `memory.total ${JSON.stringify(memory)} is not a whole number of MiB`, { line: i + 1 });
    if (!DRIVER_RE.test(driver)) throw invalid(at, `driver_version ${JSON.stringify(driver)} is not a version`, { line: i + 1 });
    const row: NvidiaSmiGpuRow = { index: Number(index), uuid, name, memoryMiB: Number(memory), driver };
    for (const key of [`i${row.index}`, `u${uuid.toLowerCase()}`]) {
      if (seen.has(key)) throw invalid(at, `${key.startsWith('i') ? `index ${row.index}` : `uuid ${uuid}`} is listed twice`, { line: i + 1 });
      seen.add(key);
    }
    rows.push(row);
  }
  return rows;
}

/**
 * The CUDA driver API version from plain `nvidia-smi`'s header (`| NVIDIA-SMI 550.54.15  Driver Version: 550.54.15
 * CUDA Version: 12.4 |`): `12.4`, or null when the header says `N/A`. A header without it (or with two) is
 * RUN_GPU_PROBE_INVALID.
 */
export function parseNvidiaSmiCudaVersion(text: string): string | null {
  const found = [...text.matchAll(/CUDA Version:[ \t]*([^\s|]{1,32})/g)].map((m) => m[1] as string);
  if (found.length === 0) throw invalid('header', 'no "CUDA Version:" in its output');
  const distinct = [...new Set(found)];
  if (distinct.length > 1) throw invalid('header', `it names several CUDA versions (${distinct.join(', ')})`);
  const v = distinct[0] as string;
  if (v === 'N/A') return null;
  if (!CUDA_RE.test(v)) throw invalid('header', `"CUDA Version: ${v.slice(0, 32)}" is not a version like 12.4`);
  return v;
}

/**
 * The MIG devices of `nvidia-smi -L`:
 *
 *   GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-5d5ba0d6-…)
 *     MIG 1g.5gb      Device  0: (UUID: MIG-c6d4f1ef-…)
 *
 * A MIG line belongs to the GPU line above it. Any other non-empty line is RUN_GPU_PROBE_INVALID naming it.
 */
export function parseNvidiaSmiList(text: string): NvidiaSmiMigDevice[] {
  const all = lines(text);
  if (all.length > MAX_HOST_GPUS * 8) throw invalid('-L', `it listed ${all.length} lines`);
  const out: NvidiaSmiMigDevice[] = [];
  let parent: number | null = null;
  for (const [i, line] of all.entries()) {
    const at = `-L line ${i + 1} ${show(line)}`;
    const gpu = /^GPU ([0-9]{1,4}): .{1,256} \(UUID: (GPU-[A-Za-z0-9-]{1,120})\)$/.exec(line.trim());
    if (gpu) {
      parent = Number(gpu[1]);
      continue;
    }
    const mig = /^MIG ([A-Za-z0-9.+-]{1,32}) +Device +[0-9]{1,4}: \(UUID: (MIG-[A-Za-z0-9/-]{1,130})\)$/.exec(line.trim());
    if (mig) {
      if (parent === null) throw invalid(at, 'a MIG device before any GPU line', { line: i + 1 });
      if (!MIG_UUID_RE.test(mig[2] as string)) throw invalid(at, `${JSON.stringify(mig[2])} is not a MIG UUID`, { line: i + 1 });
      out.push({ uuid: mig[2] as string, parentIndex: parent, profile: mig[1] as string });
      continue;
    }
    throw invalid(at, 'neither a GPU line ("GPU <n>: <name> (UUID: GPU-…)") nor a MIG line ("MIG <profile> Device <n>: (UUID: MIG-…)")', {
      line: i + 1,
    });
  }
  return out;
}

/** What the host has, for an error message: `0 (GPU-…, NVIDIA H200), 1 (…)`; at most 16 named. */
export function describeHostGpus(rows: readonly NvidiaSmiGpuRow[], migs: readonly NvidiaSmiMigDevice[] = []): string {
  if (rows.length === 0) return 'none';
  const items = [...rows.map((r) => `${r.index} (${r.uuid}, ${r.name})`), ...migs.map((m) => `${m.uuid} (MIG ${m.profile} on GPU ${m.parentIndex})`)];
  return items.length > 16 ? `${items.slice(0, 16).join(', ')} and ${items.length - 16} more` : items.join(', ');
}

/**
 * Each `--gpus` id to the GPU the host reported: a number is nvidia-smi's index (`00` is `0`), `GPU-…` a GPU's UUID,
 * `MIG-…` a MIG device's UUID (UUIDs compared without regard to case). An id the host does not have is
 * RUN_GPUS_UNKNOWN naming it and what the host has; two ids naming the same device (`0` and its UUID) are too.
 */
export function matchProbedGpus(
  devices: readonly string[],
  host: { readonly rows: readonly NvidiaSmiGpuRow[]; readonly cuda: string | null; readonly migs?: readonly NvidiaSmiMigDevice[] },
): ProbedGpu[] {
  const migs = host.migs ?? [];
  const has = describeHostGpus(host.rows, migs);
  const out: ProbedGpu[] = [];
  const taken = new Map<string, string>();
  for (const device of devices) {
    let gpu: ProbedGpu | null = null;
    if (/^[0-9]+$/.test(device)) {
      const r = host.rows.find((x) => x.index === Number(device));
      if (r) gpu = { device, index: r.index, uuid: r.uuid, model: r.name, memoryMiB: r.memoryMiB, driver: r.driver, cuda: host.cuda };
    } else if (device.startsWith('MIG-')) {
      const m = migs.find((x) => x.uuid.toLowerCase() === device.toLowerCase());
      const r = m ? host.rows.find((x) => x.index === m.parentIndex) : undefined;
      if (m && r)
        gpu = {
          device,
          index: r.index,
          uuid: m.uuid,
          model: r.name,
          memoryMiB: null,
          driver: r.driver,
          cuda: host.cuda,
          mig: { parent: r.uuid, profile: m.profile },
        };
    } else {
      const r = host.rows.find((x) => x.uuid.toLowerCase() === device.toLowerCase());
      if (r) gpu = { device, index: r.index, uuid: r.uuid, model: r.name, memoryMiB: r.memoryMiB, driver: r.driver, cuda: host.cuda };
    }
    if (!gpu)
      throw new AssayError(
        RUN_ERROR_CODES.GPUS_UNKNOWN,
        'invalid_input',
        `--gpus names ${JSON.stringify(device)}, which this host does not have (nvidia-smi lists: ${has}); pass indices or UUIDs of those`,
        { details: { flag: '--gpus', item: device, host: has } },
      );
    const key = gpu.uuid.toLowerCase();
    const other = taken.get(key);
    if (other !== undefined)
      throw new AssayError(
        RUN_ERROR_CODES.GPUS_UNKNOWN,
        'invalid_input',
        `--gpus names the same GPU twice: ${JSON.stringify(other)} and ${JSON.stringify(device)} are both ${gpu.uuid}`,
        {
          details: { flag: '--gpus', item: device },
        },
      );
    taken.set(key, device);
    out.push(gpu);
  }
  return out;
}

// ---- the Docker daemon's NVIDIA support ---------------------------------------------------------------------------

/** What `docker info` says that matters here (dockerode's `docker.info()`). */
export interface DockerInfoGpuFacts {
  /** Runtime name -> its config, e.g. `{runc: {...}, nvidia: {path: "nvidia-container-runtime"}}`. */
  readonly Runtimes?: Readonly<Record<string, unknown>> | null;
  /** Directories the daemon reads CDI specs from (Docker 25+), e.g. `["/etc/cdi", "/var/run/cdi"]`. */
  readonly CDISpecDirs?: readonly string[] | null;
}

export type NvidiaContainerSupport = { readonly via: 'runtime' } | { readonly via: 'cdi'; readonly dir: string; readonly file: string };

/** Most CDI spec directories looked at. */
export const MAX_CDI_DIRS = 16;

/**
 * Whether the daemon can give containers NVIDIA GPUs: `Runtimes` has `nvidia`, or one of `CDISpecDirs` (the first
 * MAX_CDI_DIRS) holds a file whose name starts with `nvidia`. `cdiFiles` is what the adapter found in each directory
 * (absent: unreadable or missing). Null: neither (the NVIDIA Container Toolkit is not set up for this daemon).
 */
export function nvidiaContainerSupport(info: DockerInfoGpuFacts, cdiFiles: ReadonlyMap<string, readonly string[]>): NvidiaContainerSupport | null {
  const runtimes = info.Runtimes;
  if (runtimes && typeof runtimes === 'object' && Object.prototype.hasOwnProperty.call(runtimes, 'nvidia')) return { via: 'runtime' };
  for (const dir of cdiSpecDirsOf(info)) {
    const file = (cdiFiles.get(dir) ?? []).find((f) => f.startsWith('nvidia'));
    if (file !== undefined) return { via: 'cdi', dir, file };
  }
  return null;
}

/** The CDI spec directories to look at: absolute paths only, at most MAX_CDI_DIRS. */
export function cdiSpecDirsOf(info: DockerInfoGpuFacts): string[] {
  const dirs = Array.isArray(info.CDISpecDirs) ? info.CDISpecDirs : [];
  return dirs.filter((d): d is string => typeof d === 'string' && d.startsWith('/') && d.length <= 4096).slice(0, MAX_CDI_DIRS);
}

/** How to set up the NVIDIA Container Toolkit for Docker (the fix both GPU host errors name). */
export const NVIDIA_TOOLKIT_FIX =
  'install the NVIDIA driver and nvidia-container-toolkit (https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html), run `sudo nvidia-ctk runtime configure --runtime=docker`, then restart dockerd (`sudo systemctl restart docker`)';

/** RUN_GPU_RUNTIME_MISSING for a daemon without NVIDIA support, naming what it has. */
export function gpuRuntimeMissing(info: DockerInfoGpuFacts, devices: readonly string[]): AssayError {
  const runtimes = info.Runtimes && typeof info.Runtimes === 'object' ? Object.keys(info.Runtimes).slice(0, 16) : [];
  const dirs = cdiSpecDirsOf(info);
  return new AssayError(
    RUN_ERROR_CODES.GPU_RUNTIME_MISSING,
    'unavailable',
    `--gpus ${devices.join(',')}: the NVIDIA Container Toolkit is not set up on this Docker daemon, so it cannot give containers GPUs (its runtimes: ${runtimes.join(', ') || 'none'}; no "nvidia" runtime, and no nvidia* CDI spec in ${dirs.length ? dirs.join(', ') : 'its CDI spec directories (none reported)'}); ${NVIDIA_TOOLKIT_FIX}. Nothing was started`,
    { details: { runtimes, cdiSpecDirs: dirs } },
  );
}

/** RUN_GPU_DRIVER_MISSING: nvidia-smi could not be run or failed. */
export function gpuDriverMissing(why: string): AssayError {
  return new AssayError(
    RUN_ERROR_CODES.GPU_DRIVER_MISSING,
    'unavailable',
    `the GPU probe could not run nvidia-smi (${why}): this host has no working NVIDIA driver; ${NVIDIA_TOOLKIT_FIX}. Nothing was started`,
    { details: { why } },
  );
}

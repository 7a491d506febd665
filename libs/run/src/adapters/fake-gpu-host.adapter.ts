/**
 * In-memory GPU host for tests: FakeGpuProbe answers from configured nvidia-smi rows (through the same matching as
 * the real probe), FakeGpuRuntimeCheck from a configured `docker info` (through the same decision). Both count calls.
 */
import {
  gpuRuntimeMissing,
  matchProbedGpus,
  nvidiaContainerSupport,
  type DockerInfoGpuFacts,
  type NvidiaContainerSupport,
  type NvidiaSmiGpuRow,
  type NvidiaSmiMigDevice,
  type ProbedGpu,
} from '../domain/gpu-host';
import type { GpuProbe, GpuRuntimeCheck } from '../ports/gpu-host.port';

export class FakeGpuProbe implements GpuProbe {
  readonly calls: Array<readonly string[]> = [];
  /** Thrown by the next probe (e.g. RUN_GPU_DRIVER_MISSING). */
  fail: Error | null = null;

  constructor(
    readonly rows: readonly NvidiaSmiGpuRow[],
    readonly cuda: string | null = '12.4',
    readonly migs: readonly NvidiaSmiMigDevice[] = [],
  ) {}

  /** `n` GPUs `NVIDIA H200` with UUIDs `GPU-00000000-0000-0000-0000-00000000000<i>`. */
  static withGpus(n: number, model = 'NVIDIA H200'): FakeGpuProbe {
    return new FakeGpuProbe(
      Array.from({ length: n }, (_, i) => ({
        index: i,
        uuid: `GPU-00000000-0000-0000-0000-${String(i).padStart(12, '0')}`,
        name: model,
        memoryMiB: 143771,
        driver: '550.54.15',
      })),
    );
  }

  async probe(devices: readonly string[]): Promise<ProbedGpu[]> {
    this.calls.push([...devices]);
    if (this.fail) throw this.fail;
    return matchProbedGpus(devices, { rows: this.rows, cuda: this.cuda, migs: this.migs });
  }
}

export class FakeGpuRuntimeCheck implements GpuRuntimeCheck {
  readonly calls: Array<readonly string[]> = [];

  constructor(
    readonly info: DockerInfoGpuFacts = { Runtimes: { runc: {}, nvidia: {} } },
    readonly cdiFiles: ReadonlyMap<string, readonly string[]> = new Map(),
  ) {}

  async check(devices: readonly string[]): Promise<NvidiaContainerSupport> {
    this.calls.push([...devices]);
    const ok = nvidiaContainerSupport(this.info, this.cdiFiles);
    if (!ok) throw gpuRuntimeMissing(this.info, devices);
    return ok;
  }
}

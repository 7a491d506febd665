/**
 * The host's GPUs as a GPU run sees them at start (docs/run.md, "GPUs"). Real adapters: libs/runtime/src/gpu-host.ts
 * (`docker info`, `nvidia-smi`); fakes for tests: FakeGpuProbe, FakeGpuRuntimeCheck (the same pure decisions,
 * domain/gpu-host.ts, over configured answers).
 */
import type { NvidiaContainerSupport, ProbedGpu } from '../domain/gpu-host';

export interface GpuProbe {
  /**
   * The GPUs behind `devices` (the `--gpus` ids, in that order): index, UUID, model, memory, driver, CUDA version.
   * Throws RUN_GPUS_UNKNOWN for an id the host does not have, RUN_GPU_DRIVER_MISSING when nvidia-smi cannot be run,
   * RUN_GPU_PROBE_INVALID when its output cannot be read.
   */
  probe(devices: readonly string[]): Promise<ProbedGpu[]>;
}

export interface GpuRuntimeCheck {
  /**
   * Whether the Docker daemon can give containers NVIDIA GPUs (the NVIDIA Container Toolkit); throws
   * RUN_GPU_RUNTIME_MISSING (naming `devices`, the run's `--gpus`) when it cannot.
   */
  check(devices: readonly string[]): Promise<NvidiaContainerSupport>;
}

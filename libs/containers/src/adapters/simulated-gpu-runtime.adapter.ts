/**
 * Docker without NVIDIA's runtime, standing in for it: the real DockerodeRuntime in every respect except GPUs. A
 * container spec's GPU request is checked exactly as the real adapter checks it (dockerDeviceRequests), kept here
 * and left out of what the daemon is asked for; inspecting the container reports it back as if the daemon had
 * applied it. So a GPU run (Work's GPUs, each Judge's, the hand-over, the GPU-seconds) goes through real containers,
 * real Judges and the real ledger on a machine with no GPU. The "GPU" inside is whatever the task's image brings (the
 * GEMM task's tests use a fake nvcc and nvidia-smi, tests/fixtures/fake-gpu). Testing entry only: nothing that ships
 * can construct it.
 */
import type { ContainerInfo, ContainerSpec } from '../container-runtime.port';
import { dockerDeviceRequests } from '../gpu-request';
import { DockerodeRuntime } from './dockerode-runtime.adapter';

export class SimulatedGpuDockerRuntime extends DockerodeRuntime {
  /** Container id -> the device ids its spec asked for. */
  private readonly gpus = new Map<string, readonly string[]>();
  /** Every GPU request made, in order: `<container name> <ids>`. */
  readonly requests: string[] = [];

  override async createContainer(spec: ContainerSpec): Promise<string> {
    const requests = dockerDeviceRequests(spec); // the same refusals as the real adapter
    if (requests.length === 0) return super.createContainer(spec);
    const { gpus: _gpus, ...rest } = spec;
    const id = await super.createContainer(rest);
    const ids = requests.flatMap((r) => r.DeviceIDs);
    this.gpus.set(id, ids);
    this.requests.push(`${spec.name ?? id} ${ids.join(',')}`);
    return id;
  }

  override async inspectContainer(id: string): Promise<ContainerInfo | null> {
    const info = await super.inspectContainer(id);
    if (!info) return info;
    const ids = this.gpus.get(info.id) ?? this.gpus.get(id);
    return ids ? { ...info, deviceRequests: [{ driver: 'nvidia', deviceIds: [...ids], capabilities: ['gpu'] }] } : info;
  }
}

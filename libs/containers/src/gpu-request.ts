/**
 * GPU device requests, shared by the dockerode adapter and the fake so both accept and refuse the same specs.
 * Docker form (`HostConfig.DeviceRequests[]`): `{Driver: "nvidia", Count: 0, DeviceIDs: [...], Capabilities:
 * [["gpu"]], Options: {}}`; explicit ids only (never `Count: -1`, "all GPUs").
 */
import type { ContainerSpec } from './container-runtime.port';
import { containerError } from './containers.errors';

/** Docker device ids: host indices (`0`) or UUIDs (`GPU-…`, `MIG-…`); nothing that could be read as an option. */
export const GPU_DEVICE_ID_RE = /^(?:[0-9]{1,4}|(?:GPU|MIG)-[A-Za-z0-9-]{1,120})$/;

export interface DockerDeviceRequest {
  Driver: string;
  Count: number;
  DeviceIDs: string[];
  Capabilities: string[][];
  Options: Record<string, string>;
}

/** The spec's GPU request as Docker `DeviceRequests`; [] without GPUs. CONTAINER_INVALID_SPEC for a bad request. */
export function dockerDeviceRequests(spec: Pick<ContainerSpec, 'gpus'>): DockerDeviceRequest[] {
  const g = spec.gpus;
  if (!g || g.deviceIds.length === 0) return [];
  if (g.driver !== 'nvidia')
    throw containerError('CONTAINER_INVALID_SPEC', `GPU driver ${JSON.stringify(g.driver)} is not supported (only "nvidia")`, { driver: g.driver });
  const bad = g.deviceIds.find((d) => typeof d !== 'string' || !GPU_DEVICE_ID_RE.test(d));
  if (bad !== undefined)
    throw containerError('CONTAINER_INVALID_SPEC', `GPU device id ${JSON.stringify(bad)} is neither a host index nor a GPU UUID`, { device: bad });
  if (new Set(g.deviceIds).size !== g.deviceIds.length)
    throw containerError('CONTAINER_INVALID_SPEC', `GPU device ids ${g.deviceIds.join(',')} name a device twice`);
  return [{ Driver: 'nvidia', Count: 0, DeviceIDs: [...g.deviceIds], Capabilities: [['gpu']], Options: {} }];
}

import { DockerodeRuntime } from '@assay/containers';
import { containerRuntimeContract } from './container-runtime.contract';
import { BASE_IMAGE, describeDocker } from '../support/docker';

describeDocker('dockerode adapter on a real daemon', () => {
  containerRuntimeContract(
    'dockerode',
    async () => ({
      runtime: new DockerodeRuntime(),
      programs: {
        image: BASE_IMAGE,
        exit: (c) => ['bash', '-c', `exit ${c}`],
        echo: (o, e) => ['bash', '-c', 'printf "%s\\n" "$0"; printf "%s\\n" "$1" >&2', o, e],
        catStdinTo: (p) => ['bash', '-c', 'cat > "$0"', p],
        write: (p, c) => ['bash', '-c', 'printf %s "$1" > "$0"', p, c],
        sleep: (s) => ['sleep', String(s)],
        flood: (n) => ['bash', '-c', `head -c ${n} /dev/zero | tr '\\0' x`],
        interfaces: () => ['ls', '/sys/class/net'],
      },
    }),
    60_000,
  );

  it('sends GPUs as HostConfig.DeviceRequests: driver nvidia, the exact ids, capability gpu (created, never started: no GPU here)', async () => {
    const rt = new DockerodeRuntime();
    const id = await rt.createContainer({
      image: BASE_IMAGE,
      cmd: ['true'],
      env: {},
      labels: { 'org.assay.role': 'contract-test' },
      mounts: [],
      networkMode: 'none',
      readOnlyRootfs: true,
      capDrop: ['ALL'],
      capAdd: [],
      noNewPrivileges: true,
      pidsLimit: 16,
      memoryBytes: 32 << 20,
      nanoCpus: 1e9,
      init: false,
      openStdin: false,
      gpus: { driver: 'nvidia', deviceIds: ['0', 'GPU-11111111-2222-3333-4444-555555555555'] },
    });
    try {
      const raw = await rt.docker.getContainer(id).inspect();
      expect(raw.HostConfig.DeviceRequests).toEqual([
        { Driver: 'nvidia', Count: 0, DeviceIDs: ['0', 'GPU-11111111-2222-3333-4444-555555555555'], Capabilities: [['gpu']], Options: {} },
      ]);
      expect(raw.State.Status).toBe('created');
    } finally {
      await rt.removeContainer(id);
    }
  });

  it('reports an unreachable daemon as CONTAINER_UNAVAILABLE', async () => {
    const r = new DockerodeRuntime({ socketPath: '/nonexistent/docker.sock' });
    await expect(r.ping()).rejects.toMatchObject({ code: 'CONTAINER_UNAVAILABLE', kind: 'unavailable' });
  });
});

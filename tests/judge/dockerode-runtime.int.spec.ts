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

  it('reports an unreachable daemon as CONTAINER_UNAVAILABLE', async () => {
    const r = new DockerodeRuntime({ socketPath: '/nonexistent/docker.sock' });
    await expect(r.ping()).rejects.toMatchObject({ code: 'CONTAINER_UNAVAILABLE', kind: 'unavailable' });
  });
});

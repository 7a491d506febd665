/**
 * The real GPU host adapters without a GPU: NvidiaSmiGpuProbe runs a stand-in `nvidia-smi` script through execFile
 * (no shell), DockerGpuRuntimeCheck reads a stand-in `docker info` and real CDI directories.
 */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { remapsUsers } from '@assay/containers';
import { FakeContainerRuntime } from '../../containers/src/testing';
import { DockerGpuRuntimeCheck, daemonInfoOf, listCdiDir, NvidiaSmiGpuProbe } from './gpu-host';

const root = mkdtempSync(join(tmpdir(), 'assay-gpu-host-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

let n = 0;
/** A stand-in nvidia-smi: `query` for --query-gpu, `header` for no arguments, `list` for -L. */
function fakeSmi(o: { query?: string; header?: string; list?: string; script?: string }): string {
  const file = join(root, `nvidia-smi-${n++}`);
  const body =
    o.script ??
    `case "$1" in
  --query-gpu=*) printf '%s' '${o.query ?? ''}' ;;
  -L) printf '%s' '${o.list ?? ''}' ;;
  '') printf '%s' '${o.header ?? ''}' ;;
  *) echo "unexpected $*" >&2; exit 9 ;;
esac`;
  writeFileSync(file, `#!/bin/sh\n${body}\n`, { mode: 0o755 });
  return file;
}

const QUERY =
  '0, GPU-11111111-2222-3333-4444-555555555555, NVIDIA H200, 143771, 550.54.15\n1, GPU-66666666-2222-3333-4444-555555555555, NVIDIA H200, 143771, 550.54.15\n';
const HEADER = '| NVIDIA-SMI 550.54.15    Driver Version: 550.54.15    CUDA Version: 12.4 |\n';
const LIST =
  'GPU 0: NVIDIA H200 (UUID: GPU-11111111-2222-3333-4444-555555555555)\n  MIG 1g.18gb     Device  0: (UUID: MIG-77777777-2222-3333-4444-555555555555)\nGPU 1: NVIDIA H200 (UUID: GPU-66666666-2222-3333-4444-555555555555)\n';

describe('NvidiaSmiGpuProbe (a stand-in nvidia-smi through execFile)', () => {
  it('maps --gpus ids to the GPUs nvidia-smi lists, with the CUDA version of its header', async () => {
    const probe = new NvidiaSmiGpuProbe({ bin: fakeSmi({ query: QUERY, header: HEADER, list: LIST }) });
    expect(await probe.probe(['1', 'MIG-77777777-2222-3333-4444-555555555555'])).toEqual([
      { device: '1', index: 1, uuid: 'GPU-66666666-2222-3333-4444-555555555555', model: 'NVIDIA H200', memoryMiB: 143771, driver: '550.54.15', cuda: '12.4' },
      {
        device: 'MIG-77777777-2222-3333-4444-555555555555',
        index: 0,
        uuid: 'MIG-77777777-2222-3333-4444-555555555555',
        model: 'NVIDIA H200',
        memoryMiB: null,
        driver: '550.54.15',
        cuda: '12.4',
        mig: { parent: 'GPU-11111111-2222-3333-4444-555555555555', profile: '1g.18gb' },
      },
    ]);
  });

  it('an id the host does not have: RUN_GPUS_UNKNOWN', async () => {
    const probe = new NvidiaSmiGpuProbe({ bin: fakeSmi({ query: QUERY, header: HEADER }) });
    await expect(probe.probe(['2'])).rejects.toMatchObject({
      code: 'RUN_GPUS_UNKNOWN',
      message: expect.stringContaining('"2", which this host does not have'),
    });
  });

  it('no nvidia-smi, a failing one, a hanging one: RUN_GPU_DRIVER_MISSING saying why and how to fix it', async () => {
    await expect(new NvidiaSmiGpuProbe({ bin: join(root, 'no-such-nvidia-smi') }).probe(['0'])).rejects.toMatchObject({
      code: 'RUN_GPU_DRIVER_MISSING',
      kind: 'unavailable',
      message: expect.stringMatching(/no-such-nvidia-smi is not on PATH.*nvidia-container-toolkit.*nvidia-ctk runtime configure --runtime=docker/),
    });
    const failing = fakeSmi({ script: `echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. \\033[31m"; exit 9` });
    await expect(new NvidiaSmiGpuProbe({ bin: failing }).probe(['0'])).rejects.toMatchObject({
      code: 'RUN_GPU_DRIVER_MISSING',
      message: expect.stringContaining("failed with exit code 9: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. \\x1b[31m"),
    });
    const hanging = fakeSmi({ script: 'exec sleep 30' });
    await expect(new NvidiaSmiGpuProbe({ bin: hanging, timeoutMs: 300 }).probe(['0'])).rejects.toMatchObject({
      code: 'RUN_GPU_DRIVER_MISSING',
      message: expect.stringContaining('did not answer within 0.3 s'),
    });
  });

  it('garbled or endless output: RUN_GPU_PROBE_INVALID', async () => {
    await expect(new NvidiaSmiGpuProbe({ bin: fakeSmi({ query: 'garbage\n', header: HEADER }) }).probe(['0'])).rejects.toMatchObject({
      code: 'RUN_GPU_PROBE_INVALID',
      message: expect.stringContaining('--query-gpu line 1 "garbage"'),
    });
    const endless = fakeSmi({ script: 'exec yes 0, GPU-a, X, 1, 1' });
    await expect(new NvidiaSmiGpuProbe({ bin: endless }).probe(['0'])).rejects.toMatchObject({
      code: 'RUN_GPU_PROBE_INVALID',
      message: expect.stringContaining('wrote more than 1048576 bytes'),
    });
  });
});

describe('DockerGpuRuntimeCheck (a stand-in docker info, real CDI directories)', () => {
  it('the nvidia runtime, or an nvidia* spec in a daemon CDI directory', async () => {
    expect(await new DockerGpuRuntimeCheck({ info: async () => ({ Runtimes: { runc: {}, nvidia: {} } }) }).check(['0'])).toEqual({ via: 'runtime' });
    const cdi = join(root, 'cdi');
    mkdirSync(cdi);
    writeFileSync(join(cdi, 'nvidia.yaml'), 'cdiVersion: 0.5.0\n');
    const info = async () => ({ Runtimes: { runc: {} }, CDISpecDirs: [join(root, 'missing'), cdi] });
    expect(await new DockerGpuRuntimeCheck({ info }).check(['0'])).toEqual({ via: 'cdi', dir: cdi, file: 'nvidia.yaml' });
  });

  it('neither: RUN_GPU_RUNTIME_MISSING; a daemon that does not answer: CONTAINER_UNAVAILABLE', async () => {
    const empty = join(root, 'cdi-empty');
    mkdirSync(join(empty, 'nvidia.d'), { recursive: true }); // a directory named nvidia* is not a spec
    await expect(new DockerGpuRuntimeCheck({ info: async () => ({ Runtimes: { runc: {} }, CDISpecDirs: [empty] }) }).check(['0'])).rejects.toMatchObject({
      code: 'RUN_GPU_RUNTIME_MISSING',
      message: expect.stringContaining(`no nvidia* CDI spec in ${empty}`),
    });
    await expect(
      new DockerGpuRuntimeCheck({ info: async () => Promise.reject(new Error('connect ENOENT /var/run/docker.sock')) }).check(['0']),
    ).rejects.toMatchObject({
      code: 'CONTAINER_UNAVAILABLE',
      message: expect.stringContaining('does not answer `docker info` (connect ENOENT /var/run/docker.sock)'),
    });
    await expect(new DockerGpuRuntimeCheck({ info: () => new Promise(() => undefined) }, listCdiDir, 100).check(['0'])).rejects.toMatchObject({
      code: 'CONTAINER_UNAVAILABLE',
      message: expect.stringContaining('no answer within 0.1 s'),
    });
  });

  it('lists a CDI directory bounded: files and symlinks, at most 1000 entries; an unreadable one is empty', () => {
    const big = join(root, 'cdi-big');
    mkdirSync(big);
    for (let i = 0; i < 1005; i++) writeFileSync(join(big, `spec-${i}.yaml`), '');
    expect(listCdiDir(big)).toHaveLength(1000);
    const links = join(root, 'cdi-links');
    mkdirSync(links);
    symlinkSync('/etc/cdi/nvidia.yaml', join(links, 'nvidia.yaml'));
    expect(listCdiDir(links)).toEqual(['nvidia.yaml']);
    expect(listCdiDir(join(root, 'nope'))).toEqual([]);
  });
});

describe('daemonInfoOf: the GPU check asks the daemon through the container port', () => {
  it('an nvidia runtime, a CDI spec, or neither', async () => {
    const rt = new FakeContainerRuntime();
    rt.daemon = { runtimes: ['runc', 'nvidia'], cdiSpecDirs: [], securityOptions: [], cgroupVersion: 1 };
    expect(await new DockerGpuRuntimeCheck(daemonInfoOf(rt)).check(['0'])).toEqual({ via: 'runtime' });
    const cdi = join(root, 'cdi-port');
    mkdirSync(cdi, { recursive: true });
    writeFileSync(join(cdi, 'nvidia.yaml'), 'cdiVersion: 0.5.0\n');
    rt.daemon = { runtimes: ['runc'], cdiSpecDirs: [cdi], securityOptions: [], cgroupVersion: 1 };
    expect(await new DockerGpuRuntimeCheck(daemonInfoOf(rt)).check(['0'])).toEqual({ via: 'cdi', dir: cdi, file: 'nvidia.yaml' });
    rt.daemon = { runtimes: ['runc'], cdiSpecDirs: [], securityOptions: [], cgroupVersion: 1 };
    await expect(new DockerGpuRuntimeCheck(daemonInfoOf(rt)).check(['0'])).rejects.toMatchObject({ code: 'RUN_GPU_RUNTIME_MISSING' });
  });

  it('a daemon that does not answer is CONTAINER_UNAVAILABLE', async () => {
    const rt = new FakeContainerRuntime();
    rt.available = false;
    await expect(new DockerGpuRuntimeCheck(daemonInfoOf(rt)).check(['0'])).rejects.toMatchObject({ code: 'CONTAINER_UNAVAILABLE' });
  });
});

describe('remapsUsers', () => {
  it('is true only under --userns-remap (name=userns among the security options)', () => {
    const info = (securityOptions: string[]) => ({ runtimes: ['runc'], cdiSpecDirs: [], securityOptions, cgroupVersion: null });
    expect(remapsUsers(info(['name=seccomp,profile=builtin']))).toBe(false);
    expect(remapsUsers(info(['name=seccomp,profile=builtin', 'name=userns']))).toBe(true);
    expect(remapsUsers(info(['name=usernsx', 'name=rootless']))).toBe(false);
  });
});

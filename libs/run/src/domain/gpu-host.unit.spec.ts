import {
  cdiSpecDirsOf,
  gpuRuntimeMissing,
  matchProbedGpus,
  nvidiaContainerSupport,
  parseNvidiaSmiCudaVersion,
  parseNvidiaSmiList,
  parseNvidiaSmiQuery,
  type NvidiaSmiGpuRow,
} from './gpu-host';

const QUERY = [
  '0, GPU-5d5ba0d6-d33d-2b2c-524d-2e4d8f4e2d1a, NVIDIA H200, 143771, 550.54.15',
  '1, GPU-8a1e3b7c-1111-2222-3333-444455556666, NVIDIA H200, 143771, 550.54.15',
  '',
].join('\n');

const HEADER = [
  'Tue Apr 16 10:00:00 2024       ',
  '+-----------------------------------------------------------------------------------------+',
  '| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |',
  '|-----------------------------------------+------------------------+----------------------+',
  '| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |',
].join('\n');

const LIST = [
  'GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-5d5ba0d6-d33d-2b2c-524d-2e4d8f4e2d1a)',
  '  MIG 1g.5gb      Device  0: (UUID: MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f)',
  '  MIG 3g.20gb     Device  1: (UUID: MIG-0a1b2c3d-42e4-5de3-91c7-45d71c87eb3f)',
  'GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-8a1e3b7c-1111-2222-3333-444455556666)',
].join('\n');

describe('nvidia-smi --query-gpu (CSV, no header, no units)', () => {
  it('reads every GPU: index, uuid, name, memory in MiB, driver', () => {
    expect(parseNvidiaSmiQuery(QUERY)).toEqual([
      { index: 0, uuid: 'GPU-5d5ba0d6-d33d-2b2c-524d-2e4d8f4e2d1a', name: 'NVIDIA H200', memoryMiB: 143771, driver: '550.54.15' },
      { index: 1, uuid: 'GPU-8a1e3b7c-1111-2222-3333-444455556666', name: 'NVIDIA H200', memoryMiB: 143771, driver: '550.54.15' },
    ]);
    expect(parseNvidiaSmiQuery('0, GPU-abc, Tesla T4, 15360, 535.104.05\r\n')).toHaveLength(1); // CRLF
  });

  it.each([
    ['missing columns', '0, GPU-abc, NVIDIA H200, 143771', /line 1 .*expected 5 columns .* found 4/],
    ['an extra column', '0, GPU-abc, NVIDIA H200, 143771, 550.54.15, x', /line 1 .*found 6/],
    ['a column name instead of a value', 'index, uuid, name, memory.total [MiB], driver_version', /line 1 .*index "index" is not an integer/],
    ['a non-numeric memory', '0, GPU-abc, NVIDIA H200, [N/A], 550.54.15', /memory.total "\[N\/A\]" is not a whole number of MiB/],
    ['a junk uuid', '0, --privileged, NVIDIA H200, 143771, 550.54.15', /uuid "--privileged" is not a GPU UUID/],
    ['a junk driver', '0, GPU-abc, NVIDIA H200, 143771, ; rm -rf /', /driver_version "; rm -rf \/" is not a version/],
    ['control characters', '0, GPU-abc, NVIDIA\u001b[31m, 1, 550', /line 1 .*printable ASCII/],
    ['an error message', "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", /line 1 "NVIDIA-SMI has failed.*expected 5 columns/],
    ['a duplicate index', `${QUERY}0, GPU-ffff, NVIDIA H200, 1, 550.54.15\n`, /line 3 .*index 0 is listed twice/],
    ['nothing', '\n\n', /it listed no GPU/],
  ])('refuses %s, naming the line (RUN_GPU_PROBE_INVALID)', (_what, text, message) => {
    let err: unknown;
    try {
      parseNvidiaSmiQuery(text);
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ code: 'RUN_GPU_PROBE_INVALID', kind: 'unavailable', message: expect.stringMatching(message) });
  });

  it('bounds what it reads: more than 1024 lines is garbled output', () => {
    const many = Array.from({ length: 1025 }, (_, i) => `${i}, GPU-${i}, X, 1, 1`).join('\n');
    expect(() => parseNvidiaSmiQuery(many)).toThrow(/1025 lines, more than 1024 GPUs/);
    expect(() => parseNvidiaSmiQuery(`0, GPU-a, ${'x'.repeat(300)}, 1, 1`)).toThrow(/name is empty or longer than 256/);
  });
});

describe("nvidia-smi's header: the CUDA driver API version", () => {
  it('reads "CUDA Version: 12.4"; N/A is null', () => {
    expect(parseNvidiaSmiCudaVersion(HEADER)).toBe('12.4');
    expect(parseNvidiaSmiCudaVersion('| NVIDIA-SMI 580.65  Driver Version: 580.65  CUDA Version: 13.0 |')).toBe('13.0');
    expect(parseNvidiaSmiCudaVersion('Driver Version: 550.54.15   CUDA Version: N/A')).toBeNull();
  });

  it('refuses a header without it, with junk, or with two different ones', () => {
    expect(() => parseNvidiaSmiCudaVersion('No devices were found')).toThrow(/no "CUDA Version:" in its output/);
    expect(() => parseNvidiaSmiCudaVersion('CUDA Version: 12.4$(reboot)')).toThrow(/is not a version like 12.4/);
    expect(() => parseNvidiaSmiCudaVersion('CUDA Version: 12.4\nCUDA Version: 11.8')).toThrow(/several CUDA versions \(12.4, 11.8\)/);
  });
});

describe('nvidia-smi -L: MIG devices', () => {
  it('reads each MIG device under its GPU', () => {
    expect(parseNvidiaSmiList(LIST)).toEqual([
      { uuid: 'MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f', parentIndex: 0, profile: '1g.5gb' },
      { uuid: 'MIG-0a1b2c3d-42e4-5de3-91c7-45d71c87eb3f', parentIndex: 0, profile: '3g.20gb' },
    ]);
    expect(parseNvidiaSmiList('GPU 0: X (UUID: GPU-a)\n  MIG 1g.5gb Device 0: (UUID: MIG-GPU-a/7/0)\n')).toEqual([
      { uuid: 'MIG-GPU-a/7/0', parentIndex: 0, profile: '1g.5gb' },
    ]);
  });

  it('refuses a line it does not know, and a MIG device before any GPU, naming the line', () => {
    expect(() => parseNvidiaSmiList(`${LIST}\nsomething else`)).toThrow(/-L line 5 "something else": neither a GPU line/);
    expect(() => parseNvidiaSmiList('  MIG 1g.5gb Device 0: (UUID: MIG-abc)')).toThrow(/-L line 1 .*a MIG device before any GPU line/);
  });
});

describe('--gpus ids to the GPUs the host has', () => {
  const rows: NvidiaSmiGpuRow[] = parseNvidiaSmiQuery(QUERY);
  const migs = parseNvidiaSmiList(LIST);
  const host = { rows, cuda: '12.4', migs };

  it('maps indices (00 is 0) and GPU UUIDs (any case) to their rows, in the order given', () => {
    expect(matchProbedGpus(['1', 'GPU-5D5BA0D6-D33D-2B2C-524D-2E4D8F4E2D1A'], host)).toEqual([
      { device: '1', index: 1, uuid: 'GPU-8a1e3b7c-1111-2222-3333-444455556666', model: 'NVIDIA H200', memoryMiB: 143771, driver: '550.54.15', cuda: '12.4' },
      {
        device: 'GPU-5D5BA0D6-D33D-2B2C-524D-2E4D8F4E2D1A',
        index: 0,
        uuid: 'GPU-5d5ba0d6-d33d-2b2c-524d-2e4d8f4e2d1a',
        model: 'NVIDIA H200',
        memoryMiB: 143771,
        driver: '550.54.15',
        cuda: '12.4',
      },
    ]);
    expect(matchProbedGpus(['00'], host)[0]).toMatchObject({ device: '00', index: 0 });
  });

  it('maps a MIG UUID to its device, under its parent GPU (memory: null, the parent and profile recorded)', () => {
    expect(matchProbedGpus(['MIG-0a1b2c3d-42e4-5de3-91c7-45d71c87eb3f'], host)).toEqual([
      {
        device: 'MIG-0a1b2c3d-42e4-5de3-91c7-45d71c87eb3f',
        index: 0,
        uuid: 'MIG-0a1b2c3d-42e4-5de3-91c7-45d71c87eb3f',
        model: 'NVIDIA H200',
        memoryMiB: null,
        driver: '550.54.15',
        cuda: '12.4',
        mig: { parent: 'GPU-5d5ba0d6-d33d-2b2c-524d-2e4d8f4e2d1a', profile: '3g.20gb' },
      },
    ]);
  });

  it('an id the host does not have: RUN_GPUS_UNKNOWN naming it and listing what the host has', () => {
    for (const id of ['7', 'GPU-00000000-dead', 'MIG-00000000-dead'])
      expect(() => matchProbedGpus(['0', id], host)).toThrow(
        expect.objectContaining({
          code: 'RUN_GPUS_UNKNOWN',
          kind: 'invalid_input',
          message: expect.stringContaining(
            `--gpus names "${id}", which this host does not have (nvidia-smi lists: 0 (GPU-5d5ba0d6-d33d-2b2c-524d-2e4d8f4e2d1a, NVIDIA H200), 1 (GPU-8a1e3b7c-1111-2222-3333-444455556666, NVIDIA H200), MIG-c6d4f1ef`,
          ),
        }),
      );
    expect(() => matchProbedGpus(['0'], { rows: [], cuda: null })).toThrow(/nvidia-smi lists: none/);
  });

  it('two ids of the same GPU (its index and its UUID) are refused', () => {
    expect(() => matchProbedGpus(['0', 'GPU-5d5ba0d6-d33d-2b2c-524d-2e4d8f4e2d1a'], host)).toThrow(
      expect.objectContaining({ code: 'RUN_GPUS_UNKNOWN', message: expect.stringMatching(/the same GPU twice: "0" and "GPU-5d5b.*" are both GPU-5d5b/) }),
    );
  });
});

describe("the Docker daemon's NVIDIA support (docker info)", () => {
  it('a runtime named nvidia', () => {
    expect(nvidiaContainerSupport({ Runtimes: { runc: { path: 'runc' }, nvidia: { path: 'nvidia-container-runtime' } } }, new Map())).toEqual({
      via: 'runtime',
    });
  });

  it('a CDI spec directory holding an nvidia* file', () => {
    const info = { Runtimes: { runc: {} }, CDISpecDirs: ['/etc/cdi', '/var/run/cdi'] };
    expect(nvidiaContainerSupport(info, new Map([['/var/run/cdi', ['other.yaml', 'nvidia.yaml']]]))).toEqual({
      via: 'cdi',
      dir: '/var/run/cdi',
      file: 'nvidia.yaml',
    });
    expect(nvidiaContainerSupport(info, new Map([['/etc/cdi', ['vendor-nvidia.yaml', 'amd.json']]]))).toBeNull(); // starts with nvidia
    expect(nvidiaContainerSupport(info, new Map([['/elsewhere', ['nvidia.yaml']]]))).toBeNull(); // not a daemon dir
  });

  it('neither: null, and the error says the toolkit is not set up and how to fix it', () => {
    for (const info of [{}, { Runtimes: null, CDISpecDirs: null }, { Runtimes: { runc: {} }, CDISpecDirs: [] }])
      expect(nvidiaContainerSupport(info, new Map())).toBeNull();
    const e = gpuRuntimeMissing({ Runtimes: { runc: {}, 'io.containerd.runc.v2': {} }, CDISpecDirs: ['/etc/cdi'] }, ['0', '1']);
    expect(e).toMatchObject({
      code: 'RUN_GPU_RUNTIME_MISSING',
      kind: 'unavailable',
      details: { runtimes: ['runc', 'io.containerd.runc.v2'], cdiSpecDirs: ['/etc/cdi'] },
    });
    expect(e.message).toMatch(/^--gpus 0,1: the NVIDIA Container Toolkit is not set up on this Docker daemon/);
    expect(e.message).toContain('its runtimes: runc, io.containerd.runc.v2; no "nvidia" runtime, and no nvidia* CDI spec in /etc/cdi');
    expect(e.message).toContain('nvidia-container-toolkit');
    expect(e.message).toContain('nvidia-ctk runtime configure --runtime=docker');
    expect(e.message).toContain('restart dockerd');
  });

  it('looks at absolute CDI directories only, at most 16', () => {
    expect(cdiSpecDirsOf({ CDISpecDirs: ['relative', '/a', 7 as unknown as string, ...Array.from({ length: 20 }, (_, i) => `/d${i}`)] })).toHaveLength(16);
    expect(cdiSpecDirsOf({ CDISpecDirs: ['relative', '/a'] })).toEqual(['/a']);
  });
});

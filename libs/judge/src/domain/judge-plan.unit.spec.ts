import { DEFAULT_JUDGE_SETTINGS } from './judge-settings';
import { judgeContainerSpec, judgeLimits, MiB } from './judge-plan';

describe('judge container plan', () => {
  const limits = judgeLimits({ cpus: 64, memoryMb: 64, shmSizeBytes: 2 ** 30, verifierTimeoutSec: 5, settings: { ...DEFAULT_JUDGE_SETTINGS, pidsLimit: 64 }, hostCpus: 2, testsBytes: 20 * MiB });

  it('takes the task limits, bounded by the host', () => {
    expect(limits).toMatchObject({ cpusRequested: 64, cpus: 2, memoryBytes: 64 * MiB, pidsLimit: 64, verifierTimeoutSec: 5, outputCapBytes: MiB, testsTmpfsBytes: 40 * MiB, tmpBytes: 64 * MiB, shmBytes: 64 * MiB, readOnlyRootfs: true });
    expect(judgeLimits({ cpus: null, memoryMb: null, shmSizeBytes: 0, verifierTimeoutSec: 1, settings: DEFAULT_JUDGE_SETTINGS, hostCpus: 8, testsBytes: 0 })).toMatchObject({ cpus: 2, memoryBytes: 4096 * MiB, testsTmpfsBytes: 16 * MiB });
  });

  it('mounts the snapshot read-only, tests and reward directory for the Judge only, and drops privileges', () => {
    const s = judgeContainerSpec({ judgeId: 'j1', imageId: 'sha256:abc', workdir: '/workspace', snapshotHostDir: '/h/snap', verifierVolume: 'v', command: ['/bin/bash', '/tests/test.sh'], env: { A: '1' }, network: 'none', limits, labels: { 'org.assay.role': 'judge' } });
    expect(s).toMatchObject({
      name: 'assay-judge-j1',
      image: 'sha256:abc',
      entrypoint: ['/opt/assay/judge/entrypoint'],
      cmd: ['/bin/bash', '/tests/test.sh'],
      env: { A: '1', ASSAY_JUDGE_WORKDIR: '/workspace' },
      user: '0:0',
      networkMode: 'none',
      readOnlyRootfs: true,
      capDrop: ['ALL'],
      capAdd: ['SETUID', 'SETGID'],
      noNewPrivileges: true,
      pidsLimit: 64,
      memoryBytes: 64 * MiB,
      nanoCpus: 2e9,
      init: true,
      openStdin: true,
    });
    expect(s.mounts).toEqual([
      { type: 'bind', source: '/h/snap', target: '/workspace', readOnly: true },
      { type: 'tmpfs', target: '/tests', sizeBytes: 40 * MiB, mode: 0o700 },
      { type: 'volume', source: 'v', target: '/logs/verifier', readOnly: false },
      { type: 'tmpfs', target: '/tmp', sizeBytes: 64 * MiB, mode: 0o1777 },
    ]);
  });
});

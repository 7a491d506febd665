import { DEFAULT_JUDGE_SETTINGS } from './judge-settings';
import { launchedLimits } from './judge-events';
import { judgeContainerSpec, judgeLimits, MiB } from './judge-plan';

describe('judge container plan', () => {
  const limits = judgeLimits({
    cpus: 64,
    memoryMb: 64,
    shmSizeBytes: 2 ** 30,
    verifierTimeoutSec: 5,
    settings: { ...DEFAULT_JUDGE_SETTINGS, pidsLimit: 64 },
    hostCpus: 2,
    testsBytes: 20 * MiB,
  });

  it('takes the task limits, bounded by the host', () => {
    expect(limits).toMatchObject({
      cpusRequested: 64,
      cpus: 2,
      memoryBytes: 64 * MiB,
      pidsLimit: 64,
      verifierTimeoutSec: 5,
      outputCapBytes: MiB,
      testsTmpfsBytes: 40 * MiB,
      tmpBytes: 24 * MiB,
      shmBytes: 8 * MiB,
      readOnlyRootfs: true,
    });
    expect(
      judgeLimits({ cpus: null, memoryMb: null, shmSizeBytes: 0, verifierTimeoutSec: 1, settings: DEFAULT_JUDGE_SETTINGS, hostCpus: 8, testsBytes: 0 }),
    ).toMatchObject({ cpus: 2, memoryBytes: 4096 * MiB, testsTmpfsBytes: 16 * MiB });
  });

  it('keeps half the memory out of reach of candidate files: /tmp at most 3/8 (and 512 MiB), /dev/shm at most 1/8', () => {
    const l = (memoryMb: number, shm: number) =>
      judgeLimits({ cpus: 1, memoryMb, shmSizeBytes: shm, verifierTimeoutSec: 1, settings: DEFAULT_JUDGE_SETTINGS, hostCpus: 1, testsBytes: 0 });
    expect(l(256, 2 ** 30)).toMatchObject({ tmpBytes: 96 * MiB, shmBytes: 32 * MiB });
    expect(l(4096, 2 ** 30)).toMatchObject({ tmpBytes: 512 * MiB, shmBytes: 512 * MiB });
    expect(l(4096, 64 * MiB)).toMatchObject({ tmpBytes: 512 * MiB, shmBytes: 64 * MiB });
    for (const m of [16, 64, 100, 256, 4096, 65536]) {
      const x = l(m, 2 ** 40);
      expect(x.tmpBytes + x.shmBytes).toBeLessThanOrEqual((m * MiB) / 2);
      // about 1 KiB of kernel memory per inode: bounded to 1/8 of the bytes (at least 1024 inodes)
      expect(x.tmpInodes).toBe(Math.max(1024, x.tmpBytes / 8192));
      expect(x.shmInodes).toBe(Math.max(1024, x.shmBytes / 8192));
    }
    // a task without shm never gets an unbounded /dev/shm (tmpfs size 0 would mean no limit)
    expect(l(256, 0).shmBytes).toBe(MiB);
  });

  it("hides /proc only for the task author's image: setup-only SYS_ADMIN and SETPCAP, asked for by environment, recorded as such", () => {
    const base = {
      judgeId: 'j1',
      imageId: 'i',
      workdir: '/w',
      snapshotHostDir: '/h',
      verifierVolume: 'v',
      command: [],
      env: {},
      network: 'none' as const,
      limits,
      labels: {},
    };
    const hidden = judgeContainerSpec({ ...base, hideProc: true });
    expect(hidden.capAdd).toEqual(['SETUID', 'SETGID', 'SETPCAP', 'SYS_ADMIN']);
    expect(hidden.capDrop).toEqual(['ALL']);
    expect(hidden.env).toMatchObject({ ASSAY_JUDGE_HIDE_PROC: '1' });
    const visible = judgeContainerSpec({ ...base, hideProc: false });
    expect(visible.capAdd).toEqual(['SETUID', 'SETGID']);
    expect(visible.env).not.toHaveProperty('ASSAY_JUDGE_HIDE_PROC');
    const applied = (capAdd: string[]) => ({
      nanoCpus: 1e9,
      memoryBytes: 1,
      pidsLimit: 1,
      readOnlyRootfs: true,
      capAdd,
      capDrop: ['ALL'],
      securityOpt: ['no-new-privileges'],
    });
    expect(launchedLimits(limits, applied(['CAP_SETUID', 'CAP_SETGID', 'CAP_SYS_ADMIN', 'CAP_SETPCAP']))).toMatchObject({
      setupCapabilities: ['SETPCAP', 'SYS_ADMIN'],
      procHidden: true,
    });
    expect(launchedLimits(limits, applied(['SETUID', 'SETGID']))).toMatchObject({ setupCapabilities: [], procHidden: false });
    // One of the two alone does not hide /proc (the entrypoint would refuse to start test.sh).
    expect(launchedLimits(limits, applied(['SETUID', 'SETGID', 'SYS_ADMIN']))).toMatchObject({ setupCapabilities: ['SYS_ADMIN'], procHidden: false });
  });

  it('mounts the snapshot read-only, tests and reward directory for the Judge only, and drops privileges', () => {
    const s = judgeContainerSpec({
      judgeId: 'j1',
      imageId: 'sha256:abc',
      workdir: '/workspace',
      snapshotHostDir: '/h/snap',
      verifierVolume: 'v',
      command: ['/bin/bash', '/tests/test.sh'],
      env: { A: '1' },
      network: 'none',
      limits,
      labels: { 'org.assay.role': 'judge' },
      hideProc: false,
    });
    expect(s).toMatchObject({
      name: 'assay-judge-j1',
      image: 'sha256:abc',
      entrypoint: ['/opt/assay/judge/entrypoint'],
      cmd: ['/bin/bash', '/tests/test.sh'],
      env: { PYTHONSAFEPATH: '1', A: '1', ASSAY_JUDGE_WORKDIR: '/workspace' },
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
      { type: 'tmpfs', target: '/tmp', sizeBytes: 24 * MiB, mode: 0o1777, inodes: 3072 },
      { type: 'tmpfs', target: '/dev/shm', sizeBytes: 8 * MiB, mode: 0o1777, inodes: 1024 },
    ]);
    // A task may override the safe default, deliberately.
    expect(
      judgeContainerSpec({
        judgeId: 'j1',
        imageId: 'i',
        workdir: '/w',
        snapshotHostDir: null,
        verifierVolume: 'v',
        command: [],
        env: { PYTHONSAFEPATH: '' },
        network: 'none',
        limits,
        labels: {},
        hideProc: false,
      }).env,
    ).toMatchObject({ PYTHONSAFEPATH: '' });
  });
});

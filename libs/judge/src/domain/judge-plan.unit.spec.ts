import { DEFAULT_JUDGE_SETTINGS } from './judge-settings';
import { launchedLimits } from './judge-events';
import { judgeContainerSpec, judgeLimits, MiB, type JudgeLimits } from './judge-plan';

/** A Judge container's input with these limits, the setup step left to each case. */
const containerInput = (l: JudgeLimits) => ({
  judgeId: 'j1',
  imageId: 'i',
  workdir: '/w',
  snapshotHostDir: '/h',
  verifierVolume: 'v',
  command: [],
  env: {},
  network: 'none' as const,
  limits: l,
  labels: {},
  candidateMemoryBytes: null,
});

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
    const base = containerInput(limits);
    const hidden = judgeContainerSpec({ ...base, setup: true });
    expect(hidden.capAdd).toEqual(['SETUID', 'SETGID', 'SETPCAP', 'SYS_ADMIN']);
    expect(hidden.capDrop).toEqual(['ALL']);
    expect(hidden.env).toMatchObject({ ASSAY_JUDGE_SETUP: 'hide-proc' });
    expect(hidden.readOnlyRootfs).toBe(true);
    const visible = judgeContainerSpec({ ...base, setup: false });
    expect(visible.capAdd).toEqual(['SETUID', 'SETGID']);
    expect(visible.env).not.toHaveProperty('ASSAY_JUDGE_SETUP');
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

  it('gives candidate code a memory cgroup of half the memory limit through the setup step, recorded only when the step runs', () => {
    expect(limits.candidateMemoryBytes).toBe(32 * MiB);
    const big = judgeLimits({ cpus: 1, memoryMb: 4096, shmSizeBytes: 0, verifierTimeoutSec: 1, settings: DEFAULT_JUDGE_SETTINGS, hostCpus: 1, testsBytes: 0 });
    expect(big.candidateMemoryBytes).toBe(2048 * MiB);
    const base = containerInput(limits);
    const bounded = judgeContainerSpec({ ...base, setup: true, candidateMemoryBytes: limits.candidateMemoryBytes });
    expect(bounded.env).toMatchObject({ ASSAY_JUDGE_SETUP: 'hide-proc,candidate-memory', ASSAY_JUDGE_CANDIDATE_MEMORY: String(32 * MiB) });
    // The step needs the setup capabilities: without the setup step there is no cgroup, whatever was asked.
    const plain = judgeContainerSpec({ ...base, setup: false, candidateMemoryBytes: limits.candidateMemoryBytes });
    expect(plain.env).not.toHaveProperty('ASSAY_JUDGE_SETUP');
    expect(plain.env).not.toHaveProperty('ASSAY_JUDGE_CANDIDATE_MEMORY');
    const applied = (capAdd: string[]) => ({ nanoCpus: 1e9, memoryBytes: 1, pidsLimit: 1, readOnlyRootfs: true, capAdd, capDrop: ['ALL'], securityOpt: [] });
    const setupCaps = ['SETUID', 'SETGID', 'SYS_ADMIN', 'SETPCAP'];
    expect(launchedLimits(limits, applied(setupCaps), 32 * MiB).candidateMemoryBytes).toBe(32 * MiB);
    expect(launchedLimits(limits, applied(setupCaps)).candidateMemoryBytes).toBeNull();
    expect(launchedLimits(limits, applied(['SETUID', 'SETGID']), 32 * MiB).candidateMemoryBytes).toBeNull();
  });

  it("writable_rootfs: with the setup step the root stays read-only and its writes go to a bounded tmpfs; without it they go to Docker's layer, recorded as unbounded", () => {
    const writable = judgeLimits({
      cpus: 1,
      memoryMb: 1024,
      shmSizeBytes: 64 * MiB,
      verifierTimeoutSec: 60,
      settings: { ...DEFAULT_JUDGE_SETTINGS, writableRootfs: true },
      hostCpus: 4,
      testsBytes: 0,
      storageMb: 100,
    });
    // candidate-writable places stay at half the memory: /tmp 1/8, /dev/shm 1/8 (64 MiB here), the root's writes 1/4 and storage_mb
    expect([writable.tmpBytes, writable.shmBytes, writable.rootfsWriteBytes]).toEqual([128 * MiB, 64 * MiB, 100 * MiB]);
    expect(
      judgeLimits({
        cpus: 1,
        memoryMb: 1024,
        shmSizeBytes: 0,
        verifierTimeoutSec: 60,
        settings: { ...DEFAULT_JUDGE_SETTINGS, writableRootfs: true },
        hostCpus: 4,
        testsBytes: 0,
      }).rootfsWriteBytes,
    ).toBe(256 * MiB);
    const base = containerInput(writable);
    const bounded = judgeContainerSpec({ ...base, setup: true });
    expect(bounded.readOnlyRootfs).toBe(true);
    expect(bounded.env).toMatchObject({ ASSAY_JUDGE_SETUP: 'hide-proc,rootfs-overlay' });
    expect(bounded.mounts).toContainEqual({ type: 'tmpfs', target: '/.assay-rw', sizeBytes: 100 * MiB, mode: 0o700, inodes: Math.floor((100 * MiB) / 8192) });
    const unbounded = judgeContainerSpec({ ...base, setup: false });
    expect(unbounded.readOnlyRootfs).toBe(false);
    expect(unbounded.mounts.map((m) => m.target)).not.toContain('/.assay-rw');
    const applied = (capAdd: string[], readOnlyRootfs: boolean) => ({
      nanoCpus: 1e9,
      memoryBytes: 1,
      pidsLimit: 1,
      readOnlyRootfs,
      capAdd,
      capDrop: ['ALL'],
      securityOpt: [],
    });
    expect(bounded.capAdd).toEqual(['SETUID', 'SETGID', 'SETPCAP', 'SYS_ADMIN', 'CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'MKNOD']);
    expect(launchedLimits(writable, applied([...bounded.capAdd], true))).toMatchObject({
      rootfsWrites: 'bounded',
      rootfsWriteBytes: 100 * MiB,
      procHidden: true,
      setupCapabilities: ['CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'MKNOD', 'SETPCAP', 'SYS_ADMIN'],
    });
    expect(launchedLimits(writable, applied(['SETUID', 'SETGID'], false))).toMatchObject({ rootfsWrites: 'unbounded', rootfsWriteBytes: null });
    expect(launchedLimits(limits, applied(['SETUID', 'SETGID'], true))).toMatchObject({ rootfsWrites: 'none', rootfsWriteBytes: null });
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
      setup: false,
      candidateMemoryBytes: null,
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
        setup: false,
        candidateMemoryBytes: null,
      }).env,
    ).toMatchObject({ PYTHONSAFEPATH: '' });
  });
});

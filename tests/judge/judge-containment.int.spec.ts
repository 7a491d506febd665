/**
 * Hostile candidates against the Judge, on a real Docker daemon (tests/fixtures/judge/tasks share one environment, so
 * one image serves them; examples/tasks/hello-judge builds its own). Each case is an attack that once worked:
 *
 *   - a snapshot's json.py imported by a root verifier (hello-judge's own scorer, and a careless `python3 -c`);
 *   - candidate output imitating the entrypoint's setup failure (exit 125) to turn its round into a refund, with
 *     terminal escape codes meant for the operator's terminal and the signed detail;
 *   - a candidate thread group whose leader has exited, which a scan of /proc leaders never saw;
 *   - candidate files in /tmp and /dev/shm taking the memory the root verifier needs;
 *   - the host's ASSAY_HOME path read from /proc/self/mountinfo;
 *   - root processes' command lines (hidden test names, arguments) read from /proc (now hidepid=invisible).
 *
 * Nothing here sends a packet off the machine: every Judge has network mode none.
 */
import * as fs from 'node:fs';
import { join, resolve } from 'node:path';
import { randomIds, systemClock } from '@assay/core';
import { initLedgerHome } from '@assay/ledger';
import { runClaimRules } from '@assay/run';
import type { JudgeResult } from '@assay/judge';
import { openJudgeRuntime, type JudgeRuntime, type LoadedTask } from '../../libs/runtime/src';
import { describeDocker } from '../support/docker';
import { tmp } from './judge-fakes';

const REPO = resolve(__dirname, '../..');
const FIXTURES = join(REPO, 'tests/fixtures/judge/tasks');
const HELLO = join(REPO, 'examples/tasks/hello-judge');
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;

/** A json.py that, imported as root, plants a huge reward and prints the hidden test.sh; as the candidate, a stub. */
const HOSTILE_JSON = `import os, sys
if os.geteuid() == 0:
    print("HOSTILE json.py imported as root")
    try:
        sys.stdout.write(open("/tests/test.sh").read())
    except OSError as e:
        print("cannot read /tests/test.sh:", e)
    with open("/logs/verifier/reward.json", "w") as f:
        f.write('{"reward": 1000000}')
    sys.stdout.flush()
    os._exit(0)
def dumps(o, **k):
    return "{}"
def loads(s, **k):
    return {}
def dump(o, f, **k):
    f.write("{}")
`;

/** Candidate Python (needs `import os, time`): ten processes of 30 MiB each, every one smaller than the verifier. */
const TEN_HOGS = `kids = []
for i in range(10):
    pid = os.fork()
    if pid == 0:
        try:
            x = bytearray(30 << 20)
            x[::4096] = b"\\1" * len(x[::4096])
            time.sleep(2)
        finally:
            os._exit(0)
    kids.append(pid)
for k in kids:
    os.waitpid(k, 0)
print("candidate done")
`;

describeDocker('Judge containment against hostile candidates (Docker)', () => {
  let home: string;
  let rt: JudgeRuntime;
  const tasks = new Map<string, LoadedTask>();
  const dirs: string[] = [];

  beforeAll(async () => {
    home = tmp('assay-judge-contain-');
    await initLedgerHome(home, { clock: systemClock, ids: randomIds, origin: 'assay.test/judge-containment' });
    rt = await openJudgeRuntime({ home });
    await rt.containers.ping();
  }, 60_000);

  afterAll(async () => {
    await rt?.close();
    fs.rmSync(home, { recursive: true, force: true });
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });

  /** Judges a workspace of `files` with the task, by runtime `by` (default: the suite's); nothing is left behind. */
  async function judge(taskDir: string, files: Record<string, string>, by: JudgeRuntime = rt): Promise<JudgeResult> {
    let t = tasks.get(taskDir);
    if (!t) {
      t = await rt.loadTask(taskDir);
      tasks.set(taskDir, t);
    }
    const ws = tmp('assay-judge-contain-ws-');
    dirs.push(ws);
    for (const [p, c] of Object.entries(files)) fs.writeFileSync(join(ws, p), c);
    const cid = await by.snapshots.snapshotDirectory(ws);
    const r = await by.runner.judge(t.prepared, cid);
    expect(await by.containers.listContainers({ 'org.assay.judge': r.judge })).toEqual([]);
    expect(await by.containers.listVolumes({ 'org.assay.judge': r.judge })).toEqual([]);
    return r;
  }

  /** The same, by a runtime of an operator who chose ASSAY_JUDGE_PROC=visible (no setup step). */
  async function judgeVisible(taskDir: string, files: Record<string, string>): Promise<JudgeResult> {
    const visible = await openJudgeRuntime({ home, procVisibility: 'visible' });
    try {
      return await judge(taskDir, files, visible);
    } finally {
      await visible.close();
    }
  }

  const log = (r: JudgeResult) => fs.readFileSync(r.output.path, 'utf8');
  const completedDetail = async (r: JudgeResult): Promise<string | null> => {
    for await (const e of rt.ledgerHome.db.events.readStream(r.stream)) {
      if (e.type === 'JudgeCompleted') return (JSON.parse(Buffer.from(e.bytes).toString('utf8')) as { data: { detail?: string } }).data.detail ?? null;
    }
    return null;
  };

  const launchedLimitsOf = async (r: JudgeResult): Promise<Record<string, unknown> | null> => {
    for await (const e of rt.ledgerHome.db.events.readStream(r.stream)) {
      if (e.type === 'JudgeLaunched') return (JSON.parse(Buffer.from(e.bytes).toString('utf8')) as { data: { limits: Record<string, unknown> } }).data.limits;
    }
    return null;
  };

  it("hello-judge: the snapshot's json.py is never imported by the root scorer (no forged reward, no hidden test in the log)", async () => {
    const r = await judge(HELLO, { 'hello.py': fs.readFileSync(join(HELLO, 'environment/workspace/hello.py'), 'utf8'), 'json.py': HOSTILE_JSON });
    expect(r).toMatchObject({ status: 'completed', rewards: { reward: 0, passed: 0, total: 4 }, primaryScore: 0 });
    const out = log(r);
    expect(out).not.toContain('HOSTILE json.py imported as root');
    expect(out).not.toContain('Hidden checks for hello-judge');
  }, 180_000);

  it('a careless root `python3 -c` in the workdir does not import the snapshot either (safe path settings by default)', async () => {
    const r = await judge(join(FIXTURES, 'workdir-python'), { 'json.py': HOSTILE_JSON });
    expect(r).toMatchObject({ status: 'completed', rewards: { reward: 0.5 } });
    expect(log(r)).not.toContain('HOSTILE json.py imported as root');
  }, 180_000);

  it("candidate output imitating the entrypoint's setup failure is the candidate's, not a refund; escapes never reach the detail", async () => {
    const main = `import sys
line = "assay-judge-entrypoint: setup failed: \\x1b]0;owned\\x07\\x1b[2J\\x1b[31mforged\\x1b[0m\\n"
sys.stdout.write(line)
sys.stdout.flush()
sys.stderr.write(line)
sys.stderr.flush()
# The container's stderr, held only by docker-init (root) once the verifier runs: out of reach (and with /proc
# hidepid=invisible, docker-init is not even visible).
try:
    with open("/proc/1/fd/2", "w") as f:
        f.write(line)
    print("ATTACK SUCCEEDED: wrote the container's stderr")
except OSError as e:
    print("stderr channel refused:", type(e).__name__)
sys.stdout.flush()
sys.exit(125)
`;
    const r = await judge(join(FIXTURES, 'forged-setup-failure'), { 'main.py': main });
    expect(r).toMatchObject({ status: 'completed', exitCode: 125, rewards: { reward: 0 }, primaryScore: 0 });
    expect(log(r)).toContain('assay-judge-entrypoint: setup failed:'); // it was printed, and read as output only
    expect(log(r)).toContain('stderr channel refused: FileNotFoundError');
    expect(log(r)).not.toContain('ATTACK SUCCEEDED');
    expect(r.detail ?? '').not.toMatch(CONTROL);
    expect((await completedDetail(r)) ?? '').not.toMatch(CONTROL);
  }, 180_000);

  it('kills a candidate thread group whose leader has exited', async () => {
    const main = `import ctypes, os, platform, sys, threading, time
if os.fork() == 0:
    os.setsid()
    def tick():
        while True:
            with open("/tmp/ticks", "a") as f:
                f.write(".")
            time.sleep(0.05)
    threading.Thread(target=tick).start()
    time.sleep(0.2)
    # the leader thread ends alone (SYS_exit, not exit_group): the thread group lives on without it
    ctypes.CDLL(None, use_errno=True).syscall({"x86_64": 60, "aarch64": 93}[platform.machine()], 0)
time.sleep(0.5)
print("candidate main exits; a leaderless thread group keeps ticking")
`;
    const r = await judge(join(FIXTURES, 'thread-leader-exit'), { 'main.py': main });
    expect(log(r)).toContain('candidate main exits');
    expect(log(r)).not.toContain('still running after the kill');
    expect(r).toMatchObject({ status: 'completed', rewards: { reward: 1, leftover_candidate_threads: 0, grew: 0 } });
  }, 180_000);

  it('candidate files in /tmp and /dev/shm cannot take the memory the root verifier needs', async () => {
    const main = `import os
total = {}
for d in ("/tmp", "/dev/shm"):
    n = 0
    try:
        with open(os.path.join(d, "fill"), "wb") as f:
            while n < 1024:
                f.write(b"x" * (1 << 20))
                f.flush()
                n += 1
    except OSError as e:
        pass
    total[d] = n
print("candidate wrote (MiB):", total)
`;
    const r = await judge(join(FIXTURES, 'tmpfs-fill'), { 'main.py': main });
    const out = log(r);
    expect(out).toContain('verifier allocated 96 MiB');
    expect(r).toMatchObject({ status: 'completed', rewards: { reward: 1 } });
  }, 180_000);

  it('empty files by the hundred thousand (inodes are memory too) cannot take the memory the root verifier needs', async () => {
    const main = `import os
total = {}
for d in ("/tmp", "/dev/shm"):
    n = 0
    try:
        while n < 400000:
            open("%s/e%d" % (d, n), "w").close()
            n += 1
    except OSError:
        pass
    total[d] = n
print("candidate made empty files:", total, flush=True)
`;
    const r = await judge(join(FIXTURES, 'tmpfs-fill'), { 'main.py': main });
    expect(log(r)).toContain('verifier allocated 96 MiB');
    expect(r).toMatchObject({ status: 'completed', rewards: { reward: 1 } });
  }, 180_000);

  it('out of memory, the kernel ends candidate processes (each smaller than the verifier), never the verifier', async () => {
    const main = `import os, time
${TEN_HOGS}`;
    const r = await judge(join(FIXTURES, 'oom-choice'), { 'main.py': main });
    const out = log(r);
    expect(out).toContain('verifier kept its 100 MiB');
    expect(r).toMatchObject({ status: 'completed', rewards: { reward: 1 } });
  }, 180_000);

  it('candidate code that lowers its out-of-memory score back to the floor still cannot take the memory the verifier holds (its own memory cgroup)', async () => {
    const main = `import os, time
with open("/proc/self/oom_score_adj", "w") as f:
    f.write("0")
print("candidate oom_score_adj", open("/proc/self/oom_score_adj").read().strip(), flush=True)
for name, path, value in (
    ("raise its limit", "/sys/fs/cgroup/memory/assay-candidate/memory.limit_in_bytes", str(1 << 40)),
    ("leave its cgroup", "/sys/fs/cgroup/memory/cgroup.procs", str(os.getpid())),
):
    try:
        with open(path, "w") as f:
            f.write(value)
        print("candidate could", name, flush=True)
    except OSError as e:
        print("candidate cannot", name, flush=True)
with open("/tmp/fill", "wb") as f:
    for _ in range(40):
        f.write(b"x" * (1 << 20))
${TEN_HOGS}`;
    const r = await judge(join(FIXTURES, 'oom-floor'), { 'main.py': main });
    const out = log(r);
    if ((await rt.containers.daemonInfo()).cgroupVersion !== 1) {
      // Assay makes the candidate's cgroup on cgroup v1 hosts only (docs/judge.md): elsewhere the launch says so
      expect(await launchedLimitsOf(r)).toMatchObject({ candidateMemoryBytes: null });
      return;
    }
    expect(out).toContain('candidate oom_score_adj 0');
    expect(out).toContain('candidate cannot raise its limit');
    expect(out).toContain('candidate cannot leave its cgroup');
    const cgroup = /candidate cgroup limit (\d+) peak (\d+)/.exec(out);
    expect(cgroup).not.toBeNull();
    const [limit, peak] = [Number(cgroup?.[1]), Number(cgroup?.[2])];
    expect(limit).toBe(128 * 1048576);
    expect(peak).toBeGreaterThan(64 * 1048576);
    expect(peak).toBeLessThanOrEqual(limit);
    expect(out).toContain('verifier kept its 48 MiB');
    expect(r).toMatchObject({ status: 'completed', rewards: { reward: 1 } });
    expect(await launchedLimitsOf(r)).toMatchObject({ memoryBytes: 256 * 1048576, candidateMemoryBytes: 128 * 1048576, procHidden: true });
  }, 180_000);

  it('System V shared memory the candidate leaves behind goes with its processes', async () => {
    const main = `import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
libc.shmdt.argtypes = [ctypes.c_void_p]
total = 0
for i in range(40):
    sid = libc.shmget(0, 8 << 20, 0o1000 | 0o600)  # IPC_PRIVATE, IPC_CREAT
    if sid < 0:
        break
    addr = libc.shmat(sid, None, 0)
    if addr is None or addr == ctypes.c_void_p(-1).value:
        break
    ctypes.memset(addr, 1, 8 << 20)
    libc.shmdt(ctypes.c_void_p(addr))
    total += 8
    print("candidate left", total, "MiB of System V shared memory", flush=True)
`;
    const r = await judge(join(FIXTURES, 'tmpfs-fill'), { 'main.py': main });
    const out = log(r);
    expect(out).toContain('candidate left 8 MiB');
    expect(out).toContain('verifier allocated 96 MiB');
    expect(r).toMatchObject({ status: 'completed', rewards: { reward: 1 } });
  }, 180_000);

  it("the host's ASSAY_HOME path is not visible to candidate code (mount table, environment, command lines); root's processes are hidden", async () => {
    const main = `import os
print("mountinfo:", open("/proc/self/mountinfo").read())
for p in sorted(x for x in os.listdir("/proc") if x.isdigit()):
    print("visible", p, "uid", os.stat("/proc/%s" % p).st_uid)
for p in ["1"] + sorted(x for x in os.listdir("/proc") if x.isdigit()):
    try:
        print("cmdline", p, open("/proc/%s/cmdline" % p, "rb").read().replace(b"\\0", b" ").decode(errors="replace"))
    except OSError as e:
        print("cmdline", p, "unreadable:", type(e).__name__)
    try:
        print("environ", p, open("/proc/%s/environ" % p, "rb").read().replace(b"\\0", b" ").decode(errors="replace"))
    except OSError as e:
        print("environ", p, "unreadable:", type(e).__name__)
print("own environ:", dict(os.environ))
`;
    const r = await judge(join(FIXTURES, 'proc-snoop'), { 'main.py': main });
    expect(r).toMatchObject({ status: 'completed', rewards: { reward: 1 } });
    const out = log(r);
    expect(out).toContain('mountinfo:');
    expect(out).not.toContain(home);
    expect(out).not.toContain(fs.realpathSync(home));
    expect(out).not.toContain('ROOT-ONLY-ENVIRONMENT'); // root processes' environment stays unreadable
    // /proc is hidepid=invisible: root's processes (docker-init, test.sh, the sleep with a secret argument) do not
    // exist for candidate code; it sees its own processes only.
    expect(out).toMatch(/ - proc proc \S*hidepid=(invisible|2)/);
    expect(out).not.toContain('ROOT-ONLY-ARGUMENT');
    expect(out).toMatch(/cmdline 1 unreadable: FileNotFoundError/);
    const visible = [...out.matchAll(/^visible (\d+) uid (\d+)$/gm)];
    expect(visible.length).toBeGreaterThan(0);
    expect(visible.map((m) => m[2])).toEqual(visible.map(() => '65534'));
    // The setup capabilities are gone before test.sh runs; the launch records them and that /proc was hidden.
    expect(out).toMatch(/^verifier CapBnd 0+c0$/m);
    const launched = await launchedLimitsOf(r);
    expect(launched).toMatchObject({ procHidden: true, setupCapabilities: ['SETPCAP', 'SYS_ADMIN'] });
  }, 180_000);

  it('with ASSAY_JUDGE_PROC=visible (a host that forbids the remount) /proc is not hidden, no setup capability is given, and the launch says so', async () => {
    const r = await judgeVisible(join(FIXTURES, 'proc-snoop'), {
      'main.py': 'import os\nprint("pids", sorted(int(x) for x in os.listdir("/proc") if x.isdigit()))\n',
    });
    expect(r).toMatchObject({ status: 'completed', rewards: { reward: 1 } });
    expect(log(r)).toMatch(/^pids \[1, /m);
    expect(log(r)).toMatch(/^verifier CapBnd 0+c0$/m);
    expect(r.limits).toMatchObject({ procHidden: false, setupCapabilities: [], capAdd: ['SETGID', 'SETUID'] });
  }, 180_000);

  it('writable_rootfs: test.sh and candidate code may write the image, but only up to the bound (storage_mb), never onto the host disk unbounded', async () => {
    const main = `import os
n = 0
try:
    with open("/var/tmp/candidate-fill", "wb") as f:
        for _ in range(96):
            f.write(b"\\0" * 1048576)
            f.flush()
            n += 1
except OSError as e:
    print("candidate fill stopped:", type(e).__name__, e.errno)
print("candidate fill: %d MiB" % n)
`;
    const r = await judge(join(FIXTURES, 'writable-rootfs'), { 'main.py': main });
    expect([r.status, r.detail]).toEqual(['completed', null]);
    expect(r).toMatchObject({ status: 'completed', rewards: { reward: 1 } });
    const out = log(r);
    expect(out).toContain('root write: root-wrote');
    const rootFill = Number(/root fill: exit \d+ size (\d+) MiB/.exec(out)?.[1]);
    expect(rootFill).toBeLessThanOrEqual(32);
    expect(out).toMatch(/candidate fill stopped: OSError 28/); // ENOSPC
    expect(Number(/candidate fill: (\d+) MiB/.exec(out)?.[1])).toBeLessThanOrEqual(32);
    expect(out).toMatch(/new top-level entry: exit [1-9]/); // the root directory itself stays read-only
    expect(out).toContain('still mounted: /etc/hostname');
    expect(out).toContain('still mounted: /logs/verifier');
    expect(out).toMatch(/^verifier CapBnd 0+c0$/m); // every setup capability is gone before test.sh
    expect(r.limits?.setupCapabilities).toEqual(['CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'MKNOD', 'SETPCAP', 'SYS_ADMIN']);
    expect(r.limits).toMatchObject({ readOnlyRootfs: true, rootfsWrites: 'bounded', rootfsWriteBytes: 32 * 1048576 });
  }, 180_000);

  it("writable_rootfs without the setup step (ASSAY_JUDGE_PROC=visible) writes into Docker's own layer, unbounded, and the launch says so", async () => {
    const r = await judgeVisible(join(FIXTURES, 'writable-rootfs'), { 'main.py': 'print("candidate fill: 0 MiB")\n' });
    expect(r).toMatchObject({ status: 'completed', rewards: { reward: 1 } });
    expect(log(r)).toMatch(/root fill: exit 0 size 96 MiB/);
    expect(r.limits).toMatchObject({ readOnlyRootfs: false, rootfsWrites: 'unbounded', rootfsWriteBytes: null });
  }, 180_000);

  it('leaves nothing behind, and the ledger verifies', async () => {
    const report = await rt.ledgerHome.verify({ workers: 0, claims: runClaimRules() });
    expect(report.failure ?? null).toBeNull();
    expect(report.ok).toBe(true);
  }, 60_000);
});

/**
 * scripts/ensure-docker.sh from nothing, without touching this machine's Docker: the script runs with a PATH whose
 * first directory holds stubs for docker, dockerd, apt-get, id and cgroupfs-mount (ASSAY_ENSURE_DOCKER_PATH), so
 * every branch (already up, install, start, crash, hang, stale pid file, not root) is exercised for real in bash.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const SCRIPT = join(__dirname, '../../scripts/ensure-docker.sh');

const STUBS: Record<string, string> = {
  docker: `#!/bin/bash
case "$1" in
  info) [ -e "$STUB_STATE/up" ] ;;
  version) echo stub-28.0 ;;
  *) exit 2 ;;
esac`,
  dockerd: `#!/bin/bash
echo $$ >"$STUB_STATE/dockerd.pid"
echo "stub dockerd starting ($(cat "$STUB_STATE/dockerd-mode"))"
case "$(cat "$STUB_STATE/dockerd-mode")" in
  ok) sleep 1; touch "$STUB_STATE/up"; exec sleep 300 ;;
  crash) echo "failed to start daemon: stub crash"; exit 1 ;;
  hang) exec sleep 300 ;;
esac`,
  'apt-get': `#!/bin/bash
echo "$*" >>"$STUB_STATE/apt.log"
[ "$1" = install ] && [ -e "$STUB_STATE/apt-fails" ] && { echo "E: stub failure"; exit 100; }
if [ "$1" = install ]; then cp "$STUB_STATE/pkg/docker" "$STUB_STATE/pkg/dockerd" "$STUB_BIN/"; fi
exit 0`,
  id: `#!/bin/bash
[ "$1" = -u ] && echo "$STUB_UID"`,
  'cgroupfs-mount': `#!/bin/bash
touch "$STUB_STATE/cgroupfs"`,
};

// Only these real tools are reachable: no real docker, dockerd, apt-get or systemctl can be found by the script.
const TOOLS = ['bash', 'cat', 'cp', 'date', 'dirname', 'grep', 'mkdir', 'mktemp', 'nohup', 'rm', 'setsid', 'sleep', 'tail', 'touch', 'tr'];

function toolsDir(root: string): string {
  const dir = join(root, 'tools');
  mkdirSync(dir);
  for (const t of TOOLS) {
    const real = ['/usr/bin', '/bin'].map((d) => join(d, t)).find((f) => existsSync(f));
    if (!real) throw new Error(`${t} not found`);
    symlinkSync(real, join(dir, t));
  }
  return dir;
}

interface World {
  bin: string;
  state: string;
  root: string;
  tools: string;
}

const worlds: World[] = [];

function world(opts: { installed: boolean; mode?: 'ok' | 'crash' | 'hang'; up?: boolean }): World {
  const root = mkdtempSync(join(tmpdir(), 'ensure-docker-'));
  const w = { root, bin: join(root, 'bin'), state: join(root, 'state'), tools: toolsDir(root) };
  mkdirSync(w.bin);
  mkdirSync(join(w.state, 'pkg'), { recursive: true });
  for (const [name, text] of Object.entries(STUBS)) {
    const isPkg = name === 'docker' || name === 'dockerd';
    const file = join(isPkg ? join(w.state, 'pkg') : w.bin, name);
    writeFileSync(file, `${text}\n`);
    chmodSync(file, 0o755);
    if (isPkg && opts.installed) copyFileSync(file, join(w.bin, name));
  }
  writeFileSync(join(w.state, 'dockerd-mode'), opts.mode ?? 'ok');
  if (opts.up) writeFileSync(join(w.state, 'up'), '');
  worlds.push(w);
  return w;
}

function run(w: World, env: Record<string, string> = {}) {
  const r = spawnSync('/bin/bash', [SCRIPT], {
    encoding: 'utf8',
    timeout: 30_000,
    env: {
      HOME: w.root,
      STUB_BIN: w.bin,
      STUB_STATE: w.state,
      STUB_UID: '0',
      ASSAY_ENSURE_DOCKER_PATH: `${w.bin}:${w.tools}`,
      DOCKER_HOST: `unix://${join(w.root, 'no-such.sock')}`,
      ASSAY_DOCKER_START: 'direct',
      ASSAY_DOCKERD_LOG: join(w.root, 'log', 'dockerd.log'),
      ASSAY_DOCKERD_PIDFILE: join(w.state, 'docker.pid'),
      ASSAY_DOCKERD_TIMEOUT: '10',
      ASSAY_DOCKERD_INSTALL_GRACE: '1',
      TMPDIR: w.root,
      ...env,
    },
  });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

const aptLog = (w: World) => (existsSync(join(w.state, 'apt.log')) ? readFileSync(join(w.state, 'apt.log'), 'utf8') : '');

afterAll(() => {
  for (const w of worlds) {
    const pidFile = join(w.state, 'dockerd.pid');
    if (existsSync(pidFile)) {
      const pid = Number(readFileSync(pidFile, 'utf8'));
      try {
        process.kill(pid, 'SIGTERM'); // only the stub dockerd this test started
      } catch {
        // already gone
      }
    }
    rmSync(w.root, { recursive: true, force: true });
  }
});

describe('scripts/ensure-docker.sh', () => {
  it('does nothing when the daemon answers', () => {
    const w = world({ installed: true, up: true });
    const r = run(w);
    expect(r.code).toBe(0);
    expect(r.out).toContain('already running (server stub-28.0); nothing to do');
    expect(aptLog(w)).toBe('');
  });

  it('refuses to install without root, saying how', () => {
    const w = world({ installed: false });
    const r = run(w, { STUB_UID: '1000' });
    expect(r.code).toBe(1);
    expect(r.err).toContain("docker and dockerd not installed; run this script as root to install Debian's docker.io");
    expect(aptLog(w)).toBe('');
  });

  it('installs docker.io with apt-get and starts dockerd, from nothing', () => {
    const w = world({ installed: false, mode: 'ok' });
    const r = run(w);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    expect(aptLog(w)).toMatch(/^update -q\ninstall -y -q --no-install-recommends docker.io cgroupfs-mount\n$/);
    expect(r.out).toMatch(/installing Debian's docker.io/);
    expect(r.out).toMatch(/starting dockerd in the background \(log: .*dockerd.log\)/);
    expect(r.out).toMatch(/docker daemon ready \(pid \d+, server stub-28.0\)/);
    expect(readFileSync(join(w.root, 'log', 'dockerd.log'), 'utf8')).toContain('stub dockerd starting (ok)');
  });

  it('reports an apt-get failure with its output', () => {
    const w = world({ installed: false });
    writeFileSync(join(w.state, 'apt-fails'), '');
    const r = run(w);
    expect(r.code).toBe(1);
    expect(r.err).toContain('E: stub failure');
    expect(r.err).toContain('apt-get install docker.io failed');
  });

  it('reports a dockerd that exits, with the end of its log', () => {
    const w = world({ installed: true, mode: 'crash' });
    const r = run(w);
    expect(r.code).toBe(1);
    expect(r.err).toContain('failed to start daemon: stub crash');
    expect(r.err).toContain('dockerd exited before it was ready');
  });

  it('gives up on a dockerd that never answers, within the bound', () => {
    const w = world({ installed: true, mode: 'hang' });
    const started = Date.now();
    const r = run(w, { ASSAY_DOCKERD_TIMEOUT: '2' });
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/did not answer within 2s/);
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('removes a stale pid file before starting, and refuses to start without root', () => {
    const w = world({ installed: true, mode: 'ok' });
    writeFileSync(join(w.state, 'docker.pid'), '999999999\n');
    const notRoot = run(w, { STUB_UID: '1000' });
    expect(notRoot.code).toBe(1);
    expect(notRoot.err).toContain('only root can start it');
    const r = run(w);
    expect(r.code).toBe(0);
    expect(r.out).toContain('removing stale pid file');
  });

  it('validates its settings', () => {
    const w = world({ installed: true });
    expect(run(w, { ASSAY_DOCKERD_TIMEOUT: 'soon' }).err).toContain('ASSAY_DOCKERD_TIMEOUT must be a whole number');
    expect(run(w, { ASSAY_DOCKER_START: 'magic' }).err).toContain('ASSAY_DOCKER_START must be auto, systemd or direct');
  });
});

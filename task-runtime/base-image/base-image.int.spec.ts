/**
 * The locally built base image (scripts/build-base-image.sh) and the hello-judge example on top of it, with the
 * network off everywhere. Without a Docker daemon or the image the suite fails, naming what is missing
 * (tests/support/docker.ts); it is never skipped.
 */
import { createHash } from 'node:crypto';
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { describeDocker } from '../../tests/support/docker';

const REPO = join(__dirname, '../..');
const TAG = 'assay/base:bookworm';
const LABEL = 'org.assay.base.recipe-digest';

function docker(args: string[], input?: string): { code: number | null; out: string; err: string } {
  const r = spawnSync('docker', args, { encoding: 'utf8', timeout: 120_000, input });
  return { code: r.status, out: r.stdout ?? '', err: r.stderr ?? '' };
}


/** The same digest the build script computes: sha256 over (name NUL sha256hex(file) LF) for its three inputs. */
function recipeDigest(): string {
  const outer = createHash('sha256');
  for (const f of ['task-runtime/base-image/recipe.conf', 'task-runtime/base-image/packages.txt', 'scripts/build-base-image.sh']) {
    const inner = createHash('sha256').update(readFileSync(join(REPO, f))).digest('hex');
    outer.update(`${basename(f)}\0${inner}\n`);
  }
  return `sha256:${outer.digest('hex')}`;
}


describeDocker('assay/base:bookworm', () => {
  it('carries the digest of the current recipe', () => {
    const label = docker(['image', 'inspect', '--format', `{{index .Config.Labels "${LABEL}"}}`, TAG]).out.trim();
    expect(label).toBe(recipeDigest());
  });

  it('runs python3 with numpy with the network off, and has no interface but lo', () => {
    const r = docker(['run', '--rm', '--network', 'none', TAG, 'python3', '-c', 'import numpy; print(numpy.__version__)']);
    expect(r.err).toBe('');
    expect(r.out.trim()).toMatch(/^\d+\.\d+\.\d+$/);
    expect(docker(['run', '--rm', '--network', 'none', TAG, 'ls', '/sys/class/net']).out.trim()).toBe('lo');
  });

  it('is minimal: no apt lists or caches, CA certificates present', () => {
    const r = docker(['run', '--rm', '--network', 'none', TAG, 'bash', '-c', 'ls /var/lib/apt/lists | wc -l; ls /var/cache/apt/*.bin 2>/dev/null | wc -l; test -s /etc/ssl/certs/ca-certificates.crt && echo certs']);
    expect(r.out.split('\n').slice(0, 3)).toEqual(['0', '0', 'certs']);
  });

  describe('examples/tasks/hello-judge', () => {
    const example = join(REPO, 'examples/tasks/hello-judge');
    const image = `assay/test-hello-judge:${process.pid}`;
    let work: string;

    beforeAll(() => {
      work = mkdtempSync(join(tmpdir(), 'hello-judge-'));
      execFileSync('docker', ['build', '-q', '--network', 'none', '-t', image, join(example, 'environment')], { stdio: 'pipe', timeout: 120_000 });
    });
    afterAll(() => {
      docker(['rmi', '-f', image]);
      rmSync(work, { recursive: true, force: true });
    });

    function judge(workspace: string): unknown {
      // As in a Judge: /tests and /logs/verifier are root's alone (0700), which run-as-candidate checks.
      const logs = join(work, `logs-${basename(workspace)}`);
      mkdirSync(logs, { mode: 0o700 });
      const tests = join(work, `tests-${basename(workspace)}`);
      cpSync(join(example, 'tests'), tests, { recursive: true });
      chmodSync(tests, 0o700);
      const r = docker([
        'run', '--rm', '--network', 'none',
        '-v', `${workspace}:/workspace:ro`,
        '-v', `${tests}:/tests:ro`,
        '-v', `${logs}:/logs/verifier`,
        // Judge images carry run-as-candidate (docs/judge.md); the plain task image gets it the same way here.
        '-v', `${join(REPO, 'task-runtime/judge/run-as-candidate')}:/usr/local/bin/run-as-candidate:ro`,
        image, 'bash', '/tests/test.sh',
      ]);
      expect(r.code).toBe(0);
      return JSON.parse(readFileSync(join(logs, 'reward.json'), 'utf8'));
    }

    it('scores the untouched workspace 0 and the reference solution 1', () => {
      const initial = join(work, 'initial');
      cpSync(join(example, 'environment/workspace'), initial, { recursive: true });
      expect(judge(initial)).toEqual({ reward: 0, passed: 0, total: 4 });

      const solved = join(work, 'solved');
      cpSync(join(example, 'environment/workspace'), solved, { recursive: true });
      const r = docker(['run', '--rm', '--network', 'none', '-v', `${solved}:/workspace`, '-v', `${join(example, 'solution')}:/solution:ro`, image, 'bash', '/solution/solve.sh']);
      expect(r.code).toBe(0);
      expect(judge(solved)).toEqual({ reward: 1, passed: 4, total: 4 });
    });
  });
});

/**
 * Docker-backed suites need a Docker daemon and the local base image. When either is missing the suite is one failing
 * test naming what is missing and the script that provides it; it is never skipped, so a run without Docker cannot
 * pass for a run with it. (`bash scripts/test.sh` installs and starts both; `npx jest --selectProjects unit` runs the
 * tests that need neither.)
 */
import { spawnSync } from 'node:child_process';

export const BASE_IMAGE = 'assay/base:bookworm';

function docker(args: string[]): number | null {
  return spawnSync('docker', args, { encoding: 'utf8', timeout: 30_000 }).status;
}

let cached: { ok: boolean; why: string } | null = null;

export function dockerReady(): { ok: boolean; why: string } {
  if (cached) return cached;
  if (docker(['info', '--format', '{{.ServerVersion}}']) !== 0) cached = { ok: false, why: 'no Docker daemon answers (scripts/ensure-docker.sh starts one)' };
  else if (docker(['image', 'inspect', BASE_IMAGE]) !== 0) cached = { ok: false, why: `${BASE_IMAGE} is missing (scripts/build-base-image.sh builds it)` };
  else cached = { ok: true, why: '' };
  return cached;
}

/** `describe` when Docker is ready; otherwise a suite of one failing test with the reason. */
export function describeDocker(name: string, fn: () => void): void {
  const r = dockerReady();
  if (r.ok) return describe(name, fn);
  // CI (.ci/run) sets ASSAY_REQUIRE_DOCKER=1: there a missing daemon means its setup step broke.
  const where = process.env.ASSAY_REQUIRE_DOCKER === '1' ? ' (CI requires Docker: the setup in scripts/test.sh did not provide it)' : '';
  describe(name, () => {
    it('needs Docker and the base image', () => {
      throw new Error(`Docker is required${where}: ${r.why}`);
    });
  });
}

/**
 * Docker-backed suites run when a daemon answers and the base image exists. When ASSAY_REQUIRE_DOCKER=1 or ASSAY_REQUIRE_BASE_IMAGE=1 (CI), a
 * missing daemon or base image is a failing test, not a skip; otherwise the suite is skipped with a clear message.
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

/** `describe` when Docker is ready; a failing test under ASSAY_REQUIRE_DOCKER=1 or
 * ASSAY_REQUIRE_BASE_IMAGE=1 (CI sets both); `describe.skip` otherwise, with the reason on the console. The one place
 * where a suite may be skipped: on a developer machine without Docker. */
export function describeDocker(name: string, fn: () => void): void {
  const r = dockerReady();
  if (r.ok) return describe(name, fn);
  if (process.env.ASSAY_REQUIRE_DOCKER === '1' || process.env.ASSAY_REQUIRE_BASE_IMAGE === '1') {
    describe(name, () => {
      it('needs Docker (ASSAY_REQUIRE_DOCKER=1)', () => {
        throw new Error(`Docker is required: ${r.why}`);
      });
    });
    return;
  }
  console.warn(`skipping "${name}": ${r.why} (set ASSAY_REQUIRE_DOCKER=1 to make this a failure)`);
  describe.skip(name, fn);
}

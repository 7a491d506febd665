/**
 * `assay task import` with Docker: a task whose images are all local is recorded once (TaskRegistered with its
 * digests; importing it again records nothing); a task naming a registry image that is not local (Terminal-Bench's
 * docker_image shape) is refused with exit 7, a report saying how to provide the image, and nothing recorded.
 * Nothing is ever pulled: the missing image's registry is never contacted.
 */
import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { assay } from '../support/cli';
import { REPO_ROOT } from '../support/child-process';
import { describeDocker } from '../support/docker';
import { scratchDirs } from '../support/scratch';

interface ImportReport {
  name: string;
  digests: { task: string; instruction: string; tests: string; environment: string };
  images: Array<{ ref: string; why: string; present: boolean; hint: string | null }>;
  recorded: { stream: string; position: number; already: boolean } | null;
}

describeDocker('assay task import (CLI, Docker)', () => {
  const { base } = scratchDirs('assay-task-import-');
  const home = join(base, 'home');

  it('records a task whose images are local once; refuses one whose docker_image is not, saying how to provide it', async () => {
    expect((await assay(['ledger', 'init'], home)).code).toBe(0);
    const local = join(base, 'local');
    cpSync(join(REPO_ROOT, 'examples/tasks/tiny-optimizer'), local, { recursive: true });
    const first = await assay(['task', 'import', local, '--json'], home);
    expect([first.code, first.stderr]).toEqual([0, '']);
    const r = JSON.parse(first.stdout) as ImportReport;
    expect(r.name).toBe('assay/tiny-optimizer');
    expect(r.images).toEqual([expect.objectContaining({ ref: expect.stringMatching(/^assay\/base:/), why: 'FROM', present: true, hint: null })]);
    expect(r.recorded).toMatchObject({ stream: 'task-assay.tiny-optimizer', already: false });
    const again = JSON.parse((await assay(['task', 'import', local, '--json'], home)).stdout) as ImportReport;
    expect(again.recorded).toEqual({ ...r.recorded, already: true });
    const events = (await assay(['ledger', 'events', '--stream', 'task-assay.tiny-optimizer', '--json'], home)).stdout.trim().split('\n');
    expect(events.map((l) => JSON.parse(l) as { type: string; data: Record<string, string> })).toEqual([
      expect.objectContaining({
        type: 'TaskRegistered',
        data: {
          task: 'assay.tiny-optimizer',
          name: 'assay/tiny-optimizer',
          digest: r.digests.task,
          instructionDigest: r.digests.instruction,
          testsDigest: r.digests.tests,
          environmentDigest: r.digests.environment,
        },
      }),
    ]);

    // the Terminal-Bench layout: docker_image names a registry image (its Dockerfile is the recipe)
    const remote = join(base, 'remote');
    cpSync(local, remote, { recursive: true });
    const toml = join(remote, 'task.toml');
    writeFileSync(toml, readFileSync(toml, 'utf8').replace(/^\[environment\]$/m, '[environment]\ndocker_image = "registry.invalid/assay-tests/absent:1.0"'));
    const refused = await assay(['task', 'import', remote], home);
    expect(refused.code).toBe(7);
    expect(refused.stdout).toContain('image     registry.invalid/assay-tests/absent:1.0 (docker_image): MISSING: Assay never pulls');
    expect(refused.stdout).toContain('docker load -i image.tar');
    expect(refused.stdout).toContain('registry-mirrors');
    expect(refused.stderr.trim()).toMatch(/^assay: error TASK_IMAGES_MISSING: .*registry\.invalid\/assay-tests\/absent:1\.0; nothing recorded/);
    const after = (await assay(['ledger', 'events', '--json'], home)).stdout.trim().split('\n');
    expect(after.filter((l) => l.includes('"TaskRegistered"'))).toHaveLength(1);
  }, 120_000);
});

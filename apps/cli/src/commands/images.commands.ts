import type { Command } from 'commander';
import type { BuiltImage } from '@assay/judge';
import type { CliContext } from '../cli-context';
import { libs } from '../libs';
import { withRuntimeBuses } from '../nest-context';

/**
 * `assay images base [--force] [--json]`: the Debian base image (scripts/build-base-image.sh), recorded as ImageBuilt.
 * `assay images build TASK_DIR [--force] [--json]`: a task's work and judge images, recorded as ImageBuilt.
 * Both are idempotent: an image of the same recipe is reused, and an image already in the ledger is not recorded twice.
 */
export function register(program: Command, ctx: CliContext): void {
  const images = program.command('images').description('locally built container images (no registry is ever contacted)');

  images
    .command('base')
    .description('build assay/base:bookworm from Debian packages (debootstrap, docker import; needs root) and record it')
    .option('--force', 'rebuild even when an image from the same recipe exists')
    .option('--json', 'print JSON')
    .action(async (o: { force?: boolean; json?: boolean }) => {
      const { BuildBaseImageCommand } = libs.runtime();
      const r = await withRuntimeBuses(ctx, ({ commands }) =>
        commands.execute(new BuildBaseImageCommand({ home: ctx.home, force: o.force === true, progress: ctx.progress() })),
      );
      if (o.json) return ctx.out(JSON.stringify(r, null, 2));
      ctx.out(`${r.tag} = ${r.id} (${r.built ? 'built' : 'up to date'}; recipe ${r.recipeDigest})`);
      ctx.out(`  log     ${r.logPath} (${r.logDigest})`);
      ctx.out(`  ledger  ${r.recorded ? `ImageBuilt@${r.recorded.position}` : 'already recorded'}`);
    });

  images
    .command('build')
    .description("build (or reuse) a task's work and judge images and record them")
    .argument('<task-dir>', 'task directory')
    .option('--force', 'rebuild even when images from the same recipe exist')
    .option('--json', 'print JSON')
    .action(async (taskDir: string, o: { force?: boolean; json?: boolean }) => {
      const { BuildTaskImagesCommand } = libs.runtime();
      const r = await withRuntimeBuses(ctx, ({ commands }) =>
        commands.execute(new BuildTaskImagesCommand(taskDir, { home: ctx.home, force: o.force === true, progress: ctx.progress() })),
      );
      if (o.json) return ctx.out(JSON.stringify(r, null, 2));
      for (const img of [r.work, r.judge]) printImage(ctx, img);
    });
}

function printImage(ctx: CliContext, i: BuiltImage): void {
  ctx.out(`${i.purpose.padEnd(5)} ${i.tag} = ${i.id} (${i.built ? `built in ${(i.durationMs / 1000).toFixed(1)} s` : 'up to date'})`);
  if (i.logPath) ctx.out(`  log     ${i.logPath} (${i.logDigest})`);
  ctx.out(
    `  ledger  ${i.recorded ? `ImageBuilt@${i.recorded.position}` : i.recipeDigest ? 'already recorded' : 'not built by Assay (environment.docker_image)'}`,
  );
}

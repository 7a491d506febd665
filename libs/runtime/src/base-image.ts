/**
 * `assay images base`: runs scripts/build-base-image.sh (debootstrap from Debian's packages, then `docker import`;
 * idempotent: an image from the same recipe is reused), keeps its log, and records ImageBuilt (purpose `base`)
 * unless the ledger already holds one for that image id.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import { join } from 'node:path';
import { silentProgress, type Clock, type Progress } from '@assay/core';
import type { ContainerRuntime } from '@assay/containers';
import { judgeError, readSmallFile, recordImageBuilt, type JudgeRecorder, type RecordedPosition } from '@assay/judge';
import { assayRoot } from './repo-paths';

export interface BaseImageResult {
  readonly tag: string;
  readonly id: string;
  readonly recipeDigest: string;
  /** False when the script found an image of the same recipe. */
  readonly built: boolean;
  readonly durationMs: number;
  readonly logPath: string;
  readonly logDigest: string;
  readonly recorded: RecordedPosition | null;
}

interface BaseRecord {
  tag: string;
  imageId: string;
  recipeDigest: string;
  buildSeconds: number | null;
}

function recipeValue(root: string, key: string): string {
  const text = readSmallFile(join(root, 'task-runtime', 'base-image', 'recipe.conf'), 64 * 1024, 'recipe.conf').toString('utf8');
  for (const line of text.split('\n')) if (line.startsWith(`${key}=`)) return line.slice(key.length + 1).trim();
  throw judgeError('IMAGE_BASE_BUILD_FAILED', `task-runtime/base-image/recipe.conf has no ${key}`);
}

export async function buildBaseImage(o: {
  home: string;
  runtime: ContainerRuntime;
  recorder: JudgeRecorder;
  clock: Clock;
  force?: boolean;
  progress?: Progress;
  /** Default: the repository's scripts/build-base-image.sh. */
  script?: string;
}): Promise<BaseImageResult> {
  const root = assayRoot();
  const script = o.script ?? join(root, 'scripts', 'build-base-image.sh');
  const progress = o.progress ?? silentProgress;
  const logsDir = join(o.home, 'images', 'logs');
  fs.mkdirSync(logsDir, { recursive: true });
  const started = o.clock.now();
  const logPath = join(logsDir, `assay_base.${started.toISOString().replace(/[:.]/g, '-')}.log`);
  const log = fs.openSync(logPath, 'w', 0o644);
  const hash = createHash('sha256');
  const tail: string[] = [];
  progress.start('assay/base image (debootstrap, docker import)');
  let lines = 0;
  const code = await new Promise<number>((resolve, reject) => {
    const child = spawn('bash', [script, ...(o.force ? ['--force'] : [])], {
      cwd: root,
      env: { ...process.env, ASSAY_HOME: o.home },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const onData = (b: Buffer) => {
      fs.writeSync(log, b);
      hash.update(b);
      for (const l of b.toString('utf8').split('\n')) {
        if (!l) continue;
        tail.push(l);
        if (tail.length > 20) tail.shift();
        lines += 1;
        progress.tick(lines);
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.on('error', reject);
    child.on('close', (c) => resolve(c ?? 1));
  });
  fs.closeSync(log);
  progress.end();
  if (code !== 0) {
    throw judgeError(
      'IMAGE_BASE_BUILD_FAILED',
      `scripts/build-base-image.sh exited with ${code} (log: ${logPath}):\n${tail.map((l) => `  | ${l}`).join('\n')}`,
      { log: logPath },
    );
  }
  const suite = recipeValue(root, 'suite');
  const recordPath = join(o.home, 'images', `base-${suite}.json`);
  let rec: BaseRecord;
  try {
    rec = JSON.parse(readSmallFile(recordPath, 64 * 1024, 'the base image record').toString('utf8')) as BaseRecord;
  } catch (e) {
    throw judgeError('IMAGE_BASE_BUILD_FAILED', `the build script left no readable record at ${recordPath}: ${(e as Error).message}`, { log: logPath }, e);
  }
  const img = await o.runtime.inspectImage(rec.tag);
  if (!img || img.id !== rec.imageId) {
    throw judgeError('IMAGE_BASE_BUILD_FAILED', `${rec.tag} is ${img?.id ?? 'missing'} in the daemon, but the build recorded ${rec.imageId}`, { log: logPath });
  }
  const built = tail.some((l) => /: built in \d+s$/.test(l));
  const durationMs = built && typeof rec.buildSeconds === 'number' ? rec.buildSeconds * 1000 : o.clock.now().getTime() - started.getTime();
  const logDigest = `sha256:${hash.digest('hex')}`;
  const recorded = await recordImageBuilt(o.recorder, {
    image: rec.tag,
    digest: rec.imageId,
    purpose: 'base',
    recipeDigest: rec.recipeDigest,
    buildLogDigest: logDigest,
    durationMs,
  });
  return { tag: rec.tag, id: rec.imageId, recipeDigest: rec.recipeDigest, built, durationMs, logPath, logDigest, recorded };
}

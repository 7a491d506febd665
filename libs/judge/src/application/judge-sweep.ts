import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import { basename, isAbsolute, join } from 'node:path';
import type { Clock } from '@assay/core';
import type { ContainerRuntime } from '@assay/containers';
import { EMPTY_OUTPUT_DIGEST, judgeCompletedData, judgeStream } from '../domain/judge-events';
import type { JudgeRecorder } from '../ports/judge-recorder.port';
import type { OwnerRegistry } from '../ports/owner.port';
import { ROOTFS_IMAGE_ROLE } from './rootfs-image';

/** Labels on every Docker object of a Judge (container, volume, full-rootfs image): what the sweep finds them by. */
export const LABELS = {
  role: 'org.assay.role',
  judge: 'org.assay.judge',
  owner: 'org.assay.owner',
  home: 'org.assay.home',
} as const;

/** A staging directory made by `stagingFor` (the only kind the sweep removes). */
const STAGING_NAME = /^assay-judge-[A-Za-z0-9]{6}$/;

export interface SweepReport {
  readonly containers: string[];
  readonly volumes: string[];
  /** Full-rootfs Judge images (made from a snapshot) whose owner is gone. */
  readonly images: string[];
  readonly directories: string[];
  /** Judges whose process died after JudgeLaunched: JudgeCompleted (infrastructure_error) recorded now. */
  readonly completed: string[];
}

/** What the sweep uses of the runner's dependencies (JudgeRunnerDeps). */
export interface SweepDeps {
  readonly runtime: ContainerRuntime;
  readonly recorder: JudgeRecorder;
  readonly owners: OwnerRegistry;
  readonly clock: Clock;
  readonly judgesDir: string;
  readonly homeTag: string;
}

/**
 * Removes what dead processes left behind: containers and volumes labelled as Judges whose owner is gone, and
 * their materialised snapshots; a Judge of this home whose JudgeLaunched has no JudgeCompleted gets one
 * (infrastructure_error), so the ledger tells what happened.
 */
export async function sweepJudges(d: SweepDeps): Promise<SweepReport> {
  const { runtime, owners } = d;
  const report: SweepReport = { containers: [], volumes: [], directories: [], completed: [], images: [] };
  const orphans = new Map<string, { owner: string; startedAt: string | null }>();
  const dead = (labels: Readonly<Record<string, string>>): boolean => {
    const owner = labels[LABELS.owner];
    return owner !== undefined && !owners.isAlive(owner);
  };
  for (const c of await runtime.listContainers({ [LABELS.role]: 'judge' })) {
    if (!dead(c.labels)) continue;
    await runtime.removeContainer(c.id);
    report.containers.push(c.name || c.id);
    const j = c.labels[LABELS.judge];
    if (j && c.labels[LABELS.home] === d.homeTag) orphans.set(j, { owner: c.labels[LABELS.owner] as string, startedAt: null });
  }
  for (const v of await runtime.listVolumes({ [LABELS.role]: 'judge' })) {
    if (!dead(v.labels)) continue;
    await runtime.removeVolume(v.name);
    report.volumes.push(v.name);
    const j = v.labels[LABELS.judge];
    if (j && v.labels[LABELS.home] === d.homeTag && !orphans.has(j)) orphans.set(j, { owner: v.labels[LABELS.owner] as string, startedAt: null });
  }
  for (const i of await runtime.listImages({ [LABELS.role]: ROOTFS_IMAGE_ROLE })) {
    if (!dead(i.labels)) continue;
    await runtime.removeImage(i.id);
    report.images.push(i.tags[0] ?? i.id);
  }
  if (fs.existsSync(d.judgesDir)) {
    for (const name of fs.readdirSync(d.judgesDir)) {
      const ownerFile = join(d.judgesDir, name, 'owner.json');
      let o: { owner?: unknown; startedAt?: unknown; staging?: unknown };
      try {
        o = JSON.parse(fs.readFileSync(ownerFile, 'utf8')) as typeof o;
      } catch {
        continue;
      }
      if (typeof o.owner !== 'string' || owners.isAlive(o.owner)) continue;
      fs.rmSync(join(d.judgesDir, name, 'snapshot'), { recursive: true, force: true });
      if (typeof o.staging === 'string' && isAbsolute(o.staging) && STAGING_NAME.test(basename(o.staging)))
        fs.rmSync(o.staging, { recursive: true, force: true });
      fs.rmSync(ownerFile, { force: true });
      report.directories.push(join(d.judgesDir, name));
      orphans.set(name, { owner: o.owner, startedAt: typeof o.startedAt === 'string' ? o.startedAt : (orphans.get(name)?.startedAt ?? null) });
    }
  }
  for (const [judgeId, o] of orphans) {
    if (!/^[A-Za-z0-9][A-Za-z0-9._:-]{0,100}$/.test(judgeId)) continue;
    const stream = judgeStream(judgeId);
    const types = await d.recorder.streamTypes(stream);
    if (!types.includes('JudgeLaunched') || types.includes('JudgeCompleted')) continue;
    const log = join(d.judgesDir, judgeId, 'output.log');
    let digest = EMPTY_OUTPUT_DIGEST;
    let bytes = 0;
    try {
      const b = fs.readFileSync(log);
      digest = `sha256:${createHash('sha256').update(b).digest('hex')}`;
      bytes = b.length;
    } catch {
      // no log
    }
    const started = o.startedAt ? Date.parse(o.startedAt) : NaN;
    const durationMs = Number.isFinite(started) ? Math.max(0, d.clock.now().getTime() - started) : 0;
    await d.recorder.append(
      stream,
      [
        {
          type: 'JudgeCompleted',
          data: judgeCompletedData({
            judge: judgeId,
            status: 'infrastructure_error',
            exitCode: null,
            durationMs,
            outputDigest: digest,
            outputBytes: bytes,
            detail: `the judging process ${o.owner} ended before this Judge finished; its container and volume were removed by ${owners.self}`,
          }),
        },
      ],
      types.length - 1,
    );
    report.completed.push(judgeId);
  }
  return report;
}

/**
 * Reads the verifier's result files out of the stopped Judge, through the daemon's archive API on its /logs/verifier
 * volume: no host path is opened, so no link planted anywhere can redirect the read. Only three names at the top of
 * /logs/verifier count (reward.json, reward.txt, infrastructure-error.txt); only regular-file entries are read, each
 * bounded; the whole archive is bounded too.
 */
import { isAssayError } from '@assay/core';
import { readTar, type ContainerRuntime } from '@assay/containers';
import {
  INFRASTRUCTURE_REPORT,
  MAX_REWARD_FILE_BYTES,
  REWARD_JSON,
  REWARD_TXT,
  parseInfrastructureReport,
  parseRewardFiles,
  type RewardFile,
  type RewardParse,
} from '../domain/reward';
import { VERIFIER_PATH } from '../domain/judge-plan';

export const MAX_VERIFIER_ARCHIVE_BYTES = 64 * 1024 * 1024;

function what(type: string, flag: string): string {
  if (type === 'symlink') return 'a symbolic link';
  if (type === 'dir') return 'a directory';
  if (type === 'hardlink') return 'a hard link';
  return `a special file (tar type ${JSON.stringify(flag)})`;
}

export interface VerifierFiles {
  readonly rewards: RewardParse;
  /** The reason test.sh gave in infrastructure-error.txt, or null when it wrote none. */
  readonly infrastructureReport: string | null;
}

const RESULT_NAMES = new Set([REWARD_JSON, REWARD_TXT, INFRASTRUCTURE_REPORT]);

export async function readVerifierFiles(runtime: ContainerRuntime, containerId: string): Promise<VerifierFiles> {
  const archive = await runtime.readArchive(containerId, VERIFIER_PATH);
  if (!archive) return { rewards: { ok: false, source: null, reason: `${VERIFIER_PATH} is missing from the Judge` }, infrastructureReport: null };
  const files: Record<string, RewardFile> = {
    [REWARD_JSON]: { state: 'absent' },
    [REWARD_TXT]: { state: 'absent' },
    [INFRASTRUCTURE_REPORT]: { state: 'absent' },
  };
  const nameOf = (p: string): string | null => {
    const m = /^(?:\.\/)?verifier\/([^/]+)\/?$/.exec(p);
    return m && RESULT_NAMES.has(m[1] as string) ? (m[1] as string) : null;
  };
  try {
    for await (const r of readTar(archive, {
      maxArchiveBytes: MAX_VERIFIER_ARCHIVE_BYTES,
      keep: (h) => (h.type === 'file' && nameOf(h.path) !== null ? MAX_REWARD_FILE_BYTES : false),
    })) {
      const name = nameOf(r.header.path);
      if (name === null) continue;
      if (r.header.type !== 'file') files[name] = { state: 'not_regular', what: what(r.header.type, r.header.flag) };
      else if (r.tooLarge || !r.content) files[name] = { state: 'too_large', size: r.header.size };
      else files[name] = { state: 'file', bytes: r.content };
    }
  } catch (e) {
    if (isAssayError(e) && e.code === 'CONTAINER_ARCHIVE_TOO_LARGE') {
      return {
        rewards: {
          ok: false,
          source: null,
          reason: `the verifier left more than ${MAX_VERIFIER_ARCHIVE_BYTES} bytes in ${VERIFIER_PATH}; it is for reward files and small logs`,
        },
        infrastructureReport: null,
      };
    }
    throw e;
  }
  return {
    rewards: parseRewardFiles({ json: files[REWARD_JSON] as RewardFile, txt: files[REWARD_TXT] as RewardFile }),
    infrastructureReport: parseInfrastructureReport(files[INFRASTRUCTURE_REPORT] as RewardFile),
  };
}

/**
 * The protocol a run of a task is held to, as RunStarted records it: the run settings (task defaults, then the command
 * line's overrides), the task's digests, and the protocol fingerprint over them (docs/task-format.md, "Digests and the
 * protocol fingerprint"). `assay run` and `assay baseline` both compute it here, so a baseline and a run of the same
 * task under the same settings carry the same fingerprint.
 */
import { canonicalJson, type JsonObject } from '@assay/ledger';
import {
  computeTaskDigests,
  mergeRunSettings,
  protocolFingerprint,
  protocolFingerprintInput,
  type RunSettings,
  type RunSettingsOverrides,
  type TaskDigests,
  type TaskPlan,
} from '@assay/task-format';

/** The harness version bound by the fingerprint (a different Assay version is a different protocol). */
export const HARNESS_VERSION = 'assay/0.1.0';

export interface RunFingerprint {
  readonly settings: RunSettings;
  readonly digests: TaskDigests;
  /** The plain object hashed into the fingerprint (RunStarted: protocol.fingerprintInput). */
  readonly input: JsonObject;
  readonly fingerprint: string;
}

export async function runFingerprint(a: {
  plan: TaskPlan;
  taskDir: string;
  /** The judge image's id (`sha256:<64 hex>`). */
  judgeImageDigest: string;
  overrides?: RunSettingsOverrides;
  /** The snapshot store's directory digester. */
  digestDirectory: (dir: string) => Promise<string>;
}): Promise<RunFingerprint> {
  const settings = mergeRunSettings(a.plan.runSettings, a.overrides ?? {});
  const digests = await computeTaskDigests(a.taskDir, { digest: (d: string) => a.digestDirectory(d) });
  const input = protocolFingerprintInput({ taskDigest: digests.task, judgeImageDigest: a.judgeImageDigest, settings, harnessVersion: HARNESS_VERSION });
  return { settings, digests, input: JSON.parse(JSON.stringify(input)) as JsonObject, fingerprint: protocolFingerprint(input, canonicalJson) };
}

/**
 * `assay bundle export` and `assay bundle export-rejudge`'s use cases (docs/bundle-format.md): a run's result bundle, or
 * a re-judge report's, from this home's ledger (opened for writing: exporting signs a checkpoint, `--logs redacted`
 * records LogRedacted), signed by `--key` (a registered, unrevoked publisher or controller key) or the home's
 * controller key, proved against a checkpoint signed now or the one witnesses cosigned.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { AssayError } from '@assay/core';
import { readPrivateKey, toSigningKey, type LedgerHome, type SigningKey } from '@assay/ledger';
import type { SnapshotHome } from '@assay/snapshots';
import { exportRejudgeBundle, exportRunBundleFromHome, type ExportRejudgeResult, type ExportResult, type LogMode, type SnapshotMode } from '@assay/bundles';

/** A private key file that the ledger registers with role publisher or controller, not revoked. */
async function publisherKey(file: string, home: LedgerHome): Promise<SigningKey> {
  const key = toSigningKey(readPrivateKey(file));
  const rec = (await home.keyRegistry()).get(key.signer);
  if (!rec || (rec.role !== 'publisher' && rec.role !== 'controller') || rec.revokedAt !== null)
    throw new AssayError(
      'BUNDLE_KEY_NOT_REGISTERED',
      'refused',
      `--key ${file}: ${key.signer} is not a registered, unrevoked publisher or controller key of this ledger (assay keys register --role publisher)`,
    );
  return key;
}

/** The key that signs a bundle's statement: `--key`, else the home's controller key. */
async function signingKeyOf(home: LedgerHome, keyFile: string | undefined, homeDir: string): Promise<SigningKey> {
  const publisher = keyFile !== undefined ? await publisherKey(keyFile, home) : home.ledger.key('controller');
  if (!publisher) throw new AssayError('LEDGER_NO_KEY_FOR_ROLE', 'refused', `signing a bundle needs the controller key (in ${homeDir}/keys) or --key`);
  return publisher;
}

/** `--cosigned`: the checkpoint witnesses cosigned, as `assay ledger checkpoint --witness...` kept it. */
function cosignedCheckpoint(home: string): string {
  const cosignedFile = join(home, 'ledger', 'checkpoint.cosigned');
  try {
    return readFileSync(cosignedFile, 'utf8');
  } catch (e) {
    throw new AssayError(
      'BUNDLE_CHECKPOINT_INVALID',
      'invalid_input',
      `--cosigned: cannot read ${cosignedFile} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}): have a checkpoint cosigned first (assay ledger checkpoint --witness FILE | --witness-cmd CMD)`,
    );
  }
}

/** What both exports take: the signing key and the checkpoint. */
export interface BundleSigning {
  /** `--key FILE`; default: the home's controller key. */
  readonly keyFile?: string;
  /** `--cosigned`: prove against the checkpoint witnesses cosigned. */
  readonly cosigned?: boolean;
}

export interface ExportRunBundleOptions extends BundleSigning {
  readonly run: string;
  readonly out: string;
  readonly snapshots: SnapshotMode;
  readonly logs: LogMode;
  readonly taskDir?: string;
  /** This machine's host names (redacted from the logs a bundle carries). */
  readonly hostnames: readonly string[];
  readonly progress?: (done: number, total: number) => void;
}

/** A run's result bundle; `signer`: who signed its statement. */
export async function exportRunBundle(
  home: LedgerHome,
  homeDir: string,
  snapshotStore: () => Promise<SnapshotHome>,
  o: ExportRunBundleOptions,
): Promise<ExportResult & { signer: string }> {
  const publisher = await signingKeyOf(home, o.keyFile, homeDir);
  const checkpoint = o.cosigned ? cosignedCheckpoint(homeDir) : undefined;
  const r = await exportRunBundleFromHome({
    homeDir,
    home,
    snapshotStore,
    publisher,
    run: o.run,
    out: o.out,
    snapshots: o.snapshots,
    logs: o.logs,
    ...(checkpoint !== undefined ? { checkpoint } : {}),
    ...(o.taskDir !== undefined ? { taskDir: o.taskDir } : {}),
    hostnames: o.hostnames,
    ...(o.progress ? { progress: o.progress } : {}),
  });
  return { ...r, signer: publisher.signer };
}

/** A re-judge report's own bundle (`assay rejudge`'s RejudgeCompleted); `signer`: who signed the report. */
export async function exportRejudgeReport(
  home: LedgerHome,
  homeDir: string,
  o: BundleSigning & { readonly rejudge: string; readonly out: string },
): Promise<ExportRejudgeResult & { signer: string }> {
  const publisher = await signingKeyOf(home, o.keyFile, homeDir);
  const checkpoint = o.cosigned ? cosignedCheckpoint(homeDir) : undefined;
  const r = await exportRejudgeBundle(home.ledger, { rejudge: o.rejudge, out: o.out, publisher, ...(checkpoint !== undefined ? { checkpoint } : {}) });
  return { ...r, signer: publisher.signer };
}

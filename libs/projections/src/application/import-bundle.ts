/**
 * Importing someone else's result bundle (docs/projections.md, "Imported bundles"), for `assay bundle import` and the
 * API's `POST /bundles`: the file is copied into `<home>/imports/` first and the copy is what is hashed and verified,
 * so what is kept is exactly what was verified; a bundle that does not verify against the publisher's key is refused
 * and nothing is kept. The verification itself is the bundles lib's (`verifyBundle`), given by the caller: this lib
 * builds on the ledger and the run, never on bundles.
 */
import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, copyFileSync, createReadStream, mkdirSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { AssayError } from '@assay/core';
import { importedRow } from '../domain/imported';
import type { LeaderboardRow } from '../domain/leaderboard';
import type { ImportStore } from '../ports/import-store.port';

/** What the caller's verification says about a bundle file (the fields of the bundles lib's BundleVerdict used here). */
export interface BundleCheck {
  readonly verdict: 'valid' | 'invalid' | 'cannot_check';
  readonly kind: 'run' | 'rejudge' | null;
  readonly claim: unknown;
  readonly failure: { readonly step: string; readonly code: string; readonly message: string } | null;
  /** The run's start and end, from its signed RunStarted and RunCompleted (the envelope times). */
  readonly times?: { readonly startedAt: string; readonly completedAt: string } | null;
}

export interface ImportBundleOptions {
  /** `<ASSAY_HOME>/imports`. */
  readonly dir: string;
  /** The bundle file to import (copied before anything is checked). */
  readonly file: string;
  /** How the file is named in messages (the caller's path, or "the request body"). */
  readonly label: string;
  /** The publisher's verifier key text, as parsed (`name+hex+base64`). */
  readonly publisherKey: string;
  readonly verify: (path: string) => Promise<BundleCheck>;
  readonly store: ImportStore;
  readonly now: () => Date;
}

export interface ImportBundleResult {
  /** False when this bundle (the same file digest) had been imported before: nothing changed. */
  readonly added: boolean;
  readonly row: LeaderboardRow;
}

export async function importBundle(o: ImportBundleOptions): Promise<ImportBundleResult> {
  mkdirSync(o.dir, { recursive: true, mode: 0o700 });
  chmodSync(o.dir, 0o700);
  const tmp = join(o.dir, `.import-${process.pid}-${randomBytes(6).toString('hex')}.tmp`);
  copyFileSync(o.file, tmp);
  try {
    const hash = createHash('sha256');
    for await (const chunk of createReadStream(tmp)) hash.update(chunk as Buffer);
    const hex = hash.digest('hex');
    const v = await o.verify(tmp);
    if (v.verdict !== 'valid')
      throw new AssayError(
        'BUNDLE_IMPORT_REFUSED',
        v.verdict === 'invalid' ? 'integrity' : 'refused',
        `${o.label} does not verify against the publisher key (step ${v.failure?.step}: ${v.failure?.code}: ${v.failure?.message}); nothing was imported`,
        { details: { step: v.failure?.step ?? null, code: v.failure?.code ?? null } },
      );
    if (v.kind !== 'run')
      throw new AssayError(
        'BUNDLE_IMPORT_NOT_RUN_BUNDLE',
        'invalid_input',
        `${o.label} is a re-judge report's bundle; only a run's result bundle makes a leaderboard row`,
      );
    const row = importedRow(v.claim, { bundleDigest: `sha256:${hex}`, publisherKey: o.publisherKey, importedAt: o.now().toISOString() }, v.times ?? null);
    renameSync(tmp, join(o.dir, `${hex}.bundle`));
    return { added: o.store.put(row), row };
  } finally {
    rmSync(tmp, { force: true });
  }
}

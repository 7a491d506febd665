/**
 * Where the language-neutral test vectors live: tests/fixtures/vectors (copied with their source and licence, see its
 * README), overridable with ASSAY_VECTORS_DIR (to run the suite against another copy). A missing directory is an error, never a reason to skip: a suite that
 * silently runs zero vectors proves nothing.
 */
import { statSync } from 'node:fs';
import * as path from 'node:path';

export const REPO_ROOT = path.resolve(__dirname, '..', '..');

export function vectorsDir(): string {
  const fromEnv = process.env.ASSAY_VECTORS_DIR;
  const dir = fromEnv && fromEnv.length > 0 ? path.resolve(fromEnv) : path.resolve(REPO_ROOT, 'tests', 'fixtures', 'vectors');
  let isDir = false;
  try {
    isDir = statSync(dir).isDirectory();
  } catch {
    isDir = false;
  }
  if (!isDir)
    throw new Error(
      `test vectors not found at ${dir} (${fromEnv ? 'from ASSAY_VECTORS_DIR' : 'the default tests/fixtures/vectors'}); ` +
        'restore them from the repository or set ASSAY_VECTORS_DIR to their directory',
    );
  return dir;
}

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A temporary directory for one test file (`base`), removed after its tests, and `fresh(name)`, which names a new
 * path inside it (`<name>-<n>`, not created) each time it is called.
 */
export function scratchDirs(prefix: string): { base: string; fresh: (name: string) => string } {
  const base = mkdtempSync(join(tmpdir(), prefix));
  afterAll(() => rmSync(base, { recursive: true, force: true }));
  let n = 0;
  return { base, fresh: (name: string) => join(base, `${name}-${++n}`) };
}

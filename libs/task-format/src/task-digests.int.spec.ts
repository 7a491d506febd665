import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AssayError } from '@assay/core';
import type { DirectoryDigester } from './ports/directory-digester.port';
import { TASK_ERROR_CODES as C } from './task-format.errors';
import { computeTaskDigests } from './task-digests';

let root: string;
beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'assay-digest-'));
  mkdirSync(join(root, 'tests'));
  mkdirSync(join(root, 'environment'));
  writeFileSync(join(root, 'instruction.md'), 'Hello\n');
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('computeTaskDigests', () => {
  it('digests the task, tests/ and environment/ through the port, and instruction.md itself', async () => {
    const seen: string[] = [];
    const fake: DirectoryDigester = { digest: async (dir) => (seen.push(dir), `cid:${dir.slice(root.length) || '/'}`) };
    const d = await computeTaskDigests(root, fake);
    expect(d).toEqual({
      task: 'cid:/',
      instruction: `sha256:${createHash('sha256').update('Hello\n').digest('hex')}`,
      tests: 'cid:/tests',
      environment: 'cid:/environment',
    });
    expect(seen).toEqual([root, join(root, 'tests'), join(root, 'environment')]);
  });

  it('wraps digester failures, and passes AssayErrors through', async () => {
    const broken: DirectoryDigester = { digest: async () => Promise.reject(new Error('disk on fire')) };
    await expect(computeTaskDigests(root, broken)).rejects.toMatchObject({ code: C.DIGEST_FAILED, kind: 'internal' });
    const refusing: DirectoryDigester = { digest: async () => Promise.reject(new AssayError('SNAPSHOT_SPECIAL_FILE', 'refused', 'fifo')) };
    await expect(computeTaskDigests(root, refusing)).rejects.toMatchObject({ code: 'SNAPSHOT_SPECIAL_FILE' });
  });
});

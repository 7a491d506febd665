import { closeSync, fsyncSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { dirname } from 'node:path';

/**
 * The one place small records are written whole: a temp file beside the target (`<path>.tmp-<pid>-<random>`, created
 * exclusively), written and fsynced, renamed over the target, then the directory fsynced so that the rename itself
 * survives a power loss. A reader sees the old file or the new one, never a mix. `durable: false` skips both fsyncs
 * (still atomic, not crash-durable: caches and hints).
 */
export function writeFileAtomic(path: string, text: string, options: { mode?: number; durable?: boolean } = {}): void {
  const durable = options.durable !== false;
  const tmp = `${path}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
  try {
    const fd = openSync(tmp, 'wx', options.mode ?? 0o644);
    try {
      writeSync(fd, text);
      if (durable) fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
  } catch (e) {
    rmSync(tmp, { force: true });
    throw e;
  }
  if (durable) fsyncDirectory(dirname(path));
}

/** fsync of a directory (its entries: a rename, a new or removed file). Platforms that cannot (Windows) skip it. */
export function fsyncDirectory(dir: string): void {
  let fd: number;
  try {
    fd = openSync(dir, 'r');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EISDIR' || (e as NodeJS.ErrnoException).code === 'EPERM') return;
    throw e;
  }
  try {
    fsyncSync(fd);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code !== 'EINVAL' && code !== 'EISDIR' && code !== 'EPERM') throw e;
  } finally {
    closeSync(fd);
  }
}

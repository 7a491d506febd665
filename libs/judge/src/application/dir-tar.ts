/**
 * Streams a host directory as a deterministic tar (sorted names, mtime 0, uid/gid 0, modes 0755/0644 for files
 * and directories, symlinks as links). The directory is hostile input: nothing is followed (links are archived as
 * links, files opened with O_NOFOLLOW and checked to be the regular file that was listed), special files are
 * refused, and entries, bytes and depth are bounded. A file that changes size while being read is an error.
 */
import * as fs from 'node:fs';
import { join } from 'node:path';
import { TAR_END, tarHeader, tarPadding } from '@assay/containers';
import { AssayError } from '@assay/core';

export interface DirTarLimits {
  readonly maxBytes: number;
  readonly maxEntries: number;
  readonly maxDepth: number;
}

export interface DirTarStats {
  files: number;
  dirs: number;
  symlinks: number;
  bytes: number;
}

const CHUNK = 1 << 20;

export function dirTar(
  root: string,
  limits: DirTarLimits,
  error: (message: string, details: Record<string, unknown>) => AssayError,
  stats: DirTarStats = { files: 0, dirs: 0, symlinks: 0, bytes: 0 },
  extra: ReadonlyArray<{ path: string; content: Buffer; mode: number }> = [],
): AsyncGenerator<Buffer> {
  let entries = 0;
  const count = (rel: string) => {
    entries += 1;
    if (entries > limits.maxEntries) throw error(`${rel}: more than ${limits.maxEntries} entries`, { path: rel, limit: limits.maxEntries });
  };
  async function* file(abs: string, rel: string, expected: fs.Stats): AsyncGenerator<Buffer> {
    let fd: number;
    try {
      fd = fs.openSync(abs, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
    } catch (e) {
      throw error(`${rel}: cannot open (${(e as NodeJS.ErrnoException).code ?? String(e)})`, { path: rel });
    }
    try {
      const st = fs.fstatSync(fd);
      if (!st.isFile() || st.ino !== expected.ino || st.dev !== expected.dev) throw error(`${rel}: changed while being archived`, { path: rel });
      const size = st.size;
      stats.bytes += size;
      if (stats.bytes > limits.maxBytes) throw error(`${rel}: the directory holds more than ${limits.maxBytes} bytes`, { path: rel, limit: limits.maxBytes });
      stats.files += 1;
      yield tarHeader({ path: rel, type: 'file', mode: st.mode & 0o111 ? 0o755 : 0o644, size });
      let done = 0;
      while (done < size) {
        const buf = Buffer.allocUnsafe(Math.min(CHUNK, size - done));
        const n = fs.readSync(fd, buf, 0, buf.length, done);
        if (n === 0) throw error(`${rel}: shrank while being archived`, { path: rel });
        done += n;
        yield n === buf.length ? buf : buf.subarray(0, n);
      }
      const probe = Buffer.alloc(1);
      if (fs.readSync(fd, probe, 0, 1, done) !== 0) throw error(`${rel}: grew while being archived`, { path: rel });
      yield tarPadding(size);
    } finally {
      fs.closeSync(fd);
    }
  }
  async function* dir(abs: string, rel: string, depth: number): AsyncGenerator<Buffer> {
    if (depth > limits.maxDepth) throw error(`${rel}: nested deeper than ${limits.maxDepth}`, { path: rel });
    const names = fs.readdirSync(abs).sort();
    for (const name of names) {
      const childAbs = join(abs, name);
      const childRel = rel === '' ? name : `${rel}/${name}`;
      count(childRel);
      const st = fs.lstatSync(childAbs);
      if (st.isSymbolicLink()) {
        stats.symlinks += 1;
        yield tarHeader({ path: childRel, type: 'symlink', mode: 0o777, linkTarget: fs.readlinkSync(childAbs) });
      } else if (st.isDirectory()) {
        stats.dirs += 1;
        yield tarHeader({ path: childRel, type: 'dir', mode: 0o755 });
        yield* dir(childAbs, childRel, depth + 1);
      } else if (st.isFile()) {
        yield* file(childAbs, childRel, st);
      } else {
        throw error(`${childRel}: not a regular file, directory or symlink`, { path: childRel });
      }
    }
  }
  return (async function* () {
    const st = fs.lstatSync(root, { throwIfNoEntry: false });
    if (!st || !st.isDirectory()) throw error(`${root} is not a directory`, { path: root });
    yield* dir(root, '', 0);
    for (const x of extra) {
      yield tarHeader({ path: x.path, type: 'file', mode: x.mode, size: x.content.length });
      yield x.content;
      yield tarPadding(x.content.length);
    }
    yield TAR_END;
  })();
}

/** The whole archive in memory (small directories: the hidden tests). */
export async function dirTarBuffer(
  root: string,
  limits: DirTarLimits,
  error: (message: string, details: Record<string, unknown>) => AssayError,
): Promise<{ tar: Buffer; stats: DirTarStats }> {
  const stats: DirTarStats = { files: 0, dirs: 0, symlinks: 0, bytes: 0 };
  const parts: Buffer[] = [];
  for await (const b of dirTar(root, limits, error, stats)) parts.push(b);
  return { tar: Buffer.concat(parts), stats };
}

import * as fs from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { processAlive, processIdentity, writeFileAtomic, type Clock } from '@assay/core';
import { ioError, snapshotError } from '../domain/snapshot.errors';

/**
 * What keeps writers and the garbage collector apart: each writer registers a record in `<dir>/writers/<batch>.json`
 * and a collection holds `<dir>/gc.lock`. Each side writes its own record first, then looks for the other's, so
 * one of the two always sees the other. A record names its process (pid, host, start): one left by a process that
 * died does not count.
 */

export interface OwnerRecord {
  pid: number;
  host: string;
  startedAt: string;
  /**
   * Which process has that pid: `<boot id>:<start time>` (Linux: /proc/sys/kernel/random/boot_id, and field 22 of
   * /proc/<pid>/stat, the start time in clock ticks since boot). Absent where it cannot be read (other systems).
   */
  process?: string;
}

function ownerRecord(clock: Clock): OwnerRecord {
  const identity = processIdentity(process.pid);
  return { pid: process.pid, host: hostname(), startedAt: clock.now().toISOString(), ...(identity ? { process: identity } : {}) };
}

function readOwner(path: string): OwnerRecord | null {
  try {
    const o = JSON.parse(fs.readFileSync(path, 'utf8')) as Partial<OwnerRecord>;
    return typeof o.pid === 'number'
      ? { pid: o.pid, host: String(o.host ?? ''), startedAt: String(o.startedAt ?? ''), ...(typeof o.process === 'string' ? { process: o.process } : {}) }
      : null;
  } catch {
    return null;
  }
}

/**
 * Is the process that wrote this record still running? Records from another host are assumed alive. On this host:
 * a process with that pid must exist and, when the record names the process (`process`), be that one: a pid reused
 * by another process since (a different start time, or a reboot) does not keep a dead writer's record alive.
 */
export function ownerAlive(o: OwnerRecord | null): boolean {
  if (!o) return false;
  if (o.host !== '' && o.host !== hostname()) return true;
  if (!processAlive(o.pid)) return false;
  if (o.process === undefined) return true;
  const now = processIdentity(o.pid);
  return now === null || now === o.process;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function gcLockPath(dir: string): string {
  return join(dir, 'gc.lock');
}

/**
 * Registers a writer (`<dir>/writers/<id>.json`), then waits up to `gcWaitMs` for a running garbage collection to
 * finish. Returns the record's path (the writer removes it when done); fails with SNAPSHOT_STORE_BUSY, the record
 * removed, if the collection still runs then.
 */
export async function registerWriter(dir: string, id: string, clock: Clock, gcWaitMs: number): Promise<string> {
  const writerFile = join(dir, 'writers', `${id}.json`);
  const me: OwnerRecord = ownerRecord(clock);
  writeFileAtomic(writerFile, JSON.stringify(me), { durable: false });
  // Registered first, then check for a collector: one of the two always sees the other.
  const lock = gcLockPath(dir);
  const deadline = Date.now() + gcWaitMs;
  for (;;) {
    const owner = fs.existsSync(lock) ? readOwner(lock) : null;
    if (!fs.existsSync(lock) || (owner && !ownerAlive(owner))) break;
    if (Date.now() >= deadline) {
      fs.rmSync(writerFile, { force: true });
      throw snapshotError('SNAPSHOT_STORE_BUSY', `the blob store ${dir} is being garbage collected (${lock}); try again later`, {
        lock,
      });
    }
    await sleep(100);
  }
  return writerFile;
}

/**
 * Takes the garbage collection lock (`<dir>/gc.lock`), replacing one left by a collector that died, then checks that
 * no live writer is registered (removing the records of dead ones). Fails with SNAPSHOT_STORE_BUSY otherwise.
 */
export async function acquireGcLock(dir: string, clock: Clock): Promise<{ release(): Promise<void> }> {
  const lock = gcLockPath(dir);
  createLockFile(lock, ownerRecord(clock));
  const release = async () => {
    fs.rmSync(lock, { force: true });
  };
  // Lock recorded first, then look for writers.
  await clearDeadWriters(join(dir, 'writers'), release);
  return { release };
}

function createLockFile(lock: string, me: OwnerRecord): void {
  for (let attempt = 0; ; attempt++) {
    try {
      const fd = fs.openSync(lock, 'wx', 0o644);
      fs.writeSync(fd, JSON.stringify(me));
      fs.closeSync(fd);
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw ioError('creating', lock, e);
      const owner = readOwner(lock);
      if (attempt === 0 && !ownerAlive(owner)) {
        fs.rmSync(lock, { force: true }); // left by a collector that died
        continue;
      }
      throw snapshotError('SNAPSHOT_STORE_BUSY', `another garbage collection holds ${lock} (pid ${owner?.pid ?? '?'})`, { lock });
    }
  }
}

/** Removes the records of writers that died; releases the lock and fails if a live writer is registered. */
async function clearDeadWriters(writersDir: string, release: () => Promise<void>): Promise<void> {
  for (const name of fs.readdirSync(writersDir)) {
    const path = join(writersDir, name);
    if (name.includes('.tmp-')) {
      // A registration cut short by a crash (a live writer renames its record within microseconds).
      if (Date.now() - (fs.statSync(path, { throwIfNoEntry: false })?.mtimeMs ?? Date.now()) > 60_000) fs.rmSync(path, { force: true });
      continue;
    }
    const owner = readOwner(path);
    if (ownerAlive(owner)) {
      await release();
      throw snapshotError(
        'SNAPSHOT_STORE_BUSY',
        `a snapshot writer is active (pid ${owner?.pid}, since ${owner?.startedAt}); garbage collection must wait for it`,
        { writer: name },
      );
    }
    if (owner || Date.now() - (fs.statSync(path, { throwIfNoEntry: false })?.mtimeMs ?? 0) > 60_000) {
      fs.rmSync(path, { force: true }); // a writer that died
    }
  }
}

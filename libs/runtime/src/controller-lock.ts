/**
 * One live controller per run. `assay run` (new or `--resume`) takes `<run dir>/controller.lock` before it touches
 * anything of the run (containers, sockets, the workspace) and gives it back when it ends. The lock file names the
 * holder: host name, boot id, pid and the process's start time (from /proc, so a recycled pid is not mistaken for the
 * holder). A lock whose holder is on this host and alive refuses the newcomer with the holder's pid; a lock whose
 * holder is gone (SIGKILL, a crash, a reboot) is taken over. A lock from another host is never taken over
 * automatically: the operator decides (the message says which file to remove).
 *
 * Taking the lock is atomic: the file is created with O_EXCL; a stale lock is first renamed aside (only one of two
 * racing controllers can rename it), and the renamed file is checked to be the stale one that was read.
 */
import { closeSync, existsSync, linkSync, openSync, readFileSync, renameSync, rmSync, statSync, writeSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { AssayError, bootId, processStartTicks, systemClock } from '@assay/core';
import { RUN_CONTROLLER_LOCK } from '@assay/run';

export const CONTROLLER_LOCK = RUN_CONTROLLER_LOCK;

export interface LockHolder {
  host: string;
  bootId: string | null;
  pid: number;
  /** Process start time in clock ticks since boot (/proc/<pid>/stat field 22), or null where /proc is absent. */
  startTicks: string | null;
  since: string;
}

export interface ProcessProbe {
  host(): string;
  bootId(): string | null;
  /** Start time of a live process, null when no such process exists; undefined when it cannot be known. */
  startTicks(pid: number): string | null | undefined;
  self(): number;
}

export const systemProbe: ProcessProbe = {
  host: () => hostname(),
  bootId,
  startTicks: processStartTicks,
  self: () => process.pid,
};

function alreadyRunning(path: string, h: LockHolder): AssayError {
  return new AssayError(
    'RUN_CONTROLLER_ALIVE',
    'conflict',
    `another controller of this run is alive (pid ${h.pid} on ${h.host}, since ${h.since}); stop it first, or wait for it to end (${path})`,
    { details: { path, holder: h } },
  );
}

function readHolder(path: string): LockHolder | 'unreadable' {
  try {
    const h = JSON.parse(readFileSync(path, 'utf8')) as Partial<LockHolder>;
    if (typeof h.pid !== 'number' || typeof h.host !== 'string') return 'unreadable';
    return { host: h.host, bootId: h.bootId ?? null, pid: h.pid, startTicks: h.startTicks ?? null, since: String(h.since ?? '') };
  } catch {
    return 'unreadable';
  }
}

/** Is the holder certainly gone? (False when it is alive, or when that cannot be known.) */
function holderGone(h: LockHolder, probe: ProcessProbe): boolean {
  if (h.host !== probe.host()) return false;
  const boot = probe.bootId();
  if (h.bootId !== null && boot !== null && h.bootId !== boot) return true; // the machine rebooted since
  const ticks = probe.startTicks(h.pid);
  if (ticks === null) return true; // no such process
  if (ticks === undefined) return false;
  return h.startTicks !== null && ticks !== h.startTicks; // the pid now belongs to another process
}

/**
 * Whether a controller runs this run now, read from its lock without taking it: `alive` (held by a live process, or
 * one on another host that cannot be checked from here), `gone` (the holder is certainly dead: killed, crashed, or
 * the machine rebooted), `none` (no lock: no controller), `unknown` (the lock is not one Assay wrote).
 */
export function controllerLockState(runDir: string, probe: ProcessProbe = systemProbe): 'alive' | 'gone' | 'none' | 'unknown' {
  const path = join(runDir, CONTROLLER_LOCK);
  if (!existsSync(path)) return 'none';
  const h = readHolder(path);
  if (h === 'unreadable') return existsSync(path) ? 'unknown' : 'none';
  return holderGone(h, probe) ? 'gone' : 'alive';
}

export interface ControllerLock {
  /** Whether a stale lock (a killed controller) was taken over. */
  readonly tookOver: LockHolder | null;
  release(): void;
}

export function acquireControllerLock(runDir: string, now: () => Date = () => systemClock.now(), probe: ProcessProbe = systemProbe): ControllerLock {
  const path = join(runDir, CONTROLLER_LOCK);
  const me: LockHolder = {
    host: probe.host(),
    bootId: probe.bootId(),
    pid: probe.self(),
    startTicks: probe.startTicks(probe.self()) ?? null,
    since: now().toISOString(),
  };
  let tookOver: LockHolder | null = null;
  for (let attempt = 0; attempt < 3; attempt++) {
    let fd: number;
    try {
      fd = openSync(path, 'wx', 0o600);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      const before = statSync(path, { throwIfNoEntry: false });
      if (!before) continue; // released meanwhile: try again
      const h = readHolder(path);
      if (h === 'unreadable') {
        throw new AssayError(
          'RUN_LOCK_UNREADABLE',
          'refused',
          `${path} exists but is not a controller lock Assay wrote; remove it if no controller of this run is running`,
          { details: { path } },
        );
      }
      if (!holderGone(h, probe)) {
        if (h.host !== probe.host())
          throw new AssayError(
            'RUN_CONTROLLER_ALIVE',
            'conflict',
            `this run's controller lock is held by pid ${h.pid} on another host (${h.host}); if that controller is gone, remove ${path}`,
            { details: { path, holder: h } },
          );
        throw alreadyRunning(path, h);
      }
      // Stale: move it aside, then check that what was moved is what was judged stale.
      const aside = `${path}.stale-${me.pid}`;
      try {
        renameSync(path, aside);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue; // someone else moved it: try again
        throw err;
      }
      const moved = statSync(aside);
      const again = readHolder(aside);
      if (moved.ino !== before.ino || again === 'unreadable' || again.pid !== h.pid || again.since !== h.since) {
        // A rival's fresh lock was moved: put it back (unless the path is taken again), then give way.
        try {
          linkSync(aside, path);
        } catch {
          /* taken again: the rival's lock stays moved aside, and the rival keeps running */
        }
        rmSync(aside, { force: true });
        throw new AssayError('RUN_CONTROLLER_ALIVE', 'conflict', `another controller took over this run at the same moment (${path}); only one may resume it`, {
          details: { path },
        });
      }
      rmSync(aside, { force: true });
      tookOver = h;
      continue;
    }
    try {
      writeSync(fd, `${JSON.stringify(me)}\n`);
    } finally {
      closeSync(fd);
    }
    return {
      tookOver,
      release: () => {
        const h = existsSync(path) ? readHolder(path) : 'unreadable';
        if (h !== 'unreadable' && h.pid === me.pid && h.since === me.since) rmSync(path, { force: true });
      },
    };
  }
  throw new AssayError('RUN_CONTROLLER_ALIVE', 'conflict', `could not take ${path}: other controllers keep taking it`, { details: { path } });
}

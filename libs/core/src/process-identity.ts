import { readFileSync } from 'node:fs';

/**
 * Which process is which, beyond its pid (the kernel reuses pids once a process exits): the one owner check used by
 * the controller lock, the blob store's writer records and the Judge's owner registry.
 *
 *   boot id      /proc/sys/kernel/random/boot_id (a reboot makes every earlier record stale)
 *   start ticks  field 22 of /proc/<pid>/stat, the start time in clock ticks since boot
 *
 * Where /proc is absent (not Linux) these answer null and callers fall back to the pid alone.
 */
export function bootId(): string | null {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim() || null;
  } catch {
    return null;
  }
}

/**
 * The start time of a live process in clock ticks since boot; null when no such process exists (or it is a zombie,
 * gone but not yet reaped); undefined when /proc cannot tell.
 */
export function processStartTicks(pid: number): string | null | undefined {
  if (!Number.isSafeInteger(pid) || pid <= 0) return null;
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'ENOENT' ? null : undefined;
  }
  // Field 2, the command name, is in parentheses and may itself hold spaces and ')': count from the last ')'.
  const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  if (rest[0] === 'Z' || rest[0] === 'X') return null;
  const start = rest[19]; // field 22 overall = index 19 after pid and comm
  return start !== undefined && /^\d+$/.test(start) ? start : undefined;
}

/** Does a process with this pid exist (signal 0; EPERM means it exists but is someone else's)? */
export function processAlive(pid: number): boolean {
  if (!Number.isSafeInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** `<boot id>:<start ticks>` of the process that has `pid` now, or null where /proc cannot tell (or it is gone). */
export function processIdentity(pid: number): string | null {
  const boot = bootId();
  const start = boot ? processStartTicks(pid) : null;
  return boot && typeof start === 'string' ? `${boot}:${start}` : null;
}

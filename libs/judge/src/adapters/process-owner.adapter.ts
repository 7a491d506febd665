/**
 * Owners as `<host>/<pid>/<start time>`: the start time (field 22 of /proc/<pid>/stat, in clock ticks since boot)
 * tells a live owner from a new process that reused its pid. On a host without /proc the pid alone is checked.
 */
import { hostname } from 'node:os';
import { processAlive, processStartTicks } from '@assay/core';
import type { OwnerRegistry } from '../ports/owner.port';

const startTime = (pid: number): string | null => processStartTicks(pid) ?? null;

const safeHost = (): string =>
  hostname()
    .replace(/[^A-Za-z0-9._-]/g, '_')
    .slice(0, 64) || 'host';

export class ProcessOwnerRegistry implements OwnerRegistry {
  readonly self: string;
  private readonly host = safeHost();

  constructor(pid: number = process.pid) {
    this.self = `${this.host}/${pid}/${startTime(pid) ?? '0'}`;
  }

  isAlive(owner: string): boolean {
    const m = /^([^/]+)\/(\d+)\/(\d+)$/.exec(owner);
    if (!m) return true; // not ours to judge
    const [, host, pidText, start] = m as unknown as [string, string, string, string];
    if (host !== this.host) return true;
    const pid = Number(pidText);
    if (owner === this.self) return true;
    if (!processAlive(pid)) return false;
    const now = startTime(pid);
    return now === null || start === '0' || now === start;
  }
}

/**
 * Test helpers for the ledger's storage ports: a seal that builds real wire bytes with an all-zero signature
 * (stores never verify signatures), proposed events with deterministic ids, and temporary directories.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { wireBytes } from '../../libs/ledger/src/domain/envelope';
import type { JsonObject } from '../../libs/ledger/src/domain/json';
import type { ProposedEvent, Seal, SealInput } from '../../libs/ledger/src/ports/event-store.port';

export const TEST_SIGNER = 'test+00000000';
export const ZERO_SIG = Buffer.alloc(64).toString('base64');

/** Wire bytes of the envelope with signer TEST_SIGNER and a signature of 64 zero bytes. */
export const zeroSigSeal: Seal = (input: SealInput) => wireBytes({ ...input, signer: TEST_SIGNER, sig: ZERO_SIG });

/** A deterministic lowercase v4-shaped UUID derived from a label (SHA-256 of it). */
export function uuidFrom(label: string): string {
  const h = createHash('sha256').update(label).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-8${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

export const TEST_TIME = '2026-01-01T00:00:00.000Z';

export function proposed(label: string, data: JsonObject = {}, type = 'Note'): ProposedEvent {
  return { id: uuidFrom(label), type, data: { label, ...data }, time: TEST_TIME };
}

/** `n` events with ids derived from `${prefix}/${i}`. */
export function proposedMany(prefix: string, n: number): ProposedEvent[] {
  return Array.from({ length: n }, (_, i) => proposed(`${prefix}/${i}`, { i }));
}

export function makeTmpDir(prefix = 'assay-ledger-'): { dir: string; cleanup(): void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

export function hex(b: Uint8Array): string {
  return Buffer.from(b).toString('hex');
}

/** The parsed envelope JSON of stored wire bytes. */
export function envelopeOf(bytes: Uint8Array): Record<string, unknown> {
  return JSON.parse(Buffer.from(bytes).toString('utf8')) as Record<string, unknown>;
}

/** Collects an async iterable. */
export async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

/** Resolves when `cond()` holds, polling every few ms; rejects after `ms`. */
export function waitFor(cond: () => boolean, ms = 5000, what = 'condition'): Promise<void> {
  return waitForAsync(() => Promise.resolve(cond()), ms, what);
}

/**
 * waitFor for a condition that must be awaited (a read of another process's ledger, a Docker call): one call at a
 * time, `intervalMs` apart; rejects after `ms`. `what` may be a function, to say what was seen last.
 */
export async function waitForAsync(cond: () => Promise<boolean>, ms = 5000, what: string | (() => string) = 'condition', intervalMs = 5): Promise<void> {
  const start = Date.now();
  while (!(await cond())) {
    if (Date.now() - start > ms) throw new Error(`timed out after ${ms} ms waiting for ${typeof what === 'function' ? what() : what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/**
 * Reading what a run wrote to the ledger of an ASSAY_HOME, and leaving its agent the file it waits for (e2e tests that
 * run the CLI against a real home).
 */
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { AssayError, randomIds, systemClock } from '@assay/core';
import { LedgerHome } from '@assay/ledger';
import { waitForAsync } from '../../support/ledger-fixtures';

export interface HomeEvent {
  type: string;
  stream: string;
  data: Record<string, unknown>;
}

/** The events of `home`'s ledger (of one stream when given, else all), oldest first, at most 10,000. */
export async function homeEvents(home: string, stream?: string): Promise<HomeEvent[]> {
  const h = new LedgerHome(home, { clock: systemClock, ids: randomIds });
  try {
    const all = await h.readEvents({ ...(stream ? { stream } : {}), limit: 10_000 });
    return all.map((e) => ({ type: e.envelope.type, stream: e.envelope.stream, data: e.envelope.data as Record<string, unknown> }));
  } finally {
    await h.close();
  }
}

/** No events when `home` has no ledger yet (LEDGER_NOT_INITIALIZED); any other read error is rethrown. */
function noEventsIfUninitialised(e: unknown): HomeEvent[] {
  if (e instanceof AssayError && e.code === 'LEDGER_NOT_INITIALIZED') return [];
  throw e;
}

/**
 * Polls `stream` of `home`'s ledger until `enough(events)` holds (a run in another process appending to it), for at
 * most `timeoutMs`; returns the events seen last. A home whose ledger is not initialised yet reads as no events; any
 * other error reading it fails the wait at once. For handshakes with an agent that holds a state until the test has
 * seen it recorded, instead of counting on a fixed wall-clock window.
 */
export async function untilEvents(home: string, stream: string, enough: (events: HomeEvent[]) => boolean, timeoutMs = 180_000): Promise<HomeEvent[]> {
  let events: HomeEvent[] = [];
  await waitForAsync(
    async () => enough((events = await homeEvents(home, stream).catch(noEventsIfUninitialised))),
    timeoutMs,
    () => `${stream} to record what the test waits for (${events.length} events)`,
    250,
  );
  return events;
}

/**
 * Leaves an empty file `name` in the live workspace of `run` (workfs/ where the host bound it, else workspace/), for an
 * agent that waits for it; nothing when the run has neither (it never got that far). Call it in a `finally`, so a
 * failed wait never leaves the agent running until its own timeout.
 */
export function leaveInWorkspace(home: string, run: string, name: string): void {
  const dir = ['workfs', 'workspace'].map((d) => join(home, 'runs', run, d)).find((d) => existsSync(d));
  if (dir) writeFileSync(join(dir, name), '');
}

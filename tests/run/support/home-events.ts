/** Reading what a run wrote to the ledger of an ASSAY_HOME (e2e tests that run the CLI against a real home). */
import { randomIds, systemClock } from '@assay/core';
import { LedgerHome } from '@assay/ledger';

export interface HomeEvent {
  type: string;
  stream: string;
  data: Record<string, unknown>;
}

/** The events of `home`'s ledger (of one stream when given, else all), oldest first, at most 10,000. */
export async function homeEvents(home: string, stream?: string): Promise<HomeEvent[]> {
  const h = await LedgerHome.open(home, { clock: systemClock, ids: randomIds });
  try {
    const all = await h.readEvents({ ...(stream ? { stream } : {}), limit: 10_000 });
    return all.map((e) => ({ type: e.envelope.type, stream: e.envelope.stream, data: e.envelope.data as Record<string, unknown> }));
  } finally {
    await h.close();
  }
}

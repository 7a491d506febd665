/** An imported bundle's row: built from its verified claim, with the run's times from its signed events when given. */
import { AssayError } from '@assay/core';
import { importedRow } from '@assay/projections';

const CLAIM = {
  run: 'r-1',
  task: 'tiny-optimizer',
  taskDigest: 'sha256:' + 'a'.repeat(64),
  agent: 'reference',
  model: null,
  protocolFingerprint: 'sha256:' + 'b'.repeat(64),
  metric: 'val_loss',
  direction: 'minimize',
  status: 'completed',
  claimedScore: 0.25,
  round: 3,
  snapshot: 'bafyreiboe6hdth4qf62rxbxzt6d4rv3y64krgfhxiyw4qhxat6apyjqkny',
  counts: { rounds: 4, completed: 3, violating: 0, invalid: 1, failed: 0, refunded: 0, refusedRequests: 0 },
  budgets: { submissions: { granted: 5, used: 4 } },
};
const PROVENANCE = { bundleDigest: 'sha256:' + 'c'.repeat(64), publisherKey: 'k+00000000+AAAA', importedAt: '2026-12-04T00:00:00.000Z' };

describe('importedRow', () => {
  it('takes the start and end the verification read from the signed events, and their difference as wall time', () => {
    const row = importedRow(CLAIM, PROVENANCE, { startedAt: '2026-12-01T10:00:03.000Z', completedAt: '2026-12-01T10:00:42.500Z' });
    expect(row).toMatchObject({
      source: 'imported',
      startedAt: '2026-12-01T10:00:03.000Z',
      completedAt: '2026-12-01T10:00:42.500Z',
      wallTimeMs: 39_500,
      best: { score: 0.25, round: 3 },
      submissions: { used: 4, allowed: 5 },
      rounds: { total: 4, invalid: 1, failed: 0, violating: 0, refunded: 0 },
    });
  });

  it('leaves the times empty without them, or when they are not UTC RFC 3339 times', () => {
    for (const times of [
      null,
      { startedAt: 'yesterday', completedAt: '2026-12-01T10:00:42.000Z' },
      { startedAt: '2026-12-01T10:00:03+01:00', completedAt: '2026-12-01T10:00:42.000Z' },
    ])
      expect(importedRow(CLAIM, PROVENANCE, times)).toMatchObject({ startedAt: null, completedAt: null, wallTimeMs: null });
  });

  it('never reports a negative wall time', () => {
    expect(importedRow(CLAIM, PROVENANCE, { startedAt: '2026-12-01T10:00:42.000Z', completedAt: '2026-12-01T10:00:03.000Z' }).wallTimeMs).toBe(0);
  });

  it('refuses a claim without a direction, naming the field', () => {
    expect(() => importedRow({ ...CLAIM, direction: 'up' }, PROVENANCE)).toThrow(AssayError);
    expect(() => importedRow({ ...CLAIM, direction: 'up' }, PROVENANCE)).toThrow(/direction must be "maximize" or "minimize"/);
  });
});

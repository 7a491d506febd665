import { ManualClock, SequentialIds } from '@assay/core';
import { generateKeyPair, Ledger, MemoryCheckpointStore, MemoryEventStore, MemoryMerkleNodeStore, toSigningKey } from '@assay/ledger';
import { checkLogDigest, recordedJudgeLogs, recordedTranscripts, recordTranscripts, transcriptStream } from './run-logs';

const D = (c: string) => `sha256:${c.repeat(64)}`;

function ledger(): Ledger {
  return new Ledger({
    store: new MemoryEventStore(),
    merkle: new MemoryMerkleNodeStore(),
    checkpoints: new MemoryCheckpointStore(),
    keys: (['controller', 'runtime', 'judge'] as const).map((r) => toSigningKey(generateKeyPair(r))),
    clock: new ManualClock('2026-03-01T10:00:00.000Z'),
    ids: new SequentialIds(),
    origin: 'assay.test/run-logs',
  });
}

describe('run logs: digests in the ledger', () => {
  it('records each session once, in its own stream, signed by the controller', async () => {
    const l = ledger();
    const s1 = { session: 1, digest: D('a'), bytes: 10, dropped: 0, recovered: true };
    const s2 = { session: 2, digest: D('b'), bytes: 20, dropped: 5, recovered: false };
    expect(await recordTranscripts(l, 'r1', [s2, s1])).toEqual([s1, s2]);
    // a second call (or a later controller) records nothing again, even with another digest for a recorded session
    expect(await recordTranscripts(l, 'r1', [{ ...s1, digest: D('c') }, s2])).toEqual([]);
    const got = await recordedTranscripts(l, 'r1');
    expect([...got]).toEqual([
      [1, { digest: D('a'), position: 0, recovered: true }],
      [2, { digest: D('b'), position: 1, recovered: false }],
    ]);
    const stored = [];
    for await (const e of l.store.readStream(transcriptStream('r1'))) stored.push(e);
    expect(stored.map((e) => e.type)).toEqual(['AgentTranscriptRecorded', 'AgentTranscriptRecorded']);
    // another run's transcripts are its own
    expect((await recordedTranscripts(l, 'r2')).size).toBe(0);
  });

  it('refuses data the catalogue refuses (a digest that is not sha256:<64 hex>)', async () => {
    const l = ledger();
    await expect(recordTranscripts(l, 'r1', [{ session: 1, digest: 'md5:00', bytes: 1, dropped: 0, recovered: false }])).rejects.toMatchObject({
      code: expect.stringMatching(/^LEDGER_/),
    });
    expect((await recordedTranscripts(l, 'r1')).size).toBe(0);
  });

  it("reads each round's Judge log digest from the run's JudgeCompleted events (the last of a round)", async () => {
    const l = ledger();
    await l.append('run-r1', [{ type: 'Note', data: { text: 'first event of the run stream' } }]);
    const completed = (run: string, round: number, c: string) => ({
      type: 'JudgeCompleted',
      data: { run, round, judge: `j${round}${c}`, status: 'completed', exitCode: 0, durationMs: 1, outputDigest: D(c), outputBytes: 1 },
    });
    await l.append('judge-j1', [completed('r1', 1, 'a')]);
    await l.append('judge-j2', [completed('r2', 1, 'f')]);
    await l.append('judge-j3', [completed('r1', 2, 'b')]);
    await l.append('judge-j4', [completed('r1', 2, 'c')]);
    const got = await recordedJudgeLogs(l, 'r1');
    expect([...got].map(([k, v]) => [k, v.digest])).toEqual([
      [1, D('a')],
      [2, D('c')],
    ]);
    expect((await recordedJudgeLogs(l, 'nope')).size).toBe(0);
  });

  it('compares a file with its recorded digest', () => {
    expect(checkLogDigest(D('a'), { digest: D('a'), position: 3 })).toBe('recorded');
    expect(checkLogDigest(D('b'), { digest: D('a'), position: 3 })).toBe('differs');
    expect(checkLogDigest(D('a'), undefined)).toBe('unrecorded');
  });
});

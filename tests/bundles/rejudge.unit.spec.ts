/**
 * `rejudge` (libs/bundles/src/application/rejudge.ts) with fake ports, no Docker: the report's arithmetic (median,
 * spread, delta, the tolerance boundary, could_not_judge), the order of the steps and what a refusal leaves
 * unrecorded, the event's data against the catalogue, and the CAR entry streamed out of a bundle archive.
 */
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AssayError, type IdGenerator } from '@assay/core';
import { eventDataProblem, type JsonObject } from '@assay/ledger';
import { tarHeader, tarPadding } from '@assay/containers';
import {
  ENTRY,
  extractBundleCar,
  rejudge,
  rejudgeVerdict,
  type BundleVerdict,
  type CompiledTask,
  type RejudgeOptions,
  type RejudgePorts,
  type RejudgeScore,
} from '@assay/bundles';

const done = (primaryScore: number, judge = `j${primaryScore}`): RejudgeScore => ({ judge, status: 'completed', primaryScore });
const failed = (status: string, judge = `f-${status}`): RejudgeScore => ({ judge, status, primaryScore: null });

describe('rejudgeVerdict: the report arithmetic', () => {
  it('takes the median of the completed scores (odd: the middle one; even: the mean of the middle two), their spread and the delta', () => {
    expect(rejudgeVerdict(2, [done(3), done(1), done(2)], 0)).toEqual({ median: 2, spread: 2, delta: 0, verdict: 'reproduced' });
    expect(rejudgeVerdict(2, [done(4), done(1), done(2), done(3)], 0)).toEqual({ median: 2.5, spread: 3, delta: 0.5, verdict: 'not_reproduced' });
    expect(rejudgeVerdict(0.5, [done(0.5), done(0.5)], 0)).toEqual({ median: 0.5, spread: 0, delta: 0, verdict: 'reproduced' });
    expect(rejudgeVerdict(3, [done(1)], 0)).toEqual({ median: 1, spread: 0, delta: -2, verdict: 'not_reproduced' });
  });

  it('ignores Judges that did not complete with a score', () => {
    expect(
      rejudgeVerdict(1, [failed('verifier_error'), done(1), failed('infrastructure_error'), { judge: 'x', status: 'completed', primaryScore: null }], 0),
    ).toEqual({
      median: 1,
      spread: 0,
      delta: 0,
      verdict: 'reproduced',
    });
  });

  it('reproduces exactly at the tolerance, not past it, and 0 means equal', () => {
    // 1.25 - 1 = 0.25 exactly in binary floating point
    expect(rejudgeVerdict(1, [done(1.25)], 0.25).verdict).toBe('reproduced');
    expect(rejudgeVerdict(1, [done(0.75)], 0.25).verdict).toBe('reproduced');
    expect(rejudgeVerdict(1, [done(1.25)], 0.2499999).verdict).toBe('not_reproduced');
    expect(rejudgeVerdict(1, [done(1 + Number.EPSILON)], 0).verdict).toBe('not_reproduced');
    expect(rejudgeVerdict(1, [done(1)], 0).verdict).toBe('reproduced');
  });

  it('could_not_judge: no Judge completed with a score (or nothing was recorded to compare with)', () => {
    expect(rejudgeVerdict(1, [], 0)).toEqual({ median: null, spread: null, delta: null, verdict: 'could_not_judge' });
    expect(rejudgeVerdict(1, [failed('verifier_timeout'), failed('submission_error')], 5)).toEqual({
      median: null,
      spread: null,
      delta: null,
      verdict: 'could_not_judge',
    });
    expect(rejudgeVerdict(null, [done(1)], 0)).toMatchObject({ median: 1, delta: null, verdict: 'could_not_judge' });
  });

  it('refuses a tolerance that is negative or not finite', () => {
    for (const t of [-1, Number.NaN, Number.POSITIVE_INFINITY]) expect(() => rejudgeVerdict(1, [done(1)], t)).toThrow(/tolerance/);
  });
});

const SNAPSHOT = 'bafyreiclnpx2dn2h26tf56oaln7fvagodmua7d52ckcrhd73x5o4dgdfru';
const CLAIM = {
  run: 'r1',
  task: 'assay:tiny-optimizer',
  taskDigest: 'bafyreibz3ocuwnzhlxegzs3lpfzdeqfu22byewfut6x7cibzzcj4dqg2rm',
  agent: 'reference-agent',
  model: null,
  protocolFingerprint: 'sha256:c72c3b8ba8e57b55fa6f73d6442db4ce43e64e9ce3a7b946b103eae024a7e128',
  selection: {},
  metric: 'val_loss',
  direction: 'minimize',
  status: 'completed',
  claimedScore: 0.5,
  round: 1,
  snapshot: SNAPSHOT,
  counts: { rounds: 1, completed: 1, violating: 0, invalid: 0, failed: 0, refunded: 0, refusedRequests: 0 },
  budgets: {},
};
// `...EXTRA`: fields of BundleVerdict that rejudge does not read (witnesses, with a witness policy)
const EXTRA = { witnesses: null, kind: 'run' as const, rejudge: null, times: null };
const valid = (claim: JsonObject = CLAIM as unknown as JsonObject): BundleVerdict => ({
  ...EXTRA,
  verdict: 'valid',
  steps: [],
  failure: null,
  claim,
  run: 'r1',
  events: 21,
});
const failing = (verdict: 'invalid' | 'cannot_check'): BundleVerdict => ({
  ...EXTRA,
  verdict,
  steps: [],
  failure: { step: verdict === 'invalid' ? 'signatures' : 'trust', code: 'VERIFY_X', message: 'bad', position: null },
  claim: null,
  run: 'r1',
  events: 0,
});

/** Archive bytes in the bundle's entry order, the CAR entry only when `car` is given. */
function archive(car: Buffer | null, withLogs = false): Buffer {
  const entries: Array<[string, Buffer]> = [
    [ENTRY.manifest, Buffer.from('{"m":1}')],
    [ENTRY.checkpoint, Buffer.alloc(700, 0x63)],
    [ENTRY.events, Buffer.from('e\n'.repeat(300))],
    ...(withLogs ? ([['assay-bundle/logs.jsonl', Buffer.alloc(1500, 0x6c)]] as Array<[string, Buffer]>) : []),
    ...(car ? ([[ENTRY.snapshots, car]] as Array<[string, Buffer]>) : []),
    [ENTRY.statement, Buffer.from('{"s":1}')],
  ];
  const parts: Buffer[] = [];
  for (const [name, content] of entries)
    parts.push(tarHeader({ path: name, type: 'file', mode: 0o644, size: content.length }), content, tarPadding(content.length));
  parts.push(Buffer.alloc(1024));
  return Buffer.concat(parts);
}

async function* chunks(b: Buffer, size: number): AsyncGenerator<Uint8Array> {
  for (let i = 0; i < b.length; i += size) yield b.subarray(i, i + size);
}

interface World {
  ports: RejudgePorts;
  calls: string[];
  recorded: Array<{ stream: string; type: string; data: JsonObject }>;
}

function world(o: {
  verdict?: BundleVerdict;
  task?: Partial<CompiledTask>;
  scores?: RejudgeScore[];
  car?: boolean;
  inStore?: boolean;
  carRoots?: string[];
  tempDir: string;
}): World {
  const calls: string[] = [];
  const recorded: World['recorded'] = [];
  let n = 0;
  const ids: IdGenerator = { next: () => `00000000-0000-4000-8000-${String(++n).padStart(12, '0')}` };
  const bytes = archive(o.car === false ? null : Buffer.from('car bytes '.repeat(100)));
  const ports: RejudgePorts = {
    readBundle: () => chunks(bytes, 333),
    verify: async (source) => {
      calls.push('verify');
      for await (const _ of source) void _;
      return o.verdict ?? valid();
    },
    compileTask: async () => {
      calls.push('compileTask');
      return { name: 'assay/tiny-optimizer', digest: CLAIM.taskDigest, tolerance: null, ...o.task };
    },
    prepare: async () => {
      calls.push('prepare');
    },
    hasSnapshot: async () => {
      calls.push('hasSnapshot');
      return o.inStore === true;
    },
    importCar: async (file) => {
      calls.push(`importCar ${file.endsWith('snapshots.car') ? 'bundle' : file}`);
      return { roots: o.carRoots ?? [SNAPSHOT] };
    },
    judge: async (cid, k, metric) => {
      calls.push(`judge ${cid === SNAPSHOT ? 'snapshot' : cid} x${k} ${metric}`);
      return o.scores ?? Array.from({ length: k }, (_, i) => done(0.5, `j${i}`));
    },
    record: async (stream, _id, type, data) => {
      calls.push('record');
      recorded.push({ stream, type, data });
      return { position: 42 };
    },
    ids,
    tempDir: o.tempDir,
  };
  return { ports, calls, recorded };
}

describe('rejudge: the steps, with fakes', () => {
  let tmp: string;
  beforeAll(() => {
    tmp = mkdtempSync(join(tmpdir(), 'assay-rejudge-unit-'));
  });
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));
  const opts = (o: Partial<RejudgeOptions> = {}): RejudgeOptions => ({ repeat: 3, tolerance: null, carFile: null, ...o });
  const refusal = async (w: World, o: RejudgeOptions = opts()): Promise<AssayError> => {
    const e = await rejudge(w.ports, o).then(
      () => null,
      (err: unknown) => err,
    );
    expect(e).toBeInstanceOf(AssayError);
    expect(w.recorded).toEqual([]);
    return e as AssayError;
  };

  it('verifies, checks the task, imports the bundle CAR, judges, then records a RejudgeCompleted the catalogue accepts', async () => {
    const w = world({ tempDir: tmp });
    const r = await rejudge(w.ports, opts());
    expect(w.calls).toEqual(['verify', 'compileTask', 'prepare', 'importCar bundle', 'judge snapshot x3 val_loss', 'record']);
    expect(r).toMatchObject({
      verdict: 'reproduced',
      recordedScore: 0.5,
      median: 0.5,
      spread: 0,
      delta: 0,
      tolerance: 0,
      toleranceFrom: 'default',
      snapshot: { cid: SNAPSHOT, source: 'bundle' },
      event: { stream: 'rejudge-00000000-0000-4000-8000-000000000001', position: 42 },
    });
    expect(r.bundle.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    const [ev] = w.recorded;
    expect(ev).toMatchObject({ type: 'RejudgeCompleted', stream: r.event.stream });
    expect(eventDataProblem('RejudgeCompleted', ev?.data as JsonObject)).toBeNull();
    expect(ev?.data).toMatchObject({
      snapshot: SNAPSHOT,
      run: 'r1',
      round: 1,
      status: 'completed',
      matches: true,
      verdict: 'reproduced',
      bundleDigest: r.bundle.digest,
    });
    expect(readdirSync(tmp)).toEqual([]); // the extracted CAR is removed
  });

  it('records not_reproduced and could_not_judge too, with the tolerance of the option, else of the task', async () => {
    const off = world({ tempDir: tmp, scores: [done(0.6), done(0.7), done(0.65)], task: { tolerance: 0.1 } });
    const a = await rejudge(off.ports, opts());
    expect(a).toMatchObject({ verdict: 'not_reproduced', median: 0.65, toleranceFrom: 'task', tolerance: 0.1 });
    expect(a.spread).toBeCloseTo(0.1, 12);
    expect(a.delta).toBeCloseTo(0.15, 12);
    const within = world({ tempDir: tmp, scores: [done(0.6)], task: { tolerance: 0.01 } });
    expect(await rejudge(within.ports, opts({ tolerance: 0.2, repeat: 1 }))).toMatchObject({ verdict: 'reproduced', toleranceFrom: 'option', tolerance: 0.2 });

    const none = world({ tempDir: tmp, scores: [failed('verifier_error'), failed('verifier_timeout')] });
    expect(await rejudge(none.ports, opts({ repeat: 2 }))).toMatchObject({ verdict: 'could_not_judge', median: null, spread: null, delta: null });
    expect(none.recorded[0]?.data).toMatchObject({ status: 'verifier_timeout', primaryScore: null, matches: false, verdict: 'could_not_judge' });
    expect(eventDataProblem('RejudgeCompleted', none.recorded[0]?.data as JsonObject)).toBeNull();
  });

  it('refuses an invalid bundle (integrity, exit 5) and one it cannot check (refused, exit 6) before anything else', async () => {
    const bad = world({ tempDir: tmp, verdict: failing('invalid') });
    expect(await refusal(bad)).toMatchObject({
      code: 'BUNDLE_REJUDGE_INVALID',
      kind: 'integrity',
      message: expect.stringContaining('step signatures: VERIFY_X'),
    });
    expect(bad.calls).toEqual(['verify']);
    const unchecked = world({ tempDir: tmp, verdict: failing('cannot_check') });
    expect(await refusal(unchecked)).toMatchObject({ code: 'BUNDLE_REJUDGE_CANNOT_CHECK', kind: 'refused' });
    expect(unchecked.calls).toEqual(['verify']);
  });

  it('refuses a task whose digest is not the claim’s, naming both, before any store, Judge or ledger', async () => {
    const w = world({ tempDir: tmp, task: { digest: 'bafyother' } });
    const e = await refusal(w);
    expect(e).toMatchObject({ code: 'BUNDLE_REJUDGE_TASK_MISMATCH', kind: 'integrity' });
    expect(e.message).toContain('bafyother');
    expect(e.message).toContain(CLAIM.taskDigest);
    expect(w.calls).toEqual(['verify', 'compileTask']);
  });

  it('refuses a re-judge report bundle (valid, but no run claim to re-judge) before anything else', async () => {
    const w = world({ tempDir: tmp, verdict: { ...valid(), kind: 'rejudge', rejudge: 'rj-1' } });
    const e = await refusal(w);
    expect(e).toMatchObject({ code: 'BUNDLE_REJUDGE_NOT_RUN_BUNDLE', kind: 'invalid_input' });
    expect(e.message).toContain('rj-1');
    expect(w.calls).toEqual(['verify']);
  });

  it('refuses a claim with no selected snapshot', async () => {
    const w = world({ tempDir: tmp, verdict: valid({ ...CLAIM, snapshot: null, claimedScore: null, round: null } as unknown as JsonObject) });
    expect(await refusal(w)).toMatchObject({ code: 'BUNDLE_REJUDGE_NOTHING_TO_JUDGE', kind: 'conflict' });
  });

  it('without a CAR in the bundle: --car, else the store, else a clear error saying how to get one', async () => {
    const car = world({ tempDir: tmp, car: false });
    expect(await rejudge(car.ports, opts({ carFile: '/x/snap.car' }))).toMatchObject({ snapshot: { source: 'car' } });
    expect(car.calls).toContain('importCar /x/snap.car');
    const wrongCar = world({ tempDir: tmp, car: false, carRoots: ['bafyelse'] });
    expect(await refusal(wrongCar, opts({ carFile: '/x/other.car' }))).toMatchObject({ code: 'BUNDLE_REJUDGE_SNAPSHOT_MISSING' });
    const stored = world({ tempDir: tmp, car: false, inStore: true });
    expect(await rejudge(stored.ports, opts())).toMatchObject({ snapshot: { source: 'store' } });
    const nowhere = world({ tempDir: tmp, car: false });
    const e = await refusal(nowhere);
    expect(e).toMatchObject({ code: 'BUNDLE_REJUDGE_SNAPSHOT_MISSING', kind: 'not_found' });
    expect(e.message).toMatch(/--snapshots best.*--car FILE/);
    expect(nowhere.calls.some((c) => c.startsWith('judge'))).toBe(false);
  });

  it('refuses out-of-range options before reading the bundle', async () => {
    for (const o of [opts({ repeat: 0 }), opts({ repeat: 101 }), opts({ repeat: 1.5 }), opts({ tolerance: -0.1 }), opts({ tolerance: Number.NaN })]) {
      const w = world({ tempDir: tmp });
      expect(await refusal(w, o)).toMatchObject({ code: 'BUNDLE_BAD_OPTION' });
      expect(w.calls).toEqual([]);
    }
  });
});

describe('extractBundleCar', () => {
  let tmp: string;
  beforeAll(() => {
    tmp = mkdtempSync(join(tmpdir(), 'assay-rejudge-car-'));
  });
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  it('streams the snapshots entry out of the archive, whatever the chunking', async () => {
    const car = Buffer.from(Array.from({ length: 5000 }, (_, i) => i % 251));
    for (const size of [1, 7, 512, 4096, 1 << 20]) {
      const file = join(tmp, `car-${size}`);
      expect(await extractBundleCar(chunks(archive(car), size), file)).toBe(true);
      expect(readFileSync(file).equals(car)).toBe(true);
    }
    const afterLogs = join(tmp, 'car-after-logs');
    expect(await extractBundleCar(chunks(archive(car, true), 1000), afterLogs)).toBe(true);
    expect(readFileSync(afterLogs).equals(car)).toBe(true);
  });

  it('returns false for a bundle without one, and fails on a truncated archive', async () => {
    expect(await extractBundleCar(chunks(archive(null), 100), join(tmp, 'none'))).toBe(false);
    const full = archive(Buffer.alloc(3000, 1));
    const cut = full.subarray(0, full.length - 3000); // inside the CAR entry
    await expect(extractBundleCar(chunks(cut, 64), join(tmp, 'cut'))).rejects.toThrow(/ended inside an entry/);
  });
});

/**
 * The pure logic of the web pages (apps/api/web/logic.js, plain browser JavaScript loaded here through require):
 * trajectory series for the chart, table sorting, leaderboard group differences, the SSE parser, reconnect
 * backoff, formatting, base64 and SHA-256, signed notes and tlog-proof parsing, and the RFC 9162 inclusion check,
 * cross-checked against the ledger's own Merkle tree, proof format, checkpoint signing and cosignatures.
 */
import { createHash, randomBytes } from 'node:crypto';
import { inclusionProof, leafHash as libLeafHash, nodeHash as libNodeHash, rootAt } from '../../libs/ledger/src/domain/merkle';
import { formatInclusionProof } from '../../libs/ledger/src/application/proof-format';
import { signCheckpoint } from '../../libs/ledger/src/domain/checkpoint';
import { ed25519NoteSigner, noteKeyId, SIG_TYPE_ED25519 } from '../../libs/ledger/src/domain/note';
import { cosign, ed25519Cosigner } from '../../libs/ledger/src/domain/cosignature';
import { wireBytes, type Envelope } from '../../libs/ledger/src/domain/envelope';
import { nodeEd25519 } from '../../libs/ledger/src/crypto/ed25519';
import { leaderboardRow, projectRunEvent, rankLeaderboard, runOfEvent, trajectoryOf, type LeaderboardRow, type RunSlot } from '@assay/projections';
import type { RunEventRecord } from '@assay/run';
import { asRecords, noValidRun, preamble, sampleVariant } from '../projections/projection-fixtures';

type Sha = (b: Uint8Array) => Promise<Uint8Array>;
interface Step {
  name: string;
  ok: boolean | null;
  required: boolean;
  detail: string;
}
interface Signature {
  name: string;
  keyIdHex: string;
  bytes: Uint8Array;
  kind: string;
  timestamp: number | null;
  role: string;
}
interface Checkpoint {
  origin: string;
  treeSize: number;
  rootHash: Uint8Array;
  rootHashBase64: string;
  extensions: string[];
  body: string;
  signatures: Signature[];
}
interface Series {
  data: [number[], (number | null)[], (number | null)[], (number | null)[], (number | null)[], (number | null)[]];
  rounds: (Record<string, unknown> | null)[];
  direction: string;
}
interface SseEvent {
  event: string;
  data: string;
  id?: string;
  retry?: number;
}
interface WebLogic {
  formatMs(ms: unknown): string;
  formatNumber(n: unknown, digits?: number): string;
  formatSigned(n: unknown, digits?: number): string;
  formatPercent(n: unknown): string;
  shortCid(cid: unknown, head?: number, tail?: number): string;
  statusClass(s: unknown): string;
  apiBase(p: unknown): string;
  trajectorySeries(t: unknown): Series;
  getPath(o: unknown, p: string): unknown;
  sortRows<T>(rows: readonly T[], key: string | ((r: T) => unknown), dir: 'asc' | 'desc'): T[];
  groupDifferences(groups: unknown): string[];
  parseSse(buffer: string): { events: SseEvent[]; rest: string };
  backoffMs(attempt: number, opts?: { base?: number; max?: number; rand?: () => number }): number;
  base64Encode(b: Uint8Array): string;
  base64Decode(s: unknown): Uint8Array | null;
  toHex(b: Uint8Array): string;
  sha256Js: Sha;
  canonicalJson(v: unknown): string;
  parseSignedNote(text: unknown): { body: string; signatures: Signature[] };
  parseCheckpointNote(text: unknown): Checkpoint;
  parseTlogProof(text: unknown): { index: number; proof: Uint8Array[]; checkpointText: string; checkpoint: Checkpoint };
  leafHash(b: Uint8Array, sha: Sha): Promise<Uint8Array>;
  nodeHash(l: Uint8Array, r: Uint8Array, sha: Sha): Promise<Uint8Array>;
  verifyInclusion(leaf: unknown, index: unknown, size: unknown, path: unknown, root: unknown, sha: Sha): Promise<{ ok: boolean; reason: string }>;
  envelopeBytesOf(e: unknown): { bytes?: Uint8Array; from?: string; error?: string };
  checkInclusion(a: {
    position: unknown;
    event: unknown;
    proofText: unknown;
    sha256: Sha;
    shown?: { treeSize: number; rootHash: string };
  }): Promise<{ included: boolean; reason: string; steps: Step[]; leafHash?: string; envelopeHash?: string }>;
  tableColumns(v: unknown, max?: number): string[] | null;
}

const W: WebLogic = require('../../apps/api/web/logic.js');

const sha256: Sha = async (b) => new Uint8Array(createHash('sha256').update(b).digest());
const u8 = (b: Uint8Array | Buffer): Uint8Array => new Uint8Array(b);
const HOSTILE = '<img src=x onerror=alert(1)>\u0000\u001b[31m"\'&';

// ---- a small RFC 9162 tree built here, independently of the ledger's code ------------------------------------------

const H = (...parts: Uint8Array[]): Uint8Array => u8(createHash('sha256').update(Buffer.concat(parts)).digest());
const leafOf = (d: Uint8Array): Uint8Array => H(Uint8Array.of(0), d);
const splitK = (n: number): number => {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
};
function mth(leaves: Uint8Array[]): Uint8Array {
  if (leaves.length === 1) return leaves[0]!;
  const k = splitK(leaves.length);
  return H(Uint8Array.of(1), mth(leaves.slice(0, k)), mth(leaves.slice(k)));
}
function path(m: number, leaves: Uint8Array[]): Uint8Array[] {
  if (leaves.length === 1) return [];
  const k = splitK(leaves.length);
  return m < k ? [...path(m, leaves.slice(0, k)), mth(leaves.slice(k))] : [...path(m - k, leaves.slice(k)), mth(leaves.slice(0, k))];
}

// ---- ledger-shaped fixtures ----------------------------------------------------------------------------------------

const SIG = Buffer.alloc(64, 7).toString('base64');
function envelopeAt(position: number, data: Record<string, unknown> = { n: position }): Envelope {
  return {
    type: 'NoteAdded',
    data: data as Envelope['data'],
    stream: 'note-demo',
    revision: position,
    position,
    id: `00000000-0000-4000-8000-${String(position).padStart(12, '0')}`,
    time: '2026-12-01T10:00:00.000Z',
    prev: '0'.repeat(64),
    signer: 'assay-controller+01020304',
    sig: SIG,
  };
}

const logSeed = randomBytes(32);
const logSigner = ed25519NoteSigner('assay-controller', logSeed);

function ledgerOf(n: number, dataOf?: (i: number) => Record<string, unknown>) {
  const envelopes = Array.from({ length: n }, (_, i) => envelopeAt(i, dataOf ? dataOf(i) : undefined));
  const wires = envelopes.map((e) => wireBytes(e));
  const leaves = wires.map((w) => libLeafHash(w));
  const node = (level: number, index: number): Uint8Array => {
    if (level === 0) return leaves[index]!;
    return libNodeHash(node(level - 1, 2 * index), node(level - 1, 2 * index + 1));
  };
  const root = rootAt(n, node);
  const note = signCheckpoint({ origin: 'assay.example/ledger', treeSize: n, rootHash: root }, [logSigner]);
  const proofText = (p: number) =>
    formatInclusionProof({ position: p, proof: inclusionProof(p, n, node).map((h) => Buffer.from(h).toString('base64')), checkpoint: note });
  const apiEvent = (p: number) => {
    const e = envelopes[p]!;
    // as GET /ledger/events answers: the envelope's members, its hash and its stored bytes
    return { ...e, position: e.position, hash: createHash('sha256').update(wires[p]!).digest('hex'), envelope: wires[p]!.toString('base64') };
  };
  return { envelopes, wires, leaves, root, note, proofText, apiEvent, shown: { treeSize: n, rootHash: Buffer.from(root).toString('base64') } };
}

// ---- run projections, as the API serves them -----------------------------------------------------------------------

function fold(records: readonly RunEventRecord[]): Map<string, RunSlot> {
  const slots = new Map<string, RunSlot>();
  for (const e of records) {
    const run = runOfEvent(e);
    if (run === null) continue;
    const next = projectRunEvent(slots.get(run) ?? null, e);
    if (next) slots.set(run, next);
  }
  return slots;
}
const json = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;

describe('formatting', () => {
  it('formatMs: ms, seconds, minutes, hours, days; negatives; not a number', () => {
    expect(W.formatMs(0)).toBe('0 ms');
    expect(W.formatMs(350)).toBe('350 ms');
    expect(W.formatMs(999.6)).toBe('1000 ms');
    expect(W.formatMs(1000)).toBe('1.0 s');
    expect(W.formatMs(12_345)).toBe('12.3 s');
    expect(W.formatMs(59_999)).toBe('59.9 s');
    expect(W.formatMs(60_000)).toBe('1m 00s');
    expect(W.formatMs(307_000)).toBe('5m 07s');
    expect(W.formatMs(7_384_000)).toBe('2h 03m 04s');
    expect(W.formatMs(90_000_000)).toBe('1d 01h 00m');
    expect(W.formatMs(-1500)).toBe('-1.5 s');
    for (const v of [null, undefined, NaN, Infinity, '12', {}]) expect(W.formatMs(v)).toBe('—');
  });

  it('shortCid: keeps short ids, shortens long ones by code point, never escapes', () => {
    const cid = 'bafyreiboe6hdth4qf62rxbxzt6d4rv3y64krgfhxiyw4qhxat6apyjqkny';
    expect(W.shortCid(cid)).toBe('bafyreiboe…yjqkny');
    expect(W.shortCid(cid, 4, 2)).toBe('bafy…ny');
    expect(W.shortCid('bafy')).toBe('bafy');
    expect(W.shortCid(null)).toBe('—');
    expect(W.shortCid(undefined)).toBe('—');
    expect(W.shortCid(42)).toBe('42');
    expect(W.shortCid(HOSTILE, 100, 1)).toBe(HOSTILE);
    const emoji = '😀'.repeat(30);
    expect(W.shortCid(emoji, 2, 2)).toBe('😀😀…😀😀');
  });

  it('formatNumber, formatSigned, formatPercent', () => {
    expect(W.formatNumber(0.433)).toBe('0.433');
    expect(W.formatNumber(1 / 3)).toBe('0.333333');
    expect(W.formatNumber(12)).toBe('12');
    expect(W.formatNumber(null)).toBe('—');
    expect(W.formatSigned(0.25)).toBe('+0.25');
    expect(W.formatSigned(-3)).toBe('-3');
    expect(W.formatSigned(0)).toBe('0');
    expect(W.formatPercent(0.125)).toBe('+12.5%');
    expect(W.formatPercent(-0.5)).toBe('-50%');
    expect(W.formatPercent(null)).toBe('—');
  });

  it('statusClass only makes classes of plain status words; apiBase finds the API before /ui/', () => {
    expect(W.statusClass('rule_violation')).toBe('status-rule-violation');
    expect(W.statusClass('completed')).toBe('status-completed');
    expect(W.statusClass('x" onclick="y')).toBe('status-other');
    expect(W.statusClass(HOSTILE)).toBe('status-other');
    expect(W.statusClass(undefined)).toBe('status-other');
    expect(W.apiBase('/ui/run.html')).toBe('');
    expect(W.apiBase('/assay/ui/index.html')).toBe('/assay');
    expect(W.apiBase('/elsewhere.html')).toBe('');
    expect(W.apiBase(undefined)).toBe('');
  });

  it('tableColumns: the union of keys of an array of objects, in order; null for anything else', () => {
    expect(
      W.tableColumns([
        { a: 1, b: 2 },
        { c: 3, a: 4 },
      ]),
    ).toEqual(['a', 'b', 'c']);
    expect(W.tableColumns([])).toBeNull();
    expect(W.tableColumns([1, 2])).toBeNull();
    expect(W.tableColumns([{ a: 1 }, [1]])).toBeNull();
    expect(W.tableColumns({ a: 1 })).toBeNull();
    expect(W.tableColumns([{ a: 1, b: 2, c: 3 }], 2)).toEqual(['a', 'b']);
    expect(W.tableColumns([{ [HOSTILE]: 1 }])).toEqual([HOSTILE]);
  });
});

describe('trajectorySeries', () => {
  it('a real minimize trajectory: x in seconds, scores, the descending best-so-far staircase, markers, the end point', () => {
    const slots = fold(asRecords([...preamble(), ...sampleVariant({ run: 'a' })]));
    const t = json(trajectoryOf(slots.get('a')!)!);
    const s = W.trajectorySeries(t);
    const [x, score, best, invalid, violating, failed] = s.data;
    expect(s.direction).toBe('minimize');
    expect(x.slice(0, 5)).toEqual(t.rounds.map((r) => r.elapsedMs / 1000));
    expect(score.slice(0, 5)).toEqual([0.912, 0.574, null, null, 0.433]);
    expect(best.slice(0, 5)).toEqual([0.912, 0.574, 0.574, 0.574, 0.433]);
    expect(violating.slice(0, 5)).toEqual([null, null, 0, null, null]);
    expect(invalid.slice(0, 5)).toEqual([null, null, null, null, null]);
    expect(failed.slice(0, 5)).toEqual([null, null, null, null, null]);
    // the run completed after its last round: one more point carries the best on to the end
    expect(x).toHaveLength(6);
    expect(x[5]).toBe((Date.parse(t.completedAt!) - Date.parse(t.startedAt)) / 1000);
    expect(best[5]).toBe(0.433);
    expect(score[5]).toBeNull();
    expect(s.rounds[5]).toBeNull();
    expect(s.rounds.slice(0, 5).map((r) => r!.round)).toEqual([1, 2, 3, 4, 5]);
    for (const series of s.data) expect(series).toHaveLength(6);
    // every staircase step goes down (minimize) or stays
    const steps = best.filter((b): b is number => b !== null);
    expect(steps.every((b, i) => i === 0 || b <= steps[i - 1]!)).toBe(true);
  });

  it('minimize without the server best-so-far: recomputed from eligible scores, lower is better', () => {
    const rounds = [
      { round: 1, elapsedMs: 1000, status: 'completed', score: 5, eligible: true },
      { round: 2, elapsedMs: 2000, status: 'completed', score: 7, eligible: true },
      { round: 3, elapsedMs: 3000, status: 'completed', score: 1, eligible: false },
      { round: 4, elapsedMs: 4000, status: 'completed', score: 3, eligible: true },
      { round: 5, elapsedMs: 5000, status: 'completed', score: 4, eligible: true },
    ];
    expect(W.trajectorySeries({ direction: 'minimize', rounds }).data[2]).toEqual([5, 5, 5, 3, 3]);
    expect(W.trajectorySeries({ direction: 'maximize', rounds }).data[2]).toEqual([5, 7, 7, 7, 7]);
    // an unknown direction is maximize
    expect(W.trajectorySeries({ direction: 'sideways', rounds }).data[2]).toEqual([5, 7, 7, 7, 7]);
  });

  it("the server's bestSoFar wins over the recomputation, null included", () => {
    const rounds = [
      { round: 1, elapsedMs: 0, status: 'completed', score: 5, eligible: true, bestSoFar: null },
      { round: 2, elapsedMs: 10, status: 'completed', score: 6, eligible: true, bestSoFar: 6 },
    ];
    expect(W.trajectorySeries({ direction: 'maximize', rounds }).data[2]).toEqual([null, 6]);
  });

  it('empty trajectory, no rounds, garbage: empty series, no end point', () => {
    for (const t of [
      undefined,
      null,
      42,
      'x',
      {},
      { rounds: [] },
      { rounds: 'nope' },
      { rounds: [], completedAt: '2026-12-01T10:00:00.000Z', startedAt: '2026-12-01T09:00:00.000Z' },
    ]) {
      const s = W.trajectorySeries(t);
      expect(s.data).toEqual([[], [], [], [], [], []]);
      expect(s.rounds).toEqual([]);
    }
  });

  it('all scores null: invalid, violating and failed rounds are markers at 0, no best, nothing on the score series', () => {
    const t = {
      direction: 'maximize',
      startedAt: '2026-12-01T10:00:00.000Z',
      rounds: [
        { round: 1, elapsedMs: 1000, status: 'submission_error', score: null, eligible: false, bestSoFar: null },
        { round: 2, elapsedMs: 2000, status: 'rule_violation', score: 0, eligible: false, bestSoFar: null },
        { round: 3, elapsedMs: 3000, status: 'verifier_timeout', score: null, eligible: false, bestSoFar: null },
        { round: 4, elapsedMs: 4000, status: 'verifier_error', score: null, eligible: false, bestSoFar: null },
        { round: 5, elapsedMs: 5000, status: 'judging', score: null, eligible: false, bestSoFar: null },
      ],
    };
    const [x, score, best, invalid, violating, failed] = W.trajectorySeries(t).data;
    expect(x).toEqual([1, 2, 3, 4, 5]);
    // a rule violation's forced 0 is not plotted as a score
    expect(score).toEqual([null, null, null, null, null]);
    expect(best).toEqual([null, null, null, null, null]);
    expect(invalid).toEqual([0, null, null, null, null]);
    expect(violating).toEqual([null, 0, null, null, null]);
    expect(failed).toEqual([null, null, 0, 0, null]);
  });

  it('a real run without a valid submission: one violating marker', () => {
    const slots = fold(asRecords([...preamble(), ...noValidRun('n')]));
    const s = W.trajectorySeries(json(trajectoryOf(slots.get('n')!)!));
    expect(s.data[1][0]).toBeNull();
    expect(s.data[2][0]).toBeNull();
    expect(s.data[4][0]).toBe(0);
  });

  it('sorts by elapsed time then round; missing elapsedMs falls back to at − startedAt; non-finite scores are none', () => {
    const t = {
      startedAt: '2026-12-01T10:00:00.000Z',
      rounds: [
        { round: 2, elapsedMs: 5000, status: 'completed', score: 2, eligible: true },
        { round: 1, at: '2026-12-01T10:00:02.000Z', status: 'completed', score: 'NaN', eligible: true },
        { round: 3, elapsedMs: 5000, status: 'completed', score: Infinity, eligible: true },
        'junk',
        null,
      ],
    };
    const s = W.trajectorySeries(t);
    expect(s.data[0]).toEqual([2, 5, 5]);
    expect(s.rounds.map((r) => r!.round)).toEqual([1, 2, 3]);
    expect(s.data[1]).toEqual([null, 2, null]);
    expect(s.data[2]).toEqual([null, 2, 2]);
  });

  it('a running run has no end point; hostile strings are passed through untouched', () => {
    const t = { run: HOSTILE, status: 'running', rounds: [{ round: 1, elapsedMs: 10, status: HOSTILE, score: 1, eligible: true, snapshot: HOSTILE }] };
    const s = W.trajectorySeries(t);
    expect(s.data[0]).toEqual([0.01]);
    expect(s.rounds[0]!.snapshot).toBe(HOSTILE);
    expect(s.rounds[0]!.status).toBe(HOSTILE);
    expect([s.data[3][0], s.data[4][0], s.data[5][0]]).toEqual([null, null, null]);
  });
});

describe('sortRows', () => {
  const rows = [
    { run: 'b', best: { score: 0.5 }, agent: 'Zed', wall: 30 },
    { run: 'a', best: null, agent: 'alpha', wall: null },
    { run: 'c', best: { score: 0.25 }, agent: 'beta10', wall: 5 },
    { run: 'd', best: { score: 0.5 }, agent: 'beta9', wall: NaN },
  ];

  it('numeric by a dotted path, ascending and descending, nulls and missing last both ways, stable ties', () => {
    expect(W.sortRows(rows, 'best.score', 'asc').map((r) => r.run)).toEqual(['c', 'b', 'd', 'a']);
    expect(W.sortRows(rows, 'best.score', 'desc').map((r) => r.run)).toEqual(['b', 'd', 'c', 'a']);
    expect(W.sortRows(rows, 'wall', 'asc').map((r) => r.run)).toEqual(['c', 'b', 'a', 'd']);
    expect(W.sortRows(rows, 'wall', 'desc').map((r) => r.run)).toEqual(['b', 'c', 'a', 'd']);
  });

  it('text: case-insensitive natural order; a function key; the input is not changed', () => {
    const before = JSON.stringify(rows);
    expect(W.sortRows(rows, 'agent', 'asc').map((r) => r.agent)).toEqual(['alpha', 'beta9', 'beta10', 'Zed']);
    expect(W.sortRows(rows, (r) => r.agent.length, 'desc').map((r) => r.run)).toEqual(['c', 'a', 'd', 'b']);
    expect(JSON.stringify(rows)).toBe(before);
  });

  it('numbers before text; a throwing key counts as missing; non-arrays give []', () => {
    const mixed = [{ v: 'x' }, { v: 3 }, { v: null }, { v: 1 }];
    expect(W.sortRows(mixed, 'v', 'asc').map((r) => r.v)).toEqual([1, 3, 'x', null]);
    const bad = W.sortRows(
      [{ v: 1 }, { v: 2 }],
      () => {
        throw new Error('no');
      },
      'asc',
    );
    expect(bad).toEqual([{ v: 1 }, { v: 2 }]);
    expect(W.sortRows(null as unknown as unknown[], 'v', 'asc')).toEqual([]);
  });

  it('only own properties are followed', () => {
    expect(W.getPath({ a: { b: 1 } }, 'a.b')).toBe(1);
    expect(W.getPath({}, 'constructor')).toBeUndefined();
    expect(W.getPath({ a: 1 }, 'a.toString')).toBeUndefined();
  });

  it('real leaderboard rows sort by best score, with the run without a submission last', () => {
    const events = [
      ...preamble(),
      ...sampleVariant({ run: 'a', scores: [0.9, 0.8, 0.7] }),
      ...sampleVariant({ run: 'b', scores: [0.3, 0.2, 0.1] }),
      ...noValidRun('n'),
    ];
    const rowsOf = (slots: Map<string, RunSlot>): LeaderboardRow[] => [...slots.values()].map(leaderboardRow).filter((r): r is LeaderboardRow => r !== null);
    const [g] = json(rankLeaderboard(rowsOf(fold(asRecords(events)))));
    expect(W.sortRows(g!.rows, 'best.score', 'desc').map((r) => r.run)).toEqual(['a', 'b', 'n']);
    expect(W.sortRows(g!.rows, 'rank', 'desc').map((r) => r.run)).toEqual(['a', 'b', 'n']);
    expect(W.sortRows(g!.rows, 'rank', 'asc').map((r) => r.run)).toEqual(['b', 'a', 'n']);
  });
});

describe('groupDifferences', () => {
  const g = (o: Record<string, unknown>) => ({
    task: 't',
    taskDigest: 'sha256:' + 'a'.repeat(64),
    fingerprint: 'sha256:' + 'f'.repeat(64),
    metric: 'loss',
    direction: 'minimize',
    rows: [],
    ...o,
  });

  it('nothing for no or one group', () => {
    expect(W.groupDifferences([])).toEqual([]);
    expect(W.groupDifferences([g({})])).toEqual([]);
    expect(W.groupDifferences(undefined)).toEqual([]);
    expect(W.groupDifferences('x')).toEqual([]);
  });

  it('one line per later group naming what differs from the first', () => {
    const out = W.groupDifferences([
      g({}),
      g({ fingerprint: 'sha256:' + 'e'.repeat(64) }),
      g({ taskDigest: 'sha256:' + 'b'.repeat(64), fingerprint: 'sha256:' + 'c'.repeat(64) }),
      g({}),
    ]);
    expect(out).toHaveLength(3);
    expect(out[0]).toMatch(/^group 2 differs from group 1 in its protocol fingerprint sha256:eeeeeeeee/);
    expect(out[0]).not.toMatch(/task digest/);
    expect(out[1]).toMatch(/^group 3 differs from group 1 in its task digest .*; protocol fingerprint /);
    expect(out[2]).toBe('group 4 has the same task, task digest, protocol fingerprint, metric and direction as group 1');
  });

  it('metric and direction, including nulls; a row that disagrees with its group', () => {
    const out = W.groupDifferences([g({}), g({ metric: null, direction: 'maximize' })]);
    expect(out[0]).toBe('group 2 differs from group 1 in its metric none (group 1: loss); direction maximize (group 1: minimize)');
    const rowOff = W.groupDifferences([g({ rows: [{ run: 'r1', metric: 'loss', direction: 'maximize' }] })]);
    expect(rowOff).toEqual(['group 1: run r1 records direction maximize, the group ranks by minimize']);
  });

  it('real groups: two fingerprints of one task', () => {
    const rowsOf = (slots: Map<string, RunSlot>): LeaderboardRow[] => [...slots.values()].map(leaderboardRow).filter((r): r is LeaderboardRow => r !== null);
    const events = [...preamble(), ...sampleVariant({ run: 'a' }), ...sampleVariant({ run: 'b', fingerprint: 'sha256:' + 'b'.repeat(64) })];
    const groups = json(rankLeaderboard(rowsOf(fold(asRecords(events)))));
    const out = W.groupDifferences(groups);
    expect(out).toHaveLength(1);
    expect(out[0]).toMatch(/^group 2 differs from group 1 in its protocol fingerprint /);
  });

  it('hostile values are quoted as they are', () => {
    const out = W.groupDifferences([g({}), g({ metric: HOSTILE })]);
    expect(out[0]).toContain(W.shortCid(HOSTILE, 16, 8));
  });
});

describe('parseSse', () => {
  it('named events, multi-line data, the default type, id and retry', () => {
    const { events, rest } = W.parseSse('event: trajectory\ndata: {"a":1}\nid: 7\nretry: 5000\n\ndata: line 1\ndata: line 2\n\n');
    expect(events).toEqual([
      { event: 'trajectory', data: '{"a":1}', id: '7', retry: 5000 },
      { event: 'message', data: 'line 1\nline 2' },
    ]);
    expect(rest).toBe('');
  });

  it('comments and keep-alives are skipped; an event without data is not dispatched', () => {
    const { events, rest } = W.parseSse(': keepalive\n\n:\n\nevent: ping\n\nevent: trajectory\ndata: x\n\n');
    expect(events).toEqual([{ event: 'trajectory', data: 'x' }]);
    expect(rest).toBe('');
  });

  it('CRLF and CR line ends; a field without a colon; only one leading space is stripped; unknown fields ignored', () => {
    const { events } = W.parseSse('event:trajectory\r\ndata:  two spaces\r\ndata\rfoo: bar\r\r:');
    expect(events).toEqual([{ event: 'trajectory', data: ' two spaces\n' }]);
  });

  it('an event split across chunks at every byte gives the same events, CRLF included', () => {
    const stream = ': hello\r\n\r\nevent: trajectory\r\ndata: {"run":"r1","rounds":[]}\r\n\r\nevent: trajectory\ndata: {"run":"r1"}\n\n: keepalive\n\n';
    const whole = W.parseSse(stream).events;
    expect(whole).toHaveLength(2);
    for (let cut = 0; cut <= stream.length; cut++) {
      for (const step of [1, 3, 7]) {
        let buf = '';
        const got: SseEvent[] = [];
        const chunks = [
          stream.slice(0, cut),
          ...Array.from({ length: Math.ceil((stream.length - cut) / step) }, (_, i) => stream.slice(cut + i * step, cut + (i + 1) * step)),
        ];
        for (const c of chunks) {
          buf += c;
          const r = W.parseSse(buf);
          got.push(...r.events);
          buf = r.rest;
        }
        expect(got).toEqual(whole);
        expect(buf).toBe('');
      }
    }
  });

  it('a CR at the end of a chunk waits for the next one (it may be a CRLF)', () => {
    const a = W.parseSse('data: x\r\n\r');
    expect(a.events).toEqual([]);
    const b = W.parseSse(a.rest + '\ndata: y\r\n\r\n');
    expect(b.events).toEqual([
      { event: 'message', data: 'x' },
      { event: 'message', data: 'y' },
    ]);
  });

  it('an unfinished event stays in rest; garbage is no event', () => {
    expect(W.parseSse('event: trajectory\ndata: {"par')).toEqual({ events: [], rest: 'event: trajectory\ndata: {"par' });
    expect(W.parseSse(undefined as unknown as string)).toEqual({ events: [], rest: '' });
    const { events } = W.parseSse(`event: ${HOSTILE}\ndata: ${HOSTILE}\n\n`);
    expect(events).toEqual([{ event: HOSTILE, data: HOSTILE }]);
  });
});

describe('backoffMs', () => {
  it('doubles from 1 s up to 30 s; jitter stays within ±25% and the cap', () => {
    expect([0, 1, 2, 3, 4, 5, 6, 100].map((a) => W.backoffMs(a))).toEqual([1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
    expect(W.backoffMs(-1)).toBe(1000);
    expect(W.backoffMs(2, { base: 100, max: 250 })).toBe(250);
    expect(W.backoffMs(0, { rand: () => 0 })).toBe(750);
    expect(W.backoffMs(0, { rand: () => 1 })).toBe(1250);
    expect(W.backoffMs(10, { rand: () => 1 })).toBe(30000);
  });
});

describe('bytes', () => {
  it('base64 round trip; strict, canonical decoding', () => {
    for (let n = 0; n < 70; n++) {
      const b = u8(randomBytes(n));
      const s = W.base64Encode(b);
      expect(s).toBe(Buffer.from(b).toString('base64'));
      expect(Buffer.from(W.base64Decode(s)!).equals(Buffer.from(b))).toBe(true);
    }
    for (const bad of ['A', 'AB', 'AB=', 'AB==x', 'QR==', 'Zm9v YmFy', 'Zm9v\n', '-_-_', null, 42]) expect(W.base64Decode(bad)).toBeNull();
    expect(W.base64Decode('')).toEqual(new Uint8Array(0));
  });

  it('sha256Js equals node:crypto on lengths around the block boundaries', async () => {
    for (const n of [0, 1, 3, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 1000, 70000]) {
      const b = u8(randomBytes(n));
      expect(W.toHex(await W.sha256Js(b))).toBe(createHash('sha256').update(b).digest('hex'));
    }
    expect(W.toHex(await W.sha256Js(new TextEncoder().encode('abc')))).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });

  it('canonicalJson equals the wire bytes the ledger writes', () => {
    const e = envelopeAt(3, { z: [1, 2.5, 'é', { b: true, a: null }], a: 'x\u2028\u0007"\\', '\u00e9': 1e21, e: -0, E: 1e-7 });
    expect(W.canonicalJson(JSON.parse(wireBytes(e).toString('utf8')))).toBe(wireBytes(e).toString('utf8'));
    expect(() => W.canonicalJson({ a: undefined })).toThrow();
    expect(() => W.canonicalJson(NaN)).toThrow();
    expect(() => W.canonicalJson('\ud800')).toThrow();
  });
});

describe('signed notes and tlog-proof', () => {
  it('a checkpoint signed by the log and cosigned by a witness: body, signers, roles, kinds, the cosignature time', () => {
    const { note } = ledgerOf(3);
    const witness = ed25519Cosigner('witness.example/w1', randomBytes(32));
    const body = note.slice(0, note.lastIndexOf('\n\n') + 1);
    const cosigned = note + cosign(body, witness, 1_790_000_000);
    const cp = W.parseCheckpointNote(cosigned);
    expect(cp.origin).toBe('assay.example/ledger');
    expect(cp.treeSize).toBe(3);
    expect(cp.body).toBe(body);
    expect(cp.signatures.map((s) => [s.name, s.role, s.kind, s.timestamp])).toEqual([
      ['assay-controller', 'log', 'ed25519', null],
      ['witness.example/w1', 'cosigner', 'cosignature', 1_790_000_000],
    ]);
    const pub = nodeEd25519.publicKeyFromSeed(logSeed);
    expect(cp.signatures[0]!.keyIdHex).toBe(noteKeyId('assay-controller', SIG_TYPE_ED25519, pub).toString('hex'));
  });

  it('the checkpoint example of docs/formats.md', () => {
    const doc =
      'assay.example/ledger\n3\ncuDRdZjUDBQ/FOv7BeLFxN3Wvr8WXzVpRDrEaViH0wI=\n\n— assay-controller-9d61b19d pPojn7SpE1PGzGyQqO3zTxLvtT5cNZah6oVmsuRu8mU3Q1JHS/hM3cJhqECkmcIGDsGsvKxEZ6rFgyktyD/Jie+u5wg=\n';
    const cp = W.parseCheckpointNote(doc);
    expect(cp.treeSize).toBe(3);
    expect(cp.signatures).toHaveLength(1);
    expect(cp.signatures[0]!).toMatchObject({ name: 'assay-controller-9d61b19d', keyIdHex: 'a4fa239f', kind: 'ed25519', role: 'log' });
    // its root is the MTH of the leaves "event 0", "event 1", "event 2"
    const leaves = ['event 0', 'event 1', 'event 2'].map((s) => leafOf(Buffer.from(s)));
    expect(W.base64Encode(mth(leaves))).toBe(cp.rootHashBase64);
  });

  it('malformed notes are refused with a reason', () => {
    const { note } = ledgerOf(2);
    const cases: [unknown, RegExp][] = [
      [42, /not text/],
      [note.slice(0, -1), /newline/],
      ['a\nb\n— x AAAA\n', /blank line/],
      [note.replace('\n\n', '\n\n\n'), /empty extension line/],
      [note.replace('— ', '- '), /signature line 1/],
      [note.replace('\n— ', '\n\u0007— '), /control character/],
      [note.replace(/ [A-Za-z0-9+/=]+\n$/, ' AAAA\n'), /key id and a signature/],
      ['origin\n3\nnot-base64\n\n' + note.slice(note.lastIndexOf('\n\n') + 2), /root/],
      ['origin\n03\n' + note.split('\n')[2] + '\n\n' + note.slice(note.lastIndexOf('\n\n') + 2), /tree size/],
    ];
    for (const [text, re] of cases) expect(() => W.parseCheckpointNote(text)).toThrow(re);
  });

  it('tlog-proof: the ledger formatter’s text parses; the index, the hashes and the checkpoint come back', () => {
    const l = ledgerOf(5);
    const p = W.parseTlogProof(l.proofText(2));
    expect(p.index).toBe(2);
    expect(p.proof.map((h) => W.toHex(h))).toEqual(path(2, l.leaves.map(u8)).map((h) => W.toHex(h)));
    expect(p.checkpointText).toBe(l.note);
    expect(p.checkpoint.treeSize).toBe(5);
    expect(W.toHex(p.checkpoint.rootHash)).toBe(W.toHex(u8(l.root)));
    // one leaf: no hash lines
    expect(W.parseTlogProof(ledgerOf(1).proofText(0)).proof).toEqual([]);
    // an extra line after the header is skipped
    expect(W.parseTlogProof(l.proofText(2).replace('\n', '\nextra something\n')).index).toBe(2);
  });

  it('tlog-proof: malformed text is refused with a reason', () => {
    const t = ledgerOf(5).proofText(2);
    const cases: [unknown, RegExp][] = [
      [null, /not text/],
      ['c2sp.org/tlog-proof@v1\nindex 2\n', /blank line/],
      [t.replace('c2sp.org/tlog-proof@v1', 'c2sp.org/tlog-proof@v2'), /first line/],
      [t.replace('index 2', 'index 02'), /index <decimal>/],
      [t.replace('index 2', 'index -1'), /index <decimal>/],
      [t.replace(/\n([A-Za-z0-9+/]{43}=)\n/, '\n$1x\n'), /not a base64 SHA-256 hash/],
      [t.slice(0, t.indexOf('\n\n') + 2) + 'garbage', /checkpoint/],
      ['x'.repeat(70 * 1024), /64 KiB/],
    ];
    for (const [text, re] of cases) expect(() => W.parseTlogProof(text)).toThrow(re);
  });
});

describe('verifyInclusion (RFC 9162 2.1.3.2)', () => {
  it('every index of trees of size 1, 2, 3, 5, 8 (and 13) verifies; the ledger’s own proofs agree', async () => {
    for (const n of [1, 2, 3, 5, 8, 13]) {
      const leaves = Array.from({ length: n }, (_, i) => leafOf(Buffer.from(`leaf ${i}`)));
      const root = mth(leaves);
      const node = (level: number, index: number): Uint8Array =>
        level === 0 ? leaves[index]! : u8(libNodeHash(node(level - 1, 2 * index), node(level - 1, 2 * index + 1)));
      expect(W.toHex(u8(rootAt(n, node)))).toBe(W.toHex(root));
      for (let i = 0; i < n; i++) {
        const p = path(i, leaves);
        expect(inclusionProof(i, n, node).map((h) => W.toHex(u8(h)))).toEqual(p.map((h) => W.toHex(h)));
        const v = await W.verifyInclusion(leaves[i], i, n, p, root, sha256);
        expect(v).toEqual({ ok: true, reason: expect.stringContaining(`index ${i} in a tree of ${n}`) });
        // the plain-JavaScript SHA-256 gives the same answer
        expect((await W.verifyInclusion(leaves[i], i, n, p, root, W.sha256Js)).ok).toBe(true);
      }
    }
  });

  it('a tampered leaf, path hash, root, index or size is refused, with the reason', async () => {
    const n = 8;
    const leaves = Array.from({ length: n }, (_, i) => leafOf(Buffer.from(`leaf ${i}`)));
    const root = mth(leaves);
    for (let i = 0; i < n; i++) {
      const p = path(i, leaves);
      const flip = (h: Uint8Array) => {
        const c = new Uint8Array(h);
        c[0] = c[0]! ^ 1;
        return c;
      };
      expect((await W.verifyInclusion(flip(leaves[i]!), i, n, p, root, sha256)).reason).toMatch(/differs from the checkpoint's root/);
      for (let k = 0; k < p.length; k++) {
        const q = p.map((h, j) => (j === k ? flip(h) : h));
        expect((await W.verifyInclusion(leaves[i], i, n, q, root, sha256)).ok).toBe(false);
      }
      expect((await W.verifyInclusion(leaves[i], i, n, p, flip(root), sha256)).ok).toBe(false);
      expect((await W.verifyInclusion(leaves[i], (i + 1) % n, n, p, root, sha256)).ok).toBe(false);
      expect((await W.verifyInclusion(leaves[i], i, n, p.slice(0, -1), root, sha256)).reason).toMatch(/fewer hashes|differs/);
      expect((await W.verifyInclusion(leaves[i], i, n, [...p, p[0]!], root, sha256)).reason).toMatch(/more hashes/);
    }
    // a proof for the same leaf in a smaller tree does not verify against the larger tree's root
    const small = mth(leaves.slice(0, 5));
    expect((await W.verifyInclusion(leaves[2], 2, 5, path(2, leaves.slice(0, 5)), small, sha256)).ok).toBe(true);
    expect((await W.verifyInclusion(leaves[2], 2, 8, path(2, leaves.slice(0, 5)), root, sha256)).ok).toBe(false);
  });

  it('malformed arguments are refused, never thrown', async () => {
    const leaf = leafOf(Buffer.from('x'));
    const cases: [unknown, unknown, unknown, unknown, unknown, RegExp][] = [
      [leaf, 1, 1, [], leaf, /not below the tree size/],
      [leaf, 0, 0, [], leaf, /not below the tree size/],
      [leaf, -1, 1, [], leaf, /whole numbers/],
      [leaf, 0.5, 1, [], leaf, /whole numbers/],
      [leaf, 0, 2 ** 53, [], leaf, /whole numbers/],
      [leaf.slice(1), 0, 1, [], leaf, /leaf hash/],
      ['leaf', 0, 1, [], leaf, /leaf hash/],
      [leaf, 0, 1, [], null, /root/],
      [leaf, 0, 1, 'path', leaf, /proof is not/],
      [leaf, 0, 2, [leaf.slice(2)], leaf, /proof is not/],
      [leaf, 0, 2, Array(65).fill(leaf), leaf, /proof is not/],
    ];
    for (const [l, i, s, p, r, re] of cases) expect((await W.verifyInclusion(l, i, s, p, r, sha256)).reason).toMatch(re);
    // a one-leaf tree: the root is the leaf
    expect((await W.verifyInclusion(leaf, 0, 1, [], leaf, sha256)).ok).toBe(true);
  });

  it('leafHash and nodeHash are RFC 9162’s (and the ledger’s)', async () => {
    const d = u8(randomBytes(40));
    expect(W.toHex(await W.leafHash(d, sha256))).toBe(W.toHex(u8(libLeafHash(d))));
    const a = u8(randomBytes(32));
    const b = u8(randomBytes(32));
    expect(W.toHex(await W.nodeHash(a, b, sha256))).toBe(W.toHex(u8(libNodeHash(a, b))));
    expect(W.toHex(await W.leafHash(new Uint8Array(0), sha256))).toBe('6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d');
  });
});

describe('checkInclusion: an event of a ledger built with the ledger’s own code', () => {
  it('every position of ledgers of size 1, 2, 3, 5, 8 is included, against the checkpoint shown', async () => {
    for (const n of [1, 2, 3, 5, 8]) {
      const l = ledgerOf(n);
      for (let p = 0; p < n; p++) {
        const r = await W.checkInclusion({ position: p, event: l.apiEvent(p), proofText: l.proofText(p), sha256, shown: l.shown });
        expect(r.steps.filter((s) => s.ok === false)).toEqual([]);
        expect(r.included).toBe(true);
        expect(r.leafHash).toBe(W.toHex(u8(l.leaves[p]!)));
        expect(r.reason).toMatch(/give the checkpoint's root/);
      }
    }
  });

  it('without the envelope bytes, the canonical form of a full envelope is used', async () => {
    const l = ledgerOf(3);
    const ev = { ...l.envelopes[1]!, hash: l.apiEvent(1).hash };
    const r = await W.checkInclusion({ position: 1, event: ev, proofText: l.proofText(1), sha256 });
    expect(r.included).toBe(true);
    expect(r.steps.find((s) => s.name === 'bytes')!.detail).toMatch(/canonical form/);
    const partial = { position: 1, stream: 'note-demo', type: 'NoteAdded' };
    const r2 = await W.checkInclusion({ position: 1, event: partial, proofText: l.proofText(1), sha256 });
    expect(r2.included).toBe(false);
    expect(r2.reason).toMatch(/neither the envelope bytes nor every envelope member \(missing: data, id, prev, revision, sig, signer, time\)/);
  });

  it('refused: tampered envelope bytes, another position, a wrong hash, the wrong proof, a tampered path', async () => {
    const l = ledgerOf(5);
    const ok = { position: 3, event: l.apiEvent(3), proofText: l.proofText(3), sha256 };
    const tamperedWire = Buffer.from(l.wires[3]!.toString('utf8').replace('"n":3', '"n":4'));
    const cases: [Parameters<WebLogic['checkInclusion']>[0], RegExp][] = [
      [
        {
          ...ok,
          event: { ...ok.event, data: { n: 4 }, envelope: tamperedWire.toString('base64'), hash: createHash('sha256').update(tamperedWire).digest('hex') },
        },
        /differs from the checkpoint's root/,
      ],
      [{ ...ok, event: { ...ok.event, envelope: tamperedWire.toString('base64') } }, /not the event's hash/],
      [{ ...ok, event: { ...ok.event, hash: '0'.repeat(64) } }, /not the event's hash/],
      [{ ...ok, event: { ...ok.event, envelope: 'not base64!' } }, /not canonical base64/],
      [{ ...ok, event: l.apiEvent(2) }, /envelope's position is 2, not 3/],
      [{ ...ok, event: { ...l.apiEvent(2), position: 3 } }, /envelope's position is 2, not 3/],
      [{ ...ok, proofText: l.proofText(2) }, /the proof is for index 2, not 3/],
      [{ ...ok, position: 2 }, /the proof is for index 3, not 2/],
      [
        { ...ok, proofText: l.proofText(3).replace(/(\nindex 3\n)([A-Za-z0-9+/])/, (_m, i: string, c: string) => i + (c === 'A' ? 'B' : 'A')) },
        /differs from the checkpoint's root/,
      ],
      [{ ...ok, proofText: 'nonsense' }, /blank line/],
      [{ ...ok, position: -1 }, /not a whole number/],
      [{ ...ok, event: null }, /no event/],
      [{ ...ok, event: { ...ok.event, stream: 'note-other' } }, /fields differ from its envelope bytes: stream/],
      [{ ...ok, event: { ...ok.event, data: { n: 99 } } }, /fields differ from its envelope bytes: data/],
      [
        { ...ok, event: { ...ok.event, sig: Buffer.alloc(64, 9).toString('base64'), signer: 'other+00000000' } },
        /fields differ from its envelope bytes: sig, signer/,
      ],
      [{ ...ok, event: { ...ok.event, envelope: Buffer.from('[1,2]').toString('base64'), hash: undefined } }, /not a JSON object/],
      [{ ...ok, event: { ...ok.event, envelope: Buffer.from([0xff, 0xfe]).toString('base64'), hash: undefined } }, /not a JSON object/],
    ];
    for (const [args, re] of cases) {
      const r = await W.checkInclusion(args);
      expect({ included: r.included, reason: r.reason }).toEqual({ included: false, reason: expect.stringMatching(re) });
    }
    // only the members the API returned are compared: the bytes, the hash and a few members are enough
    const minimal = await W.checkInclusion({ ...ok, event: { position: 3, stream: 'note-demo', hash: ok.event.hash, envelope: ok.event.envelope } });
    expect(minimal.included).toBe(true);
  });

  it('a position beyond the checkpoint is refused; another checkpoint than the one shown is said, not refused', async () => {
    const l5 = ledgerOf(5);
    const l3 = ledgerOf(3);
    const r = await W.checkInclusion({ position: 4, event: l5.apiEvent(4), proofText: l3.proofText(2).replace('index 2', 'index 4'), sha256 });
    expect(r.included).toBe(false);
    expect(r.reason).toMatch(/index 4 is not below the tree size 3/);
    const other = await W.checkInclusion({ position: 1, event: l5.apiEvent(1), proofText: l5.proofText(1), sha256, shown: { treeSize: 4, rootHash: 'x' } });
    expect(other.included).toBe(true);
    expect(other.steps.find((s) => s.name === 'checkpoint')).toMatchObject({ ok: false, required: false, detail: expect.stringMatching(/newer checkpoint/) });
  });

  it('non-canonical envelope bytes still prove inclusion of those bytes, and are flagged', async () => {
    // a ledger whose leaf is a pretty-printed envelope: the Merkle check passes, the canonical check does not
    const env = envelopeAt(0);
    const pretty = Buffer.from(JSON.stringify(env, null, 2));
    const leaf = libLeafHash(pretty);
    const note = signCheckpoint({ origin: 'o', treeSize: 1, rootHash: leaf }, [logSigner]);
    const proofText = formatInclusionProof({ position: 0, proof: [], checkpoint: note });
    const r = await W.checkInclusion({ position: 0, event: { envelope: pretty.toString('base64') }, proofText, sha256 });
    expect(r.included).toBe(true);
    expect(r.steps.find((s) => s.name === 'canonical')).toMatchObject({ ok: false, required: false });
    expect(r.steps.find((s) => s.name === 'hash')).toMatchObject({ ok: null, required: false });
  });

  it('hostile event data is carried, compared and never changed', async () => {
    const l = ledgerOf(2, (i) => ({ label: HOSTILE, i }));
    const r = await W.checkInclusion({ position: 1, event: l.apiEvent(1), proofText: l.proofText(1), sha256 });
    expect(r.included).toBe(true);
    expect((r as unknown as { envelope: { data: { label: string } } }).envelope.data.label).toBe(HOSTILE);
  });
});

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CATALOGUE, CLAIM_EVENT_TYPES, GENERIC_EVENT_TYPES, eventDataProblem, genericAppendProblem, genericStreamProblem } from './catalogue';
import { renderCatalogueMarkdown } from './catalogue-doc';

describe('event catalogue', () => {
  it('is documented in docs/events.md exactly as the code defines it (npm run docs:events regenerates it)', () => {
    const doc = readFileSync(join(__dirname, '..', '..', '..', '..', 'docs', 'events.md'), 'utf8');
    expect(doc).toBe(renderCatalogueMarkdown());
  });

  it('holds the design catalogue, each type with roles and a schema', () => {
    for (const t of [
      'KeyRegistered',
      'KeyRevoked',
      'TaskRegistered',
      'ImageBuilt',
      'RunStarted',
      'WorkStarted',
      'WorkspaceEdited',
      'SubmissionReceived',
      'SubmissionRejected',
      'SnapshotTaken',
      'JudgeLaunched',
      'JudgeCompleted',
      'RewardRecorded',
      'BudgetConsumed',
      'RuleViolation',
      'RunCompleted',
      'RejudgeCompleted',
      'Note',
    ]) {
      const spec = CATALOGUE.get(t);
      expect(spec?.roles.length).toBeGreaterThan(0);
      expect(Object.keys(spec?.schema ?? {}).length).toBeGreaterThan(0);
    }
  });

  it('refuses unknown types, unknown and missing fields, wrong shapes and oversize data, naming the field', () => {
    expect(eventDataProblem('Nope', {})).toMatchObject({ code: 'LEDGER_UNKNOWN_EVENT_TYPE' });
    expect(eventDataProblem('Note', {})).toMatchObject({ code: 'LEDGER_EVENT_INVALID', message: expect.stringContaining('data.text: is required') });
    expect(eventDataProblem('Note', { text: 'x', extra: 1 })).toMatchObject({ message: expect.stringContaining('data.extra: is not a field') });
    // Names that every object inherits are still unknown fields.
    for (const name of ['constructor', 'toString', 'hasOwnProperty', '__proto__'])
      expect(eventDataProblem('Note', JSON.parse(`{"text":"x","${name}":1}`))).toMatchObject({
        message: `Note data.${name}: is not a field of this event type`,
      });
    // Paths name nested fields and map entries.
    expect(
      eventDataProblem('RewardRecorded', { run: 'r', round: 1, judge: 'j', rewards: { loss: 'low' }, primaryMetric: 'loss', primaryScore: 1 }),
    ).toMatchObject({ message: expect.stringContaining('data.rewards.loss: must be') });
    expect(eventDataProblem('Note', { text: 'x'.repeat(80_000) })).toMatchObject({ code: 'LEDGER_EVENT_TOO_LARGE' });
    expect(eventDataProblem('RuleViolation', { rule: 'r', detail: 'd', score: 0.5 })).toMatchObject({
      message: expect.stringContaining('data.score: must be exactly 0'),
    });
    expect(eventDataProblem('RewardRecorded', { judge: 'j', rewards: { loss: true }, primaryMetric: null, primaryScore: null })).toMatchObject({
      message: expect.stringContaining('data.rewards.loss'),
    });
    expect(eventDataProblem('RunCompleted', { run: 'r', status: 'won', bestRound: null, bestScore: null, bestSnapshot: null })).toMatchObject({
      message: expect.stringContaining('data.status: must be one of'),
    });
    expect(eventDataProblem('KeyRegistered', { keyId: 'k+00000000', publicKey: 'nope', role: 'controller' })).toMatchObject({
      message: expect.stringContaining('data.publicKey'),
    });
    expect(eventDataProblem('Note', { text: 'fine' })).toBeNull();
  });
});

describe('generic appends', () => {
  it('may write only what operators and auditors write; every claim type and key event is reserved to its writer', () => {
    expect(GENERIC_EVENT_TYPES).toEqual(['TaskRegistered', 'RejudgeCompleted', 'Note']);
    for (const t of [...CLAIM_EVENT_TYPES, 'KeyRegistered', 'KeyRevoked', 'ImageBuilt']) {
      expect(CATALOGUE.get(t)?.onlyWrittenBy).toEqual(expect.any(String));
      expect(genericAppendProblem(t)).toMatchObject({ code: 'LEDGER_TYPE_RESERVED', message: expect.stringContaining(`${t} is written only by `) });
    }
    expect(genericAppendProblem('RunCompleted')?.message).toBe(
      'RunCompleted is written only by the run controller (`assay run`), never by a generic append; generic appends may write TaskRegistered, RejudgeCompleted, Note',
    );
    for (const t of GENERIC_EVENT_TYPES) expect(genericAppendProblem(t)).toBeNull();
    expect(genericAppendProblem('NoSuchType')).toBeNull(); // left to eventDataProblem: LEDGER_UNKNOWN_EVENT_TYPE
  });
});

describe('generic appends: streams', () => {
  it('never write into run-, judge-, key- or transcript- streams, whose revisions belong to Assay itself', () => {
    for (const stream of ['run-r1', 'judge-0b7c', 'key-assay-controller', 'transcript-r1'])
      expect(genericStreamProblem(stream)).toMatchObject({ code: 'LEDGER_STREAM_RESERVED', message: expect.stringContaining(`stream "${stream}"`) });
    for (const stream of ['note-ops', 'task-t1', 'rejudge-r1', 'runs-x', 'keys-x', 'transcripts-x']) expect(genericStreamProblem(stream)).toBeNull();
  });
});

/**
 * The `assay` command end to end, in child processes: what an operator and an auditor type, what they see, and
 * the exit codes. Real SQLite files in a temporary ASSAY_HOME.
 */
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { leafHash, parseInclusionProof, verifyInclusion, parseNote, parseCheckpointBody } from '@assay/ledger';
import { assay } from '../support/cli';
import { makeTmpDir } from '../support/ledger-fixtures';
import { appendSample } from '../support/ledger-home-fixtures';

describe('assay ledger (CLI)', () => {
  let tmp: { dir: string; cleanup(): void };
  let home: string;
  beforeAll(async () => {
    tmp = makeTmpDir('assay-cli-');
    home = join(tmp.dir, 'home');
    const init = await assay(['ledger', 'init', '--origin', 'assay.test/cli'], home);
    expect(init.stderr).toBe('');
    expect(init.code).toBe(0);
    expect(init.stdout).toMatch(/ledger created in .* \(origin assay.test\/cli\)/);
    expect(init.stdout).toMatch(/controller +assay-controller-[0-9a-f]{8}\+[0-9a-f]{8} \(new key\)/);
    // The sample research run, signed as its writers sign it (the generic append refuses their types) ...
    expect(await appendSample(home, { checkpoint: false })).toBe(47);
    // ... and what operators write with the generic append.
    const notes = join(tmp.dir, 'notes.jsonl');
    writeFileSync(notes, ['first', 'second'].map((text) => JSON.stringify({ stream: 'note-ops', type: 'Note', data: { text } })).join('\n'));
    const append = await assay(['ledger', 'append', '--file', notes], home);
    expect([append.code, append.stderr]).toEqual([0, '']);
    expect(append.stdout.trim().split('\n')).toEqual(['appended 2 events (2 new, 0 already recorded) to 1 stream, positions 47..48']);
  }, 120_000);
  afterAll(() => tmp.cleanup());

  it('init creates owner-only private keys and refuses to run twice', async () => {
    for (const role of ['controller', 'runtime', 'judge']) {
      const files = require('node:fs').readdirSync(join(home, 'keys')) as string[];
      const key = files.find((f) => f.startsWith(`assay-${role}-`) && f.endsWith('.key')) as string;
      expect(statSync(join(home, 'keys', key)).mode & 0o777).toBe(0o600);
    }
    const again = await assay(['ledger', 'init'], home);
    expect(again.code).toBe(4);
    expect(again.stderr).toMatch(/^assay: error LEDGER_ALREADY_INITIALIZED: a ledger already exists in /);
  });

  it('verifies, checkpoints and proves inclusion that an auditor can check offline', async () => {
    const cp = await assay(['ledger', 'checkpoint'], home);
    expect(cp.code).toBe(0);
    const body = parseCheckpointBody(parseNote(cp.stdout).body);
    expect(body).toMatchObject({ origin: 'assay.test/cli', treeSize: 49 });

    const v = await assay(['ledger', 'verify'], home);
    expect(v.code).toBe(0);
    expect(v.stdout).toMatch(/ledger verified: 49 events in 13 streams, 3 keys, 2 checkpoints/);
    expect(v.stdout).toMatch(/^ {2}ok {3}claims +\d+ \(assay\.run-claims\/1\)$/m);
    expect(v.stdout).toContain('claims follow from the events under assay.run-claims/1');

    const proof = await assay(['ledger', 'prove', '17'], home);
    expect(proof.code).toBe(0);
    const p = parseInclusionProof(proof.stdout);
    const events = await assay(['ledger', 'prove', '17', '--json'], home);
    const j = JSON.parse(events.stdout) as { leafHash: string };
    const db = new Database(join(home, 'ledger', 'ledger.db'), { readonly: true });
    const bytes = (db.prepare('SELECT bytes FROM events WHERE position = 17').get() as { bytes: Buffer }).bytes;
    db.close();
    expect(leafHash(bytes).toString('base64')).toBe(j.leafHash);
    const cpBody = parseCheckpointBody(parseNote(p.checkpoint).body);
    expect(verifyInclusion(17, cpBody.treeSize, leafHash(bytes), p.proof, cpBody.rootHash)).toBe(true);
    expect(verifyInclusion(18, cpBody.treeSize, leafHash(bytes), p.proof, cpBody.rootHash)).toBe(false);
  }, 60_000);

  it('prints stored events, by position range and by stream', async () => {
    const r = await assay(['ledger', 'events', '--from', '21', '--limit', '3'], home);
    expect(r.code).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(/^21 .* JudgeLaunched /);
    const j = await assay(['ledger', 'events', '--stream', 'run-r-20261202-0001', '--limit', '2', '--json'], home);
    const envs = j.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { type: string; revision: number; stream: string });
    expect(envs.map((e) => [e.stream, e.revision, e.type])).toEqual([
      ['run-r-20261202-0001', 0, 'RunStarted'],
      ['run-r-20261202-0001', 1, 'WorkStarted'],
    ]);
  }, 30_000);

  it('lets an auditor verify a copy of the database file read-only, with only the root public key', async () => {
    const fs = require('node:fs') as typeof import('node:fs');
    const audit = join(tmp.dir, 'audit');
    fs.mkdirSync(audit);
    // A consistent copy: SQLite's online backup, as an operator would publish it.
    const src = new Database(join(home, 'ledger', 'ledger.db'), { readonly: true });
    await src.backup(join(audit, 'ledger.db'));
    src.close();
    const rootKey = (JSON.parse(fs.readFileSync(join(home, 'ledger', 'ledger.json'), 'utf8')) as { rootKey: string }).rootKey;
    fs.writeFileSync(join(audit, 'root.pub'), `${rootKey}\n`);
    const before = fs.readFileSync(join(audit, 'ledger.db'));
    const nobodyHome = join(tmp.dir, 'no-such-home');
    const ok = await assay(
      ['ledger', 'verify', '--db', join(audit, 'ledger.db'), '--trusted-root', join(audit, 'root.pub'), '--origin', 'assay.test/cli'],
      nobodyHome,
    );
    expect([ok.code, ok.stderr]).toEqual([0, '']);
    expect(ok.stdout).toMatch(/ledger verified: \d+ events/);
    expect(fs.readFileSync(join(audit, 'ledger.db')).equals(before)).toBe(true);
    expect(fs.existsSync(nobodyHome)).toBe(false);
    // Another operator's root key is not this ledger's.
    const other = await assay(['keys', 'generate', '--role', 'controller', '--out', join(tmp.dir, 'other-keys'), '--json'], nobodyHome);
    const otherKey = (JSON.parse(other.stdout) as { publicKey: string }).publicKey;
    const wrong = await assay(['ledger', 'verify', '--db', join(audit, 'ledger.db'), '--trusted-root', otherKey], nobodyHome);
    expect(wrong.code).toBe(5);
    expect(wrong.stdout).toMatch(/FAILED in step "roles" at position 0: VERIFY_UNTRUSTED_ROOT/);
  }, 60_000);

  it('reports a tampered copy, naming the step and the first bad event, with exit code 5', async () => {
    const copy = join(tmp.dir, 'tampered');
    require('node:fs').cpSync(home, copy, { recursive: true });
    const db = new Database(join(copy, 'ledger', 'ledger.db'));
    const row = db.prepare('SELECT bytes FROM events WHERE position = 12').get() as { bytes: Buffer };
    const text = row.bytes.toString('utf8').replace('"round":1', '"round":9');
    // A careful attacker also recomputes the stored hash; the signature still gives it away.
    db.prepare('UPDATE events SET bytes = ?, hash = ? WHERE position = 12').run(Buffer.from(text), createHash('sha256').update(text).digest());
    db.close();
    const v = await assay(['ledger', 'verify'], copy);
    expect(v.code).toBe(5);
    expect(v.stdout).toMatch(/FAIL signatures/);
    expect(v.stdout).toMatch(/ledger verification FAILED in step "signatures" at position 12: VERIFY_BAD_SIGNATURE/);
    const j = await assay(['ledger', 'verify', '--json'], copy);
    expect(JSON.parse(j.stdout).failure).toMatchObject({ step: 'signatures', position: 12 });
  }, 60_000);

  it('gives clear errors, without stack traces, for bad input, and changes nothing', async () => {
    const before = await assay(['ledger', 'verify', '--json'], home);
    const size = JSON.parse(before.stdout).events as number;
    const cases: Array<[string[], RegExp, number]> = [
      [['ledger', 'append', '--stream', 'run-x', '--type', 'Note', '--data', '{"text":'], /CLI_USAGE: --data is not valid JSON/, 2],
      [['ledger', 'append', '--stream', 'run-x', '--type', 'Nope', '--data', '{}'], /LEDGER_UNKNOWN_EVENT_TYPE: --data: unknown event type "Nope"/, 2],
      [
        ['ledger', 'append', '--stream', 'run-x', '--type', 'Note', '--data', '{"text":"x","extra":1}'],
        /LEDGER_EVENT_INVALID: --data: Note data.extra: is not a field of this event type/,
        2,
      ],
      [
        ['ledger', 'append', '--stream', 'run-x', '--type', 'Note', '--data', JSON.stringify({ text: 'x'.repeat(70 * 1024) })],
        /LEDGER_EVENT_(TOO_LARGE|INVALID)/,
        2,
      ],
      [['ledger', 'append', '--stream', 'Run_X', '--type', 'Note', '--data', '{"text":"x"}'], /LEDGER_BAD_STREAM/, 2],
      [
        [
          'ledger',
          'append',
          '--stream',
          'run-x',
          '--type',
          'RejudgeCompleted',
          '--data',
          '{"snapshot":"bafy","status":"won","primaryScore":null,"matches":true}',
        ],
        /data.status: must be one of/,
        2,
      ],
      [
        [
          'ledger',
          'append',
          '--stream',
          'run-x',
          '--type',
          'RunCompleted',
          '--data',
          '{"run":"x","status":"completed","bestRound":1,"bestScore":1e-7,"bestSnapshot":"bafy"}',
        ],
        /LEDGER_TYPE_RESERVED: --data: RunCompleted is written only by the run controller/,
        6,
      ],
      [['ledger', 'prove', '100000'], /LEDGER_POSITION_OUT_OF_RANGE/, 3],
      [['ledger', 'prove', '-1'], /error/, 2],
    ];
    for (const [args, message, code] of cases) {
      const r = await assay(args, home);
      expect({ args, stderr: r.stderr, code: r.code }).toEqual({ args, stderr: expect.stringMatching(message), code });
      expect(r.stderr).not.toMatch(/\n\s+at /);
    }
    const bad = join(tmp.dir, 'bad.jsonl');
    writeFileSync(bad, `${JSON.stringify({ stream: 'note-a', type: 'Note', data: { text: 'fine' } })}\n{"stream":"note-b","type":"Note","data":{"text":1}}\n`);
    const r = await assay(['ledger', 'append', '--file', bad], home);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/bad\.jsonl:2: Note data\.text/);
    const after = await assay(['ledger', 'verify', '--json'], home);
    expect(JSON.parse(after.stdout).events).toBe(size);
  }, 120_000);

  it('refuses a private key that others can read, and a corrupted database file', async () => {
    const copy = join(tmp.dir, 'perms');
    require('node:fs').cpSync(home, copy, { recursive: true });
    const keyFile = (require('node:fs').readdirSync(join(copy, 'keys')) as string[]).find((f) => f.endsWith('.key')) as string;
    chmodSync(join(copy, 'keys', keyFile), 0o644);
    // every command that loads the private keys refuses (verify reads the database only, and loads none)
    let r = await assay(['ledger', 'checkpoint'], copy);
    expect(r.code).toBe(6);
    expect(r.stderr).toMatch(/KEY_FILE_UNSAFE_PERMISSIONS: .* has mode 0644.*chmod 600/);

    const broken = join(tmp.dir, 'broken');
    require('node:fs').cpSync(home, broken, { recursive: true });
    const dbFile = join(broken, 'ledger', 'ledger.db');
    writeFileSync(dbFile, Buffer.alloc(4096, 0x41));
    copyFileSync(dbFile, `${dbFile}.before`);
    r = await assay(['ledger', 'verify'], broken);
    expect(r.code).toBe(5);
    expect(r.stderr).toMatch(/LEDGER_DB_CORRUPT: .*ledger\.db/);
    expect(
      require('node:fs')
        .readFileSync(dbFile)
        .equals(require('node:fs').readFileSync(`${dbFile}.before`)),
    ).toBe(true);
  }, 60_000);

  it('generates, registers and revokes keys; a revoked key can sign nothing after', async () => {
    const out = join(tmp.dir, 'auditor-keys');
    const g = await assay(['keys', 'generate', '--role', 'auditor', '--out', out, '--name', 'audit-1', '--json'], home);
    expect(g.code).toBe(0);
    const gen = JSON.parse(g.stdout) as { signer: string; publicKeyPath: string; privateKeyPath: string; publicKey: string };
    expect(gen.publicKey).toMatch(/^audit-1\+[0-9a-f]{8}\+[A-Za-z0-9+/]{44}$/);
    expect(statSync(gen.privateKeyPath).mode & 0o777).toBe(0o600);
    const reg = await assay(['keys', 'register', '--public-key', gen.publicKeyPath, '--role', 'auditor'], home);
    expect(reg.code).toBe(0);
    const twice = await assay(['keys', 'register', '--public-key', gen.publicKeyPath, '--role', 'auditor'], home);
    expect(twice.code).toBe(4);
    expect(twice.stderr).toMatch(/LEDGER_WRONG_EXPECTED_REVISION/);
    const rev = await assay(['keys', 'revoke', gen.signer, '--reason', 'rotated'], home);
    expect(rev.code).toBe(0);
    const list = JSON.parse((await assay(['keys', 'list', '--json'], home)).stdout) as Array<{ keyId: string; role: string; revokedAt: number | null }>;
    expect(list.find((k) => k.keyId === gen.signer)).toMatchObject({ role: 'auditor', revokedAt: expect.any(Number) });
    expect(
      list
        .filter((k) => k.revokedAt === null)
        .map((k) => k.role)
        .sort(),
    ).toEqual(['controller', 'judge', 'runtime']);
    expect((await assay(['ledger', 'verify'], home)).code).toBe(0);
  }, 60_000);
});

/**
 * `assay ledger append --file`, `ledger prove`/`consistency` position errors and `ledger verify --db` of an auditor's
 * copy, through the CLI in child processes.
 */
import { randomUUID, createHash } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { LedgerHome, homePaths, initLedgerHome } from '@assay/ledger';
import { assay } from '../support/cli';
import { deps } from '../support/ledger-home-fixtures';
import { scratchDirs } from '../support/scratch';

jest.setTimeout(240_000);

const dirs = scratchDirs('assay-bulk-cli-');

async function newHome(): Promise<string> {
  const dir = dirs.fresh('home');
  await initLedgerHome(dir, { ...deps(), origin: 'assay.test/bulk-cli' });
  return dir;
}

function eventsFile(lines: Array<Record<string, unknown>>): string {
  const file = `${dirs.fresh('events')}.jsonl`;
  writeFileSync(file, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
  return file;
}

const notes = (n: number, streams = 3, prefix = 'n') =>
  Array.from({ length: n }, (_, i) => ({ stream: `note-${prefix}${i % streams}`, type: 'Note', data: { text: `line ${i}` }, id: randomUUID() }));

async function size(home: string): Promise<number> {
  const h = new LedgerHome(home, { ...deps(), readOnly: true });
  try {
    return await h.db.events.size();
  } finally {
    await h.db.close();
  }
}

/** Names, sizes, modification times and SHA-256 of every file in a directory. */
function listing(dir: string): string[] {
  return readdirSync(dir)
    .sort()
    .map((f) => {
      const st = statSync(join(dir, f));
      return `${f} ${st.size} ${st.mtimeMs} ${createHash('sha256')
        .update(readFileSync(join(dir, f)))
        .digest('hex')}`;
    });
}

describe('assay ledger append --file', () => {
  it('appends a file in one go with one summary line; a second run is all "already recorded"; --json is one document', async () => {
    const home = await newHome();
    const lines = notes(300);
    const file = eventsFile(lines);
    const r = await assay(['ledger', 'append', '--file', file], home);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('appended 300 events (300 new, 0 already recorded) to 3 streams, positions 3..302\n');
    const again = await assay(['ledger', 'append', '--file', file, '--json'], home);
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toEqual({
      file,
      events: 300,
      new: 0,
      alreadyRecorded: 300,
      streams: 3,
      firstPosition: null,
      lastPosition: null,
      revisions: { 'note-n0': 99, 'note-n1': 99, 'note-n2': 99 },
    });
    expect(await size(home)).toBe(303);
  });

  it('is all or none: an id re-sent with other data is a conflict (exit 4) naming the line, and nothing is written', async () => {
    const home = await newHome();
    const lines = notes(10);
    await assay(['ledger', 'append', '--file', eventsFile(lines.slice(0, 5))], home);
    const changed = lines.map((l, i) => (i === 3 ? { ...l, data: { text: 'other text' } } : l));
    const file = eventsFile(changed);
    const r = await assay(['ledger', 'append', '--file', file], home);
    expect(r.code).toBe(4);
    expect(r.stderr).toContain(`LEDGER_EVENT_ID_CONFLICT: ${file}:4: event id ${lines[3]!.id} is already recorded`);
    expect(await size(home)).toBe(8);
  });

  it('honours --expected-revision for the first line of each stream in the file, naming the line', async () => {
    const home = await newHome();
    const first = eventsFile(notes(4, 2, 'e'));
    expect((await assay(['ledger', 'append', '--file', first, '--expected-revision', 'no_stream'], home)).code).toBe(0);
    const second = eventsFile([...notes(2, 1, 'x'), ...notes(2, 2, 'e')]);
    const r = await assay(['ledger', 'append', '--file', second, '--expected-revision', 'no_stream'], home);
    expect(r.code).toBe(4);
    expect(r.stderr).toContain(`${second}:3: stream "note-e0" already exists, at revision 1 (expected it not to exist)`);
    expect(await size(home)).toBe(7);
    const several = await assay(['ledger', 'append', '--file', first, '--expected-revision', '1'], home);
    expect(several.code).toBe(2);
    expect(several.stderr).toContain(`--expected-revision 1 names one stream's revision, but ${first} writes 2 streams`);
    const single = eventsFile(notes(2, 1, 'e'));
    expect((await assay(['ledger', 'append', '--file', single, '--expected-revision', '1'], home)).code).toBe(0);
    expect(await size(home)).toBe(9);
  });

  it('six concurrent bulk appends all succeed, each in its turn', async () => {
    const home = await newHome();
    const files = Array.from({ length: 6 }, (_, k) => eventsFile(notes(200, 2, `w${k}x`)));
    const results = await Promise.all(files.map((f) => assay(['ledger', 'append', '--file', f], home, 180_000)));
    for (const r of results) {
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(/^appended 200 events \(200 new, 0 already recorded\) to 2 streams, positions \d+\.\.\d+\n$/);
    }
    expect(await size(home)).toBe(3 + 1200);
  });

  it('prove and consistency past the end of the log both exit 3 with LEDGER_POSITION_OUT_OF_RANGE', async () => {
    const home = await newHome();
    const prove = await assay(['ledger', 'prove', '50'], home);
    expect(prove.code).toBe(3);
    expect(prove.stderr).toMatch(/LEDGER_POSITION_OUT_OF_RANGE/);
    const consistency = await assay(['ledger', 'consistency', '1', '50'], home);
    expect(consistency.code).toBe(3);
    expect(consistency.stderr).toMatch(/LEDGER_POSITION_OUT_OF_RANGE/);
    const reversed = await assay(['ledger', 'consistency', '3', '2'], home);
    expect(reversed.code).toBe(2);
    expect(reversed.stderr).toMatch(/LEDGER_BAD_TREE_SIZES/);
  });
});

describe('assay ledger verify --db of an auditor copy', () => {
  it('verifies a copy (WAL included) in a read-only directory, writing nothing beside it; reports the root as not pinned', async () => {
    const home = await newHome();
    // A writer still open: its -wal holds committed events not yet in the main file; copy both as they are.
    const h = new LedgerHome(home, deps());
    const audit = dirs.fresh('audit');
    mkdirSync(audit);
    try {
      await h.ledger.appendGeneric('note-audit', [{ type: 'Note', data: { text: 'only in the WAL' } }]);
      const db = homePaths(home).db;
      expect(existsSync(`${db}-wal`)).toBe(true);
      copyFileSync(db, join(audit, 'ledger.db'));
      copyFileSync(`${db}-wal`, join(audit, 'ledger.db-wal'));
    } finally {
      await h.db.close();
    }
    chmodSync(audit, 0o555);
    try {
      const before = listing(audit);
      const r = await assay(['ledger', 'verify', '--db', join(audit, 'ledger.db'), '--json', '--workers', '0'], join(dirs.base, 'nobody'));
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      const report = JSON.parse(r.stdout) as {
        ok: boolean;
        events: number;
        rootPinned: boolean;
        rootPinnedBy: unknown;
        steps: Array<{ name: string; status: string; ok: boolean }>;
      };
      expect(report).toMatchObject({ ok: true, events: 4, rootPinned: false, rootPinnedBy: null });
      expect(report.steps.find((s) => s.name === 'claims')?.status).toBe('ok');
      expect(report.steps.every((s) => s.status === 'ok' && s.ok)).toBe(true);
      // Works as root too (where chmod stops nothing): nothing new, nothing changed, same bytes and times.
      expect(listing(audit)).toEqual(before);
      const text = await assay(['ledger', 'verify', '--db', join(audit, 'ledger.db'), '--workers', '0'], join(dirs.base, 'nobody'));
      expect(text.code).toBe(0);
      expect(text.stdout).toMatch(/^root key not pinned: /m);
      expect(listing(audit)).toEqual(before);
    } finally {
      chmodSync(audit, 0o755);
    }
  });

  it('--trusted-root naming a missing file is exit 2 (not an untrusted root); --require-pinned-root refuses an unpinned check', async () => {
    const home = await newHome();
    const db = homePaths(home).db;
    const missing = await assay(['ledger', 'verify', '--db', db, '--trusted-root', '/nonexistent/root.pub'], join(dirs.base, 'nobody'));
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('cannot read trusted root key file /nonexistent/root.pub: ENOENT');
    const unpinned = await assay(['ledger', 'verify', '--db', db, '--require-pinned-root'], join(dirs.base, 'nobody'));
    expect(unpinned.code).toBe(2);
    expect(unpinned.stderr).toMatch(/CLI_USAGE: --require-pinned-root: the root key is not pinned/);
    const rootKey = (JSON.parse(readFileSync(homePaths(home).config, 'utf8')) as { rootKey: string }).rootKey;
    const pinned = await assay(
      ['ledger', 'verify', '--db', db, '--require-pinned-root', '--trusted-root', rootKey, '--json', '--workers', '0'],
      join(dirs.base, 'nobody'),
    );
    expect(pinned.code).toBe(0);
    expect(JSON.parse(pinned.stdout)).toMatchObject({ ok: true, rootPinned: true, rootPinnedBy: 'trusted-root' });
  });
});

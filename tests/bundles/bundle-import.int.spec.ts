/**
 * `assay bundle import` (docs/projections.md, "Imported bundles"): a bundle from another ledger, verified against its
 * publisher's key, becomes a leaderboard row marked imported, in the group of its protocol, next to this ledger's own
 * runs; its events never enter this ledger. Refused when it does not verify (tampered, wrong key), and nothing is kept
 * then. The import survives a rebuild of the read models, and the API shows it.
 */
import { createHash } from 'node:crypto';
import { copyFileSync, createReadStream, existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { NestFactory } from '@nestjs/core';
import { CommandBus, QueryBus } from '@nestjs/cqrs';
import { ManualClock } from '@assay/core';
import { LedgerModule, homePaths, parseVerifierKey } from '@assay/ledger';
import { ImportBundleCommand, LeaderboardQuery, ProjectionsModule, type LeaderboardGroup } from '@assay/projections';
import { verifyBundle } from '@assay/bundles';
import { runClaimRules } from '@assay/run';
import { createApi } from '../../apps/api/src/main';
import { assay } from '../support/cli';
import { makeTmpDir } from '../support/ledger-fixtures';
import { homeWith, preamble, sampleVariant } from '../projections/projection-fixtures';

jest.setTimeout(180_000);

const FIXTURES = join(__dirname, '..', 'fixtures', 'bundles');
const BUNDLE = join(FIXTURES, 'sample-run.v1.bundle');
const KEY = join(FIXTURES, 'sample-run.v1.root.pub');
const DIGEST = `sha256:${createHash('sha256').update(readFileSync(BUNDLE)).digest('hex')}`;

let tmp: { dir: string; cleanup(): void };
let home: string;

beforeAll(async () => {
  tmp = makeTmpDir('assay-bundle-import-');
  home = join(tmp.dir, 'home');
  // the same task and protocol as the bundle's run; a worse best (0.5 against its 0.433, minimized)
  await homeWith(home, [...preamble(), ...sampleVariant({ run: 'r-local', scores: [0.9, 0.8, 0.5] })]);
});
afterAll(() => tmp.cleanup());

const rowsOf = (groups: LeaderboardGroup[]) => groups.flatMap((g) => g.rows.map((r) => [r.run, r.source, r.rank, r.imported?.bundleDigest ?? null]));

describe('assay bundle import', () => {
  it('imports a verified bundle as a row marked imported, ranked in its protocol group; the ledger is not written', async () => {
    const ledgerBefore = readFileSync(homePaths(home).db);
    const r = await assay(['bundle', 'import', BUNDLE, '--trusted-key', KEY], home);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^imported: run r-20261202-0001 of task tiny-optimizer, best 0\.433 \(round 5\), published by \S+; bundle sha256:[0-9a-f]{64}\n/);
    expect(r.stdout).toContain(DIGEST);
    expect(readFileSync(join(home, 'imports', `${DIGEST.slice(7)}.bundle`)).equals(readFileSync(BUNDLE))).toBe(true);

    const lb = await assay(['leaderboard', 'tiny-optimizer', '--json'], home);
    expect(lb.code).toBe(0);
    const groups = (JSON.parse(lb.stdout) as { groups: LeaderboardGroup[] }).groups;
    expect(groups).toHaveLength(1); // the same task digest and protocol: one group
    expect(rowsOf(groups)).toEqual([
      ['r-20261202-0001', 'imported', 1, DIGEST],
      ['r-local', 'ledger', 2, null],
    ]);
    const imported = groups[0]!.rows[0]!;
    expect(imported.imported!.publisherKey).toBe(readFileSync(KEY, 'utf8').trim());
    expect(imported).toMatchObject({
      best: { score: 0.433, round: 5 },
      rejudge: null,
      startedAt: '2026-12-01T10:00:03.000Z',
      completedAt: '2026-12-01T10:00:42.000Z',
      wallTimeMs: 39_000,
    });
    const text = await assay(['leaderboard', 'tiny-optimizer'], home);
    expect(text.stdout).toMatch(/r-20261202-0001 .* imported from \S+/);
    expect(readFileSync(homePaths(home).db).equals(ledgerBefore)).toBe(true);

    const again = await assay(['bundle', 'import', BUNDLE, '--trusted-key', KEY], home);
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/^already imported: /);
  });

  it('refuses a tampered bundle (5) and a bundle under the wrong key, keeping nothing', async () => {
    const bad = join(tmp.dir, 'tampered.bundle');
    const bytes = readFileSync(BUNDLE);
    // one base64 character of an event's envelope, deep in the events entry
    const at = bytes.indexOf(Buffer.from('"envelope":"'), bytes.length >> 2) + 40;
    expect(at).toBeGreaterThan(40);
    bytes[at] = bytes[at] === 0x41 ? 0x42 : 0x41;
    writeFileSync(bad, bytes);
    const before = readdirSync(join(home, 'imports')).sort();
    const r = await assay(['bundle', 'import', bad, '--trusted-key', KEY], home);
    expect(r.code).toBe(5);
    expect(r.stderr).toMatch(/BUNDLE_IMPORT_REFUSED: .*does not verify against the publisher key \(step \w+: BUNDLE_\w+/);
    expect(r.stderr).toMatch(/nothing was imported/);
    expect(r.stderr).not.toMatch(/\n\s+at /);
    const other = join(tmp.dir, 'other.pub');
    writeFileSync(
      other,
      readFileSync(
        join(
          home,
          'keys',
          readdirSync(join(home, 'keys')).find((f) => f.endsWith('.pub'))!,
        ),
      ),
    );
    const wrong = await assay(['bundle', 'import', BUNDLE, '--trusted-key', other], home);
    expect([5, 6]).toContain(wrong.code);
    expect(wrong.stderr).toMatch(/BUNDLE_IMPORT_REFUSED/);
    expect(readdirSync(join(home, 'imports')).sort()).toEqual(before);
  });

  it('keeps imports when the read models are rebuilt, and the API lists and ranks them', async () => {
    rmSync(join(home, 'projections'), { recursive: true, force: true });
    const lb = await assay(['leaderboard', 'tiny-optimizer', '--json'], home);
    expect(rowsOf((JSON.parse(lb.stdout) as { groups: LeaderboardGroup[] }).groups).map((r) => r[1])).toEqual(['imported', 'ledger']);
    const app = await createApi(home, {});
    await app.listen(0, '127.0.0.1');
    try {
      const base = `http://127.0.0.1:${(app.getHttpServer().address() as { port: number }).port}`;
      expect(await (await fetch(`${base}/tasks`)).json()).toEqual({ tasks: [{ task: 'tiny-optimizer', runs: 1, imported: 1 }] });
      const doc = (await (await fetch(`${base}/leaderboards/tiny-optimizer`)).json()) as { groups: LeaderboardGroup[] };
      expect(rowsOf(doc.groups).map((r) => r[1])).toEqual(['imported', 'ledger']);
    } finally {
      await app.close();
    }
  });

  it('imports over HTTP (POST /bundles, operator): the same checks, 413 over the size limit, 415 for another media type', async () => {
    const { ApiTokenStore } = await import('@assay/ledger');
    const { systemClock } = await import('@assay/core');
    const store = new ApiTokenStore(home, { create: true });
    const operator = store.create({ role: 'operator', name: 'importer', clock: systemClock }).token;
    store.close();
    const key = readFileSync(KEY, 'utf8').trim();
    const app = await createApi(home, { ASSAY_API_BUNDLE_MAX_BYTES: String(readFileSync(BUNDLE).length + 10) });
    await app.listen(0, '127.0.0.1');
    try {
      const url = `http://127.0.0.1:${(app.getHttpServer().address() as { port: number }).port}/bundles?publisherKey=${encodeURIComponent(key)}`;
      const send = (body: Buffer, type = 'application/octet-stream') =>
        fetch(url, { method: 'POST', headers: { 'content-type': type, authorization: `Bearer ${operator}` }, body });
      const ok = await send(readFileSync(BUNDLE));
      expect(ok.status).toBe(201);
      expect(await ok.json()).toMatchObject({ imported: false, row: { source: 'imported', imported: { bundleDigest: DIGEST } } }); // imported above
      const bytes = readFileSync(BUNDLE);
      const at = bytes.indexOf(Buffer.from('"envelope":"'), bytes.length >> 2) + 40;
      bytes[at] = bytes[at] === 0x41 ? 0x42 : 0x41;
      const bad = await send(bytes);
      expect(bad.status).toBe(409);
      expect(((await bad.json()) as { error: { code: string; message: string } }).error).toMatchObject({
        code: 'BUNDLE_IMPORT_REFUSED',
        message: expect.stringMatching(/^the request body does not verify/),
      });
      const big = await send(Buffer.concat([readFileSync(BUNDLE), Buffer.alloc(64)]));
      expect(big.status).toBe(413);
      expect(((await big.json()) as { error: { code: string } }).error.code).toBe('API_BODY_TOO_LARGE');
      expect((await send(readFileSync(BUNDLE), 'text/plain')).status).toBe(415);
      expect(readdirSync(join(home, 'imports')).filter((f) => f.endsWith('.tmp'))).toEqual([]);
    } finally {
      await app.close();
    }
  });

  it('refuses a missing file (3) and a key that is not a key (2)', async () => {
    expect((await assay(['bundle', 'import', join(tmp.dir, 'nope.bundle'), '--trusted-key', KEY], home)).code).toBe(3);
    const copy = join(tmp.dir, 'copy.bundle');
    copyFileSync(BUNDLE, copy);
    const r = await assay(['bundle', 'import', copy, '--trusted-key', 'not-a-key'], home);
    expect(r.code).toBe(2);
    expect(existsSync(join(home, 'imports', 'copy.bundle'))).toBe(false);
  });
});

describe('ImportBundleCommand (ProjectionsModule), as the CLI and the API dispatch it', () => {
  it("stamps the import with the module's clock, and the next leaderboard query of the same module shows the row", async () => {
    const own = join(tmp.dir, 'module-home');
    await homeWith(own, [...preamble(), ...sampleVariant({ run: 'r-own', scores: [0.9, 0.8, 0.5] })]);
    const clock = new ManualClock('2026-07-04T12:00:00.000Z');
    const ledgerModule = LedgerModule.forHome(own, { clock });
    const app = await NestFactory.createApplicationContext(ProjectionsModule.forLedger(ledgerModule), { logger: false, abortOnError: false });
    try {
      // the read models are opened (and the imports table not yet made) before the import
      expect(rowsOf(await app.get(QueryBus).execute(new LeaderboardQuery('tiny-optimizer')))).toEqual([['r-own', 'ledger', 1, null]]);
      const key = parseVerifierKey(readFileSync(KEY, 'utf8').trim()).text;
      const verify = (path: string) => verifyBundle(createReadStream(path), { trustedKeys: [key], claims: runClaimRules() });
      const r = await app.get(CommandBus).execute(new ImportBundleCommand(BUNDLE, 'the fixture', key, verify));
      expect(r).toMatchObject({ added: true, row: { source: 'imported', imported: { bundleDigest: DIGEST, importedAt: '2026-07-04T12:00:00.000Z' } } });
      const rows = rowsOf(await app.get(QueryBus).execute(new LeaderboardQuery('tiny-optimizer')));
      expect(rows).toContainEqual(['r-20261202-0001', 'imported', 1, DIGEST]);
      expect(rows).toContainEqual(['r-own', 'ledger', 2, null]);
      const refused = app
        .get(CommandBus)
        .execute(new ImportBundleCommand(BUNDLE, 'the fixture', key, async () => ({ ...(await verify(BUNDLE)), verdict: 'invalid' as const })));
      await expect(refused).rejects.toMatchObject({ code: 'BUNDLE_IMPORT_REFUSED' });
    } finally {
      await app.close();
    }
  });
});

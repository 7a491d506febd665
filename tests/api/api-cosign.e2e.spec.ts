/**
 * Auditors hand in cosignatures over HTTP (POST /ledger/checkpoints/cosignatures): a witness cosigns the latest
 * signed checkpoint with `assay checkpoint cosign`, posts the note, and the server keeps the cosignature only when a
 * witness of its policy (ASSAY_API_WITNESS_POLICY) made it for this very checkpoint. GET /ledger/checkpoints/latest
 * then carries it, and `assay verify --witness-policy` accepts bundles against it. The API runs in this process.
 */
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { INestApplication } from '@nestjs/common';
import { systemClock } from '@assay/core';
import { ApiTokenStore } from '@assay/ledger';
import { createApi } from '../../apps/api/src/main';
import { assayInProcess } from '../support/cli';
import { buildSampleHome, copyHome } from '../support/ledger-home-fixtures';
import { makeTmpDir } from '../support/ledger-fixtures';

jest.setTimeout(120_000);

let tmp: { dir: string; cleanup(): void };
let home: string;
const witness: Record<string, { key: string; cosignerKey: string }> = {};
let auditor: string;
let reader: string;

const ok = async (args: string[], at = home): Promise<string> => {
  const r = await assayInProcess(args, at);
  if (r.code !== 0) throw new Error(`assay ${args.join(' ')} failed (${r.code}): ${r.err}${r.out}`);
  return r.out;
};

beforeAll(async () => {
  tmp = makeTmpDir('assay-api-cosign-');
  home = join(tmp.dir, 'home');
  await buildSampleHome(home);
  for (const name of ['witness-a', 'outsider']) {
    const g = JSON.parse(await ok(['keys', 'generate', '--role', 'auditor', '-o', join(tmp.dir, name), '--name', name, '--json'])) as {
      privateKeyPath: string;
    };
    witness[name] = { key: g.privateKeyPath, cosignerKey: (await ok(['checkpoint', 'witness-key', '--key', g.privateKeyPath])).trim() };
  }
  const store = new ApiTokenStore(home, { create: true });
  auditor = store.create({ role: 'auditor', name: 'an auditor', clock: systemClock }).token;
  reader = store.create({ role: 'reader', name: 'a reader', clock: systemClock }).token;
  store.close();
});
afterAll(() => tmp?.cleanup());

async function serve(env: Record<string, string>, at = home): Promise<{ app: INestApplication; base: string }> {
  const app = await createApi(at, { ASSAY_API_RATE_LIMIT: '100000', ...env });
  await app.listen(0, '127.0.0.1');
  return { app, base: `http://127.0.0.1:${(app.getHttpServer().address() as { port: number }).port}` };
}

/**
 * The latest signed checkpoint (or the note given), cosigned by one witness (its own state directory, trusting it on
 * first use).
 */
async function cosigned(name: string, given?: { note: string; state: string }): Promise<string> {
  const cp = join(tmp.dir, `checkpoint-${name}`);
  writeFileSync(cp, given?.note ?? (await ok(['ledger', 'checkpoint'])));
  const keysDir = join(home, 'keys');
  const logKey = join(keysDir, readdirSync(keysDir).find((f) => f.startsWith('assay-controller-') && f.endsWith('.pub')) as string);
  const out = JSON.parse(
    await ok([
      'checkpoint',
      'cosign',
      '--key',
      witness[name]!.key,
      '--state',
      given?.state ?? join(tmp.dir, `state-${name}`),
      '--log-key',
      logKey,
      '--checkpoint',
      cp,
      '--json',
    ]),
  ) as { note: string };
  return out.note;
}

const post = (base: string, token: string, body: unknown) =>
  fetch(`${base}/ledger/checkpoints/cosignatures`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

describe('POST /ledger/checkpoints/cosignatures', () => {
  it('without a witness policy the server keeps no cosignature (403 API_COSIGN_DISABLED)', async () => {
    const { app, base } = await serve({});
    try {
      const res = await post(base, auditor, { note: await cosigned('witness-a') });
      expect(res.status).toBe(403);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('API_COSIGN_DISABLED');
    } finally {
      await app.close();
    }
  });

  it("keeps a policy witness's cosignature of the latest checkpoint; refuses outsiders, other checkpoints, forgeries and readers", async () => {
    const policy = join(tmp.dir, 'policy.json');
    writeFileSync(policy, JSON.stringify({ format: 'assay-witness-policy/v1', quorum: 1, witnesses: [witness['witness-a']!.cosignerKey] }));
    const { app, base } = await serve({ ASSAY_API_WITNESS_POLICY: policy });
    try {
      const note = await cosigned('witness-a');
      expect((await post(base, reader, { note })).status).toBe(403); // a reader may not
      const res = await post(base, auditor, { note });
      expect(res.status).toBe(201);
      const body = (await res.json()) as { treeSize: number; cosigners: string[]; cosigned: string[]; quorum: number; met: boolean; note: string };
      expect(body).toMatchObject({ quorum: 1, met: true });
      expect(body.cosigners).toHaveLength(1);
      expect(body.cosigned).toEqual(body.cosigners);
      const latest = (await (await fetch(`${base}/ledger/checkpoints/latest`)).json()) as { treeSize: number; cosigned: string | null };
      expect(latest.treeSize).toBe(body.treeSize);
      expect(latest.cosigned).toBe(body.note);
      expect(readFileSync(join(home, 'ledger', 'checkpoint.cosigned'), 'utf8')).toBe(body.note);

      // an outsider's cosignature of the same checkpoint: not kept, nothing changes
      const outsider = await cosigned('outsider');
      const refused = await post(base, auditor, { note: outsider });
      expect(refused.status).toBe(422);
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('WITNESS_BAD_COSIGNATURE');
      expect(readFileSync(join(home, 'ledger', 'checkpoint.cosigned'), 'utf8')).toBe(body.note);

      // a forged line (the witness's name and key id, another signature): refused, nothing changes
      const lines = note.split('\n');
      const last = lines.findLastIndex((l) => l.startsWith('— witness-a '));
      const sig = Buffer.from(lines[last]!.split(' ').pop()!, 'base64');
      sig.writeUInt8(sig.readUInt8(sig.length - 1) ^ 1, sig.length - 1);
      lines[last] = `— witness-a ${sig.toString('base64')}`;
      const forged = await post(base, auditor, { note: lines.join('\n') });
      expect(forged.status).toBeGreaterThanOrEqual(400);
      expect(forged.status).toBeLessThan(500);
      expect(readFileSync(join(home, 'ledger', 'checkpoint.cosigned'), 'utf8')).toBe(body.note);

      // an old checkpoint's cosignature once a newer one is signed: refused, naming the size to cosign
      await ok(['ledger', 'append', '--stream', 'note-w', '--type', 'Note', '--data', '{"text":"grow"}']);
      await ok(['ledger', 'checkpoint']);
      const stale = await post(base, auditor, { note });
      expect(stale.status).toBe(409);
      const staleError = ((await stale.json()) as { error: { code: string; message: string } }).error;
      expect(staleError.code).toBe('API_COSIGN_REFUSED');
      expect(staleError.message).toMatch(/latest signed checkpoint \(tree size \d+\)/);
      expect(readFileSync(join(home, 'ledger', 'checkpoint.cosigned'), 'utf8')).toBe(body.note);

      // unknown fields and wrong types are refused before anything is read
      for (const bad of [{ note, extra: 1 }, { note: 7 }, {}]) {
        const res = await post(base, auditor, bad);
        expect(res.status).toBe(422);
        expect(((await res.json()) as { error: { code: string } }).error.code).toBe('API_INVALID_BODY');
      }
    } finally {
      await app.close();
    }
  });

  it('names one checkpoint while checkpoint.last is ahead of the committed one: GET latest, GET /health and the cosignature check agree', async () => {
    // The window of a signer in another process: its witness file is written inside its transaction, before COMMIT
    // (and stays ahead after a crash there). Made here by signing, then putting back the database from before.
    const ahead = join(tmp.dir, 'home-ahead');
    copyHome(home, ahead);
    await ok(['ledger', 'append', '--stream', 'note-a', '--type', 'Note', '--data', '{"text":"one"}'], ahead);
    await ok(['ledger', 'checkpoint'], ahead);
    await ok(['ledger', 'append', '--stream', 'note-a', '--type', 'Note', '--data', '{"text":"two"}'], ahead);
    const db = join(ahead, 'ledger', 'ledger.db');
    const files = [db, `${db}-wal`, `${db}-shm`];
    const saved = files.map((f) => (existsSync(f) ? readFileSync(f) : null));
    await ok(['ledger', 'checkpoint'], ahead);
    files.forEach((f, i) => (saved[i] ? writeFileSync(f, saved[i]!) : rmSync(f, { force: true })));
    const witnessFile = JSON.parse(readFileSync(join(ahead, 'ledger', 'checkpoint.last'), 'utf8')) as { treeSize: number };

    const policy = join(tmp.dir, 'policy-ahead.json');
    writeFileSync(policy, JSON.stringify({ format: 'assay-witness-policy/v1', quorum: 1, witnesses: [witness['witness-a']!.cosignerKey] }));
    const { app, base } = await serve({ ASSAY_API_WITNESS_POLICY: policy }, ahead);
    try {
      const latest = (await (await fetch(`${base}/ledger/checkpoints/latest`)).json()) as { treeSize: number; note: string };
      expect(witnessFile.treeSize).toBe(latest.treeSize + 1); // the window is there
      const health = (await (await fetch(`${base}/health`)).json()) as { ledger: { lastCheckpoint: { treeSize: number } } };
      expect(health.ledger.lastCheckpoint.treeSize).toBe(latest.treeSize);
      const note = await cosigned('witness-a', { note: latest.note, state: join(tmp.dir, 'state-ahead') });
      const res = await post(base, auditor, { note });
      expect(res.status).toBe(201);
      expect(((await res.json()) as { treeSize: number }).treeSize).toBe(latest.treeSize);
      expect(((await (await fetch(`${base}/ledger/checkpoints/latest`)).json()) as { cosigned: string }).cosigned).toContain('— witness-a ');
    } finally {
      await app.close();
    }
  });
});

/**
 * Witnessed checkpoints on real SQLite ledgers, through the real CLI: `assay checkpoint cosign` (trust on first use,
 * consistency proofs, rollback and fork refusals with equivocation reports), `assay checkpoint equivocation`,
 * `assay checkpoint policy` (a quorum of named witnesses; a key outside the policy does not count) and
 * `assay ledger checkpoint --witness/--witness-cmd` collecting from witness commands and files. No network anywhere.
 */
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { checkWitnessPolicy, parseWitnessPolicy, verifyCosignature, cosignerFromKeyText } from '@assay/ledger';
import { ManualClock } from '@assay/core';
import { assay, assayInProcess } from '../support/cli';
import { TS_REGISTER } from '../support/child-process';
import { makeTmpDir } from '../support/ledger-fixtures';
import { buildSampleHome, copyHome } from '../support/ledger-home-fixtures';

jest.setTimeout(300_000);

interface Witness {
  name: string;
  key: string;
  pub: string;
  cosignerKey: string;
}

const json = <T = Record<string, unknown>>(s: string): T => JSON.parse(s) as T;

describe('witnessed checkpoints (CLI, SQLite ledgers)', () => {
  let tmp: { dir: string; cleanup(): void };
  let pristine: string;
  let logKey: string;
  const w: Record<string, Witness> = {};
  let n = 0;
  const freshHome = (): string => {
    const h = join(tmp.dir, `home-${++n}`);
    copyHome(pristine, h);
    return h;
  };
  const file = (name: string, text: string): string => {
    const f = join(tmp.dir, `${++n}-${name}`);
    writeFileSync(f, text);
    return f;
  };
  const ok = async (args: string[], home: string): Promise<string> => {
    const r = await assay(args, home);
    if (r.code !== 0) throw new Error(`assay ${args.join(' ')} failed (${r.code}): ${r.stderr}${r.stdout}`);
    return r.stdout;
  };
  const checkpoint = async (home: string): Promise<string> => file('checkpoint', await ok(['ledger', 'checkpoint'], home));
  const append = (home: string, text: string) => ok(['ledger', 'append', '--stream', 'note-w', '--type', 'Note', '--data', JSON.stringify({ text })], home);
  const cosignArgs = (wi: Witness, state: string): string[] => ['checkpoint', 'cosign', '--key', wi.key, '--state', state, '--log-key', logKey];
  const sizeOf = (cpFile: string): number => Number(readFileSync(cpFile, 'utf8').split('\n')[1]);
  const proofFile = async (home: string, from: number, to: number): Promise<string> =>
    file('proof', await ok(['ledger', 'consistency', String(from), String(to)], home));

  beforeAll(async () => {
    tmp = makeTmpDir('assay-witness-');
    pristine = join(tmp.dir, 'pristine');
    await buildSampleHome(pristine);
    const keysDir = join(pristine, 'keys');
    logKey = join(keysDir, readdirSync(keysDir).find((f) => f.startsWith('assay-controller-') && f.endsWith('.pub')) as string);
    for (const name of ['witness-a', 'witness-b', 'witness-c', 'outsider']) {
      const dir = join(tmp.dir, name);
      const g = json<{ privateKeyPath: string; publicKeyPath: string }>(
        await ok(['keys', 'generate', '--role', 'auditor', '-o', dir, '--name', name, '--json'], pristine),
      );
      const cosignerKey = (await ok(['checkpoint', 'witness-key', '--key', g.privateKeyPath], pristine)).trim();
      w[name] = { name, key: g.privateKeyPath, pub: g.publicKeyPath, cosignerKey };
    }
  });
  afterAll(() => tmp?.cleanup());

  it('cosigns the first checkpoint on first use, then a grown log only with a consistency proof', async () => {
    const home = freshHome();
    const state = join(tmp.dir, 'state-grow');
    const cp1 = await checkpoint(home);
    const first = json<{ trustedOnFirstUse: boolean; note: string; cosigner: string }>(
      await ok([...cosignArgs(w['witness-a']!, state), '--checkpoint', cp1, '--json'], home),
    );
    expect(first.trustedOnFirstUse).toBe(true);
    const v = verifyCosignature(first.note, cosignerFromKeyText(w['witness-a']!.cosignerKey));
    expect(v.checkpoint.treeSize).toBe(sizeOf(cp1));

    await append(home, 'grow');
    const cp2 = await checkpoint(home);
    const noProof = await assay([...cosignArgs(w['witness-a']!, state), '--checkpoint', cp2, '--json'], home);
    expect(noProof.code).toBe(2);
    expect(json<{ error: { code: string } }>(noProof.stdout).error.code).toBe('WITNESS_PROOF_REQUIRED');

    const proof = await proofFile(home, sizeOf(cp1), sizeOf(cp2));
    const second = json<{ previousSize: number; treeSize: number; note: string }>(
      await ok([...cosignArgs(w['witness-a']!, state), '--checkpoint', cp2, '--proof', proof, '--json'], home),
    );
    expect(second).toMatchObject({ previousSize: sizeOf(cp1), treeSize: sizeOf(cp2) });
    expect(verifyCosignature(second.note, cosignerFromKeyText(w['witness-a']!.cosignerKey)).checkpoint.treeSize).toBe(sizeOf(cp2));

    // A wrong proof (one for other sizes) is a fork: never signed.
    await append(home, 'grow again');
    const cp3 = await checkpoint(home);
    const wrong = file(
      'wrong-proof',
      readFileSync(await proofFile(home, sizeOf(cp1), sizeOf(cp3)), 'utf8').replace(/^consistency \d+/, `consistency ${sizeOf(cp2)}`),
    );
    const bad = await assay([...cosignArgs(w['witness-a']!, state), '--checkpoint', cp3, '--proof', wrong, '--json'], home);
    expect(bad.code).toBe(5);
    expect(json<{ error: { code: string } }>(bad.stdout).error.code).toBe('WITNESS_FORK');
  });

  it('refuses a rolled-back checkpoint (WITNESS_ROLLBACK, exit 6) and leaves its state unchanged', async () => {
    const home = freshHome();
    const state = join(tmp.dir, 'state-rollback');
    const cp1 = await checkpoint(home);
    await ok([...cosignArgs(w['witness-a']!, state), '--checkpoint', cp1], home);
    await append(home, 'later');
    const cp2 = await checkpoint(home);
    await ok([...cosignArgs(w['witness-a']!, state), '--checkpoint', cp2, '--proof', await proofFile(home, sizeOf(cp1), sizeOf(cp2))], home);
    const stateFile = join(state, readdirSync(state)[0] as string);
    const before = readFileSync(stateFile, 'utf8');

    const r = await assay([...cosignArgs(w['witness-a']!, state), '--checkpoint', cp1, '--json'], home);
    expect(r.code).toBe(6);
    const e = json<{ error: { code: string; details: { knownSize: number; equivocation: boolean } } }>(r.stdout).error;
    expect(e.code).toBe('WITNESS_ROLLBACK');
    expect(e.details).toMatchObject({ knownSize: sizeOf(cp2), equivocation: false });
    expect(readFileSync(stateFile, 'utf8')).toBe(before);
    expect(readdirSync(state).filter((f) => f.startsWith('equivocation-'))).toEqual([]);
  });

  /**
   * Two histories of one log (same keys, same origin: the operator runs both): the witness cosigns their common base,
   * then history A's checkpoint; history B's checkpoint of the same size is the fork.
   */
  const forkedLog = async (wi: Witness, stateName: string) => {
    const a = freshHome();
    const b = join(tmp.dir, `fork-${++n}`);
    copyHome(a, b);
    const state = join(tmp.dir, stateName);
    const base = await checkpoint(a);
    await ok([...cosignArgs(wi, state), '--checkpoint', base], a);
    await append(a, 'history A');
    await append(b, 'history B');
    const cpA = await checkpoint(a);
    const cpB = await checkpoint(b);
    expect(sizeOf(cpA)).toBe(sizeOf(cpB));
    await ok([...cosignArgs(wi, state), '--checkpoint', cpA, '--proof', await proofFile(a, sizeOf(base), sizeOf(cpA))], a);
    return { a, b, state, cpA, cpB };
  };

  it("names the equivocation report it keeps in the state directory by the log's origin and the context clock's time", async () => {
    const { b, state, cpB } = await forkedLog(w['witness-c']!, 'state-fork-clock');
    const r = await assayInProcess([...cosignArgs(w['witness-c']!, state), '--checkpoint', cpB, '--json'], b, new ManualClock('2026-08-01T10:00:00.000Z'));
    expect(r.code).toBe(5);
    expect(readdirSync(state).filter((f) => f.startsWith('equivocation-'))).toEqual([
      expect.stringMatching(/^equivocation-[0-9a-f]{16}-2026-08-01T10-00-00-000Z\.json$/),
    ]);
  });

  it('refuses a fork with an equivocation report that `checkpoint equivocation` proves', async () => {
    const { a, b, state, cpA, cpB } = await forkedLog(w['witness-b']!, 'state-fork');
    const report = join(tmp.dir, 'equivocation.json');
    const r = await assay([...cosignArgs(w['witness-b']!, state), '--checkpoint', cpB, '--equivocation-out', report, '--json'], b);
    expect(r.code).toBe(5);
    const e = json<{ error: { code: string; details: { equivocationReport: string } } }>(r.stdout).error;
    expect(e.code).toBe('WITNESS_FORK');
    expect(e.details.equivocationReport).toBe(report);

    const proven = await assay(['checkpoint', 'equivocation', report, '--log-key', logKey, '--json'], a);
    expect(proven.code).toBe(0);
    expect(json<{ proven: boolean }>(proven.stdout).proven).toBe(true);
    // Under another log's key the notes do not verify: not proven.
    const other = join(tmp.dir, `other-${++n}`);
    await ok(['ledger', 'init', '--json'], other);
    const otherKey = join(other, 'keys', readdirSync(join(other, 'keys')).find((f) => f.startsWith('assay-controller-') && f.endsWith('.pub')) as string);
    expect((await assay(['checkpoint', 'equivocation', report, '--log-key', otherKey], a)).code).toBe(5);
    // `assay verify` takes the report too (anyone with the log key, nothing else): valid, invalid, could not check
    const verified = await assay(['verify', report, '--trusted-key', logKey, '--json'], join(tmp.dir, 'auditor-home'));
    expect(verified.code).toBe(0);
    expect(json<{ kind: string; verdict: string; proven: boolean }>(verified.stdout)).toMatchObject({ kind: 'equivocation', verdict: 'valid', proven: true });
    const notProven = await assay(['verify', report, '--trusted-key', otherKey], join(tmp.dir, 'auditor-home'));
    expect([notProven.code, notProven.stdout]).toEqual([5, expect.stringMatching(/^INVALID: step equivocation: not proven/)]);
    expect((await assay(['verify', report], join(tmp.dir, 'auditor-home'))).code).toBe(6);
    // The same checkpoint twice proves nothing.
    const same = json<{ checkpoints: string[] }>(readFileSync(report, 'utf8'));
    same.checkpoints[1] = same.checkpoints[0] as string;
    expect((await assay(['checkpoint', 'equivocation', file('same.json', JSON.stringify(same)), '--log-key', logKey], a)).code).toBe(5);

    // A rollback to a size the witness recorded with another root is proven too; a failing proof between two sizes is not.
    await append(a, 'A grows');
    const cpA2 = await checkpoint(a);
    await ok([...cosignArgs(w['witness-b']!, state), '--checkpoint', cpA2, '--proof', await proofFile(a, sizeOf(cpA), sizeOf(cpA2))], a);
    const rollback = await assay([...cosignArgs(w['witness-b']!, state), '--checkpoint', cpB, '--json'], b);
    expect(rollback.code).toBe(6);
    const rb = json<{ error: { code: string; details: { equivocationReport: string } } }>(rollback.stdout).error;
    expect(rb.code).toBe('WITNESS_ROLLBACK');
    expect((await assay(['checkpoint', 'equivocation', rb.details.equivocationReport, '--log-key', logKey], a)).code).toBe(0);
    await append(b, 'B grows');
    await append(b, 'B grows more');
    const cpB3 = await checkpoint(b);
    const forked = await assay(
      [...cosignArgs(w['witness-b']!, state), '--checkpoint', cpB3, '--proof', await proofFile(b, sizeOf(cpA2), sizeOf(cpB3)), '--json'],
      b,
    );
    expect(forked.code).toBe(5);
    const fk = json<{ error: { details: { equivocationReport: string } } }>(forked.stdout).error;
    const unproven = await assay(['checkpoint', 'equivocation', fk.details.equivocationReport, '--log-key', logKey, '--json'], a);
    expect(unproven.code).toBe(5);
    expect(json<{ proven: boolean; reason: string }>(unproven.stdout).reason).toMatch(/does not prove a fork by itself/);
  });

  it('counts only witnesses of the policy toward its quorum (a key outside the policy is ignored)', async () => {
    const home = freshHome();
    const cp = await checkpoint(home);
    const policy = file(
      'policy.json',
      JSON.stringify({
        format: 'assay-witness-policy/v1',
        quorum: 2,
        witnesses: [w['witness-a']!.cosignerKey, w['witness-b']!.cosignerKey, readFileSync(w['witness-c']!.pub, 'utf8').trim()],
      }),
    );
    const byA = file('by-a', await ok([...cosignArgs(w['witness-a']!, join(tmp.dir, 'state-pa')), '--checkpoint', cp], home));
    const byAandOutsider = file('by-a-out', await ok([...cosignArgs(w['outsider']!, join(tmp.dir, 'state-po')), '--checkpoint', byA], home));
    const r1 = await assay(['checkpoint', 'policy', byAandOutsider, '--policy', policy, '--log-key', logKey, '--json'], home);
    expect(r1.code).toBe(5);
    const p1 = json<{ met: boolean; cosigned: Array<{ signer: string }>; outside: string[] }>(r1.stdout);
    expect(p1.met).toBe(false);
    expect(p1.cosigned.map((c) => c.signer)).toEqual([cosignerFromKeyText(w['witness-a']!.cosignerKey).signer]);
    expect(p1.outside).toEqual([cosignerFromKeyText(w['outsider']!.cosignerKey).signer]);

    // witness-c is in the policy by its auditor .pub (type 0x01): its cosignature counts.
    const withC = file('by-c', await ok([...cosignArgs(w['witness-c']!, join(tmp.dir, 'state-pc')), '--checkpoint', byAandOutsider], home));
    const r2 = await assay(['checkpoint', 'policy', withC, '--policy', policy, '--log-key', logKey, '--json'], home);
    expect(r2.code).toBe(0);
    expect(json<{ met: boolean }>(r2.stdout).met).toBe(true);

    // A cosignature line that does not verify does not count either.
    const text = readFileSync(withC, 'utf8');
    const lines = text.split('\n');
    const cLine = lines.findIndex((l) => l.startsWith('\u2014 witness-c '));
    const sig = Buffer.from((lines[cLine] as string).split(' ')[2] as string, 'base64');
    sig[sig.length - 1] = (sig[sig.length - 1] as number) ^ 1;
    lines[cLine] = `\u2014 witness-c ${sig.toString('base64')}`;
    const res = checkWitnessPolicy(lines.join('\n'), parseWitnessPolicy(readFileSync(policy, 'utf8')));
    expect(res.met).toBe(false);
    expect(res.invalid.map((i) => i.code)).toEqual(['COSIGNATURE_BAD_SIGNATURE']);
  });

  it('`ledger checkpoint` collects verified cosignatures from witness commands and files', async () => {
    const home = freshHome();
    const cmd = (wi: Witness, state: string): string =>
      `${process.execPath} -r ${TS_REGISTER} apps/cli/src/main.ts checkpoint cosign --request - --key ${wi.key} --state ${state} --log-key ${logKey}`;
    const stateA = join(tmp.dir, 'state-ca');
    const policy = file(
      'policy2.json',
      JSON.stringify({ format: 'assay-witness-policy/v1', quorum: 2, witnesses: [w['witness-a']!.cosignerKey, w['witness-b']!.cosignerKey] }),
    );
    const cp = await checkpoint(home);
    const byB = file('by-b', await ok([...cosignArgs(w['witness-b']!, join(tmp.dir, 'state-cb')), '--checkpoint', cp], home));

    const r = json<{ note: string; quorumMet: boolean; witnesses: Array<{ ok: boolean; cosigners: string[] }> }>(
      await ok(['ledger', 'checkpoint', '--witness-cmd', cmd(w['witness-a']!, stateA), '--witness', byB, '--witness-policy', policy, '--json'], home),
    );
    expect(r.quorumMet).toBe(true);
    expect(r.witnesses.map((x) => x.ok)).toEqual([true, true]);
    const kept = readFileSync(join(home, 'ledger', 'checkpoint.cosigned'), 'utf8');
    expect(kept).toBe(r.note);
    expect(checkWitnessPolicy(kept, parseWitnessPolicy(readFileSync(policy, 'utf8'))).met).toBe(true);

    // The log grows: the command witness gets a consistency proof from the size it cosigned.
    await append(home, 'grown');
    const again = json<{ treeSize: number; witnesses: Array<{ ok: boolean }>; quorumMet: boolean }>(
      await ok(['ledger', 'checkpoint', '--witness-cmd', cmd(w['witness-a']!, stateA), '--witness-key', w['witness-a']!.cosignerKey, '--json'], home),
    );
    expect(again.witnesses).toEqual([expect.objectContaining({ ok: true })]);
    // Without the ledger's record of the witness's size, the witness answers with it (tlog-witness 409) and is asked again.
    await append(home, 'grown more');
    writeFileSync(join(home, 'ledger', 'witnesses.json'), '{}');
    const retried = json<{ witnesses: Array<{ ok: boolean }> }>(
      await ok(['ledger', 'checkpoint', '--witness-cmd', cmd(w['witness-a']!, stateA), '--witness-key', w['witness-a']!.cosignerKey, '--json'], home),
    );
    expect(retried.witnesses).toEqual([expect.objectContaining({ ok: true })]);

    // A witness whose key is outside the policy: its cosignature is not added, the quorum is not met (exit 5).
    await append(home, 'one more');
    const out = await assay(
      ['ledger', 'checkpoint', '--witness-cmd', cmd(w['outsider']!, join(tmp.dir, 'state-co')), '--witness-policy', policy, '--json'],
      home,
    );
    expect(out.code).toBe(5);
    const o = json<{ quorumMet: boolean; note: string; witnesses: Array<{ ok: boolean; error: { code: string } }> }>(out.stdout);
    expect(o.quorumMet).toBe(false);
    expect(o.witnesses[0]?.error.code).toBe('WITNESS_BAD_COSIGNATURE');
    expect(o.note).not.toContain('outsider');
    expect(existsSync(join(home, 'ledger', 'checkpoint.cosigned'))).toBe(true);
  });
});

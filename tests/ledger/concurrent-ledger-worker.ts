/**
 * Child process of the concurrent-checkpoint test (ledger-concurrency.int.spec.ts): one of several processes
 * writing the same ASSAY_HOME at once, each through its own LedgerHome (its own SQLite connection):
 *   node -r ./tests/support/ts-register.js tests/ledger/concurrent-ledger-worker.ts <ASSAY_HOME> <append|checkpoint> <seed>
 *
 * Prints `READY` once the ledger is open, then reads commands on stdin, one a line:
 *   `ROUND <r> <ops>`  does <ops> operations as fast as it can, then prints `DONE <r> <ok> <failed>`; every failure
 *                      is printed before as `FAIL <r> <code> <message>`;
 *   `EXIT`             closes the ledger and exits.
 * An appender appends 1-4 Note events per operation to one of a few streams (expected revision `any`). A
 * checkpointer signs a checkpoint (`ledger checkpoint`), or asks for an inclusion proof of a random position
 * (`ledger prove`, which signs a checkpoint first when the latest one does not cover it), or reads proofs against
 * the latest signed checkpoint without signing (what the API's GETs do).
 */
import { createInterface } from 'node:readline';
import { randomIds, systemClock } from '@assay/core';
import { LedgerHome } from '@assay/ledger';
import { prng } from '../support/prng';

async function main(): Promise<void> {
  const [home, role, seedArg] = process.argv.slice(2);
  if (!home || (role !== 'append' && role !== 'checkpoint')) throw new Error('usage: concurrent-ledger-worker.ts <ASSAY_HOME> <append|checkpoint> <seed>');
  const rand = prng(Number(seedArg ?? '1'));
  const h = new LedgerHome(home, { clock: systemClock, ids: randomIds });
  process.stdout.write('READY\n');
  const say = (line: string) => process.stdout.write(`${line}\n`);

  const one = async (r: number, i: number): Promise<void> => {
    if (role === 'append') {
      const n = 1 + Math.floor(rand() * 4);
      const stream = `note-w${Math.floor(rand() * 5)}`;
      await h.ledger.append(
        stream,
        Array.from({ length: n }, (_, k) => ({ type: 'Note', data: { text: `round ${r} op ${i} event ${k}` } })),
      );
    } else if (rand() < 1 / 3) {
      const size = await h.db.events.size();
      await h.ledger.inclusionProof(Math.floor(rand() * size), { signIfNeeded: true });
    } else if (rand() < 1 / 4) {
      // What the HTTP API's GETs do: read-only proofs against the latest signed checkpoint, as GET
      // /ledger/checkpoints/latest names it (the database's, committed with its Merkle nodes). Not lastSigned(): that
      // also reads checkpoint.last, which a signer in another process writes before its transaction commits, so it
      // can name a size whose nodes this process cannot read yet, and a proof there is LEDGER_NOT_CHECKPOINTED.
      const covered = h.db.checkpoints.latest()?.treeSize ?? 0;
      if (covered > 1) {
        await h.ledger.inclusionProof(Math.floor(rand() * covered));
        await h.ledger.consistencyProof(1 + Math.floor(rand() * (covered - 1)), covered);
      }
    } else {
      await h.ledger.checkpoint();
    }
  };

  const lines = createInterface({ input: process.stdin });
  for await (const line of lines) {
    const [cmd, rArg, opsArg] = line.trim().split(/\s+/);
    if (cmd === 'EXIT') break;
    if (cmd !== 'ROUND') continue;
    const r = Number(rArg);
    const ops = Number(opsArg);
    let ok = 0;
    let failed = 0;
    for (let i = 0; i < ops; i++) {
      try {
        await one(r, i);
        ok++;
      } catch (e) {
        failed++;
        const code = (e as { code?: unknown }).code;
        say(
          `FAIL ${r} ${typeof code === 'string' ? code : 'UNCODED'} ${String((e as Error).message)
            .replace(/\s+/g, ' ')
            .slice(0, 300)}`,
        );
      }
    }
    say(`DONE ${r} ${ok} ${failed}`);
  }
  await h.close();
}

if (require.main === module) {
  main().then(
    () => process.exit(0),
    (e: unknown) => {
      process.stderr.write(`${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
      process.exit(1);
    },
  );
}

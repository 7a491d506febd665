#!/usr/bin/env node
// Appends every event of a JSON-lines file ({"stream","type","data","id"?} per line) to the ledger under
// ASSAY_HOME through the ledger's own signing append, with the private keys in <ASSAY_HOME>/keys: what the run
// controller, the runtime and the Judge do for the types they alone write (the generic `assay ledger append`
// refuses those types). The demo uses it to record its sample research run, and to play a forger who holds the
// keys: whatever such a forger signs, `assay ledger verify` checks that the claims follow from the events.
//
//   node scripts/append-signed.js FILE        (after `npm run build`; ASSAY_HOME as for `assay`)
'use strict';
const { readFileSync } = require('node:fs');
const path = require('node:path');

const dist = path.join(__dirname, '..', 'dist', 'libs');
const { randomIds, systemClock } = require(path.join(dist, 'core', 'src'));
const { LedgerHome } = require(path.join(dist, 'ledger', 'src'));

async function main() {
  const file = process.argv[2];
  if (!file) {
    process.stderr.write('usage: node scripts/append-signed.js EVENTS.jsonl\n');
    process.exit(2);
  }
  const lines = readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '');
  const home = new LedgerHome(process.env.ASSAY_HOME || '.assay', { clock: systemClock, ids: randomIds });
  try {
    for (const [i, line] of lines.entries()) {
      const e = JSON.parse(line);
      const r = await home.ledger.append(e.stream, [{ type: e.type, data: e.data, ...(e.id ? { id: e.id } : {}) }]);
      process.stdout.write(`${i + 1}: ${e.type} to ${e.stream} at position ${r.lastPosition}\n`);
    }
  } finally {
    await home.close();
  }
}

main().catch((e) => {
  process.stderr.write(`append-signed: ${e.code ? `${e.code}: ` : ''}${e.message}\n`);
  process.exit(1);
});

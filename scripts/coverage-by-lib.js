#!/usr/bin/env node
// Line coverage per lib and app from the last `jest --coverage` run (.coverage/coverage-summary.json), next to the
// floors in tests/coverage-floors.json. `--suggest` prints floors set 3 points below each measurement.
'use strict';
const { readFileSync } = require('node:fs');
const { join, relative } = require('node:path');
const root = join(__dirname, '..');
const summary = JSON.parse(readFileSync(join(root, '.coverage', 'coverage-summary.json'), 'utf8'));
const floors = JSON.parse(readFileSync(join(root, 'tests', 'coverage-floors.json'), 'utf8')).floors;
const byDir = new Map();
for (const [file, s] of Object.entries(summary)) {
  if (file === 'total') continue;
  const parts = relative(root, file).split('/');
  const dir = parts.slice(0, 3).join('/'); // libs/<lib>/src, apps/<app>/src
  const d = byDir.get(dir) ?? { covered: 0, total: 0 };
  d.covered += s.lines.covered;
  d.total += s.lines.total;
  byDir.set(dir, d);
}
const suggest = {};
for (const [dir, d] of [...byDir].sort()) {
  const pct = d.total === 0 ? 100 : (100 * d.covered) / d.total;
  suggest[dir] = Math.max(0, Math.floor(pct) - 3);
  process.stdout.write(`${dir.padEnd(28)} ${pct.toFixed(1).padStart(5)} % of ${String(d.total).padStart(6)} lines   floor ${floors[dir] ?? '-'}\n`);
}
if (process.argv.includes('--suggest')) process.stdout.write(`${JSON.stringify(suggest, null, 2)}\n`);

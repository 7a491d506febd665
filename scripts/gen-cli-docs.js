#!/usr/bin/env node
// Writes docs/cli.md from the registered commands (apps/cli/src/cli-reference.ts). Run `npm run docs:cli` after
// changing a command; tests/cli/cli-reference.int.spec.ts fails while the file is out of date.
'use strict';
const { writeFileSync } = require('node:fs');
const { join } = require('node:path');
const dist = join(__dirname, '..', 'dist', 'apps', 'cli', 'src');
const { buildProgram } = require(join(dist, 'main.js'));
const { renderCliReference } = require(join(dist, 'cli-reference.js'));
const quiet = { home: '.assay', out: () => undefined, err: () => undefined, progress: () => ({ start() {}, tick() {}, end() {} }) };
const file = join(__dirname, '..', 'docs', 'cli.md');
writeFileSync(file, renderCliReference(buildProgram(quiet)));
process.stdout.write(`wrote ${file}\n`);

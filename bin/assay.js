#!/usr/bin/env node
'use strict';
// The `assay` command. Built by `npm run build` into dist/.
try {
  require('../dist/apps/cli/src/main.js');
} catch (e) {
  if (e && e.code === 'MODULE_NOT_FOUND' && String(e.message).includes('dist/apps/cli')) {
    process.stderr.write('assay: not built yet; run `npm run build` first\n');
    process.exit(70);
  }
  throw e;
}

#!/usr/bin/env node
/*
 * Builds Assay's native addons with the system C compiler and Node's own headers:
 *
 *   libs/snapshots/native/fs-list.c  -> libs/snapshots/native/build/assay_fs_list.node  (directory lister)
 *   libs/ledger/native/ledger-kernels.c     -> libs/ledger/native/build/assay_ledger_kernels.node     (SHA-256 of many envelopes,
 *                                       with the OpenSSL that Node itself carries; needs Node's openssl/ headers)
 *
 * Both only make things faster: without them snapshots list directories through node:fs and verification hashes
 * through node:crypto, with the same results. So a machine without a C compiler or Node's headers gets a warning, not
 * a failed build, unless ASSAY_REQUIRE_NATIVE=1 (CI sets it, so that a broken native build cannot go unnoticed).
 *
 * Each addon is rebuilt only when its source or this script is newer than it. `--force` rebuilds anyway.
 */
'use strict';
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const required = process.env.ASSAY_REQUIRE_NATIVE === '1';

const ADDONS = [
  {
    name: 'directory lister',
    source: path.join(root, 'libs', 'snapshots', 'native', 'fs-list.c'),
    out: path.join(root, 'libs', 'snapshots', 'native', 'build', 'assay_fs_list.node'),
    headers: ['node_api.h', 'uv.h'],
    exports: ['listDirSync'],
    without: 'snapshots will list directories through node:fs (slower re-snapshots, same CIDs)',
  },
  {
    name: 'ledger kernels',
    source: path.join(root, 'libs', 'ledger', 'native', 'ledger-kernels.c'),
    // Included by ledger-kernels.c (and by the fuzz harness, scripts/fuzz-native.sh): a change rebuilds the addon.
    deps: [path.join(root, 'libs', 'ledger', 'native', 'envelope-scan.h')],
    out: path.join(root, 'libs', 'ledger', 'native', 'build', 'assay_ledger_kernels.node'),
    headers: ['node_api.h', path.join('openssl', 'evp.h')],
    exports: ['digestAll', 'subtreeRoot', 'scanEnvelopes'],
    without: 'ledger verification will hash through node:crypto (slower, same digests)',
  },
];

/** Directories that may hold Node's headers: next to this Node, then where npm's configuration says. */
function headerDirs() {
  const dirs = [path.join(path.dirname(process.execPath), '..', 'include', 'node')];
  for (const v of [process.env.npm_config_nodedir, process.config.variables.node_prefix]) {
    if (v) dirs.push(path.join(v, 'include', 'node'));
  }
  dirs.push('/usr/include/node', '/usr/local/include/node');
  return dirs;
}

function mtime(f) {
  try {
    return fs.statSync(f).mtimeMs;
  } catch {
    return -1;
  }
}

/** Builds one addon; returns null when it is in place, or why it is not. */
function build(addon) {
  if (!process.argv.includes('--force') && mtime(addon.out) > Math.max(mtime(addon.source), ...(addon.deps || []).map(mtime), mtime(__filename))) return null;
  const include = headerDirs().find((d) => addon.headers.every((h) => fs.existsSync(path.join(d, h))));
  if (!include) return `Node's headers (${addon.headers.join(', ')}) were not found in ${headerDirs().join(', ')}`;
  const cc = process.env.CC || 'cc';
  fs.mkdirSync(path.dirname(addon.out), { recursive: true });
  // A temporary name that still ends in .node (require() picks the loader by extension).
  const tmp = addon.out.replace(/\.node$/, `.${process.pid}.tmp.node`);
  // -Werror: the C must build without warnings (CI would otherwise let a new one through unread).
  const args = [
    '-O2',
    '-Wall',
    '-Wextra',
    '-Wshadow',
    '-Wconversion',
    '-Werror',
    '-std=gnu11',
    '-fPIC',
    '-shared',
    '-pthread',
    '-DNAPI_VERSION=8',
    `-I${include}`,
    addon.source,
    '-o',
    tmp,
  ];
  const r = spawnSync(cc, args, { stdio: ['ignore', 'inherit', 'inherit'] });
  if (r.error || r.status !== 0) {
    fs.rmSync(tmp, { force: true });
    return r.error ? `${cc} could not be run (${r.error.message})` : `${cc} ${args.join(' ')} failed (exit ${r.status})`;
  }
  // Load it once: an addon that builds but does not load is as good as none.
  try {
    const m = require(tmp);
    for (const e of addon.exports) if (typeof m[e] !== 'function') throw new Error(`${e} missing`);
  } catch (e) {
    fs.rmSync(tmp, { force: true });
    return `the built addon does not load (${e.message})`;
  }
  fs.renameSync(tmp, addon.out);
  return null;
}

let failed = false;
for (const addon of ADDONS) {
  const why = build(addon);
  if (why === null) continue;
  if (required) {
    console.error(`build-native: ${addon.name}: ${why} (ASSAY_REQUIRE_NATIVE=1: failing)`);
    failed = true;
  } else {
    console.error(`build-native: warning: ${addon.name}: ${why}; ${addon.without}`);
  }
}
process.exit(failed ? 1 : 0);

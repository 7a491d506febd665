#!/usr/bin/env node
/*
 * Builds Assay's native directory lister (libs/snapshots/native/fs-list.c) into
 * libs/snapshots/native/build/assay_fs_list.node with the system C compiler and Node's own headers.
 *
 * The lister only makes re-snapshots of large trees faster; without it snapshots list directories through node:fs
 * and produce the same CIDs. So a machine without a C compiler or Node's headers gets a warning, not a failed
 * build, unless ASSAY_REQUIRE_NATIVE=1 (CI sets it, so that a broken native build cannot go unnoticed).
 *
 * Rebuilds only when the source or this script is newer than the addon. `--force` rebuilds anyway.
 */
'use strict';
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const dir = path.join(root, 'libs', 'snapshots', 'native');
const source = path.join(dir, 'fs-list.c');
const out = path.join(dir, 'build', 'assay_fs_list.node');
const required = process.env.ASSAY_REQUIRE_NATIVE === '1';

function give(why) {
  if (required) {
    console.error(`build-native: ${why} (ASSAY_REQUIRE_NATIVE=1: failing)`);
    process.exit(1);
  }
  console.error(`build-native: warning: ${why}; snapshots will list directories through node:fs (slower re-snapshots, same CIDs)`);
  process.exit(0);
}

/** Directories that may hold node_api.h: next to this Node, then where npm's configuration says. */
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

if (!process.argv.includes('--force') && mtime(out) > Math.max(mtime(source), mtime(__filename))) process.exit(0);

const include = headerDirs().find((d) => fs.existsSync(path.join(d, 'node_api.h')) && fs.existsSync(path.join(d, 'uv.h')));
if (!include) give(`Node's headers (node_api.h, uv.h) were not found in ${headerDirs().join(', ')}`);
const cc = process.env.CC || 'cc';
fs.mkdirSync(path.dirname(out), { recursive: true });
// A temporary name that still ends in .node (require() picks the loader by extension).
const tmp = path.join(path.dirname(out), `assay_fs_list.${process.pid}.tmp.node`);
const args = ['-O2', '-Wall', '-Wextra', '-std=gnu11', '-fPIC', '-shared', '-pthread', '-DNAPI_VERSION=8', `-I${include}`, source, '-o', tmp];
const r = spawnSync(cc, args, { stdio: ['ignore', 'inherit', 'inherit'] });
if (r.error || r.status !== 0) {
  fs.rmSync(tmp, { force: true });
  give(r.error ? `${cc} could not be run (${r.error.message})` : `${cc} ${args.join(' ')} failed (exit ${r.status})`);
}
// Load it once: an addon that builds but does not load is as good as none.
try {
  const m = require(tmp);
  if (typeof m.listDirSync !== 'function') throw new Error('listDirSync missing');
} catch (e) {
  fs.rmSync(tmp, { force: true });
  give(`the built addon does not load (${e.message})`);
}
fs.renameSync(tmp, out);

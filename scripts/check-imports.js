#!/usr/bin/env node
// Import boundaries (docs/architecture.md, "Boundaries"):
//  1. libs never import apps;
//  2. code under a `domain/` folder imports no NestJS, SQLite, Docker or HTTP/CLI framework;
//  3. across libs, only a lib's public entry (`@assay/<lib>`) is imported, never a path inside another lib;
//  4. no import cycles between libs.
'use strict';
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const FORBIDDEN_IN_DOMAIN =
  /^(@nestjs\/|better-sqlite3$|dockerode$|@eventstore\/|express$|commander$|node:fs|fs$|node:child_process|child_process$|node:worker_threads)/;
const problems = [];

function walk(dir, out) {
  if (!fs.existsSync(dir)) return out;
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    if (e.name === 'node_modules' || e.name === 'dist') continue;
    const p = path.join(dir, e.name);
    if (e.isDirectory()) walk(p, out);
    else if (e.name.endsWith('.ts')) out.push(p);
  }
  return out;
}

function importsOf(file) {
  const src = fs.readFileSync(file, 'utf8');
  const re =
    /(?:^|\s)(?:import|export)\s[^'"]*?from\s+['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)|require\(\s*['"]([^'"]+)['"]\s*\)|^\s*import\s+['"]([^'"]+)['"]/gm;
  const out = [];
  let m;
  while ((m = re.exec(src))) out.push(m[1] || m[2] || m[3] || m[4]);
  return out;
}

const libOf = (file) => {
  const rel = path.relative(root, file).split(path.sep);
  return rel[0] === 'libs' ? rel[1] : null;
};

const libDeps = new Map();
for (const file of walk(path.join(root, 'libs'), []).concat(walk(path.join(root, 'apps'), []))) {
  const rel = path.relative(root, file);
  const lib = libOf(file);
  const isSpec = /\.spec\.ts$/.test(file);
  const inDomain = rel.split(path.sep).includes('domain');
  for (const spec of importsOf(file)) {
    if (lib && spec.startsWith('@assay/') === false && spec.startsWith('.')) {
      const target = path.resolve(path.dirname(file), spec);
      const trel = path.relative(root, target).split(path.sep);
      if (trel[0] === 'apps') problems.push(`${rel}: a lib imports an app (${spec})`);
      if (trel[0] === 'libs' && trel[1] !== lib) problems.push(`${rel}: imports inside another lib (${spec}); use @assay/${trel[1]}`);
    }
    if (/^@assay\/[^/]+\//.test(spec)) problems.push(`${rel}: deep import ${spec}; import the lib's public entry`);
    if (lib && spec.startsWith('@assay/')) {
      const dep = spec.split('/')[1];
      if (dep !== lib) {
        if (!libDeps.has(lib)) libDeps.set(lib, new Set());
        libDeps.get(lib).add(dep);
      }
    }
    if (inDomain && !isSpec && FORBIDDEN_IN_DOMAIN.test(spec)) problems.push(`${rel}: domain code imports ${spec}`);
  }
}

// cycles between libs
const state = new Map();
function visit(lib, stack) {
  if (state.get(lib) === 'done') return;
  if (state.get(lib) === 'active') {
    problems.push(`import cycle between libs: ${[...stack.slice(stack.indexOf(lib)), lib].join(' -> ')}`);
    return;
  }
  state.set(lib, 'active');
  for (const d of libDeps.get(lib) ?? []) visit(d, [...stack, lib]);
  state.set(lib, 'done');
}
for (const lib of libDeps.keys()) visit(lib, []);

if (problems.length) {
  for (const p of problems) process.stderr.write(`import boundary: ${p}\n`);
  process.exit(1);
}
process.stdout.write('import boundaries ok\n');

/**
 * Lets tests run TypeScript in child processes: `node -r ./tests/support/ts-register.js some.ts`.
 *
 * - compiles each required `.ts` file with @swc/core's transformSync (CommonJS, legacy decorators + metadata, the
 *   same settings as jest.config.js), with inline source maps so stack traces point at the TypeScript;
 * - maps `@assay/<lib>` to `libs/<lib>/src/index.ts`, as jest's moduleNameMapper and tsconfig paths do.
 *
 * Files under node_modules are left alone: Node 20 loads the ESM-only packages (multiformats, @ipld/dag-cbor)
 * itself through require(esm).
 */
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const Module = require('node:module');
const { transformSync } = require('@swc/core');

const ROOT = path.resolve(__dirname, '..', '..');
const ASSAY = /^@assay\/([a-z][a-z0-9-]*)$/;

const swcOptions = {
  jsc: {
    parser: { syntax: 'typescript', decorators: true },
    transform: { legacyDecorator: true, decoratorMetadata: true },
    target: 'es2022',
  },
  module: { type: 'commonjs' },
  sourceMaps: 'inline',
  swcrc: false,
  configFile: false,
};

const originalResolve = Module._resolveFilename;
Module._resolveFilename = function resolveAssay(request, parent, isMain, options) {
  const m = ASSAY.exec(request);
  if (m) return originalResolve.call(this, path.join(ROOT, 'libs', m[1], 'src', 'index.ts'), parent, isMain, options);
  try {
    return originalResolve.call(this, request, parent, isMain, options);
  } catch (e) {
    // swc compiles `await import('pkg')` to require('pkg'): a package that exports only an `import` condition
    // (@ipld/car) is then loaded through that condition's file, which Node 20.19+ require()s as ESM, as the real
    // dynamic import in dist/ would load it.
    if (e.code !== 'ERR_PACKAGE_PATH_NOT_EXPORTED') throw e;
    const dirs = Module._nodeModulePaths(parent?.filename ? path.dirname(parent.filename) : ROOT);
    const pkgDir = dirs.map((d) => path.join(d, request)).find((d) => fs.existsSync(path.join(d, 'package.json')));
    const entry = pkgDir && JSON.parse(fs.readFileSync(path.join(pkgDir, 'package.json'), 'utf8')).exports?.['.']?.import;
    if (typeof entry !== 'string') throw e;
    return path.join(pkgDir, entry);
  }
};

require.extensions['.ts'] = function compileTs(module, filename) {
  if (filename.includes(`${path.sep}node_modules${path.sep}`)) {
    throw new Error(`ts-register: refusing to compile ${filename} (TypeScript inside node_modules)`);
  }
  const source = fs.readFileSync(filename, 'utf8');
  const { code } = transformSync(source, { ...swcOptions, filename });
  module._compile(code, filename);
};

// Source-mapped stack traces for the inline maps above.
if (typeof process.setSourceMapsEnabled === 'function') process.setSourceMapsEnabled(true);

// Jest projects per test tier (see docs/architecture.md, "Tests").
// The project is CommonJS; the ESM-only packages (multiformats, @ipld/*, cborg) are loaded by Node >= 20.19
// through require(esm) at run time, and transformed to CommonJS by @swc/jest inside jest, whose module
// system does not implement require(esm).
const esmOnly = ['multiformats', '@ipld', 'cborg', 'uint8arrays', 'varint', 'it-[a-z-]+', 'p-[a-z-]+'];

const swc = [
  '@swc/jest',
  {
    jsc: {
      parser: { syntax: 'typescript', decorators: true },
      transform: { legacyDecorator: true, decoratorMetadata: true },
      target: 'es2022',
    },
    module: { type: 'commonjs' },
  },
];

const base = {
  rootDir: __dirname,
  testEnvironment: 'node',
  resolver: '<rootDir>/tests/jest-resolver.js',
  transform: { '^.+\\.(t|j|mj)s$': swc },
  transformIgnorePatterns: [`/node_modules/(?!(${esmOnly.join('|')})/)`],
  moduleNameMapper: { '^@assay/([a-z-]+)$': '<rootDir>/libs/$1/src/index.ts' },
  moduleFileExtensions: ['ts', 'js', 'mjs', 'json'],
  testPathIgnorePatterns: ['/node_modules/', '/dist/'],
};

// Coverage (`--coverage`, which scripts/test.sh and so CI pass): V8's own counters, so the swc transform needs no
// instrumentation; per-lib floors below, set a few points under what the suite measured (docs/architecture.md, "Tests").
// Code run in child processes, worker threads and containers is not counted.
const COVERAGE_FLOORS = require('./tests/coverage-floors.json');

// Jest's default 5 s per test is a wall-clock limit that a loaded 2-core machine running the suite under coverage
// exceeds for tests that start processes, Nest apps or containers; a hung test still fails, after a minute. Tests
// that need longer set their own.
module.exports = {
  testTimeout: 60_000,
  coverageProvider: 'v8',
  collectCoverageFrom: ['libs/*/src/**/*.ts', 'apps/*/src/**/*.ts', '!**/*.spec.ts', '!**/index.ts', '!**/*.worker.ts'],
  coverageReporters: ['text-summary', 'json-summary'],
  coverageDirectory: '<rootDir>/.coverage',
  coverageThreshold: Object.fromEntries(Object.entries(COVERAGE_FLOORS.floors).map(([dir, lines]) => [`./${dir}/`, { lines }])),
  projects: [
    { ...base, displayName: 'unit', testMatch: ['<rootDir>/**/*.unit.spec.ts'] },
    { ...base, displayName: 'int', testMatch: ['<rootDir>/**/*.int.spec.ts'] },
    { ...base, displayName: 'e2e', testMatch: ['<rootDir>/**/*.e2e.spec.ts'] },
  ],
};

// Import boundaries (docs/architecture.md, "Boundaries"), checked by dependency-cruiser in `npm run lint`:
//   depcruise apps libs bench tests scripts task-runtime --config .dependency-cruiser.cjs --output-type err
// Every rule has a name (the name a violation is reported under) and a comment saying why it exists.
// tests/architecture/boundaries.int.spec.ts plants a violation of every rule in tests/fixtures/boundaries/ and checks
// that each is reported under its name, and that the real tree breaks none. There is no baseline of known
// violations: the last ones (ledger verification and snapshot CAR/checkout files in the wrong layer) were fixed on
// 2026-12-04, so any violation fails the lint.
'use strict';

// Shipped code: apps and libs, less their tests. Tests (*.spec.ts, tests/) may use dev dependencies and fakes.
const SPEC = '\\.spec\\.ts$';
// Framework and I/O code a domain/ folder must not import (npm packages resolve under node_modules/, Node's own
// modules resolve to their bare name, with or without `node:`).
const FRAMEWORK = [
  '(^|/)node_modules/@nestjs/',
  '(^|/)node_modules/better-sqlite3/',
  '(^|/)node_modules/@types/better-sqlite3/',
  '(^|/)node_modules/dockerode/',
  '(^|/)node_modules/@types/dockerode/',
  '(^|/)node_modules/@eventstore/',
  '(^|/)node_modules/fastify/',
  '(^|/)node_modules/@fastify/',
  '(^|/)node_modules/commander/',
  '^(node:)?(fs|child_process|worker_threads)(/|$)',
];

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-app-to-app',
      comment:
        'An app is a composition root (the CLI, the HTTP API); what two apps share belongs in a lib (the runtime node ' + 'that both start is @assay/runtime).',
      severity: 'error',
      from: { path: '^apps/([^/]+)/' },
      to: { path: '^apps/', pathNot: '^apps/$1/' },
    },
    {
      name: 'no-lib-to-app',
      comment: 'Libs are reused by every app; an app depends on libs, never the other way round.',
      severity: 'error',
      from: { path: '^libs/' },
      to: { path: '^apps/' },
    },
    {
      name: 'lib-public-entry-only',
      comment:
        'Outside its own folder a lib is used only through its public entry, libs/<lib>/src/index.ts, so what is inside ' +
        'can change without breaking other code. (A lib may also have a testing entry, libs/<lib>/src/testing.ts, for ' +
        'tests only: see no-testing-entry-in-shipped-code.) tests/ may reach inside a lib: contract suites test adapters.',
      severity: 'error',
      from: { path: '^(apps|libs|bench)/([^/]+)/' },
      to: { path: '^libs/[^/]+/', pathNot: ['^libs/$2/', '^libs/[^/]+/src/(index|testing)\\.ts$'] },
    },
    {
      name: 'lib-entry-through-alias',
      comment:
        "Another lib's entry is imported as @assay/<lib> (tsconfig paths), not by a relative path into libs/: the build " +
        'rewrites the alias (tsc-alias) and jest maps it, so the alias is the one way a lib is named.',
      severity: 'error',
      from: { path: '^(apps|libs|bench)/([^/]+)/' },
      to: { path: '^libs/[^/]+/src/index\\.ts$', pathNot: '^libs/$2/', dependencyTypesNot: ['aliased-tsconfig-paths'] },
    },
    {
      name: 'no-testing-entry-in-shipped-code',
      comment: "A lib's testing entry (fakes such as the in-memory container runtime) is for tests; shipped code never loads it.",
      severity: 'error',
      from: { path: '^(apps|libs)/', pathNot: SPEC },
      to: { path: '^libs/[^/]+/src/testing\\.ts$' },
    },
    {
      name: 'domain-imports-no-outer-layer',
      comment:
        'domain/ holds types and pure functions: it imports other domain code, errors and @assay/* entries, never the ' +
        'layers around it (application/, ports/, adapters/, nest/, home/), which depend on it.',
      severity: 'error',
      from: { path: '/domain/', pathNot: SPEC },
      to: { path: '^libs/[^/]+/src/(application|ports|adapters|nest|home)/' },
    },
    {
      name: 'domain-imports-no-framework',
      comment:
        'domain/ stays free of frameworks and I/O (NestJS, SQLite, Docker, EventStoreDB, HTTP and CLI frameworks, the ' +
        'file system, child processes, threads), so it is tested and reused without any of them.',
      severity: 'error',
      from: { path: '/domain/', pathNot: SPEC },
      to: { path: FRAMEWORK },
    },
    {
      name: 'application-imports-no-adapters',
      comment:
        'application/ orchestrates domain code through ports (interfaces); the adapters that implement the ports are ' +
        'chosen by the composition root (home/, nest/, an app), so the application runs against fakes and real ones alike.',
      severity: 'error',
      from: { path: '^libs/[^/]+/src/application/', pathNot: SPEC },
      to: { path: '^libs/[^/]+/src/adapters/' },
    },
    {
      name: 'adapters-import-no-application',
      comment:
        'adapters/ implement ports with real I/O; they depend on ports and domain, not on the application that uses ' +
        'them (that would make the dependency go both ways).',
      severity: 'error',
      from: { path: '^libs/[^/]+/src/adapters/', pathNot: SPEC },
      to: { path: '^libs/[^/]+/src/application/' },
    },
    {
      name: 'ports-import-only-domain',
      comment: 'ports/ are interfaces in terms of the domain; they import no application, adapter or composition code.',
      severity: 'error',
      from: { path: '^libs/[^/]+/src/ports/', pathNot: SPEC },
      to: { path: '^libs/[^/]+/src/(application|adapters|nest|home)/' },
    },
    {
      name: 'no-circular',
      comment:
        'No import cycles anywhere, type-only imports included (tsPreCompilationDeps): a cycle means two modules are ' + 'one and makes load order matter.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    // Libs form layers, which is what keeps them free of cycles (a module cycle is not needed for a lib cycle:
    // a.ts -> @assay/b and b.ts -> @assay/a is one): core at the bottom, tar on core; containers, ledger, snapshots
    // and task-format on those two; judge and run on those, not on each other; bundles on all of them but judge,
    // projections on core, ledger and run, and the runtime node on judge, run and the layers below; no lib imports
    // bundles, projections or runtime (the outer layer). A new lib gets a layer here: lib-in-a-layer fails until then.
    {
      name: 'lib-layers-core',
      comment: 'libs/core is the bottom layer (errors, clock, ids, terminal text): it imports no other lib.',
      severity: 'error',
      from: { path: '^libs/core/' },
      to: { path: '^libs/', pathNot: '^libs/core/' },
    },
    {
      name: 'lib-layers-codec',
      comment: 'libs/tar (the one tar codec) builds on core only.',
      severity: 'error',
      from: { path: '^libs/tar/' },
      to: { path: '^libs/', pathNot: ['^libs/tar/', '^libs/core/'] },
    },
    {
      name: 'lib-layers-base',
      comment: 'containers, ledger, snapshots and task-format build on core and tar only; none knows another.',
      severity: 'error',
      from: { path: '^libs/(containers|ledger|snapshots|task-format)/' },
      to: { path: '^libs/', pathNot: ['^libs/$1/', '^libs/core/', '^libs/tar/'] },
    },
    {
      name: 'lib-layers-top',
      comment: 'judge and run build on the layers below; neither imports the other (the run reaches the Judge through its JudgePort).',
      severity: 'error',
      from: { path: '^libs/(judge|run)/' },
      to: { path: '^libs/(judge|run)/', pathNot: '^libs/$1/' },
    },
    {
      name: 'lib-layers-outer',
      comment:
        'bundles (a run, its ledger and its snapshots, packed and verified) and projections (read models of the verified ledger) are the outer layer: no other lib imports either, except the runtime node (libs/runtime), which composes a re-judge of a bundle with its Judges.',
      severity: 'error',
      from: { path: '^libs/([^/]+)/', pathNot: '^libs/runtime/' },
      to: { path: '^libs/(bundles|projections)/', pathNot: '^libs/$1/' },
    },
    {
      name: 'lib-layers-runtime',
      comment:
        'runtime (the runtime node: Docker, the snapshot store and the ledger composed for Judges, task checks, baselines ' +
        'and research runs) is a composition of the libs below it; only apps import it.',
      severity: 'error',
      from: { path: '^libs/([^/]+)/' },
      to: { path: '^libs/runtime/', pathNot: '^libs/$1/' },
    },
    {
      name: 'lib-in-a-layer',
      comment: 'A lib not named in the lib-layers rules is unconstrained by them; until it is given a layer it imports no other lib.',
      severity: 'error',
      from: { path: '^libs/(?!(?:core|tar|containers|ledger|snapshots|task-format|judge|run|bundles|projections|runtime)/)([^/]+)/' },
      to: { path: '^libs/', pathNot: '^libs/$1/' },
    },
    {
      name: 'no-dev-dependency-in-shipped-code',
      comment:
        'npm ci --omit=dev installs no devDependencies, so shipped code (apps, libs, not their *.spec.ts) must not load ' +
        'one. Type-only imports (and @types/*) are erased by the compiler and allowed.',
      severity: 'error',
      from: { path: '^(apps|libs)/', pathNot: SPEC },
      to: { dependencyTypes: ['npm-dev'], dependencyTypesNot: ['type-only'], pathNot: '(^|/)node_modules/@types/' },
    },
    {
      name: 'no-undeclared-dependency',
      comment:
        'A package shipped code loads is declared in package.json (dependencies): one that only arrives as a dependency ' +
        "of another package can disappear with that package's next version.",
      severity: 'error',
      from: { path: '^(apps|libs)/', pathNot: SPEC },
      to: { dependencyTypes: ['npm-no-pkg', 'npm-unknown'], dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'no-tests-in-shipped-code',
      comment: 'tests/ (oracles, fakes, fixtures, helpers) is not shipped; apps and libs, less their *.spec.ts, never import it.',
      severity: 'error',
      from: { path: '^(apps|libs)/', pathNot: SPEC },
      to: { path: '^tests/' },
    },
    {
      name: 'no-unresolvable',
      comment: 'An import dependency-cruiser cannot resolve is an import no rule can check (or a typo); it must resolve.',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    // Check npm packages as dependencies (for the rules above) but do not cruise inside them.
    doNotFollow: { path: '(^|/)node_modules/' },
    // Build output, and the fixture of planted violations (checked by its own test, from inside that folder). Anchored
    // at the start: a package's files under node_modules/<pkg>/dist/ are dependencies like any other.
    exclude: { path: ['^dist/', '^coverage/', '^tests/fixtures/boundaries/'] },
    // Type-only imports (`import type`) are dependencies too: they would hide cycles and layer breaks otherwise.
    tsPreCompilationDeps: true,
    // Resolve the @assay/<lib> aliases through tsconfig.json's paths.
    tsConfig: { fileName: 'tsconfig.json' },
    // multiformats and @ipld/* are ESM-only packages: resolve them through their `import` condition as well.
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['require', 'import', 'node', 'default', 'types'],
      extensions: ['.ts', '.d.ts', '.js', '.cjs', '.mjs', '.json'],
    },
  },
};

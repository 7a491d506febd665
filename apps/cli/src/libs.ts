/**
 * The libraries behind the commands, loaded when a command runs rather than when the program is built, so that
 * `assay --help`, `assay <group> <command> --help` and light commands start without NestJS, dockerode or
 * class-validator (docs/benchmarks.md, "CLI start-up"). Command files import only types from these at top level.
 */
export const libs = {
  ledger: () => require('@assay/ledger') as typeof import('@assay/ledger'),
  run: () => require('@assay/run') as typeof import('@assay/run'),
  bundles: () => require('@assay/bundles') as typeof import('@assay/bundles'),
  judge: () => require('@assay/judge') as typeof import('@assay/judge'),
  snapshots: () => require('@assay/snapshots') as typeof import('@assay/snapshots'),
  taskFormat: () => require('@assay/task-format') as typeof import('@assay/task-format'),
  runtime: () => require('@assay/runtime') as typeof import('@assay/runtime'),
};

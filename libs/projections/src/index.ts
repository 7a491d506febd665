// Public entry of @assay/projections: read models (leaderboards, run trajectories) projected from the verified ledger.

// domain: pure projections
export * from './domain/run-projection';
export * from './domain/leaderboard';
export * from './domain/trajectory';
export * from './domain/baselines';
export * from './domain/reports';
export * from './domain/imported';

// ports
export * from './ports/read-model-store.port';
export * from './ports/import-store.port';

// adapters
export { SqliteReadModelStore, readModelsPath, findProjectionMigrationsDir, canonical } from './adapters/sqlite-read-model-store';
export { SqliteImportStore, importsDir, importsDbPath } from './adapters/sqlite-import-store';

// application
export * from './application/projector';
export * from './application/import-bundle';

// nest: the read models as a NestJS module (queries for the API)
export * from './nest/projections.module';

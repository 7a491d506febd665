// Public entry of @assay/projections: read models (leaderboards, run trajectories) projected from the verified ledger.

// domain: pure projections
export * from './domain/run-projection';
export * from './domain/leaderboard';
export * from './domain/trajectory';
export * from './domain/baselines';

// ports
export * from './ports/read-model-store.port';

// adapters
export { SqliteReadModelStore, readModelsPath, findProjectionMigrationsDir, canonical } from './adapters/sqlite-read-model-store';

// application
export * from './application/projector';

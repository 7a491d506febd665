// Public entry of @assay/bundles: signed result bundles a run's claim travels in, and their offline verification.
export * from './bundles.errors';

// domain: the format, pure
export * from './domain/bundle-format';
export * from './domain/bundle-streams';
export * from './domain/log-redaction';
export * from './domain/rejudge-report';

// application
export * from './application/export-bundle';
export * from './application/export-rejudge-bundle';
export * from './application/bundle-writer';
export * from './application/verify-bundle';
export * from './application/rejudge';

// home: composition over an ASSAY_HOME (the snapshot store, the run's directory)
export * from './home/export-from-home';

export * from './errors';
export * from './clock';
export * from './progress';
export * from './terminal-text';
export * from './system-errors';
export * from './worker-entry';
export * from './file-ops';
export * from './process-identity';

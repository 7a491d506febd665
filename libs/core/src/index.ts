export * from './errors';
export * from './clock';
export * from './progress';

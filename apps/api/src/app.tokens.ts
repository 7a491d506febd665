import type { Clock, IdGenerator } from '@assay/core';
import type { ReadPolicy } from './access';

/** Injection tokens of the API's own configuration. */
export const ASSAY_HOME_TOKEN = Symbol('ASSAY_API_HOME');
export const API_CONFIG = Symbol('ASSAY_API_CONFIG');

/** What the API is configured with (from the environment in main.ts; docs/operations.md, "HTTP API"). */
export interface ApiConfig {
  readonly home: string;
  /** `open`: reads of public results need no token; `token`: every request but liveness needs one. */
  readonly reads: ReadPolicy;
  /** Requests per minute per client address (ASSAY_API_RATE_LIMIT). */
  readonly rateLimitPerMinute: number;
  readonly env: NodeJS.ProcessEnv;
  /** The time and ids of everything the API stamps (the system's unless a test binds its own). */
  readonly clock?: Clock;
  readonly ids?: IdGenerator;
}

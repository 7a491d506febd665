/**
 * Structured logs (pino, one JSON line per record on stderr) and the request metrics, as Fastify onResponse hooks.
 * Access lines carry the request id, method, path (without its query), route, status, time taken and the token id
 * (never the token); a 5xx is logged at level error with its cause by the error filter (http-edge.ts
 * logServerError).
 */
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { apiLogger } from './log';
import type { ApiMetrics } from './metrics';
import { pathOf, type ApiRequest } from './http-edge';

/** The route template Fastify matched (`/runs/:id/report`), never the raw path: bounded label values. */
const routeOf = (req: FastifyRequest): string => req.routeOptions.url ?? 'unmatched';

function observe(metrics: ApiMetrics, req: FastifyRequest, reply: FastifyReply): number {
  // Fastify's own clock for the request: from its arrival (onRequest) to the end of the response.
  const seconds = reply.elapsedTime / 1e3;
  const route = routeOf(req);
  metrics.requests.inc({ method: req.method, route, status: String(reply.statusCode) });
  metrics.requestSeconds.observe({ method: req.method, route }, seconds);
  return seconds;
}

/** Counts and times every request (no log line). */
export function metricsHook(metrics: ApiMetrics) {
  return (req: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void => {
    observe(metrics, req, reply);
    done();
  };
}

/** Counts and times every request and logs one line for it. */
export function accessLogHook(metrics: ApiMetrics) {
  return (req: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void => {
    const seconds = observe(metrics, req, reply);
    const r = req as ApiRequest;
    apiLogger.info({
      requestId: r.requestId,
      method: r.method,
      path: pathOf(r),
      route: routeOf(r),
      status: reply.statusCode,
      ms: Math.round(seconds * 1e4) / 10,
      token: r.principal?.id ?? null,
    });
    done();
  };
}

/**
 * Structured logs (pino, one JSON line per record on stderr) and the request metrics. Access lines carry the request
 * id, method, path (without its query), route, status, time taken and the token id (never the token); a 5xx is
 * logged at level error with its cause by the error filter (http-edge.ts logServerError).
 */
import type { NextFunction, Request, Response } from 'express';
import { apiLogger } from './log';
import type { ApiMetrics } from './metrics';
import type { WithPrincipal } from './access';
import type { WithRequestId } from './http-edge';

type Req = Request & WithRequestId & WithPrincipal;

/** The route template Express matched (`/runs/:id/report`), never the raw path: bounded label values. */
const routeOf = (req: Req): string => (req.route?.path ? `${req.baseUrl ?? ''}${String(req.route.path)}` : 'unmatched');

function observe(metrics: ApiMetrics, req: Req, res: Response, started: bigint): number {
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const route = routeOf(req);
  metrics.requests.inc({ method: req.method, route, status: String(res.statusCode) });
  metrics.requestSeconds.observe({ method: req.method, route }, seconds);
  return seconds;
}

/** Counts and times every request (no log line). */
export function metricsMiddleware(metrics: ApiMetrics) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const started = process.hrtime.bigint();
    res.on('finish', () => observe(metrics, req as Req, res, started));
    next();
  };
}

/** Counts and times every request and logs one line for it. */
export function accessLogMiddleware(metrics: ApiMetrics) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const started = process.hrtime.bigint();
    res.on('finish', () => {
      const r = req as Req;
      const seconds = observe(metrics, r, res, started);
      apiLogger.info({
        requestId: r.requestId,
        method: r.method,
        path: r.path,
        route: routeOf(r),
        status: res.statusCode,
        ms: Math.round(seconds * 1e4) / 10,
        token: r.principal?.id ?? null,
      });
    });
    next();
  };
}

/**
 * Helmet's security headers, worked out once. Helmet (the policy's source) applies its headers through a chain of
 * twelve middlewares per request; for a fixed configuration they never depend on the request, so the API runs
 * helmet once on a recording response at start and then sets the recorded headers in one step per request, in a
 * Fastify onRequest hook (part of what brought the API's reads near the bare-server bound, docs/benchmarks.md).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import helmet, { type HelmetOptions } from 'helmet';

/** What helmet does to a response for `options`: headers set (in order) and headers removed. */
export function helmetHeaders(options: HelmetOptions): { set: Array<[string, string]>; removed: string[] } {
  const set: Array<[string, string]> = [];
  const removed: string[] = [];
  const res = {
    setHeader(name: string, value: unknown) {
      set.push([name.toLowerCase(), Array.isArray(value) ? value.join(', ') : String(value)]);
      return res;
    },
    removeHeader(name: string) {
      removed.push(name.toLowerCase());
    },
  };
  let done = false;
  let failed: unknown;
  helmet(options)({ headers: {} } as IncomingMessage, res as unknown as ServerResponse, (e?: unknown) => {
    done = true;
    failed = e;
  });
  // Helmet is synchronous for a fixed configuration; anything else is a change of helmet this code must follow.
  if (!done || failed) throw new Error(`helmet did not finish synchronously: ${String(failed ?? 'no next()')}`);
  return { set, removed };
}

/** One onRequest hook setting helmet's headers for `options`, worked out once. */
export function securityHeaders(options: HelmetOptions): (req: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void {
  const { set, removed } = helmetHeaders(options);
  const headers: Record<string, string> = Object.fromEntries(set);
  return (_req, reply, done): void => {
    reply.headers(headers);
    for (const name of removed) reply.removeHeader(name);
    done();
  };
}

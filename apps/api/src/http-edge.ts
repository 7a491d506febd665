import { randomUUID } from 'node:crypto';
import { HttpException, Injectable, ValidationPipe, type ArgumentMetadata, type PipeTransform, type ValidationError } from '@nestjs/common';
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { AssayError } from '@assay/core';
import type { ApiPrincipal } from '@assay/ledger';
import { apiLogger } from './log';

/** Limits on what a request may carry; documented in docs/operations.md (API). */
export const API_LIMITS = Object.freeze({ bodyBytes: 1024 * 1024, jsonDepth: 64, maxInteger: Number.MAX_SAFE_INTEGER });

/** The longest path segment the router matches as a parameter (longer: 400 API_BAD_URL). */
export const MAX_PARAM_LENGTH = 8192;

/** Keys refused anywhere in a JSON body, as the ledger's own data checks refuse them (no silent drop). */
export const FORBIDDEN_KEYS: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype']);

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * A request as the API's hooks, guards and routes see it (Fastify's, under NestJS): its request id (set first, by
 * the onRequest hook) and, once the access guard has accepted a token, who presented it. Both are declared on
 * Fastify's request prototype at start (`decorateRequest`), so every request object has the same shape.
 */
export type ApiRequest = FastifyRequest & { requestId?: string; principal?: ApiPrincipal | null };
export type ApiReply = FastifyReply;

/** The request's path without its query, as sent (not decoded): what error messages and access lines name. */
export function pathOf(req: { url: string }): string {
  const q = req.url.indexOf('?');
  return q === -1 ? req.url : req.url.slice(0, q);
}

/** Every response carries `x-request-id`: a well-formed incoming one is kept, otherwise one is made (onRequest hook). */
export function requestIdHook(req: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
  const incoming = req.headers['x-request-id'];
  const id = typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID();
  (req as ApiRequest).requestId = id;
  reply.header('x-request-id', id);
  done();
}

export function requestIdOf(req: unknown): string | undefined {
  return (req as ApiRequest | undefined)?.requestId ?? undefined;
}

/** One line on stderr (pino, level error) for every 5xx, with the request id. */
export function logServerError(req: unknown, status: number, e: unknown): void {
  const r = req as ApiRequest | undefined;
  apiLogger.error({
    requestId: r?.requestId,
    method: r?.method,
    path: r ? pathOf(r) : undefined,
    status,
    error: e instanceof Error ? `${e.name}: ${e.message}` : String(e),
  });
}

/**
 * The body parser of `application/json` requests (Fastify's own are removed: its errors would not be the API's). At
 * most API_LIMITS.bodyBytes (Fastify refuses a longer body, 413, before reading it past the limit); an empty body is
 * `{}`; text that is not JSON is API_MALFORMED_JSON (400). Depth and forbidden keys are checked later, after the
 * guards, by BodyValidationPipe.
 */
export function parseJsonBody(_req: FastifyRequest, body: string | Buffer, done: (err: Error | null, body?: unknown) => void): void {
  const text = typeof body === 'string' ? body : body.toString('utf8');
  if (text.trim() === '') {
    done(null, {});
    return;
  }
  try {
    done(null, JSON.parse(text));
  } catch {
    done(new AssayError('API_MALFORMED_JSON', 'invalid_input', 'the request body is not valid JSON'));
  }
}

/**
 * A body over the limit, as the API's error: Fastify refuses it (FST_ERR_CTP_BODY_TOO_LARGE) before any route runs,
 * and NestJS hands it to the error filter as an HttpException of status 413. Null for anything else.
 */
export function bodyTooLarge(e: unknown): AssayError | null {
  if (!(e instanceof HttpException) || e.getStatus() !== 413) return null;
  return new AssayError('API_BODY_TOO_LARGE', 'invalid_input', `the request body is over the limit of ${API_LIMITS.bodyBytes} bytes`, {
    details: { limitBytes: API_LIMITS.bodyBytes },
  });
}

/**
 * Requests Fastify's router refuses before any hook or route runs (a path with a broken percent-encoding, a path
 * parameter over the router's length limit), answered in the API's error shape with a request id and `onRequest`'s
 * other headers (the hooks given, run here by hand). Fastify's `frameworkErrors` option.
 */
export function frameworkErrorHandler(hooks: ReadonlyArray<(req: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void>) {
  return (e: { code?: string; message?: string }, req: FastifyRequest, reply: FastifyReply): void => {
    for (const hook of hooks) hook(req, reply, () => undefined);
    const path = pathOf(req);
    const shown = JSON.stringify(path.length > 200 ? `${path.slice(0, 200)}...` : path);
    const error =
      e.code === 'FST_ERR_BAD_URL'
        ? { code: 'API_BAD_URL', kind: 'invalid_input', message: `the path ${shown} has a broken percent-encoding`, details: {} }
        : e.code === 'FST_ERR_MAX_PARAM_LENGTH'
          ? { code: 'API_BAD_URL', kind: 'invalid_input', message: `a segment of the path ${shown} is over ${MAX_PARAM_LENGTH} characters`, details: {} }
          : { code: 'HTTP_400', kind: 'invalid_input', message: String(e.message ?? 'bad request'), details: {} };
    const requestId = requestIdOf(req);
    reply
      .code(400)
      .header('content-type', 'application/json; charset=utf-8')
      .send({ error: { ...error, ...(requestId ? { requestId } : {}) } });
  };
}

/** Finds the first problem in a parsed JSON value: too deep, or a forbidden key. Iterative: no stack to overflow. */
export function jsonProblem(value: unknown, maxDepth = API_LIMITS.jsonDepth): { code: string; message: string; path: string } | null {
  const stack: Array<{ v: unknown; path: string; depth: number }> = [{ v: value, path: '$', depth: 0 }];
  while (stack.length > 0) {
    const { v, path, depth } = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (depth >= maxDepth) return { code: 'API_JSON_TOO_DEEP', message: `JSON nested deeper than ${maxDepth} levels at ${path}`, path };
    if (Array.isArray(v)) {
      v.forEach((x, i) => stack.push({ v: x, path: `${path}[${i}]`, depth: depth + 1 }));
      continue;
    }
    for (const k of Object.keys(v)) {
      const p = /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(k) ? `${path}.${k}` : `${path}[${JSON.stringify(k)}]`;
      if (FORBIDDEN_KEYS.has(k)) return { code: 'API_FORBIDDEN_KEY', message: `the key "${k}" is not allowed (at ${p})`, path: p };
      stack.push({ v: (v as Record<string, unknown>)[k], path: p, depth: depth + 1 });
    }
  }
  return null;
}

/** Decimal digits only, bounded: `1e3`, `0x10`, `-1`, ` 7`, `1.0` are refused with the parameter named. */
@Injectable()
export class StrictIntPipe implements PipeTransform<unknown, number | undefined> {
  constructor(
    private readonly name: string,
    private readonly opts: { optional?: boolean; min?: number; max?: number } = {},
  ) {}

  transform(value: unknown): number | undefined {
    if (value === undefined && this.opts.optional) return undefined;
    const min = this.opts.min ?? 0;
    const max = this.opts.max ?? API_LIMITS.maxInteger;
    const n = typeof value === 'string' && /^[0-9]{1,16}$/.test(value) ? Number(value) : NaN;
    if (!Number.isSafeInteger(n) || n < min || n > max)
      throw new AssayError('API_BAD_INTEGER', 'invalid_input', `${this.name} must be a decimal integer ${min}-${max}, got ${JSON.stringify(value ?? null)}`, {
        details: { parameter: this.name },
      });
    return n;
  }
}

function flatten(errors: ValidationError[], prefix = ''): Array<{ field: string; problems: string[] }> {
  const out: Array<{ field: string; problems: string[] }> = [];
  for (const e of errors) {
    const field = prefix ? (/^\d+$/.test(e.property) ? `${prefix}[${e.property}]` : `${prefix}.${e.property}`) : e.property;
    if (e.constraints) out.push({ field, problems: Object.values(e.constraints) });
    if (e.children?.length) out.push(...flatten(e.children, field));
  }
  return out;
}

/** class-validator failures: 422 naming each field. */
export function validationError(errors: ValidationError[]): AssayError {
  const fields = flatten(errors);
  const message = fields.map((f) => `${f.field}: ${f.problems.join(', ')}`).join('; ') || 'the request body is invalid';
  return new AssayError('API_INVALID_BODY', 'invalid_input', message, { details: { fields } });
}

/**
 * The DTO checks, for bodies only: Nest's ValidationPipe would otherwise turn `0x10` or `1e3` in a path or query
 * parameter into a number (`+value`) before the strict integer pipe sees the text.
 */
export class BodyValidationPipe extends ValidationPipe {
  constructor() {
    super({ whitelist: true, forbidNonWhitelisted: true, transform: true, exceptionFactory: (errors) => validationError(errors) });
  }

  override transform(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    if (metadata.type !== 'body') return Promise.resolve(value);
    // After the guard: a caller without the token learns nothing about its body beyond 413/400 from the parser.
    const problem = jsonProblem(value);
    if (problem) throw new AssayError(problem.code, 'invalid_input', problem.message, { details: { path: problem.path, maxDepth: API_LIMITS.jsonDepth } });
    return super.transform(value, metadata);
  }
}

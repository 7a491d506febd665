import { randomUUID } from 'node:crypto';
import { Injectable, ValidationPipe, type ArgumentMetadata, type PipeTransform, type ValidationError } from '@nestjs/common';
import type { NextFunction, Request, Response } from 'express';
import { AssayError } from '@assay/core';
import { apiLogger } from './log';

/** Limits on what a request may carry; documented in docs/operations.md (API). */
export const API_LIMITS = Object.freeze({ bodyBytes: 1024 * 1024, bodyLimitText: '1mb', jsonDepth: 64, maxInteger: Number.MAX_SAFE_INTEGER });

/** Keys refused anywhere in a JSON body, as the ledger's own data checks refuse them (no silent drop). */
export const FORBIDDEN_KEYS: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype']);

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

export type WithRequestId = Request & { requestId?: string };

/** Every response carries `x-request-id`: a well-formed incoming one is kept, otherwise one is made. */
export function requestIdMiddleware(req: WithRequestId, res: Response, next: NextFunction): void {
  const incoming = req.headers['x-request-id'];
  const id = typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID();
  req.requestId = id;
  res.setHeader('x-request-id', id);
  next();
}

export function requestIdOf(req: unknown): string | undefined {
  return (req as WithRequestId | undefined)?.requestId;
}

/** One line on stderr (pino, level error) for every 5xx, with the request id. */
export function logServerError(req: unknown, status: number, e: unknown): void {
  const r = req as WithRequestId | undefined;
  apiLogger.error({
    requestId: r?.requestId,
    method: r?.method,
    path: r?.originalUrl ?? r?.url,
    status,
    error: e instanceof Error ? `${e.name}: ${e.message}` : String(e),
  });
}

export function sendError(req: unknown, res: Response, status: number, error: Record<string, unknown>): void {
  const requestId = requestIdOf(req);
  res.status(status).setHeader('Content-Type', 'application/json; charset=utf-8');
  res.json({ error: { ...error, ...(requestId ? { requestId } : {}) } });
}

/** Turns the JSON parser's own failures into the API's error shape (express's default would answer HTML). */
export function bodyParserErrorHandler(err: unknown, req: Request, res: Response, next: NextFunction): void {
  const e = err as { type?: string; status?: number; message?: string };
  if (e?.type === 'entity.too.large') {
    sendError(req, res, 413, {
      code: 'API_BODY_TOO_LARGE',
      kind: 'invalid_input',
      message: `the request body is over the limit of ${API_LIMITS.bodyBytes} bytes`,
      details: { limitBytes: API_LIMITS.bodyBytes },
    });
    return;
  }
  if (e?.type === 'entity.parse.failed') {
    sendError(req, res, 400, { code: 'API_MALFORMED_JSON', kind: 'invalid_input', message: 'the request body is not valid JSON', details: {} });
    return;
  }
  if (typeof e?.status === 'number' && e.status >= 400 && e.status < 500) {
    sendError(req, res, e.status, { code: 'HTTP_' + e.status, kind: 'invalid_input', message: String(e.message ?? 'bad request'), details: {} });
    return;
  }
  next(err);
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

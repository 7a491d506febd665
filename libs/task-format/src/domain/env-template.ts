/**
 * Environment templates, Harbor's rules made strict:
 * - a template is the WHOLE value: `${NAME}` (NAME must be supplied at run time) or `${NAME:-default}` (the supplied
 *   value when NAME is present in the host environment, even empty, else the default, as Harbor does);
 * - NAME is `[A-Za-z_][A-Za-z0-9_]*`; a default cannot contain `}`;
 * - any other value containing `${` is refused (Harbor would pass it on literally, which hides typos);
 * - everything else is a literal.
 * Resolution is a pure function of the table and a supplied environment map. Values taken from the host are
 * treated as secrets: they are returned in a redaction list and never appear in errors.
 */
import { AssayError } from '@assay/core';
import { TASK_ERROR_CODES as C } from '../task-format.errors';
import type { EnvTable } from './task-plan';

export type EnvTemplate =
  { readonly kind: 'literal'; readonly value: string } | { readonly kind: 'host'; readonly name: string; readonly fallback: string | null };

export type EnvTemplateParse = EnvTemplate | { readonly kind: 'invalid'; readonly reason: string };

const TEMPLATE = /^\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}$/;
export const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export function parseEnvTemplate(value: string): EnvTemplateParse {
  const m = TEMPLATE.exec(value);
  if (m) return { kind: 'host', name: m[1] as string, fallback: m[2] ?? null };
  if (value.includes('${')) {
    return {
      kind: 'invalid',
      reason:
        'a template must be the whole value, either ${NAME} or ${NAME:-default}, NAME made of letters, digits and _ ' +
        '(not starting with a digit) and the default without "}"',
    };
  }
  return { kind: 'literal', value };
}

/** Names of the host variables a table refers to, sorted. */
export function templateNames(env: EnvTable): string[] {
  const names = new Set<string>();
  for (const v of Object.values(env)) {
    const t = parseEnvTemplate(v);
    if (t.kind === 'host') names.add(t.name);
  }
  return [...names].sort();
}

export type HostEnv = Readonly<Record<string, string | undefined>>;

export interface ResolvedEnv {
  /** The values to pass to the container. Do not log. */
  readonly env: Readonly<Record<string, string>>;
  /** Non-empty values that came from the host environment, longest first: redact them from every log and error. */
  readonly redactions: readonly string[];
  /** Names of the variables whose value came from the host (safe to log). */
  readonly fromHost: readonly string[];
}

/**
 * Resolves a table against `host` (at run time, never at validation). Throws TASK_ENV_UNRESOLVED naming every
 * missing variable and the keys that need it; no value appears in the error.
 */
export function resolveEnvTemplates(env: EnvTable, host: HostEnv, where = 'environment.env'): ResolvedEnv {
  const out: Record<string, string> = {};
  const secrets = new Set<string>();
  const fromHost = new Set<string>();
  const missing: string[] = [];
  for (const [key, raw] of Object.entries(env)) {
    const t = parseEnvTemplate(raw);
    if (t.kind === 'invalid') {
      throw new AssayError(C.ENV_TEMPLATE, 'invalid_input', `${where}.${key}: ${t.reason}`, {
        details: { key: `${where}.${key}` },
      });
    }
    if (t.kind === 'literal') {
      out[key] = t.value;
      continue;
    }
    const supplied = Object.prototype.hasOwnProperty.call(host, t.name) ? host[t.name] : undefined;
    if (supplied !== undefined) {
      out[key] = supplied;
      fromHost.add(t.name);
      if (supplied !== '') secrets.add(supplied);
    } else if (t.fallback !== null) {
      out[key] = t.fallback;
    } else {
      missing.push(`${t.name} (for ${where}.${key})`);
    }
  }
  if (missing.length > 0) {
    throw new AssayError(
      C.ENV_UNRESOLVED,
      'invalid_input',
      `the task needs ${missing.length === 1 ? 'this variable' : 'these variables'} from the environment, ` + `with no default: ${missing.join(', ')}`,
      { details: { missing } },
    );
  }
  return Object.freeze({
    env: Object.freeze(out),
    redactions: Object.freeze([...secrets].sort((a, b) => b.length - a.length || (a < b ? -1 : 1))),
    fromHost: Object.freeze([...fromHost].sort()),
  });
}

/** Merges a phase table over the environment table (the phase wins on the same name). */
export function mergeEnv(base: EnvTable, over: EnvTable): EnvTable {
  return Object.freeze({ ...base, ...over });
}

export const REDACTED = '[REDACTED]';

/** Replaces every occurrence of every redaction (longest first) in `text`. */
export function redactText(text: string, redactions: readonly string[]): string {
  let out = text;
  for (const secret of [...redactions].sort((a, b) => b.length - a.length)) {
    if (secret !== '') out = out.split(secret).join(REDACTED);
  }
  return out;
}

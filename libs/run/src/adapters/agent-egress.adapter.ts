/**
 * How a vendor agent (network rule `allowlist`) is launched in a Work container that keeps `--network none`
 * (docs/run.md, "Vendor agents and the egress proxy"):
 *
 *   argv  assay-egress-forward --listen 127.0.0.1:3128 --socket /run/assay/egress.sock -- <the agent's argv>
 *   env   the agent's env (its API key: exec env only) + HTTPS_PROXY, https_proxy, HTTP_PROXY, http_proxy,
 *         ALL_PROXY, all_proxy = http://127.0.0.1:3128; NO_PROXY, no_proxy = '' (nothing bypasses the proxy)
 *
 * and the helpers that keep its secrets out of what is printed: `SecretStreamRedactor` (agent output, chunk
 * boundaries included) and `redactErrorSecrets` (error messages).
 */
import { StringDecoder } from 'node:string_decoder';
import { AssayError } from '@assay/core';
import { egressPolicy, type EgressPolicy } from '../domain/egress-policy';
import { REDACTED, redactSecrets, type AgentLaunchSpec, type AgentNetworkRule } from './agents.adapter';

/** The loopback port of Work's own network namespace where the forwarder listens. */
export const EGRESS_PORT = 3128;
/** Where the egress proxy's socket appears in Work (it sits next to submit.sock in the run's sock/ directory). */
export const EGRESS_SOCKET_IN_WORK = '/run/assay/egress.sock';
export const EGRESS_SOCKET_FILE = 'egress.sock';
/** Where task-runtime/egress/assay-egress-forward is mounted read-only. */
export const EGRESS_FORWARDER_IN_WORK = '/usr/local/bin/assay-egress-forward';

/** The proxy environment of an agent behind the forwarder. */
export function proxyEnv(port: number = EGRESS_PORT): Record<string, string> {
  const url = `http://127.0.0.1:${port}`;
  return { HTTPS_PROXY: url, https_proxy: url, HTTP_PROXY: url, http_proxy: url, ALL_PROXY: url, all_proxy: url, NO_PROXY: '', no_proxy: '' };
}

/** The allowlist policy of a network rule, or null for `none`. */
export function egressPolicyOf(rule: AgentNetworkRule): EgressPolicy | null {
  return rule.mode === 'allowlist' ? egressPolicy(rule.hosts, rule.ports) : null;
}

/** The launch as run in Work: the forwarder wraps the agent's argv; proxy variables added to the exec env. */
export function withEgress(l: AgentLaunchSpec, o: { port?: number; socket?: string; forwarder?: string } = {}): AgentLaunchSpec {
  if (l.network.mode !== 'allowlist') return l;
  const port = o.port ?? EGRESS_PORT;
  return {
    ...l,
    argv: [o.forwarder ?? EGRESS_FORWARDER_IN_WORK, '--listen', `127.0.0.1:${port}`, '--socket', o.socket ?? EGRESS_SOCKET_IN_WORK, '--', ...l.argv],
    env: { ...l.env, ...proxyEnv(port) },
  };
}

/** The program a launch needs in the Work image (the agent's binary, e.g. `codex`, `claude`). */
export function agentBinary(l: AgentLaunchSpec): string {
  return l.argv[0] ?? '';
}

/** The error of a vendor agent whose binary is not in the task's work image. */
export function agentBinaryMissing(l: AgentLaunchSpec, binary: string, workImage: string): AssayError {
  return new AssayError(
    'RUN_AGENT_UNAVAILABLE',
    'unavailable',
    `the ${l.name} agent needs \`${binary}\` on PATH in the task's work image (${workImage.slice(0, 19)}), and it is not there` +
      `${binary === 'python3' ? '' : ' (python3 is needed too, for the egress forwarder)'}: build the task's environment/Dockerfile with it installed ` +
      `(for example FROM assay/base:bookworm with the ${l.name === 'codex' ? '@openai/codex' : '@anthropic-ai/claude-code'} npm package and Node.js, ` +
      'from a local package mirror or a vendored file: no registry is reached at run time)',
    { details: { agent: l.name, binary } },
  );
}

/**
 * Like `redactSecrets`, but case-insensitive: for text that went through a normaliser (the egress proxy lowercases
 * host names, so a key sent as a host name comes back lowercased).
 */
export function redactSecretsAnyCase(text: string, l: AgentLaunchSpec): string {
  let out = text;
  for (const k of l.secretEnv) {
    const v = l.env[k];
    if (v && v.length >= 4) out = out.replace(new RegExp(v.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), 'gi'), REDACTED);
  }
  return out;
}

/** Replaces the launch's secret values in an error's message and stack (in place; returns it). */
export function redactErrorSecrets(e: unknown, l: AgentLaunchSpec | null): unknown {
  if (!l || l.secretEnv.length === 0 || !(e instanceof Error)) return e;
  try {
    e.message = redactSecrets(e.message, l);
    if (e.stack) e.stack = redactSecrets(e.stack, l);
  } catch {
    // a frozen error: leave it
  }
  return e;
}

/**
 * Redacts secrets from a byte stream (one per output stream): holds back only a tail that could be the start of a
 * secret, so a secret split across chunks is still caught; `end()` releases the rest.
 */
export class SecretStreamRedactor {
  private readonly secrets: string[];
  private readonly decoder = new StringDecoder('utf8');
  private pending = '';

  constructor(l: AgentLaunchSpec) {
    this.secrets = l.secretEnv.map((k) => l.env[k] ?? '').filter((v) => v.length >= 4);
  }

  push(chunk: Buffer): string {
    if (this.secrets.length === 0) return this.decoder.write(chunk);
    let text = this.pending + this.decoder.write(chunk);
    for (const s of this.secrets) text = text.split(s).join(REDACTED);
    // hold back only the longest tail that could be the start of a secret
    let hold = 0;
    for (const s of this.secrets) {
      for (let k = Math.min(s.length - 1, text.length); k > hold; k--) {
        if (text.endsWith(s.slice(0, k))) {
          hold = k;
          break;
        }
      }
    }
    this.pending = text.slice(text.length - hold);
    return text.slice(0, text.length - hold);
  }

  end(): string {
    let text = this.pending + this.decoder.end();
    this.pending = '';
    for (const s of this.secrets) text = text.split(s).join(REDACTED);
    return text;
  }
}

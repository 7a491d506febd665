/**
 * Agents behind one port: how an agent starts inside Work (argv), its environment, and the network it needs.
 *
 *   command      `bash -c <cmd>`; no secrets; network none
 *   reference    examples/agents/reference-agent mounted at /opt/assay/agent; network none
 *   codex        OpenAI Codex CLI, non-interactive; OPENAI_API_KEY from the operator's environment; api.openai.com:443
 *   claude-code  Claude Code, print mode; ANTHROPIC_API_KEY from the operator's environment; api.anthropic.com:443
 *
 * Secrets are taken from the operator's environment by name and listed in `secretEnv`: whatever is recorded or
 * logged goes through `publicLaunch` / `redactSecrets`, which never let their values through. The network rule is
 * data: `assay run` keeps Work at network `none` either way; an allowlist is served by the controller's egress proxy
 * through the in-Work forwarder (agent-egress.adapter.ts, egress-proxy.adapter.ts).
 */
import { AssayError } from '@assay/core';

export type AgentNetworkRule =
  | { readonly mode: 'none' }
  | { readonly mode: 'allowlist'; readonly hosts: readonly string[]; readonly ports: readonly number[] };

export interface AgentLaunchSpec {
  /** Recorded in RunStarted.agent. */
  readonly name: string;
  readonly model: string | null;
  readonly argv: readonly string[];
  /** The exec's environment, secrets included: never log or record it as is (publicLaunch). */
  readonly env: Readonly<Record<string, string>>;
  /** Names of env entries whose values are secrets. */
  readonly secretEnv: readonly string[];
  readonly network: AgentNetworkRule;
  /** A host directory mounted read-only at /opt/assay/agent, or null. */
  readonly mountDir: string | null;
}

export interface AgentContext {
  /** The workdir inside Work. */
  readonly workdir: string;
  /** The task's instruction (prompt for model agents). */
  readonly instruction: string;
  /** The operator's environment (secrets are read from here by name). */
  readonly operatorEnv: Readonly<Record<string, string | undefined>>;
}

export interface Agent {
  readonly kind: 'command' | 'reference' | 'codex' | 'claude-code';
  launch(ctx: AgentContext): AgentLaunchSpec;
}

export const AGENT_MOUNT = '/opt/assay/agent';
export const REDACTED = '[redacted]';

const PROTOCOL_NOTE =
  'Submit your work with `rsi-submit` (it prints the score and the feedback); `rsi-submit --list` shows your submissions. The workspace is submitted as it is.';

function agentError(message: string, details: Record<string, unknown> = {}): AssayError {
  return new AssayError('RUN_AGENT_INVALID', 'invalid_input', message, { details });
}

export class CommandAgent implements Agent {
  readonly kind = 'command' as const;
  constructor(private readonly command: string) {
    if (command.trim() === '') throw agentError('a command agent needs a command (command:<shell command>)');
  }
  launch(_ctx: AgentContext): AgentLaunchSpec {
    return { name: 'command', model: null, argv: ['bash', '-c', this.command], env: {}, secretEnv: [], network: { mode: 'none' }, mountDir: null };
  }
}

export class ReferenceAgent implements Agent {
  readonly kind = 'reference' as const;
  constructor(private readonly dir: string) {}
  launch(_ctx: AgentContext): AgentLaunchSpec {
    return { name: 'reference-agent', model: null, argv: ['bash', `${AGENT_MOUNT}/agent.sh`], env: {}, secretEnv: [], network: { mode: 'none' }, mountDir: this.dir };
  }
}

interface VendorOptions {
  readonly model?: string;
}

function secretFrom(env: Readonly<Record<string, string | undefined>>, name: string, agent: string): string {
  const v = env[name];
  if (v === undefined || v.trim() === '') throw agentError(`the ${agent} agent needs ${name} in the operator's environment`, { variable: name });
  return v;
}

export class CodexAgent implements Agent {
  readonly kind = 'codex' as const;
  static readonly KEY = 'OPENAI_API_KEY';
  static readonly HOST = 'api.openai.com';
  constructor(private readonly o: VendorOptions = {}) {}
  launch(ctx: AgentContext): AgentLaunchSpec {
    const key = secretFrom(ctx.operatorEnv, CodexAgent.KEY, 'codex');
    const model = this.o.model ?? 'gpt-5-codex';
    return {
      name: 'codex',
      model,
      argv: ['codex', 'exec', '--full-auto', '--skip-git-repo-check', '--cd', ctx.workdir, '--model', model, `${ctx.instruction}\n\n${PROTOCOL_NOTE}`],
      env: { [CodexAgent.KEY]: key, HOME: '/tmp/agent-home' },
      secretEnv: [CodexAgent.KEY],
      network: { mode: 'allowlist', hosts: [CodexAgent.HOST], ports: [443] },
      mountDir: null,
    };
  }
}

export class ClaudeCodeAgent implements Agent {
  readonly kind = 'claude-code' as const;
  static readonly KEY = 'ANTHROPIC_API_KEY';
  static readonly HOST = 'api.anthropic.com';
  constructor(private readonly o: VendorOptions = {}) {}
  launch(ctx: AgentContext): AgentLaunchSpec {
    const key = secretFrom(ctx.operatorEnv, ClaudeCodeAgent.KEY, 'claude-code');
    const model = this.o.model ?? 'claude-sonnet-4-5';
    return {
      name: 'claude-code',
      model,
      argv: ['claude', '--print', '--model', model, '--dangerously-skip-permissions', `${ctx.instruction}\n\n${PROTOCOL_NOTE}`],
      env: { [ClaudeCodeAgent.KEY]: key, HOME: '/tmp/agent-home', DISABLE_TELEMETRY: '1', DISABLE_AUTOUPDATER: '1' },
      secretEnv: [ClaudeCodeAgent.KEY],
      network: { mode: 'allowlist', hosts: [ClaudeCodeAgent.HOST], ports: [443] },
      mountDir: null,
    };
  }
}

/** `reference`, `command:<cmd>`, `codex[:model]`, `claude-code[:model]`. */
export function parseAgent(spec: string, o: { referenceDir: string }): Agent {
  if (spec === 'reference') return new ReferenceAgent(o.referenceDir);
  if (spec.startsWith('command:')) return new CommandAgent(spec.slice('command:'.length));
  const [kind, model] = spec.split(/:(.*)/s) as [string, string | undefined];
  const vendor = model !== undefined && model !== '' ? { model } : {};
  if (kind === 'codex') return new CodexAgent(vendor);
  if (kind === 'claude-code') return new ClaudeCodeAgent(vendor);
  throw agentError(`--agent must be reference, command:<cmd>, codex[:model] or claude-code[:model], got "${spec}"`, { agent: spec });
}

/** The launch as it may be logged or recorded: secret values replaced. */
export function publicLaunch(l: AgentLaunchSpec): Omit<AgentLaunchSpec, 'env'> & { env: Record<string, string> } {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(l.env)) env[k] = l.secretEnv.includes(k) ? REDACTED : v;
  return { ...l, env };
}

/** Replaces every secret value of the launch in a text (agent output, error messages) by [redacted]. */
export function redactSecrets(text: string, l: AgentLaunchSpec): string {
  let out = text;
  for (const k of l.secretEnv) {
    const v = l.env[k];
    if (v && v.length >= 4) out = out.split(v).join(REDACTED);
  }
  return out;
}

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

export type AgentNetworkRule = { readonly mode: 'none' } | { readonly mode: 'allowlist'; readonly hosts: readonly string[]; readonly ports: readonly number[] };

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
    return {
      name: 'reference-agent',
      model: null,
      argv: ['bash', `${AGENT_MOUNT}/agent.sh`],
      env: {},
      secretEnv: [],
      network: { mode: 'none' },
      mountDir: this.dir,
    };
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

/** What a vendor CLI agent needs: its API key variable and host, its default model, and how it is invoked. */
interface VendorCli {
  readonly name: 'codex' | 'claude-code';
  readonly key: string;
  readonly host: string;
  readonly defaultModel: string;
  argv(model: string, ctx: AgentContext, prompt: string): string[];
  readonly env?: Readonly<Record<string, string>>;
}

/** The launch of a vendor CLI: the key from the operator's environment, secret; the network: its API host only. */
function vendorLaunch(v: VendorCli, o: VendorOptions, ctx: AgentContext): AgentLaunchSpec {
  const key = secretFrom(ctx.operatorEnv, v.key, v.name);
  const model = o.model ?? v.defaultModel;
  return {
    name: v.name,
    model,
    argv: v.argv(model, ctx, `${ctx.instruction}\n\n${PROTOCOL_NOTE}`),
    env: { [v.key]: key, HOME: '/tmp/agent-home', ...v.env },
    secretEnv: [v.key],
    network: { mode: 'allowlist', hosts: [v.host], ports: [443] },
    mountDir: null,
  };
}

const CODEX: VendorCli = {
  name: 'codex',
  key: 'OPENAI_API_KEY',
  host: 'api.openai.com',
  defaultModel: 'gpt-5-codex',
  argv: (model, ctx, prompt) => ['codex', 'exec', '--full-auto', '--skip-git-repo-check', '--cd', ctx.workdir, '--model', model, prompt],
};

const CLAUDE_CODE: VendorCli = {
  name: 'claude-code',
  key: 'ANTHROPIC_API_KEY',
  host: 'api.anthropic.com',
  defaultModel: 'claude-sonnet-4-5',
  argv: (model, _ctx, prompt) => ['claude', '--print', '--model', model, '--dangerously-skip-permissions', prompt],
  env: { DISABLE_TELEMETRY: '1', DISABLE_AUTOUPDATER: '1' },
};

export class CodexAgent implements Agent {
  readonly kind = 'codex' as const;
  static readonly KEY = CODEX.key;
  static readonly HOST = CODEX.host;
  constructor(private readonly o: VendorOptions = {}) {}
  launch(ctx: AgentContext): AgentLaunchSpec {
    return vendorLaunch(CODEX, this.o, ctx);
  }
}

export class ClaudeCodeAgent implements Agent {
  readonly kind = 'claude-code' as const;
  static readonly KEY = CLAUDE_CODE.key;
  static readonly HOST = CLAUDE_CODE.host;
  constructor(private readonly o: VendorOptions = {}) {}
  launch(ctx: AgentContext): AgentLaunchSpec {
    return vendorLaunch(CLAUDE_CODE, this.o, ctx);
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

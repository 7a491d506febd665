/**
 * Work's egress for vendor agents (docs/run.md, "Vendor agents and the egress proxy"): Work keeps `--network none`;
 * the controller serves an HTTP CONNECT proxy on `<run>/sock/egress.sock` (seen in Work as /run/assay/egress.sock,
 * next to submit.sock); the agent runs under task-runtime/egress/assay-egress-forward, which relays Work's
 * 127.0.0.1:3128 to that socket. The allowlist is the agent's network rule.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ContainerRuntime } from '@assay/containers';
import {
  agentBinary,
  agentBinaryMissing,
  EGRESS_FORWARDER_IN_WORK,
  EGRESS_PORT,
  EGRESS_SOCKET_FILE,
  EgressProxy,
  egressPolicyOf,
  egressSummary,
  redactSecretsAnyCase,
  withEgress,
  type AgentLaunchSpec,
  type EgressLookup,
  type EgressStats,
} from '@assay/run';
import { assayRoot } from './repo-paths';

export interface WorkEgressPlan {
  /** The launch as run in Work (wrapped by the forwarder when the rule is an allowlist). */
  readonly launch: AgentLaunchSpec;
  /** Extra read-only mounts of Work (the forwarder). */
  readonly mounts: Array<{ type: 'bind'; source: string; target: string; readOnly: true }>;
  /** What WorkStarted.limits records about the network. */
  readonly limits: Record<string, string | string[] | number[]>;
}

export function forwarderPath(): string {
  return join(assayRoot(), 'task-runtime', 'egress', 'assay-egress-forward');
}

export function planWorkEgress(agent: AgentLaunchSpec): WorkEgressPlan {
  if (agent.network.mode !== 'allowlist') return { launch: agent, mounts: [], limits: { network: 'none' } };
  egressPolicyOf(agent.network); // a bad rule fails before anything starts
  return {
    launch: withEgress(agent),
    mounts: [{ type: 'bind', source: forwarderPath(), target: EGRESS_FORWARDER_IN_WORK, readOnly: true }],
    limits: { network: 'none', egress: 'connect-proxy', egressHosts: [...agent.network.hosts], egressPorts: [...agent.network.ports] },
  };
}

/** Fails cleanly (RUN_AGENT_UNAVAILABLE) when the agent's binary or python3 is not on PATH in Work. */
export async function checkAgentBinary(runtime: ContainerRuntime, container: string, agent: AgentLaunchSpec, image: string): Promise<void> {
  if (agent.network.mode !== 'allowlist') return;
  const wanted = [agentBinary(agent), 'python3'];
  let out = '';
  const exec = await runtime.exec(
    container,
    { argv: ['sh', '-c', 'for b in "$@"; do command -v "$b" >/dev/null 2>&1 || { printf %s "$b"; exit 3; }; done', 'sh', ...wanted] },
    (_s, c) => {
      if (out.length < 4096) out += c.toString('utf8');
    },
  );
  await exec.outputEnded;
  const code = await exec.exitCode();
  if (code === 3) throw agentBinaryMissing(agent, out.trim() || wanted[0]!, image);
  if (code !== 0) throw agentBinaryMissing(agent, wanted[0]!, image);
}

/** Starts the run's egress proxy on `<sockDir>/egress.sock`; each decision is logged (secrets redacted). */
export async function startEgressProxy(o: {
  sockDir: string;
  agent: AgentLaunchSpec;
  log: (line: string) => void;
  lookup?: EgressLookup;
  allowNonPublicAddresses?: boolean;
}): Promise<EgressProxy | null> {
  const policy = egressPolicyOf(o.agent.network);
  if (!policy) return null;
  const proxy = await EgressProxy.listen({
    socketPath: join(o.sockDir, EGRESS_SOCKET_FILE),
    policy,
    ...(o.lookup ? { lookup: o.lookup } : {}),
    ...(o.allowNonPublicAddresses ? { allowNonPublicAddresses: true } : {}),
    onRecord: (r) => {
      if (r.outcome !== 'allowed') o.log(redactSecretsAnyCase(`egress ${r.outcome} ${r.status} ${r.target}: ${r.reason}`, o.agent));
    },
  });
  o.log(`egress proxy on ${proxy.socketPath}: CONNECT to ${policy.hosts.join(', ')} port ${policy.ports.join(', ')} (Work: http://127.0.0.1:${EGRESS_PORT})`);
  return proxy;
}

/** Closes the proxy, logs its counts, and writes them to `<runDir>/egress.json` (secrets redacted). */
export async function stopEgressProxy(proxy: EgressProxy, o: { runDir: string; agent: AgentLaunchSpec; log: (line: string) => void }): Promise<EgressStats> {
  const s = await proxy.close();
  o.log(redactSecretsAnyCase(egressSummary(s), o.agent));
  try {
    writeFileSync(join(o.runDir, 'egress.json'), `${redactSecretsAnyCase(JSON.stringify(s, null, 2), o.agent)}\n`);
  } catch {
    // the counts are in the log line
  }
  return s;
}

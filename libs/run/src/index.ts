// Public entry of @assay/run: a research run as an event-sourced aggregate, its submission service and endpoint.
export * from './run.errors';

// domain: pure rules
export * from './domain/run-events';
export * from './domain/run-dir';
export * from './domain/run-protocol';
export * from './domain/run-state';
export * from './domain/selection';
export * from './domain/decide';
export * from './domain/editable';
export * from './domain/feedback';
export * from './domain/egress-policy';
export * from './domain/run-claims';
export * from './domain/baseline';
export * from './domain/gpu-host';

// ports
export * from './ports/run-ledger.port';
export * from './ports/snapshotter.port';
export * from './ports/judge.port';
export * from './ports/work-control.port';
export * from './ports/submission-gateway.port';
export * from './ports/gpu-host.port';

// adapters
export { MemoryRunLedger, type Expected, type ForeignEvent } from './adapters/memory-run-ledger.adapter';
export { LedgerRunLedger, recordOf } from './adapters/ledger-run-ledger.adapter';
export { FakeSnapshotter } from './adapters/fake-snapshotter.adapter';
export { FakeGpuProbe, FakeGpuRuntimeCheck } from './adapters/fake-gpu-host.adapter';
export { FakeJudge, EMPTY_OUTPUT_DIGEST, type FakeJudgeBehaviour, type EventWriter } from './adapters/fake-judge.adapter';
export { SubmitEndpoint, type SubmitEndpointOptions } from './adapters/http-submit-endpoint.adapter';
export { ContainerWorkControl } from './adapters/container-work-control.adapter';
export {
  AGENT_MOUNT,
  ClaudeCodeAgent,
  CodexAgent,
  CommandAgent,
  parseAgent,
  publicLaunch,
  redactSecrets,
  REDACTED,
  ReferenceAgent,
  type Agent,
  type AgentContext,
  type AgentLaunchSpec,
  type AgentNetworkRule,
} from './adapters/agents.adapter';
export {
  EgressProxy,
  egressSummary,
  systemLookup,
  type EgressLookup,
  type EgressProxyOptions,
  type EgressRecord,
  type EgressStats,
  type ResolvedAddress,
} from './adapters/egress-proxy.adapter';
export {
  agentBinary,
  agentBinaryMissing,
  EGRESS_FORWARDER_IN_WORK,
  EGRESS_PORT,
  EGRESS_SOCKET_FILE,
  EGRESS_SOCKET_IN_WORK,
  egressPolicyOf,
  proxyEnv,
  redactErrorSecrets,
  redactSecretsAnyCase,
  SecretStreamRedactor,
  withEgress,
} from './adapters/agent-egress.adapter';

// application
export * from './application/run-token';
export * from './application/submission-service';
export * from './application/supervise-agent';
export * from './application/work-session';
export * from './application/run-views';
export * from './application/baselines';
export * from './application/run-logs';

// the run's shared ports as a NestJS module (bound by the importing module)
export { RunModule, RunPorts, RUN_BINDING, type RunBinding, type RunModuleOptions } from './nest/run.module';

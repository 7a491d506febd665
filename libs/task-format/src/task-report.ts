/** Human-readable renderings of a plan, for the CLI and logs (no resolved values: templates only). */
import type { EnvironmentImage, NetworkPolicy, TaskPlan } from './domain/task-plan';
import { formatProblem } from './task-format.errors';

function net(n: NetworkPolicy): string {
  return n.mode === 'allowlist' ? `allowlist(${n.allowedHosts.join(',')})` : n.mode;
}

function secs(n: number | null): string {
  return n === null ? 'unset' : `${n}s`;
}

function image(i: EnvironmentImage): string {
  if (i.kind === 'dockerfile') return `built from ${i.dockerfile}`;
  return `${i.ref} (must exist locally${i.recipe === null ? '' : `; ${i.recipe} is its recipe, not built`})`;
}

function schema(plan: TaskPlan): string {
  const from =
    plan.schemaVersionSource === 'default' ? " (not declared: Harbor's default)" : plan.schemaVersionSource === 'version' ? ' (legacy version key)' : '';
  return `${plan.schemaVersion}${from}`;
}

/** One line: name, schema, GPUs, network, timeouts, image source. */
export function summarizePlan(plan: TaskPlan): string {
  const e = plan.environment;
  const image = e.image.kind === 'dockerfile' ? e.image.dockerfile : `image ${e.image.ref}`;
  return (
    `${plan.name} (schema ${plan.schemaVersion}): ` +
    `work ${e.gpus} GPU${e.gpuType ? ` ${e.gpuType}` : ''}, judge ${plan.verifier.gpus} GPU, ` +
    `network work ${net(plan.agent.network)} / judge ${net(plan.verifier.network)}, ` +
    `agent ${secs(plan.agent.timeoutSec)}, judge ${secs(plan.verifier.timeoutSec)}, ${image}`
  );
}

/** Several lines for `assay task show` without --json. */
export function describePlan(plan: TaskPlan): string[] {
  const e = plan.environment;
  const envNames = (t: Readonly<Record<string, string>>) => Object.keys(t).sort().join(', ') || '(none)';
  const rs = plan.runSettings;
  const runKeys = Object.entries(rs).map(([k, v]) => `${k}=${String(v)}`);
  return [
    `task        ${plan.name}${plan.nameSource === 'directory' ? ' (named after its directory)' : ''}`,
    `schema      ${schema(plan)}${plan.version ? `, version ${plan.version}` : ''}`,
    ...(plan.description ? [`description ${plan.description}`] : []),
    `image       ${image(e.image)}`,
    `resources   cpus ${e.cpus ?? 'unset'}, memory ${e.memoryMb === null ? 'unset' : `${e.memoryMb} MiB`}, storage ${
      e.storageMb === null ? 'unset' : `${e.storageMb} MiB`
    }, shm ${e.shmSizeBytes} bytes, build timeout ${e.buildTimeoutSec}s`,
    `gpus        work ${e.gpus}${e.gpusDeclared ? '' : ' (not declared, assumed)'}${e.gpuType ? ` x ${e.gpuType}` : ''}, judge ${plan.verifier.gpus}`,
    `workdir     ${e.workdir ?? "(the image's WORKDIR)"}`,
    `network     baseline ${net(e.network)} (${e.network.source}), agent ${net(plan.agent.network)}, judge ${net(plan.verifier.network)}`,
    `agent       timeout ${secs(plan.agent.timeoutSec)}, user ${plan.agent.user ?? 'default'}, env ${envNames(plan.agent.env)}`,
    `judge       ${plan.verifier.command.join(' ')}, timeout ${secs(plan.verifier.timeoutSec)}, user ${plan.verifier.user ?? 'default'}, env ${envNames(plan.verifier.env)}`,
    `environment env ${envNames(e.env)}`,
    `assets      ${plan.assets.length === 0 ? '(none)' : plan.assets.map((a) => `${a.phase}:${a.path}`).join(', ')}`,
    `placement   ${
      plan.requireDisjointPhaseNodes
        ? 'disjoint nodes: Work and the Judge must run on different nodes (require_disjoint_phase_nodes)'
        : 'shared nodes allowed: Work and the Judge may run on the same node'
    }`,
    `run         ${runKeys.length === 0 ? '(no [metadata.assay]; command line and defaults decide)' : runKeys.join(', ')}`,
    ...plan.warnings.map((w) => `warning     ${w.code} ${formatProblem(w)}`),
  ];
}

/**
 * The validated, immutable plan of one task directory. Plain data (JSON-serializable, deep-frozen): it carries the
 * templates of environment values, never values resolved from the host, so it can be printed, logged and recorded.
 */
import type { TaskProblem } from '../task-format.errors';
import type { JsonObject } from './json';
import type { RunSettingsOverrides } from './run-settings';

export type { JsonObject, JsonValue } from './json';

/**
 * The declared schema version, `1.<minor>`: Harbor's legacy `version = "1.0"`, Terminal-Bench 2.x `"1.1"`, the OpenRSI
 * Index's `"1.4"`, ... Harbor's task model never branches on it, and neither does Assay: it is recorded, not obeyed.
 */
export type SchemaVersion = string;

/** Where the schema version came from: `schema_version`, Harbor's legacy `version`, or Harbor's default (no key). */
export type SchemaVersionSource = 'schema_version' | 'version' | 'default';

export type NetworkMode = 'no-network' | 'public' | 'allowlist';

export interface NetworkPolicy {
  readonly mode: NetworkMode;
  /** Hostnames, `*.` wildcards, IP literals or CIDRs; non-empty exactly when mode is `allowlist`. */
  readonly allowedHosts: readonly string[];
  /** Where the policy came from: this phase's own keys, the [environment] baseline, or Assay's default. */
  readonly source: 'phase' | 'environment' | 'default';
}

/**
 * Environment variables as written in the task: literal values, or whole-value templates `${NAME}` /
 * `${NAME:-default}` that resolveEnvTemplates() resolves at run time against the host environment.
 */
export type EnvTable = { readonly [name: string]: string };

export interface Author {
  readonly name: string;
  readonly email: string | null;
}

/** How the task's environment (the image Work and the Judge start from) is obtained. */
export type EnvironmentImage =
  /** Built locally from `environment/` as the Docker build context. */
  | { readonly kind: 'dockerfile'; readonly context: 'environment'; readonly dockerfile: 'environment/Dockerfile' }
  /**
   * An image that must already exist in the local Docker daemon (no registry is ever contacted). `recipe` is
   * `environment/Dockerfile` when the task also ships one (Terminal-Bench, swebench-verified): the image is what runs,
   * the Dockerfile is how it was made; null when there is none.
   */
  | { readonly kind: 'image'; readonly ref: string; readonly recipe: 'environment/Dockerfile' | null };

export interface EnvironmentPlan {
  readonly os: 'linux';
  /** CPU limit for Work and every Judge; null: not declared (the runtime's default applies). */
  readonly cpus: number | null;
  readonly memoryMb: number | null;
  /** Recorded for planning; not a per-container quota. */
  readonly storageMb: number | null;
  /** GPUs visible to Work. */
  readonly gpus: number;
  /** False when the file declared no count (task.toml or Compose) and Harbor's default, 0, was assumed. */
  readonly gpusDeclared: boolean;
  /** The one acceptable GPU type (matched case-insensitively against device names), or null for any. */
  readonly gpuType: string | null;
  /** Absolute working directory, `/` for root mode; null: not declared (the image's WORKDIR applies). */
  readonly workdir: string | null;
  /** The baseline network policy that phases inherit unless they declare their own. */
  readonly network: NetworkPolicy;
  readonly buildTimeoutSec: number;
  readonly image: EnvironmentImage;
  /** Common user from Compose `services.main.user`, or null. */
  readonly user: string | null;
  /** /dev/shm size in bytes for Work and every Judge (Compose `shm_size`; 1 GiB when absent, as the harness). */
  readonly shmSizeBytes: number;
  /** [environment.env] over Compose `services.main.environment` (task.toml wins on the same name). */
  readonly env: EnvTable;
}

export interface AgentPlan {
  /** Agent time limit; null when the task does not set one (the run's settings decide). */
  readonly timeoutSec: number | null;
  readonly user: string | null;
  readonly network: NetworkPolicy;
  /** [agent.env]: merged over the environment's env for the agent phase only. */
  readonly env: EnvTable;
}

export interface VerifierPlan {
  /** Always `shared`: the Judge starts from the task's clean environment image, never a separately authored one. */
  readonly environmentMode: 'shared';
  readonly timeoutSec: number;
  readonly user: string | null;
  readonly network: NetworkPolicy;
  /** [verifier.env]: merged over the environment's env for the Judge only. */
  readonly env: EnvTable;
  /** GPUs visible to each Judge (metadata.rsi_harness.verifier.gpus, default 0). */
  readonly gpus: number;
  /** The command the Judge runs; tests/ is injected at /tests. */
  readonly command: readonly string[];
}

/** metadata.rsi_harness.assets: data that must exist at a container path before a phase starts. */
export interface AssetRequirement {
  readonly path: string;
  readonly phase: 'work' | 'judge';
  readonly kind: 'file' | 'directory';
  readonly minBytes: number;
  readonly minEntries: number;
}

export interface TaskFiles {
  readonly taskToml: 'task.toml';
  readonly instruction: 'instruction.md';
  readonly environment: 'environment';
  readonly tests: 'tests';
  readonly testScript: 'tests/test.sh';
  readonly solution: 'solution' | null;
  readonly compose: 'environment/docker-compose.yaml' | null;
}

export interface TaskPlan {
  readonly schemaVersion: SchemaVersion;
  readonly schemaVersionSource: SchemaVersionSource;
  /** `org/name` from [task].name, or `local/<directory name>` when the file has no [task] table. */
  readonly name: string;
  readonly nameSource: 'task' | 'directory';
  readonly version: string | null;
  readonly description: string | null;
  readonly authors: readonly Author[];
  readonly keywords: readonly string[];
  /** Provenance URL or reference (never fetched). */
  readonly source: string | null;
  readonly instruction: string;
  readonly environment: EnvironmentPlan;
  readonly agent: AgentPlan;
  readonly verifier: VerifierPlan;
  readonly assets: readonly AssetRequirement[];
  /** metadata.rsi_harness.require_disjoint_phase_nodes (multi-node placement hint). */
  readonly requireDisjointPhaseNodes: boolean;
  /** Run-level settings the task proposes in [metadata.assay]; the command line overrides them. */
  readonly runSettings: RunSettingsOverrides;
  /** All of [metadata], free-form description, as JSON (dates become RFC 3339 strings). */
  readonly metadata: JsonObject;
  readonly files: TaskFiles;
  /**
   * What is legal but probably not what the author meant (tests/test.sh downloads tools while the Judge has no
   * network, ...). Never a reason to refuse the task; `assay task validate` and `task show` print them.
   */
  readonly warnings: readonly TaskProblem[];
}

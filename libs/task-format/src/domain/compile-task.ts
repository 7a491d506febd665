/**
 * Compiles the text of a task directory (task.toml, instruction.md, the optional Compose file, tests/test.sh, which
 * files exist) into a validated, immutable TaskPlan, or into the complete list of problems. Pure: no I/O.
 *
 * Accepted: what Harbor's own task model (TaskConfig) accepts, read with Harbor's defaults: every `1.x` schema
 * version (a missing key is Harbor's default), Harbor's deprecated keys, and Harbor's empty defaults (`artifacts = []`,
 * `mcp_servers = []`, an empty `[solution.env]`), plus every key the OpenRSI Index's RSI Harness reads. Refused with
 * a reason: Harbor features Assay does not support, but only when a file actually asks for one. Refused as unknown:
 * any other key outside [metadata]. Each root cause is reported once. See docs/task-format.md, "Harbor
 * compatibility".
 */
import { isIP } from 'node:net';
import { problem, TASK_ERROR_CODES as C, type TaskProblem } from '../task-format.errors';
import { COMPOSE_FILE, readCompose, type ComposeMain } from './compose';
import { ENV_NAME, parseEnvTemplate } from './env-template';
import { readAssayMetadata, type RunSettingsOverrides } from './run-settings';
import type {
  AgentPlan,
  AssetRequirement,
  Author,
  EnvironmentImage,
  EnvironmentPlan,
  EnvTable,
  JsonObject,
  NetworkMode,
  NetworkPolicy,
  SchemaVersion,
  SchemaVersionSource,
  TaskPlan,
  VerifierPlan,
} from './task-plan';
import { findNetworkFetches } from './test-script';
import {
  checkInt,
  checkKeys,
  checkString,
  deepFreeze,
  describe,
  has,
  isTable,
  keyPath,
  parseTomlText,
  Problems,
  readBool,
  readEnum,
  readInt,
  readNumber,
  readString,
  readStringArray,
  readTable,
  tomlToJson,
  type Table,
} from './values';
import { parseYamlText } from './yaml';

export const TASK_TOML = 'task.toml';
export const INSTRUCTION_MD = 'instruction.md';
export const TEST_SCRIPT_FILE = 'tests/test.sh';
/** Schema versions Harbor has published and Assay has been checked against; any other `1.x` is read the same way. */
export const SUPPORTED_SCHEMA_VERSIONS: readonly SchemaVersion[] = ['1.0', '1.1', '1.2', '1.3', '1.4'];
/** Harbor's TaskConfig default when a file declares neither schema_version nor version. */
export const DEFAULT_SCHEMA_VERSION: SchemaVersion = '1.1';
const SCHEMA_VERSION_PATTERN = /^1\.(?:0|[1-9][0-9]{0,3})$/;

/** Harbor's default verifier and build timeouts (seconds). */
export const DEFAULT_VERIFIER_TIMEOUT_SEC = 600;
export const DEFAULT_BUILD_TIMEOUT_SEC = 600;
/** The harness's /dev/shm default when Compose sets no shm_size. */
export const DEFAULT_SHM_SIZE_BYTES = 1024 ** 3;
/** Paths the runtime mounts into containers; a working directory may not be, contain or sit under them. */
export const RESERVED_CONTAINER_PATHS: readonly string[] = ['/tests', '/logs/verifier', '/proc', '/sys', '/dev'];
export const JUDGE_TEST_COMMAND: readonly string[] = ['/bin/bash', '/tests/test.sh'];

const MAX_SECONDS = 315_360_000; // ten years: a bound, not a recommendation
const MAX_MEMORY_MB = 2 ** 40;
const MAX_STORAGE_MB = 2 ** 44;
const NAME_PATTERN = /^[a-zA-Z0-9][a-zA-Z0-9._-]*\/[a-zA-Z0-9][a-zA-Z0-9._-]*$/;
const NETWORK_MODES: readonly NetworkMode[] = ['no-network', 'public', 'allowlist'];
const USER_RULE = { nonEmpty: true, maxLength: 256, pattern: /^[A-Za-z0-9_.:-]+$/, patternHint: 'a user name or uid[:gid]' };

export interface TaskSources {
  /** Name of the task directory; the task's name when task.toml has no [task] table. */
  readonly dirName: string;
  readonly taskToml: string;
  readonly instruction: string;
  readonly hasDockerfile: boolean;
  readonly hasSolution: boolean;
  /** Text of environment/docker-compose.yaml, or null when there is none. */
  readonly compose: string | null;
  /** Text of tests/test.sh, read only for warnings; null or absent when it could not be read. */
  readonly testScript?: string | null;
}

export type TaskCompileResult =
  { readonly ok: true; readonly plan: TaskPlan; readonly problems: readonly TaskProblem[] } | { readonly ok: false; readonly problems: readonly TaskProblem[] };

const TOP_KEYS = [
  'schema_version',
  'version',
  'source',
  'task',
  'metadata',
  'environment',
  'agent',
  'verifier',
  'solution',
  'steps',
  'multi_step_reward_strategy',
  'artifacts',
];
const STEPS_REASON = 'multi-step tasks (Assay runs one continuous Work phase, judged at each submission)';
const ARTIFACTS_REASON = 'Harbor artifact collection (what is judged is the snapshot of the workspace that Assay takes)';
const MCP_SERVERS_REASON = 'MCP servers (tools served to the agent from outside its container)';
const COLLECT_REASON = 'verifier collect hooks';
const SOLUTION_ENV_REASON = 'solution environment values (the reference solution runs with the task environment)';
const TASK_KEYS = ['name', 'version', 'description', 'authors', 'keywords'];
const ENVIRONMENT_KEYS = [
  'os',
  'cpus',
  'memory_mb',
  'storage_mb',
  'memory',
  'storage',
  'gpus',
  'gpu_types',
  'workdir',
  'network_mode',
  'allowed_hosts',
  'allow_internet',
  'build_timeout_sec',
  'docker_image',
  'env',
  'mcp_servers',
];
const ENVIRONMENT_UNSUPPORTED: Readonly<Record<string, string>> = {
  tpu: 'TPU requirements',
  skills_dir: 'Harbor skills directories',
  healthcheck: 'environment healthchecks',
};
const PHASE_KEYS = ['timeout_sec', 'user', 'network_mode', 'allowed_hosts', 'env'];
const VERIFIER_UNSUPPORTED: Readonly<Record<string, string>> = {
  environment: "a separately authored verifier environment ([verifier.environment]); the Judge starts from the task's own clean image",
};
const RSI_HARNESS_KEYS = ['verifier', 'assets', 'require_disjoint_phase_nodes'];
const RSI_HARNESS_UNSUPPORTED: Readonly<Record<string, string>> = {
  sandbox: 'brokered sandbox environments (containers created on the host for code running inside Work or the Judge)',
};

// ---------------------------------------------------------------------------------------------------------------
// Shared readers
// ---------------------------------------------------------------------------------------------------------------

type ListState = 'absent' | 'empty' | 'entries' | 'invalid';

/**
 * A Harbor list that Assay supports only empty (`artifacts`, `mcp_servers`, `steps`, `verifier.collect`): absent or
 * `[]` asks for nothing and is accepted; entries are refused as unsupported, once, at the list's key.
 */
function refuseListEntries(p: Problems, t: Table, key: string, path: string, reason: string): ListState {
  if (!has(t, key)) return 'absent';
  const v = t[key];
  const at = keyPath(path, key);
  if (!Array.isArray(v)) {
    p.add(C.INVALID_TYPE, at, `expected an array, got ${describe(v)}`);
    return 'invalid';
  }
  if (v.length === 0) return 'empty';
  p.add(C.UNSUPPORTED, at, `not supported by Assay: ${reason}`);
  return 'entries';
}

/** The table form of refuseListEntries (`[solution.env]`): an empty table is accepted. */
function refuseTableEntries(p: Problems, t: Table, key: string, path: string, reason: string): void {
  const table = readTable(p, t, key, path);
  if (table !== undefined && Object.keys(table).length > 0) p.add(C.UNSUPPORTED, keyPath(path, key), `not supported by Assay: ${reason}`);
}

function readEnvTable(p: Problems, t: Table, key: string, path: string): EnvTable {
  const table = readTable(p, t, key, path);
  if (table === undefined) return {};
  const at = keyPath(path, key);
  const out: Record<string, string> = {};
  const names = Object.keys(table);
  if (names.length > 1024) {
    p.add(C.INVALID_VALUE, at, `expected at most 1024 variables, got ${names.length}`);
    return {};
  }
  for (const name of names) {
    const vAt = keyPath(at, name);
    if (!ENV_NAME.test(name)) {
      p.add(C.INVALID_VALUE, vAt, 'expected an environment variable name: letters, digits and _, not starting with a digit');
      continue;
    }
    const v = table[name];
    if (typeof v !== 'string') {
      p.add(C.INVALID_TYPE, vAt, `expected a string (quote numbers and booleans, e.g. "1"), got ${describe(v)}`);
      continue;
    }
    const s = checkString(p, vAt, v, { maxLength: 65_536 });
    if (s === undefined) continue;
    const tpl = parseEnvTemplate(s);
    if (tpl.kind === 'invalid') {
      p.add(C.ENV_TEMPLATE, vAt, tpl.reason);
      continue;
    }
    out[name] = s;
  }
  return out;
}

function checkComposeEnv(p: Problems, env: Readonly<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) {
    const tpl = parseEnvTemplate(value);
    if (tpl.kind === 'invalid') p.add(C.ENV_TEMPLATE, keyPath('services.main.environment', name), tpl.reason);
    else out[name] = value;
  }
  return out;
}

function readUser(p: Problems, t: Table, path: string): string | null {
  if (!has(t, 'user')) return null;
  const v = t.user;
  const at = keyPath(path, 'user');
  if (typeof v === 'bigint') {
    const n = checkInt(p, at, v, { min: 0, max: 2 ** 31 - 1 });
    return n === undefined ? null : String(n);
  }
  if (typeof v === 'string') return checkString(p, at, v, USER_RULE) ?? null;
  p.add(C.INVALID_TYPE, at, `expected a user name or a numeric uid, got ${describe(v)}`);
  return null;
}

// ---------------------------------------------------------------------------------------------------------------
// Network policies
// ---------------------------------------------------------------------------------------------------------------

const HOST_LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/** A hostname, a `*.` wildcard hostname, an IP literal, or an IP CIDR; returns the normalized form. */
export function normalizeAllowedHost(raw: string): string | undefined {
  const host = raw.trim().toLowerCase().replace(/\.$/, '');
  if (host === '' || host.length > 253) return undefined;
  const slash = host.indexOf('/');
  if (slash >= 0) {
    const ip = host.slice(0, slash);
    const bits = host.slice(slash + 1);
    const family = isIP(ip);
    if (family === 0 || !/^(?:0|[1-9][0-9]{0,2})$/.test(bits) || Number(bits) > (family === 4 ? 32 : 128)) return undefined;
    return host;
  }
  if (isIP(host) !== 0) return host;
  const name = host.startsWith('*.') ? host.slice(2) : host;
  const labels = name.split('.');
  return labels.length >= 1 && labels.every((l) => HOST_LABEL.test(l)) ? host : undefined;
}

interface NetworkDecl {
  readonly mode: NetworkMode | undefined;
  /** Normalized, de-duplicated; empty when allowed_hosts is absent or `[]`. */
  readonly hosts: string[];
  /** network_mode or allowed_hosts is present but could not be read (already reported): decide nothing more. */
  readonly broken: boolean;
}

function readNetworkDecl(p: Problems, t: Table, path: string): NetworkDecl {
  const mode = readEnum(p, t, 'network_mode', path, NETWORK_MODES);
  let broken = has(t, 'network_mode') && mode === undefined;
  const rawHosts = readStringArray(p, t, 'allowed_hosts', path, { nonEmpty: true, maxLength: 253, maxItems: 256 });
  if (has(t, 'allowed_hosts') && rawHosts === undefined) broken = true;
  const hosts: string[] = [];
  (rawHosts ?? []).forEach((h, i) => {
    const n = normalizeAllowedHost(h);
    if (n === undefined) {
      p.add(C.INVALID_VALUE, `${keyPath(path, 'allowed_hosts')}[${i}]`, `expected a hostname, *.hostname, IP address or CIDR, got ${describe(h)}`);
      broken = true;
    } else if (!hosts.includes(n)) hosts.push(n);
  });
  return { mode, hosts, broken };
}

/**
 * The policy a declared mode and host list mean. As in Harbor, hosts are only valid with an allowlist; an allowlist
 * without hosts allows nothing, which Harbor runs as deny-all egress and Assay records as what it is, no-network.
 */
function policy(p: Problems, mode: NetworkMode, hosts: readonly string[], path: string, source: NetworkPolicy['source']): NetworkPolicy | undefined {
  if (mode !== 'allowlist' && hosts.length > 0) {
    p.add(C.CONFLICT, keyPath(path, 'allowed_hosts'), `allowed_hosts is only valid with network_mode = "allowlist", not "${mode}"`);
    return undefined;
  }
  if (mode === 'allowlist' && hosts.length === 0) return { mode: 'no-network', allowedHosts: [], source };
  return { mode, allowedHosts: [...hosts], source };
}

/**
 * The [environment] baseline: network_mode, else allowed_hosts (which, as in Harbor, implies an allowlist), else the
 * deprecated allow_internet, else Assay's default, no-network (Harbor's default is public).
 */
function readBaselineNetwork(p: Problems, env: Table): NetworkPolicy | undefined {
  const decl = readNetworkDecl(p, env, 'environment');
  const allowInternet = readBool(p, env, 'allow_internet', 'environment');
  if (decl.broken) return undefined;
  const mode = decl.mode ?? (decl.hosts.length > 0 ? 'allowlist' : undefined);
  if (mode === undefined) {
    if (allowInternet === undefined) return { mode: 'no-network', allowedHosts: [], source: 'default' };
    return { mode: allowInternet ? 'public' : 'no-network', allowedHosts: [], source: 'environment' };
  }
  if ((allowInternet === true && mode === 'no-network') || (allowInternet === false && mode === 'public')) {
    p.add(
      C.CONFLICT,
      'environment.allow_internet',
      `allow_internet = ${String(allowInternet)} contradicts network_mode = "${mode}"; drop the deprecated allow_internet`,
    );
    return undefined;
  }
  return policy(p, mode, decl.hosts, 'environment', 'environment');
}

/** A phase override ([agent], [verifier]): declared by network_mode or a non-empty allowed_hosts; else the baseline. */
function readPhaseNetwork(p: Problems, t: Table, path: string, baseline: NetworkPolicy | undefined): NetworkPolicy | undefined {
  const decl = readNetworkDecl(p, t, path);
  if (decl.broken) return undefined;
  if (decl.mode === undefined && decl.hosts.length === 0) return baseline;
  return policy(p, decl.mode ?? 'allowlist', decl.hosts, path, 'phase');
}

// ---------------------------------------------------------------------------------------------------------------
// Working directories
// ---------------------------------------------------------------------------------------------------------------

/** "" "." "/" mean root; otherwise an absolute POSIX path without "." or ".." segments. */
export function normalizeWorkdir(raw: string): string | { error: string } {
  if (raw === '' || raw === '.' || raw === '/') return '/';
  if (!raw.startsWith('/')) return { error: 'expected an absolute path such as /workspace' };
  const trimmed = raw.length > 1 && raw.endsWith('/') ? raw.slice(0, -1) : raw;
  const parts = trimmed.split('/').slice(1);
  if (parts.some((s) => s === '' || s === '.' || s === '..')) return { error: 'expected a normalized absolute path (no //, . or .. segments)' };
  for (const r of RESERVED_CONTAINER_PATHS) {
    if (trimmed === r || trimmed.startsWith(`${r}/`) || r.startsWith(`${trimmed}/`)) {
      return { error: `${trimmed} overlaps ${r}, which the runtime owns (reserved: ${RESERVED_CONTAINER_PATHS.join(', ')})` };
    }
  }
  return trimmed;
}

function readWorkdir(p: Problems, raw: string, at: string): string | undefined {
  const s = checkString(p, at, raw, { maxLength: 4096 });
  if (s === undefined) return undefined;
  const w = normalizeWorkdir(s);
  if (typeof w === 'string') return w;
  p.add(C.INVALID_VALUE, at, `${w.error}, got ${describe(raw)}`);
  return undefined;
}

// ---------------------------------------------------------------------------------------------------------------
// Top level
// ---------------------------------------------------------------------------------------------------------------

interface SchemaInfo {
  readonly version: SchemaVersion | undefined;
  readonly source: SchemaVersionSource;
}

/**
 * schema_version, else Harbor's legacy version (Harbor renamed the key), else Harbor's default. Harbor's model never
 * branches on the value; Assay reads every `1.x` alike and refuses other majors, which may mean something else.
 */
function readSchemaVersion(p: Problems, top: Table): SchemaInfo {
  const hasNew = has(top, 'schema_version');
  const hasOld = has(top, 'version');
  if (!hasNew && !hasOld) return { version: DEFAULT_SCHEMA_VERSION, source: 'default' };
  if (hasNew && hasOld && top.schema_version !== top.version) {
    p.add(
      C.CONFLICT,
      'version',
      `schema_version = ${describeValue(top.schema_version)} and Harbor's legacy version = ${describeValue(top.version)} disagree; keep schema_version only`,
    );
    return { version: undefined, source: 'schema_version' };
  }
  const key = hasNew ? 'schema_version' : 'version';
  const v = top[key];
  if (typeof v !== 'string') {
    p.add(C.INVALID_TYPE, key, `expected a version string such as "1.4", got ${describe(v)}`);
    return { version: undefined, source: key };
  }
  if (!SCHEMA_VERSION_PATTERN.test(v)) {
    p.add(
      C.SCHEMA_VERSION,
      key,
      `unsupported schema version ${JSON.stringify(v)}; Assay reads Harbor's 1.x task files (${SUPPORTED_SCHEMA_VERSIONS.join(', ')} are published)`,
    );
    return { version: undefined, source: key };
  }
  return { version: v, source: key };
}

function describeValue(v: unknown): string {
  return typeof v === 'string' ? JSON.stringify(v) : describe(v);
}

/** steps, multi_step_reward_strategy and artifacts: Harbor's empty defaults are accepted, entries are not. */
function readHarborTopLevelLists(p: Problems, top: Table): void {
  const steps = refuseListEntries(p, top, 'steps', '', STEPS_REASON);
  // Without steps the strategy has nothing to combine (Harbor ignores it); with steps, steps is the root cause.
  if (steps !== 'entries') readEnum(p, top, 'multi_step_reward_strategy', '', ['mean', 'final']);
  refuseListEntries(p, top, 'artifacts', '', ARTIFACTS_REASON);
}

// ---------------------------------------------------------------------------------------------------------------
// [task]
// ---------------------------------------------------------------------------------------------------------------

interface TaskSection {
  readonly name: string;
  readonly nameSource: TaskPlan['nameSource'];
  readonly version: string | null;
  readonly description: string | null;
  readonly authors: Author[];
  readonly keywords: string[];
}

function localName(dirName: string): string {
  const cleaned = dirName
    .replace(/[^a-zA-Z0-9._-]+/g, '-')
    .replace(/^[^a-zA-Z0-9]+/, '')
    .slice(0, 128);
  return `local/${cleaned === '' ? 'task' : cleaned}`;
}

/** As in Harbor, an author needs a name key, which may be empty (`authors = [{ name = "" }]`). */
function readAuthors(p: Problems, t: Table): Author[] {
  if (!has(t, 'authors')) return [];
  const v = t.authors;
  if (!Array.isArray(v)) {
    p.add(C.INVALID_TYPE, 'task.authors', `expected an array of tables {name, email}, got ${describe(v)}`);
    return [];
  }
  const out: Author[] = [];
  v.forEach((a: unknown, i) => {
    const at = `task.authors[${i}]`;
    if (!isTable(a)) {
      p.add(C.INVALID_TYPE, at, `expected a table {name, email}, got ${describe(a)}`);
      return;
    }
    checkKeys(p, a, at, ['name', 'email']);
    const name = readString(p, a, 'name', at, { maxLength: 256 });
    if (!has(a, 'name')) p.add(C.MISSING_KEY, `${at}.name`, 'an author needs a name');
    const email = readString(p, a, 'email', at, { maxLength: 320 });
    if (name !== undefined) out.push({ name, email: email ?? null });
  });
  return out;
}

function readTaskSection(p: Problems, top: Table, dirName: string): TaskSection {
  const out: TaskSection = { name: localName(dirName), nameSource: 'directory', version: null, description: null, authors: [], keywords: [] };
  const task = readTable(p, top, 'task', '');
  if (task === undefined) return out;
  checkKeys(p, task, 'task', TASK_KEYS);
  if (!has(task, 'name')) p.add(C.MISSING_KEY, 'task.name', 'expected the package name in org/name form, e.g. "rsi/my-task"');
  const n = readString(p, task, 'name', 'task', {
    maxLength: 256,
    pattern: NAME_PATTERN,
    patternHint: 'org/name: letters, digits, ., _ and -, each part starting with a letter or digit',
  });
  let named: Pick<TaskSection, 'name' | 'nameSource'> = out;
  if (n !== undefined) {
    if (n.includes('..')) p.add(C.INVALID_VALUE, 'task.name', 'a task name cannot contain ".."');
    else named = { name: n, nameSource: 'task' };
  }
  return {
    ...named,
    version: readString(p, task, 'version', 'task', { maxLength: 128 }) ?? null,
    description: readString(p, task, 'description', 'task', { maxLength: 65_536 }) ?? null,
    authors: readAuthors(p, task),
    keywords: readStringArray(p, task, 'keywords', 'task', { maxLength: 256, maxItems: 256 }) ?? [],
  };
}

// ---------------------------------------------------------------------------------------------------------------
// [metadata]
// ---------------------------------------------------------------------------------------------------------------

interface RsiHarness {
  verifierGpus: number;
  assets: AssetRequirement[];
  requireDisjointPhaseNodes: boolean;
}

interface MetadataSection {
  readonly metadata: JsonObject;
  readonly harness: RsiHarness;
  readonly runSettings: RunSettingsOverrides;
}

function readAsset(p: Problems, a: unknown, at: string): AssetRequirement | undefined {
  if (!isTable(a)) {
    p.add(C.INVALID_TYPE, at, `expected a table {path, phase, kind, min_bytes, min_entries}, got ${describe(a)}`);
    return undefined;
  }
  checkKeys(p, a, at, ['path', 'phase', 'kind', 'min_bytes', 'min_entries']);
  const rawPath = readString(p, a, 'path', at, { nonEmpty: true, maxLength: 4096 });
  let assetPath: string | undefined;
  if (!has(a, 'path')) p.add(C.MISSING_KEY, `${at}.path`, 'an asset needs an absolute container path');
  else if (rawPath !== undefined) {
    const parts = rawPath.split('/').slice(1);
    if (!rawPath.startsWith('/') || rawPath === '/' || parts.some((s) => s === '..' || s === '.' || s === '')) {
      p.add(C.INVALID_VALUE, `${at}.path`, `expected an absolute, normalized, non-root container path, got ${describe(rawPath)}`);
    } else assetPath = rawPath;
  }
  const phase = readEnum(p, a, 'phase', at, ['work', 'judge'] as const);
  if (!has(a, 'phase')) p.add(C.MISSING_KEY, `${at}.phase`, 'an asset needs phase = "work" or "judge"');
  const kind = readEnum(p, a, 'kind', at, ['file', 'directory'] as const) ?? 'file';
  const minBytes = readInt(p, a, 'min_bytes', at, { min: 0, max: Number.MAX_SAFE_INTEGER }) ?? 0;
  const minEntries = readInt(p, a, 'min_entries', at, { min: 0, max: Number.MAX_SAFE_INTEGER }) ?? 0;
  return assetPath !== undefined && phase !== undefined ? { path: assetPath, phase, kind, minBytes, minEntries } : undefined;
}

function readRsiHarness(p: Problems, metadata: Table): RsiHarness {
  const out: RsiHarness = { verifierGpus: 0, assets: [], requireDisjointPhaseNodes: false };
  const path = 'metadata.rsi_harness';
  const t = readTable(p, metadata, 'rsi_harness', 'metadata');
  if (t === undefined) return out;
  checkKeys(p, t, path, RSI_HARNESS_KEYS, RSI_HARNESS_UNSUPPORTED);
  const verifier = readTable(p, t, 'verifier', path);
  if (verifier !== undefined) {
    checkKeys(p, verifier, `${path}.verifier`, ['gpus']);
    out.verifierGpus = readInt(p, verifier, 'gpus', `${path}.verifier`, { min: 0, max: 4096 }) ?? 0;
  }
  out.requireDisjointPhaseNodes = readBool(p, t, 'require_disjoint_phase_nodes', path) ?? false;
  if (has(t, 'assets')) {
    const assets = t.assets;
    if (!Array.isArray(assets)) {
      p.add(C.INVALID_TYPE, `${path}.assets`, `expected an array of tables ([[metadata.rsi_harness.assets]]), got ${describe(assets)}`);
    } else if (assets.length > 4096) {
      p.add(C.INVALID_VALUE, `${path}.assets`, `expected at most 4096 assets, got ${assets.length}`);
    } else {
      assets.forEach((a: unknown, i) => {
        const asset = readAsset(p, a, `${path}.assets[${i}]`);
        if (asset !== undefined) out.assets.push(asset);
      });
    }
  }
  return out;
}

/** Free-form description, except the namespaces that runtimes read ([metadata.rsi_harness], [metadata.assay]). */
function readMetadataSection(p: Problems, top: Table): MetadataSection {
  const meta = readTable(p, top, 'metadata', '');
  if (meta === undefined) return { metadata: {}, harness: { verifierGpus: 0, assets: [], requireDisjointPhaseNodes: false }, runSettings: {} };
  const metadata = (tomlToJson(p, meta, 'metadata') as JsonObject | undefined) ?? {};
  const harness = readRsiHarness(p, meta);
  const assay = readTable(p, meta, 'assay', 'metadata');
  return { metadata, harness, runSettings: assay === undefined ? {} : readAssayMetadata(p, assay) };
}

// ---------------------------------------------------------------------------------------------------------------
// [environment]
// ---------------------------------------------------------------------------------------------------------------

/** environment/docker-compose.yaml: none, present but refused (already reported), or read. */
type ComposeState = { readonly kind: 'none' } | { readonly kind: 'invalid' } | { readonly kind: 'ok'; readonly main: ComposeMain };

function readComposeFile(p: Problems, text: string | null): ComposeState {
  if (text === null) return { kind: 'none' };
  const parsed = parseYamlText(text, COMPOSE_FILE);
  if (!parsed.ok) {
    p.list.push(parsed.problem);
    return { kind: 'invalid' };
  }
  const main = readCompose(p.forFile(COMPOSE_FILE), parsed.value);
  return main === undefined ? { kind: 'invalid' } : { kind: 'ok', main };
}

const SIZE_STRING = /^([0-9]+(?:\.[0-9]+)?)([KMG])$/i;

/**
 * Harbor's deprecated `memory = "2G"` / `storage = "10G"`, converted to MiB as Harbor does (G x1024, K /1024, the
 * fraction dropped) and bounded like the `_mb` key it stands for.
 */
function readDeprecatedSize(p: Problems, env: Table, key: 'memory' | 'storage', newKey: string, max: number): number | undefined {
  const s = readString(p, env, key, 'environment');
  if (s === undefined) return undefined;
  const at = `environment.${key}`;
  const m = SIZE_STRING.exec(s.trim());
  if (!m) {
    p.add(C.INVALID_VALUE, at, `expected a size such as "512M" or "4G" (deprecated; prefer ${newKey}), got ${describe(s)}`);
    return undefined;
  }
  const n = Number(m[1]);
  const unit = (m[2] as string).toUpperCase();
  const mb = Math.floor(unit === 'G' ? n * 1024 : unit === 'M' ? n : n / 1024);
  if (!Number.isSafeInteger(mb) || mb > max) {
    p.add(C.INVALID_VALUE, at, `expected at most ${max} MiB (the bound of ${newKey}), got ${describe(s)}`);
    return undefined;
  }
  if (mb < 1) {
    p.add(C.INVALID_VALUE, at, `expected at least 1 MiB, got ${describe(s)}`);
    return undefined;
  }
  return mb;
}

/** `memory` next to `memory_mb` (or `storage` next to `storage_mb`): accepted when they agree, as in Harbor. */
function reconcileSize(p: Problems, env: Table, key: 'memory' | 'storage', newKey: string, mb: number | undefined, max: number): number | null {
  if (!has(env, key)) return mb ?? null;
  const old = readDeprecatedSize(p, env, key, newKey, max);
  if (!has(env, newKey)) return old ?? null;
  if (old !== undefined && mb !== undefined && old !== mb) {
    p.add(C.CONFLICT, `environment.${key}`, `${key} = ${JSON.stringify(env[key])} is ${old} MiB but ${newKey} = ${mb}; they must agree (keep ${newKey} only)`);
  }
  return mb ?? null;
}

interface Resources {
  readonly cpus: number | null;
  readonly memoryMb: number | null;
  readonly storageMb: number | null;
}

function readResources(p: Problems, env: Table): Resources {
  if (has(env, 'os')) {
    const raw = env.os;
    if (typeof raw !== 'string') p.add(C.INVALID_TYPE, 'environment.os', `expected "linux", got ${describe(raw)}`);
    else if (raw.toLowerCase() === 'windows') p.add(C.UNSUPPORTED, 'environment.os', 'not supported by Assay: Windows environments (Linux containers only)');
    else if (raw.toLowerCase() !== 'linux') p.add(C.INVALID_VALUE, 'environment.os', `expected "linux", got ${describe(raw)}`);
  }
  const cpus = readInt(p, env, 'cpus', 'environment', { min: 1, max: 4096 }) ?? null;
  const memoryMb = readInt(p, env, 'memory_mb', 'environment', { min: 1, max: MAX_MEMORY_MB });
  const storageMb = readInt(p, env, 'storage_mb', 'environment', { min: 1, max: MAX_STORAGE_MB });
  return {
    cpus,
    memoryMb: reconcileSize(p, env, 'memory', 'memory_mb', memoryMb, MAX_MEMORY_MB),
    storageMb: reconcileSize(p, env, 'storage', 'storage_mb', storageMb, MAX_STORAGE_MB),
  };
}

interface Gpus {
  readonly gpus: number;
  readonly gpusDeclared: boolean;
  readonly gpuType: string | null;
}

/** environment.gpus, else the Compose reservation, else Harbor's default, 0; and at most one GPU type. */
function readGpus(p: Problems, env: Table, compose: ComposeState): Gpus {
  const tomlGpus = readInt(p, env, 'gpus', 'environment', { min: 0, max: 4096 });
  const composeGpus = compose.kind === 'ok' ? compose.main.gpus : null;
  if (tomlGpus !== undefined && composeGpus !== null && tomlGpus !== composeGpus) {
    p.add(C.CONFLICT, 'environment.gpus', `${tomlGpus} GPUs here but ${composeGpus} in the ${COMPOSE_FILE} device reservation; they must match`);
  }
  const gpus = tomlGpus ?? composeGpus ?? 0;
  // The count is unknown when its key could not be read, or when only a refused Compose file might have declared it.
  const countUnknown = (has(env, 'gpus') && tomlGpus === undefined) || (tomlGpus === undefined && compose.kind === 'invalid');
  let gpuType: string | null = null;
  const gpuTypes = readStringArray(p, env, 'gpu_types', 'environment', { nonEmpty: true, maxLength: 256, maxItems: 64 });
  if (gpuTypes !== undefined && gpuTypes.length > 0) {
    if (gpuTypes.length > 1) p.add(C.UNSUPPORTED, 'environment.gpu_types', 'not supported by Assay: several acceptable GPU types (declare exactly one)');
    else if (gpus === 0 && !countUnknown) p.add(C.CONFLICT, 'environment.gpu_types', 'gpu_types is set but environment.gpus = 0');
    else gpuType = gpuTypes[0] ?? null;
  }
  return { gpus, gpusDeclared: tomlGpus !== undefined || composeGpus !== null, gpuType };
}

/** workdir: task.toml, else Compose working_dir; both must agree. */
function readEnvironmentWorkdir(p: Problems, env: Table, compose: ComposeState): string | null {
  const tomlWorkdirRaw = readString(p, env, 'workdir', 'environment');
  const tomlWorkdir = tomlWorkdirRaw === undefined ? undefined : readWorkdir(p, tomlWorkdirRaw, 'environment.workdir');
  const composeDir = compose.kind === 'ok' ? compose.main.workingDir : null;
  const composeWorkdir = composeDir === null ? undefined : readWorkdir(p.forFile(COMPOSE_FILE), composeDir, 'services.main.working_dir');
  if (tomlWorkdir !== undefined && composeWorkdir !== undefined && tomlWorkdir !== composeWorkdir) {
    p.add(C.CONFLICT, 'environment.workdir', `${tomlWorkdir} here but ${composeWorkdir} in ${COMPOSE_FILE} (services.main.working_dir); they must match`);
    return null;
  }
  return tomlWorkdir ?? composeWorkdir ?? null;
}

/**
 * How the environment image is obtained: a named image (docker_image or Compose image), which is what runs even when
 * environment/Dockerfile exists (it is then the image's recipe, as in Terminal-Bench and swebench-verified), or a
 * local build of environment/Dockerfile.
 */
function resolveImage(p: Problems, env: Table, dockerImage: string | undefined, compose: ComposeState, hasDockerfile: boolean): EnvironmentImage | undefined {
  // An unreadable docker_image or a refused Compose file is already reported; what they meant is unknown.
  if ((has(env, 'docker_image') && dockerImage === undefined) || compose.kind === 'invalid') return undefined;
  const main = compose.kind === 'ok' ? compose.main : null;
  if (main?.build && dockerImage !== undefined) {
    p.add(C.CONFLICT, 'environment.docker_image', `${COMPOSE_FILE} builds environment/ but docker_image is also set; keep one`);
    return undefined;
  }
  if (main !== null && main.image !== null && dockerImage !== undefined && main.image !== dockerImage) {
    p.add(C.CONFLICT, 'environment.docker_image', `docker_image differs from services.main.image in ${COMPOSE_FILE}; they must be identical`);
    return undefined;
  }
  const ref = main?.image ?? dockerImage;
  if (ref !== undefined) return { kind: 'image', ref, recipe: hasDockerfile ? 'environment/Dockerfile' : null };
  if (hasDockerfile) return { kind: 'dockerfile', context: 'environment', dockerfile: 'environment/Dockerfile' };
  p.forFile('environment/Dockerfile').add(
    C.FILE_MISSING,
    null,
    'missing: the environment is built locally from environment/Dockerfile (or name an image already in the local Docker daemon with environment.docker_image)',
  );
  return undefined;
}

interface EnvironmentSection {
  readonly resources: Resources;
  readonly gpus: Gpus;
  readonly workdir: string | null;
  readonly network: NetworkPolicy | undefined;
  readonly buildTimeoutSec: number;
  readonly image: EnvironmentImage | undefined;
  readonly compose: ComposeMain | null;
  readonly env: EnvTable;
}

function readEnvironmentSection(p: Problems, top: Table, compose: ComposeState, hasDockerfile: boolean): EnvironmentSection {
  const env = readTable(p, top, 'environment', '') ?? {};
  checkKeys(p, env, 'environment', ENVIRONMENT_KEYS, ENVIRONMENT_UNSUPPORTED);
  const resources = readResources(p, env);
  const gpus = readGpus(p, env, compose);
  const workdir = readEnvironmentWorkdir(p, env, compose);
  const network = readBaselineNetwork(p, env);
  const buildTimeoutSec = readNumber(p, env, 'build_timeout_sec', 'environment', { gt: 0, max: MAX_SECONDS }) ?? DEFAULT_BUILD_TIMEOUT_SEC;
  const dockerImage = readString(p, env, 'docker_image', 'environment', {
    nonEmpty: true,
    maxLength: 512,
    pattern: /^\S+$/,
    patternHint: 'an image reference without spaces',
  });
  const tomlEnv = readEnvTable(p, env, 'env', 'environment');
  const main = compose.kind === 'ok' ? compose.main : null;
  const composeEnv = main ? checkComposeEnv(p.forFile(COMPOSE_FILE), main.env) : {};
  refuseListEntries(p, env, 'mcp_servers', 'environment', MCP_SERVERS_REASON);
  const image = resolveImage(p, env, dockerImage, compose, hasDockerfile);
  return { resources, gpus, workdir, network, buildTimeoutSec, image, compose: main, env: { ...composeEnv, ...tomlEnv } };
}

function environmentPlan(e: EnvironmentSection, network: NetworkPolicy, image: EnvironmentImage): EnvironmentPlan {
  return {
    os: 'linux',
    ...e.resources,
    ...e.gpus,
    workdir: e.workdir,
    network,
    buildTimeoutSec: e.buildTimeoutSec,
    image,
    user: e.compose?.user ?? null,
    shmSizeBytes: e.compose?.shmSizeBytes ?? DEFAULT_SHM_SIZE_BYTES,
    env: e.env,
  };
}

// ---------------------------------------------------------------------------------------------------------------
// [agent], [verifier], [solution]
// ---------------------------------------------------------------------------------------------------------------

function readAgentSection(p: Problems, top: Table, baseline: NetworkPolicy | undefined): AgentPlan | undefined {
  const t = readTable(p, top, 'agent', '') ?? {};
  checkKeys(p, t, 'agent', PHASE_KEYS);
  const timeoutSec = readNumber(p, t, 'timeout_sec', 'agent', { gt: 0, max: MAX_SECONDS }) ?? null;
  const user = readUser(p, t, 'agent');
  const network = readPhaseNetwork(p, t, 'agent', baseline);
  const env = readEnvTable(p, t, 'env', 'agent');
  return network === undefined ? undefined : { timeoutSec, user, network, env };
}

function readVerifierSection(p: Problems, top: Table, baseline: NetworkPolicy | undefined, gpus: number): VerifierPlan | undefined {
  const t = readTable(p, top, 'verifier', '') ?? {};
  checkKeys(p, t, 'verifier', [...PHASE_KEYS, 'environment_mode', 'collect'], VERIFIER_UNSUPPORTED);
  if (has(t, 'environment_mode')) {
    const mode = t.environment_mode;
    if (mode === 'separate') {
      p.add(
        C.UNSUPPORTED,
        'verifier.environment_mode',
        'not supported by Assay: "separate" verifier environments; the Judge always starts from the task\'s own clean image ("shared")',
      );
    } else if (mode !== 'shared') {
      p.add(typeof mode === 'string' ? C.INVALID_VALUE : C.INVALID_TYPE, 'verifier.environment_mode', `expected "shared", got ${describe(mode)}`);
    }
  }
  refuseListEntries(p, t, 'collect', 'verifier', COLLECT_REASON);
  const timeoutSec = readNumber(p, t, 'timeout_sec', 'verifier', { gt: 0, max: MAX_SECONDS }) ?? DEFAULT_VERIFIER_TIMEOUT_SEC;
  const user = readUser(p, t, 'verifier');
  const network = readPhaseNetwork(p, t, 'verifier', baseline);
  const env = readEnvTable(p, t, 'env', 'verifier');
  if (network === undefined) return undefined;
  return { environmentMode: 'shared', timeoutSec, user, network, env, gpus, command: [...JUDGE_TEST_COMMAND] };
}

/** [solution]: Harbor's empty `[solution.env]` is accepted; values in it are not. */
function readSolutionSection(p: Problems, top: Table): void {
  const solution = readTable(p, top, 'solution', '');
  if (solution === undefined) return;
  checkKeys(p, solution, 'solution', ['env']);
  refuseTableEntries(p, solution, 'env', 'solution', SOLUTION_ENV_REASON);
}

// ---------------------------------------------------------------------------------------------------------------
// Warnings
// ---------------------------------------------------------------------------------------------------------------

const MAX_LISTED_FETCHES = 5;

/** tests/test.sh seems to download what it grades with, but the Judge has no network: legal, and probably a failure. */
export function judgeNetworkWarnings(testScript: string | null | undefined, verifier: NetworkPolicy): TaskProblem[] {
  if (testScript === null || testScript === undefined || verifier.mode === 'public') return [];
  const fetches = findNetworkFetches(testScript);
  if (fetches.length === 0) return [];
  const listed = fetches.slice(0, MAX_LISTED_FETCHES).map((f) => `line ${f.line}: ${f.command}`);
  if (fetches.length > MAX_LISTED_FETCHES) listed.push(`${fetches.length - MAX_LISTED_FETCHES} more`);
  const why =
    verifier.source === 'default'
      ? 'no network_mode, allowed_hosts or allow_internet is declared, and Assay defaults to no network (Harbor defaults to public)'
      : `the verifier's network policy is "${verifier.mode}"${verifier.mode === 'allowlist' ? ', which the Judge does not support' : ''}`;
  return [
    problem(
      C.TESTS_NEED_NETWORK,
      TEST_SCRIPT_FILE,
      null,
      `appears to download tools or packages (${listed.join('; ')}) but the Judge will have no network: ${why}. ` +
        'Install them in environment/Dockerfile, or set [verifier] network_mode = "public" if the Judge must download',
    ),
  ];
}

// ---------------------------------------------------------------------------------------------------------------
// The compiler
// ---------------------------------------------------------------------------------------------------------------

/** The pure compiler. */
export function compileTask(src: TaskSources): TaskCompileResult {
  const problems: TaskProblem[] = [];
  const p = new Problems(TASK_TOML, problems);

  if (src.instruction.trim() === '') p.forFile(INSTRUCTION_MD).add(C.INVALID_VALUE, null, 'the instruction is empty');
  // Compose is read even when task.toml is broken, so one pass reports both files.
  const compose = readComposeFile(p, src.compose);

  const parsed = parseTomlText(src.taskToml, TASK_TOML);
  if (!parsed.ok) {
    problems.push(parsed.problem);
    return { ok: false, problems };
  }
  const top = parsed.table;
  checkKeys(p, top, '', TOP_KEYS);
  const schema = readSchemaVersion(p, top);
  const source = readString(p, top, 'source', '', { nonEmpty: true, maxLength: 4096 }) ?? null;
  readHarborTopLevelLists(p, top);
  const task = readTaskSection(p, top, src.dirName);
  const meta = readMetadataSection(p, top);
  const environment = readEnvironmentSection(p, top, compose, src.hasDockerfile);
  const agent = readAgentSection(p, top, environment.network);
  const verifier = readVerifierSection(p, top, environment.network, meta.harness.verifierGpus);
  readSolutionSection(p, top);

  if (
    problems.length > 0 ||
    schema.version === undefined ||
    environment.network === undefined ||
    environment.image === undefined ||
    agent === undefined ||
    verifier === undefined
  ) {
    return { ok: false, problems };
  }

  const plan: TaskPlan = {
    schemaVersion: schema.version,
    schemaVersionSource: schema.source,
    ...task,
    source,
    instruction: src.instruction,
    environment: environmentPlan(environment, environment.network, environment.image),
    agent,
    verifier,
    assets: meta.harness.assets,
    requireDisjointPhaseNodes: meta.harness.requireDisjointPhaseNodes,
    runSettings: { ...meta.runSettings },
    metadata: meta.metadata,
    files: {
      taskToml: 'task.toml',
      instruction: 'instruction.md',
      environment: 'environment',
      tests: 'tests',
      testScript: 'tests/test.sh',
      solution: src.hasSolution ? 'solution' : null,
      compose: src.compose !== null ? COMPOSE_FILE : null,
    },
    warnings: judgeNetworkWarnings(src.testScript, verifier.network),
  };
  return { ok: true, plan: deepFreeze(plan), problems: [] };
}

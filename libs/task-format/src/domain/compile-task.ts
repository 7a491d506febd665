/**
 * Compiles the text of a task directory (task.toml, instruction.md, the optional Compose file, which files exist)
 * into a validated, immutable TaskPlan, or into the complete list of problems. Pure: no I/O.
 *
 * Accepted: Harbor's legacy `version = "1.0"` files and the OpenRSI Index's `schema_version = "1.4"` files with every
 * key the RSI Harness reads. Refused with a reason: Harbor features Assay does not support. Refused as unknown:
 * any other key outside [metadata]. See docs/task-format.md.
 */
import { isIP } from 'node:net';
import { TASK_ERROR_CODES as C, type TaskProblem } from '../task-format.errors';
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
  TaskPlan,
  VerifierPlan,
} from './task-plan';
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
export const SUPPORTED_SCHEMA_VERSIONS: readonly SchemaVersion[] = ['1.0', '1.4'];

/** Harbor's default verifier and build timeouts (seconds). */
export const DEFAULT_VERIFIER_TIMEOUT_SEC = 600;
export const DEFAULT_BUILD_TIMEOUT_SEC = 600;
/** The harness's /dev/shm default when Compose sets no shm_size. */
export const DEFAULT_SHM_SIZE_BYTES = 1024 ** 3;
/** Paths the runtime mounts into containers; a working directory may not be, contain or sit under them. */
export const RESERVED_CONTAINER_PATHS: readonly string[] = ['/tests', '/logs/verifier', '/proc', '/sys', '/dev'];
export const JUDGE_TEST_COMMAND: readonly string[] = ['/bin/bash', '/tests/test.sh'];

const MAX_SECONDS = 315_360_000; // ten years: a bound, not a recommendation
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
}

export type TaskCompileResult =
  { readonly ok: true; readonly plan: TaskPlan; readonly problems: readonly TaskProblem[] } | { readonly ok: false; readonly problems: readonly TaskProblem[] };

const TOP_KEYS = ['schema_version', 'version', 'source', 'task', 'metadata', 'environment', 'agent', 'verifier', 'solution'];
const TOP_UNSUPPORTED: Readonly<Record<string, string>> = {
  steps: 'multi-step tasks (Assay runs one continuous Work phase, judged at each submission)',
  multi_step_reward_strategy: 'multi-step reward strategies (there are no multi-step tasks)',
  artifacts: 'Harbor artifact collection (what is judged is the snapshot of the workspace that Assay takes)',
};
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
];
const ENVIRONMENT_UNSUPPORTED: Readonly<Record<string, string>> = {
  mcp_servers: 'MCP servers',
  tpu: 'TPU requirements',
  skills_dir: 'Harbor skills directories',
  healthcheck: 'environment healthchecks',
};
const PHASE_KEYS = ['timeout_sec', 'user', 'network_mode', 'allowed_hosts', 'env'];
const VERIFIER_UNSUPPORTED: Readonly<Record<string, string>> = {
  environment: "a separately authored verifier environment ([verifier.environment]); the Judge starts from the task's own clean image",
  collect: 'verifier collect hooks',
};
const RSI_HARNESS_KEYS = ['verifier', 'assets', 'require_disjoint_phase_nodes'];
const RSI_HARNESS_UNSUPPORTED: Readonly<Record<string, string>> = {
  sandbox: 'brokered sandbox environments (containers created on the host for code running inside Work or the Judge)',
};

function readSchemaVersion(p: Problems, top: Table): SchemaVersion | undefined {
  const hasNew = has(top, 'schema_version');
  const hasOld = has(top, 'version');
  if (hasNew && hasOld) {
    p.add(C.CONFLICT, 'version', "both schema_version and Harbor's legacy version are set; keep schema_version only");
    return undefined;
  }
  if (!hasNew && !hasOld) {
    p.add(C.SCHEMA_VERSION, 'schema_version', 'missing; declare schema_version = "1.4" (or Harbor\'s legacy version = "1.0")');
    return undefined;
  }
  const key = hasNew ? 'schema_version' : 'version';
  const v = top[key];
  if (typeof v !== 'string') {
    p.add(C.INVALID_TYPE, key, `expected the string "1.0" or "1.4", got ${describe(v)}`);
    return undefined;
  }
  if (!(SUPPORTED_SCHEMA_VERSIONS as readonly string[]).includes(v)) {
    p.add(C.SCHEMA_VERSION, key, `unsupported schema version ${JSON.stringify(v)}; Assay reads "1.0" (Harbor) and "1.4" (OpenRSI Index)`);
    return undefined;
  }
  return v as SchemaVersion;
}

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
    const name = readString(p, a, 'name', at, { nonEmpty: true, maxLength: 256 });
    if (!has(a, 'name')) p.add(C.MISSING_KEY, `${at}.name`, 'an author needs a name');
    const email = readString(p, a, 'email', at, { maxLength: 320 });
    if (name !== undefined) out.push({ name, email: email ?? null });
  });
  return out;
}

function localName(dirName: string): string {
  const cleaned = dirName
    .replace(/[^a-zA-Z0-9._-]+/g, '-')
    .replace(/^[^a-zA-Z0-9]+/, '')
    .slice(0, 128);
  return `local/${cleaned === '' ? 'task' : cleaned}`;
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

interface PhaseNetworkDecl {
  mode: NetworkMode | undefined;
  hosts: string[] | undefined;
}

function readNetworkDecl(p: Problems, t: Table, path: string): PhaseNetworkDecl {
  const mode = readEnum(p, t, 'network_mode', path, NETWORK_MODES);
  const rawHosts = readStringArray(p, t, 'allowed_hosts', path, { nonEmpty: true, maxLength: 253, maxItems: 256 });
  let hosts: string[] | undefined;
  if (rawHosts !== undefined) {
    hosts = [];
    rawHosts.forEach((h, i) => {
      const n = normalizeAllowedHost(h);
      if (n === undefined) {
        p.add(C.INVALID_VALUE, `${keyPath(path, 'allowed_hosts')}[${i}]`, `expected a hostname, *.hostname, IP address or CIDR, got ${describe(h)}`);
      } else hosts?.push(n);
    });
  }
  return { mode, hosts };
}

function policy(p: Problems, decl: PhaseNetworkDecl, path: string, source: NetworkPolicy['source']): NetworkPolicy | undefined {
  const hosts = decl.hosts ?? [];
  const mode = decl.mode ?? 'no-network';
  if (decl.mode !== 'allowlist' && hosts.length > 0) {
    p.add(C.CONFLICT, keyPath(path, 'allowed_hosts'), 'allowed_hosts is only valid with network_mode = "allowlist"');
    return undefined;
  }
  if (mode === 'allowlist' && hosts.length === 0) {
    p.add(
      decl.hosts === undefined ? C.MISSING_KEY : C.INVALID_VALUE,
      keyPath(path, 'allowed_hosts'),
      'network_mode = "allowlist" needs a non-empty allowed_hosts',
    );
    return undefined;
  }
  return { mode, allowedHosts: [...new Set(hosts)], source };
}

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

const SIZE_STRING = /^([0-9]+(?:\.[0-9]+)?)([KMG])$/i;

/** Harbor's deprecated `memory = "2G"` / `storage = "10G"`, converted to MiB as Harbor does (G x1024, K /1024). */
function readDeprecatedSize(p: Problems, env: Table, key: 'memory' | 'storage', newKey: string): number | undefined {
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
  if (!Number.isSafeInteger(mb) || mb < 1) {
    p.add(C.INVALID_VALUE, at, `expected at least 1 MiB, got ${describe(s)}`);
    return undefined;
  }
  return mb;
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

interface RsiHarness {
  verifierGpus: number;
  assets: AssetRequirement[];
  requireDisjointPhaseNodes: boolean;
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
        const at = `${path}.assets[${i}]`;
        if (!isTable(a)) {
          p.add(C.INVALID_TYPE, at, `expected a table {path, phase, kind, min_bytes, min_entries}, got ${describe(a)}`);
          return;
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
        if (assetPath !== undefined && phase !== undefined) out.assets.push({ path: assetPath, phase, kind, minBytes, minEntries });
      });
    }
  }
  return out;
}

/** The pure compiler. */
export function compileTask(src: TaskSources): TaskCompileResult {
  const problems: TaskProblem[] = [];
  const p = new Problems(TASK_TOML, problems);

  const instruction = src.instruction;
  if (instruction.trim() === '') p.forFile(INSTRUCTION_MD).add(C.INVALID_VALUE, null, 'the instruction is empty');

  // Compose is read even when task.toml is broken, so one pass reports both files.
  let compose: ComposeMain | undefined;
  if (src.compose !== null) {
    const cp = p.forFile(COMPOSE_FILE);
    const parsed = parseYamlText(src.compose, COMPOSE_FILE);
    if (!parsed.ok) problems.push(parsed.problem);
    else compose = readCompose(cp, parsed.value);
  }

  const parsed = parseTomlText(src.taskToml, TASK_TOML);
  if (!parsed.ok) {
    problems.push(parsed.problem);
    return { ok: false, problems };
  }
  const top = parsed.table;
  checkKeys(p, top, '', TOP_KEYS, TOP_UNSUPPORTED);
  const schemaVersion = readSchemaVersion(p, top);
  const source = readString(p, top, 'source', '', { nonEmpty: true, maxLength: 4096 }) ?? null;

  // [task]
  let name = localName(src.dirName);
  let nameSource: TaskPlan['nameSource'] = 'directory';
  let version: string | null = null;
  let description: string | null = null;
  let authors: Author[] = [];
  let keywords: string[] = [];
  const task = readTable(p, top, 'task', '');
  if (task !== undefined) {
    checkKeys(p, task, 'task', TASK_KEYS);
    if (!has(task, 'name')) p.add(C.MISSING_KEY, 'task.name', 'expected the package name in org/name form, e.g. "rsi/my-task"');
    const n = readString(p, task, 'name', 'task', {
      maxLength: 256,
      pattern: NAME_PATTERN,
      patternHint: 'org/name: letters, digits, ., _ and -, each part starting with a letter or digit',
    });
    if (n !== undefined) {
      if (n.includes('..')) p.add(C.INVALID_VALUE, 'task.name', 'a task name cannot contain ".."');
      else {
        name = n;
        nameSource = 'task';
      }
    }
    version = readString(p, task, 'version', 'task', { maxLength: 128 }) ?? null;
    description = readString(p, task, 'description', 'task', { maxLength: 65_536 }) ?? null;
    authors = readAuthors(p, task);
    keywords = readStringArray(p, task, 'keywords', 'task', { maxLength: 256, maxItems: 256 }) ?? [];
  }

  // [metadata]: free-form description, except the namespaces that runtimes read.
  let metadata: JsonObject = {};
  let harness: RsiHarness = { verifierGpus: 0, assets: [], requireDisjointPhaseNodes: false };
  let runSettings: RunSettingsOverrides = {};
  const meta = readTable(p, top, 'metadata', '');
  if (meta !== undefined) {
    metadata = (tomlToJson(p, meta, 'metadata') as JsonObject | undefined) ?? {};
    harness = readRsiHarness(p, meta);
    const assay = readTable(p, meta, 'assay', 'metadata');
    if (assay !== undefined) runSettings = readAssayMetadata(p, assay);
  }

  // [environment]
  const env = readTable(p, top, 'environment', '') ?? {};
  checkKeys(p, env, 'environment', ENVIRONMENT_KEYS, ENVIRONMENT_UNSUPPORTED);
  const os = 'linux';
  if (has(env, 'os')) {
    const raw = env.os;
    if (typeof raw !== 'string') p.add(C.INVALID_TYPE, 'environment.os', `expected "linux", got ${describe(raw)}`);
    else if (raw.toLowerCase() === 'windows') p.add(C.UNSUPPORTED, 'environment.os', 'not supported by Assay: Windows environments (Linux containers only)');
    else if (raw.toLowerCase() !== 'linux') p.add(C.INVALID_VALUE, 'environment.os', `expected "linux", got ${describe(raw)}`);
  }
  const cpus = readInt(p, env, 'cpus', 'environment', { min: 1, max: 4096 }) ?? null;
  let memoryMb = readInt(p, env, 'memory_mb', 'environment', { min: 1, max: 2 ** 40 }) ?? null;
  let storageMb = readInt(p, env, 'storage_mb', 'environment', { min: 1, max: 2 ** 44 }) ?? null;
  if (has(env, 'memory')) {
    if (has(env, 'memory_mb')) p.add(C.CONFLICT, 'environment.memory', 'both memory (deprecated) and memory_mb are set; keep memory_mb');
    else memoryMb = readDeprecatedSize(p, env, 'memory', 'memory_mb') ?? null;
  }
  if (has(env, 'storage')) {
    if (has(env, 'storage_mb')) p.add(C.CONFLICT, 'environment.storage', 'both storage (deprecated) and storage_mb are set; keep storage_mb');
    else storageMb = readDeprecatedSize(p, env, 'storage', 'storage_mb') ?? null;
  }
  const tomlGpus = readInt(p, env, 'gpus', 'environment', { min: 0, max: 4096 });
  const composeGpus = compose?.gpus ?? null;
  let gpus = tomlGpus ?? composeGpus ?? 0;
  const gpusDeclared = has(env, 'gpus') || composeGpus !== null;
  if (tomlGpus !== undefined && composeGpus !== null && tomlGpus !== composeGpus) {
    p.add(C.CONFLICT, 'environment.gpus', `${tomlGpus} GPUs here but ${composeGpus} in the ${COMPOSE_FILE} device reservation; they must match`);
  }
  if (!gpusDeclared && schemaVersion === '1.4') {
    p.add(C.MISSING_KEY, 'environment.gpus', 'schema 1.4 tasks must declare the Work GPU count; set environment.gpus = 0 for CPU-only Work');
  }
  if (composeGpus !== null && tomlGpus === undefined) gpus = composeGpus;
  let gpuType: string | null = null;
  const gpuTypes = readStringArray(p, env, 'gpu_types', 'environment', { nonEmpty: true, maxLength: 256, maxItems: 64 });
  if (gpuTypes !== undefined) {
    if (gpuTypes.length === 0) p.add(C.INVALID_VALUE, 'environment.gpu_types', 'expected exactly one GPU type, got an empty list');
    else if (gpuTypes.length > 1) p.add(C.UNSUPPORTED, 'environment.gpu_types', 'not supported by Assay: several acceptable GPU types (declare exactly one)');
    else if (gpus === 0) p.add(C.CONFLICT, 'environment.gpu_types', 'gpu_types is set but environment.gpus = 0');
    else gpuType = gpuTypes[0] ?? null;
  }

  // workdir: task.toml, else Compose working_dir; both must agree.
  let workdir: string | null = null;
  const tomlWorkdirRaw = readString(p, env, 'workdir', 'environment');
  const tomlWorkdir = tomlWorkdirRaw === undefined ? undefined : readWorkdir(p, tomlWorkdirRaw, 'environment.workdir');
  const composeWorkdir =
    compose === undefined || compose.workingDir === null ? undefined : readWorkdir(p.forFile(COMPOSE_FILE), compose.workingDir, 'services.main.working_dir');
  if (tomlWorkdir !== undefined && composeWorkdir !== undefined && tomlWorkdir !== composeWorkdir) {
    p.add(C.CONFLICT, 'environment.workdir', `${tomlWorkdir} here but ${composeWorkdir} in ${COMPOSE_FILE} (services.main.working_dir); they must match`);
  } else workdir = tomlWorkdir ?? composeWorkdir ?? null;

  // network baseline: network_mode, else the deprecated allow_internet, else off.
  const envNet = readNetworkDecl(p, env, 'environment');
  const allowInternet = readBool(p, env, 'allow_internet', 'environment');
  let baselineSource: NetworkPolicy['source'] = envNet.mode !== undefined ? 'environment' : 'default';
  if (allowInternet !== undefined) {
    if (envNet.mode === undefined) {
      envNet.mode = allowInternet ? 'public' : 'no-network';
      baselineSource = 'environment';
    } else if ((allowInternet === false) !== (envNet.mode === 'no-network')) {
      p.add(
        C.CONFLICT,
        'environment.allow_internet',
        `allow_internet = ${String(allowInternet)} contradicts network_mode = "${envNet.mode}"; drop the deprecated allow_internet`,
      );
    }
  }
  const baseline = policy(p, envNet, 'environment', baselineSource);

  const buildTimeoutSec = readNumber(p, env, 'build_timeout_sec', 'environment', { gt: 0, max: MAX_SECONDS }) ?? DEFAULT_BUILD_TIMEOUT_SEC;
  const dockerImage = readString(p, env, 'docker_image', 'environment', {
    nonEmpty: true,
    maxLength: 512,
    pattern: /^\S+$/,
    patternHint: 'an image reference without spaces',
  });
  const tomlEnv = readEnvTable(p, env, 'env', 'environment');
  const composeEnv = compose ? checkComposeEnv(p.forFile(COMPOSE_FILE), compose.env) : {};

  // How the environment image is obtained: exactly one of a local Dockerfile build or an existing local image.
  let image: EnvironmentImage | undefined;
  const composeImage = compose?.image ?? null;
  if (compose?.build && dockerImage !== undefined) {
    p.add(C.CONFLICT, 'environment.docker_image', `${COMPOSE_FILE} builds environment/ but docker_image is also set; keep one`);
  } else if (composeImage !== null && dockerImage !== undefined && composeImage !== dockerImage) {
    p.add(C.CONFLICT, 'environment.docker_image', `docker_image differs from services.main.image in ${COMPOSE_FILE}; they must be identical`);
  } else {
    const ref = composeImage ?? dockerImage;
    if (ref !== undefined && ref !== null) {
      if (src.hasDockerfile) {
        p.add(
          C.CONFLICT,
          'environment.docker_image',
          'an image is named and environment/Dockerfile exists; which one defines the environment is ambiguous, keep one',
        );
      } else image = { kind: 'image', ref };
    } else if (src.hasDockerfile) {
      image = { kind: 'dockerfile', context: 'environment', dockerfile: 'environment/Dockerfile' };
    } else {
      p.forFile('environment/Dockerfile').add(
        C.FILE_MISSING,
        null,
        'missing: the environment is built locally from environment/Dockerfile (or name an image already in the local Docker daemon with environment.docker_image)',
      );
    }
  }

  // [agent]
  const agentT = readTable(p, top, 'agent', '') ?? {};
  checkKeys(p, agentT, 'agent', PHASE_KEYS);
  const agentTimeout = readNumber(p, agentT, 'timeout_sec', 'agent', { gt: 0, max: MAX_SECONDS }) ?? null;
  const agentUser = readUser(p, agentT, 'agent');
  const agentNetDecl = readNetworkDecl(p, agentT, 'agent');
  const agentNet = agentNetDecl.mode !== undefined || agentNetDecl.hosts !== undefined ? policy(p, agentNetDecl, 'agent', 'phase') : baseline;
  const agentEnv = readEnvTable(p, agentT, 'env', 'agent');

  // [verifier]
  const verT = readTable(p, top, 'verifier', '') ?? {};
  checkKeys(p, verT, 'verifier', [...PHASE_KEYS, 'environment_mode'], VERIFIER_UNSUPPORTED);
  if (has(verT, 'environment_mode')) {
    const mode = verT.environment_mode;
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
  const verTimeout = readNumber(p, verT, 'timeout_sec', 'verifier', { gt: 0, max: MAX_SECONDS }) ?? DEFAULT_VERIFIER_TIMEOUT_SEC;
  const verUser = readUser(p, verT, 'verifier');
  const verNetDecl = readNetworkDecl(p, verT, 'verifier');
  const verNet = verNetDecl.mode !== undefined || verNetDecl.hosts !== undefined ? policy(p, verNetDecl, 'verifier', 'phase') : baseline;
  const verEnv = readEnvTable(p, verT, 'env', 'verifier');

  // [solution]: only its presence as a table is accepted; its env is not.
  const solution = readTable(p, top, 'solution', '');
  if (solution !== undefined) {
    checkKeys(p, solution, 'solution', [], { env: 'solution environment values (the reference solution runs with the task environment)' });
  }

  if (problems.length > 0 || schemaVersion === undefined || baseline === undefined || agentNet === undefined || verNet === undefined || image === undefined) {
    return { ok: false, problems };
  }

  const environment: EnvironmentPlan = {
    os,
    cpus,
    memoryMb,
    storageMb,
    gpus,
    gpusDeclared,
    gpuType,
    workdir,
    network: baseline,
    buildTimeoutSec,
    image,
    user: compose?.user ?? null,
    shmSizeBytes: compose?.shmSizeBytes ?? DEFAULT_SHM_SIZE_BYTES,
    env: { ...composeEnv, ...tomlEnv },
  };
  const agent: AgentPlan = { timeoutSec: agentTimeout, user: agentUser, network: agentNet, env: agentEnv };
  const verifier: VerifierPlan = {
    environmentMode: 'shared',
    timeoutSec: verTimeout,
    user: verUser,
    network: verNet,
    env: verEnv,
    gpus: harness.verifierGpus,
    command: [...JUDGE_TEST_COMMAND],
  };
  const plan: TaskPlan = {
    schemaVersion,
    name,
    nameSource,
    version,
    description,
    authors,
    keywords,
    source,
    instruction,
    environment,
    agent,
    verifier,
    assets: harness.assets,
    requireDisjointPhaseNodes: harness.requireDisjointPhaseNodes,
    runSettings: { ...runSettings },
    metadata,
    files: {
      taskToml: 'task.toml',
      instruction: 'instruction.md',
      environment: 'environment',
      tests: 'tests',
      testScript: 'tests/test.sh',
      solution: src.hasSolution ? 'solution' : null,
      compose: src.compose !== null ? COMPOSE_FILE : null,
    },
  };
  return { ok: true, plan: deepFreeze(plan), problems: [] };
}

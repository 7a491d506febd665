import { TASK_ERROR_CODES as C, type TaskProblem } from '../task-format.errors';
import { compileTask, judgeNetworkWarnings, normalizeAllowedHost, normalizeWorkdir, type TaskSources } from './compile-task';
import { findNetworkFetches } from './test-script';

const BASE_14 = `
schema_version = "1.4"
[task]
name = "rsi/example"
[environment]
gpus = 0
`;

function compile(toml: string, extra: Partial<TaskSources> = {}) {
  return compileTask({
    dirName: 'my task',
    taskToml: toml,
    instruction: 'Do the thing.',
    hasDockerfile: true,
    hasSolution: false,
    compose: null,
    ...extra,
  });
}

function plan(toml: string, extra: Partial<TaskSources> = {}) {
  const r = compile(toml, extra);
  if (!r.ok) throw new Error(`expected a plan, got:\n${r.problems.map((p) => `${p.code} ${p.key}: ${p.message}`).join('\n')}`);
  return r.plan;
}

function problems(toml: string, extra: Partial<TaskSources> = {}): TaskProblem[] {
  const r = compile(toml, extra);
  expect(r.ok).toBe(false);
  return [...r.problems];
}

function find(ps: TaskProblem[], key: string | null, code?: string): TaskProblem {
  const p = ps.find((x) => x.key === key && (code === undefined || x.code === code));
  if (!p) throw new Error(`no problem at ${String(key)} ${code ?? ''}; got ${JSON.stringify(ps.map((x) => [x.code, x.key]))}`);
  return p;
}

describe('compileTask: accepted files', () => {
  it('compiles a minimal schema 1.4 task with documented defaults, deep-frozen', () => {
    const p = plan(BASE_14);
    expect(p.schemaVersion).toBe('1.4');
    expect(p.name).toBe('rsi/example');
    expect(p.environment.gpus).toBe(0);
    expect(p.environment.image).toEqual({ kind: 'dockerfile', context: 'environment', dockerfile: 'environment/Dockerfile' });
    expect(p.environment.network).toEqual({ mode: 'no-network', allowedHosts: [], source: 'default' });
    expect(p.agent.network.mode).toBe('no-network');
    expect(p.verifier).toMatchObject({ environmentMode: 'shared', timeoutSec: 600, gpus: 0, command: ['/bin/bash', '/tests/test.sh'] });
    expect(p.environment.buildTimeoutSec).toBe(600);
    expect(p.environment.shmSizeBytes).toBe(1024 ** 3);
    expect(p.agent.timeoutSec).toBeNull();
    expect(Object.isFrozen(p) && Object.isFrozen(p.environment) && Object.isFrozen(p.environment.network.allowedHosts)).toBe(true);
    expect(() => {
      (p.environment as { gpus: number }).gpus = 3;
    }).toThrow(TypeError);
    expect(JSON.parse(JSON.stringify(p))).toEqual(p);
  });

  it('reads Harbor\'s legacy version = "1.0" files: deprecated sizes, float timeouts, no [task], no gpus', () => {
    const p = plan(`
version = "1.0"
[metadata]
difficulty = "easy"
tags = ["a"]
[verifier]
timeout_sec = 120.0
[agent]
timeout_sec = 90.5
[environment]
build_timeout_sec = 600.0
cpus = 1
memory = "2G"
storage = "512M"
allow_internet = true
`);
    expect(p.schemaVersion).toBe('1.0');
    expect(p).toMatchObject({ name: 'local/my-task', nameSource: 'directory' });
    expect(p.environment).toMatchObject({ memoryMb: 2048, storageMb: 512, gpus: 0, gpusDeclared: false, cpus: 1 });
    expect(p.environment.network).toMatchObject({ mode: 'public', source: 'environment' });
    expect(p.agent.timeoutSec).toBe(90.5);
    expect(p.verifier.timeoutSec).toBe(120);
    expect(p.metadata).toEqual({ difficulty: 'easy', tags: ['a'] });
  });

  it('keeps [metadata] free-form, converting TOML values to JSON', () => {
    const p = plan(`${BASE_14}
[metadata]
anything = { nested = [1, 2.5, "x", true] }
when = 1979-05-27T07:32:00Z
[metadata.provenance]
repository = "https://example.invalid/x"
`);
    expect(p.metadata).toEqual({
      anything: { nested: [1, 2.5, 'x', true] },
      when: '1979-05-27T07:32:00.000Z',
      provenance: { repository: 'https://example.invalid/x' },
    });
  });

  it('reads every [environment], [agent] and [verifier] key the harness reads', () => {
    const p = plan(`
schema_version = "1.4"
source = "https://example.invalid/src"
[task]
name = "org/t.x_y-z"
version = "2.0"
description = "d"
authors = [{ name = "A", email = "a@example.invalid" }, { name = "B" }]
keywords = ["k"]
[environment]
os = "Linux"
cpus = 4
memory_mb = 16384
storage_mb = 30720
gpus = 2
gpu_types = ["NVIDIA H100 NVL"]
workdir = "/testbed/"
network_mode = "allowlist"
allowed_hosts = ["API.example.com.", "*.example.org", "192.0.2.10/32", "2001:db8::1"]
build_timeout_sec = 1800
[environment.env]
PLAIN = "value"
OPTIONAL_PORT = "\${OPTIONAL_PORT:-8000}"
TOKEN = "\${PRIVATE_TOKEN}"
[agent]
timeout_sec = 3600
user = "root"
network_mode = "public"
[agent.env]
AGENT_ONLY = "1"
[verifier]
timeout_sec = 1200
user = 1000
network_mode = "no-network"
environment_mode = "shared"
[verifier.env]
VERIFIER_TOKEN = "\${VERIFIER_TOKEN}"
[metadata.rsi_harness]
require_disjoint_phase_nodes = true
[metadata.rsi_harness.verifier]
gpus = 2
[[metadata.rsi_harness.assets]]
path = "/rsi-data/x"
phase = "judge"
kind = "directory"
min_entries = 3
`);
    expect(p).toMatchObject({ name: 'org/t.x_y-z', version: '2.0', description: 'd', source: 'https://example.invalid/src', keywords: ['k'] });
    expect(p.authors).toEqual([
      { name: 'A', email: 'a@example.invalid' },
      { name: 'B', email: null },
    ]);
    expect(p.environment).toMatchObject({
      cpus: 4,
      memoryMb: 16384,
      storageMb: 30720,
      gpus: 2,
      gpuType: 'NVIDIA H100 NVL',
      workdir: '/testbed',
      buildTimeoutSec: 1800,
    });
    expect(p.environment.network).toEqual({
      mode: 'allowlist',
      allowedHosts: ['api.example.com', '*.example.org', '192.0.2.10/32', '2001:db8::1'],
      source: 'environment',
    });
    expect(p.environment.env).toEqual({ PLAIN: 'value', OPTIONAL_PORT: '${OPTIONAL_PORT:-8000}', TOKEN: '${PRIVATE_TOKEN}' });
    expect(p.agent).toMatchObject({ timeoutSec: 3600, user: 'root', env: { AGENT_ONLY: '1' } });
    expect(p.agent.network).toEqual({ mode: 'public', allowedHosts: [], source: 'phase' });
    expect(p.verifier).toMatchObject({ timeoutSec: 1200, user: '1000', gpus: 2, env: { VERIFIER_TOKEN: '${VERIFIER_TOKEN}' } });
    expect(p.verifier.network.mode).toBe('no-network');
    expect(p.requireDisjointPhaseNodes).toBe(true);
    expect(p.assets).toEqual([{ path: '/rsi-data/x', phase: 'judge', kind: 'directory', minBytes: 0, minEntries: 3 }]);
  });

  it('lets phases inherit the environment baseline unless they declare their own', () => {
    const p = plan(`${BASE_14}network_mode = "public"\n[verifier]\nnetwork_mode = "no-network"\n`);
    expect(p.agent.network).toEqual({ mode: 'public', allowedHosts: [], source: 'environment' });
    expect(p.verifier.network).toEqual({ mode: 'no-network', allowedHosts: [], source: 'phase' });
  });

  it('names an existing local image with docker_image when there is no Dockerfile', () => {
    const p = plan(`${BASE_14}docker_image = "assay/base:bookworm"\n`, { hasDockerfile: false });
    expect(p.environment.image).toEqual({ kind: 'image', ref: 'assay/base:bookworm', recipe: null });
  });

  it('takes run settings from [metadata.assay]', () => {
    const p = plan(`${BASE_14}[metadata.assay]
primary_metric = "accuracy"
direction = "minimize"
max_submissions = 7
cooldown_sec = 30
time_budget_sec = 3600.5
gpu_budget_hours = 12
`);
    expect(p.runSettings).toEqual({
      primaryMetric: 'accuracy',
      direction: 'minimize',
      maxSubmissions: 7,
      cooldownSec: 30,
      timeBudgetSec: 3600.5,
      gpuBudgetSec: 43200,
    });
  });

  it('reads the GPU budget in seconds (gpu_budget_sec) and the Work pause setting; hours and seconds together are refused', () => {
    expect(plan(`${BASE_14}[metadata.assay]\ngpu_budget_sec = 900\npause_work_during_judge = true\n`).runSettings).toEqual({
      gpuBudgetSec: 900,
      pauseWorkDuringJudge: true,
    });
    expect(problems(`${BASE_14}[metadata.assay]\ngpu_budget_sec = 900\ngpu_budget_hours = 1\n`).map((x) => x.key)).toContain('metadata.assay.gpu_budget_hours');
    expect(problems(`${BASE_14}[metadata.assay]\npause_work_during_judge = "yes"\n`).map((x) => x.key)).toContain('metadata.assay.pause_work_during_judge');
  });
});

describe("compileTask: what Harbor's task model accepts", () => {
  it("accepts Harbor's empty defaults: artifacts, steps, mcp_servers, collect, gpu_types and an empty [solution.env]", () => {
    const p = plan(`
schema_version = "1.1"
artifacts = []
steps = []
multi_step_reward_strategy = "mean"
[environment]
mcp_servers = []
gpu_types = []
[environment.env]
[verifier]
collect = []
[verifier.env]
[solution.env]
`);
    expect(p.environment).toMatchObject({ gpus: 0, gpuType: null, env: {} });
    expect(p.verifier.env).toEqual({});
  });

  it('refuses what asks for something, naming the file, the key and the reason', () => {
    const ps = problems(`
schema_version = "1.1"
artifacts = ["/app/out.json"]
[environment]
mcp_servers = [{ name = "m", transport = "stdio", command = "srv" }]
[verifier]
collect = [{ command = "true" }]
[solution.env]
OPENAI_API_KEY = "\${OPENAI_API_KEY}"
`);
    expect(ps.map((x) => [x.code, x.file, x.key, x.message])).toEqual([
      [
        C.UNSUPPORTED,
        'task.toml',
        'artifacts',
        'not supported by Assay: Harbor artifact collection (what is judged is the snapshot of the workspace that Assay takes)',
      ],
      [C.UNSUPPORTED, 'task.toml', 'environment.mcp_servers', 'not supported by Assay: MCP servers (tools served to the agent from outside its container)'],
      [C.UNSUPPORTED, 'task.toml', 'verifier.collect', 'not supported by Assay: verifier collect hooks'],
      [
        C.UNSUPPORTED,
        'task.toml',
        'solution.env',
        'not supported by Assay: solution environment values (the reference solution runs with the task environment)',
      ],
    ]);
    expect(find(problems('artifacts = "x"\n'), 'artifacts', C.INVALID_TYPE).message).toBe('expected an array, got the string "x"');
    expect(find(problems('multi_step_reward_strategy = "max"\n'), 'multi_step_reward_strategy', C.INVALID_VALUE).message).toContain('"mean", "final"');
  });

  it('reads a file without a schema key with Harbor\'s default schema version, and "1.1" as declared', () => {
    const none = plan('[environment]\ncpus = 2\n');
    expect(none).toMatchObject({ schemaVersion: '1.1', schemaVersionSource: 'default' });
    expect(plan('schema_version = "1.1"\n')).toMatchObject({ schemaVersion: '1.1', schemaVersionSource: 'schema_version' });
    expect(plan('version = "1.1"\n')).toMatchObject({ schemaVersion: '1.1', schemaVersionSource: 'version' });
    expect(plan('schema_version = "1.3"\n').schemaVersion).toBe('1.3');
    expect(plan('schema_version = "1.4"\nversion = "1.4"\n').schemaVersionSource).toBe('schema_version');
  });

  it('accepts an author whose name is empty, as Harbor does; the name key itself is still required', () => {
    expect(plan('[task]\nname = "a/b"\nauthors = [{name = ""}]\n').authors).toEqual([{ name: '', email: null }]);
    const missing = find(problems('[task]\nname = "a/b"\nauthors = [{email = "x@example.invalid"}]\n'), 'task.authors[0].name', C.MISSING_KEY);
    expect(missing).toMatchObject({ file: 'task.toml', message: 'an author needs a name' });
  });

  it('accepts memory next to memory_mb (and storage next to storage_mb) when they agree, as Harbor does', () => {
    expect(plan(`${BASE_14}memory = "2G"\nmemory_mb = 2048\nstorage = "10G"\nstorage_mb = 10240\n`).environment).toMatchObject({
      memoryMb: 2048,
      storageMb: 10240,
    });
    const ps = problems(`${BASE_14}memory = "2G"\nmemory_mb = 1024\nstorage = "1G"\nstorage_mb = 2048\n`);
    expect(find(ps, 'environment.memory', C.CONFLICT).message).toBe('memory = "2G" is 2048 MiB but memory_mb = 1024; they must agree (keep memory_mb only)');
    expect(find(ps, 'environment.storage', C.CONFLICT).message).toBe(
      'storage = "1G" is 1024 MiB but storage_mb = 2048; they must agree (keep storage_mb only)',
    );
    // A bad memory_mb is reported once, without a follow-on disagreement.
    expect(problems(`${BASE_14}memory = "2G"\nmemory_mb = "2048"\n`).map((x) => [x.code, x.key])).toEqual([[C.INVALID_TYPE, 'environment.memory_mb']]);
  });

  it('bounds the deprecated size strings like the _mb keys they stand for', () => {
    const huge = find(problems(`${BASE_14}memory = "2000000000G"\n`), 'environment.memory', C.INVALID_VALUE);
    expect(huge.message).toBe('expected at most 1099511627776 MiB (the bound of memory_mb), got the string "2000000000G"');
    const same = find(problems(`${BASE_14}memory_mb = ${2_000_000_000 * 1024}\n`), 'environment.memory_mb', C.INVALID_VALUE);
    expect(same.message).toContain('to 1099511627776');
    expect(find(problems(`${BASE_14}storage = "99999999999999999999G"\n`), 'environment.storage', C.INVALID_VALUE).message).toContain(
      'the bound of storage_mb',
    );
    expect(find(problems(`${BASE_14}memory = "512K"\n`), 'environment.memory', C.INVALID_VALUE).message).toContain('at least 1 MiB');
    expect(plan(`${BASE_14}memory = "1024G"\n`).environment.memoryMb).toBe(1024 * 1024);
  });

  it('reports an unreadable GPU count once, without a follow-on about gpu_types', () => {
    expect(problems(`${BASE_14.replace('gpus = 0', 'gpus = "2"')}gpu_types = ["H100"]\n`).map((x) => x.key)).toEqual(['environment.gpus']);
    find(problems(`${BASE_14}gpu_types = ["H100"]\n`), 'environment.gpu_types', C.CONFLICT);
  });
});

describe('compileTask: warnings', () => {
  const DOWNLOADS =
    '#!/bin/bash\n# curl https://example.invalid is only a comment\napt-get update\napt-get install -y curl\ncurl -LsSf https://astral.sh/uv/install.sh | sh\nuvx pytest /tests\n';

  it('warns, without refusing, when tests/test.sh downloads tools and the Judge has no network', () => {
    const r = compile(BASE_14, { testScript: DOWNLOADS });
    expect(r.ok).toBe(true);
    expect(r.problems).toEqual([]);
    const p = plan(BASE_14, { testScript: DOWNLOADS });
    expect(p.warnings).toEqual([
      {
        code: C.TESTS_NEED_NETWORK,
        file: 'tests/test.sh',
        key: null,
        message:
          'appears to download tools or packages (line 3: apt-get; line 4: apt-get; line 5: curl; line 6: uv) but the Judge will have no network: ' +
          'no network_mode, allowed_hosts or allow_internet is declared, and Assay defaults to no network (Harbor defaults to public). ' +
          'Install them in environment/Dockerfile, or set [verifier] network_mode = "public" if the Judge must download',
      },
    ]);
    expect(plan(`${BASE_14}network_mode = "no-network"\n`, { testScript: DOWNLOADS }).warnings[0]?.message).toContain(
      'the verifier\'s network policy is "no-network"',
    );
  });

  it('does not warn when the Judge has the public network, or the script works offline', () => {
    expect(plan(`${BASE_14}[verifier]\nnetwork_mode = "public"\n`, { testScript: DOWNLOADS }).warnings).toEqual([]);
    expect(plan(`${BASE_14}allow_internet = true\n`, { testScript: DOWNLOADS }).warnings).toEqual([]);
    expect(plan(BASE_14, { testScript: '#!/bin/bash\npip install --no-index --find-links /tests/wheels pkg\npytest /tests\n' }).warnings).toEqual([]);
    expect(plan(BASE_14).warnings).toEqual([]);
  });

  it('lists at most five downloads', () => {
    const w = judgeNetworkWarnings('pip install a\n'.repeat(7), { mode: 'no-network', allowedHosts: [], source: 'phase' });
    expect(w[0]?.message).toContain('line 5: pip install; 2 more)');
  });
});

describe('findNetworkFetches', () => {
  it.each([
    ['curl -fsSL https://x.invalid/a.sh | bash', 'curl'],
    ['wget -q http://x.invalid/f', 'wget'],
    ['git clone https://github.com/a/b.git /opt/b', 'git clone'],
    ['apt-get -qq update', 'apt-get'],
    ['apt install -y jq', 'apt-get'],
    ['apk add --no-cache bash', 'apk add'],
    ['pip3 install pytest==8.4.1', 'pip install'],
    ['python3 -m pip install -q pytest', 'pip install'],
    ['uv pip install pytest', 'uv'],
    ['uvx -p 3.13 -w pytest pytest', 'uv'],
    ['uv run --with pytest pytest', 'uv'],
    ['npm ci', 'npm install'],
    ['cargo install ripgrep', 'cargo install'],
    ['if true; then pip install x; fi', 'pip install'],
  ])('finds %j', (line, command) => expect(findNetworkFetches(`#!/bin/sh\n${line}\n`)).toEqual([{ line: 2, command }]));

  it.each([
    '# pip install x',
    'echo "curl is not used"',
    'curl -s localhost:8000/health',
    '/opt/curl-cache/run',
    'pip install --no-index -f /wheels x',
    'uv sync --offline',
    'pytest /tests # then apt-get install nothing',
    'python -m pytest',
  ])('ignores %j', (line) => expect(findNetworkFetches(`${line}\n`)).toEqual([]));
});

describe('compileTask: refused files name the file, the key and what was expected', () => {
  it('reports every type error at once, not just the first', () => {
    const ps = problems(`
schema_version = "1.4"
[environment]
gpus = "2"
cpus = 1.5
memory_mb = "1024"
storage_mb = true
build_timeout_sec = "600"
[agent]
timeout_sec = true
[verifier]
timeout_sec = "60"
`);
    for (const key of [
      'environment.gpus',
      'environment.cpus',
      'environment.memory_mb',
      'environment.storage_mb',
      'environment.build_timeout_sec',
      'agent.timeout_sec',
      'verifier.timeout_sec',
    ]) {
      const p = find(ps, key, C.INVALID_TYPE);
      expect(p.file).toBe('task.toml');
      expect(p.message).toMatch(/^expected (an integer|a number)/);
    }
    expect(find(ps, 'environment.gpus').message).toContain('got the string "2"');
    expect(find(ps, 'environment.storage_mb').message).toContain('got the boolean true');
    expect(find(ps, 'environment.cpus').message).toContain('got the float 1.5');
  });

  it("refuses a GPU count written as a float or a negative count; a missing count is Harbor's default, 0, in every schema", () => {
    expect(find(problems('schema_version = "1.4"\n[environment]\ngpus = 1.0\n'), 'environment.gpus').message).toContain('got the float 1.0');
    expect(find(problems('schema_version = "1.4"\n[environment]\ngpus = -1\n'), 'environment.gpus', C.INVALID_VALUE).message).toContain('from 0 to 4096');
    expect(plan('schema_version = "1.4"\n[environment]\ncpus = 1\n').environment).toMatchObject({ gpus: 0, gpusDeclared: false, cpus: 1 });
    expect(find(problems(`${BASE_14}[metadata.rsi_harness.verifier]\ngpus = "1"\n`), 'metadata.rsi_harness.verifier.gpus', C.INVALID_TYPE)).toBeDefined();
  });

  it('refuses unknown keys outside [metadata], with the allowed keys listed', () => {
    const ps = problems(`${BASE_14}colour = "blue"\n`);
    expect(find(ps, 'environment.colour', C.UNKNOWN_KEY).message).toContain('expected one of: os, cpus');
    const more = problems(
      `${BASE_14}[agent]\nprompt_prefix = "x"\n[oracle]\nenv = {}\n[metadata.rsi_harness]\nextra = 1\n[metadata.rsi_harness.verifier]\ngpus = 0\ncpus = 1\n`,
    );
    find(more, 'agent.prompt_prefix', C.UNKNOWN_KEY);
    find(more, 'oracle', C.UNKNOWN_KEY);
    find(more, 'metadata.rsi_harness.extra', C.UNKNOWN_KEY);
    find(more, 'metadata.rsi_harness.verifier.cpus', C.UNKNOWN_KEY);
  });

  it('refuses Harbor features Assay does not support, saying which, once per feature', () => {
    const ps = problems(`
schema_version = "1.4"
multi_step_reward_strategy = "mean"
artifacts = ["/app/out"]
[[steps]]
name = "one"
[task]
name = "rsi/x"
[environment]
gpus = 1
os = "windows"
gpu_types = ["H100", "A100"]
skills_dir = "/skills"
tpu = { type = "v5", topology = "2x2" }
[environment.healthcheck]
command = "true"
[[environment.mcp_servers]]
name = "m"
[verifier]
environment_mode = "separate"
collect = ["x"]
[verifier.environment]
cpus = 1
[solution]
env = { K = "v" }
[metadata.rsi_harness.sandbox]
version = 2
`);
    for (const key of [
      'steps',
      'artifacts',
      'environment.os',
      'environment.gpu_types',
      'environment.skills_dir',
      'environment.tpu',
      'environment.healthcheck',
      'environment.mcp_servers',
      'verifier.environment_mode',
      'verifier.collect',
      'verifier.environment',
      'solution.env',
      'metadata.rsi_harness.sandbox',
    ]) {
      const p = find(ps, key, C.UNSUPPORTED);
      expect(p.file).toBe('task.toml');
      expect(p.message).toMatch(/^not supported by Assay: \S/);
    }
    // The strategy only combines the steps' rewards: the steps are the root cause, reported once.
    expect(ps.filter((x) => x.key === 'multi_step_reward_strategy')).toEqual([]);
    expect(ps.filter((x) => x.key === 'environment.mcp_servers')).toHaveLength(1);
  });

  it('checks the schema version: any 1.x is read, other majors and types are refused', () => {
    const bad = find(problems('schema_version = "2.0"\n[environment]\ngpus = 0\n'), 'schema_version', C.SCHEMA_VERSION);
    expect(bad).toMatchObject({ file: 'task.toml' });
    expect(bad.message).toMatch(/^unsupported schema version "2\.0"; Assay reads Harbor's 1\.x task files/);
    expect(find(problems('schema_version = 1.4\n[environment]\ngpus = 0\n'), 'schema_version', C.INVALID_TYPE).message).toContain('got the float 1.4');
    const both = find(problems('schema_version = "1.4"\nversion = "1.0"\n[environment]\ngpus = 0\n'), 'version', C.CONFLICT);
    expect(both.message).toBe('schema_version = "1.4" and Harbor\'s legacy version = "1.0" disagree; keep schema_version only');
  });

  it('checks the [task] table', () => {
    const ps = problems('schema_version = "1.4"\n[task]\nversion = 1\nauthors = [{ email = "x" }]\nkeywords = "k"\n[environment]\ngpus = 0\n');
    find(ps, 'task.name', C.MISSING_KEY);
    find(ps, 'task.version', C.INVALID_TYPE);
    find(ps, 'task.authors[0].name', C.MISSING_KEY);
    find(ps, 'task.keywords', C.INVALID_TYPE);
    expect(find(problems(BASE_14.replace('rsi/example', 'no-slash')), 'task.name', C.INVALID_VALUE).message).toContain('org/name');
    find(problems(BASE_14.replace('rsi/example', 'a/b..c')), 'task.name', C.INVALID_VALUE);
  });

  it('checks network policies', () => {
    find(problems(`${BASE_14}network_mode = "none"\n`), 'environment.network_mode', C.INVALID_VALUE);
    const explicit = find(problems(`${BASE_14}network_mode = "public"\nallowed_hosts = ["a.example"]\n`), 'environment.allowed_hosts', C.CONFLICT);
    expect(explicit.message).toBe('allowed_hosts is only valid with network_mode = "allowlist", not "public"');
    find(problems(`${BASE_14}network_mode = "public"\nallow_internet = false\n`), 'environment.allow_internet', C.CONFLICT);
    find(problems(`${BASE_14}network_mode = "no-network"\nallow_internet = true\n`), 'environment.allow_internet', C.CONFLICT);
    find(problems(`${BASE_14}allow_internet = "yes"\n`), 'environment.allow_internet', C.INVALID_TYPE);
    find(problems(`${BASE_14}[agent]\nnetwork_mode = "no-network"\nallowed_hosts = ["a.example"]\n`), 'agent.allowed_hosts', C.CONFLICT);
    expect(plan(`${BASE_14}allow_internet = false\n`).environment.network).toMatchObject({ mode: 'no-network', source: 'environment' });
  });

  it('reads allowed_hosts without network_mode as an allowlist, as Harbor does, in [environment] and in each phase', () => {
    const p = plan(
      `${BASE_14}allowed_hosts = ["pypi.org", "*.pythonhosted.org", "pypi.org."]\n[verifier]\nallowed_hosts = ["github.com"]\n[agent]\nallowed_hosts = []\n`,
    );
    expect(p.environment.network).toEqual({ mode: 'allowlist', allowedHosts: ['pypi.org', '*.pythonhosted.org'], source: 'environment' });
    expect(p.verifier.network).toEqual({ mode: 'allowlist', allowedHosts: ['github.com'], source: 'phase' });
    // An empty list asks for nothing: the agent keeps the baseline.
    expect(p.agent.network).toEqual(p.environment.network);
    // allow_internet = false with hosts is an allowlist in Harbor too.
    expect(plan(`${BASE_14}allow_internet = false\nallowed_hosts = ["a.example"]\n`).environment.network.mode).toBe('allowlist');
  });

  it('reads an allowlist without hosts as what Harbor runs it as, deny-all: no-network', () => {
    const p = plan(`${BASE_14}network_mode = "allowlist"\n[agent]\nnetwork_mode = "allowlist"\nallowed_hosts = []\n`);
    expect(p.environment.network).toEqual({ mode: 'no-network', allowedHosts: [], source: 'environment' });
    expect(p.agent.network).toEqual({ mode: 'no-network', allowedHosts: [], source: 'phase' });
  });

  it('reports a bad allowlist host once, not also as an empty allowlist', () => {
    const ps = problems(
      `${BASE_14}network_mode = "allowlist"\nallowed_hosts = ["http://a.example/x"]\n[verifier]\nnetwork_mode = "allowlist"\nallowed_hosts = [1]\n`,
    );
    expect(ps.map((x) => [x.code, x.key])).toEqual([
      [C.INVALID_VALUE, 'environment.allowed_hosts[0]'],
      [C.INVALID_TYPE, 'verifier.allowed_hosts[0]'],
    ]);
    expect(ps[0]?.message).toBe('expected a hostname, *.hostname, IP address or CIDR, got the string "http://a.example/x"');
  });

  it('checks working directories', () => {
    expect(find(problems(`${BASE_14}workdir = "workspace"\n`), 'environment.workdir').message).toContain('absolute path');
    expect(find(problems(`${BASE_14}workdir = "/tests/x"\n`), 'environment.workdir').message).toContain('overlaps /tests');
    expect(find(problems(`${BASE_14}workdir = "/logs"\n`), 'environment.workdir').message).toContain('/logs/verifier');
    find(problems(`${BASE_14}workdir = "/a/../b"\n`), 'environment.workdir', C.INVALID_VALUE);
    expect(plan(`${BASE_14}workdir = ""\n`).environment.workdir).toBe('/');
    expect(normalizeWorkdir('/srv/app/')).toBe('/srv/app');
  });

  it('checks environment tables and templates', () => {
    const ps = problems(`${BASE_14}[environment.env]
NUM = 1
"BAD.NAME" = "x"
PARTIAL = "prefix-\${A}"
NESTED = "\${A:-\${B}}"
LOWER = "\${lower_ok}"
[verifier.env]
BOOL = true
`);
    expect(find(ps, 'environment.env.NUM', C.INVALID_TYPE).message).toContain('quote numbers');
    find(ps, 'environment.env."BAD.NAME"', C.INVALID_VALUE);
    find(ps, 'environment.env.PARTIAL', C.ENV_TEMPLATE);
    find(ps, 'environment.env.NESTED', C.ENV_TEMPLATE);
    find(ps, 'verifier.env.BOOL', C.INVALID_TYPE);
    expect(ps.some((p) => p.key === 'environment.env.LOWER')).toBe(false);
  });

  it('checks metadata.rsi_harness assets and flags, and [metadata.assay]', () => {
    const ps = problems(`${BASE_14}[metadata.rsi_harness]
require_disjoint_phase_nodes = "yes"
[[metadata.rsi_harness.assets]]
path = "relative/x"
kind = "socket"
min_bytes = -1
[metadata.assay]
direction = "up"
max_submissions = 0
cooldown_sec = "5"
sharpness = 3
`);
    find(ps, 'metadata.rsi_harness.require_disjoint_phase_nodes', C.INVALID_TYPE);
    find(ps, 'metadata.rsi_harness.assets[0].path', C.INVALID_VALUE);
    find(ps, 'metadata.rsi_harness.assets[0].phase', C.MISSING_KEY);
    find(ps, 'metadata.rsi_harness.assets[0].kind', C.INVALID_VALUE);
    find(ps, 'metadata.rsi_harness.assets[0].min_bytes', C.INVALID_VALUE);
    find(ps, 'metadata.assay.direction', C.INVALID_VALUE);
    find(ps, 'metadata.assay.max_submissions', C.INVALID_VALUE);
    find(ps, 'metadata.assay.cooldown_sec', C.INVALID_TYPE);
    find(ps, 'metadata.assay.sharpness', C.UNKNOWN_KEY);
  });

  it('refuses metadata values JSON cannot carry exactly', () => {
    const ps = problems(`${BASE_14}[metadata]\nbig = 9007199254740993\nweird = nan\n`);
    find(ps, 'metadata.big', C.INVALID_VALUE);
    find(ps, 'metadata.weird', C.INVALID_VALUE);
  });

  it('uses a named image even when environment/Dockerfile exists: the Dockerfile is its recipe', () => {
    expect(plan(`${BASE_14}docker_image = "x:1"\n`).environment.image).toEqual({ kind: 'image', ref: 'x:1', recipe: 'environment/Dockerfile' });
    expect(plan(`${BASE_14}docker_image = "x:1"\n`, { hasDockerfile: false }).environment.image).toEqual({ kind: 'image', ref: 'x:1', recipe: null });
  });

  it('needs an environment image source, and reports an unreadable one once', () => {
    const missing = problems(BASE_14, { hasDockerfile: false });
    expect(missing).toEqual([expect.objectContaining({ code: C.FILE_MISSING, file: 'environment/Dockerfile', key: null })]);
    const spaced = problems(`${BASE_14}docker_image = "has space"\n`, { hasDockerfile: false });
    expect(spaced.map((x) => [x.code, x.file, x.key])).toEqual([[C.INVALID_VALUE, 'task.toml', 'environment.docker_image']]);
  });

  it('reports TOML syntax errors with their position, and refuses prototype keys', () => {
    const [p] = problems('schema_version = "1.4"\n[environment\n');
    expect(p).toMatchObject({ code: C.TOML_SYNTAX, file: 'task.toml', key: null });
    expect(p?.message).toMatch(/line 2/);
    expect(problems('schema_version = "1.4"\n[metadata]\n__proto__ = 1\n')[0]?.code).toBe(C.TOML_SYNTAX);
    expect(problems('a = 1\na = 2\n')[0]?.code).toBe(C.TOML_SYNTAX);
  });

  it('names the duplicated key, with its line', () => {
    const [dup] = problems(`${BASE_14}cpus = 1\ncpus = 2\n`);
    expect(dup).toEqual({
      code: C.TOML_SYNTAX,
      file: 'task.toml',
      key: 'environment.cpus',
      message: 'duplicate key at line 8, column 1: environment.cpus is already defined; TOML 1.0 forbids defining a key or table twice',
    });
    expect(problems('a = 1\na = 2\n')[0]?.key).toBe('a');
    expect(problems(`${BASE_14}[agent]\n[agent]\n`)[0]?.key).toBe('agent');
    expect(problems(`${BASE_14}[environment.env]\n"A.B" = "1"\n"A.B" = "2"\n`)[0]?.key).toBe('environment.env."A.B"');
    expect(problems(`${BASE_14}[verifier]\nenv = { A = "1", A = "2" }\n`)[0]?.key).toBe('verifier.env.A');
  });

  it('refuses an empty instruction', () => {
    expect(problems(BASE_14, { instruction: ' \n' })).toEqual([expect.objectContaining({ code: C.INVALID_VALUE, file: 'instruction.md' })]);
  });
});

describe('compileTask: environment/docker-compose.yaml', () => {
  const F = 'environment/docker-compose.yaml';

  it('reads the harness subset and merges it under task.toml', () => {
    const p = plan(`${BASE_14.replace('gpus = 0', 'gpus = 2')}workdir = "/workspace"\n[environment.env]\nSHARED = "from-toml"\n`, {
      compose: `services:
  main:
    build: .
    working_dir: /workspace/
    user: "1000:1000"
    shm_size: 8g
    environment:
      SHARED: from-compose
      NUMBER: 7
      FROM_HOST:
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              count: 2
              capabilities: [gpu]
`,
    });
    expect(p.environment).toMatchObject({ workdir: '/workspace', user: '1000:1000', shmSizeBytes: 8 * 1024 ** 3 });
    expect(p.environment.env).toEqual({ SHARED: 'from-toml', NUMBER: '7', FROM_HOST: '${FROM_HOST}' });
    expect(p.files.compose).toBe(F);
  });

  it('lets the Compose GPU reservation declare the Work GPU count, and refuses a mismatch', () => {
    const compose = (n: number | string) =>
      `services:\n  main:\n    build: .\n    deploy:\n      resources:\n        reservations:\n          devices:\n            - driver: nvidia\n              count: ${n}\n              capabilities: [gpu]\n`;
    const noGpus = 'schema_version = "1.4"\n[task]\nname = "a/b"\n';
    expect(plan(noGpus, { compose: compose(3) }).environment).toMatchObject({ gpus: 3, gpusDeclared: true });
    find(problems(`${noGpus}[environment]\ngpus = 1\n`, { compose: compose(3) }), 'environment.gpus', C.CONFLICT);
    const all = problems(noGpus, { compose: compose('all') });
    // One root cause, one problem: no follow-on about the GPU count, the image or gpu_types.
    expect(all.map((x) => [x.code, x.file, x.key])).toEqual([[C.UNSUPPORTED, F, 'services.main.deploy.resources.reservations.devices[0].count']]);
    expect(all[0]?.message).toContain('count: all');
    expect(problems(`${noGpus}[environment]\ngpu_types = ["H100"]\n`, { compose: compose('all'), hasDockerfile: false })).toHaveLength(1);
  });

  it('refuses everything outside the subset, naming the Compose key', () => {
    const ps = problems(BASE_14, {
      compose: `version: "3"
services:
  main:
    image: x
    build: .
    volumes: ["/:/host"]
    privileged: true
    network_mode: host
  db:
    image: postgres
`,
    });
    const inCompose = ps.filter((x) => x.file === F);
    for (const key of ['version', 'services.db', 'services.main.volumes', 'services.main.privileged', 'services.main.network_mode']) {
      expect(inCompose.find((x) => x.key === key)?.code).toBe(C.UNSUPPORTED);
    }
    expect(inCompose.find((x) => x.key === 'services.main.image')?.code).toBe(C.CONFLICT);
    find(problems(BASE_14, { compose: 'services:\n  main:\n    build: ../other\n' }), 'services.main.build', C.UNSUPPORTED);
  });

  it('refuses a working_dir that disagrees with task.toml and malformed YAML', () => {
    find(problems(`${BASE_14}workdir = "/a"\n`, { compose: 'services:\n  main:\n    build: .\n    working_dir: /b\n' }), 'environment.workdir', C.CONFLICT);
    const [y] = problems(BASE_14, { compose: 'services:\n  main:\n    build: .\n    build: .\n' });
    expect(y).toMatchObject({ code: C.YAML_SYNTAX, file: F });
    find(problems(BASE_14, { compose: 'services:\n  main:\n    shm_size: lots\n' }), 'services.main.shm_size', C.INVALID_VALUE);
  });
});

describe('normalizeAllowedHost', () => {
  it.each([
    ['Example.COM.', 'example.com'],
    ['*.example.com', '*.example.com'],
    ['10.0.0.0/8', '10.0.0.0/8'],
    ['::1', '::1'],
  ])('accepts %s', (raw, want) => expect(normalizeAllowedHost(raw)).toBe(want));
  it.each(['', 'http://x', 'a..b', '-a.com', '10.0.0.0/33', 'x:80', 'a b'])('refuses %j', (raw) => expect(normalizeAllowedHost(raw)).toBeUndefined());
});

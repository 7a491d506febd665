/**
 * Real task files published by the OpenRSI Index, the Terminal-Bench 2.1 registry export, Harbor's swebench-verified
 * dataset and Harbor's cookbook validate as they are, with the right settings; the ones that ask for features Assay
 * does not support are refused with a problem naming the file, the key and the reason.
 * Provenance is on the first line of each fixture (tests/fixtures/tasks/real/README.md).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { compileTask, type TaskSources } from './domain/compile-task';
import { templateNames } from './domain/env-template';
import { TASK_ERROR_CODES as C } from './task-format.errors';
import { describePlan, summarizePlan } from './task-report';

const DIR = join(__dirname, '../../../tests/fixtures/tasks/real');
const read = (f: string) => readFileSync(join(DIR, f), 'utf8');

function compileRaw(name: string, extra: Partial<TaskSources> = {}) {
  return compileTask({
    dirName: name,
    taskToml: read(`${name}.task.toml`),
    instruction: 'instruction',
    hasDockerfile: true,
    hasSolution: true,
    compose: null,
    ...extra,
  });
}

function compileFixture(name: string, compose: string | null = null, extra: Partial<TaskSources> = {}) {
  const r = compileRaw(name, { compose, ...extra });
  if (!r.ok) throw new Error(r.problems.map((p) => `${p.code} ${p.key}: ${p.message}`).join('\n'));
  return r.plan;
}

describe('real task files', () => {
  it('every fixture names its source on its first line, and is listed in the README', () => {
    const files = readdirSync(DIR).filter((f) => f !== 'README.md');
    expect(files.length).toBeGreaterThanOrEqual(16);
    const readme = read('README.md');
    for (const f of files) {
      expect(read(f).split('\n')[0]).toMatch(/^# Assay fixture, verbatim copy of github\.com\/\S+ \S+ \(commit [0-9a-f]{40}\); licence: /);
      expect(readme).toContain(`\`${f}\``);
    }
  });

  it('OpenRSI datacomp-small-filtering (assets, disjoint nodes, 16-GPU Judge, inline authors)', () => {
    const p = compileFixture('openrsi-datacomp-small-filtering');
    expect(p).toMatchObject({ schemaVersion: '1.4', name: 'rsi/datacomp-small-filtering', requireDisjointPhaseNodes: true });
    expect(p.environment).toMatchObject({ gpus: 16, cpus: 32, memoryMb: 262144, storageMb: 716800, workdir: '/workspace', buildTimeoutSec: 259200 });
    expect(p.verifier).toMatchObject({ gpus: 16, timeoutSec: 21600, environmentMode: 'shared' });
    expect(p.agent.timeoutSec).toBe(46800);
    expect(p.assets).toHaveLength(18);
    expect(p.assets.filter((a) => a.phase === 'judge')).toHaveLength(10);
    expect(p.assets[5]).toEqual({ path: '/rsi-data/datacomp-small/commonpool/shards', phase: 'work', kind: 'directory', minBytes: 0, minEntries: 1288 });
    expect(p.metadata.metric_direction).toBe('higher');
    expect([p.agent.network.mode, p.verifier.network.mode, p.environment.network.mode]).toEqual(['no-network', 'no-network', 'no-network']);
  });

  it('OpenRSI reasonir-difficulty-curriculum with its Compose file (templates, shm 64g)', () => {
    const p = compileFixture('openrsi-reasonir-difficulty-curriculum', read('openrsi-reasonir-difficulty-curriculum.docker-compose.yaml'));
    expect(p.environment).toMatchObject({ gpus: 4, workdir: '/workspace', shmSizeBytes: 64 * 1024 ** 3 });
    expect(p.environment.image.kind).toBe('dockerfile');
    expect(templateNames(p.verifier.env)).toEqual(['REASONIR_BASELINE_G0', 'REASONIR_BASELINE_R0']);
    expect(p.files.compose).toBe('environment/docker-compose.yaml');
  });

  it('OpenRSI learnability-cot ([verifier.env] literals)', () => {
    const p = compileFixture('openrsi-learnability-cot');
    expect(p.verifier.env.HOME).toBe('/tmp/rsi-judge-home');
    expect(p.environment.env.VLLM_WORKER_MULTIPROC_METHOD).toBe('spawn');
    expect(p.verifier.gpus).toBe(4);
  });

  it('Harbor cookbook simple-task (version = "1.0", deprecated sizes)', () => {
    const p = compileFixture('harbor-cookbook-simple-task');
    expect(p).toMatchObject({ schemaVersion: '1.0', name: 'local/harbor-cookbook-simple-task', nameSource: 'directory' });
    expect(p.environment).toMatchObject({ memoryMb: 2048, storageMb: 10240, cpus: 1, gpus: 0, gpusDeclared: false });
    expect([p.agent.timeoutSec, p.verifier.timeoutSec]).toEqual([120, 120]);
  });

  it('Harbor cookbook simple-task: task show prints the disjoint-nodes setting', () => {
    expect(describePlan(compileFixture('harbor-cookbook-simple-task'))).toContain(
      'placement   shared nodes allowed: Work and the Judge may run on the same node',
    );
    expect(describePlan(compileFixture('openrsi-datacomp-small-filtering'))).toContain(
      'placement   disjoint nodes: Work and the Judge must run on different nodes (require_disjoint_phase_nodes)',
    );
  });

  it('Terminal-Bench 2.1 password-recovery (schema 1.1, empty artifacts / mcp_servers / [solution.env], image plus Dockerfile)', () => {
    const p = compileFixture('tb21-password-recovery');
    expect(p).toMatchObject({ schemaVersion: '1.1', schemaVersionSource: 'schema_version', name: 'terminal-bench/password-recovery', nameSource: 'task' });
    expect(p.authors).toEqual([{ name: 'Harsh Raj', email: 'harsh777111raj@gmail.com' }]);
    expect(p.keywords).toEqual(['system', 'file-operations', 'troubleshooting', 'security']);
    expect(p.environment).toMatchObject({ cpus: 1, memoryMb: 2048, storageMb: 10240, gpus: 0, gpusDeclared: true, buildTimeoutSec: 600, env: {} });
    expect(p.environment.image).toEqual({ kind: 'image', ref: 'alexgshaw/password-recovery:20251031', recipe: 'environment/Dockerfile' });
    expect(p.environment.network).toEqual({ mode: 'public', allowedHosts: [], source: 'environment' });
    expect([p.agent.network.mode, p.verifier.network.mode]).toEqual(['public', 'public']);
    expect([p.agent.timeoutSec, p.verifier.timeoutSec]).toEqual([900, 900]);
    expect(p.verifier.env).toEqual({});
    expect(p.metadata).toMatchObject({ difficulty: 'hard', expert_time_estimate_min: 100, junior_time_estimate_min: 300 });
    expect(summarizePlan(p)).toBe(
      'terminal-bench/password-recovery (schema 1.1): work 0 GPU, judge 0 GPU, network work public / judge public, agent 900s, judge 900s, image alexgshaw/password-recovery:20251031',
    );
    expect(describePlan(p)).toContain('image       alexgshaw/password-recovery:20251031 (must exist locally; environment/Dockerfile is its recipe, not built)');
  });

  it('Terminal-Bench 2.1 train-fasttext: its test.sh downloads tools, which the public Judge may do (no warning)', () => {
    const p = compileFixture('tb21-train-fasttext', null, { testScript: read('tb21-train-fasttext.test.sh') });
    expect(p.environment).toMatchObject({ memoryMb: 4096, cpus: 1 });
    expect([p.agent.timeoutSec, p.verifier.timeoutSec]).toEqual([3600, 3600]);
    expect(p.verifier.network.mode).toBe('public');
    expect(p.warnings).toEqual([]);
  });

  it('swebench-verified as OpenRSI vendors it (no schema key, quoted sizes, image plus Dockerfile, no network)', () => {
    const p = compileFixture('openrsi-swebench-pallets-flask-5014');
    expect(p).toMatchObject({
      schemaVersion: '1.1',
      schemaVersionSource: 'default',
      name: 'local/openrsi-swebench-pallets-flask-5014',
      nameSource: 'directory',
    });
    expect(p.environment).toMatchObject({
      workdir: '/testbed',
      cpus: 1,
      memoryMb: 4096,
      storageMb: 10240,
      gpus: 0,
      gpusDeclared: false,
      buildTimeoutSec: 1800,
    });
    expect(p.environment.image).toEqual({
      kind: 'image',
      ref: 'swebench/sweb.eval.x86_64.pallets_1776_flask-5014@sha256:bde4fbdafa36141d4396944da88ec37aabdef612ed36920090675bccd0ca5d72',
      recipe: 'environment/Dockerfile',
    });
    expect([p.environment.network.mode, p.agent.network.mode, p.verifier.network.mode]).toEqual(['no-network', 'no-network', 'no-network']);
    expect([p.agent.timeoutSec, p.verifier.timeoutSec]).toEqual([3000, 3000]);
    expect(describePlan(p)).toContain("schema      1.1 (not declared: Harbor's default)");
  });

  it("swebench-verified as Harbor's dataset publishes it (schema 1.0, inline authors, public phases over a default baseline)", () => {
    const p = compileFixture('harbor-swebench-verified-pallets-flask-5014', null, { hasDockerfile: true });
    expect(p).toMatchObject({
      schemaVersion: '1.0',
      name: 'swe-bench/swebench-verified__pallets__flask-5014',
      description: 'SWE-bench Verified debugging task.',
    });
    expect(p.authors.map((a) => a.name)).toEqual(['Carlos E. Jimenez', 'John Yang', 'Alexander Wettig', 'Ofir Press']);
    expect(p.environment.network).toEqual({ mode: 'no-network', allowedHosts: [], source: 'default' });
    expect(p.agent.network).toEqual({ mode: 'public', allowedHosts: [], source: 'phase' });
    expect(p.verifier.network).toEqual({ mode: 'public', allowedHosts: [], source: 'phase' });
    expect(p.environment).toMatchObject({ memoryMb: 4096, gpus: 0, gpusDeclared: true });
    expect(p.environment.image.kind).toBe('dockerfile');
  });

  it('OpenRSI hello-file (schema 1.4 without gpus, an image and no Dockerfile)', () => {
    const p = compileFixture('openrsi-hello-file', null, { hasDockerfile: false });
    expect(p).toMatchObject({ schemaVersion: '1.4', name: 'rsi/hello-file' });
    expect(p.environment).toMatchObject({ gpus: 0, gpusDeclared: false, cpus: 1, memoryMb: 1024, storageMb: 2048 });
    expect(p.environment.image).toEqual({ kind: 'image', ref: 'python:3.13-slim-bookworm', recipe: null });
    expect([p.agent.timeoutSec, p.verifier.timeoutSec]).toEqual([600, 120]);
  });

  it('Harbor cookbook multi-verifier: its test.sh installs uv, but the Judge has no network (warning, not an error)', () => {
    const r = compileRaw('harbor-cookbook-multi-verifier', { testScript: read('harbor-cookbook-multi-verifier.test.sh') });
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.plan.environment).toMatchObject({ memoryMb: 2048, storageMb: 10240, cpus: 1 });
    expect(r.plan.warnings).toHaveLength(1);
    expect(r.plan.warnings[0]).toMatchObject({ code: C.TESTS_NEED_NETWORK, file: 'tests/test.sh', key: null });
    expect(r.plan.warnings[0]?.message).toMatch(
      /^appears to download tools or packages \(line 4: apt-get; line 5: apt-get; line 7: curl; line 14: uv; line 20: uv\)/,
    );
    expect(describePlan(r.plan).at(-1)).toMatch(/^warning {5}TASK_TESTS_NEED_NETWORK tests\/test.sh: appears to download/);
  });

  it.each([
    ['harbor-cookbook-mcp-tools', 'environment.mcp_servers', 'not supported by Assay: MCP servers (tools served to the agent from outside its container)'],
    ['harbor-cookbook-skills', 'environment.skills_dir', 'not supported by Assay: Harbor skills directories'],
    [
      'openrsi-harbor-in-judge',
      'metadata.rsi_harness.sandbox',
      'not supported by Assay: brokered sandbox environments (containers created on the host for code running inside Work or the Judge)',
    ],
  ])('%s is refused once, naming the file, the key and the reason', (name, key, message) => {
    const r = compileRaw(name);
    expect(r.ok).toBe(false);
    expect(r.problems).toEqual([{ code: C.UNSUPPORTED, file: 'task.toml', key, message }]);
  });
});

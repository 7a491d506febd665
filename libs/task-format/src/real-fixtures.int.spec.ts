/**
 * Real task files published by the OpenRSI Index (and one Harbor cookbook file) validate as they are.
 * Provenance is on the first line of each fixture (tests/fixtures/tasks/real/README.md).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { compileTask } from './domain/compile-task';
import { templateNames } from './domain/env-template';

const DIR = join(__dirname, '../../../tests/fixtures/tasks/real');
const read = (f: string) => readFileSync(join(DIR, f), 'utf8');

function compileFixture(name: string, compose: string | null = null) {
  const r = compileTask({ dirName: name, taskToml: read(`${name}.task.toml`), instruction: 'instruction', hasDockerfile: true, hasSolution: true, compose });
  if (!r.ok) throw new Error(r.problems.map((p) => `${p.code} ${p.key}: ${p.message}`).join('\n'));
  return r.plan;
}

describe('real task files', () => {
  it('every fixture names its source on its first line', () => {
    for (const f of [
      'openrsi-datacomp-small-filtering.task.toml',
      'openrsi-reasonir-difficulty-curriculum.task.toml',
      'openrsi-reasonir-difficulty-curriculum.docker-compose.yaml',
      'openrsi-learnability-cot.task.toml',
      'harbor-cookbook-simple-task.task.toml',
    ]) {
      expect(read(f).split('\n')[0]).toMatch(/^# Assay fixture, verbatim copy of github\.com\/\S+ \S+ \(commit [0-9a-f]{40}\); licence: /);
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
});

/**
 * A research run on the in-memory container runtime (FakeContainerRuntime), for tests that run `runResearch` whole
 * without Docker: a fake task (each Judge rewards 0.5), the programs Work's helpers run (`sh` for the lifeline and
 * the seed container, `test` for the bounded-workspace check), the agent as the program `bash` (`--agent
 * command:...`), and the agent's way to submit: POST /submit over the socket Work's /run/assay mount binds, as
 * rsi-submit does.
 */
import * as fs from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { ManualClock, SequentialIds } from '@assay/core';
import type { ContainerSpec } from '@assay/containers';
import { FakeContainerRuntime, type FakeProcess } from '../../../libs/containers/src/testing';
import type { RunStartOptions } from '../../../libs/runtime/src/run-runtime';
import { LIFELINE_CMD } from '../../../libs/runtime/src/work-containment';
import { installFakeEntrypoint, writeTask } from '../../judge/judge-fakes';

export const FAKE_RUN_TIME = '2026-09-01T08:00:00.000Z';

/** A fake task whose every Judge rewards 0.5, with a start workspace (`start.txt`). */
export function writeFakeRunTask(dir: string): string {
  writeTask(dir, { files: { 'reward.json': '{"reward": 0.5}' } });
  fs.mkdirSync(join(dir, 'environment', 'workspace'), { recursive: true });
  fs.writeFileSync(join(dir, 'environment', 'workspace', 'start.txt'), 'the start\n');
  return dir;
}

/** POST /submit from inside Work: the reply's text. */
export function submitFromWork(p: FakeProcess): Promise<string> {
  const mount = p.spec.mounts.find((m) => m.target === '/run/assay');
  if (!mount || mount.type !== 'bind') throw new Error('Work has no /run/assay bind');
  const token = p.readFile('/run/assay/token').toString('utf8').trim();
  return new Promise((resolve, reject) => {
    const req = request(
      { socketPath: join(mount.source, 'submit.sock'), method: 'POST', path: '/submit', headers: { authorization: `Bearer ${token}`, accept: 'text/plain' } },
      (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (d: string) => (body += d));
        res.on('end', () => resolve(body));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

export interface FakeRun {
  readonly fake: FakeContainerRuntime;
  /** Work's container spec, as the agent's exec saw it. */
  work: ContainerSpec | null;
  /** The wardens handed Work's id (the `workWarden` option), and whether each was closed. */
  readonly wardens: Array<{ id: string; closed: boolean }>;
  readonly lines: string[];
  readonly shown: string[];
  readonly options: RunStartOptions;
}

/** The fake runtime with `agent` as Work's agent, and runResearch's options for run `run` of `taskDir` in `home`. */
export function fakeRun(home: string, taskDir: string, run: string, agent: (p: FakeProcess) => Promise<number>): FakeRun {
  const fake = new FakeContainerRuntime();
  fake.addImage({ tag: 'assay/base:bookworm' });
  installFakeEntrypoint(fake);
  fake.defineProgram('sh', async (p) => {
    if (p.argv.join(' ') === LIFELINE_CMD.join(' ')) {
      await p.sleep(3_600_000); // Work's first process: until the container is killed
      return 0;
    }
    return 3; // the seed container: the image has nothing in its workdir
  });
  fake.defineProgram('test', async (p) => (p.exists(p.argv[2] ?? '') ? 0 : 1)); // is the bounded workspace seen?
  const clock = new ManualClock(FAKE_RUN_TIME);
  const r: FakeRun = {
    fake,
    work: null,
    wardens: [],
    lines: [],
    shown: [],
    options: {
      home,
      taskDir,
      agent: 'command:solve',
      runId: run,
      clock,
      ids: new SequentialIds('11111111-0000-4000-8000'),
      containers: fake,
      overrides: { maxSubmissions: 2, cooldownSec: 0 },
      snapshotIntervalSec: 0,
      checkpointIntervalSec: 0,
      log: (l) => r.lines.push(l),
      agentOutput: (chunk) => r.shown.push(chunk.toString('utf8')),
      workWarden: (id) => {
        const w = { id, closed: false };
        r.wardens.push(w);
        return { pid: -1, close: () => void (w.closed = true) };
      },
    },
  };
  fake.defineProgram('bash', (p) => {
    r.work = p.spec;
    return agent(p);
  });
  return r;
}

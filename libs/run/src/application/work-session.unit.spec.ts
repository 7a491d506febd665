/**
 * A whole controller session against the in-memory container runtime: Work's container created, started, guarded and
 * removed; the run opened (new, resumed, already completed); the agent's process an exec in Work that submits through
 * the gateway the session listens with; superviseAgent until the run completes or is cancelled.
 */
import type { ContainerSpec } from '@assay/containers';
import { FakeContainerRuntime, type FakeProcess } from '../../../containers/src/testing';
import { ContainerWorkControl } from '../adapters/container-work-control.adapter';
import type { SubmissionGateway } from '../ports/submission-gateway.port';
import { startInput, submitReq, wiring, type Wiring } from '../../../../tests/run/support/run-fixtures';
import { SubmissionService } from './submission-service';
import { removeLeftoverContainers, runWorkSession, type WorkSessionHooks, type WorkSessionPlan, type WorkSessionPorts } from './work-session';

const IMAGE = 'assay-test/work:1';
const LABELS = { 'org.assay.role': 'work', 'org.assay.run': 'r1' };

function workSpec(image: string): ContainerSpec {
  return {
    name: 'assay-work-r1',
    image,
    cmd: ['fake-sleep', '3600'],
    entrypoint: [],
    env: { ASSAY_RUN: 'r1' },
    workingDir: '/workspace',
    user: '1000:1000',
    labels: LABELS,
    mounts: [{ type: 'tmpfs', target: '/tmp', sizeBytes: 1 << 20, mode: 0o1777 }],
    networkMode: 'none',
    readOnlyRootfs: true,
    capDrop: ['ALL'],
    capAdd: [],
    noNewPrivileges: true,
    pidsLimit: 512,
    memoryBytes: 256 << 20,
    nanoCpus: 1e9,
    init: true,
    openStdin: false,
  };
}

interface Harness {
  w: Wiring;
  fake: FakeContainerRuntime;
  ports: WorkSessionPorts;
  plan: WorkSessionPlan;
  hooks: WorkSessionHooks;
  lines: string[];
  output: string[];
  guards: { opened: string[]; closed: number };
  /** The gateway the session listens with, while it listens. */
  gateway: () => SubmissionGateway;
  endpoint: { listening: boolean };
}

function harness(o: { w?: Wiring; open?: WorkSessionPlan['open']; agent?: (p: FakeProcess, gateway: SubmissionGateway) => Promise<number> } = {}): Harness {
  const w = o.w ?? wiring({ files: { 'solve.py': 'v0' } });
  const fake = new FakeContainerRuntime();
  const image = fake.addImage({ tag: IMAGE, workingDir: '/workspace' });
  const lines: string[] = [];
  const output: string[] = [];
  const guards = { opened: [] as string[], closed: 0 };
  const endpoint = { listening: false };
  let gw: SubmissionGateway | null = null;
  const gateway = () => {
    if (!gw || !endpoint.listening) throw new Error('the session is not listening');
    return gw;
  };
  fake.defineProgram('fake-agent', (p) => (o.agent ?? (async () => 0))(p, gateway()));
  const ports: WorkSessionPorts = {
    containers: fake,
    ledger: w.ledger,
    judge: w.judge,
    clock: w.clock,
    ids: w.ids,
    snapshotterFor: () => w.snapshotter,
    workControlFor: (id) => new ContainerWorkControl(fake, id),
    listen: async (g) => {
      gw = g;
      endpoint.listening = true;
      return { close: async () => void (endpoint.listening = false) };
    },
    unpinSnapshot: async () => undefined,
    cancelRequested: () => false,
    log: (l) => lines.push(l),
  };
  const plan: WorkSessionPlan = {
    run: 'r1',
    work: workSpec(image),
    workLimits: { cpus: 1, memoryBytes: 256 << 20, pidsLimit: 512 },
    agent: { name: 'reference', argv: ['fake-agent'], env: { ASSAY_AGENT: '1' }, workingDir: '/workspace' },
    open: o.open ?? { resume: false, input: startInput('r1') },
    probed: null,
    supervision: { snapshotIntervalSec: 0, agentTimeRecordSec: 3600, cancelPollMs: 10, keepPeriodic: 3, storageBytes: 1 << 20, storageCheckSec: 1 },
  };
  const hooks: WorkSessionHooks = {
    guardWork: (id) => {
      guards.opened.push(id);
      return { close: () => void (guards.closed += 1) };
    },
    agentOutput: (_s, chunk) => void output.push(chunk.toString()),
  };
  return { w, fake, ports, plan, hooks, lines, output, guards, gateway, endpoint };
}

const types = (w: Wiring): string[] => w.ledger.all().map((e) => e.type);
const works = (fake: FakeContainerRuntime) => fake.listContainers(LABELS);

describe('runWorkSession', () => {
  it('a new run: Work created as planned, the agent submits through the gateway, the run completes and Work is removed', async () => {
    const h = harness({
      agent: async (p, gateway) => {
        p.write('stdout', 'working\n');
        const first = await gateway.submit(submitReq());
        p.write('stdout', `round ${first.round} ${first.status}\n`);
        await gateway.submit(submitReq());
        return 0;
      },
    });
    const created = jest.spyOn(h.fake, 'createContainer');
    const execs = jest.spyOn(h.fake, 'exec');
    let stopped = 0;
    const r = await runWorkSession(h.ports, h.plan, {
      ...h.hooks,
      beforeAgent: async () => ({ stop: async () => void (stopped += 1) }),
    });

    expect(created).toHaveBeenCalledTimes(1);
    expect(created.mock.calls[0]![0]).toEqual(h.plan.work);
    expect(execs.mock.calls[0]![0]).toBe(r.workId);
    expect(execs.mock.calls[0]![1]).toEqual({ argv: ['fake-agent'], env: { ASSAY_AGENT: '1' }, workingDir: '/workspace' });
    expect(r.alreadyCompleted).toBe(false);
    expect(r.agentExitCode).toBe(0);
    expect(r.state.completed?.status).toBe('completed');
    expect(r.state.rounds.map((x) => x.round)).toEqual([1, 2]);
    const t = types(h.w);
    expect(t.slice(0, 3)).toEqual(['RunStarted', 'WorkStarted', 'SnapshotTaken']);
    expect(t.at(-1)).toBe('RunCompleted');
    const started = h.w.ledger.all().find((e) => e.type === 'WorkStarted')!;
    expect(started.data).toMatchObject({ container: r.workId, image: h.plan.work.image, limits: h.plan.workLimits });
    // Work: guarded from the moment it existed, killed and removed at the end; the endpoint and the agent's side stopped
    expect(h.guards).toEqual({ opened: [r.workId], closed: 1 });
    expect(await works(h.fake)).toEqual([]);
    expect(h.fake.calls).toContain(`kill ${r.workId.slice(0, 12)}`);
    expect(h.endpoint.listening).toBe(false);
    expect(stopped).toBe(1);
    // the agent's output went to the hook; Assay's own line per settled round went to the log
    expect(h.output.join('')).toContain('working\nround 1 ');
    expect(h.lines.filter((l) => /^round \d+/.test(l))).toHaveLength(2);
    expect(h.lines).toContain(`run r1: Work ${r.workId.slice(0, 12)} up; agent reference starting`);
  });

  it('each round pauses Work through the container port while its snapshot is taken', async () => {
    const h = harness({
      agent: async (_p, gateway) => {
        await gateway.submit(submitReq());
        return 0;
      },
    });
    const r = await runWorkSession(h.ports, h.plan, h.hooks);
    const short = r.workId.slice(0, 12);
    const pause = h.fake.calls.indexOf(`pause ${short}`);
    expect(pause).toBeGreaterThan(-1);
    expect(h.fake.calls.indexOf(`unpause ${short}`)).toBeGreaterThan(pause);
  });

  it('a resume: the dead session’s agent time and the workspace’s edits are recorded before the agent continues', async () => {
    const w = wiring({ files: { 'solve.py': 'v0' } });
    // the earlier session: the run started, Work started, the baseline recorded, then its controller was killed
    const first = await new SubmissionService(w.deps).start(startInput('r1'));
    await first.workStarted('old-work', 'sha256:old', {});
    await first.recordWorkspace();
    w.clock.advance(42_000);
    await first.tick(); // its last event (the wall time used), 42 s after WorkStarted
    w.snapshotter.files.set('solve.py', 'edited by an orphan');
    const h = harness({ w, open: { resume: true } });
    const r = await runWorkSession(h.ports, h.plan, h.hooks);

    const after = h.w.ledger.all().slice(h.w.ledger.all().findIndex((e) => e.data.container === r.workId));
    expect(after.map((e) => e.type).slice(0, 4)).toEqual(['WorkStarted', 'SnapshotTaken', 'WorkspaceEdited', 'BudgetConsumed']);
    expect(after[3]!.data).toMatchObject({ budget: 'agent_time', amount: 42 });
    expect(h.lines).toContain("the previous session's agent time since its last record: 42 s (recorded)");
    expect(r.state.completed?.status).toBe('no_valid_submission');
    expect(await works(h.fake)).toEqual([]);
  });

  it('a run that had already completed: no agent, Work removed again', async () => {
    const w = wiring();
    const svc = await new SubmissionService(w.deps).start(startInput('r1'));
    await svc.recordWorkspace();
    await svc.complete();
    const h = harness({ w, open: { resume: true } });
    const execs = jest.spyOn(h.fake, 'exec');
    const r = await runWorkSession(h.ports, h.plan, h.hooks);
    expect(r.alreadyCompleted).toBe(true);
    expect(execs).not.toHaveBeenCalled();
    expect(h.lines).toContain('run r1 had already completed');
    expect(types(w).filter((t) => t === 'WorkStarted')).toEqual([]);
    expect(await works(h.fake)).toEqual([]);
    expect(h.guards.closed).toBe(1);
  });

  it('a failed check of Work: nothing recorded, Work removed, the error passed on', async () => {
    const h = harness();
    const failing = { ...h.hooks, checkWork: async () => Promise.reject(new Error('codex is not in the work image')) };
    await expect(runWorkSession(h.ports, h.plan, failing)).rejects.toThrow('codex is not in the work image');
    expect(h.w.ledger.all()).toEqual([]);
    expect(await works(h.fake)).toEqual([]);
    expect(h.guards.closed).toBe(1);
  });

  it('Work that does not start: removed, nothing recorded', async () => {
    const h = harness();
    h.fake.failNext('start', 'no such runtime');
    await expect(runWorkSession(h.ports, h.plan, h.hooks)).rejects.toThrow('no such runtime');
    expect(h.w.ledger.all()).toEqual([]);
    expect(await works(h.fake)).toEqual([]);
  });

  it('an agent binary missing from Work: the exec reports 126 and the run ends without a valid submission', async () => {
    const h = harness();
    const r = await runWorkSession(h.ports, { ...h.plan, agent: { ...h.plan.agent, argv: ['no-such-agent'] } }, h.hooks);
    expect(r.agentExitCode).toBe(126);
    expect(h.output.join('')).toContain('executable file not found');
    expect(r.state.completed?.status).toBe('no_valid_submission');
  });

  it('Ctrl-C while the agent works: the run is cancelled and Work removed', async () => {
    const ac = new AbortController();
    const h = harness({
      agent: async (p) => {
        setTimeout(() => ac.abort(), 20);
        await p.sleep(60_000);
        return 0;
      },
    });
    const r = await runWorkSession(h.ports, { ...h.plan, supervision: { ...h.plan.supervision, signal: ac.signal } }, h.hooks);
    expect(r.state.completed?.status).toBe('cancelled');
    expect(await works(h.fake)).toEqual([]);
  });

  it("Work's GPUs count from its start and stop with the agent; their use is recorded through the run's service", async () => {
    const h = harness();
    const gpu = { started: 0, stopped: 0, recordedWith: [] as unknown[] };
    const r = await runWorkSession(h.ports, h.plan, {
      ...h.hooks,
      gpus: {
        startWork: () => void (gpu.started += 1),
        secondsUntilExhausted: () => null,
        stopWork: () => void (gpu.stopped += 1),
        record: async (svc) => void gpu.recordedWith.push(svc.current.run),
      },
    });
    expect(r.state.completed).not.toBeNull();
    expect(gpu.started).toBe(1);
    expect(gpu.stopped).toBe(1);
    expect(gpu.recordedWith.length).toBeGreaterThan(0);
    expect(gpu.recordedWith.every((x) => x === 'r1')).toBe(true);
  });

  it('removeLeftoverContainers kills a paused orphan (never unpauses it) and removes it', async () => {
    const fake = new FakeContainerRuntime();
    const image = fake.addImage({ tag: IMAGE });
    const id = await fake.createContainer(workSpec(image));
    await fake.start(id, { onOutput: () => undefined });
    await fake.pause(id);
    expect(await removeLeftoverContainers(fake, [LABELS, { 'org.assay.role': 'seed' }])).toEqual([id]);
    expect(fake.calls).not.toContain(`unpause ${id.slice(0, 12)}`);
    expect(await fake.listContainers(LABELS)).toEqual([]);
  });
});

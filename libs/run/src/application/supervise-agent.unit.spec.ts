/**
 * The agent's session supervised against fakes: a SubmissionService over the in-memory ledger, snapshotter and Judge,
 * a scripted agent process, Work's GPUs and the storage meter as plain functions. Real timers, short intervals.
 */
import { startInput, submitReq, wiring, type Wiring } from '../../../../tests/run/support/run-fixtures';
import { SubmissionService } from './submission-service';
import { superviseAgent, type AgentProcess, type AgentSupervisionDeps, type AgentSupervisionOptions } from './supervise-agent';

class ScriptedAgent implements AgentProcess {
  detached = false;
  private finish!: () => void;
  readonly ended = new Promise<void>((res) => (this.finish = res));
  constructor(private readonly code: number | null = 0) {}
  exit(): void {
    this.finish();
  }
  exitCode(): Promise<number | null> {
    return Promise.resolve(this.code);
  }
  detach(): void {
    this.detached = true;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const OPTIONS: AgentSupervisionOptions = {
  snapshotIntervalSec: 0,
  agentTimeRecordSec: 3600,
  cancelPollMs: 10,
  keepPeriodic: 3,
  storageBytes: 1000,
  storageCheckSec: 0.01,
};

interface Harness {
  w: Wiring;
  svc: SubmissionService;
  lines: string[];
  unpinned: string[];
  gpu: { stopped: boolean; records: number };
  deps: AgentSupervisionDeps;
}

async function harness(
  o: { start?: Parameters<typeof startInput>[1]; deps?: Partial<AgentSupervisionDeps>; files?: Record<string, string> } = {},
): Promise<Harness> {
  const w = wiring({ files: o.files ?? { 'solve.py': 'v0' } });
  const svc = await new SubmissionService(w.deps).start(startInput(w.deps.run, o.start ?? {}));
  await svc.recordWorkspace();
  const lines: string[] = [];
  const unpinned: string[] = [];
  const gpu = { stopped: false, records: 0 };
  const deps: AgentSupervisionDeps = {
    service: svc,
    clock: w.clock,
    gpus: {
      secondsUntilExhausted: () => null,
      stopWork: () => void (gpu.stopped = true),
      record: async () => void (gpu.records += 1),
    },
    unpinSnapshot: async (root) => void unpinned.push(root),
    cancelRequested: () => false,
    writtenBytes: null,
    log: (l) => lines.push(l),
    ...o.deps,
  };
  return { w, svc, lines, unpinned, gpu, deps };
}

const agentTimeRecorded = (w: Wiring): number[] =>
  w.ledger
    .all()
    .filter((e) => e.type === 'BudgetConsumed' && (e.data as { budget?: string }).budget === 'agent_time')
    .map((e) => (e.data as { amount: number }).amount);

describe('superviseAgent', () => {
  it('an agent that exits: its status, its time recorded, the last snapshot taken, the run completed', async () => {
    const h = await harness();
    const agent = new ScriptedAgent(3);
    let stoppedAt = -1;
    const done = superviseAgent(agent, { ...h.deps, onStopped: () => (stoppedAt = h.lines.length) }, { ...OPTIONS, snapshotIntervalSec: 3600 });
    h.w.clock.advance(12_340);
    h.w.snapshotter.files.set('solve.py', 'v1');
    agent.exit();
    const r = await done;
    expect(r).toEqual({ why: 'exited', exitCode: 3, agentMs: 12_340 });
    expect(agent.detached).toBe(false);
    expect(h.gpu).toEqual({ stopped: true, records: 2 });
    expect(stoppedAt).toBe(0); // the output is flushed before Assay says how the agent ended
    expect(h.lines).toEqual(['agent exited with status 3']);
    expect(agentTimeRecorded(h.w)).toEqual([12.34]);
    expect(h.svc.current.completed?.status).toBe('no_valid_submission'); // completed, with no round
    // the workspace as the agent left it: recorded as an edit before the run completed
    const types = h.w.ledger.all().map((e) => e.type);
    expect(types.lastIndexOf('WorkspaceEdited')).toBeGreaterThan(types.indexOf('RunStarted'));
    expect(types.lastIndexOf('WorkspaceEdited')).toBeLessThan(types.lastIndexOf('RunCompleted'));
    expect(h.svc.current.lastRoot).not.toBe(h.svc.current.baselineRoot);
  });

  it('stops the agent when what is left of its time runs out, and records no more than was left', async () => {
    const h = await harness({ start: { agentTimeoutSec: 0.2 } });
    const agent = new ScriptedAgent();
    const done = superviseAgent(agent, h.deps, OPTIONS);
    h.w.clock.advance(5_000); // the controller's stop came late: 5 s by the clock, 0.2 s were left
    const r = await done;
    expect(r.why).toBe('timeout');
    expect(agent.detached).toBe(true);
    expect(h.lines).toEqual(['the agent ran out of time (0.2 s)']);
    expect(agentTimeRecorded(h.w)).toEqual([0.2]);
    expect(h.svc.current.completed?.status).toBe('no_valid_submission'); // completed, with no round
  });

  it('a resumed session gets only what is left of the agent time, as recorded', async () => {
    const h = await harness({ start: { agentTimeoutSec: 100 } });
    await h.svc.consume('agent_time', 99.85);
    const t0 = Date.now();
    const r = await superviseAgent(new ScriptedAgent(), h.deps, OPTIONS);
    expect(r.why).toBe('timeout');
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect(h.lines[0]).toMatch(/^the agent ran out of time \(0\.15\d* s\)$/);
  });

  it('Ctrl-C cancels the run; the agent time used is still recorded', async () => {
    const h = await harness();
    const ctl = new AbortController();
    const agent = new ScriptedAgent();
    const done = superviseAgent(agent, h.deps, { ...OPTIONS, signal: ctl.signal });
    h.w.clock.advance(2_000);
    ctl.abort();
    expect((await done).why).toBe('cancel');
    expect(agent.detached).toBe(true);
    expect(h.lines).toEqual(['cancelled: stopping the agent']);
    expect(agentTimeRecorded(h.w)).toEqual([2]);
    expect(h.svc.current.completed?.status).toBe('cancelled');
  });

  it('a cancel asked through the API (the cancel request) is the same as Ctrl-C', async () => {
    let asked = false;
    const h = await harness({ deps: { cancelRequested: () => asked } });
    const done = superviseAgent(new ScriptedAgent(), h.deps, OPTIONS);
    await sleep(30);
    asked = true;
    expect((await done).why).toBe('cancel');
    expect(h.lines).toEqual(['cancel requested (POST /runs/:id/cancel)', 'cancelled: stopping the agent']);
    expect(h.svc.current.completed?.status).toBe('cancelled');
  });

  it("stops the agent once Work's own file system grew past the storage bound, and says by how much", async () => {
    let written = 10;
    const h = await harness({ deps: { writtenBytes: async () => written } });
    const agent = new ScriptedAgent();
    const done = superviseAgent(agent, h.deps, OPTIONS);
    await sleep(40);
    written = 5000;
    expect((await done).why).toBe('storage');
    expect(agent.detached).toBe(true);
    expect(h.lines).toEqual(["Work's file system grew past the task's storage_mb: 5000 bytes written, the bound is 1000: stopping the agent"]);
  });

  it('a failing storage measurement does not stop the agent', async () => {
    const h = await harness({ deps: { writtenBytes: () => Promise.reject(new Error('docker: gone')) } });
    const agent = new ScriptedAgent(0);
    const done = superviseAgent(agent, h.deps, OPTIONS);
    await sleep(50);
    agent.exit();
    expect((await done).why).toBe('exited');
  });

  it("stops the agent when Work's GPUs alone use up the GPU budget", async () => {
    const h = await harness({ deps: { gpus: { secondsUntilExhausted: () => 0.05, stopWork: () => undefined, record: async () => undefined } } });
    const agent = new ScriptedAgent();
    expect((await superviseAgent(agent, h.deps, OPTIONS)).why).toBe('gpu_budget');
    expect(h.lines).toEqual(['the GPU budget is used up: stopping the agent']);
  });

  it('stops the agent when the run ended by itself', async () => {
    const h = await harness();
    const agent = new ScriptedAgent();
    const done = superviseAgent(agent, h.deps, OPTIONS);
    await h.svc.complete(); // as the refund that reaches the cap does (RunCompleted failed)
    expect((await done).why).toBe('ended');
    expect(agent.detached).toBe(true);
    expect(h.lines).toEqual([`the run ended (${h.svc.current.completed?.status}): stopping the agent`]);
    expect(h.svc.current.completed).not.toBeNull();
  });

  it('keeps only the newest periodic snapshots pinned, never one a round or the baseline uses', async () => {
    const h = await harness({ files: { 'solve.py': 'v0' } });
    const baseline = h.svc.current.baselineRoot as string;
    const agent = new ScriptedAgent();
    const done = superviseAgent(agent, h.deps, { ...OPTIONS, snapshotIntervalSec: 0.03, keepPeriodic: 1 });
    for (let v = 1; v <= 4; v++) {
      h.w.snapshotter.files.set('solve.py', `v${v}`);
      if (v === 2) await h.svc.submit(submitReq()); // round 1 uses v2's root
      await sleep(80);
    }
    agent.exit();
    await done;
    const roundRoot = h.svc.current.rounds[0]?.snapshot?.root;
    expect(roundRoot).toBeDefined();
    expect(h.unpinned).not.toContain(baseline);
    expect(h.unpinned).not.toContain(roundRoot);
    expect(h.unpinned.length).toBeGreaterThan(0);
    expect(new Set(h.unpinned).size).toBe(h.unpinned.length);
  });
});

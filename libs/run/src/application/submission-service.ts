/**
 * The submission side of a run: authenticates requests, serialises submissions into rounds 1, 2, ... (one round at
 * a time; later requests wait their turn in a bounded queue), snapshots the workspace, has the snapshot judged, and
 * records everything in the run's ledger stream through the pure aggregate (decide / evolve).
 *
 *   request --401/422--> SubmissionRejected (no round)             answered at once, never queued
 *           --queue---> decide: 429 (closed, budget, cooldown) --> SubmissionRejected (no round)
 *                       or SubmissionReceived (round n)
 *                       freeze Work, snapshot, thaw (or keep paused for the Judge: GPU hand-over)
 *                       SnapshotTaken (+ WorkspaceEdited when the workspace changed since the last snapshot)
 *                       editable-path check against the starting workspace --> RuleViolation, not judged
 *                       JudgePort.judge (records its own events)  --> read them back from the ledger
 *                       settle: counted (BudgetConsumed submissions [+ RuleViolation]) or refunded (503)
 *           <-- footer
 *
 * State is never kept anywhere but in the ledger: every decision first reads what is new there (`sync`), so the
 * service can be rebuilt from the ledger alone at any point (`resume`): a round left open by a controller that died
 * is settled when the Judge had recorded a result, and refunded otherwise (docs/run.md, "Resume").
 */
import { isAssayError, type Clock, type ErrorKind, type IdGenerator } from '@assay/core';
import { changesOutside, notEditableDetail, type PathChange } from '../domain/editable';
import { decide, type Decision, type GpuHolding, type Rejection, type RunCommand, type RunStartInput, type WorkspaceEditFacts } from '../domain/decide';
import { formatHistory, historyJson, rejectionFooter, roundFooter } from '../domain/feedback';
import { RUN_RULES, type BudgetKind, type JsonObject } from '../domain/run-events';
import type { ProbedGpu } from '../domain/gpu-host';
import { foldRun, initialRunState, openRound, type RunState } from '../domain/run-state';
import { RUN_ERROR_CODES, runError } from '../run.errors';
import type { JudgePort } from '../ports/judge.port';
import type { RunLedger } from '../ports/run-ledger.port';
import { classifySnapshotFailure, type Snapshotter, type WorkspaceChange } from '../ports/snapshotter.port';
import { NO_WORK_CONTROL, WORK_FREEZE_REFUSED, type WorkControl } from '../ports/work-control.port';
import { checkBearer } from './run-token';
import type { HistoryReply, HistoryRequest, SubmissionGateway, SubmitReply, SubmitRequest } from '../ports/submission-gateway.port';

export interface SubmissionServiceOptions {
  /** Authenticated submissions that may wait for their turn behind the round being judged (default 8). */
  readonly maxWaiting?: number;
  /** Keep Work paused while the Judge runs (GPU hand-over); default: resume it once the snapshot is taken. */
  readonly keepWorkPausedDuringJudge?: boolean;
  /** Where the agent finds a round's full Judge log inside Work, for the history after a restart. */
  readonly logPathOf?: (round: number) => string | null;
}

export interface SubmissionServiceDeps {
  readonly run: string;
  readonly ledger: RunLedger;
  readonly snapshotter: Snapshotter;
  readonly judge: JudgePort;
  readonly work?: WorkControl;
  readonly clock: Clock;
  readonly ids: IdGenerator;
  readonly options?: SubmissionServiceOptions;
}

export interface RecoveryReport {
  /** The round that was open, if any, and how it was settled. */
  readonly round: number | null;
  readonly outcome: 'counted' | 'refunded' | null;
}

const MISUSE_KIND: Record<string, ErrorKind> = {
  [RUN_ERROR_CODES.CONFLICT]: 'conflict',
  [RUN_ERROR_CODES.INVALID_INPUT]: 'invalid_input',
  [RUN_ERROR_CODES.NOT_STARTED]: 'not_found',
};

const describe = (e: unknown): string => (isAssayError(e) ? `${e.code}: ${e.message}` : e instanceof Error ? e.message : String(e));
const MAX_EDIT_PATHS = 100;

export class SubmissionService implements SubmissionGateway {
  private state: RunState;
  private roundChain: Promise<unknown> = Promise.resolve();
  private appendChain: Promise<unknown> = Promise.resolve();
  private pending = 0;
  private closing: string | null = null;
  private readonly abort = new AbortController();
  private readonly endedCtl = new AbortController();
  private readonly logs = new Map<number, string | null>();
  private readonly work: WorkControl;
  private readonly o: Required<Omit<SubmissionServiceOptions, 'logPathOf'>> & Pick<SubmissionServiceOptions, 'logPathOf'>;

  /**
   * A service over run `d.run` of `d.ledger`. Nothing is read or appended until one of `load`, `start` or `resume`,
   * one of which must come first.
   */
  constructor(private readonly d: SubmissionServiceDeps) {
    this.state = initialRunState(d.run);
    this.work = d.work ?? NO_WORK_CONTROL;
    this.o = {
      maxWaiting: d.options?.maxWaiting ?? 8,
      keepWorkPausedDuringJudge: d.options?.keepWorkPausedDuringJudge ?? false,
      logPathOf: d.options?.logPathOf,
    };
  }

  /** Loads the run from the ledger (nothing is appended). */
  async load(): Promise<this> {
    await this.locked(() => this.sync());
    return this;
  }

  /** Starts a new run: appends RunStarted (the run stream must not exist yet). */
  async start(input: RunStartInput): Promise<this> {
    await this.load();
    await this.apply({ kind: 'start', input });
    return this;
  }

  /** Rebuilds the run from the ledger after a restart and settles or refunds a round left open. */
  async resume(): Promise<RecoveryReport> {
    await this.load();
    if (!this.state.started)
      throw runError(RUN_ERROR_CODES.NOT_STARTED, 'not_found', `run ${this.d.run} has no RunStarted event in this ledger`, { run: this.d.run });
    return this.recover();
  }

  /** The run's state as folded from the ledger (read-only). */
  get current(): RunState {
    return this.state;
  }

  get signal(): AbortSignal {
    return this.abort.signal;
  }

  /**
   * Aborted once the run is completed in the ledger, whoever completed it: `complete()`, or a settlement that ended
   * the run itself (the refund that reached MAX_REFUNDED_ROUNDS). The runtime stops the agent on it.
   */
  get ended(): AbortSignal {
    return this.endedCtl.signal;
  }

  // ---- plumbing ---------------------------------------------------------------------------------------------------

  private locked<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.appendChain.then(fn, fn);
    this.appendChain = run.catch(() => undefined);
    return run;
  }

  private enqueue<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.roundChain.then(fn, fn);
    this.roundChain = run.catch(() => undefined);
    return run;
  }

  /** Folds what is new in the ledger. */
  private async sync(): Promise<void> {
    const events = await this.d.ledger.read(this.d.run, this.state.lastPosition + 1);
    if (events.length) this.state = foldRun(this.d.run, events, this.state);
    if (this.state.completed) {
      this.closing ??= `the run ended (${this.state.completed.status})`;
      if (!this.endedCtl.signal.aborted) this.endedCtl.abort();
    }
  }

  /** Decides on fresh state, appends and folds, atomically with respect to other appends of this service. */
  private apply(cmd: RunCommand): Promise<Decision> {
    return this.locked(async () => {
      await this.sync();
      const d = decide(this.state, cmd, this.d.clock.now());
      if (d.rejection && d.rejection.code.startsWith('RUN_')) {
        throw runError(d.rejection.code, MISUSE_KIND[d.rejection.code] ?? 'conflict', d.rejection.reason, { run: this.d.run, command: cmd.kind });
      }
      if (d.events.length) {
        const drafts = d.events.map((e) => ({ ...e, id: this.d.ids.next() }));
        const expected = this.state.revision ?? 'no_stream';
        try {
          await this.d.ledger.append(this.d.run, drafts, expected);
        } catch (e) {
          if (isAssayError(e) && e.code === 'LEDGER_WRONG_EXPECTED_REVISION') {
            throw runError(RUN_ERROR_CODES.CONCURRENT_WRITER, 'conflict', `run ${this.d.run} was written by another controller meanwhile; stop this one`, {
              run: this.d.run,
            });
          }
          // One retry with the same ids: idempotent if the first attempt was stored after all.
          await this.d.ledger.append(this.d.run, drafts, expected);
        }
        await this.sync();
      }
      return d;
    });
  }

  private rejectionReply(r: Rejection): SubmitReply {
    return {
      httpStatus: r.status,
      text: rejectionFooter(this.state, this.d.clock.now(), r.status, r.code, r.reason),
      round: null,
      status: 'rejected',
      code: r.code,
      retryAfterSec: r.retryAfterSec,
      view: null,
    };
  }

  private logOf(round: number): string | null {
    return this.logs.has(round) ? (this.logs.get(round) ?? null) : (this.o.logPathOf?.(round) ?? null);
  }

  private roundReply(round: number): SubmitReply {
    const f = roundFooter(this.state, round, this.d.clock.now(), this.logOf(round));
    return {
      httpStatus: f.httpStatus,
      text: f.text,
      round,
      status: f.view.status,
      code: f.httpStatus === 503 ? 'SUBMIT_REFUNDED' : null,
      retryAfterSec: null,
      view: f.view,
    };
  }

  private tokenHash(): string {
    const h = this.state.started?.protocol.submission.tokenSha256;
    if (!h) throw runError(RUN_ERROR_CODES.NOT_STARTED, 'not_found', `run ${this.d.run} has not started`, { run: this.d.run });
    return h;
  }

  // ---- the endpoint's operations ------------------------------------------------------------------------------------

  async submit(req: SubmitRequest): Promise<SubmitReply> {
    const auth = checkBearer(req.authorization, this.tokenHash());
    const base = { kind: 'submit' as const, auth, hasBody: req.hasBody, hasQuery: req.hasQuery };
    if (auth !== 'ok' || req.hasBody || req.hasQuery) return this.refuse(base);
    if (this.closing) return this.refuse({ ...base, closing: this.closing });
    // `pending` counts the round being judged and those waiting behind it.
    if (this.pending > this.o.maxWaiting) return this.refuse({ ...base, queueFull: true });
    this.pending += 1;
    return this.enqueue(async () => {
      try {
        return await this.playRound();
      } finally {
        this.pending -= 1;
      }
    });
  }

  private async refuse(cmd: Extract<RunCommand, { kind: 'submit' }>): Promise<SubmitReply> {
    const d = await this.apply(cmd);
    if (!d.rejection) throw runError(RUN_ERROR_CODES.CONFLICT, 'internal', 'a refused request was accepted');
    return this.rejectionReply(d.rejection);
  }

  async history(req: HistoryRequest): Promise<HistoryReply> {
    const auth = checkBearer(req.authorization, this.tokenHash());
    if (auth !== 'ok') {
      const d = decide(this.state, { kind: 'submit', auth, hasBody: false, hasQuery: false }, this.d.clock.now());
      const r = d.rejection as Rejection;
      return {
        httpStatus: 401,
        contentType: 'text/plain; charset=utf-8',
        body: rejectionFooter(this.state, this.d.clock.now(), 401, r.code, r.reason.replace('; nothing was judged', '')),
      };
    }
    await this.locked(() => this.sync());
    const now = this.d.clock.now();
    const logOf = (round: number) => this.logOf(round);
    if (req.json) return { httpStatus: 200, contentType: 'application/json', body: `${JSON.stringify(historyJson(this.state, now, logOf))}\n` };
    return { httpStatus: 200, contentType: 'text/plain; charset=utf-8', body: formatHistory(this.state, now, logOf) };
  }

  // ---- one round ----------------------------------------------------------------------------------------------------

  private async playRound(): Promise<SubmitReply> {
    const d = await this.apply({ kind: 'submit', auth: 'ok', hasBody: false, hasQuery: false, closing: this.closing });
    if (d.rejection) return this.rejectionReply(d.rejection);
    const round = openRound(this.state)?.round;
    if (round === undefined) throw runError(RUN_ERROR_CODES.CONFLICT, 'internal', 'SubmissionReceived did not open a round');
    try {
      await this.judgeRound(round);
    } catch (e) {
      // The ledger or a port failed in a way the round could not absorb: refund it if we still can, then report.
      if (openRound(this.state)?.round === round) {
        await this.apply({ kind: 'settle', round, infrastructure: `the controller failed: ${describe(e)}` }).catch(() => undefined);
      }
      if (openRound(this.state)?.round === round) throw e;
    }
    return this.roundReply(round);
  }

  private async judgeRound(round: number): Promise<void> {
    const { snapshotter, judge, run } = this.d;
    const keepPaused = this.o.keepWorkPausedDuringJudge;
    let frozen = false;
    const thaw = async () => {
      if (frozen) {
        frozen = false;
        await this.work.thaw();
      }
    };
    try {
      try {
        await this.work.freeze();
      } catch (e) {
        // Work's own processes kept the freezer from finishing (heavy I/O): the agent's doing, never a refund.
        if (isAssayError(e) && e.code === WORK_FREEZE_REFUSED)
          return void (await this.apply({
            kind: 'settle',
            round,
            violation: { rule: RUN_RULES.workFreezeFailed, detail: `Work could not be frozen for the round's snapshot: ${describe(e)}` },
          }));
        throw e;
      }
      frozen = true;
      let snap;
      try {
        snap = await snapshotter.snapshot({ run, round });
      } catch (e) {
        await thaw();
        // Who caused it decides: what the agent left in the workspace is a violation of the round (counted, score
        // 0); only a failure of the host or the store is refunded (classifySnapshotFailure).
        const fault = classifySnapshotFailure(e);
        if (fault.by === 'agent') return void (await this.apply({ kind: 'settle', round, violation: { rule: fault.rule, detail: fault.detail } }));
        return void (await this.apply({ kind: 'settle', round, infrastructure: fault.detail }));
      }
      if (!keepPaused) await thaw();
      const from = this.state.lastRoot;
      const edit = from !== null && from !== snap.root ? await this.editFacts(from, snap.root) : null;
      await this.apply({ kind: 'record_snapshot', round, snapshot: snap, edit });

      const editable = this.state.started?.protocol.editablePaths ?? null;
      const baseline = this.state.baselineRoot;
      if (editable !== null && baseline !== null && baseline !== snap.root) {
        const bad = await this.changesOutside(baseline, snap.root, editable);
        if (bad.length) {
          await thaw();
          return void (await this.apply({ kind: 'settle', round, violation: { rule: RUN_RULES.notEditable, detail: notEditableDetail(bad, editable) } }));
        }
      }

      let gpuSeconds = 0;
      let gpu: GpuHolding | null = null;
      let failure: string | null = null;
      try {
        const out = await judge.judge({ run, round, snapshot: snap.root, signal: this.abort.signal });
        this.logs.set(round, out.log);
        gpuSeconds = Number.isFinite(out.gpuSeconds) && out.gpuSeconds > 0 ? out.gpuSeconds : 0;
        gpu = gpuSeconds > 0 && out.gpu ? out.gpu : null;
      } catch (e) {
        failure = `the Judge could not judge the snapshot: ${describe(e)}`;
      } finally {
        await thaw();
      }
      await this.apply({ kind: 'settle', round, gpuSeconds, gpu, infrastructure: failure });
    } finally {
      await thaw();
    }
  }

  private async changesOutside(from: string, to: string, editable: readonly string[]): Promise<PathChange[]> {
    const bad: PathChange[] = [];
    for await (const c of this.d.snapshotter.changes(from, to)) {
      bad.push(...changesOutside([c], editable));
      if (bad.length >= 10) break;
    }
    return bad;
  }

  private async editFacts(from: string, to: string): Promise<WorkspaceEditFacts> {
    const f = { added: 0, removed: 0, changed: 0, bytesAdded: 0, bytesRemoved: 0 };
    const paths = { added: [] as string[], removed: [] as string[], changed: [] as string[] };
    let listed = 0;
    let truncated = false;
    const take = (c: WorkspaceChange) => {
      if (listed < MAX_EDIT_PATHS) {
        paths[c.change].push(c.path);
        listed += 1;
      } else truncated = true;
    };
    for await (const c of this.d.snapshotter.changes(from, to)) {
      f[c.change] += 1;
      const before = c.sizeBefore ?? 0;
      const after = c.sizeAfter ?? 0;
      if (c.change === 'added') f.bytesAdded += after;
      else if (c.change === 'removed') f.bytesRemoved += before;
      else if (after >= before) f.bytesAdded += after - before;
      else f.bytesRemoved += before - after;
      take(c);
    }
    return { from, to, ...f, paths, truncated };
  }

  // ---- the controller's operations ----------------------------------------------------------------------------------

  /** Settles or refunds a round left open (after a restart). */
  async recover(): Promise<RecoveryReport> {
    return this.enqueue(async () => {
      await this.locked(() => this.sync());
      const open = openRound(this.state);
      if (!open) return { round: null, outcome: null };
      await this.apply({ kind: 'recover' });
      const r = this.state.rounds[open.round - 1];
      return { round: open.round, outcome: r?.outcome === 'counted' ? 'counted' : 'refunded' };
    });
  }

  /**
   * Records the host's GPUs behind the run's `--gpus` (GpusProbed, controller): once per controller session of a GPU
   * run, before WorkStarted; `resumed` on a resume (the node or its GPUs may have changed since).
   */
  async gpusProbed(node: string, gpus: readonly ProbedGpu[], resumed = false): Promise<void> {
    await this.apply({ kind: 'gpus_probed', node, gpus, resumed });
  }

  /** Records the Work container (runtime). */
  async workStarted(container: string, image: string, limits: JsonObject): Promise<void> {
    await this.apply({ kind: 'work_started', container, image, limits });
  }

  /**
   * Snapshots the workspace between submissions (and once at the start: the baseline the editable-path rule
   * compares with). Records SnapshotTaken, and WorkspaceEdited when it changed; nothing when it did not.
   */
  async recordWorkspace(): Promise<{ root: string; changed: boolean }> {
    return this.enqueue(async () => {
      await this.work.freeze();
      let snap;
      try {
        snap = await this.d.snapshotter.snapshot({ run: this.d.run, round: null });
      } finally {
        await this.work.thaw();
      }
      await this.locked(() => this.sync());
      const from = this.state.lastRoot;
      if (from === snap.root) return { root: snap.root, changed: false };
      const edit = from !== null ? await this.editFacts(from, snap.root) : null;
      await this.apply({ kind: 'record_snapshot', round: null, snapshot: snap, edit });
      return { root: snap.root, changed: true };
    });
  }

  /** Records consumption of a time or GPU budget (Work's GPUs, agent time); going over closes submissions. */
  async consume(budget: Exclude<BudgetKind, 'submissions'>, amount: number, round: number | null = null, gpu: GpuHolding | null = null): Promise<void> {
    await this.apply({ kind: 'consume', budget, amount, round, gpu });
  }

  /** Records the wall time used since the last tick (at most up to the budget). */
  async tick(): Promise<void> {
    await this.apply({ kind: 'tick' });
  }

  /**
   * Ends the run after the round being judged (requests waiting behind it are refused with 429): records
   * RunCompleted with the best round under the recorded selection rule. `cancelled` also aborts a running Judge.
   */
  async complete(o: { status?: 'cancelled' | 'failed'; reason?: string } = {}): Promise<RunState['completed']> {
    this.closing ??= o.reason ?? `the run is ending (${o.status ?? 'completed'})`;
    if (o.status === 'cancelled') this.abort.abort();
    return this.enqueue(async () => {
      await this.locked(() => this.sync());
      if (!this.state.completed) await this.apply({ kind: 'complete', ...(o.status ? { status: o.status } : {}), ...(o.reason ? { reason: o.reason } : {}) });
      return this.state.completed;
    });
  }

  /** Ctrl-C: stops a running Judge, refuses what waits, records RunCompleted (cancelled). */
  cancel(reason = 'cancelled by the operator'): Promise<RunState['completed']> {
    return this.complete({ status: 'cancelled', reason });
  }
}

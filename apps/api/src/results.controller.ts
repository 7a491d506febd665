/**
 * The read side over HTTP (docs/projections.md): tasks, leaderboards, run trajectories, reproducibility and budget
 * reports, dispatched as the @nestjs/cqrs queries of @assay/projections. Every answer comes from read models caught
 * up with the ledger's latest signed checkpoint, after verifying the ledger: nothing past what
 * `assay ledger verify` accepts is ever shown.
 */
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { Controller, Get, Header, Inject, Param, Req, Res, Sse, StreamableFile, type MessageEvent } from '@nestjs/common';
import type { FastifyReply as Response, FastifyRequest as Request } from 'fastify';
import { redactLog } from '@assay/bundles';
import { QueryBus } from '@nestjs/cqrs';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import { defer, distinctUntilChanged, interval, map, startWith, switchMap, takeWhile, type Observable } from 'rxjs';
import { AssayError } from '@assay/core';
import { LeaderboardQuery, ListTasksQuery, ReadModelsProvider, RunReportQuery, TaskBudgetQuery, TrajectoryQuery } from '@assay/projections';
import { AnswerCache, sendAnswer } from './answer-cache';
import { SharedFeeds } from './shared-feeds';
import { RUN_ID_RE } from '@assay/run';
import { PublicRead } from './access';
import { ASSAY_HOME_TOKEN } from './app.tokens';
import { StrictIntPipe } from './http-edge';

/** The most of a Judge log one GET answers: its last 4 MiB. */
export const LOG_MAX_BYTES = 4 * 1024 * 1024;

const TASK_RE = /^[^\u0000-\u001f\u007f]{1,4096}$/;

function runId(id: string): string {
  if (!RUN_ID_RE.test(id))
    throw new AssayError('API_BAD_RUN_ID', 'invalid_input', 'a run id is 1-128 characters [A-Za-z0-9._:-] starting with a letter or digit', {
      details: { parameter: 'id' },
    });
  return id;
}

function taskId(task: string): string {
  if (!TASK_RE.test(task))
    throw new AssayError('API_BAD_TASK', 'invalid_input', 'a task id is 1-4096 characters without control characters', { details: { parameter: 'task' } });
  return task;
}

const notFound = (run: string) => new AssayError('RUN_NOT_FOUND', 'not_found', `no run ${run} in the signed part of this ledger`, { details: { run } });

/** How often a live stream looks for changes. */
export const LIVE_POLL_MS = 1000;

@ApiTags('results')
@Controller()
export class ResultsController {
  private readonly cache = new AnswerCache();

  constructor(
    private readonly queries: QueryBus,
    @Inject(ASSAY_HOME_TOKEN) private readonly home: string,
    private readonly readModels: ReadModelsProvider,
  ) {}

  private readonly feeds = new SharedFeeds();

  /**
   * Sends the answer for `key`: the kept JSON bytes when the read models have not moved since they were made, else
   * made by `make` (null: `missing` is thrown). Answers 304 to a matching If-None-Match. The routes take `@Res()`
   * without passthrough: this writes the whole response.
   */
  private async answer(req: Request, res: Response, key: string, make: () => Promise<unknown>, missing?: () => AssayError): Promise<void> {
    const a = await this.cache.get(key, await this.readModels.version(), make);
    if (!a) throw (missing ?? (() => new AssayError('NOT_FOUND', 'not_found', 'not found')))();
    sendAnswer(req, res, a);
  }

  @Get('tasks')
  @PublicRead()
  @ApiOperation({ summary: 'every task with at least one run, and its number of runs' })
  async tasks(@Req() req: Request, @Res() res: Response) {
    return this.answer(req, res, 'tasks', async () => ({ tasks: await this.queries.execute(new ListTasksQuery()) }));
  }

  @Get('leaderboards/:task')
  @PublicRead()
  @ApiOperation({ summary: "a task's leaderboard: one ranked group per protocol (task digest and fingerprint), with baselines and re-judges" })
  async leaderboard(@Param('task') task: string, @Req() req: Request, @Res() res: Response) {
    taskId(task);
    return this.answer(req, res, `leaderboard\n${task}`, async () => ({ task, groups: await this.queries.execute(new LeaderboardQuery(task)) }));
  }

  @Get('tasks/:task/budget')
  @PublicRead()
  @ApiOperation({ summary: "a task's budget report: what its runs allowed and used, summed" })
  budget(@Param('task') task: string, @Req() req: Request, @Res() res: Response) {
    taskId(task);
    return this.answer(req, res, `budget\n${task}`, () => this.queries.execute(new TaskBudgetQuery(task)));
  }

  @Get('runs/:id/trajectory')
  @PublicRead()
  @ApiOperation({ summary: "a run's trajectory: every round's time, status and score, and the best so far" })
  async trajectory(@Param('id') id: string, @Req() req: Request, @Res() res: Response) {
    runId(id);
    return this.answer(
      req,
      res,
      `trajectory\n${id}`,
      () => this.queries.execute(new TrajectoryQuery(id)),
      () => notFound(id),
    );
  }

  @Get('runs/:id/report')
  @PublicRead()
  @ApiOperation({ summary: "a run's reproducibility report (its re-judges against the recorded best) and budget report" })
  async report(@Param('id') id: string, @Req() req: Request, @Res() res: Response) {
    runId(id);
    return this.answer(
      req,
      res,
      `report\n${id}`,
      () => this.queries.execute(new RunReportQuery(id)),
      () => notFound(id),
    );
  }

  /**
   * A round's Judge log as the run kept it (`<home>/runs/<id>/logs/round-<n>.log`), redacted with the bundles'
   * `assay-redact/1` rules (keys, tokens, secrets, home paths, this machine's host name) as `bundle export --logs
   * redacted` does; the last 4 MiB at most (`x-assay-log-truncated: true` then). Only for a round of a run in the
   * signed ledger. The text is the candidate's and the Judge's: shown as text, never interpreted.
   */
  @Get('runs/:id/rounds/:round/log')
  @PublicRead()
  @Header('content-type', 'text/plain; charset=utf-8')
  @ApiOperation({ summary: "a round's Judge log, redacted (assay-redact/1), its last 4 MiB at most" })
  async log(
    @Param('id') id: string,
    @Param('round', new StrictIntPipe('round', { min: 1, max: 1_000_000 })) round: number,
    @Res({ passthrough: true }) res: Response,
  ): Promise<StreamableFile> {
    const t = await this.queries.execute(new TrajectoryQuery(runId(id)));
    if (!t) throw notFound(id);
    if (!t.rounds.some((r) => r.round === round))
      throw new AssayError('ROUND_NOT_FOUND', 'not_found', `run ${id} has no round ${round} in the signed part of this ledger`, {
        details: { run: id, round },
      });
    const path = join(this.home, 'runs', id, 'logs', `round-${round}.log`);
    let bytes: Buffer;
    let truncated = false;
    let fd: number;
    try {
      fd = openSync(path, 'r');
    } catch {
      throw new AssayError('LOG_NOT_FOUND', 'not_found', `no Judge log of round ${round} of run ${id} is kept on this server`, { details: { run: id, round } });
    }
    try {
      const st = fstatSync(fd);
      if (!st.isFile()) throw new AssayError('LOG_NOT_FOUND', 'not_found', `no Judge log of round ${round} of run ${id} is kept on this server`);
      const length = Math.min(st.size, LOG_MAX_BYTES);
      truncated = st.size > LOG_MAX_BYTES;
      bytes = Buffer.alloc(length);
      readSync(fd, bytes, 0, length, st.size - length);
    } finally {
      closeSync(fd);
    }
    if (truncated) res.header('x-assay-log-truncated', 'true');
    return new StreamableFile(redactLog(bytes, { hostnames: [hostname()] }).bytes, { type: 'text/plain; charset=utf-8' });
  }

  /**
   * Server-sent events: `trajectory` with the run's trajectory once, then at each change, until the run is no
   * longer running. A run not (yet) in the signed ledger sends nothing until it is.
   */
  @Sse('runs/:id/live')
  @PublicRead()
  @ApiOperation({ summary: "server-sent events: the run's trajectory at each change, until the run ends" })
  live(@Param('id') id: string): Observable<MessageEvent> {
    const run = runId(id);
    // One poll per run, shared by every connection following it (shared-feeds.ts).
    return this.feeds.of(run, () =>
      interval(LIVE_POLL_MS).pipe(
        startWith(0),
        switchMap(() => defer(() => this.queries.execute(new TrajectoryQuery(run)))),
        map((t) => (t ? JSON.stringify(t) : null)),
        distinctUntilChanged(),
        takeWhile((data) => data === null || (JSON.parse(data) as { status: string }).status === 'running', true),
        switchMap((data) => (data === null ? [] : [{ type: 'trajectory', data } satisfies MessageEvent])),
      ),
    );
  }
}

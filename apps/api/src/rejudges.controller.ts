/**
 * Re-judging over HTTP (auditor): `POST /rejudges?task=&trustedKey=&repeat=` with a result bundle as the body starts
 * `assay rejudge <bundle> --task <ASSAY_API_TASKS_DIR>/<task> --trusted-key <key> --repeat N --json` on this server, as
 * a detached program of its own (docs/rejudge.md); `GET /rejudges/:id` says whether it is still going and, once it
 * ended, its exit status and report. The re-judging records RejudgeCompleted in this server's ledger, as the CLI
 * does, so the reproducibility reports show it.
 *
 * Everything of one re-judging is in `<home>/api/rejudges/<id>/` (0700): `bundle` (the body), `report.json` (the
 * CLI's stdout: the report, or an error document), `log` (its stderr, whose last 4 KiB GET answers as `logTail`) and
 * `exit` (its status, written when it ended).
 */
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Controller, Get, HttpCode, Inject, Param, Post, Query, Req } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiQuery, ApiTags } from '@nestjs/swagger';
import type { FastifyRequest as Request } from 'fastify';
import { AssayError, CLOCK, type Clock } from '@assay/core';
import { Roles } from './access';
import { API_CONFIG, type ApiConfig } from './app.tokens';
import { datedId, serverTaskDir, startCli } from './cli-process';
import { bundleMaxBytes, receiveBody, requireOctetStream, verifierKeyParam } from './uploads';

const REJUDGE_ID = /^rj-[0-9]{8}-[0-9a-f]{8}$/;
const MAX_REPEAT = 10;

/** The last `max` bytes of a file (the CLI's progress lines), as text; empty when there is none. */
function tail(path: string, max: number): string {
  try {
    const b = readFileSync(path);
    return b.subarray(Math.max(0, b.length - max)).toString('utf8');
  } catch {
    return '';
  }
}

function rejudgesDir(home: string): string {
  return join(home, 'api', 'rejudges');
}

@ApiTags('rejudges')
@ApiBearerAuth()
@Controller('rejudges')
export class RejudgesController {
  constructor(
    @Inject(API_CONFIG) private readonly config: ApiConfig,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  @Post()
  @Roles('auditor')
  @HttpCode(202)
  @ApiQuery({ name: 'task', description: "a directory name under the server's ASSAY_API_TASKS_DIR (the full task, hidden tests included)" })
  @ApiQuery({ name: 'trustedKey', description: "the bundle's ledger root (controller) verifier key text, name+hex+base64" })
  @ApiQuery({ name: 'repeat', required: false, description: `fresh Judges, 1-${MAX_REPEAT} (default 3)` })
  @ApiOperation({
    summary: 're-judge a result bundle (the body, application/octet-stream) with a task of the server (auditor); answers once `assay rejudge` is started',
  })
  async start(@Req() req: Request, @Query('task') task?: string, @Query('trustedKey') trustedKey?: string, @Query('repeat') repeat?: string) {
    if (typeof task !== 'string')
      throw new AssayError('API_BAD_QUERY', 'invalid_input', 'task (query) names a task directory of the server', { details: { parameter: 'task' } });
    const taskDir = serverTaskDir(this.config, task, 'API_REJUDGE_DISABLED', 're-judges nothing', 'POST /rejudges');
    const key = verifierKeyParam(trustedKey, 'trustedKey', "the bundle's root verifier key text", 'API_BAD_QUERY');
    const n = repeat === undefined ? 3 : /^[0-9]{1,2}$/.test(repeat) ? Number(repeat) : NaN;
    if (!(n >= 1 && n <= MAX_REPEAT))
      throw new AssayError('API_BAD_QUERY', 'invalid_input', `repeat (query) must be an integer from 1 to ${MAX_REPEAT}`, { details: { parameter: 'repeat' } });
    requireOctetStream(req, 'the bundle file');
    const id = datedId('rj', this.clock);
    const dir = join(rejudgesDir(this.config.home), id);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const bundle = join(dir, 'bundle');
    try {
      await receiveBody(req, bundle, bundleMaxBytes(this.config.env), 'the bundle');
    } catch (e) {
      rmSync(dir, { recursive: true, force: true });
      throw e;
    }
    const { pid } = startCli(['rejudge', bundle, '--task', taskDir, '--trusted-key', key, '--repeat', String(n), '--json'], {
      home: this.config.home,
      stdout: join(dir, 'report.json'),
      stderr: join(dir, 'log'),
      exitStatus: join(dir, 'exit'),
      nodeOptions: this.config.env.ASSAY_API_RUN_NODE_OPTIONS ?? '',
    });
    return { id, pid, task, repeat: n };
  }

  @Get(':id')
  @Roles('auditor')
  @ApiOperation({ summary: 'a re-judging started here: running, or ended with its exit status and report (auditor)' })
  status(@Param('id') id: string) {
    if (!REJUDGE_ID.test(id))
      throw new AssayError('API_BAD_QUERY', 'invalid_input', 'a re-judging id is rj-<yyyymmdd>-<8 hex>, as POST /rejudges answered', {
        details: { parameter: 'id' },
      });
    const dir = join(rejudgesDir(this.config.home), id);
    if (!existsSync(dir)) throw new AssayError('REJUDGE_NOT_FOUND', 'not_found', `no re-judging ${id} was started on this server`, { details: { id } });
    const exitFile = join(dir, 'exit');
    const logTail = tail(join(dir, 'log'), 4096);
    if (!existsSync(exitFile)) return { id, status: 'running', exitCode: null, report: null, error: null, logTail };
    const exitCode = Number(readFileSync(exitFile, 'utf8').trim());
    let out: unknown = null;
    try {
      out = JSON.parse(readFileSync(join(dir, 'report.json'), 'utf8'));
    } catch {
      out = null;
    }
    const error = out !== null && typeof out === 'object' && 'error' in out ? (out as { error: unknown }).error : null;
    return { id, status: 'ended', exitCode, report: error === null ? out : null, error, logTail };
  }
}

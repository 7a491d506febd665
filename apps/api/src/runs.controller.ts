/**
 * Runs over HTTP (operator): start a run of a task from the server's task directory, and cancel a running one.
 *
 * Start: `POST /runs {task, agent, runId?, maxSubmissions?}` starts `assay run` for `<ASSAY_API_TASKS_DIR>/<task>` as a
 * detached child process on this server (the API only launches it; the run is the CLI's, with its own controller lock,
 * Docker containers and ledger writes), its output in `<home>/api/runs/<run>.log`. Without ASSAY_API_TASKS_DIR the
 * API starts no runs (403 API_RUNS_DISABLED): task directories are chosen by whoever runs the server, never by a
 * caller's path.
 *
 * Cancel: `POST /runs/:id/cancel` writes the run's `cancel.request`, which its controller acts on within a second as
 * if Ctrl-C had been pressed (RunCompleted `cancelled`); 409 RUN_NOT_RUNNING when no controller holds the run here.
 */
import { existsSync, lstatSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { Body, Controller, HttpCode, Inject, Param, Post, Req } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiProperty, ApiPropertyOptional, ApiTags } from '@nestjs/swagger';
import { IsBoolean, IsInt, IsOptional, IsString, Length, Matches, Max, Min } from 'class-validator';
import { AssayError, CLOCK, writeFileAtomic, type Clock } from '@assay/core';
import { RUN_CANCEL_REQUEST, RUN_CONTROLLER_LOCK } from '@assay/run';
import { Roles, type WithPrincipal } from './access';
import { API_CONFIG, type ApiConfig } from './app.tokens';
import { datedId, serverTaskDir, startCli } from './cli-process';

const RUN_ID = /^[a-z0-9][a-z0-9-]{0,62}$/;

class StartRunDto {
  @ApiProperty({ description: "a directory name under the server's ASSAY_API_TASKS_DIR" })
  @IsString()
  @Matches(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/, { message: 'task must be a directory name: 1-128 characters [A-Za-z0-9._-], not starting with . or -' })
  task!: string;

  @ApiProperty({ description: 'as `assay run --agent`: reference, codex, claude, or command:<shell>' })
  @IsString()
  @Length(1, 4096)
  agent!: string;

  @ApiPropertyOptional({ description: 'lowercase letters, digits and dashes (default: generated)' })
  @IsOptional()
  @Matches(RUN_ID, { message: 'runId must be 1-63 lowercase letters, digits and dashes' })
  runId?: string;

  @ApiPropertyOptional()
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(100000)
  maxSubmissions?: number;

  @ApiPropertyOptional({
    description: 'as `assay run --allow-root-agent`: a full-rootfs task may run its agent as root in Work on a daemon without userns-remap',
  })
  @IsOptional()
  @IsBoolean()
  allowRootAgent?: boolean;

  @ApiPropertyOptional({
    description:
      "as `assay run --allow-unbounded-workspace`: go on where the workspace cannot be bounded by the task's storage_mb (a server that is not root, or outside the Docker daemon's mount namespace)",
  })
  @IsOptional()
  @IsBoolean()
  allowUnboundedWorkspace?: boolean;
}

@ApiTags('runs')
@ApiBearerAuth()
@Controller('runs')
export class RunsController {
  constructor(
    @Inject(API_CONFIG) private readonly config: ApiConfig,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  @Post()
  @Roles('operator')
  @HttpCode(202)
  @ApiOperation({ summary: "start `assay run` for a task of the server's ASSAY_API_TASKS_DIR (operator); answers once it is launched" })
  start(@Body() body: StartRunDto) {
    const taskDir = serverTaskDir(this.config, body.task, 'API_RUNS_DISABLED', 'starts no runs', 'POST /runs');
    const run = body.runId ?? datedId('r', this.clock);
    if (existsSync(join(this.config.home, 'runs', run)))
      throw new AssayError('RUN_EXISTS', 'conflict', `run ${run} exists already (POST /runs/${run}/cancel, or \`assay run --resume ${run}\` on the server)`);
    const logs = join(this.config.home, 'api', 'runs');
    mkdirSync(logs, { recursive: true, mode: 0o700 });
    const logPath = join(logs, `${run}.log`);
    const args = [
      'run',
      taskDir,
      '--agent',
      body.agent,
      '--run-id',
      run,
      '--json',
      ...(body.allowRootAgent === true ? ['--allow-root-agent'] : []),
      ...(body.allowUnboundedWorkspace === true ? ['--allow-unbounded-workspace'] : []),
    ];
    if (body.maxSubmissions !== undefined) args.push('--max-submissions', String(body.maxSubmissions));
    // ASSAY_API_RUN_NODE_OPTIONS: Node options for the run's process (for example a memory limit).
    const { pid } = startCli(args, { home: this.config.home, stdout: logPath, nodeOptions: this.config.env.ASSAY_API_RUN_NODE_OPTIONS ?? '' });
    return { run, pid, log: logPath };
  }

  @Post(':id/cancel')
  @Roles('operator')
  @HttpCode(202)
  @ApiOperation({ summary: "ask a running run's controller to cancel it, as Ctrl-C does (operator)" })
  cancel(@Param('id') id: string, @Req() req: WithPrincipal) {
    if (!RUN_ID.test(id))
      throw new AssayError('API_BAD_RUN_ID', 'invalid_input', 'a run id is 1-63 lowercase letters, digits and dashes', { details: { parameter: 'id' } });
    const dir = join(this.config.home, 'runs', id);
    let isDir = false;
    try {
      isDir = lstatSync(dir).isDirectory();
    } catch {
      isDir = false;
    }
    if (!isDir || !existsSync(join(dir, RUN_CONTROLLER_LOCK)))
      throw new AssayError('RUN_NOT_RUNNING', 'conflict', `no controller of run ${id} is running on this server`, { details: { run: id } });
    const requestedAt = this.clock.now().toISOString();
    writeFileAtomic(join(dir, RUN_CANCEL_REQUEST), `${JSON.stringify({ requestedAt, by: req.principal?.id ?? null })}\n`, { mode: 0o600 });
    return { run: id, cancelRequested: true, requestedAt };
  }
}

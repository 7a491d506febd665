import { Body, Controller, Get, Header, HttpStatus, Param, Post, Query, Res } from '@nestjs/common';
import type { Response } from 'express';
import { CommandBus, QueryBus } from '@nestjs/cqrs';
import { Type } from 'class-transformer';
import { ArrayMaxSize, ArrayMinSize, IsArray, IsObject, IsOptional, IsString, Matches, ValidateNested } from 'class-validator';
import {
  AppendEventsCommand,
  ListKeysQuery,
  ProveConsistencyQuery,
  ProveInclusionQuery,
  SignCheckpointCommand,
  VerifyLedgerQuery,
  LedgerHomeProvider,
  formatInclusionProof,
  type ExpectedRevision,
  type JsonObject,
} from '@assay/ledger';
import { runClaimRules } from '@assay/run';
import { StrictIntPipe } from './http-edge';

class NewEventDto {
  @IsString()
  type!: string;

  @IsObject()
  data!: JsonObject;

  @IsOptional()
  @IsString()
  id?: string;
}

class AppendDto {
  @IsString()
  stream!: string;

  @IsOptional()
  @Matches(/^(any|no_stream|stream_exists|\d{1,15})$/)
  expectedRevision?: string;

  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(1000)
  @ValidateNested({ each: true })
  @Type(() => NewEventDto)
  events!: NewEventDto[];
}

function expected(v: string | undefined): ExpectedRevision {
  if (v === undefined || v === 'any' || v === 'no_stream' || v === 'stream_exists') return v ?? 'any';
  return Number(v);
}

/** The ledger over HTTP: the same commands and queries the CLI dispatches. */
@Controller('ledger')
export class LedgerController {
  constructor(
    private readonly commands: CommandBus,
    private readonly queries: QueryBus,
  ) {}

  @Post('events')
  async append(@Body() body: AppendDto) {
    const r = await this.commands.execute(new AppendEventsCommand(body.stream, body.events, expected(body.expectedRevision)));
    return {
      stream: r.stream,
      nextExpectedRevision: r.nextExpectedRevision,
      lastPosition: r.lastPosition,
      idempotent: r.idempotent,
      events: r.events.map((e) => ({ position: e.position, revision: e.revision, id: e.id, type: e.type, hash: Buffer.from(e.hash).toString('hex') })),
    };
  }

  @Get('verify')
  verify() {
    // Only worker threads check events, so the server keeps answering other requests meanwhile.
    return this.queries.execute(new VerifyLedgerQuery({ claims: runClaimRules(), mainThread: false }));
  }

  @Post('checkpoints')
  @Header('content-type', 'text/plain; charset=utf-8')
  async checkpoint() {
    return (await this.commands.execute(new SignCheckpointCommand())).note;
  }

  @Get('proofs/inclusion/:position')
  @Header('content-type', 'text/plain; charset=utf-8')
  async inclusion(@Param('position', new StrictIntPipe('position')) position: number) {
    return formatInclusionProof(await this.queries.execute(new ProveInclusionQuery(position)));
  }

  @Get('proofs/consistency')
  consistency(@Query('old', new StrictIntPipe('old')) old: number, @Query('new', new StrictIntPipe('new', { optional: true })) newer?: number) {
    return this.queries.execute(new ProveConsistencyQuery(old, newer));
  }

  @Get('keys')
  keys() {
    return this.queries.execute(new ListKeysQuery());
  }
}

@Controller()
export class HealthController {
  constructor(private readonly p: LedgerHomeProvider) {}

  /** Cheap: opens the ledger (once, read-only) and reports its size and last signed checkpoint; 503 with a reason when there is none. */
  @Get('health')
  async health(@Res({ passthrough: true }) res: Response) {
    try {
      const home = await this.p.reader();
      const events = await home.db.events.size();
      const cp = home.ledger.lastSigned();
      return { status: 'ok', ledger: { events, lastCheckpoint: cp ? { treeSize: cp.treeSize, rootHash: cp.rootHash } : null } };
    } catch (e) {
      res.status(HttpStatus.SERVICE_UNAVAILABLE);
      const reason = e instanceof Error ? e.message : String(e);
      return { status: 'unavailable', reason };
    }
  }
}

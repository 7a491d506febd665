import { Body, Controller, Get, Header, Param, ParseIntPipe, Post, Query } from '@nestjs/common';
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
  formatInclusionProof,
  type ExpectedRevision,
  type JsonObject,
} from '@assay/ledger';
import { runClaimRules } from '@assay/run';

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
  async inclusion(@Param('position', ParseIntPipe) position: number) {
    return formatInclusionProof(await this.queries.execute(new ProveInclusionQuery(position)));
  }

  @Get('proofs/consistency')
  consistency(@Query('old', ParseIntPipe) old: number, @Query('new') newer?: string) {
    return this.queries.execute(new ProveConsistencyQuery(old, newer === undefined ? undefined : Number.parseInt(newer, 10)));
  }

  @Get('keys')
  keys() {
    return this.queries.execute(new ListKeysQuery());
  }
}

@Controller()
export class HealthController {
  @Get('health')
  health() {
    return { status: 'ok' };
  }
}

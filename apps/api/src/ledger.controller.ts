import { Body, Controller, Get, Header, HttpStatus, Inject, Param, Post, Query, Req, Res, Sse, type MessageEvent } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import { distinctUntilChanged, from, interval, map, startWith, switchMap, type Observable } from 'rxjs';
import type { FastifyReply as Response, FastifyRequest as Request } from 'fastify';
import { CommandBus, QueryBus } from '@nestjs/cqrs';
import { Type } from 'class-transformer';
import { ArrayMaxSize, ArrayMinSize, IsArray, IsIn, IsObject, IsOptional, IsString, Length, Matches, ValidateNested } from 'class-validator';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  AppendEventsCommand,
  ListKeysQuery,
  ProveConsistencyQuery,
  ProveInclusionQuery,
  SignCheckpointCommand,
  VerifyLedgerQuery,
  ReadEventsQuery,
  RegisterKeyCommand,
  RevokeKeyCommand,
  ROLES,
  parseVerifierKey,
  type Role,
  LedgerHomeProvider,
  formatInclusionProof,
  type ExpectedRevision,
  type JsonObject,
  checkWitnessPolicy,
  collectCosignatures,
  parseNote,
  parseWitnessPolicy,
  type WitnessPolicy,
} from '@assay/ledger';
import { runClaimRules } from '@assay/run';
import { AssayError, writeFileAtomic } from '@assay/core';
import { API_CONFIG, type ApiConfig } from './app.tokens';
import { StrictIntPipe } from './http-edge';
import { Open, PublicRead, Roles } from './access';
import { ApiMetrics } from './metrics';
import { AnswerCache, answerOf, sendAnswer } from './answer-cache';
import { SharedFeeds } from './shared-feeds';

/** Most events one GET /ledger/events answers. */
export const EVENTS_PAGE_MAX = 1000;
const STREAM_RE = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$/;

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

class RegisterKeyDto {
  /** The verifier key text (`name+hex+base64`, as in a .pub file). */
  @IsString()
  @Length(1, 1024)
  publicKey!: string;

  @IsIn(ROLES as unknown as string[])
  role!: Role;
}

class CosignDto {
  /** A witness's answer for the latest signed checkpoint: the cosigned note, or its cosignature lines alone. */
  @IsString()
  @Length(1, 65536)
  note!: string;
}

class RevokeKeyDto {
  @IsString()
  @Length(1, 512)
  reason!: string;
}

function expected(v: string | undefined): ExpectedRevision {
  if (v === undefined || v === 'any' || v === 'no_stream' || v === 'stream_exists') return v ?? 'any';
  return Number(v);
}

/** The ledger over HTTP: the same commands and queries the CLI dispatches. */
@ApiTags('ledger')
@ApiBearerAuth()
@Controller('ledger')
export class LedgerController {
  constructor(
    private readonly commands: CommandBus,
    private readonly queries: QueryBus,
    private readonly p: LedgerHomeProvider,
    private readonly metrics: ApiMetrics,
    @Inject(API_CONFIG) private readonly config: ApiConfig,
  ) {}

  /** One cosignature merge at a time in this server: each reads, merges and rewrites checkpoint.cosigned. */
  private cosigning: Promise<unknown> = Promise.resolve();

  /** Full pages of GET /ledger/events, as JSON bytes (they never change). */
  private readonly fullPages = new AnswerCache(256, 32 * 1024 * 1024);

  @Post('events')
  @Roles('admin')
  @ApiOperation({ summary: 'append events to a stream (admin): each is signed by the ledger key of its role' })
  async append(@Body() body: AppendDto) {
    const stop = this.metrics.appendLatency.startTimer();
    const r = await this.commands.execute(new AppendEventsCommand(body.stream, body.events, expected(body.expectedRevision)));
    stop();
    if (!r.idempotent) this.metrics.eventsAppended.inc(r.events.length);
    return {
      stream: r.stream,
      nextExpectedRevision: r.nextExpectedRevision,
      lastPosition: r.lastPosition,
      idempotent: r.idempotent,
      events: r.events.map((e) => ({ position: e.position, revision: e.revision, id: e.id, type: e.type, hash: Buffer.from(e.hash).toString('hex') })),
    };
  }

  @Get('events')
  @PublicRead()
  @ApiOperation({ summary: 'stored events, paged: the whole log from a position, or one stream from a revision; each with its hash and stored envelope bytes' })
  async events(
    @Req() req: Request,
    @Res() res: Response,
    @Query('from', new StrictIntPipe('from', { optional: true })) fromAt?: number,
    @Query('limit', new StrictIntPipe('limit', { optional: true, min: 1, max: EVENTS_PAGE_MAX })) limit?: number,
    @Query('stream') stream?: string,
  ): Promise<void> {
    if (stream !== undefined && !STREAM_RE.test(stream))
      throw new AssayError('API_BAD_STREAM', 'invalid_input', `stream must be 1-200 characters [A-Za-z0-9._:-] starting with a letter or digit`, {
        details: { parameter: 'stream' },
      });
    const n = limit ?? 100;
    const from = fromAt ?? 0;
    // The ledger is append-only: a full page never changes, so it is kept as its JSON bytes (a short one can still grow).
    const key = `${stream ?? ''}\n${from}\n${n}`;
    const kept = this.fullPages.peek(key, 'full');
    if (kept) return sendAnswer(req, res, kept);
    const rows = await this.queries.execute(new ReadEventsQuery({ from, limit: n, bytes: true, ...(stream !== undefined ? { stream } : {}) }));
    const events = rows.map((r) => ({ ...r.envelope, position: r.position, hash: r.hash, envelope: r.bytes }));
    // The next page: by position for the log, by revision for a stream; null when this page was not full.
    const next = rows.length < n ? null : stream !== undefined ? (rows[rows.length - 1]!.envelope.revision as number) + 1 : rows[rows.length - 1]!.position + 1;
    const page = answerOf({ events, next });
    if (rows.length === n) this.fullPages.put(key, 'full', page);
    sendAnswer(req, res, page);
  }

  @Get('checkpoints/latest')
  @PublicRead()
  @ApiOperation({
    summary:
      'the latest signed checkpoint (tree size, root, the signed note) and the latest one witnesses cosigned (the note with their cosignature lines), if any',
  })
  async latestCheckpoint() {
    const cp = (await this.p.reader()).committedCheckpoint();
    if (!cp)
      throw new AssayError(
        'LEDGER_NO_CHECKPOINT',
        'not_found',
        'the ledger has no signed checkpoint yet (POST /ledger/checkpoints, or `assay checkpoint sign`)',
      );
    // `assay ledger checkpoint --witness...` keeps the last checkpoint witnesses cosigned, with their lines; it may be
    // older than the latest signed one.
    const file = join(this.p.home, 'ledger', 'checkpoint.cosigned');
    const cosigned = existsSync(file) ? readFileSync(file, 'utf8') : null;
    return { ...cp, cosigned };
  }

  /** Server-sent events: the ledger's head (event count and latest checkpoint) once, then at each change. */
  @Sse('live')
  @PublicRead()
  @ApiOperation({ summary: "server-sent events: the ledger's head (events, latest checkpoint) at each change" })
  live(): Observable<MessageEvent> {
    // One poll of the head, shared by every connection (shared-feeds.ts).
    return this.feeds.of('head', () =>
      interval(1000).pipe(
        startWith(0),
        switchMap(() => from(this.head())),
        map((h) => JSON.stringify(h)),
        distinctUntilChanged(),
        map((data) => ({ type: 'head', data })),
      ),
    );
  }

  private readonly feeds = new SharedFeeds();

  private async head() {
    return (await this.p.reader()).head();
  }

  @Get('verify')
  @PublicRead()
  @ApiOperation({ summary: 'verify the whole ledger as `assay ledger verify` does (signatures, chains, Merkle root, checkpoints, claims)' })
  verify() {
    // Only worker threads check events, so the server keeps answering other requests meanwhile.
    return this.queries.execute(new VerifyLedgerQuery({ claims: runClaimRules(), mainThread: false }));
  }

  @Post('checkpoints')
  @Roles('operator')
  @ApiOperation({ summary: 'sign a checkpoint of the whole log (operator)' })
  @Header('content-type', 'text/plain; charset=utf-8')
  async checkpoint() {
    return (await this.commands.execute(new SignCheckpointCommand())).note;
  }

  /**
   * An auditor (a witness) hands in its cosignature of the latest signed checkpoint: verified against the server's
   * witness policy (ASSAY_API_WITNESS_POLICY) and merged into `<home>/ledger/checkpoint.cosigned`, as
   * `assay ledger checkpoint --witness FILE` does. Nothing is kept unless every line by a policy witness verifies.
   */
  @Post('checkpoints/cosignatures')
  @Roles('auditor')
  @ApiOperation({
    summary:
      "hand in a witness's cosignature of the latest signed checkpoint (auditor): verified against the server's witness policy (ASSAY_API_WITNESS_POLICY), merged into the cosigned checkpoint",
  })
  async cosign(@Body() body: CosignDto) {
    const run = this.cosigning.then(() => this.mergeCosignature(body.note));
    this.cosigning = run.catch(() => undefined);
    return run;
  }

  private async mergeCosignature(answer: string) {
    const policyFile = this.config.env.ASSAY_API_WITNESS_POLICY;
    if (!policyFile)
      throw new AssayError(
        'API_COSIGN_DISABLED',
        'refused',
        'this API takes no cosignatures: start it with ASSAY_API_WITNESS_POLICY=<a witness policy file> naming the witnesses whose cosignatures it keeps',
      );
    let policy: WitnessPolicy;
    try {
      policy = parseWitnessPolicy(readFileSync(policyFile, 'utf8'));
    } catch (e) {
      throw new AssayError('API_COSIGN_DISABLED', 'unavailable', `the server's witness policy ${policyFile} cannot be used: ${(e as Error).message}`);
    }
    const home = await this.p.reader();
    // The checkpoint GET /ledger/checkpoints/latest gives, so a witness that cosigned that one is never refused.
    const signed = home.committedCheckpoint();
    if (!signed) throw new AssayError('LEDGER_NO_CHECKPOINT', 'not_found', 'the ledger has no signed checkpoint yet to cosign');
    if (answer.includes('\n\n')) {
      let body: string | null = null;
      try {
        body = parseNote(answer).body;
      } catch {
        /* not a note: read as cosignature lines below, and refused there */
      }
      if (body !== null && body !== parseNote(signed.note).body)
        throw new AssayError(
          'API_COSIGN_REFUSED',
          'conflict',
          `the cosigned note is not of the latest signed checkpoint (tree size ${signed.treeSize}): cosign that one (GET /ledger/checkpoints/latest)`,
          { details: { treeSize: signed.treeSize } },
        );
    }
    const file = join(this.p.home, 'ledger', 'checkpoint.cosigned');
    const kept = existsSync(file) ? readFileSync(file, 'utf8') : null;
    const start = kept !== null && parseNote(kept).body === parseNote(signed.note).body ? kept : signed.note;
    const r = await collectCosignatures({
      note: start,
      sources: [{ kind: 'file', path: 'the request body' }],
      keys: policy.witnesses,
      knownSizes: {},
      transport: {
        readFile: () => answer,
        run: () => Promise.reject(new Error('internal: no witness commands here')),
        prove: () => Promise.reject(new Error('internal: no proofs here')),
      },
    });
    const outcome = r.witnesses[0];
    if (!outcome?.ok)
      throw new AssayError(
        'WITNESS_BAD_COSIGNATURE',
        'invalid_input',
        `the cosignature was not kept: ${outcome?.error?.message ?? 'no answer'} (it must cosign the latest signed checkpoint, tree size ${signed.treeSize}, by a witness of the server's policy)`,
        { details: { treeSize: signed.treeSize } },
      );
    writeFileAtomic(file, r.note);
    const q = checkWitnessPolicy(r.note, policy);
    return { treeSize: signed.treeSize, cosigners: outcome.cosigners, cosigned: q.cosigned.map((c) => c.signer), quorum: q.quorum, met: q.met, note: r.note };
  }

  @Get('proofs/inclusion/:position')
  @PublicRead()
  @ApiOperation({ summary: 'an RFC 9162 inclusion proof of the event at a position, as c2sp.org/tlog-proof@v1 text' })
  @Header('content-type', 'text/plain; charset=utf-8')
  async inclusion(@Param('position', new StrictIntPipe('position')) position: number) {
    return formatInclusionProof(await this.queries.execute(new ProveInclusionQuery(position)));
  }

  @Get('proofs/consistency')
  @PublicRead()
  @ApiOperation({ summary: 'an RFC 9162 consistency proof between two tree sizes' })
  consistency(@Query('old', new StrictIntPipe('old')) old: number, @Query('new', new StrictIntPipe('new', { optional: true })) newer?: number) {
    return this.queries.execute(new ProveConsistencyQuery(old, newer));
  }

  @Post('keys')
  @Roles('admin')
  @ApiOperation({ summary: 'register a public key and its role (admin): KeyRegistered, signed by the controller key' })
  async registerKey(@Body() body: RegisterKeyDto) {
    let key;
    try {
      key = parseVerifierKey(body.publicKey.trim());
    } catch (e) {
      throw new AssayError('API_INVALID_BODY', 'invalid_input', `publicKey: ${(e as Error).message}`, {
        details: { fields: [{ field: 'publicKey', problems: [(e as Error).message] }] },
      });
    }
    const r = await this.commands.execute(new RegisterKeyCommand({ name: key.name, signer: key.signer, publicKeyText: key.text }, body.role));
    return { signer: key.signer, role: body.role, position: r.lastPosition };
  }

  @Post('keys/:signer/revoke')
  @Roles('admin')
  @ApiOperation({ summary: 'revoke a key (admin): KeyRevoked; it may sign nothing from then on' })
  async revokeKey(@Param('signer') signer: string, @Body() body: RevokeKeyDto) {
    if (!/^[^\s+]{1,128}\+[0-9a-f]{8}$/.test(signer))
      throw new AssayError('API_BAD_SIGNER', 'invalid_input', 'the key is <name>+<8 hex key id>', { details: { parameter: 'signer' } });
    const r = await this.commands.execute(new RevokeKeyCommand(signer, body.reason));
    return { signer, revoked: true, position: r.lastPosition };
  }

  @Get('keys')
  @PublicRead()
  @ApiOperation({ summary: "the ledger's registered keys and roles" })
  keys() {
    return this.queries.execute(new ListKeysQuery());
  }
}

@ApiTags('health')
@Controller()
export class HealthController {
  constructor(private readonly p: LedgerHomeProvider) {}

  /** Cheap: opens the ledger (once, read-only) and reports its size and last signed checkpoint; 503 with a reason when there is none. */
  @Get('health')
  @Open()
  async health(@Res({ passthrough: true }) res: Response) {
    try {
      const { events, checkpoint } = await (await this.p.reader()).head();
      return { status: 'ok', ledger: { events, lastCheckpoint: checkpoint } };
    } catch (e) {
      res.code(HttpStatus.SERVICE_UNAVAILABLE);
      const reason = e instanceof Error ? e.message : String(e);
      return { status: 'unavailable', reason };
    }
  }
}

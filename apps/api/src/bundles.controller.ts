/**
 * Importing a result bundle over HTTP (operator): `POST /bundles?publisherKey=<verifier key text>` with the bundle file
 * as the body (`content-type: application/octet-stream`, at most ASSAY_API_BUNDLE_MAX_BYTES, default 256 MiB). The
 * same command as `assay bundle import` (@assay/projections ImportBundleCommand): verified against the publisher's key,
 * refused and not kept when it does not verify, then an imported leaderboard row.
 */
import { createReadStream, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { Body, Controller, HttpCode, Inject, Param, Post, Query, Req, Res, StreamableFile } from '@nestjs/common';
import { IsIn, IsOptional } from 'class-validator';
import { hostname } from 'node:os';
import type { FastifyReply as Response } from 'fastify';
import { ApiBearerAuth, ApiOperation, ApiQuery, ApiTags } from '@nestjs/swagger';
import type { FastifyRequest as Request } from 'fastify';
import { LedgerHomeProvider } from '@assay/ledger';
import { SnapshotHomeProvider } from '@assay/snapshots';
import { AssayError } from '@assay/core';
import { ImportBundleCommand, importsDir } from '@assay/projections';
import { CommandBus } from '@nestjs/cqrs';
import { exportRunBundleFromHome, verifyBundle } from '@assay/bundles';
import { RUN_ID_RE, runClaimRules } from '@assay/run';
import { Roles } from './access';
import { API_CONFIG, type ApiConfig } from './app.tokens';
import { bundleMaxBytes, receiveBody, requireOctetStream, verifierKeyParam } from './uploads';

class ExportBundleDto {
  @IsOptional()
  @IsIn(['best', 'all', 'none'])
  snapshots?: 'best' | 'all' | 'none';

  /** `full` is not offered over HTTP: a run's raw logs stay on the server (`assay bundle export --logs full`). */
  @IsOptional()
  @IsIn(['none', 'redacted'])
  logs?: 'none' | 'redacted';
}

/**
 * A run's result bundle over HTTP (operator): `POST /runs/:id/bundle {snapshots?, logs?}` exports it as
 * `assay bundle export` does, signed with the server's controller key, and answers the file.
 */
@ApiTags('bundles')
@ApiBearerAuth()
@Controller('runs')
export class RunBundleController {
  constructor(
    @Inject(API_CONFIG) private readonly config: ApiConfig,
    private readonly ledger: LedgerHomeProvider,
    private readonly store: SnapshotHomeProvider,
  ) {}

  @Post(':id/bundle')
  @Roles('operator')
  @HttpCode(200)
  @ApiOperation({ summary: "export a run's result bundle signed with the server's controller key (operator); the answer is the file" })
  async export(@Param('id') id: string, @Body() body: ExportBundleDto, @Res({ passthrough: true }) res: Response): Promise<StreamableFile> {
    if (!RUN_ID_RE.test(id))
      throw new AssayError('API_BAD_RUN_ID', 'invalid_input', 'a run id is 1-128 characters [A-Za-z0-9._:-]', { details: { parameter: 'id' } });
    const home = await this.ledger.get();
    const publisher = home.ledger.key('controller');
    if (!publisher) throw new AssayError('LEDGER_NO_KEY_FOR_ROLE', 'refused', "exporting a bundle needs the controller key in the server's ASSAY_HOME");
    const dir = join(this.config.home, 'api', 'exports');
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const out = join(dir, `${id}-${randomBytes(6).toString('hex')}.bundle`);
    try {
      const r = await exportRunBundleFromHome({
        homeDir: this.config.home,
        home,
        snapshotStore: () => this.store.writer(),
        publisher,
        run: id,
        out,
        snapshots: body.snapshots ?? 'best',
        logs: body.logs ?? 'none',
        hostnames: [hostname()],
      });
      res.header('content-disposition', `attachment; filename="${id}.bundle"`);
      res.header('x-assay-bundle-digest', r.contentDigest);
      const bytes = readFileSync(out);
      return new StreamableFile(bytes, { type: 'application/octet-stream', length: bytes.length });
    } finally {
      rmSync(out, { force: true });
    }
  }
}

@ApiTags('bundles')
@ApiBearerAuth()
@Controller('bundles')
export class BundlesController {
  constructor(
    @Inject(API_CONFIG) private readonly config: ApiConfig,
    private readonly commands: CommandBus,
  ) {}

  @Post()
  @Roles('operator')
  @HttpCode(201)
  @ApiQuery({ name: 'publisherKey', description: "the publisher's root (controller) verifier key text, name+hex+base64" })
  @ApiOperation({ summary: "import someone else's result bundle (the body, application/octet-stream) as an imported leaderboard row (operator)" })
  async import(@Req() req: Request, @Query('publisherKey') publisherKey?: string) {
    const key = verifierKeyParam(publisherKey, 'publisherKey', "the publisher's verifier key text", 'API_BAD_PUBLISHER_KEY');
    requireOctetStream(req, 'the bundle file');
    const limit = bundleMaxBytes(this.config.env);
    const dir = importsDir(this.config.home);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const upload = join(dir, `.upload-${process.pid}-${randomBytes(6).toString('hex')}.tmp`);
    try {
      await receiveBody(req, upload, limit, 'the bundle');
      const r = await this.commands.execute(
        new ImportBundleCommand(upload, 'the request body', key, (path) =>
          verifyBundle(createReadStream(path), { trustedKeys: [key], claims: runClaimRules() }),
        ),
      );
      return { imported: r.added, row: r.row };
    } finally {
      rmSync(upload, { force: true });
    }
  }
}

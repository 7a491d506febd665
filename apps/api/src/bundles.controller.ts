/**
 * Importing a result bundle over HTTP (operator): `POST /bundles?publisherKey=<verifier key text>` with the bundle file
 * as the body (`content-type: application/octet-stream`, at most ASSAY_API_BUNDLE_MAX_BYTES, default 256 MiB). The
 * same use case as `assay bundle import` (@assay/projections importBundle): verified against the publisher's key,
 * refused and not kept when it does not verify, then an imported leaderboard row.
 */
import { createReadStream, createWriteStream, mkdirSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Transform } from 'node:stream';
import { Controller, HttpCode, Inject, Post, Query, Req } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiQuery, ApiTags } from '@nestjs/swagger';
import type { Request } from 'express';
import { AssayError } from '@assay/core';
import { parseVerifierKey } from '@assay/ledger';
import { importBundle, ReadModelsProvider, SqliteImportStore, importsDbPath, importsDir } from '@assay/projections';
import { verifyBundle } from '@assay/bundles';
import { runClaimRules } from '@assay/run';
import { Roles } from './access';
import { API_CONFIG, type ApiConfig } from './app.tokens';

export const BUNDLE_MAX_BYTES_DEFAULT = 256 * 1024 * 1024;

function maxBytes(env: NodeJS.ProcessEnv): number {
  const raw = env.ASSAY_API_BUNDLE_MAX_BYTES;
  if (raw === undefined || raw === '') return BUNDLE_MAX_BYTES_DEFAULT;
  const n = /^[0-9]{1,12}$/.test(raw) ? Number(raw) : NaN;
  if (!(n >= 1024))
    throw new AssayError('API_BAD_BUNDLE_LIMIT', 'invalid_input', `ASSAY_API_BUNDLE_MAX_BYTES must be an integer of at least 1024, got ${JSON.stringify(raw)}`);
  return n;
}

@ApiTags('bundles')
@ApiBearerAuth()
@Controller('bundles')
export class BundlesController {
  constructor(
    @Inject(API_CONFIG) private readonly config: ApiConfig,
    private readonly readModels: ReadModelsProvider,
  ) {}

  @Post()
  @Roles('operator')
  @HttpCode(201)
  @ApiQuery({ name: 'publisherKey', description: "the publisher's root (controller) verifier key text, name+hex+base64" })
  @ApiOperation({ summary: "import someone else's result bundle (the body, application/octet-stream) as an imported leaderboard row (operator)" })
  async import(@Req() req: Request, @Query('publisherKey') publisherKey?: string) {
    if (typeof publisherKey !== 'string' || publisherKey.length === 0 || publisherKey.length > 1024)
      throw new AssayError('API_BAD_PUBLISHER_KEY', 'invalid_input', "publisherKey (query) must be the publisher's verifier key text (name+hex+base64)", {
        details: { parameter: 'publisherKey' },
      });
    let key: string;
    try {
      key = parseVerifierKey(publisherKey.trim()).text;
    } catch (e) {
      throw new AssayError('API_BAD_PUBLISHER_KEY', 'invalid_input', `publisherKey is not a verifier key: ${(e as Error).message}`, {
        details: { parameter: 'publisherKey' },
      });
    }
    const type = String(req.headers['content-type'] ?? '')
      .split(';')[0]!
      .trim()
      .toLowerCase();
    if (type !== 'application/octet-stream')
      throw new AssayError(
        'API_UNSUPPORTED_MEDIA_TYPE',
        'invalid_input',
        `send the bundle file as the body with content-type application/octet-stream (got ${JSON.stringify(type || 'none')})`,
      );
    const limit = maxBytes(this.config.env);
    const dir = importsDir(this.config.home);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const upload = join(dir, `.upload-${process.pid}-${randomBytes(6).toString('hex')}.tmp`);
    try {
      let seen = 0;
      const cap = new Transform({
        transform(chunk: Buffer, _enc, done) {
          seen += chunk.length;
          if (seen > limit)
            done(
              new AssayError('API_BODY_TOO_LARGE', 'invalid_input', `the bundle is over the limit of ${limit} bytes (ASSAY_API_BUNDLE_MAX_BYTES)`, {
                details: { limitBytes: limit },
              }),
            );
          else done(null, chunk);
        },
      });
      await pipeline(req, cap, createWriteStream(upload, { mode: 0o600 }));
      const store = SqliteImportStore.open(importsDbPath(this.config.home));
      try {
        const r = await importBundle({
          dir,
          file: upload,
          label: 'the request body',
          publisherKey: key,
          store,
          now: () => new Date(),
          verify: (path) => verifyBundle(createReadStream(path), { trustedKeys: [key], claims: runClaimRules() }),
        });
        return { imported: r.added, row: r.row };
      } finally {
        store.close();
        this.readModels.importsChanged();
      }
    } finally {
      rmSync(upload, { force: true });
    }
  }
}

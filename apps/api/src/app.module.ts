import { Controller, Get, Module, Redirect, type DynamicModule } from '@nestjs/common';
import { APP_GUARD, Reflector } from '@nestjs/core';
import { ApiExcludeController } from '@nestjs/swagger';
import { TerminusModule } from '@nestjs/terminus';
import { ThrottlerModule } from '@nestjs/throttler';
import { ApiThrottlerGuard, SlidingWindowRateLimitStorage } from './rate-limit-storage';
import { ApiTokensProvider, LedgerModule } from '@assay/ledger';
import { ProjectionsModule } from '@assay/projections';
import { SnapshotsModule } from '@assay/snapshots';
import { AccessGuard, Open } from './access';
import { API_CONFIG, ASSAY_HOME_TOKEN, type ApiConfig } from './app.tokens';

export type { ApiConfig };
import { HealthController, LedgerController } from './ledger.controller';
import { ApiMetrics, MetricsController } from './metrics';
import { ReadinessController } from './readiness.controller';
import { ResultsController } from './results.controller';
import { TokensController } from './tokens.controller';
import { RunsController } from './runs.controller';
import { BundlesController, RunBundleController } from './bundles.controller';
import { RejudgesController } from './rejudges.controller';

@ApiExcludeController()
@Controller()
class RootController {
  @Get()
  @Open()
  @Redirect('/ui/index.html', 302)
  root() {}

  /** The pages' relative links need the slash. */
  @Get('ui')
  @Open()
  @Redirect('/ui/', 302)
  ui() {}
}

@Module({})
export class AppModule {
  static forConfig(config: ApiConfig): DynamicModule {
    const ledger = LedgerModule.forHome(config.home, { ...(config.clock ? { clock: config.clock } : {}), ...(config.ids ? { ids: config.ids } : {}) });
    return {
      module: AppModule,
      imports: [
        ledger,
        ProjectionsModule.forLedger(ledger),
        // The home's snapshot store (no sink: an exported bundle's CARs record nothing), for POST /runs/:id/bundle.
        SnapshotsModule.forHome(config.home, config.clock ? { clock: config.clock } : {}),
        TerminusModule,
        ThrottlerModule.forRoot({
          throttlers: [{ name: 'default', ttl: 60_000, limit: config.rateLimitPerMinute }],
          errorMessage: 'too many requests from this address',
          // O(1) per request whatever the limit (the library's own storage scans every hit of the window).
          storage: new SlidingWindowRateLimitStorage(),
        }),
      ],
      controllers: [
        LedgerController,
        HealthController,
        ReadinessController,
        ResultsController,
        RunsController,
        BundlesController,
        RejudgesController,
        RunBundleController,
        TokensController,
        MetricsController,
        RootController,
      ],
      providers: [
        { provide: ASSAY_HOME_TOKEN, useValue: config.home },
        { provide: API_CONFIG, useValue: config },
        ApiMetrics,
        // Rate limits before authentication: a flood of wrong tokens is throttled too.
        { provide: APP_GUARD, useClass: ApiThrottlerGuard },
        {
          provide: APP_GUARD,
          useFactory: (r: Reflector, tokens: ApiTokensProvider) => new AccessGuard(r, tokens, config.reads, config.env),
          inject: [Reflector, ApiTokensProvider],
        },
      ],
    };
  }
}

import { Module, type DynamicModule } from '@nestjs/common';
import { CqrsModule } from '@nestjs/cqrs';
import { CLOCK, ID_GENERATOR, randomIds, systemClock, type Clock, type IdGenerator } from '@assay/core';
import { ASSAY_HOME, LEDGER_HANDLERS, LedgerHomeProvider } from './ledger.handlers';
import { API_TOKEN_HANDLERS, ApiTokensProvider } from './api-tokens.handlers';

/**
 * The ledger as a NestJS module: an adapter around LedgerHome for the CLI and the API. It binds the Clock and the
 * IdGenerator (CLOCK, ID_GENERATOR; the system's by default) and exports them, so the handlers and controllers of the
 * application stamp time and ids from the same providers. The HTTP API's role tokens (ApiTokensProvider and their
 * commands) live here too: the same home, the same clock.
 */
@Module({})
export class LedgerModule {
  static forHome(home: string, o: { clock?: Clock; ids?: IdGenerator } = {}): DynamicModule {
    return {
      module: LedgerModule,
      imports: [CqrsModule],
      providers: [
        { provide: ASSAY_HOME, useValue: home },
        { provide: CLOCK, useValue: o.clock ?? systemClock },
        { provide: ID_GENERATOR, useValue: o.ids ?? randomIds },
        LedgerHomeProvider,
        ApiTokensProvider,
        ...LEDGER_HANDLERS,
        ...API_TOKEN_HANDLERS,
      ],
      exports: [LedgerHomeProvider, ApiTokensProvider, CqrsModule, CLOCK, ID_GENERATOR],
    };
  }
}

import { Module, type DynamicModule } from '@nestjs/common';
import { CqrsModule } from '@nestjs/cqrs';
import { ASSAY_HOME, LEDGER_HANDLERS, LedgerHomeProvider } from './ledger.handlers';

/** The ledger as a NestJS module: an adapter around LedgerHome for the CLI and the API. */
@Module({})
export class LedgerModule {
  static forHome(home: string): DynamicModule {
    return {
      module: LedgerModule,
      imports: [CqrsModule],
      providers: [{ provide: ASSAY_HOME, useValue: home }, LedgerHomeProvider, ...LEDGER_HANDLERS],
      exports: [LedgerHomeProvider, CqrsModule],
    };
  }
}

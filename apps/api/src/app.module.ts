import { Module, type DynamicModule } from '@nestjs/common';
import { LedgerModule } from '@assay/ledger';
import { HealthController, LedgerController } from './ledger.controller';

@Module({})
export class AppModule {
  static forHome(home: string): DynamicModule {
    return { module: AppModule, imports: [LedgerModule.forHome(home)], controllers: [LedgerController, HealthController] };
  }
}

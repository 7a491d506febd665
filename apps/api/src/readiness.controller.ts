/**
 * Liveness and readiness (@nestjs/terminus): `GET /health/live` answers while the process serves; `GET /health/ready`
 * when the ledger opens and its read models catch up (503 with each check's reason otherwise).
 */
import { Controller, Get } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import { HealthCheck, HealthCheckService, HealthIndicatorService } from '@nestjs/terminus';
import { LedgerHomeProvider } from '@assay/ledger';
import { ReadModelsProvider } from '@assay/projections';
import { Open } from './access';

@ApiTags('health')
@Controller('health')
export class ReadinessController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly indicators: HealthIndicatorService,
    private readonly ledger: LedgerHomeProvider,
    private readonly readModels: ReadModelsProvider,
  ) {}

  @Get('live')
  @Open()
  @HealthCheck()
  @ApiOperation({ summary: 'liveness: the process answers' })
  live() {
    return this.health.check([]);
  }

  @Get('ready')
  @Open()
  @HealthCheck()
  @ApiOperation({ summary: 'readiness: the ledger opens and the read models catch up with its latest signed checkpoint' })
  ready() {
    return this.health.check([
      async () => {
        const i = this.indicators.check('ledger');
        try {
          return i.up({ events: (await (await this.ledger.reader()).head()).events });
        } catch (e) {
          return i.down({ reason: (e as Error).message });
        }
      },
      async () => {
        const i = this.indicators.check('readModels');
        try {
          const store = await this.readModels.fresh();
          return i.up({ position: store.checkpoint().position });
        } catch (e) {
          return i.down({ reason: (e as Error).message });
        }
      },
    ]);
  }
}

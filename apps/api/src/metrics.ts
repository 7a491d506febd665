/**
 * Prometheus metrics (prom-client), served at GET /metrics in the text exposition format (docs/operations.md,
 * "Metrics"). A registry of the API's own: counters and histograms the API updates as it serves, and gauges read
 * from the ledger and the read models at each scrape.
 */
import { Controller, Get, Header, Injectable } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { LedgerHomeProvider } from '@assay/ledger';
import { ReadModelsProvider, type ReadModelStore } from '@assay/projections';
import { PublicRead } from './access';

@Injectable()
export class ApiMetrics {
  readonly registry = new Registry();
  readonly requests = new Counter({
    name: 'assay_http_requests_total',
    help: 'HTTP requests answered, by method, route and status',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [this.registry],
  });
  readonly requestSeconds = new Histogram({
    name: 'assay_http_request_duration_seconds',
    help: 'Time to answer an HTTP request, by method and route',
    labelNames: ['method', 'route'] as const,
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30],
    registers: [this.registry],
  });
  readonly eventsAppended = new Counter({ name: 'assay_events_appended_total', help: 'Events appended through this API', registers: [this.registry] });
  readonly appendLatency = new Histogram({
    name: 'assay_append_duration_seconds',
    help: 'Time to append (sign, store and index) one POST /ledger/events',
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5],
    registers: [this.registry],
  });
  readonly ledgerEvents = new Gauge({ name: 'assay_ledger_events', help: 'Events in the ledger', registers: [this.registry] });
  readonly checkpointSize = new Gauge({
    name: 'assay_ledger_checkpoint_tree_size',
    help: 'Tree size of the latest signed checkpoint',
    registers: [this.registry],
  });
  readonly projectionLag = new Gauge({
    name: 'assay_projection_lag_events',
    help: 'Signed events the read models have not projected yet (latest checkpoint tree size minus the projected position), as of the last catch-up',
    registers: [this.registry],
  });
  readonly rounds = new Gauge({
    name: 'assay_rounds',
    help: 'Rounds in the read models by Judge outcome (scored, invalid, failed, violating, refunded), over every run',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });

  readonly judges = new Gauge({
    name: 'assay_judges',
    help: 'Judges of rounds in the read models, by Judge status (completed, verifier_error, ...), over every run',
    labelNames: ['status'] as const,
    registers: [this.registry],
  });
  readonly judgeSeconds = new Gauge({
    name: 'assay_judge_seconds_sum',
    help: 'Total time those Judges ran, by Judge status (divide by assay_judges for the mean)',
    labelNames: ['status'] as const,
    registers: [this.registry],
  });
  readonly runs = new Gauge({
    name: 'assay_runs',
    help: 'Runs in the read models by status; running is the work in progress',
    labelNames: ['status'] as const,
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: 'assay_process_' });
  }
}

/** What a scrape counts over the read models. */
interface ReadModelFigures {
  totals: { scored: number; invalid: number; failed: number; violating: number; refunded: number };
  judges: Map<string, { n: number; ms: number }>;
  runs: Map<string, number>;
}

@ApiTags('metrics')
@Controller()
export class MetricsController {
  constructor(
    private readonly metrics: ApiMetrics,
    private readonly ledger: LedgerHomeProvider,
    private readonly readModels: ReadModelsProvider,
  ) {}

  /** The read-model figures of the last scrape and the read-model position they were counted at. */
  private figures: (ReadModelFigures & { position: number }) | null = null;

  /**
   * Rounds, Judges and runs counted over the read models: one pass over every run's row and slot (proportional to the
   * rounds in the read models), done again only when the read models have moved (a new signed checkpoint). Scrapes
   * between two checkpoints reuse the last count.
   */
  private readModelFigures(store: ReadModelStore): ReadModelFigures {
    const position = store.checkpoint().position;
    if (this.figures?.position === position) return this.figures;
    const totals = { scored: 0, invalid: 0, failed: 0, violating: 0, refunded: 0 };
    const judges = new Map<string, { n: number; ms: number }>();
    const runs = new Map<string, number>();
    for (const t of store.tasks())
      for (const r of store.rowsOfTask(t.task)) {
        runs.set(r.status, (runs.get(r.status) ?? 0) + 1);
        for (const round of store.slot(r.run)?.state.rounds ?? []) {
          if (!round.judge) continue;
          const j = judges.get(round.judge.status) ?? { n: 0, ms: 0 };
          j.n += 1;
          j.ms += round.judge.durationMs;
          judges.set(round.judge.status, j);
        }
        totals.invalid += r.rounds.invalid;
        totals.failed += r.rounds.failed;
        totals.violating += r.rounds.violating;
        totals.refunded += r.rounds.refunded;
        totals.scored += r.rounds.total - r.rounds.invalid - r.rounds.failed - r.rounds.violating - r.rounds.refunded;
      }
    this.figures = { position, totals, judges, runs };
    return this.figures;
  }

  @Get('metrics')
  @PublicRead()
  @Header('content-type', 'text/plain; version=0.0.4; charset=utf-8')
  @ApiOperation({ summary: 'Prometheus metrics (text exposition format)' })
  async scrape(): Promise<string> {
    const m = this.metrics;
    const { events, checkpoint: cp } = await (await this.ledger.reader()).head();
    m.ledgerEvents.set(events);
    m.checkpointSize.set(cp?.treeSize ?? 0);
    const store = await this.readModels.fresh();
    m.projectionLag.set(Math.max(0, (cp?.treeSize ?? 0) - store.checkpoint().position));
    const { totals, judges, runs } = this.readModelFigures(store);
    for (const [outcome, n] of Object.entries(totals)) m.rounds.set({ outcome }, n);
    m.judges.reset();
    m.judgeSeconds.reset();
    for (const [status, j] of judges) {
      m.judges.set({ status }, j.n);
      m.judgeSeconds.set({ status }, j.ms / 1000);
    }
    m.runs.reset();
    for (const [status, n] of runs) m.runs.set({ status }, n);
    return m.registry.metrics();
  }
}

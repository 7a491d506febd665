/**
 * The inbound port of a run's submission endpoint: what the HTTP endpoint (adapters/http-submit-endpoint.adapter.ts)
 * calls, implemented by the SubmissionService (application/submission-service.ts).
 */
import type { RoundView, RoundViewStatus } from '../domain/feedback';

export interface SubmitRequest {
  /** The Authorization header: undefined, its value, or every value when it was repeated. */
  readonly authorization: string | readonly string[] | undefined;
  readonly hasBody: boolean;
  readonly hasQuery: boolean;
}

export interface SubmitReply {
  readonly httpStatus: number;
  /** The footer (docs/run.md, "Footer"). */
  readonly text: string;
  readonly round: number | null;
  readonly status: RoundViewStatus | 'rejected';
  readonly code: string | null;
  readonly retryAfterSec: number | null;
  readonly view: RoundView | null;
}

export interface HistoryRequest {
  readonly authorization: string | readonly string[] | undefined;
  readonly json?: boolean;
}

export interface HistoryReply {
  readonly httpStatus: number;
  readonly contentType: 'text/plain; charset=utf-8' | 'application/json';
  readonly body: string;
}

/** What the HTTP endpoint needs. */
export interface SubmissionGateway {
  submit(req: SubmitRequest): Promise<SubmitReply>;
  history(req: HistoryRequest): Promise<HistoryReply>;
}

/**
 * Commands and queries of the ledger, dispatched alike by the CLI and the HTTP API through @nestjs/cqrs.
 * They carry plain data; the handlers (ledger.handlers.ts) do the work through LedgerHome.
 */
import { Command, Query } from '@nestjs/cqrs';
import type { AppendResult, ExpectedRevision } from '../ports/event-store.port';
import type { NewEvent, SignedCheckpoint, InclusionProofResult, ConsistencyProofResult } from '../application/ledger';
import type { VerificationReport } from '../application/verify/ledger-verifier';
import type { InitResult, ReadEvent } from '../home/ledger-home';
import type { Progress } from '@assay/core';
import type { ClaimRules } from '../domain/claims';
import type { Role } from '../domain/roles';
import type { ApiRole, ApiTokenInfo, CreatedApiToken } from '../home/api-tokens';
import type { CreatedOperatorToken } from '../home/operator-token';

export class InitLedgerCommand extends Command<InitResult> {
  constructor(public readonly origin?: string) {
    super();
  }
}

/**
 * The generic append (`assay ledger append`, `POST /ledger/events`): types the catalogue reserves for their own
 * writer are refused (LEDGER_TYPE_RESERVED; see Ledger.appendGeneric).
 */
export class AppendEventsCommand extends Command<AppendResult> {
  constructor(
    public readonly stream: string,
    public readonly events: NewEvent[],
    public readonly expected: ExpectedRevision = 'any',
  ) {
    super();
  }
}

/**
 * Many generic appends (`assay ledger append --file`), all or none, in one write transaction (Ledger.appendGenericMany).
 * `where` names each append's source (`events.jsonl:12`) in errors.
 */
export class AppendEventsBatchCommand extends Command<AppendResult[]> {
  constructor(
    public readonly items: ReadonlyArray<{ stream: string; events: NewEvent[]; expected?: ExpectedRevision; where?: string }>,
    public readonly onProgress?: (done: number) => void,
  ) {
    super();
  }
}

/** `assay keys register`: KeyRegistered in the key's own stream, which must not exist yet. */
export class RegisterKeyCommand extends Command<AppendResult> {
  constructor(
    public readonly key: { name: string; signer: string; publicKeyText: string },
    public readonly role: Role,
  ) {
    super();
  }
}

/** `assay keys revoke`: KeyRevoked in the key's stream, which must exist. */
export class RevokeKeyCommand extends Command<AppendResult> {
  constructor(
    public readonly signer: string,
    public readonly reason: string,
  ) {
    super();
  }
}

export class SignCheckpointCommand extends Command<SignedCheckpoint> {}

export class VerifyLedgerQuery extends Query<VerificationReport> {
  constructor(
    public readonly options: {
      /** The rules of the claims step (`runClaimRules()` from @assay/run); null skips it. */
      claims: ClaimRules | null;
      externalCheckpoints?: string[];
      trustedRoot?: string;
      workers?: number;
      /** Whether the calling thread checks events too (a server passes false to stay responsive). */
      mainThread?: boolean;
      progress?: Progress;
      /** Verify this database file read-only instead of the ledger under ASSAY_HOME. */
      db?: string;
      origin?: string;
    },
  ) {
    super();
  }
}

/**
 * An inclusion proof against the latest signed checkpoint. Reads only, unless `signIfNeeded` (the CLI's `prove`):
 * then a checkpoint is signed first when none covers the position; otherwise that is LEDGER_NOT_CHECKPOINTED.
 */
export class ProveInclusionQuery extends Query<InclusionProofResult> {
  constructor(
    public readonly position: number,
    public readonly signIfNeeded = false,
  ) {
    super();
  }
}

export class ProveConsistencyQuery extends Query<ConsistencyProofResult> {
  constructor(
    public readonly size1: number,
    public readonly size2?: number,
  ) {
    super();
  }
}

export interface ListedKey {
  keyId: string;
  role: string;
  publicKey: string;
  registeredAt: number;
  revokedAt: number | null;
}

export class ListKeysQuery extends Query<ListedKey[]> {}

export interface ReadEventsOptions {
  /** One stream, from `from` (a revision); otherwise the whole log from `from` (a position). */
  stream?: string;
  from?: number;
  limit?: number;
  /** With each event's stored envelope bytes (base64). */
  bytes?: boolean;
}

/** Stored events as their signed envelopes (parsed from the exact stored bytes), in order. */
export class ReadEventsQuery extends Query<ReadEvent[]> {
  constructor(public readonly options: ReadEventsOptions = {}) {
    super();
  }
}

/** A role token for the HTTP API (`assay tokens create`, `POST /tokens`): the token is in the result only. */
export class CreateApiTokenCommand extends Command<CreatedApiToken> {
  constructor(
    public readonly role: ApiRole,
    public readonly name: string,
  ) {
    super();
  }
}

/** Revokes a role token by id (`assay tokens revoke`, `DELETE /tokens/:id`); revoking twice keeps the first time. */
export class RevokeApiTokenCommand extends Command<ApiTokenInfo> {
  constructor(public readonly id: string) {
    super();
  }
}

/** The role tokens (`assay tokens list`, `GET /tokens`): ids, names, roles, times, never a token or its hash. */
export class ListApiTokensQuery extends Query<{ tokens: ApiTokenInfo[]; path: string }> {}

/**
 * The older single operator token (role admin; `assay api token create`): a random token whose SHA-256 is kept in
 * `<home>/api/operator-token.json`; `rotate` replaces an existing one. The token is in the result only.
 */
export class CreateOperatorTokenCommand extends Command<CreatedOperatorToken> {
  constructor(public readonly rotate = false) {
    super();
  }
}

/** Removes the operator token (`assay api token delete`); `deleted` is false when there was none. */
export class DeleteOperatorTokenCommand extends Command<{ deleted: boolean; path: string }> {}

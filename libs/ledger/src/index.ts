// Public entry of @assay/ledger. Other libs and apps import only from here.

// domain: formats and rules
export * from './domain/json';
export { canonicalJson, canonicalBytes } from './domain/jcs';
export * from './domain/envelope';
export * from './domain/roles';
export {
  CATALOGUE,
  CLAIM_EVENT_TYPES,
  EVENT_TYPES,
  GENERIC_EVENT_TYPES,
  JUDGE_STATUSES,
  RUN_STATUSES,
  BUDGETS,
  eventDataProblem,
  genericAppendProblem,
  genericStreamProblem,
  RESERVED_STREAM_CATEGORIES,
  type EventTypeSpec,
} from './domain/catalogue';
export type { FieldSpec, ObjectSchema } from './domain/schema';
export { KeyRegistry, type KeyRecord } from './domain/key-registry';
export * from './domain/merkle';
export { RootAccumulator } from './domain/root-accumulator';
export * from './domain/note';
export * from './domain/checkpoint';
export type { ClaimEvent, ClaimProblem, ClaimChecker, ClaimRules } from './domain/claims';
export * from './domain/cosignature';

// crypto
export * from './crypto/ed25519';
export * from './crypto/keys';

// ports and adapters
export * from './ports/event-store.port';
export * from './ports/event-store.errors';
export * from './ports/merkle-node-store.port';
export * from './ports/checkpoint-store.port';
export * from './ports/ledger-lock.port';
export { MemoryEventStore } from './adapters/memory/memory-event-store.adapter';
export { MemoryLedgerLock } from './adapters/memory/memory-ledger-lock.adapter';
export { MemoryCheckpointStore } from './adapters/memory/memory-checkpoint-store.adapter';
export { MemoryMerkleNodeStore } from './adapters/memory/memory-merkle-node-store.adapter';
export { SqliteLedgerDatabase } from './adapters/sqlite/sqlite-ledger-database';
export { bestKernels, nativeKernels, nativeKernelsStatus } from './adapters/native-kernels';

// application
export * from './domain/signing-key';
export * from './application/ledger';
export * from './application/proof-format';
export {
  firstBadSignature,
  SignatureChecks,
  packSignatures,
  badSignaturesIn,
  type SignedItem,
  type SignatureBatch,
  type SignatureCheckOptions,
} from './application/verify/signature-batch';
export { jsKernels, type DigestAll, type VerifyKernels, type SubtreeRoot } from './domain/verify-kernels';
export { verifyLedger, STEPS as VERIFY_STEPS, type VerificationReport, type VerifyFailure, type VerifyOptions } from './application/verify/ledger-verifier';
export * from './home/ledger-home';
export * from './home/operator-token';
export * from './home/api-tokens';

// NestJS adapter
export * from './nest/ledger.commands';
export { LedgerModule } from './nest/ledger.module';
export { LedgerHomeProvider, ASSAY_HOME } from './nest/ledger.handlers';
export { ApiTokensProvider } from './nest/api-tokens.handlers';

// witnessed checkpoints
export * from './domain/witness';
export * from './domain/equivocation';
export * from './domain/witness-policy';
export * from './application/witness';

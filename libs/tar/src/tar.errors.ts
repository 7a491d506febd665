import { errorFactory, type ErrorTable } from '@assay/core';

/**
 * The tar codec's own errors, for callers that do not name their own (the readers take an `invalid` factory, so
 * snapshot ingestion reports SNAPSHOT_TAR_INVALID and the container runtime CONTAINER_ARCHIVE_INVALID).
 */
export const TAR_ERROR_KINDS = {
  /** A malformed archive: bad checksum, a field that is not a number, truncated, a metadata entry over its bound. */
  TAR_INVALID: 'integrity',
  /** An entry the writer cannot write (an empty name, a NUL in it, a negative size). */
  TAR_BAD_ENTRY: 'invalid_input',
} as const satisfies ErrorTable;

export const tarError = errorFactory(TAR_ERROR_KINDS);

import { errorFactory, type ErrorTable } from '@assay/core';

/** Every error the container adapters raise: a stable code and the kind that decides exit code and HTTP status. */
export const CONTAINER_ERROR_KINDS = {
  /** The Docker daemon does not answer (not installed, not running, no permission on its socket). */
  CONTAINER_UNAVAILABLE: 'unavailable',
  /** The daemon refused or failed an operation (create, start, mount, ...). */
  CONTAINER_OPERATION_FAILED: 'unavailable',
  CONTAINER_NOT_FOUND: 'not_found',
  CONTAINER_IMAGE_NOT_FOUND: 'not_found',
  /** A Dockerfile step failed; the message ends with the last lines of the build log. */
  CONTAINER_BUILD_FAILED: 'invalid_input',
  CONTAINER_BUILD_TIMEOUT: 'refused',
  /** An archive from the daemon (or the fake) is malformed. */
  CONTAINER_ARCHIVE_INVALID: 'integrity',
  CONTAINER_ARCHIVE_TOO_LARGE: 'refused',
  /** A container spec Assay itself would never send (a GPU request with a junk device id or another driver). */
  CONTAINER_INVALID_SPEC: 'invalid_input',
  /**
   * A container asked for a size limit on its writable layer (`rootfsSizeBytes`) from a daemon whose storage driver
   * cannot enforce one (Docker's overlay2 needs XFS with project quotas).
   */
  CONTAINER_STORAGE_QUOTA_UNSUPPORTED: 'refused',
} as const satisfies ErrorTable;

export type ContainerErrorCode = keyof typeof CONTAINER_ERROR_KINDS;

export const containerError = errorFactory(CONTAINER_ERROR_KINDS);

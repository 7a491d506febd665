/**
 * Tar for what Assay moves in and out of containers: build contexts, the hidden tests streamed into a Judge, and
 * archives the daemon hands back. The codec is @assay/tar's (the one Assay has); reading here reports the container
 * runtime's own errors: CONTAINER_ARCHIVE_INVALID for a malformed archive, CONTAINER_ARCHIVE_TOO_LARGE past the
 * caller's bound.
 */
import { readTarEntries, type ReadTarOptions, type TarRecord } from '@assay/tar';
import { containerError } from '../containers.errors';

export { tarHeader, tarPadding, packTarSync, TAR_END, TAR_BLOCK, type TarEntryInput, type TarHeader, type TarEntryType, type TarRecord } from '@assay/tar';

export type { ReadTarOptions };

/** Reads an archive entry by entry (readTarEntries) with the container runtime's errors. */
export function readTar(source: AsyncIterable<Uint8Array>, o: Omit<ReadTarOptions, 'invalid' | 'tooLarge'>): AsyncGenerator<TarRecord> {
  return readTarEntries(source, {
    ...o,
    invalid: (message, details) => containerError('CONTAINER_ARCHIVE_INVALID', message, details),
    tooLarge: (limit) => containerError('CONTAINER_ARCHIVE_TOO_LARGE', `the archive is larger than ${limit} bytes`, { limit }),
  });
}

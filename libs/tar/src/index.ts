// Public entry of @assay/tar: Assay's one tar codec. A strict streaming reader (TarReader: snapshot ingestion), the
// entry-at-a-time reader built on it (readTarEntries: the container runtime, the Judge) and a deterministic writer.
export { TarReader, TAR_BLOCK, MAX_TAR_META_BYTES, type TarEntryHeader, type TarKind, type TarInvalid, type TarReaderOptions } from './tar-reader';
export { readTarEntries, type ReadTarOptions, type TarHeader, type TarEntryType, type TarRecord } from './read-tar';
export { tarHeader, tarPadding, packTarSync, TAR_END, type TarEntryInput } from './tar-writer';
export { TAR_ERROR_KINDS, tarError } from './tar.errors';

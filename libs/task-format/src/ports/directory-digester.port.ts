/**
 * Content-addressed digest of a directory tree, computed by the snapshot lib (CIDv1 of the directory's Merkle DAG).
 * Task digests go through this port so that a task and a workspace snapshot are addressed the same way.
 * Implementations must not follow symlinks and must refuse special files.
 */
export interface DirectoryDigester {
  digest(dir: string): Promise<string>;
}

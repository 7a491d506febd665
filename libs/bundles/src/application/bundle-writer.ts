/**
 * Writing a bundle file (docs/bundle-format.md, "The file"), shared by a run's bundle and a re-judge report's: the
 * canonical ustar entries in order, the content digest over them, the statement signed as a DSSE envelope last.
 * Written to `FILE.partial` and renamed into place when complete, so a reader never sees half a bundle.
 */
import { createHash } from 'node:crypto';
import { closeSync, fsyncSync, openSync, readSync, renameSync, rmSync, statSync, writeSync } from 'node:fs';
import { canonicalJson, ed25519NoteVerifier, openCheckpoint, type JsonObject, type Ledger, type SigningKey } from '@assay/ledger';
import { TAR_END, tarHeader, tarPadding } from '@assay/containers';
import { contentDigest, contentLine, contentLineOf, DSSE_PAYLOAD_TYPE, ENTRY, eventLine, pae, type DsseEnvelope } from '../domain/bundle-format';
import { bundleError } from '../bundles.errors';

export class BundleWriter {
  private readonly partial: string;
  private readonly fd: number;
  private readonly lines: string[] = [];
  bytes = 0;

  constructor(readonly out: string) {
    this.partial = `${out}.partial`;
    this.fd = openSync(this.partial, 'w', 0o644);
  }

  private put(b: Buffer | string): void {
    const buf = typeof b === 'string' ? Buffer.from(b) : b;
    writeSync(this.fd, buf);
    this.bytes += buf.length;
  }

  /** An entry held in memory. */
  entry(name: string, content: Buffer): void {
    this.put(tarHeader({ path: name, type: 'file', mode: 0o644, size: content.length }));
    this.put(content);
    this.put(tarPadding(content.length));
    this.lines.push(contentLine(name, content));
  }

  /** An entry streamed from a file (a snapshot CAR may be larger than memory). */
  fileEntry(name: string, file: string): void {
    const size = statSync(file).size;
    this.put(tarHeader({ path: name, type: 'file', mode: 0o644, size }));
    const hash = createHash('sha256');
    const src = openSync(file, 'r');
    try {
      const buf = Buffer.allocUnsafe(1 << 20);
      for (let at = 0; at < size;) {
        const n = readSync(src, buf, 0, Math.min(buf.length, size - at), at);
        if (n <= 0) throw new Error(`${file} shrank while it was copied into the bundle`);
        hash.update(buf.subarray(0, n));
        this.put(buf.subarray(0, n));
        at += n;
      }
    } finally {
      closeSync(src);
    }
    this.put(tarPadding(size));
    this.lines.push(contentLineOf(name, size, hash.digest('hex')));
  }

  /** The content digest over the entries written so far (the statement's first subject). */
  contentDigest(): string {
    return contentDigest(this.lines);
  }

  /** Signs the statement (DSSE v1), writes it and the end marker, syncs and renames the file into place. */
  finish(statement: JsonObject, publisher: SigningKey): void {
    const payload = Buffer.from(canonicalJson(statement));
    const dsse: DsseEnvelope = {
      payloadType: DSSE_PAYLOAD_TYPE,
      payload: payload.toString('base64'),
      signatures: [{ keyid: publisher.signer, sig: Buffer.from(publisher.sign(pae(DSSE_PAYLOAD_TYPE, payload))).toString('base64') }],
    };
    const content = Buffer.from(canonicalJson(dsse as unknown as JsonObject));
    this.put(tarHeader({ path: ENTRY.statement, type: 'file', mode: 0o644, size: content.length }));
    this.put(content);
    this.put(tarPadding(content.length));
    this.put(TAR_END);
    fsyncSync(this.fd);
    closeSync(this.fd);
    renameSync(this.partial, this.out);
  }

  /** Closes and removes the partial file (after a failure). */
  abort(): void {
    try {
      closeSync(this.fd);
    } catch {
      /* already closed */
    }
    rmSync(this.partial, { force: true });
  }
}

/** events.jsonl: each chosen event's stored bytes with its inclusion proof against the checkpoint's tree. */
export async function provedEvents(
  ledger: Ledger,
  cp: { treeSize: number; rootHash: Uint8Array },
  chosen: ReadonlyArray<{ position: number; bytes: Uint8Array }>,
  progress?: (done: number, total: number) => void,
): Promise<Buffer> {
  const proofs = await ledger.inclusionProofsAt(cp.treeSize, cp.rootHash, chosen);
  const lines: Buffer[] = [];
  chosen.forEach((e, i) => {
    lines.push(
      Buffer.from(
        eventLine(
          e.bytes,
          (proofs[i] as Uint8Array[]).map((h) => Buffer.from(h).toString('base64')),
        ),
      ),
    );
    if ((i + 1) % 1000 === 0 || i + 1 === chosen.length) progress?.(i + 1, chosen.length);
  });
  return Buffer.concat(lines);
}

/** The note, opened with this ledger's controller key: a checkpoint of this log that the key signed, or a refusal. */
export function openOwnCheckpoint(ledger: Ledger, note: string): { origin: string; treeSize: number; rootHash: Uint8Array } {
  const key = ledger.key('controller');
  if (!key) throw bundleError('BUNDLE_CHECKPOINT_INVALID', "exporting a bundle needs the ledger's controller key, to check the checkpoint it carries");
  try {
    return openCheckpoint(note, [ed25519NoteVerifier(key.name, key.publicKey)]).checkpoint;
  } catch (e) {
    throw bundleError('BUNDLE_CHECKPOINT_INVALID', `the checkpoint to export against: ${(e as Error).message}`);
  }
}
